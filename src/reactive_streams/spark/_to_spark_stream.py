"""``to_spark_stream``: any ``Publisher[dict]`` as a streaming DataFrame.

The publisher lives in this process; Spark's data source methods do not (they run in a
runner process the driver JVM starts per query). So this process serves a loopback bridge:
a TCP server bound to ``127.0.0.1`` on an ephemeral port, which accepts only connections
that present the stream's random token (others are refused and logged). The data source is
a driver-side ``SimpleDataSourceStreamReader`` (see ``_stream_source``), so executors never
connect here and the bridge works unchanged on a cluster.

Demand: each micro-batch's ``read(start)`` asks for at most ``max_records_per_trigger``
elements; the bridge requests from the publisher only what is missing for that, so the
elements held here plus the outstanding demand never exceed ``max_records_per_trigger``.
``start`` acknowledges every element below it: Spark plans a batch from ``start`` only after
the batches below it were processed (it calls ``commit`` later still, while planning).
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import re
import secrets
import socket
import sys
import threading
import time
import uuid
import weakref
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
from pyspark import cloudpickle
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from .._demand import add_demand
from .._exceptions import MissingBackpressureError
from .._hooks import report_undeliverable
from .._statistics import StreamStatistics
from ..api import Subscriber, Subscription
from . import _stream_source
from ._errors import BridgeClosedError
from ._pyspark_internals import parse_ddl, source_names
from ._stream_source import (
    PROTOCOL_VERSION,
    BridgeDataSource,
    BridgeProtocolError,
    recv_json,
    send_frame,
    send_json,
)
from ._window import BatchWindow, EncodeError, RowWindow, Window
from .session import require_classic

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import DataFrame, SparkSession

    from ..api import Publisher

__all__ = ["SparkStreamBridge", "to_spark_stream", "to_spark_stream_bridge"]

logger = logging.getLogger("reactive_streams.spark")

# Spark's runner unpickles the data source; pickling its module by value means the runner
# (and, on a cluster, the driver host's Python) needs pyspark and pyarrow, not this package.
cloudpickle.register_pickle_by_value(sys.modules[_stream_source.__name__])  # type: ignore[no-untyped-call,unused-ignore]

_FORMAT_PREFIX: Final = "reactive_streams_bridge_"
_FORMAT_RE: Final = re.compile(_FORMAT_PREFIX + r"[0-9a-f]{32}")
_HANDSHAKE_TIMEOUT: Final = 10.0
_POLL_TIMEOUT: Final = 1.0
_LINGER: Final = 0.05
_REPLAY_TIMEOUT: Final = 120.0
"""Seconds a replay waits for the publisher to deliver the rows it replays."""

# format name -> bridge, to decide when a query reading several bridges has drained them all.
_BRIDGES: weakref.WeakValueDictionary[str, SparkStreamBridge] = weakref.WeakValueDictionary()


Element: TypeAlias = "Mapping[str, Any] | pa.RecordBatch"
"""A ``to_spark_stream`` element: one row (``Mapping``), or a ``pyarrow.RecordBatch`` of rows."""


class SparkStreamBridge(Subscriber[Element]):
    """The loopback bridge of one ``to_spark_stream``: a subscriber here, a server for Spark.

    Create it with ``to_spark_stream_bridge``; ``dataframe`` is the streaming DataFrame.
    The publisher is subscribed when the first streaming query reads the stream (or when
    ``prefetch`` is called), not before, so a DataFrame that is never started consumes
    nothing.

    Backpressure: the bridge requests from the publisher only what the current micro-batch
    lacks, plus ``read_ahead_triggers`` whole triggers once a batch is handed to Spark.
    Rows: rows held plus outstanding demand never exceed
    ``max_records_per_trigger * (1 + read_ahead_triggers)``. Arrow (``arrow=True``): one
    batch is requested at a time, only while fewer rows than that are held, so at most one
    publisher batch more is held.

    Concurrency: publisher signals may come from any thread; Spark's reads arrive on one
    connection thread; the state is guarded by one condition, never held while the
    publisher or Spark is called.
    """

    def __init__(
        self,
        publisher: Publisher[Any],
        spark: SparkSession,
        schema: StructType,
        *,
        max_records_per_trigger: int,
        read_ahead_triggers: int = 0,
        arrow: bool = False,
        start_offset: int = 0,
    ) -> None:
        self._publisher = publisher
        self._read_ahead = read_ahead_triggers
        self._arrow = arrow
        self._spark = spark
        self._schema = schema
        self._arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self._required = [index for index, field in enumerate(schema.fields) if not field.nullable]
        self._max_records = max_records_per_trigger
        self.stream_id = uuid.uuid4().hex
        self.format_name = _FORMAT_PREFIX + self.stream_id
        self._token = secrets.token_urlsafe(32)
        self._cond = threading.Condition()
        self._window: Window = BatchWindow(start_offset) if arrow else RowWindow(start_offset)
        self._target = 0  # rows the bridge wants held or requested (see _top_up_locked)
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
        self._reader_active = False
        self._refused = 0
        self._connections: set[socket.socket] = set()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.address: tuple[str, int] = self._server.getsockname()[:2]
        _BRIDGES[self.format_name] = self
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"rs-spark-bridge-{self.stream_id[:8]}", daemon=True
        )
        self._acceptor.start()
        source = type(
            f"BridgeDataSource_{self.stream_id}",
            (BridgeDataSource,),
            {"format_name": self.format_name, "__module__": BridgeDataSource.__module__},
        )
        spark.dataSource.register(source)
        self.dataframe: DataFrame = (
            spark.readStream.format(self.format_name)
            .schema(schema)
            .option("host", self.address[0])
            .option("port", str(self.address[1]))
            .option("token", self._token)
            .option("stream", self.stream_id)
            .option("max_records_per_trigger", str(max_records_per_trigger))
            .option("start_offset", str(start_offset))
            .load()
        )

    # ----------------------------------------------------------------- statistics, close
    @property
    def refused_connections(self) -> int:
        """How many connections were refused (wrong or missing token, bad handshake)."""
        with self._cond:
            return self._refused

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

    def close(self) -> None:
        """Cancel the publisher (if not finished), stop serving, close every connection."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            upstream = self._upstream if not (self._completed or self._error) else None
            connections = list(self._connections)
            self._cond.notify_all()
        if upstream is not None:
            upstream.cancel()
        for conn in connections:
            _shutdown(conn)
        _shutdown(self._server)

    # ------------------------------------------------------------------- the subscriber
    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep the subscription; a second one is cancelled (Rule 2.5)."""
        if subscription is None:
            raise TypeError("Rule 2.13: on_subscribe(None)")
        with self._cond:
            duplicate = self._upstream is not None
            cancel_now = not duplicate and self._closed
            if not duplicate:
                self._upstream = subscription
        if duplicate or cancel_now:
            subscription.cancel()

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

    # --------------------------------------------------------------------- the server
    def _accept_loop(self) -> None:
        while True:
            try:
                conn, peer = self._server.accept()
            except OSError:
                return  # closed
            threading.Thread(
                target=self._serve, args=(conn, peer), name="rs-spark-bridge-conn", daemon=True
            ).start()

    def _refuse(self, conn: socket.socket, peer: Any, reason: str) -> None:
        with self._cond:
            self._refused += 1
        logger.warning(
            "to_spark_stream bridge %s refused a connection from %s: %s",
            self.stream_id,
            peer,
            reason,
        )
        _shutdown(conn)

    def _serve(self, conn: socket.socket, peer: Any) -> None:
        conn.settimeout(_HANDSHAKE_TIMEOUT)
        try:
            hello = recv_json(conn)
        except (OSError, EOFError, BridgeProtocolError) as exc:
            self._refuse(conn, peer, f"no valid handshake ({exc!r})")
            return
        token = hello.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(
            token.encode("utf-8"), self._token.encode("utf-8")
        ):
            self._refuse(conn, peer, "missing or wrong token")
            return
        if hello.get("version") != PROTOCOL_VERSION:
            self._refuse(conn, peer, f"unsupported protocol version {hello.get('version')!r}")
            return
        if hello.get("role") == "replay":
            # A replay runs in a Spark task, beside the query's reader: it does not take the
            # reader's place, and its connection serves that one request.
            conn.settimeout(None)
            try:
                self._serve_requests(conn, once=True)
            finally:
                _shutdown(conn)
            return
        with self._cond:
            busy = self._reader_active
            if not busy:
                self._reader_active = True
                self._connections.add(conn)
        if busy:
            self._refuse(conn, peer, "the stream is already read by another streaming query")
            return
        conn.settimeout(None)  # reads come when Spark plans a batch: arbitrarily far apart
        try:
            self._serve_requests(conn, once=False)
        finally:
            with self._cond:
                self._connections.discard(conn)
                self._reader_active = False
                finished = self._drained or self._error is not None or self._failure is not None
            _shutdown(conn)
            if not finished:
                # The query stopped or failed before the stream ended: nobody will read on.
                self.close()

    def _serve_requests(self, conn: socket.socket, *, once: bool) -> None:
        while True:
            try:
                request = recv_json(conn)
            except (OSError, EOFError, BridgeProtocolError):
                return
            op = request.get("op")
            try:
                if op == "read":
                    reply, payload = self._read(int(request["start"]), int(request["max"]))
                elif op == "replay":
                    reply, payload = self._replay(int(request["start"]), int(request["end"]))
                else:
                    reply, payload = {"status": "error", "message": f"unknown request {op!r}"}, None
            except Exception as exc:  # a bug here must fail the query, not hang it
                report_undeliverable(exc)
                reply, payload = {"status": "error", "message": f"bridge failure: {exc!r}"}, None
            try:
                send_json(conn, reply)
                if payload is not None:
                    send_frame(conn, payload)
            except OSError:
                return
            if reply["status"] != "ok" or once:
                return

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
                    target=self._finish_queries, name="rs-spark-bridge-finish", daemon=True
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

    def _finish_queries(self) -> None:
        """Stop each active query whose bridge sources have all drained (completion)."""
        for query in list(self._spark.streams.active):
            try:
                names = source_names(query, _FORMAT_RE)
            except Exception as exc:  # py4j internals moved: say so, do not hang silently
                report_undeliverable(exc)
                continue
            if self.format_name not in names:
                continue
            bridges = [_BRIDGES.get(name) for name in names]
            if all(bridge is not None and bridge.drained for bridge in bridges):
                try:
                    query.stop()
                except Exception as exc:
                    report_undeliverable(exc)
        with self._cond:
            self._closed = True
        _shutdown(self._server)

    @property
    def drained(self) -> bool:
        """Whether the publisher completed and Spark acknowledged every element."""
        with self._cond:
            return self._drained


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def as_struct(spark: SparkSession, schema: StructType | str) -> StructType:
    """``schema`` as a ``StructType`` (a DDL string is parsed).

    Raises:
        TypeError: ``schema`` does not describe a struct.
    """
    if isinstance(schema, StructType):
        return schema
    parsed = parse_ddl(schema)
    if not isinstance(parsed, StructType):
        raise TypeError(f"schema must describe a struct (columns), got {schema!r}")
    return parsed


def to_spark_stream_bridge(
    publisher: Publisher[Mapping[str, Any]] | Publisher[pa.RecordBatch],
    spark: SparkSession,
    schema: StructType | str,
    *,
    max_records_per_trigger: int = 10_000,
    read_ahead_triggers: int = 0,
    arrow: bool = False,
    start_offset: int = 0,
) -> SparkStreamBridge:
    """Like ``to_spark_stream``, but return the bridge (``prefetch``, statistics, ``close``).

    Raises:
        SparkConnectUnsupportedError: ``spark`` is a Spark Connect session.
        ValueError: ``max_records_per_trigger < 1``, ``read_ahead_triggers < 0`` or
            ``start_offset < 0``.
        TypeError: ``schema`` is not a struct.
    """
    require_classic(spark, "to_spark_stream")
    if isinstance(max_records_per_trigger, bool) or max_records_per_trigger < 1:
        raise ValueError(f"max_records_per_trigger must be >= 1, got {max_records_per_trigger}")
    if type(read_ahead_triggers) is not int or read_ahead_triggers < 0:
        raise ValueError(f"read_ahead_triggers must be an int >= 0, got {read_ahead_triggers!r}")
    if type(start_offset) is not int or start_offset < 0:
        raise ValueError(f"start_offset must be an int >= 0, got {start_offset!r}")
    return SparkStreamBridge(
        publisher,
        spark,
        as_struct(spark, schema),
        max_records_per_trigger=max_records_per_trigger,
        read_ahead_triggers=read_ahead_triggers,
        arrow=bool(arrow),
        start_offset=start_offset,
    )


def to_spark_stream(
    publisher: Publisher[Mapping[str, Any]] | Publisher[pa.RecordBatch],
    spark: SparkSession,
    schema: StructType | str,
    *,
    max_records_per_trigger: int = 10_000,
    read_ahead_triggers: int = 0,
    arrow: bool = False,
    start_offset: int = 0,
) -> DataFrame:
    """A streaming DataFrame fed by ``publisher``, with Spark's batches as its demand.

    Each element is one row: a mapping from column name to value (missing keys are null);
    with ``arrow=True``, each element is a ``pyarrow.RecordBatch`` of rows (columns matched
    by name, cast to the schema's types), which skips the per-row Python conversion.
    Offsets are row sequence numbers. Each micro-batch asks the bridge for at most
    ``max_records_per_trigger`` elements, and that request is the demand sent to the
    publisher; a micro-batch takes what arrived (waiting at most 50 ms once some
    elements are there, 1 s when none are), so it is never larger than the limit.

    Completion: when the publisher completes and Spark has processed every element it
    sent, every active query that reads this stream (and only drained bridge streams) is
    stopped, so it finishes normally (a ``from_streaming_query`` subscriber downstream gets
    ``on_complete``). An ``on_error`` from the publisher fails the query, after the
    elements received before it, with a message naming the error.

    Security: the bridge binds ``127.0.0.1`` on an ephemeral port and every connection
    must present a random per-stream token (a Spark option, redacted in Spark's plans and
    UI); other connections are refused and logged on the ``reactive_streams.spark``
    logger.

    Cluster: Spark reads through a driver-side ``SimpleDataSourceStreamReader``: the rows
    travel from the driver to the executors inside Spark, and executors never connect to
    this process. The driver must run on this host (client deploy mode).

    Args:
        publisher: the source; subscribed when the first query starts reading.
        spark: a classic SparkSession.
        schema: the rows' schema, a ``StructType`` or a DDL string (``"id long, name string"``).
        max_records_per_trigger: the most elements per micro-batch (and outstanding demand).
        read_ahead_triggers: whole triggers of demand to send ahead of Spark, ``>= 0``.
            With 0 (the default) each micro-batch's request is the demand; with 1, the next
            trigger's elements are requested as soon as a batch is handed to Spark, so they
            are waiting when Spark asks and micro-batches come out full. Memory held grows
            to ``max_records_per_trigger * (1 + read_ahead_triggers)`` elements.
        arrow: elements are ``pyarrow.RecordBatch`` (demand then counts batches: one is
            requested at a time while fewer rows than the bound are held; a batch is sliced
            where a micro-batch ends inside it).
        start_offset: the sequence number of the publisher's first row, ``>= 0``. To resume
            a query from its checkpoint, pass the offset of its last committed micro-batch
            and a publisher positioned there (the same input, minus that many rows): Spark
            then replays its uncommitted micro-batch (``readBetweenOffsets``, served in a
            Spark task, so it needs executors on this host, as with ``local[*]``) and goes on.

    Returns:
        A streaming DataFrame; it can be read by one query, once (a live publisher cannot
        be replayed below ``start_offset``: a query restarted from a checkpoint needs a new
        ``to_spark_stream`` at the right ``start_offset``, else it fails with a clear error).

    Backpressure:
        Demand is what the current micro-batch lacks (plus ``read_ahead_triggers`` whole
        triggers): at most ``max_records_per_trigger * (1 + read_ahead_triggers)`` rows
        are held or requested at any time (with ``arrow=True``, plus the rows of one
        batch). A slow query asks less often.

    Concurrency:
        Publisher signals may come from any thread; no lock is held while calling it.

    Raises:
        SparkConnectUnsupportedError: ``spark`` is a Spark Connect session.
        ValueError: ``max_records_per_trigger < 1``.
    """
    return to_spark_stream_bridge(
        publisher,
        spark,
        schema,
        max_records_per_trigger=max_records_per_trigger,
        read_ahead_triggers=read_ahead_triggers,
        arrow=arrow,
        start_offset=start_offset,
    ).dataframe
