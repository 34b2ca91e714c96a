"""``spark_processor``: Spark as a processing stage, one batch of rows per Spark call.

Input rows are collected into batches of up to ``batch_rows`` (or whatever arrived within
``flush_interval`` seconds), each batch becomes a ``pyarrow.Table`` and a DataFrame
(``createDataFrame``), the user's ``transform`` runs on Spark, and the result comes back
as Arrow (``toArrow``) and leaves as ``dict`` rows, only as downstream demands them.

Upstream demand is a budget of ``batch_rows * max_in_flight`` input rows: rows requested
but not received, plus rows received whose batch has not been fully emitted downstream,
never exceed it. A batch's rows return to the budget (and are requested again) once every
output row of that batch was delivered, so a slow subscriber stops the intake.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from .._core import (
    DrainLoop,
    EmitterElection,
    ExecutorRejectedError,
    MissingBackpressureError,
    StreamStatistics,
    accept_subscription,
    report_undeliverable,
    signal_on_complete,
    signal_on_error,
    signal_on_next,
    signal_on_subscribe,
)
from ..api import Processor, Subscriber, Subscription
from ._errors import SparkTransformError
from ._pyspark_internals import parse_ddl

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SparkProcessor", "spark_processor"]

_WAIT_SLICE: Final = 0.5
_EMIT_CHUNK: Final = 4096
"""Output rows converted from Arrow to dicts at a time."""


@dataclass(slots=True)
class _Output:
    """The result of one batch, emitted from ``offset`` on."""

    table: Any  # pyarrow.Table
    input_rows: int
    offset: int = 0


class _NoSubscription(Subscription):
    def request(self, n: int) -> None:
        """Nothing to request: the subscriber is refused."""

    def cancel(self) -> None:
        """Nothing to cancel."""


class SparkProcessor(Processor[Mapping[str, Any], dict[str, Any]], Subscription):
    """The stage returned by ``spark_processor``: one upstream, one downstream subscriber.

    Backpressure: at most ``batch_rows * max_in_flight`` input rows are requested or held;
    output rows are emitted only on downstream demand.

    Concurrency: upstream signals may come from any thread; Spark runs on one dedicated
    thread (``rs-spark-processor``); downstream signals come from a second one
    (``rs-spark-processor-emit``), driven by a drain loop that shares ownership with the
    downstream demand's emitter election (Rule 1.3).
    """

    def __init__(
        self,
        transform: Callable[[DataFrame], DataFrame],
        spark: SparkSession,
        *,
        batch_rows: int,
        flush_interval: float,
        max_in_flight: int,
        schema: StructType | None,
    ) -> None:
        self._transform = transform
        self._spark = spark
        self._batch_rows = batch_rows
        self._flush_interval = flush_interval
        self._budget = batch_rows * max_in_flight
        self._arrow_schema = None if schema is None else to_arrow_schema(schema, timezone="UTC")
        self._cond = threading.Condition()
        # upstream side
        self._upstream: Subscription | None = None
        self._outstanding = 0  # requested upstream, not yet received
        self._held = 0  # received, batch not yet fully emitted
        self._pending: list[Mapping[str, Any]] = []
        self._pending_since = 0.0
        self._sealed: deque[list[Mapping[str, Any]]] = deque()
        self._processing = 0
        self._outputs: deque[_Output] = deque()
        self._upstream_done = False
        self._failure: Exception | None = None
        self._stopped = False
        self._batches = 0
        self._worker: threading.Thread | None = None
        # downstream side
        self._subscriber: Subscriber[dict[str, Any]] | None = None
        self._election = EmitterElection()
        # Downstream emission (and the upstream requests it makes) runs on its own thread,
        # so converting batch k to dicts overlaps with Spark computing batch k + 1.
        self._emitter = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="rs-spark-processor-emit"
        )
        self._drain = DrainLoop(
            self._drain_pass,
            executor=self._emitter,
            on_rejected=self._on_rejected,
            guard=self._election,
        )
        self._cleaned = False

    # ================================================================== upstream
    def _claim(self, subscription: Subscription) -> bool:
        with self._cond:
            duplicate = self._upstream is not None
            stopped = self._stopped
            if not duplicate:
                self._upstream = subscription
                if not stopped:
                    self._outstanding = self._budget
        return not duplicate and not stopped

    def on_subscribe(self, subscription: Subscription) -> None:
        """Take the upstream subscription, request the budget and start the Spark thread."""
        if not accept_subscription(subscription, self._claim):
            return  # Rule 2.5, or cancelled before upstream arrived
        self._worker = threading.Thread(target=self._work, name="rs-spark-processor", daemon=True)
        self._worker.start()
        subscription.request(self._budget)

    def on_next(self, element: Mapping[str, Any]) -> None:
        """Add a row to the batch being collected; a full batch goes to Spark.

        Raises:
            TypeError: ``element`` is ``None`` (Rule 2.13).
        """
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        overflow = False
        with self._cond:
            if self._stopped:
                return  # cancelled or failed: late elements are allowed (Rule 2.8)
            if self._outstanding == 0:
                overflow = True
                self._failure = MissingBackpressureError(
                    f"Rule 1.1: spark_processor's upstream sent more rows than the "
                    f"{self._budget} it requested"
                )
                self._stopped = True
            else:
                self._outstanding -= 1
                self._held += 1
                if not self._pending:
                    self._pending_since = time.monotonic()
                self._pending.append(element)
                if len(self._pending) >= self._batch_rows:
                    self._sealed.append(self._pending)
                    self._pending = []
            self._cond.notify_all()
            upstream = self._upstream
        if overflow:
            if upstream is not None:
                upstream.cancel()
            self._drain.schedule()

    def on_error(self, error: Exception) -> None:
        """Pass the upstream error downstream at once (Rule 4.2); rows held are dropped.

        Raises:
            TypeError: ``error`` is ``None`` (Rule 2.13).
        """
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        with self._cond:
            if self._failure is None:
                self._failure = error
            self._stopped = True
            self._cond.notify_all()
        self._drain.schedule()

    def on_complete(self) -> None:
        """Flush the last partial batch; complete once every result row was emitted."""
        with self._cond:
            self._upstream_done = True
            if self._pending:
                self._sealed.append(self._pending)
                self._pending = []
            self._cond.notify_all()
        self._drain.schedule()

    # ================================================================== Spark thread
    def _next_batch(self) -> list[Mapping[str, Any]] | None:
        """Wait for a batch to process; ``None`` when there will be none."""
        with self._cond:
            while True:
                if self._stopped:
                    return None
                if self._sealed:
                    self._processing += 1
                    return self._sealed.popleft()
                if self._upstream_done:
                    return None
                timeout = _WAIT_SLICE
                if self._pending:
                    due = self._pending_since + self._flush_interval - time.monotonic()
                    if due <= 0:
                        self._sealed.append(self._pending)
                        self._pending = []
                        continue
                    timeout = min(timeout, due)
                self._cond.wait(timeout)

    def _work(self) -> None:
        while (rows := self._next_batch()) is not None:
            try:
                result = self._run_spark(rows)
            except Exception as exc:
                with self._cond:
                    index = self._batches
                    stopped = self._stopped
                    self._processing -= 1
                    self._stopped = True
                    if self._failure is None and not stopped:
                        failure = SparkTransformError(
                            f"spark_processor batch {index} ({len(rows)} rows) failed: "
                            f"{type(exc).__name__}: {exc}"
                        )
                        failure.__cause__ = exc
                        self._failure = failure
                    upstream = self._upstream
                if stopped:
                    report_undeliverable(exc)
                elif upstream is not None:
                    upstream.cancel()
                self._drain.schedule()
                return
            with self._cond:
                self._batches += 1
                self._processing -= 1
                self._outputs.append(_Output(table=result, input_rows=len(rows)))
            self._drain.schedule()
        self._drain.schedule()  # upstream done: the drain loop may now complete

    def _run_spark(self, rows: list[Mapping[str, Any]]) -> Any:
        table = pa.Table.from_pylist(rows, schema=self._arrow_schema)
        frame = self._spark.createDataFrame(table)
        transformed = self._transform(frame)
        return transformed.toArrow()

    # ================================================================== downstream
    def subscribe(self, subscriber: Subscriber[dict[str, Any]]) -> None:
        """Attach the one downstream subscriber; any other gets ``on_error`` (Rule 1.9).

        Raises:
            TypeError: ``subscriber`` is ``None`` (Rule 1.9).
        """
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe(None)")
        with self._cond:
            taken = self._subscriber is not None
            if not taken:
                self._subscriber = subscriber
        if taken:
            if signal_on_subscribe(subscriber, _NoSubscription()):
                signal_on_error(
                    subscriber,
                    ValueError("spark_processor supports one subscriber (Rule 1.11)"),
                )
            return
        if not signal_on_subscribe(subscriber, self):
            self.cancel()
        self._drain.schedule()  # an upstream that already ended can be signalled now

    def request(self, n: int) -> None:
        """Downstream demand, in output rows (Rules 3.9, 3.17)."""
        if self._election.request(n):
            self._drain.start_owned()

    def cancel(self) -> None:
        """Cancel upstream and drop every batch (Rule 3.13)."""
        if self._election.cancel():
            self._drain.start_owned()
        else:
            self._stop_upstream()

    def _on_rejected(self, error: ExecutorRejectedError) -> None:
        """The emitter was shut down: expected once the stream has ended."""
        if not (self._election.terminated or self._election.cancelled):
            report_undeliverable(error)

    def _stop_upstream(self) -> None:
        self._emitter.shutdown(wait=False)
        with self._cond:
            if self._cleaned:
                return
            self._cleaned = True
            finished = self._upstream_done or self._failure is not None
            self._stopped = True
            self._pending = []
            self._sealed.clear()
            self._outputs.clear()
            self._cond.notify_all()
            upstream = self._upstream
        if upstream is not None and not finished:
            upstream.cancel()

    def statistics(self) -> StreamStatistics:
        """Downstream counters; ``buffered`` counts input rows held anywhere in the stage."""
        with self._cond:
            held = self._held
        return StreamStatistics(
            requested=self._election.requested,
            delivered=self._election.delivered,
            buffered=held,
            cancelled=self._election.cancelled,
            terminated=self._election.terminated,
        )

    @property
    def upstream_outstanding(self) -> int:
        """Rows requested upstream and not received yet (for tests and monitoring)."""
        with self._cond:
            return self._outstanding

    def _take_rows(self, limit: int) -> tuple[list[dict[str, Any]], int]:
        """Up to ``limit`` output rows, and the input rows released by finished batches."""
        released = 0
        with self._cond:
            while self._outputs:
                head = self._outputs[0]
                if head.offset < head.table.num_rows:
                    break
                self._outputs.popleft()
                released += head.input_rows
            if not self._outputs:
                return [], released
            head = self._outputs[0]
            count = min(limit, head.table.num_rows - head.offset, _EMIT_CHUNK)
            chunk = head.table.slice(head.offset, count)
            head.offset += count
            if head.offset == head.table.num_rows:  # the batch is fully taken: release it
                self._outputs.popleft()
                released += head.input_rows
        return chunk.to_pylist(), released

    def _release(self, count: int) -> None:
        """Return ``count`` input rows to the budget and request them again."""
        if count == 0:
            return
        with self._cond:
            self._held -= count
            if self._stopped or self._upstream_done:
                return
            free = self._budget - self._held - self._outstanding
            if free <= 0:
                return
            self._outstanding += free
            upstream = self._upstream
        if upstream is not None:
            upstream.request(free)

    def _finished(self) -> bool:
        with self._cond:
            return (
                self._upstream_done
                and not self._pending
                and not self._sealed
                and self._processing == 0
                and not self._outputs
            )

    def _drain_pass(self) -> bool:
        election = self._election
        subscriber = self._subscriber
        if subscriber is None or election.terminated:
            return False
        if election.cancelled:
            self._stop_upstream()
            return False
        error = election.take_error()
        if error is not None:  # Rule 3.9
            election.terminate()
            self._stop_upstream()
            signal_on_error(subscriber, error)
            return False
        with self._cond:
            failure = self._failure
        if failure is not None:
            election.terminate()
            self._stop_upstream()
            signal_on_error(subscriber, failure)
            return False
        demand = election.demand
        emitted = 0
        while emitted < demand:
            rows, released = self._take_rows(demand - emitted)
            self._release(released)
            if not rows:
                break
            for row in rows:
                if not signal_on_next(subscriber, row):
                    election.produced(emitted)
                    election.cancel()
                    self._stop_upstream()
                    return False
                emitted += 1
        if emitted:
            election.produced(emitted)
        if self._finished():
            election.terminate()
            self._emitter.shutdown(wait=False)
            signal_on_complete(subscriber)
        return False


def spark_processor(
    transform: Callable[[DataFrame], DataFrame],
    spark: SparkSession,
    *,
    batch_rows: int = 50_000,
    flush_interval: float = 1.0,
    max_in_flight: int = 2,
    schema: StructType | str | None = None,
) -> SparkProcessor:
    """Spark as a processing stage: ``dict`` rows in, ``transform`` on Spark, ``dict`` rows out.

    Rows are collected into batches of ``batch_rows`` (a partial batch is sent after
    ``flush_interval`` seconds, or when upstream completes); each batch becomes a
    ``pyarrow.Table`` and a DataFrame, ``transform(DataFrame) -> DataFrame`` runs on
    Spark, and the result rows are emitted as downstream demands them. Every Spark call
    costs tens of milliseconds however small, so batches of tens of thousands of rows
    are the point; 50,000 is the measured default (see ``docs/spark.md``).

    Args:
        transform: builds the output DataFrame from a batch's DataFrame, e.g.
            ``lambda df: df.where("amount > 0").withColumn(...)``. It runs once per batch,
            on the stage's Spark thread.
        spark: the session (classic, or Spark Connect).
        batch_rows: rows per Spark call, at most.
        flush_interval: seconds a partial batch may wait for more rows.
        max_in_flight: batches of input that may be requested or held at once.
        schema: the input rows' schema (``StructType`` or DDL); inferred per batch by
            Arrow when ``None``.

    Returns:
        The processor: subscribe it to a ``Publisher[dict]``, and subscribe one
        subscriber to it.

    Backpressure:
        Upstream demand never exceeds ``batch_rows * max_in_flight`` rows requested or
        held; a batch's rows are requested again only when all of its output rows were
        delivered. Downstream demand is counted in output rows.

    Concurrency:
        Spark calls run on one dedicated thread, one batch at a time; downstream signals
        come from a second dedicated thread (a drain loop, so they are serial) and
        overlap with Spark's work on the next batch; upstream signals may come from any
        thread.

    Raises:
        ValueError: ``batch_rows``, ``max_in_flight`` or ``flush_interval`` is not
            positive.

    Signals:
        ``on_error(SparkTransformError)`` naming the batch and Spark's error when the
        transform raises or its job fails (upstream is cancelled); an upstream error is
        passed on at once (Rule 4.2).
    """
    if batch_rows < 1 or max_in_flight < 1 or not flush_interval > 0:
        raise ValueError(
            "batch_rows and max_in_flight must be >= 1 and flush_interval > 0, got "
            f"{batch_rows}, {max_in_flight}, {flush_interval}"
        )
    struct: StructType | None
    if schema is None or isinstance(schema, StructType):
        struct = schema
    else:
        parsed = parse_ddl(schema)
        if not isinstance(parsed, StructType):
            raise TypeError(f"schema must describe a struct (columns), got {schema!r}")
        struct = parsed
    return SparkProcessor(
        transform,
        spark,
        batch_rows=batch_rows,
        flush_interval=flush_interval,
        max_in_flight=max_in_flight,
        schema=struct,
    )
