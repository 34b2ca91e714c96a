"""``--read-on driver`` (and ``--rate``): the input read in this process, sent to Spark.

A ``FileSource`` reads the files chunk by chunk as Spark's stream asks, writing dead
letters to the dead-letter file as it finds them, and the ``to_spark_stream`` bridge
carries Arrow record batches to Spark: the driver holds at most two triggers of records.
After a resume from a ``--checkpoint`` the input is read again from its start, and the
records earlier runs' micro-batches hold are skipped, not sent again.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..operators import Flow
from ._checkpoint import resume_point
from ._diagnostics import resumed_note
from ._errors import first_line
from ._inputs import text_bytes
from ._late import LateRows, SequenceTally
from ._read_mode import LateDirectory, ReadCounts, offset_log
from ._schema import spark_schema
from ._source import FileSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .._core import StreamStatistics
    from ..api import Publisher
    from ..spark import SparkStreamBridge
    from ._config import PipelineConfig
    from ._dead_letter import DeadLetterLimit, DeadLetterWriter
    from ._inputs import InputPlan

__all__ = ["DriverRead"]


class DriverRead:
    """The input read in this process and bridged to Spark (a ``ReadMode``).

    Args:
        config: the run's options.
        plan: the input.
        dead: the dead-letter writer the source writes to.
        notes: the run's notes (a resume is noted here).
    """

    on_executors = False
    splits = None

    def __init__(
        self, config: PipelineConfig, plan: InputPlan, dead: DeadLetterWriter, notes: list[str]
    ) -> None:
        self._config = config
        self._plan = plan
        self._dead = dead
        self._notes = notes
        self._source: FileSource | None = None
        self._bridge: SparkStreamBridge | None = None
        self._late_directory = LateDirectory()
        self.late: LateRows | None = None
        self.resumed = False
        self._total_bytes = None if plan.table is not None else text_bytes(plan.files)

    @property
    def trigger(self) -> dict[str, Any] | None:
        """Spark's default trigger: the bridge serves each micro-batch what it holds."""
        return None

    @property
    def live(self) -> bool:
        """``False``: the files end, and the bridge with them."""
        return False

    def events(self, spark: SparkSession) -> DataFrame:
        """The files read here, sent to Spark through ``to_spark_stream``."""
        from reactive_streams.spark import to_spark_stream_bridge  # noqa: PLC0415

        config, plan = self._config, self._plan
        resume = None
        if config.checkpoint is not None:
            resume = resume_point(config.checkpoint / "query")
            if resume is not None:
                self.resumed = True
                self._notes.append(resumed_note(config.checkpoint, resume))
        start_offset = resume.offset if resume is not None else 0
        # Arrow record batches from the source into Spark: no Python object per record.
        self._source = FileSource(
            plan,
            dead_letters=self._dead,
            chunk_rows=config.chunk_rows,
            rate=config.rate,
            arrow=True,
            skip=start_offset,
        )
        rows: Publisher[Any] = self._source
        tally = self._late_directory.tally(spark, config, plan, tuple(plan.schema.names))
        if tally is not None:
            self.late = LateRows(Path(tally.directory), {"": 0}, offset_log(config))
            rows = Flow.from_publisher(self._source).map(SequenceTally(tally, start_offset))
        # The bridge itself (not just its DataFrame): statistics for the display, and close.
        # One trigger of read-ahead: the next micro-batch's records are read while Spark runs
        # the current one, so batches come out full (memory: two triggers of records).
        self._bridge = to_spark_stream_bridge(
            rows,
            spark,
            spark_schema(plan.schema),
            max_records_per_trigger=config.trigger_records,
            read_ahead_triggers=1,
            arrow=True,
            start_offset=start_offset,
        )
        # The query takes seconds to start: read the first triggers meanwhile.
        self._bridge.prefetch()
        return self._bridge.dataframe

    def counts(self, processed: int, *, done_at: float | None, started: float) -> ReadCounts:
        """From the source and the bridge in this process."""
        del started
        source = self._source.statistics() if self._source is not None else None
        held = bound = 0
        if self._bridge is not None:
            held = self._bridge.statistics().buffered
            bound = self._bridge.row_budget + self._config.chunk_rows  # + one source batch
        del processed
        return ReadCounts(
            records_read=source.records_read if source is not None else 0,
            records_emitted=source.records_emitted if source is not None else 0,
            dead_letters=self._dead.count,  # every one, found again after a resume
            source_demand=(
                source.stream.requested - source.stream.delivered if source is not None else 0
            ),
            reading=(
                (done_at or time.monotonic()) - source.first_read_at
                if source is not None and source.first_read_at is not None
                else 0.0
            ),
            bridge_held=held,
            bridge_bound=bound,
            records_skipped=source.records_skipped if source is not None else 0,
            bytes_read=(
                None
                if self._total_bytes is None
                else (source.bytes_read if source is not None else 0)
            ),
            total_bytes=self._total_bytes,
        )

    def dead_letters(self) -> int:
        """Every one: the input is read from its start, also after a resume."""
        return self._dead.count

    def limit_message(self, limit: DeadLetterLimit, processed: int, *, final: bool) -> str | None:
        """``--max-dead-letters`` against the source's figures.

        A chunk's dead letters are counted a moment before its records, so a fraction is
        checked against the most records that can have been read: one chunk more.
        """
        del processed
        source = self._source.statistics() if self._source is not None else None
        read = source.records_read if source is not None else 0
        most = None if final else read + self._config.chunk_rows
        return limit.exceeded(self._dead.count, read, read_at_most=most)

    def streams(self) -> tuple[StreamStatistics | None, StreamStatistics | None]:
        """The source's stream and the bridge's."""
        return (
            self._source.statistics().stream if self._source is not None else None,
            self._bridge.statistics() if self._bridge is not None else None,
        )

    def source_failure(self, error: BaseException) -> str | None:
        """The source's own failure (a file that went away, a reader that failed)."""
        del error
        failure = self._source.statistics().failure if self._source is not None else None
        return None if failure is None else first_line(failure)

    def stop(self) -> None:
        """Stop the source. Idempotent."""
        if self._source is not None:
            self._source.stop()

    def finish(self) -> list[str]:
        """The source is stopped; its dead letters are already in the file."""
        self.stop()
        return []

    def close(self) -> None:
        """Stop the source, close the bridge, remove temporary tallies. Idempotent."""
        self.stop()
        if self._bridge is not None:
            self._bridge.close()
        self._late_directory.close()
