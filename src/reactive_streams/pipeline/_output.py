"""Writing the result: checked up front, written under a temporary name, renamed at the end.

A run that fails, or is interrupted, leaves no partial final file: the result exists under
its final name (``result.parquet``, ``result.csv`` or ``result.jsonl`` in the output
directory) only once it is complete (``os.replace`` is atomic on one file system).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import uuid
from typing import IO, TYPE_CHECKING, Literal

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.csv as pa_csv  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from ._errors import PipelineUsageError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["OUTPUT_FORMATS", "OutputFormat", "ResultWriter", "check_output_dir", "result_path"]

OutputFormat = Literal["parquet", "csv", "jsonl"]
OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("parquet", "csv", "jsonl")


def result_path(directory: Path, fmt: OutputFormat) -> Path:
    """Where the final result of format ``fmt`` goes in ``directory``."""
    return directory / f"result.{fmt}"


def check_output_dir(directory: Path) -> None:
    """Create ``directory`` if needed and prove it is writable.

    Raises:
        PipelineUsageError: it cannot be created or written (one line, naming it).
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-test-{uuid.uuid4().hex}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise PipelineUsageError(
            f"output directory is not writable: {directory} ({reason})"
        ) from None


def _json_value(value: object) -> object:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


class ResultWriter:
    """Writes one result file incrementally under a temporary name; ``commit`` renames it.

    Args:
        directory: the output directory (already checked).
        fmt: ``"parquet"``, ``"csv"`` or ``"jsonl"``.

    ``write`` may be called any number of times with tables of the same schema; ``commit``
    finishes the file (an empty result is written with the schema of ``empty_schema``);
    ``abort`` deletes the temporary file. Not thread-safe: one writer per sink.
    """

    def __init__(self, directory: Path, fmt: OutputFormat) -> None:
        self._final = result_path(directory, fmt)
        self._temporary = directory / f".result.{fmt}.{uuid.uuid4().hex}.tmp"
        self._fmt = fmt
        self._parquet: pq.ParquetWriter | None = None
        self._csv: pa_csv.CSVWriter | None = None
        self._text: IO[str] | None = None
        self._rows = 0

    @property
    def final_path(self) -> Path:
        """The result's final name."""
        return self._final

    @property
    def rows(self) -> int:
        """Rows written so far."""
        return self._rows

    def write(self, table: pa.Table) -> None:
        """Append ``table``'s rows.

        Raises:
            OSError: the file cannot be written.
            pyarrow.ArrowException: ``table``'s schema differs from the first table's.
        """
        if self._fmt == "parquet":
            if self._parquet is None:
                self._parquet = pq.ParquetWriter(self._temporary, table.schema)
            self._parquet.write_table(table)
        elif self._fmt == "csv":
            if self._csv is None:
                self._csv = pa_csv.CSVWriter(self._temporary, table.schema)
            self._csv.write_table(table)
        else:
            if self._text is None:
                self._text = self._temporary.open("w", encoding="utf-8")
            names = table.schema.names
            for row in table.to_pylist():
                record = {name: _json_value(row[name]) for name in names}
                self._text.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._rows += table.num_rows

    def commit(self, empty_schema: pa.Schema | None = None) -> Path:
        """Close the file and give it its final name; return that name.

        Raises:
            OSError: closing or renaming failed (the temporary file is removed).
        """
        try:
            if self._parquet is None and self._csv is None and self._text is None:
                self.write((empty_schema or pa.schema([])).empty_table())
            self._close()
            os.replace(self._temporary, self._final)
        except BaseException:
            self.abort()
            raise
        return self._final

    def _close(self) -> None:
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None
        if self._csv is not None:
            self._csv.close()
            self._csv = None
        if self._text is not None:
            self._text.close()
            self._text = None

    def abort(self) -> None:
        """Drop the temporary file; the final name is left untouched. Idempotent."""
        try:
            self._close()
        finally:
            self._temporary.unlink(missing_ok=True)
