"""Partitioned routes: a partitioned, replayable source served as four RSocket routes.

``partitioned_routes(name, source)`` gives the route factories of the partitioned-route
protocol, version 1, for a ``PartitionedSource``; pass them to ``serve``/``serve_async``:

* ``name.meta`` (request-response): UTF-8 JSON ``{"version": 1, "partitions": P,
  "batch_rows": B, "live": false, "schema": "<base64 of the Arrow IPC schema message>"}``;
* ``name.offsets`` (request-response): ``{"high_water": [n_0, ...], "final": [bool, ...]}``,
  per partition the records it has now (the end offset, exclusive) and whether that is all;
* ``name`` (request-stream), data ``{"partition": p, "start": s}``: the partition's records
  from position ``s`` on, each ``PAYLOAD`` one Arrow IPC stream (the schema and exactly one
  record batch of 1 to B rows). request-n counts batches. A final partition completes after
  its last record; ``s`` beyond its size, a partition that does not exist or a request
  that is not such JSON ends the stream with ``ERROR[APPLICATION_ERROR]`` naming it;
* ``name.commit`` (fire-and-forget, or request-response to hear it was applied), data
  ``{"partition": p, "offset": o}``: positions below ``o`` will not be asked for again
  (``source.commit``);
* a stream or commit request may name its consumer group, ``"group": "G"`` (default
  ``""``): a source that keeps groups (``GroupedSource``, such as ``LivePartitions``) then
  applies a commit to that group's position only, at most to what its readers were sent;
* ``name.stats`` (request-response): ``{"streams": k, "outstanding_batches": n,
  "sent_batches": m, "latency": {"p50": s, "p99": s, "samples": c} or null}``: the streams
  open now, the batches their readers requested and were not sent yet (the demand on the
  wire), the batches sent since the server started, and, for a source that timestamps
  arrivals (``commit_latencies``: a live source), seconds from a record's arrival at the
  producer to the commit that released it. Version 1 readers that do not ask still work.

The stream reads its source only on demand: the requester's request-n reaches the
source's subscription unchanged (the responder passes it on within its write window), and
each batch is encoded as it passes. Every failure ends the stream with one ``ERROR``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from .._core import (
    MAX_DEMAND,
    EmitLoopSubscription,
    ProtocolViolationError,
    accept_subscription,
    add_demand,
    check_subscriber,
    signal_error_only,
    signal_on_complete,
    signal_on_error,
    signal_on_subscribe,
    validate_request,
)
from ..api import Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

__all__ = [
    "MAX_GROUP_BYTES",
    "MAX_ROUTE_NAME_BYTES",
    "PARTITIONED_VERSION",
    "GroupedSource",
    "PartitionedSource",
    "check_route_name",
    "encode_batch",
    "partitioned_routes",
]

PARTITIONED_VERSION: Final = 1
"""The version of the partitioned-route protocol ``partitioned_routes`` speaks."""


class PartitionedSource(Protocol):
    """What a partitioned route serves: partitions of record batches, readable by position.

    A record's position is its index in its partition, from 0. ``FilePartitions``
    (``reactive_streams.files``) is one.

    Attributes:
        schema: the schema of every batch ``open`` publishes.
        partitions: how many partitions, ``>= 1``.
        batch_rows: the most rows in one batch.
        live: whether partitions may grow (``False``: every one is final from the start).
    """

    @property
    def schema(self) -> pa.Schema: ...

    @property
    def partitions(self) -> int: ...

    @property
    def batch_rows(self) -> int: ...

    @property
    def live(self) -> bool: ...

    def high_water(self, partition: int) -> int:
        """How many records ``partition`` has now (its end offset, exclusive)."""
        ...

    def final(self, partition: int) -> bool:
        """Whether ``high_water(partition)`` is all the partition will ever have."""
        ...

    def open(self, partition: int, start: int) -> Publisher[pa.RecordBatch]:
        """The records of ``partition`` from position ``start`` on, in order, on demand."""
        ...

    def commit(self, partition: int, offset: int) -> None:
        """Positions below ``offset`` of ``partition`` will not be asked for again."""
        ...


@runtime_checkable
class GroupedSource(Protocol):
    """A ``PartitionedSource`` that keeps each consumer group's position (``LivePartitions``).

    The routes then open a reader's stream and apply its commits for the group its request
    names (``"group"``, default ``""``), so one consumer's commit cannot release what another
    has not read.
    """

    def open_for(self, group: str, partition: int, start: int) -> Publisher[pa.RecordBatch]:
        """``open`` for a reader of ``group``."""
        ...

    def commit_for(self, group: str, partition: int, offset: int) -> None:
        """``commit`` of ``group``: at most what its readers were sent."""
        ...


MAX_ROUTE_NAME_BYTES = 255 - len(".offsets")
"""The longest partitioned route name, in UTF-8 bytes: its routes ``NAME.offsets`` and
``NAME.commit`` must fit in one route tag (255 bytes)."""


def check_route_name(name: str) -> None:
    """Refuse a partitioned route name no client could address.

    Raises:
        ValueError: ``name`` is empty, or longer than ``MAX_ROUTE_NAME_BYTES`` UTF-8 bytes.
    """
    if not name:
        raise ValueError("a partitioned route needs a name (the route is empty)")
    size = len(name.encode("utf-8"))
    if size > MAX_ROUTE_NAME_BYTES:
        raise ValueError(
            f"the route name is {size} UTF-8 bytes long, over the {MAX_ROUTE_NAME_BYTES} a "
            "partitioned route's name may have (its routes NAME.offsets and NAME.commit must "
            "fit in a 255-byte route tag)"
        )


def partitioned_routes(
    name: str, source: PartitionedSource
) -> dict[str, Callable[[bytes], Publisher[bytes]]]:
    """The four routes of ``source`` as the partitioned route ``name`` (module doc).

    Args:
        name: the route's name; the routes are ``name``, ``name.meta``, ``name.offsets``
            and ``name.commit``.
        source: what the routes serve.

    Returns:
        Route name -> factory, for ``serve(routes, ...)`` (merge several dicts to serve
        several partitioned routes on one server).

    Raises:
        ValueError: ``name`` is empty, or so long that ``name.offsets`` is over the 255
            UTF-8 bytes a route tag can carry (``MAX_ROUTE_NAME_BYTES``): no client could
            address it.
    """
    check_route_name(name)
    counts = _RouteCounts()

    def meta(data: bytes) -> Publisher[bytes]:
        return _Answer(lambda: _meta(source))

    def offsets(data: bytes) -> Publisher[bytes]:
        return _Answer(lambda: _offsets(source))

    def stream(data: bytes) -> Publisher[bytes]:
        try:
            partition, start = _request(data, "start", source.partitions)
            if source.final(partition):
                size = source.high_water(partition)
                if start > size:
                    raise ValueError(
                        f"start {start:,} is beyond partition {partition}'s {size:,} records "
                        f"(route {name!r})"
                    )
            if isinstance(source, GroupedSource):
                batches = source.open_for(_group(data), partition, start)
            else:
                batches = source.open(partition, start)
        except Exception as exc:
            return _Failed(exc)
        return _EncodedBatches(batches, source.schema, counts)

    def commit(data: bytes) -> Publisher[bytes]:
        return _Answer(lambda: _commit(source, data))

    def stats(data: bytes) -> Publisher[bytes]:
        return _Answer(lambda: _stats(source, counts))

    return {
        name: stream,
        f"{name}.meta": meta,
        f"{name}.offsets": offsets,
        f"{name}.commit": commit,
        f"{name}.stats": stats,
    }


class _StreamCount:
    """One stream's batches: requested by its reader, and sent (``_RouteCounts``' lock)."""

    __slots__ = ("requested", "sent")

    def __init__(self) -> None:
        self.requested = 0
        self.sent = 0


class _RouteCounts:
    """The demand on the wire of one partitioned route: its open streams' counts."""

    __slots__ = ("_lock", "_open", "_sent")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[_StreamCount] = set()
        self._sent = 0

    def opened(self) -> _StreamCount:
        count = _StreamCount()
        with self._lock:
            self._open.add(count)
        return count

    def requested(self, count: _StreamCount, n: int) -> None:
        with self._lock:
            count.requested = add_demand(count.requested, n)

    def sent(self, count: _StreamCount) -> None:
        with self._lock:
            count.sent += 1
            self._sent += 1

    def closed(self, count: _StreamCount) -> None:
        with self._lock:
            self._open.discard(count)

    def snapshot(self) -> tuple[int, int, int]:
        """``(streams, outstanding batches, batches sent)``."""
        with self._lock:
            outstanding = sum(max(0, c.requested - c.sent) for c in self._open)
            return len(self._open), min(outstanding, MAX_DEMAND), self._sent


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def _meta(source: PartitionedSource) -> bytes:
    schema = base64.b64encode(source.schema.serialize().to_pybytes()).decode("ascii")
    return _json(
        {
            "version": PARTITIONED_VERSION,
            "partitions": source.partitions,
            "batch_rows": source.batch_rows,
            "live": bool(source.live),
            "schema": schema,
        }
    )


