"""``--input rsocket://host:port/route``: a partitioned RSocket route read on the executors.

The route (``reactive-streams serve``, or any producer of the partitioned-route protocol)
told ``prepare`` its schema and partitions (``remote_input_plan``); here its partitions
are read on Spark's executors through ``reactive_streams.spark.from_rsocket``, each
executor's Python worker asking the producer for one batch at a time, so Spark's demand
is the demand on the wire. The producer sends the records already converted, with the
dead-letter column (``reactive_streams.files.DEAD_LETTER_COLUMN``) the files layer adds;
``DeadLetterSplitter`` writes the dead letters to part files next to the data, as for
files read on the executors (``PartsRead``), and they are merged at the end. No local
copy of the input is made.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

from .._core import Backoff
from ..files import DEAD_LETTER_COLUMN
from ._read_parts import PartsRead
from ._schema import spark_schema
from ._splits import DeadLetterSplitter
from ._target import stream_id

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..rsocket import RSocketClient
    from ..spark import RouteStats
    from ._config import PipelineConfig
    from ._diagnostics import QueryProgress
    from ._inputs import InputPlan, RemoteInput
    from ._read_mode import ReadCounts

__all__ = ["RemoteRead", "SelectColumns"]

logger = logging.getLogger("reactive_streams.pipeline")

_STATS_PERIOD: Final = 1.0
"""Seconds between two ``R.stats`` requests to the producer, at least."""


def reconnect_policy(seconds: float) -> Backoff | None:
    """``--reconnect-for``: dial again for ``seconds`` after a drop; ``None`` for ``0``.

    The delays grow from 0.2 s to 5 s (jittered); reads and offsets requests wait for the
    reconnection, their timeouts set longer than ``seconds``.
    """
    if seconds <= 0:
        return None
    return Backoff(min_backoff=0.2, max_backoff=5.0, jitter=0.2, deadline=seconds)


class SelectColumns:
    """The transform of a route without dead letters: the query's columns only."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with the columns ``names``, in that order."""
        return batch.select(list(self.names))


