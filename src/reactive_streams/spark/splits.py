"""Ready-made splits for ``from_splits``: Parquet, CSV and JSON Lines files.

Example::

    from reactive_streams.spark import local_session
    from reactive_streams.spark.splits import file_splits

    spark = local_session()
    files = file_splits(["data/part-0.parquet", "data/events.csv"])
    df = files.to_dataframe(spark, max_records_per_trigger=50_000)

``file_splits`` lists the files (directories are expanded), plans one ``FileSplit`` per
file (or per Parquet row group, ``by_row_group=True``) and infers the schema unless it is
given: from every file, widened across them (``reactive_streams.files.infer_files_schema``,
as the main job does). Planning reads every Parquet footer and every byte of the text
files, through the same record scanner the readers use (``reactive_streams.files``): it
counts the records (quoted line breaks inside a CSV value are part of the record) and notes
a record boundary about every MiB, so a reader on an executor seeks straight to its offset
and reads exactly the records the planner counted.

``FileSplits.opener`` and ``FileSplits.count`` are the opener and counter ``from_splits``
needs; they run in Spark's processes (the counter on the driver host, the opener on
executors), so executors must see the same paths (a local or shared file system). Files are
read as they were when planned: a file that changed or disappeared fails the query, naming
it.

Records that do not fit the schema (a malformed CSV line, a value that does not convert)
fail the query with the file, line and reason, unless ``dead_letters=True``: then each
becomes a row of nulls carrying its dead letter (JSON) in the column ``_dead_letter``, so
nothing is dropped without a trace.

``FileSplits.to_dataframe`` reads in input order by default (``order="sequential"``: each
micro-batch takes the next records of the input), ends each micro-batch at a row group or
a text checkpoint (``split_boundaries``), and cuts it into as many tasks as Spark has
cores: so an input sorted by event time keeps its watermark monotone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
from pyspark.sql.pandas.types import from_arrow_schema

from .._arrow_literals import int64_range, string_scalar
from .._core import check_positive
from ..files import (
    DEAD_LETTER_COLUMN,
    ConversionOptions,
    CsvDialect,
    FileSplit,
    SplitReader,
    count_records,
    infer_files_schema,
    list_files,
    plan_splits,
    split_boundaries,
)
from ..operators import Flow
from ._from_splits import from_splits

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterator, Sequence

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from ..api import Publisher

__all__ = [
    "DEAD_LETTER_COLUMN",
    "FileFormat",
    "FileOpener",
    "FileSplit",
    "FileSplits",
    "count_records",
    "file_splits",
    "split_boundaries",
]

FileFormat = Literal["parquet", "csv", "jsonl"]
"""The file formats ``file_splits`` reads."""


@dataclass(frozen=True, slots=True)
class FileOpener:
    """Opens a ``FileSplit`` at a record offset: a publisher of ``pyarrow.RecordBatch``.

    Deterministic from an offset, as ``from_splits`` requires: the same file version gives
    the same records in the same order, one row per record. Batches have at most
    ``batch_rows`` rows and the columns of ``reader.output_schema`` (converted to the
    schema's types), then the extra columns below.

    Attributes:
        reader: reads and converts the records (``reactive_streams.files.SplitReader``).
        row_column: if set, a column of this name (int64): each row's record number in
            its split, for messages about bad rows.
        file_column: if set, a column of this name (string): the file's path.
    """

    reader: SplitReader
    row_column: str | None = None
    file_column: str | None = None

    @property
    def schema(self) -> pa.Schema:
        """The batches' schema (with the extra columns)."""
        schema = self.reader.output_schema
        if self.row_column is not None:
            schema = schema.append(pa.field(self.row_column, pa.int64()))
        if self.file_column is not None:
            schema = schema.append(pa.field(self.file_column, pa.string()))
        return schema

    def __call__(self, split: FileSplit, start: int) -> Publisher[pa.RecordBatch]:
        """The records of ``split`` from ``start`` on, lazily (the file opens on demand).

        Raises:
            FileNotFoundError: the file disappeared since it was planned.
            FileChangedError: the file changed since it was planned.
        """
        from ..files import check_unchanged  # noqa: PLC0415

        check_unchanged(split)
        return Flow.defer(lambda: Flow.from_iterable(self.batches(split, start)))

    def batches(self, split: FileSplit, start: int) -> Iterator[pa.RecordBatch]:
        """The batches ``__call__`` publishes, as an iterator."""
        position = start
        for batch in self.reader.batches(split, start):
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
            columns.append(pa.repeat(string_scalar(str(split.path)), batch.num_rows))
            names.append(self.file_column)
        return pa.RecordBatch.from_arrays(columns, names=names)


@dataclass(frozen=True, slots=True)
class FileSplits:
    """What ``file_splits`` found: the splits, their schema, an opener and a counter.

    Attributes:
        splits: one ``FileSplit`` per file (or Parquet row group).
        schema: the Arrow schema the records are converted to.
        opener: a ``FileOpener`` (pass it to ``from_splits``; elements are record batches).
        count: ``count_records``: each split's records, once its file is checked unchanged.
    """

    splits: tuple[FileSplit, ...]
    schema: pa.Schema
    opener: FileOpener
    count: Callable[[FileSplit], int] = field(default=count_records)

    @property
    def spark_schema(self) -> StructType:
        """The opener's batches' schema as a Spark ``StructType``."""
        return from_arrow_schema(self.opener.schema)

    @property
    def rows(self) -> int:
        """The records of every split, as planned."""
        return sum(split.records for split in self.splits)

    def to_dataframe(
        self, spark: SparkSession, *, schema: StructType | str | None = None, **options: Any
    ) -> DataFrame:
        """``from_splits`` over these files (``arrow=True``); ``options`` go to it.

        By default micro-batches follow the input's order (``order="sequential"``), end
        at boundaries (``split_boundaries``) and are read by as many tasks as Spark has
        cores (``max_partitions``).

        Args:
            spark: a classic SparkSession.
            schema: the stream's schema; ``spark_schema`` by default (pass the output
                schema when a ``transform`` changes the columns).
            **options: ``from_splits`` keywords (``max_records_per_trigger``,
                ``chunk_rows``, ``transform``, ``read_timeout``, ``order``,
                ``max_partitions``, ``boundaries``).
        """
        options.setdefault("boundaries", split_boundaries)
        options.setdefault("order", "sequential")
        options.setdefault("max_partitions", max(1, int(spark.sparkContext.defaultParallelism)))
        return from_splits(
            self.splits,
            self.opener,
            spark,
            self.spark_schema if schema is None else schema,
            count=self.count,
            arrow=True,
            **options,
        )


def file_splits(
    paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    format: FileFormat | None = None,
    by_row_group: bool = False,
    schema: pa.Schema | None = None,
    batch_rows: int = 10_000,
    row_column: str | None = None,
    file_column: str | None = None,
    encoding: str = "utf-8",
    dialect: CsvDialect | None = None,
    dead_letters: bool = False,
    follow_symlinks: bool = False,
    options: ConversionOptions | None = None,
) -> FileSplits:
    """List files (and directories, recursively) and plan them as splits for ``from_splits``.

    Args:
        paths: files or directories; in a directory, files with a known extension
            (``.parquet``, ``.pq``, ``.csv``, ``.tsv``, ``.jsonl``, ``.ndjson``,
            ``.json``) are taken in sorted order, skipping names that start with ``.`` or
            ``_``.
        format: the files' format; by default each file's extension says.
        by_row_group: one split per Parquet row group (``True``) or per file (the
            default). With file splits, micro-batches end at row groups, so no row group
            is decoded twice.
        schema: the columns and types to convert to; by default inferred from every file
            and widened across them (``reactive_streams.files.infer_files_schema``: Parquet
            footers, the head of each text file). A CSV header names some or all of these
            columns (in any order); a column a file lacks is null in its records.
        batch_rows: the most rows per record batch the opener publishes.
        row_column: add an int64 column of this name: each row's record number in its
            split.
        file_column: add a string column of this name: the row's file.
        encoding: the text encoding of CSV and JSON Lines files.
        dialect: the CSV delimiter, quote and bound on quoted line breaks; by default
            each file's extension says (``.tsv``: tab-delimited).
        follow_symlinks: read the symbolic links in a directory that point outside it
            (left out by default: a link planted in a data directory must not make the
            query read another file).
        dead_letters: ``False``: a record that does not fit the schema fails the query
            (``RefusedRecordError``, naming its file, line and reason); ``True``: it is a
            row of nulls with its dead letter in the column ``_dead_letter``.
        options: more null text and a timestamp format, for inference and conversion
            (``reactive_streams.files.ConversionOptions``); ``None``: the defaults.

    Returns:
        The splits with their schema, opener and counter.

    Raises:
        FileNotFoundError: a path does not exist, or no file was found.
        TypeError: ``batch_rows`` is not an int.
        ValueError: a file's format cannot be told from its extension, or
            ``batch_rows < 1``.
        FormatError: a CSV file's header cannot be read, a JSON Lines file has no object
            to infer the schema from, or a file names a column twice.
    """
    check_positive("batch_rows", batch_rows)
    files = list_files(
        paths,
        format=format,
        encoding=encoding,
        dialect=dialect,
        follow_symlinks=follow_symlinks,
    )
    options = options or ConversionOptions()
    if schema is None:
        schema = infer_files_schema(files, options)
    splits = plan_splits(files, by_row_group=by_row_group)
    reader = SplitReader(schema, chunk_rows=batch_rows, dead_letters=dead_letters, options=options)
    return FileSplits(splits, schema, FileOpener(reader, row_column, file_column))