def _offsets(source: PartitionedSource) -> bytes:
    partitions = range(source.partitions)
    return _json(
        {
            "high_water": [source.high_water(partition) for partition in partitions],
            "final": [bool(source.final(partition)) for partition in partitions],
        }
    )


def _stats(source: PartitionedSource, counts: _RouteCounts) -> bytes:
    streams, outstanding, sent = counts.snapshot()
    latencies = getattr(source, "commit_latencies", None)
    latency = latencies() if callable(latencies) else None
    return _json(
        {
            "streams": streams,
            "outstanding_batches": outstanding,
            "sent_batches": sent,
            "latency": None
            if latency is None
            else {"p50": latency[0], "p99": latency[1], "samples": latency[2]},
        }
    )


def _commit(source: PartitionedSource, data: bytes) -> None:
    partition, offset = _request(data, "offset", source.partitions)
    if isinstance(source, GroupedSource):
        source.commit_for(_group(data), partition, offset)
    else:
        source.commit(partition, offset)


MAX_GROUP_BYTES: Final = 255
"""The longest consumer group name, in UTF-8 bytes."""


def _group(data: bytes) -> str:
    """The ``"group"`` a stream or commit request names (``""`` when none).

    Raises:
        ValueError: the group is not a string of at most ``MAX_GROUP_BYTES`` UTF-8 bytes.
    """
    request = json.loads(data.decode("utf-8"))  # _request read it already
    group = request.get("group", "") if isinstance(request, dict) else ""
    if not isinstance(group, str) or len(group.encode("utf-8")) > MAX_GROUP_BYTES:
        raise ValueError(f"the request's group must be a string of at most {MAX_GROUP_BYTES} bytes")
    return group