class RemoteRead(PartsRead):
    """A partitioned RSocket route read on the executors (a ``ReadMode``).

    Args:
        config: the run's options (``token``).
        plan: the route's records' schema and size (``remote_input_plan``).
        remote: the route.
        info: what the route said of itself (a ``reactive_streams.spark.RouteInfo``).
        progress: the query's progress (rows into Spark, each partition's share).
        notes: the run's notes (a resume is noted here).
    """

    def __init__(
        self,
        config: PipelineConfig,
        plan: InputPlan,
        *,
        remote: RemoteInput,
        info: Any,
        progress: QueryProgress,
        notes: list[str],
    ) -> None:
        super().__init__(config, plan, progress, notes, splits=int(info.partitions))
        self.remote = remote
        self._info = info
        self._stats: RouteStats | None = None
        self._stats_at = float("-inf")
        self._stats_failed = False
        self._finally_committed = False
        self._group: str | None = None
        self._watcher: RSocketClient | None = None  # counts the producer's drops

    @property
    def group(self) -> str:
        """The consumer group this run reads as: its checkpoint's stream identity.

        Kept in the checkpoint (``stream_id``), so a run restarted on it resumes the same
        group's position on a live producer; without ``--checkpoint``, a new one per run.
        Chosen on first use (when the stream is built, after the checkpoint was checked).
        """
        if self._group is None:
            self._group = stream_id(self._config.checkpoint)
        return self._group

    @property
    def trigger(self) -> dict[str, Any] | None:
        """A route whose partitions are all final ends like files; a live one runs on."""
        return {"availableNow": True} if self._info.finite else None

    @property
    def live(self) -> bool:
        """Whether the route is live (its partitions grow): the run goes on until stopped."""
        return not self._info.finite

    def counts(self, processed: int, *, done_at: float | None, started: float) -> ReadCounts:
        """``PartsRead``'s counts, with the producer's ``R.stats`` (asked once a second)."""
        counts = super().counts(processed, done_at=done_at, started=started)
        watcher = self._watcher
        return dataclasses.replace(
            counts,
            producer=self._producer_stats(),
            producer_reconnects=0 if watcher is None else watcher.reconnects,
        )

    def _watch_producer(self) -> None:
        """Hold a connection to the producer that dials again when it drops.

        It redials as the readers on the executors do (``--reconnect-for``): its
        reconnections are the producer's drops that the run outlived, which this process
        sees no other way (the readers run in Spark's workers). Without a reconnect bound
        a drop fails the run: no watch.
        """
        from reactive_streams.rsocket import RSocketError, connect  # noqa: PLC0415

        policy = reconnect_policy(self._config.reconnect_for)
        if policy is None or self._watcher is not None:
            return
        try:
            self._watcher = connect(
                self.remote.url, token=self._config.token, timeout=10.0, reconnect=policy
            )
        except (RSocketError, OSError, ValueError) as exc:  # the read reports it
            logger.info("the producer cannot be watched for drops: %s", exc)

    def close(self) -> None:
        """``PartsRead.close``, and the connection that watched the producer closed."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.close(0.0)
        super().close()

    def _producer_stats(self) -> RouteStats | None:
        """The producer's last answer to ``R.stats``; asked again once a second at most.

        A producer that cannot answer (gone for a moment) leaves the last answer in place;
        one that refuses the request (older than the stats route: "no route") is not
        asked again. Either is logged once.
        """
        from reactive_streams.spark import RemoteRouteError, route_stats  # noqa: PLC0415

        now = time.monotonic()
        if now - self._stats_at < _STATS_PERIOD:
            return self._stats
        self._stats_at = now
        try:
            self._stats = route_stats(
                self.remote.url, self.remote.route, token=self._config.token, timeout=5.0
            )
        except RemoteRouteError as exc:
            if not self._stats_failed:
                logger.info("the producer's stats are not available: %s", exc)
            self._stats_failed = True
            if exc.refused:  # the same answer every time: do not ask again
                self._stats_at = float("inf")
        return self._stats

    def finish(self) -> list[str]:
        """The dead letters merged (``PartsRead.finish``); a live route's last commit sent.

        Spark commits a micro-batch to its source when the next one starts, so the last
        micro-batch of a live run that was stopped is committed to the producer here (the
        query's progress says where it ended), and the producer releases what it kept.
        """
        notes = super().finish()
        if self.live and not self._finally_committed:
            self._finally_committed = True
            ranges = self._progress.ranges()
            if ranges:
                from reactive_streams.spark import commit_route  # noqa: PLC0415

                last = ranges[max(ranges)].end
                commit_route(
                    self.remote.url,
                    self.remote.route,
                    dict(enumerate(last)),
                    token=self._config.token,
                    timeout=5.0,
                    # across a reconnect, but a producer that is gone for good does not
                    # hold up the end of the run for long: it has nothing to release
                    reconnect=reconnect_policy(min(self._config.reconnect_for, 10.0)),
                    acknowledged=True,  # the producer answers once it released
                    group=self.group,
                )
        return notes

    def events(self, spark: SparkSession) -> DataFrame:
        """``from_rsocket`` over the route, its dead letters split off on the executors.

        Raises:
            PipelineUsageError: the checkpoint's column record cannot be read.
            reactive_streams.spark.RemoteRouteError: the route is gone since ``prepare``.
        """
        from reactive_streams.spark import from_rsocket  # noqa: PLC0415

        config = self._config
        self._watch_producer()
        parts = self._open_parts()
        kept = self._kept_columns(spark)
        schema = pa.schema([self._plan.schema.field(name) for name in kept])
        if DEAD_LETTER_COLUMN in self._info.schema.names:
            transform: Any = DeadLetterSplitter(str(parts), kept)
        else:
            transform = SelectColumns(kept)
        return from_rsocket(
            self.remote.url,
            self.remote.route,
            spark,
            schema=spark_schema(schema),
            token=config.token,
            transform=transform,
            max_records_per_trigger=config.trigger_records,
            reconnect=reconnect_policy(config.reconnect_for),
            # A read or an offsets request waits for a reconnection: longer than its bound.
            read_timeout=max(120.0, config.reconnect_for + 30.0),
            request_timeout=max(30.0, config.reconnect_for + 10.0),
            # The executors' Python workers start while the query is analysed and started.
            warm_workers=True,
            group=self.group,
        )
