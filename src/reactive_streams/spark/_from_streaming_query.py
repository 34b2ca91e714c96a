"""``from_streaming_query``: a streaming DataFrame's micro-batches as a ``Publisher``.

Subscribing starts the query with ``foreachBatch``. The ``foreachBatch`` function runs in
this process (py4j calls back into the driver's Python), and it does not return until the
subscriber has demand for one more batch: Spark cannot plan its next micro-batch before
the function returns, so a slow subscriber slows the whole query down (real
backpressure, nothing piles up). The batch is converted to a ``pyarrow.Table`` only once
demand is there.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .._core import EmitLoopSubscription, report_undeliverable
from ..api import Publisher, Subscriber
from ._errors import StreamingQueryFailedError
from .session import require_classic, spark_is_running

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["MicroBatch", "StreamingQueryPublisher", "from_streaming_query"]

_WAIT_SLICE: Final = 0.5
"""Seconds between cancel checks while ``foreachBatch`` waits for demand."""
_STOP_TIMEOUT: Final = 120.0
_BATCH: Final = 16
"""Batches per pass of the emit loop at most (one is queued at a time, in practice)."""


@dataclass(frozen=True, slots=True)
class MicroBatch:
    """One micro-batch of a streaming query.

    Attributes:
        batch_id: Spark's micro-batch id, increasing from 0. After a restart from a
            checkpoint, a batch that was not committed is replayed with the same
            ``batch_id`` (at-least-once): a subscriber that must see each batch once keeps
            the last ``batch_id`` it finished and skips ids at or below it.
        table: the batch's rows, shape ``(num_rows, num_columns)``, columns as in the
            streaming DataFrame's schema.
    """

    batch_id: int
    table: pa.Table


class _QuerySubscription(EmitLoopSubscription[MicroBatch]):
    """One subscription: one streaming query, its ``foreachBatch`` and its watcher.

    The kit's emit loop does the demand, the Rule 3.9 error, cancel and the one terminal
    signal. Its source is a queue that ``foreachBatch`` fills: when a pass finds demand
    that no batch covers, it invites one batch (``_invited``); ``foreachBatch`` waits for
    the invitation, converts its batch, queues it and wakes the loop, which delivers it on
    that thread. The watcher marks the query's end and wakes the loop for the terminal
    signal.
    """

    __slots__ = (
        "_cond",
        "_end_error",
        "_ended",
        "_invited",
        "_publisher",
        "_query_ready",
        "_queue",
        "_reserved",
        "_stopper",
        "_stopping",
        "query",
    )

    def __init__(
        self,
        subscriber: Subscriber[MicroBatch],
        publisher: StreamingQueryPublisher,
    ) -> None:
        super().__init__(subscriber, batch_size=_BATCH)
        self._publisher = publisher
        self._cond = threading.Condition()
        self._queue: deque[MicroBatch] = deque()
        self._invited = False  # a pass saw demand no batch covers: foreachBatch may go on
        self._reserved = False  # foreachBatch took the invitation and converts its batch
        self._ended = False  # the query ended (or never started): the source is over
        self._end_error: Exception | None = None
        self._stopping = False
        self._stopper: threading.Thread | None = None
        self.query: StreamingQuery | None = None
        self._query_ready = threading.Event()

    @property
    def cancelled(self) -> bool:
        """Whether the subscription was cancelled or has ended."""
        return self._election.cancelled

    # -- the source of the emit loop ------------------------------------------------------

    def _open(self) -> None:
        """Nothing to prepare: ``subscribe`` starts the query after ``on_subscribe``."""

    def _emit(self, subscriber: Subscriber[MicroBatch], count: int) -> int:
        return self._deliver_each(subscriber, self._queued(count))

    def _queued(self, count: int) -> Iterator[MicroBatch]:
        """Up to ``count`` queued batches; at the empty queue, invite ``foreachBatch``."""
        for _ in range(count):
            with self._cond:
                if not self._queue:
                    if not self._reserved:  # demand left: foreachBatch may take a batch
                        self._invited = True
                        self._cond.notify_all()
                    return
                batch = self._queue.popleft()
            yield batch

    def _exhausted(self) -> bool:
        with self._cond:
            return self._ended and not self._queue

    def _failure(self) -> Exception | None:
        with self._cond:  # after the batches queued before the end
            return self._end_error if not self._queue else None

    def _buffered(self) -> int:
        with self._cond:
            return len(self._queue)

    def _close(self) -> None:
        with self._cond:
            ended = self._ended
            self._cond.notify_all()  # a foreachBatch waiting for demand sees the end now
        if not ended:  # cancelled, a Rule 3.9 error, on_next raised: stop the query
            self._stop_query_async()

    def _end(self, error: Exception | None) -> None:
        """The query ended (``None``: finished) or never started: the terminal signal."""
        with self._cond:
            self._ended = True
            self._end_error = error
        self.wake()

    def _stop_query_async(self) -> None:
        with self._cond:
            if self._stopping:
                return
            self._stopping = True
            self._stopper = threading.Thread(
                target=self._stop_query, name="rs-spark-query-stop", daemon=True
            )
        self._stopper.start()

    def wait_stopped(self, timeout: float) -> bool:
        """Wait until a stop started by cancel or failure returned; ``True`` if none runs.

        Stop the session only after this: a query still stopping when it goes fails.
        """
        with self._cond:
            stopper = self._stopper
        if stopper is None:
            return True
        stopper.join(timeout)
        return not stopper.is_alive()

    def _stop_query(self) -> None:
        if not self._query_ready.wait(_STOP_TIMEOUT):
            return
        if self.query is not None:
            try:
                self.query.stop()
            except Exception as exc:
                if not spark_is_running():
                    return  # the session was stopped meanwhile, and the query with it
                report_undeliverable(exc)

    def for_each_batch(self, batch_df: DataFrame, batch_id: int) -> None:
        """Spark's ``foreachBatch``: wait for demand, then hand the batch on.

        Raises:
            SubscriberCancelledError: the subscriber cancelled; the batch is not committed,
                so a restart from the checkpoint replays it.
        """
        election = self._election
        with self._cond:
            while not self._invited and not election.cancelled:
                self._cond.wait(_WAIT_SLICE)  # a timed slice: cancel is re-checked
            if election.cancelled:
                raise _SubscriberCancelledError(
                    f"the subscriber of micro-batch {batch_id} cancelled; the batch is left "
                    "uncommitted"
                )
            self._invited = False
            self._reserved = True  # one unit of demand is this batch's (Rule 1.1)
        try:
            table = batch_df.toArrow()
        finally:
            with self._cond:
                self._reserved = False
        with self._cond:
            if election.cancelled:
                raise _SubscriberCancelledError(
                    f"the subscriber of micro-batch {batch_id} cancelled"
                )
            self._queue.append(MicroBatch(int(batch_id), table))
        self.wake()

    def watch(self, query: StreamingQuery) -> None:
        """Wait for the query to end, then send the terminal signal (exactly one).

        Every way out ends the stream: the query finished (``on_complete``), it failed
        (``on_error`` naming Spark's error), or the driver JVM cannot be reached any more
        (it died, e.g. killed by the kernel's OOM killer): then both ``awaitTermination``
        and ``exception`` raise py4j's connection errors, and the subscriber gets an
        ``on_error`` saying so instead of waiting forever.
        """
        error: StreamingQueryFailedError | None = None
        try:
            while True:
                try:
                    if query.awaitTermination(2):
                        break
                except Exception:  # the query's failure, or a lost connection: told below
                    break
            failure = query.exception()
            if failure is not None:
                error = StreamingQueryFailedError(
                    f"the streaming query {query.name or query.id} failed: {failure}"
                )
                error.__cause__ = failure
        except Exception as exc:  # py4j cannot reach the JVM: still one terminal signal
            error = StreamingQueryFailedError(
                "the connection to the Spark driver was lost (did the driver's JVM die?): "
                f"{type(exc).__name__}: {exc}".splitlines()[0]
            )
            error.__cause__ = exc
        self._end(error)  # a no-op if the subscriber (or a Rule 3.9 error) ended it already


class _SubscriberCancelledError(Exception):
    """Raised inside ``foreachBatch`` so that a cancelled batch is not committed."""


class StreamingQueryPublisher(Publisher[MicroBatch]):
    """Publishes the micro-batches of one streaming DataFrame; each subscriber starts a query.

    Backpressure: ``foreachBatch`` returns only after reserving one unit of demand, so at
    most one batch waits here; Spark starts no new batch until it returns.

    Concurrency: ``on_next`` is called on Spark's ``foreachBatch`` thread, terminal signals
    on a watcher thread; the subscription's one emit loop keeps them serial (Rule 1.3).
    """

    def __init__(
        self,
        streaming_df: DataFrame,
        *,
        output_mode: str = "append",
        checkpoint_location: str | None = None,
        trigger: Mapping[str, Any] | None = None,
        query_name: str | None = None,
    ) -> None:
        require_classic(streaming_df, "from_streaming_query")
        if not streaming_df.isStreaming:
            raise ValueError("from_streaming_query needs a streaming DataFrame (readStream)")
        self._df = streaming_df
        self._output_mode = output_mode
        self._checkpoint = checkpoint_location
        self._trigger = dict(trigger) if trigger else None
        self._query_name = query_name
        self._lock = threading.Lock()
        self.subscriptions: list[_QuerySubscription] = []
        """The subscriptions that are live, or ended after the latest ``subscribe``."""

    def subscribe(self, subscriber: Subscriber[MicroBatch]) -> None:
        """Start a streaming query for ``subscriber`` (Rule 1.9: ``on_subscribe`` first).

        Raises:
            TypeError: ``subscriber`` is ``None`` (Rule 1.9).
        """
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe(None)")
        subscription = _QuerySubscription(subscriber, self)
        with self._lock:
            # Finished subscriptions are dropped here, so the list holds the live ones (and
            # those that ended since the last subscribe), not every subscriber ever.
            self.subscriptions[:] = [
                *(old for old in self.subscriptions if not old.cancelled),
                subscription,
            ]
        subscription.start()  # on_subscribe, and whatever it requested or cancelled
        if subscription.cancelled:  # cancelled (or failed, Rule 3.9) from on_subscribe
            subscription._query_ready.set()
            return
        try:
            writer = self._df.writeStream.foreachBatch(subscription.for_each_batch).outputMode(
                self._output_mode
            )
            if self._checkpoint is not None:
                writer = writer.option("checkpointLocation", self._checkpoint)
            if self._trigger is not None:
                writer = writer.trigger(**self._trigger)
            if self._query_name is not None:
                writer = writer.queryName(self._query_name)
            query = writer.start()
        except Exception as exc:
            subscription._query_ready.set()
            error = StreamingQueryFailedError(f"the streaming query could not start: {exc}")
            error.__cause__ = exc
            subscription._end(error)
            return
        subscription.query = query
        subscription._query_ready.set()
        threading.Thread(
            target=subscription.watch, args=(query,), name="rs-spark-query-watch", daemon=True
        ).start()


def from_streaming_query(
    streaming_df: DataFrame,
    *,
    output_mode: str = "append",
    checkpoint_location: str | None = None,
    trigger: Mapping[str, Any] | None = None,
    query_name: str | None = None,
) -> StreamingQueryPublisher:
    """A ``Publisher[MicroBatch]`` over a streaming DataFrame; subscribing starts the query.

    Each micro-batch becomes one ``MicroBatch(batch_id, table)``, converted to a
    ``pyarrow.Table`` and delivered only when the subscriber has demand: ``foreachBatch``
    blocks until then (checking for cancellation every 0.5 s), which holds back Spark's
    next trigger. ``cancel`` stops the query; a failed query becomes ``on_error`` with a
    ``StreamingQueryFailedError`` whose message names Spark's error (``__cause__``); a
    query that finishes (finite input, ``availableNow``, or the end of a
    ``to_spark_stream``) becomes ``on_complete``.

    Replay: with ``checkpoint_location``, a batch whose ``foreachBatch`` did not return
    (the process died, or the subscriber cancelled while it waited) is not committed, and a
    restarted query replays it with the same ``batch_id`` (at-least-once). Deduplicate by
    remembering the last ``batch_id`` fully handled and skipping ids at or below it.

    Args:
        streaming_df: a streaming DataFrame of a classic session.
        output_mode: ``"append"``, ``"update"`` or ``"complete"``.
        checkpoint_location: Spark's checkpoint directory, for restarts.
        trigger: keyword arguments of ``DataStreamWriter.trigger``, e.g.
            ``{"processingTime": "1 second"}`` or ``{"availableNow": True}``.
        query_name: the query's name (shown in errors and Spark's UI).

    Returns:
        A publisher; each subscriber starts its own query.

    Backpressure:
        One batch at a time: Spark waits in ``foreachBatch`` for demand.

    Concurrency:
        Signals come from Spark's callback thread and a watcher thread, serialised by the
        subscription's emit loop (Rule 1.3); a Rule 3.9 error or a cancel is handled on
        the thread that calls ``request`` or ``cancel``.

    Raises:
        SparkConnectUnsupportedError: a Spark Connect DataFrame (``foreachBatch`` would
            run on the server).
        ValueError: ``streaming_df`` is not streaming.
    """
    return StreamingQueryPublisher(
        streaming_df,
        output_mode=output_mode,
        checkpoint_location=checkpoint_location,
        trigger=trigger,
        query_name=query_name,
    )