def _request(data: bytes, position: str, partitions: int) -> tuple[int, int]:
    """``{"partition": p, position: n}`` read from ``data``: ``(p, n)``.

    Raises:
        ValueError: not UTF-8 JSON of that shape, or no such partition.
    """
    shape = f'{{"partition": p, "{position}": n}}'
    try:
        request = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the request is not UTF-8 JSON {shape}: {exc}") from None
    if not isinstance(request, dict):
        raise ValueError(f"the request must be a JSON object {shape}, got {request!r}")
    values = []
    for key in ("partition", position):
        value = request.get(key)
        if type(value) is not int or value < 0:
            raise ValueError(f'the request\'s "{key}" must be an integer >= 0, got {value!r}')
        values.append(value)
    partition, number = values
    if partition >= partitions:
        raise ValueError(
            f"no partition {partition}: the route has {partitions} (0 to {partitions - 1})"
        )
    return partition, number


def encode_batch(batch: pa.RecordBatch, schema: pa.Schema) -> bytes:
    """One Arrow IPC stream: ``schema`` and ``batch`` (what one ``PAYLOAD`` carries).

    Raises:
        pyarrow.ArrowInvalid: the batch does not have ``schema``.
    """
    import pyarrow as pa  # noqa: PLC0415  (the spark extra; rsocket itself does not need it)

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(batch)
    data: bytes = sink.getvalue().to_pybytes()
    return data


class _EncodedBatches(Publisher[bytes]):
    """``batches`` with each batch encoded by ``encode_batch``; demand goes straight up."""

    __slots__ = ("_batches", "_counts", "_schema")

    def __init__(
        self, batches: Publisher[pa.RecordBatch], schema: pa.Schema, counts: _RouteCounts
    ) -> None:
        self._batches = batches
        self._schema = schema
        self._counts = counts

    def subscribe(self, subscriber: Subscriber[bytes]) -> None:
        check_subscriber(subscriber)
        self._batches.subscribe(_Encoder(subscriber, self._schema, self._counts))


class _CountedSubscription(Subscription):
    """The source's subscription, handed to the reader: its requests are counted."""

    __slots__ = ("_count", "_counts", "_upstream")

    def __init__(self, upstream: Subscription, counts: _RouteCounts, count: _StreamCount) -> None:
        self._upstream = upstream
        self._counts = counts
        self._count = count

    def request(self, n: int) -> None:
        with contextlib.suppress(ProtocolViolationError):  # the source signals Rule 3.9
            self._counts.requested(self._count, validate_request(n))
        self._upstream.request(n)

    def cancel(self) -> None:
        self._counts.closed(self._count)
        self._upstream.cancel()


