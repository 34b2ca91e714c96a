"""What a read mode is to the run: ``events``, its counters, its dead letters, its end.

The pipeline reads its input one of three ways, each its own small object behind the
``ReadMode`` interface, so ``Pipeline`` never asks which one it has:

* ``ExecutorsRead`` (``_read_executors``, ``--read-on executors``, the default): the files
  planned as splits and read on Spark's executors (``from_splits``); dead letters are
  written there as part files and merged on the driver at the end;
* ``DriverRead`` (``_read_driver``, ``--read-on driver`` and ``--rate``): the files read
  in this process (``FileSource``) and sent through the ``to_spark_stream`` bridge.
* ``RemoteRead`` (``_read_remote``, ``--input rsocket://host:port/route``): a partitioned
  RSocket route read on the executors (``from_rsocket``), its dead letters handled as in
  ``ExecutorsRead`` (both are ``_read_parts.PartsRead``).

Both count a watermark query's late rows as input rows where they can (``_late``).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ._late import LateTally, late_rule
from ._query import EVENTS_VIEW

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .._core import StreamStatistics
    from ..spark import RouteStats
    from ._config import PipelineConfig
    from ._dead_letter import DeadLetterLimit
    from ._inputs import InputPlan
    from ._late import LateRows

__all__ = ["LateDirectory", "ReadCounts", "ReadMode"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadCounts:
    """A read mode's share of ``PipelineProgress`` (see there for each figure)."""

    records_read: int
    records_emitted: int
    dead_letters: int
    source_demand: int
    reading: float
    bridge_held: int = 0
    bridge_bound: int = 0
    split_shares: tuple[int, ...] | None = None
    splits: int = 0
    records_skipped: int = 0
    dead_letters_before: int = 0
    producer: RouteStats | None = None
    producer_reconnects: int = 0
    total_records: int | None = None
    bytes_read: int | None = None
    total_bytes: int | None = None


class ReadMode(Protocol):
    """One way of reading the input into the stream ``events``.

    The run calls ``events`` once (from ``start``), then the others from any thread while
    it waits, and ``close`` once at the end.
    """

    @property
    def on_executors(self) -> bool:
        """The input is read on Spark's executors (no source or bridge in this process)."""
        ...

    @property
    def resumed(self) -> bool:
        """The run resumes from a ``--checkpoint`` that earlier runs wrote to."""
        ...

    @property
    def trigger(self) -> dict[str, Any] | None:
        """The query's trigger (``from_streaming_query``'s), ``None``: Spark's default."""
        ...

    @property
    def live(self) -> bool:
        """Whether the input never ends on its own (a live route): it runs until stopped."""
        ...

    @property
    def late(self) -> LateRows | None:
        """The count of late input rows, when the query's rule is followed (``_late``)."""
        ...

    def events(self, spark: SparkSession) -> DataFrame:
        """The streaming DataFrame of the input (registered as ``events`` by the run).

        Raises:
            PipelineUsageError: the checkpoint cannot be read.
        """
        ...

    def counts(self, processed: int, *, done_at: float | None, started: float) -> ReadCounts:
        """The read figures now; ``processed``: input rows of the finished micro-batches."""
        ...

    def dead_letters(self) -> int:
        """Dead letters so far, every run's (the dead-letter file holds them at the end)."""
        ...

    def limit_message(self, limit: DeadLetterLimit, processed: int, *, final: bool) -> str | None:
        """Why the run has more dead letters than ``limit`` allows, else ``None``."""
        ...

    def streams(self) -> tuple[StreamStatistics | None, StreamStatistics | None]:
        """The source's and the bridge's statistics (``None``: none in this process)."""
        ...

    def source_failure(self, error: BaseException) -> str | None:
        """The failure of the reading itself behind the run's ``error``, if it is one."""
        ...

    def stop(self) -> None:
        """Stop reading (the run stops early, or is over). Idempotent."""
        ...

    def finish(self) -> list[str]:
        """At the end, before the figures are final: notes to show (merge problems)."""
        ...

    def close(self) -> None:
        """Release what the mode holds (temporary directories, the bridge). Idempotent."""
        ...


@dataclass
class LateDirectory:
    """Where a read mode's late-row tallies go, and whether to remove it at the end."""

    path: Path | None = None
    temporary: bool = False

    def tally(
        self, spark: SparkSession, config: PipelineConfig, plan: InputPlan, columns: tuple[str, ...]
    ) -> LateTally | None:
        """The tally of late keys, if the query's late rows can be counted as input rows.

        Only for a ``--sql`` with a watermark whose rule ``late_rule`` follows, over an
        event-time column that reaches Spark; the tallies go with the checkpoint (a
        restarted run counts the replayed micro-batch from them), else to a temporary
        directory removed by ``close``.
        """
        if config.sql is None:
            return None
        rule = late_rule(spark, config.sql, plan.schema, EVENTS_VIEW)
        if rule is None or rule.column not in columns:
            return None
        if config.checkpoint is not None:
            self.path = config.checkpoint / "late-rows"
        else:
            self.path = Path(tempfile.mkdtemp(prefix="reactive-streams-late-rows-"))
            self.temporary = True
        return LateTally(rule, str(self.path))

    def close(self) -> None:
        """Remove a temporary directory. Idempotent."""
        if self.temporary and self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.temporary = False


def offset_log(config: PipelineConfig) -> Path | None:
    """The query checkpoint's offset log (each micro-batch's watermark), if any."""
    return None if config.checkpoint is None else config.checkpoint / "query" / "offsets"
