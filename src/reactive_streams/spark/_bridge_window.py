"""The demand window of ``to_spark_stream``: the subscriber side and what a read gets.

``DemandWindow`` subscribes to the publisher and holds its elements in a ``Window`` (rows
from sequence number ``base`` on) until Spark's reads take and acknowledge them. It turns
each read into demand: a micro-batch's ``read(start, max)`` acknowledges the rows below
``start``, requests what the batch lacks (plus the read-ahead triggers), waits a little
for the rows and answers with an Arrow IPC payload; a replay (``readBetweenOffsets``)
waits for exactly its rows. It knows nothing of sockets: ``handle(request)`` maps one
protocol request to its reply, and the server (``_bridge_server``) carries them.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
from pyspark.sql.pandas.types import to_arrow_schema

from .._core import (
    MissingBackpressureError,
    StreamStatistics,
    accept_subscription,
    add_demand,
    report_undeliverable,
)
from ..api import Subscriber, Subscription
from ._errors import BridgeClosedError
from ._window import BatchWindow, EncodeError, RowWindow, Window

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql.types import StructType

    from ..api import Publisher

__all__ = ["DemandWindow", "Element", "Reply"]

_POLL_TIMEOUT: Final = 1.0
_LINGER: Final = 0.05
_REPLAY_TIMEOUT: Final = 120.0
"""Seconds a replay waits for the publisher to deliver the rows it replays."""

Element: TypeAlias = "Mapping[str, Any] | pa.RecordBatch"
"""A ``to_spark_stream`` element: one row (``Mapping``), or a ``pyarrow.RecordBatch`` of rows."""

Reply: TypeAlias = "tuple[dict[str, Any], bytes | None]"
"""A protocol reply: the JSON control message, and an Arrow IPC payload if rows follow."""


class DemandWindow(Subscriber[Element]):
    """The publisher side of one ``to_spark_stream``: demand, the rows held, the replies.

    Backpressure: requests from the publisher only what the current micro-batch lacks,
    plus ``read_ahead_triggers`` whole triggers once a batch is handed to Spark. Rows: rows
    held plus outstanding demand never exceed ``row_budget``. Arrow (``arrow=True``): one
    batch is requested at a time, only while fewer rows than that are held, so at most one
    publisher batch more is held.

    Concurrency: publisher signals may come from any thread, reads from connection
    threads; the state is guarded by one condition, never held while the publisher is
    called.
    """

    def __init__(
        self,
        publisher: Publisher[Any],
        schema: StructType,
        *,
        stream_id: str,
        max_records_per_trigger: int,
        read_ahead_triggers: int = 0,
        arrow: bool = False,
        start_offset: int = 0,
    ) -> None:
        self.stream_id = stream_id
        self._publisher = publisher
        self._read_ahead = read_ahead_triggers
        self._arrow = arrow
        self._schema = schema
        self._arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self._required = [index for index, field in enumerate(schema.fields) if not field.nullable]
        self._max_records = max_records_per_trigger
        self._cond = threading.Condition()
        self._window: Window = BatchWindow(start_offset) if arrow else RowWindow(start_offset)
        self._target = 0  # rows wanted held or requested (see _top_up_locked)
        self._outstanding = 0
        self._requested = 0
        self._received = 0
        self._upstream: Subscription | None = None
        self._subscribed = False
        self._completed = False
        self._error: Exception | None = None
        self._failure: BridgeClosedError | None = None  # the bridge's own failure
        self._drained = False
        self._closed = False

    # ------------------------------------------------------------------ statistics
    def statistics(self) -> StreamStatistics:
        """Counters of the publisher side: requested from it, received, held here."""
        with self._cond:
            return StreamStatistics(
                requested=self._requested,
                delivered=self._received,
                buffered=self._window.held,
                cancelled=self._closed,
                terminated=self._completed or self._error is not None,
            )

    # ------------------------------------------------------------------- the subscriber
    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep the subscription; a second one is cancelled (Rule 2.5)."""
        accept_subscription(subscription, self._claim)

    def _claim(self, subscription: Subscription) -> bool:
        with self._cond:
            duplicate = self._upstream is not None
            if not duplicate:
                self._upstream = subscription
            return not duplicate and not self._closed

    def on_next(self, element: Element) -> None:
        """Hold ``element`` until a micro-batch takes it.

        An element of the wrong type (not a ``Mapping``, or with ``arrow=True`` not a
        ``pyarrow.RecordBatch``) fails the stream and cancels the publisher.

        Raises:
            TypeError: ``element`` is ``None`` (Rule 2.13).
        """
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        cancel = False
        more = 0
        with self._cond:
            if self._closed or self._failure is not None:
                return  # cancelled: late elements are allowed (Rule 2.8)
            if self._outstanding == 0:
                cancel = True
                self._failure = BridgeClosedError(
                    "Rule 1.1: the publisher sent more elements than the Spark stream "
                    f"requested (after {self._received} elements)"
                )
                self._failure.__cause__ = MissingBackpressureError("publisher ignored demand")
            else:
                self._outstanding -= 1
                self._received += 1
                try:
                    self._window.append(element)
                except TypeError as exc:
                    cancel = True
                    self._failure = BridgeClosedError(
                        f"element {self._received - 1} of to_spark_stream {self.stream_id}: {exc}"
                    )
                else:
                    more = self._top_up_locked()
            self._cond.notify_all()
            upstream = self._upstream
        if upstream is not None:
            if cancel:
                upstream.cancel()
            elif more:
                upstream.request(more)

    def on_error(self, error: Exception) -> None:
        """Fail the stream once the elements received before ``error`` were read.

        Raises:
            TypeError: ``error`` is ``None`` (Rule 2.13).
        """
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        with self._cond:
            self._error = error
            self._cond.notify_all()

    def on_complete(self) -> None:
        """Finish the stream once every element was read and acknowledged."""
        with self._cond:
            self._completed = True
            self._cond.notify_all()

    # ---------------------------------------------------------------- demand and reads
    def _subscribe_once(self) -> None:
        with self._cond:
            if self._subscribed:
                return
            self._subscribed = True
        try:
            self._publisher.subscribe(self)
        except Exception as exc:  # Rule 1.9 says it must not raise; fail the stream
            with self._cond:
                self._failure = BridgeClosedError(f"publisher.subscribe raised {exc!r}")
                self._failure.__cause__ = exc

    def prefetch(self) -> None:
        """Subscribe now and request the first trigger (plus the read-ahead ones).

        A streaming query takes seconds to start; with ``prefetch`` the publisher produces
        the first micro-batch's rows meanwhile, so they are waiting when Spark asks. The
        bound on rows held and requested is the same as without it. Idempotent; a bridge
        that already serves a query is unaffected. ``statistics()`` counts elements
        (rows, or record batches with ``arrow=True``) in ``requested``/``delivered`` and
        rows in ``buffered``.
        """
        self._subscribe_once()
        with self._cond:
            self._target = max(self._target, self.row_budget)
            more = self._top_up_locked()
            upstream = self._upstream
        if more and upstream is not None:
            upstream.request(more)

    @property
    def row_budget(self) -> int:
        """Rows held plus requested at most: ``max_records_per_trigger * (1 + read_ahead)``.

        With ``arrow=True`` the bridge may hold one publisher batch beyond it (a batch's
        size is only known when it arrives).
        """
        return self._max_records * (1 + self._read_ahead)

    def _top_up_locked(self) -> int:
        """How many elements to request now for ``_target`` rows (lock held); counted.

        Rows: whatever ``_target`` lacks, in one request. Arrow: one batch at a time (its
        size is unknown until it arrives), only while fewer than ``_target`` rows are held.
        """
        if self._completed or self._error is not None or self._closed or self._failure:
            return 0
        if self._arrow:
            more = 1 if self._outstanding == 0 and self._window.held < self._target else 0
        else:
            more = self._target - self._window.held - self._outstanding
        if more <= 0:
            return 0
        self._outstanding += more
        self._requested = add_demand(self._requested, more)
        return more

    def _wait_for_rows_locked(self, wanted: int, *, linger: float | None) -> None:
        """Wait until ``wanted`` rows are held, the stream ended, or it failed (lock held).

        ``linger``: once some rows are held, stop waiting after this many seconds (a
        micro-batch takes what arrived); ``None``: wait for all of them (a replay).
        """
        began = time.monotonic()
        while True:
            held = self._window.held
            ended = self._completed or self._error is not None or self._closed
            if held >= wanted or ended or self._failure is not None:
                return
            waited = time.monotonic() - began
            if linger is None:
                budget = _REPLAY_TIMEOUT - waited
            else:
                budget = (linger if held else _POLL_TIMEOUT) - waited
            if budget <= 0:
                return
            self._cond.wait(min(budget, _POLL_TIMEOUT))

    def _read(self, start: int, limit: int) -> tuple[dict[str, Any], bytes | None]:
        """Serve ``read(start)``: acknowledge below ``start``, top up demand, wait, reply."""
        self._subscribe_once()
        limit = max(1, min(limit, self._max_records))
        with self._cond:
            error = self._check_offset(start)
            if error is not None:
                return {"status": "error", "message": error}, None
            self._window.acknowledge(start)  # processed by Spark
            # Without read-ahead the target is this read's limit; with it, the whole budget.
            self._target = max(limit, self._target if self._read_ahead else 0)
            more = self._top_up_locked()
            upstream = self._upstream
        if more and upstream is not None:
            upstream.request(more)  # may deliver synchronously: no lock held
        with self._cond:
            # With read-ahead the next batch is normally waiting already; only the first
            # one fills while the publisher starts, so let it fill rather than go small.
            self._wait_for_rows_locked(limit, linger=_POLL_TIMEOUT if self._read_ahead else _LINGER)
            if self._failure is not None:
                return {"status": "error", "message": str(self._failure)}, None
            count = min(limit, self._window.held)
            if count == 0:
                return self._empty_reply(start), None
            if self._read_ahead:
                # The next trigger's rows, while Spark runs this one. The rows just handed
                # over stay held until the next read acknowledges them, so the budget
                # counts them.
                self._target = self.row_budget
            more = self._top_up_locked()
            upstream = self._upstream
        if more and upstream is not None:
            upstream.request(more)
        return self._reply(start, count)

    def _replay(self, start: int, end: int) -> tuple[dict[str, Any], bytes | None]:
        """Serve ``readBetweenOffsets(start, end)``: exactly the rows ``start..end - 1``.

        Spark replays a micro-batch that was planned but not committed when the query
        restarts from its checkpoint. The bridge can serve it when it was created at
        ``start_offset <= start`` over a publisher positioned there (the same input): the
        rows are requested and held (they stay until the next ``read`` acknowledges them).
        """
        self._subscribe_once()
        with self._cond:
            error = self._check_offset(start)
            if error is not None:
                return {"status": "error", "message": error}, None
            self._target = max(self._target, end - self._window.base)
            more = self._top_up_locked()
            upstream = self._upstream
        if more and upstream is not None:
            upstream.request(more)
        with self._cond:
            self._wait_for_rows_locked(end - self._window.base, linger=None)
            if self._failure is not None:
                return {"status": "error", "message": str(self._failure)}, None
            if self._window.end < end:
                return {
                    "status": "error",
                    "message": (
                        f"to_spark_stream {self.stream_id} cannot replay rows {start}..{end - 1}: "
                        f"the publisher {self._ended_how()} after row {self._window.end - 1} "
                        "(is it positioned at the checkpoint's offset, over the same input?)"
                    ),
                }, None
        return self._reply(start, end - start)

    def _ended_how(self) -> str:
        if self._error is not None:
            return f"failed ({type(self._error).__name__}: {self._error})"
        if self._completed:
            return "completed"
        if self._closed:
            return "was cancelled"
        return f"sent nothing for {_REPLAY_TIMEOUT:.0f} s"

    def _reply(self, start: int, count: int) -> tuple[dict[str, Any], bytes | None]:
        """Encode rows ``start..start + count - 1`` (converted with no lock held)."""
        with self._cond:
            taken = self._window.take(start, count)
        try:
            payload = self._encode(taken, start, count)
        except BridgeClosedError as exc:
            with self._cond:
                self._failure = exc
                upstream = self._upstream
            if upstream is not None:
                upstream.cancel()
            return {"status": "error", "message": str(exc)}, None
        return {"status": "ok", "count": count, "end": start + count, "done": False}, payload

    def _check_offset(self, start: int) -> str | None:
        window = self._window
        if self._closed and not self._drained:
            return (
                f"to_spark_stream {self.stream_id} is closed (cancelled, or its first query "
                "stopped): a live stream can be read by one query, once"
            )
        if start < window.base:
            return (
                f"to_spark_stream {self.stream_id} cannot replay from offset {start}: elements "
                f"below {window.base} were acknowledged and dropped (a live publisher is not "
                "replayable)"
            )
        if start > window.end:
            return (
                f"to_spark_stream {self.stream_id}: offset {start} is beyond the {window.end} "
                "elements sent (a checkpoint from another stream?)"
            )
        return None

    def _empty_reply(self, start: int) -> dict[str, Any]:
        """Reply to a read that found nothing (lock held)."""
        if self._error is not None:
            error = self._error
            return {
                "status": "error",
                "message": (
                    f"the publisher of to_spark_stream {self.stream_id} failed after "
                    f"{start} elements: {type(error).__name__}: {error}"
                ),
            }
        if self._completed:
            if not self._drained:
                self._drained = True
                threading.Thread(
                    target=self._on_drained, name="rs-spark-bridge-finish", daemon=True
                ).start()
            return {"status": "ok", "count": 0, "end": start, "done": True}
        return {"status": "ok", "count": 0, "end": start, "done": False}

    def _encode(self, taken: list[Any], start: int, count: int) -> bytes:
        try:
            batches = self._window.to_batches(taken, self._arrow_schema)
        except EncodeError as exc:
            raise BridgeClosedError(
                f"rows {start}..{start + count - 1} of to_spark_stream {self.stream_id} "
                f"do not fit the schema {self._schema.simpleString()}: {exc}"
            ) from exc
        for index in self._required:
            if any(batch.column(index).null_count for batch in batches):
                name = self._schema.fields[index].name
                raise BridgeClosedError(
                    f"rows {start}..{start + count - 1} of to_spark_stream "
                    f"{self.stream_id} have nulls in the non-nullable field {name!r}"
                )
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self._arrow_schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
        return bytes(sink.getvalue())

    @property
    def drained(self) -> bool:
        """Whether the publisher completed and Spark acknowledged every element."""
        with self._cond:
            return self._drained

    # ---------------------------------------------------------------- for the server
    def handle(self, request: Mapping[str, Any]) -> Reply:
        """The reply to one protocol request (``read`` or ``replay``); never raises."""
        op = request.get("op")
        try:
            if op == "read":
                return self._read(int(request["start"]), int(request["max"]))
            if op == "replay":
                return self._replay(int(request["start"]), int(request["end"]))
            return {"status": "error", "message": f"unknown request {op!r}"}, None
        except Exception as exc:  # a bug here must fail the query, not hang it
            report_undeliverable(exc)
            return {"status": "error", "message": f"bridge failure: {exc!r}"}, None

    @property
    def finished(self) -> bool:
        """Whether the stream ended (drained, failed upstream, or failed here)."""
        with self._cond:
            return self._drained or self._error is not None or self._failure is not None

    def cancel_upstream(self) -> bool:
        """Close the window and cancel the publisher unless it ended.

        Returns:
            ``False`` if the window was closed already.
        """
        with self._cond:
            if self._closed:
                return False
            self._closed = True
            upstream = self._upstream if not (self._completed or self._error) else None
            self._cond.notify_all()
        if upstream is not None:
            upstream.cancel()
        return True

    def _on_drained(self) -> None:
        """Called once (on a helper thread) when Spark acknowledged the last element."""
