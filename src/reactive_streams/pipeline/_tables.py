"""Reference tables (``--table NAME=PATH``): static tables the query can join ``events`` with.

A stream joins a static DataFrame natively (a stream-static join: each micro-batch joins
its rows with the whole table), so reference data such as the airlines of the flights, or
a dimension table of facts, is registered as a temporary view beside ``events``::

    --table airlines=airlines.csv
    SELECT a.name, count(*) AS flights FROM events JOIN airlines a USING (carrier) GROUP BY a.name

The steps, in the pipeline's order:

1. ``TableSpec.parse``: the option's text, ``NAME=PATH``;
2. ``check_table_names``: each name a plain SQL identifier, not ``events``, given once
   (names compare case-insensitively, as Spark's do);
3. ``plan_tables``: before Spark starts, each path exists and holds readable files of one
   format (the same extensions and the same cheap header check as the input's);
4. ``load_tables``: once Spark runs, each table is read by Spark's own reader (CSV with a
   header and inferred types, JSON Lines, Parquet with its partition columns), strictly
   (a malformed line fails the load), cached and counted, so the load fails here, before
   the query starts, and every micro-batch joins the same snapshot from memory instead of
   reading the files again. ``benchmarks/README.md`` has the measurements behind this choice.

Errors are ``PipelineUsageError`` naming the table (exit status 2).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

from ..files import FORMATS, Format, FormatError, InputFile, header, list_files
from ._errors import PipelineUsageError, first_line
from ._query import EVENTS_VIEW

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "ReferenceTable",
    "TableSpec",
    "check_table_names",
    "load_tables",
    "plan_tables",
    "read_table",
]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A name Spark SQL reads without backquotes: a letter or ``_``, then letters, digits, ``_``."""


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One ``--table NAME=PATH`` option, as given (checked by ``check_table_names``).

    Attributes:
        name: the view's name in SQL.
        path: a CSV, JSON Lines or Parquet file, or a directory of such files.
    """

    name: str
    path: Path

    @classmethod
    def parse(cls, text: str) -> TableSpec:
        """The spec of ``NAME=PATH`` (split at the first ``=``).

        Raises:
            PipelineUsageError: no ``=``, or nothing before or after it (one line).
        """
        name, equals, path = text.partition("=")
        if not equals or not name.strip() or not path:
            raise PipelineUsageError(
                f"--table {text}: expected NAME=PATH, e.g. --table airlines=airlines.csv"
            )
        return cls(name.strip(), Path(path))

    def __str__(self) -> str:
        return f"{self.name}={self.path}"


@dataclass(frozen=True, slots=True)
class ReferenceTable:
    """A reference table whose files were found and checked (``plan_tables``).

    Attributes:
        name: the view's name in SQL.
        path: the path given (a file or a directory).
        format: the files' format.
        files: the data files, sorted (the path itself when it is a file).
    """

    name: str
    path: Path
    format: Format
    files: tuple[Path, ...]


def check_table_names(specs: Sequence[TableSpec]) -> None:
    """Refuse a name Spark SQL cannot use plainly, ``events``, or a name given twice.

    Names compare case-insensitively (Spark's identifiers do by default).

    Raises:
        PipelineUsageError: one line naming the option.
    """
    seen: set[str] = set()
    for spec in specs:
        if _IDENTIFIER.fullmatch(spec.name) is None:
            raise PipelineUsageError(
                f"--table {spec}: the name {spec.name!r} is not a valid identifier (letters, "
                "digits and _, not starting with a digit)"
            )
        folded = spec.name.lower()
        if folded == EVENTS_VIEW:
            raise PipelineUsageError(
                f"--table {spec}: `{EVENTS_VIEW}` is the input stream's view; give the table "
                "another name"
            )
        if folded in seen:
            raise PipelineUsageError(f"--table {spec}: the name {spec.name} is given twice")
        seen.add(folded)


def _data_files(spec: TableSpec) -> list[Path]:
    """The files of a table: the path, or a directory's files with a known extension.

    A directory is searched recursively (Hive-style ``column=value`` subdirectories
    included), skipping names starting with ``.`` or ``_``, as Spark does
    (``reactive_streams.files.list_files``, as for ``--input``).
    """
    try:
        return [item.path for item in list_files([spec.path])]
    except ValueError:
        raise PipelineUsageError(
            f"--table {spec}: unsupported format (expected a file ending in "
            f"{', '.join(sorted(FORMATS))}, or a directory of them)"
        ) from None
    except FileNotFoundError:
        raise PipelineUsageError(
            f"--table {spec}: no readable file in the directory (looked for "
            f"{', '.join(sorted(FORMATS))})"
        ) from None


def _plan_table(spec: TableSpec) -> ReferenceTable:
    if not spec.path.exists():
        raise PipelineUsageError(f"--table {spec}: not found: {spec.path}")
    files = _data_files(spec)
    formats = sorted({InputFile.of(item).format for item in files})
    if len(formats) > 1:
        raise PipelineUsageError(
            f"--table {spec}: the directory holds files of several formats "
            f"({', '.join(formats)}); a table is read by one of Spark's readers"
        )
    fmt = formats[0]
    readable = False
    for item in files:
        try:
            columns, _ = header(InputFile.of(item, format=fmt))
        except (FormatError, OSError, pa.ArrowException) as exc:
            reason = getattr(exc, "strerror", None) or first_line(exc)
            raise PipelineUsageError(f"--table {spec}: cannot read {item}: {reason}") from None
        if fmt == "jsonl" and not columns and item.stat().st_size:
            raise PipelineUsageError(
                f"--table {spec}: {item} is not JSON Lines (one JSON object per line)"
            )
        readable = readable or bool(columns)
    if not readable:
        raise PipelineUsageError(f"--table {spec}: no readable file (no columns in {spec.path})")
    return ReferenceTable(spec.name, spec.path, fmt, tuple(files))


def plan_tables(specs: Sequence[TableSpec]) -> tuple[ReferenceTable, ...]:
    """Check every ``--table`` before Spark starts: names, paths, files.

    Cheap: a Parquet file's footer, a CSV's first lines, a JSON Lines file's first object
    (``reactive_streams.files.header``); the tables are read only by ``load_tables``.

    Returns:
        The tables, in the order given.

    Raises:
        PipelineUsageError: a name is not a valid identifier, is ``events`` or is given
            twice; a path does not exist, has no file of a known extension, mixes formats,
            or has a file that cannot be read as its format (one line naming the table).
    """
    check_table_names(specs)
    return tuple(_plan_table(spec) for spec in specs)


def read_table(spark: SparkSession, table: ReferenceTable) -> DataFrame:
    """The table as a DataFrame, read by Spark's own reader (lazily: nothing is read yet).

    CSV: a header line, types inferred from the whole file (``inferSchema``); JSON Lines:
    Spark's JSON reader; Parquet: as stored. Strict: a malformed line fails the read
    (``mode=FAILFAST``). A directory's files are read with the directory as ``basePath``,
    so Hive-style ``column=value`` subdirectories become columns.
    """
    reader = spark.read
    if table.path.is_dir():
        reader = reader.option("basePath", str(table.path))
    paths = [os.fspath(item) for item in table.files]
    if table.format == "csv":
        tabs = all(item.suffix.lower() == ".tsv" for item in table.files)
        return reader.csv(
            paths, header=True, inferSchema=True, mode="FAILFAST", sep="\t" if tabs else ","
        )
    if table.format == "jsonl":
        return reader.json(paths, mode="FAILFAST")
    return reader.parquet(*paths)


def load_tables(spark: SparkSession, tables: Sequence[ReferenceTable]) -> list[DataFrame]:
    """Read, cache and register each table as a temporary view named after it.

    Each table is read (``read_table``), cached and counted, in order, before the query
    starts: a table that cannot be loaded fails here, and the micro-batches join the cached
    rows (a snapshot) instead of reading the files again each time.

    Returns:
        The cached DataFrames, in order (``unpersist`` them when the run ends).

    Raises:
        PipelineUsageError: a table cannot be read (one line naming it; the tables loaded
            before it are unpersisted).
    """
    loaded: list[DataFrame] = []
    for table in tables:
        try:
            frame = read_table(spark, table).cache()
            loaded.append(frame)
            frame.count()
        except Exception as exc:  # AnalysisException, a failed job (FAILFAST), py4j
            for frame in loaded:
                frame.unpersist()
            raise PipelineUsageError(
                f"--table {table.name}={table.path}: Spark could not load it: {_cause(exc)}"
            ) from None
        frame.createOrReplaceTempView(table.name)
    return loaded


_ERROR_CLASS = re.compile(r"\[[A-Z][A-Z0-9_.]+\][^\n]*")
_SQL_STATE = re.compile(r"\s*SQLSTATE: \w+\s*$")
_CAUSE_CHARACTERS = 300


def _cause(error: BaseException) -> str:
    """The innermost Spark error class line of ``error``, else its first line (cut short).

    A failed load's error wraps its cause (``[FAILED_READ_FILE...]`` around
    ``[MALFORMED_CSV_RECORD] Malformed CSV record: ...``): the innermost says what is wrong.
    """
    found = _ERROR_CLASS.findall(str(error))
    line = _SQL_STATE.sub("", found[-1].strip()) if found else first_line(error)
    if len(line) > _CAUSE_CHARACTERS:
        line = line[: _CAUSE_CHARACTERS - 3] + "..."
    return line