class _Encoder(Subscriber["pa.RecordBatch"]):
    """Encodes each batch on its way down; holds nothing, so it has no demand of its own.

    The subscriber gets the source's own subscription: its ``request(n)`` asks the source
    for exactly ``n`` batches (Rules 1.1, 3.9 are the source's). Upstream signals are serial
    (Rule 1.3), so ``_done`` needs no lock. A batch that cannot be encoded cancels the
    source and ends the stream with ``on_error`` (one terminal signal: later upstream
    signals are dropped).
    """

    __slots__ = ("_count", "_counts", "_done", "_downstream", "_schema", "_upstream")

    def __init__(
        self, downstream: Subscriber[bytes], schema: pa.Schema, counts: _RouteCounts
    ) -> None:
        self._downstream: Subscriber[bytes] | None = downstream
        self._schema = schema
        self._upstream: Subscription | None = None
        self._done = False
        self._counts = counts
        self._count = counts.opened()

    def on_subscribe(self, subscription: Subscription) -> None:
        downstream = self._downstream
        first = self._upstream is None and downstream is not None
        if not accept_subscription(subscription, first) or downstream is None:
            return
        self._upstream = subscription
        counted = _CountedSubscription(subscription, self._counts, self._count)
        if not signal_on_subscribe(downstream, counted):
            self._done = True
            self._downstream = None
            counted.cancel()

    def on_next(self, element: pa.RecordBatch) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next() requires an element, got None")
        downstream = self._downstream
        if self._done or downstream is None:
            return
        try:
            data = encode_batch(element, self._schema)
        except Exception as exc:
            self._done = True
            self._downstream = None
            self._counts.closed(self._count)
            if self._upstream is not None:
                self._upstream.cancel()
            signal_on_error(downstream, exc)
            return
        self._counts.sent(self._count)
        downstream.on_next(data)  # a raise reaches the source, which cancels (Rule 2.13)

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error() requires an exception, got None")
        self._counts.closed(self._count)
        downstream, self._downstream = self._downstream, None
        if not self._done and downstream is not None:
            self._done = True
            signal_on_error(downstream, error)

    def on_complete(self) -> None:
        self._counts.closed(self._count)
        downstream, self._downstream = self._downstream, None
        if not self._done and downstream is not None:
            self._done = True
            signal_on_complete(downstream)


class _Failed(Publisher[bytes]):
    """A stream that can only fail: ``on_subscribe``, then ``on_error(error)`` (Rule 1.4)."""

    __slots__ = ("_error",)

    def __init__(self, error: Exception) -> None:
        self._error = error

    def subscribe(self, subscriber: Subscriber[bytes]) -> None:
        check_subscriber(subscriber)
        signal_error_only(subscriber, self._error)


class _Answer(Publisher[bytes]):
    """The one answer ``compute()`` gives (``None``: none), computed after ``on_subscribe``.

    ``compute`` raising ends the stream with ``on_error`` (Rule 1.4), with or without
    demand.
    """

    __slots__ = ("_compute",)

    def __init__(self, compute: Callable[[], bytes | None]) -> None:
        self._compute = compute

    def subscribe(self, subscriber: Subscriber[bytes]) -> None:
        check_subscriber(subscriber)
        _AnswerSubscription(subscriber, self._compute).start()


class _AnswerSubscription(EmitLoopSubscription[bytes]):
    __slots__ = ("_compute", "_error", "_value")

    def __init__(self, subscriber: Subscriber[bytes], compute: Callable[[], bytes | None]) -> None:
        super().__init__(subscriber, batch_size=MAX_DEMAND)
        self._compute: Callable[[], bytes | None] | None = compute
        self._value: bytes | None = None
        self._error: Exception | None = None

    def _open(self) -> None:
        compute, self._compute = self._compute, None
        try:
            assert compute is not None
            self._value = compute()
        except Exception as exc:  # Rule 1.4
            self._error = exc

    def _emit(self, subscriber: Subscriber[bytes], count: int) -> int:
        value, self._value = self._value, None
        if value is None:
            return 0
        try:
            subscriber.on_next(value)
        except Exception as exc:
            self._deliver_failed(subscriber, exc)
        return 1

    def _exhausted(self) -> bool:
        return self._value is None

    def _failure(self) -> Exception | None:
        return self._error
