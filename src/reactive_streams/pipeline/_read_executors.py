"""``--read-on executors``: the input read on Spark's executors, by split, in input order.

The files are planned as splits (one per file, every record counted) and read through
``reactive_streams.spark.splits`` (``FileSplits.to_dataframe``: ``from_splits`` in input
order), each executor's Python worker converting its records to the schema. The driver
holds no record at all: the counts come from the query's progress (rows into Spark) and
from the dead-letter part files the executors write (``DeadLetterSplitter``), merged into
the dead-letter file at the end, each dead letter once.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..files import SplitReader
from ._inputs import text_bytes
from ._late import LateRows
from ._read_mode import offset_log
from ._read_parts import PartsRead
from ._schema import spark_schema
from ._splits import DeadLetterSplitter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..files import FileSplit
    from ._config import PipelineConfig
    from ._diagnostics import QueryProgress
    from ._inputs import InputPlan
    from ._read_mode import ReadCounts

__all__ = ["ExecutorsRead"]


def _bytes_at(split: FileSplit, consumed: int) -> int:
    """The bytes of a text split before its record ``consumed`` (counted from its start)."""
    if consumed >= split.records:
        return split.size
    point = split.checkpoint(split.first + consumed)
    return point.offset if point is not None else 0


_ROW_COLUMN: Final = "_reactive_streams_row"
_FILE_COLUMN: Final = "_reactive_streams_file"
"""``FileOpener``'s extra columns when late rows are tallied (dropped by the transform)."""


class ExecutorsRead(PartsRead):
    """The input as splits read on the executors (a ``ReadMode``).

    Args:
        config: the run's options.
        plan: the input (its schema and conversion options).
        splits: the planned splits, in input order.
        progress: the query's progress (rows into Spark, each split's share).
        notes: the run's notes (a resume is noted here).
    """

    def __init__(
        self,
        config: PipelineConfig,
        plan: InputPlan,
        splits: tuple[FileSplit, ...],
        progress: QueryProgress,
        notes: list[str],
    ) -> None:
        super().__init__(config, plan, progress, notes, splits=len(splits), order=splits)
        self.splits = splits
        self._total_records = sum(split.records for split in splits)
        text = all(split.row_group is None for split in splits)
        self._total_bytes = text_bytes([split.file for split in splits]) if text else None

    def counts(self, processed: int, *, done_at: float | None, started: float) -> ReadCounts:
        """``PartsRead``'s counts, with the records planned and the bytes read.

        Every record was counted when the splits were planned, so the total is exact; the
        bytes read are where each split's last finished micro-batch ended, at the record
        boundary noted at or before it (every MiB: ``FileSplit.checkpoints``).
        """
        counts = super().counts(processed, done_at=done_at, started=started)
        read = None
        if self._total_bytes is not None:
            ranges = self._progress.ranges()
            ends = ranges[max(ranges)].end if ranges else ()
            read = sum(
                _bytes_at(split, ends[index] if index < len(ends) else 0)
                for index, split in enumerate(self.splits)
            )
        return dataclasses.replace(
            counts,
            total_records=self._total_records,
            bytes_read=read,
            total_bytes=self._total_bytes,
        )

    @property
    def trigger(self) -> dict[str, Any] | None:
        """Files are read as planned: the query ends once every split was read."""
        return {"availableNow": True}

    @property
    def live(self) -> bool:
        """``False``: the files end."""
        return False

    def events(self, spark: SparkSession) -> DataFrame:
        """``from_splits`` over the files, validated on the executors.

        Micro-batches follow the input's order (``FileSplits.to_dataframe``): each reads
        the next records of the input, cut at record boundaries into a task per core, so a
        watermark query over input sorted by event time drops no row that is not late.

        Raises:
            PipelineUsageError: the checkpoint's column record cannot be read.
        """
        from reactive_streams.spark.splits import FileOpener, FileSplits  # noqa: PLC0415

        config, plan = self._config, self._plan
        parts = self._open_parts()
        names = tuple(plan.schema.names)
        # Every column that could refuse a record is validated on the executors (a Parquet
        # column already of its type is not read unless the query uses it); only the
        # query's columns go on to Spark.
        kept = self._kept_columns(spark)
        reader = SplitReader(
            plan.schema,
            config.chunk_rows,
            keep=None if kept == names else kept,
            options=plan.options,
        )
        tally = self._late_directory.tally(spark, config, plan, kept)
        if tally is None:
            opener = FileOpener(reader)
            transform = DeadLetterSplitter(str(parts), kept)
        else:
            opener = FileOpener(reader, row_column=_ROW_COLUMN, file_column=_FILE_COLUMN)
            transform = DeadLetterSplitter(
                str(parts), kept, tally, row_column=_ROW_COLUMN, file_column=_FILE_COLUMN
            )
            lanes = {str(split.path): index for index, split in enumerate(self.splits)}
            self.late = LateRows(Path(tally.directory), lanes, offset_log(config))
        files = FileSplits(self.splits, plan.schema, opener)
        return files.to_dataframe(
            spark,
            schema=spark_schema(reader.kept_schema),
            transform=transform,
            max_records_per_trigger=config.trigger_records,
            chunk_rows=config.chunk_rows,
            # The executors' Python workers start while the query is analysed and started.
            warm_workers=True,
        )
