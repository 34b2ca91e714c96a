"""Writing the result: checked up front, written under a temporary name, renamed at the end.

A run that fails, or is interrupted, leaves no partial final file: the result exists under
its final name (``result.parquet``, ``result.csv`` or ``result.jsonl`` in the output
directory) only once it is complete (``os.replace`` is atomic on one file system).

With ``partition_by`` columns (``--partition-by``) the result is a Parquet dataset instead,
the directory ``result/`` with one Hive-style ``column=value/`` subdirectory per value
(nested in the order given), written by ``pyarrow.dataset.write_dataset`` into a temporary
directory that is renamed at the end. A ``result/`` left by an earlier run is first
renamed aside and deleted after the new one is in place, so the name never holds a partial
result (it is briefly absent while the two renames run).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import shutil
import uuid
from typing import IO, TYPE_CHECKING, Literal

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.csv as pa_csv  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from ._errors import PipelineUsageError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = [
    "OUTPUT_FORMATS",
    "PARTITIONED_RESULT",
    "OutputFormat",
    "ResultWriter",
    "check_output_dir",
    "created_dirs",
    "remove_if_empty",
    "result_path",
]

OutputFormat = Literal["parquet", "csv", "jsonl"]
OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("parquet", "csv", "jsonl")


PARTITIONED_RESULT = "result"
"""The name of a partitioned result's directory in the output directory."""


def result_path(directory: Path, fmt: OutputFormat, *, partitioned: bool = False) -> Path:
    """Where the final result of format ``fmt`` goes in ``directory``.

    ``result.<fmt>``, or the directory ``result`` when it is partitioned (``--partition-by``,
    Parquet only).
    """
    return directory / (PARTITIONED_RESULT if partitioned else f"result.{fmt}")


def created_dirs(directory: Path) -> Path | None:
    """Create ``directory`` and its missing parents; the topmost one created, or ``None``.

    Raises:
        OSError: it cannot be created.
    """
    top: Path | None = None
    for candidate in (directory, *directory.parents):
        if candidate.exists():
            break
        top = candidate
    directory.mkdir(parents=True, exist_ok=True)
    return top


def remove_if_empty(top: Path) -> None:
    """Remove ``top`` and its subdirectories if none of them holds a file, else none.

    A run that created them and wrote nothing leaves nothing behind.
    """
    if not top.is_dir() or any(path.is_file() or path.is_symlink() for path in top.rglob("*")):
        return
    for path in sorted(top.rglob("*"), key=lambda path: len(path.parts), reverse=True):
        with contextlib.suppress(OSError):
            path.rmdir()
    with contextlib.suppress(OSError):
        top.rmdir()


def check_output_dir(directory: Path) -> Path | None:
    """Create ``directory`` if needed and prove it is writable.

    Returns:
        The topmost directory this created (``remove_if_empty`` takes it away again
        when the run wrote nothing there), or ``None`` when it existed.

    Raises:
        PipelineUsageError: it cannot be created or written (one line, naming it).
    """
    try:
        top = created_dirs(directory)
        probe = directory / f".write-test-{uuid.uuid4().hex}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise PipelineUsageError(
            f"output directory is not writable: {directory} ({reason})"
        ) from None
    return top


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
        partition_by: columns to partition a Parquet result by (Hive style, in this
            order): the result is then the directory ``result/`` (see the module
            docstring); empty: one file.

    ``write`` may be called any number of times with tables of the same schema; ``commit``
    finishes the file (an empty result is written with the schema of ``empty_schema``; a
    partitioned one is an empty directory); ``abort`` deletes the temporary file or
    directory. Not thread-safe: one writer per sink.

    Raises:
        ValueError: ``partition_by`` with a format other than Parquet.
    """

    def __init__(
        self, directory: Path, fmt: OutputFormat, *, partition_by: Sequence[str] = ()
    ) -> None:
        if partition_by and fmt != "parquet":
            raise ValueError(f"a partitioned result is written as Parquet, not {fmt}")
        self._partition_by = tuple(partition_by)
        self._final = result_path(directory, fmt, partitioned=bool(partition_by))
        kind = "dir" if partition_by else fmt
        self._temporary = directory / f".result.{kind}.{uuid.uuid4().hex}.tmp"
        self._fmt = fmt
        self._parts = 0  # write_dataset calls so far (each names its files apart)
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
        if self._partition_by:
            self._write_partitioned(table)
        elif self._fmt == "parquet":
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

    def _write_partitioned(self, table: pa.Table) -> None:
        """One ``write_dataset`` call: its files are named ``part-<call>-<i>.parquet``.

        No rows, no files (an empty result's table may even lack the partition columns).
        """
        if table.num_rows == 0:
            return
        # Imported here: pyarrow.dataset imports pandas, which the executors' Python
        # workers (they import this package to read splits) must not pay for.
        import pyarrow.dataset as pa_ds  # type: ignore[import-untyped,unused-ignore]  # noqa: PLC0415

        pa_ds.write_dataset(
            table,
            self._temporary,
            format="parquet",
            partitioning=list(self._partition_by),
            partitioning_flavor="hive",
            basename_template=f"part-{self._parts:05d}-{{i}}.parquet",
            existing_data_behavior="overwrite_or_ignore",  # earlier calls' files stay
            # A partition per row at most (pyarrow refuses more than 1,024 by default).
            max_partitions=max(1024, table.num_rows),
        )
        self._parts += 1

    def commit(self, empty_schema: pa.Schema | None = None) -> Path:
        """Close the file and give it its final name; return that name.

        Raises:
            OSError: closing or renaming failed (the temporary file is removed).
        """
        try:
            if self._partition_by:
                self._temporary.mkdir(exist_ok=True)  # an empty result: an empty dataset
                self._replace_directory()
                return self._final
            if self._parquet is None and self._csv is None and self._text is None:
                self.write((empty_schema or pa.schema([])).empty_table())
            self._close()
            os.replace(self._temporary, self._final)
        except BaseException:
            self.abort()
            raise
        return self._final

    def _replace_directory(self) -> None:
        """Rename the temporary dataset to ``result/``, moving an earlier one aside first."""
        old = None
        if self._final.exists() or self._final.is_symlink():
            old = self._final.with_name(f".{self._final.name}.old.{uuid.uuid4().hex}.tmp")
            os.replace(self._final, old)
        try:
            os.replace(self._temporary, self._final)
        except BaseException:
            if old is not None:  # put the earlier result back
                os.replace(old, self._final)
            raise
        if old is not None:
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)

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
        """Drop the temporary file or directory; the final name is left untouched. Idempotent."""
        try:
            self._close()
        finally:
            if self._partition_by:
                shutil.rmtree(self._temporary, ignore_errors=True)
            else:
                self._temporary.unlink(missing_ok=True)
