"""Ready-made splits for ``from_splits``: Parquet (per row group or file), CSV, JSON Lines.

Example::

    from reactive_streams.spark import local_session
    from reactive_streams.spark.splits import file_splits

    spark = local_session()
    files = file_splits(["data/part-0.parquet", "data/part-1.parquet"])
    df = files.to_dataframe(spark, max_records_per_trigger=50_000)

``file_splits`` lists the files (directories are expanded), makes one ``FileSplit`` per
file (or per Parquet row group, ``by_row_group=True``), and infers the schema from
the first file unless given. ``FileSplits.opener`` and ``FileSplits.count`` are the opener
and counter ``from_splits`` needs; they run in Spark's processes (the counter on the driver
host, the opener on executors), so executors must see the same paths (a local or shared
file system).

Files are read as they were when ``file_splits`` listed them: the counter and the opener
compare each file's size and modification time with the listing, and fail the query
(naming the file) when a file changed or disappeared. A JSON Lines or CSV split is counted
once per file version (the count is cached by path, size and modification time).

Seeking: a Parquet split starts at the row group holding its offset and skips rows inside
it; CSV skips rows while parsing (``skip_rows_after_names``); JSON Lines skips lines
without parsing them. ``FileSplits.to_dataframe`` rounds each micro-batch's share of a
Parquet file to its row groups (``row_group_starts``), so a micro-batch never ends inside
one and no row group is decoded twice.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.csv as pa_csv  # type: ignore[import-untyped,unused-ignore]
import pyarrow.json as pa_json  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
from pyspark.sql.pandas.types import from_arrow_schema

from .._arrow_literals import int64_range, string_scalar
from .._demand import check_positive
from ..operators import Flow
from ._from_splits import from_splits

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from ..api import Publisher

__all__ = [
    "FileFormat",
    "FileOpener",
    "FileSplit",
    "FileSplits",
    "count_rows",
    "file_splits",
    "row_group_starts",
]

FileFormat = Literal["parquet", "csv", "jsonl"]
"""The file formats ``file_splits`` reads."""

_SUFFIXES: Final[dict[str, FileFormat]] = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}
_LINE_BLOCK: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class FileSplit:
    """One file, or one row group of a Parquet file, as listed by ``file_splits``.

    Attributes:
        path: the file's absolute path.
        format: ``"parquet"``, ``"csv"`` or ``"jsonl"``.
        row_group: the Parquet row group, or ``None`` for the whole file.
        size: the file's size in bytes when listed.
        mtime_ns: its modification time when listed (nanoseconds).
    """

    path: str
    format: FileFormat
    row_group: int | None = None
    size: int = 0
    mtime_ns: int = 0

    def __str__(self) -> str:
        if self.row_group is None:
            return self.path
        return f"{self.path} (row group {self.row_group})"


def _check_unchanged(split: FileSplit) -> None:
    """Raise when the file is gone or differs from the listing."""
    try:
        stat = os.stat(split.path)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{split.path} was listed by file_splits but no longer exists "
            "(deleted or moved while the query runs)"
        ) from None
    if stat.st_size != split.size or stat.st_mtime_ns != split.mtime_ns:
        raise ValueError(
            f"{split.path} changed since file_splits listed it ({split.size} -> "
            f"{stat.st_size} bytes): file splits are read as listed; list the files again "
            "for a new query"
        )


_COUNTS: dict[tuple[str, int, int, int | None], int] = {}


def count_rows(split: FileSplit) -> int:
    """How many rows ``split`` has: Parquet footers, parsed CSV rows, non-blank JSON lines.

    Cached per file version in the calling process (Spark's streaming source runner asks
    for every micro-batch).

    Raises:
        FileNotFoundError: the file disappeared since it was listed.
        ValueError: the file changed since it was listed.
    """
    _check_unchanged(split)
    key = (split.path, split.size, split.mtime_ns, split.row_group)
    cached = _COUNTS.get(key)
    if cached is not None:
        return cached
    if split.format == "parquet":
        metadata = pq.ParquetFile(split.path).metadata
        rows = (
            metadata.num_rows
            if split.row_group is None
            else metadata.row_group(split.row_group).num_rows
        )
    elif split.format == "csv":
        # The CSV parser, not a line count: quoted values may hold newlines.
        with pa_csv.open_csv(split.path) as reader:
            rows = sum(batch.num_rows for batch in reader)
    else:
        rows = sum(1 for _ in _json_lines(split.path))
    _COUNTS[key] = int(rows)
    return int(rows)


_STARTS: dict[tuple[str, int, int], tuple[int, ...]] = {}


def row_group_starts(split: FileSplit) -> tuple[int, ...]:
    """Where each row group after the first starts, in rows from the split's start.

    ``from_splits`` (``boundaries=``) ends each micro-batch's share of a Parquet file at
    one of them, so the next micro-batch starts at a row group and decodes nothing twice.
    Empty for a row-group split, a CSV or a JSON Lines file. Cached per file version.

    Raises:
        FileNotFoundError: the file disappeared since it was listed.
        ValueError: the file changed since it was listed.
    """
    if split.format != "parquet" or split.row_group is not None:
        return ()
    _check_unchanged(split)
    key = (split.path, split.size, split.mtime_ns)
    cached = _STARTS.get(key)
    if cached is None:
        metadata = pq.ParquetFile(split.path).metadata
        starts, first = [], 0
        for group in range(metadata.num_row_groups - 1):
            first += metadata.row_group(group).num_rows
            starts.append(first)
        cached = _STARTS[key] = tuple(starts)
    return cached


def _json_lines(path: str) -> Iterator[bytes]:
    """The non-blank lines of a JSON Lines file (what pyarrow's reader counts as rows)."""
    with open(path, "rb") as handle:
        for line in handle:
            if line.strip():
                yield line if line.endswith(b"\n") else line + b"\n"


def _rechunk(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for offset in range(0, batch.num_rows, rows):
            yield batch.slice(offset, rows)


@dataclass(frozen=True, slots=True)
class FileOpener:
    """Opens a ``FileSplit`` at a row offset: a publisher of ``pyarrow.RecordBatch``.

    Deterministic from an offset, as ``from_splits`` requires: the same file version gives
    the same rows in the same order. Batches have at most ``batch_rows`` rows and the
    columns of ``schema`` (CSV and JSON Lines are parsed with these types).

    Attributes:
        schema: the columns to read, with their types.
        batch_rows: the most rows per batch.
        row_column: if set, a column of this name (int64) holding each row's index in
            its split, for messages about bad rows (a dead letter's "row").
        file_column: if set, a column of this name (string) holding the file's path.
    """

    schema: pa.Schema
    batch_rows: int = 10_000
    row_column: str | None = None
    file_column: str | None = None

    def __call__(self, split: FileSplit, start: int) -> Publisher[pa.RecordBatch]:
        """The rows of ``split`` from row ``start`` on, lazily (a file is opened on demand).

        Raises:
            FileNotFoundError: the file disappeared since it was listed.
            ValueError: the file changed since it was listed.
        """
        _check_unchanged(split)
        return Flow.defer(lambda: Flow.from_iterable(self.batches(split, start)))

    def batches(self, split: FileSplit, start: int) -> Iterator[pa.RecordBatch]:
        """The batches ``__call__`` publishes, as an iterator."""
        position = start
        for batch in _rechunk(self._read(split, start), self.batch_rows):
            yield self._decorate(split, position, batch)
            position += batch.num_rows

    def _decorate(self, split: FileSplit, position: int, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self.row_column is None and self.file_column is None:
            return batch
        columns = list(batch.columns)
        names = list(batch.schema.names)
        if self.row_column is not None:
            columns.append(int64_range(position, position + batch.num_rows))
            names.append(self.row_column)
        if self.file_column is not None:
            columns.append(pa.repeat(string_scalar(split.path), batch.num_rows))
            names.append(self.file_column)
        return pa.RecordBatch.from_arrays(columns, names=names)

    def _read(self, split: FileSplit, start: int) -> Iterator[pa.RecordBatch]:
        names = self.schema.names
        if split.format == "parquet":
            parquet = pq.ParquetFile(split.path)
            metadata = parquet.metadata
            if split.row_group is not None:
                groups = [split.row_group]
                skip = start
            else:
                groups, skip, first = [], start, 0
                for group in range(metadata.num_row_groups):
                    rows = metadata.row_group(group).num_rows
                    if first + rows > start:
                        if not groups:
                            skip = start - first
                        groups.append(group)
                    first += rows
            if not groups:
                return
            for batch in parquet.iter_batches(
                batch_size=self.batch_rows, row_groups=groups, columns=names
            ):
                if skip >= batch.num_rows:
                    skip -= batch.num_rows
                    continue
                yield batch.slice(skip) if skip else batch
                skip = 0
        elif split.format == "csv":
            options = pa_csv.ReadOptions(skip_rows_after_names=start)
            convert = pa_csv.ConvertOptions(
                column_types=self.schema, include_columns=names, include_missing_columns=True
            )
            with pa_csv.open_csv(
                split.path, read_options=options, convert_options=convert
            ) as reader:
                yield from reader
        else:
            parse = pa_json.ParseOptions(explicit_schema=self.schema)
            lines = _json_lines(split.path)
            for _ in range(start):
                if next(lines, None) is None:
                    return
            while True:
                block = [line for _, line in zip(range(self.batch_rows), lines, strict=False)]
                if not block:
                    return
                table = pa_json.read_json(io.BytesIO(b"".join(block)), parse_options=parse)
                yield from table.select(names).to_batches()


@dataclass(frozen=True, slots=True)
class FileSplits:
    """What ``file_splits`` found: the splits, their schema, an opener and a counter.

    Attributes:
        splits: one ``FileSplit`` per Parquet row group (or file) and per CSV/JSONL file.
        schema: the Arrow schema the opener reads (plus the optional extra columns).
        opener: a ``FileOpener`` (pass it to ``from_splits``; elements are record batches).
        count: ``count_rows``.
    """

    splits: tuple[FileSplit, ...]
    schema: pa.Schema
    opener: FileOpener
    count: Callable[[FileSplit], int] = field(default=count_rows)

    @property
    def spark_schema(self) -> StructType:
        """``schema`` (with the opener's extra columns) as a Spark ``StructType``."""
        fields = list(self.schema)
        if self.opener.row_column is not None:
            fields.append(pa.field(self.opener.row_column, pa.int64()))
        if self.opener.file_column is not None:
            fields.append(pa.field(self.opener.file_column, pa.string()))
        return from_arrow_schema(pa.schema(fields))

    @property
    def rows(self) -> int:
        """The rows of every split (counted here, in this process)."""
        return sum(count_rows(split) for split in self.splits)

    def to_dataframe(
        self, spark: SparkSession, *, schema: StructType | str | None = None, **options: Any
    ) -> DataFrame:
        """``from_splits`` over these files (``arrow=True``); ``options`` go to it.

        Args:
            spark: a classic SparkSession.
            schema: the stream's schema; ``spark_schema`` by default (pass the output
                schema when a ``transform`` changes the columns).
            **options: ``from_splits`` keywords (``max_records_per_trigger``,
                ``chunk_rows``, ``transform``, ``read_timeout``); ``boundaries`` is
                ``row_group_starts`` unless given (``None``: shares are not rounded).
        """
        options.setdefault("boundaries", row_group_starts)
        return from_splits(
            self.splits,
            self.opener,
            spark,
            self.spark_schema if schema is None else schema,
            count=self.count,
            arrow=True,
            **options,
        )


def _list_files(paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str]) -> list[Path]:
    entries = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    files: list[Path] = []
    for entry in entries:
        path = Path(entry).resolve()
        if path.is_dir():
            files.extend(
                sorted(
                    child
                    for child in path.rglob("*")
                    if child.is_file()
                    and child.suffix.lower() in _SUFFIXES
                    and not any(
                        part.startswith((".", "_")) for part in child.relative_to(path).parts
                    )
                )
            )
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or directory: {entry}")
    if not files:
        raise FileNotFoundError(f"no .parquet, .csv or .jsonl files in {entries}")
    return files


def _format_of(path: Path, given: FileFormat | None) -> FileFormat:
    if given is not None:
        return given
    try:
        return _SUFFIXES[path.suffix.lower()]
    except KeyError:
        raise ValueError(
            f"cannot tell the format of {path} from its suffix; pass format='parquet', "
            "'csv' or 'jsonl'"
        ) from None


def _infer_schema(path: Path, file_format: FileFormat) -> pa.Schema:
    if file_format == "parquet":
        return pq.read_schema(path)
    if file_format == "csv":
        with pa_csv.open_csv(path) as reader:
            return reader.schema
    head = []
    with open(path, "rb") as handle:
        for line in handle:
            if line.strip():
                head.append(line)
            if len(head) >= 1000:
                break
    return pa_json.read_json(io.BytesIO(b"".join(head))).schema


def file_splits(
    paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    format: FileFormat | None = None,
    by_row_group: bool = False,
    schema: pa.Schema | None = None,
    batch_rows: int = 10_000,
    row_column: str | None = None,
    file_column: str | None = None,
) -> FileSplits:
    """List files (and directories, recursively) as splits for ``from_splits``.

    Args:
        paths: files or directories; in a directory, files with a known suffix
            (``.parquet``, ``.csv``, ``.jsonl``, ``.ndjson``, ``.json``) are taken in sorted
            order, skipping names that start with ``.`` or ``_``.
        format: the files' format; by default each file's suffix says.
        by_row_group: one split per Parquet row group (``True``) or per file (the
            default). Row-group splits give more tasks per micro-batch, but each task
            opens its file and reads its footer, and a micro-batch that ends inside a row
            group makes the next one decode that row group again up to its offset
            (Parquet cannot seek inside a row group). With file splits,
            ``to_dataframe`` rounds each micro-batch's share to the file's row groups
            (``row_group_starts``), so that never happens.
        schema: the columns and types to read; by default the first file's (Parquet
            footer; CSV's first block; JSON Lines' first 1,000 lines).
        batch_rows: the most rows per record batch the opener publishes.
        row_column: add an int64 column of this name: each row's index in its split.
        file_column: add a string column of this name: the row's file.

    Returns:
        The splits with their schema, opener and counter.

    Raises:
        FileNotFoundError: a path does not exist, or no file was found.
        TypeError: ``batch_rows`` is not an int.
        ValueError: a file's format cannot be told from its suffix, or
            ``batch_rows < 1``.
    """
    check_positive("batch_rows", batch_rows)
    files = _list_files(paths)
    splits: list[FileSplit] = []
    for path in files:
        file_format = _format_of(path, format)
        stat = path.stat()
        common = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        if file_format == "parquet" and by_row_group:
            groups = pq.ParquetFile(path).metadata.num_row_groups
            splits.extend(
                FileSplit(str(path), file_format, group, **common) for group in range(groups)
            )
        else:
            splits.append(FileSplit(str(path), file_format, None, **common))
    if schema is None:
        schema = _infer_schema(files[0], _format_of(files[0], format))
    opener = FileOpener(schema, batch_rows, row_column, file_column)
    return FileSplits(tuple(splits), schema, opener)
