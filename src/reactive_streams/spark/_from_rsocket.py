"""``from_rsocket``: a partitioned RSocket route as a streaming DataFrame read on the executors.

A *partitioned route* ``R`` (protocol version 1, what ``reactive-streams serve`` serves) is
four RSocket routes:

* ``R.meta`` (request-response): ``{"version": 1, "partitions": P, "batch_rows": B,
  "live": bool, "schema": base64 of the Arrow IPC schema}``;
* ``R.offsets`` (request-response): ``{"high_water": [n_0, ...], "final": [bool, ...]}``,
  each partition's records so far and whether that is all it will have;
* ``R`` (request-stream, data ``{"partition": p, "start": s}``): the partition's records
  from position ``s`` on, one Arrow IPC stream (schema and one record batch) per
  ``PAYLOAD``; request-n counts batches;
* ``R.commit`` (fire-and-forget, data ``{"partition": p, "offset": o}``): records below
  ``o`` will not be asked for again.

``from_rsocket`` reads it through ``from_splits``: a split is one partition
(``RSocketSplit``), ``count`` asks ``R.offsets``, the opener is the request-stream mapped
to record batches, and each micro-batch's commit is sent as ``R.commit``. Spark's
processes (the streaming source runner, each executor's Python worker) each keep one
connection per URL and token (``shared_client``), reused across micro-batches and closed
when the process exits. With ``reconnect=Backoff(...)`` those connections dial again when
the producer goes away, and a partition's stream cut by the drop is asked again from the
record it reached (``Flow.restart``), so a producer served again on the same port is
picked up exactly.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import json
import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Literal

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

from ..operators import Flow
from ..rsocket import (
    ErrorCode,
    RSocketClient,
    RSocketConnectionError,
    RSocketError,
    RSocketStreamError,
    connect,
)
from ._errors import RemoteRouteError
from ._from_splits import from_splits

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from .._core import Backoff
    from ..api import Publisher

__all__ = [
    "PROTOCOL_VERSION",
    "RSocketSplit",
    "RouteInfo",
    "RouteStats",
    "decode_batch",
    "describe_route",
    "from_rsocket",
    "route_offsets",
    "route_stats",
    "shared_client",
]

PROTOCOL_VERSION: Final = 1
"""The version of the partitioned-route protocol this module speaks."""

logger = logging.getLogger("reactive_streams.spark")


@dataclass(frozen=True, slots=True)
class RSocketSplit:
    """One partition of a partitioned route: ``from_rsocket``'s split.

    Attributes:
        url: the server, ``tcp://host:port`` or ``ws://host:port/path``.
        route: the partitioned route's name ``R``.
        partition: the partition's number, ``0 <= partition < P``.
    """

    url: str
    route: str
    partition: int

    def __str__(self) -> str:
        return f"{self.url} route {self.route!r} partition {self.partition}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteInfo:
    """What a partitioned route says about itself (``R.meta`` and ``R.offsets``).

    Attributes:
        version: the protocol version (1).
        partitions: ``P``, the number of partitions.
        batch_rows: ``B``, the most records in one batch on the wire.
        live: whether the route serves a live publisher (else files).
        schema: the Arrow schema of every batch the route sends.
        high_water: each partition's records when asked (the end offset, exclusive).
        final: for each partition, whether ``high_water`` is all it will ever have.
    """

    version: int
    partitions: int
    batch_rows: int
    live: bool
    schema: pa.Schema
    high_water: tuple[int, ...]
    final: tuple[bool, ...]

    @property
    def finite(self) -> bool:
        """Every partition is final: the route ends (``Trigger.AvailableNow`` reads it all)."""
        return all(self.final)


# -------------------------------------------------------------------- connections
_CLIENTS: dict[tuple[str, str | None, Backoff | None], RSocketClient] = {}
_CLIENTS_LOCK = threading.Lock()
_CLOSE_AT_EXIT: list[bool] = []


def _close_clients() -> None:
    """Close every shared connection of this process (at exit)."""
    with _CLIENTS_LOCK:
        clients = list(_CLIENTS.values())
        _CLIENTS.clear()
    for client in clients:
        client.close(1.0)


def _cause(error: BaseException) -> str:
    """A failed connection's own reason (the socket's), without the URL said again."""
    cause = error.__cause__
    return str(cause) if isinstance(cause, (OSError, TimeoutError)) and str(cause) else str(error)


def _where(url: str, route: str) -> str:
    return f"{url} route {route!r}"


def shared_client(
    url: str, token: str | None, timeout: float, reconnect: Backoff | None = None
) -> RSocketClient:
    """This process's connection to ``url`` with ``token``, opened once and then reused.

    A connection that ended (closed by the server, dropped) is replaced by a new one on
    the next call; with ``reconnect`` the client dials again by itself
    (``connect(..., reconnect=)``) and is replaced only once it gave up. Every shared
    connection is closed when the process exits.

    Raises:
        RemoteRouteError: the connection could not be made within ``timeout`` seconds
            (with ``reconnect``: within its bound).
    """
    key = (url, token, reconnect)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is not None and not client.closed:
            return client
        if not _CLOSE_AT_EXIT:
            atexit.register(_close_clients)
            _CLOSE_AT_EXIT.append(True)
        try:
            client = connect(url, token=token, timeout=timeout, reconnect=reconnect)
        except (RSocketError, OSError, ValueError) as exc:
            raise RemoteRouteError(f"{url}: cannot connect: {_cause(exc)}") from exc
        old = _CLIENTS.get(key)
        _CLIENTS[key] = client
    if old is not None:
        old.close(0.0)
    return client


def _refusal(url: str, route: str, error: BaseException) -> RemoteRouteError:
    """The one clear error for a failed request to the route's ``route``."""
    where = _where(url, route)
    if isinstance(error, RSocketConnectionError) and error.code == ErrorCode.REJECTED_SETUP:
        what = f"the server refused the connection (a wrong or missing --token?): {error}"
        return RemoteRouteError(f"{where}: {what}", refused=True)
    if isinstance(error, RSocketStreamError) and error.code == ErrorCode.REJECTED:
        what = f"the server refused the request (no such route, or a wrong token?): {error}"
        return RemoteRouteError(f"{where}: {what}", refused=True)
    if isinstance(error, RSocketConnectionError):
        what = f"the connection failed: {error}"
    elif isinstance(error, TimeoutError):
        what = f"no answer: {error}"
    else:
        what = f"{type(error).__name__}: {error}"
    return RemoteRouteError(f"{where}: {what}")


def _ask(client: RSocketClient, url: str, route: str, timeout: float) -> dict[str, Any]:
    """``route``'s JSON answer to an empty request-response.

    Raises:
        RemoteRouteError: the request failed, or the answer is not a JSON object.
    """
    try:
        answer = Flow(client.request_response(route)).first(timeout=timeout)
    except TimeoutError as exc:
        raise _refusal(url, route, TimeoutError(f"none within {timeout:g} s")) from exc
    except LookupError as exc:
        raise RemoteRouteError(f"{_where(url, route)}: an empty answer") from exc
    except Exception as exc:
        raise _refusal(url, route, exc) from exc
    try:
        decoded = json.loads(bytes(answer).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RemoteRouteError(f"{_where(url, route)}: the answer is not JSON: {exc}") from exc
    if not isinstance(decoded, dict):
        raise RemoteRouteError(f"{_where(url, route)}: the answer is not a JSON object")
    return decoded


Offsets = tuple[tuple[int, ...], tuple[bool, ...]]
"""``(high_water, final)``: ``R.offsets``' answer, per partition."""


def _offsets(answer: dict[str, Any], url: str, route: str) -> Offsets:
    try:
        high_water = tuple(int(value) for value in answer["high_water"])
        final = tuple(bool(value) for value in answer["final"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RemoteRouteError(
            f"{_where(url, route + '.offsets')}: not a partitioned route's offsets "
            f"(expected high_water and final lists): {exc!r}"
        ) from exc
    if len(high_water) != len(final):
        raise RemoteRouteError(
            f"{_where(url, route + '.offsets')}: {len(high_water)} high-water marks but "
            f"{len(final)} final flags"
        )
    return high_water, final


def _info(client: RSocketClient, url: str, route: str, timeout: float) -> RouteInfo:
    meta = _ask(client, url, route + ".meta", timeout)
    try:
        version = int(meta["version"])
        partitions = int(meta["partitions"])
        batch_rows = int(meta["batch_rows"])
        live = bool(meta["live"])
        schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(meta["schema"], validate=True)))
    except (KeyError, TypeError, ValueError, binascii.Error, pa.ArrowException) as exc:
        raise RemoteRouteError(
            f"{_where(url, route + '.meta')}: not a partitioned route's description: {exc!r}"
        ) from exc
    if version != PROTOCOL_VERSION:
        raise RemoteRouteError(
            f"{_where(url, route)}: protocol version {version}, this reader speaks "
            f"{PROTOCOL_VERSION}"
        )
    if partitions < 1 or batch_rows < 1:
        raise RemoteRouteError(
            f"{_where(url, route)}: {partitions} partitions of batches of {batch_rows} rows"
        )
    high_water, final = _offsets(_ask(client, url, route + ".offsets", timeout), url, route)
    if len(high_water) != partitions:
        raise RemoteRouteError(
            f"{_where(url, route)}: {partitions} partitions, but offsets for {len(high_water)}"
        )
    return RouteInfo(
        version=version,
        partitions=partitions,
        batch_rows=batch_rows,
        live=live,
        schema=schema,
        high_water=high_water,
        final=final,
    )


def describe_route(
    url: str, route: str, *, token: str | None = None, timeout: float = 30.0
) -> RouteInfo:
    """Ask the partitioned route ``route`` at ``url`` what it serves (``R.meta``, ``R.offsets``).

    Opens a connection of its own and closes it.

    Args:
        url: ``tcp://host:port`` or ``ws://host:port/path``.
        route: the partitioned route's name.
        token: the bearer token the server requires, if any.
        timeout: seconds to wait for the connection and for each answer.

    Raises:
        RemoteRouteError: the server cannot be reached, refuses the token or the route,
            does not answer within ``timeout``, or answers outside the protocol; the
            message names ``url`` and ``route``.
    """
    try:
        client = connect(url, token=token, timeout=timeout)
    except (RSocketError, OSError, ValueError) as exc:
        raise RemoteRouteError(f"{_where(url, route)}: cannot connect: {_cause(exc)}") from exc
    with client:
        return _info(client, url, route, timeout)


def route_offsets(
    url: str,
    route: str,
    *,
    token: str | None = None,
    timeout: float = 30.0,
    reconnect: Backoff | None = None,
) -> Offsets:
    """``R.offsets`` on this process's shared connection: ``(high_water, final)``.

    Raises:
        RemoteRouteError: see ``describe_route``.
    """
    client = shared_client(url, token, timeout, reconnect)
    return _offsets(_ask(client, url, route + ".offsets", timeout), url, route)


@dataclass(frozen=True, slots=True)
class RouteStats:
    """``R.stats``: the producer's side of a partitioned route, now.

    Attributes:
        streams: streams open now (readers of partitions).
        outstanding_batches: batches the readers requested and were not sent yet (the
            demand on the wire).
        sent_batches: batches sent since the producer started.
        latency_p50: seconds from a record's arrival at the producer to the commit that
            released it, median over the last 10,000 batches; ``None`` when the source
            does not timestamp arrivals (files present at its start) or nothing was
            committed yet.
        latency_p99: the same, 99th percentile.
    """

    streams: int
    outstanding_batches: int
    sent_batches: int
    latency_p50: float | None = None
    latency_p99: float | None = None


def route_stats(
    url: str, route: str, *, token: str | None = None, timeout: float = 10.0
) -> RouteStats:
    """``R.stats`` on this process's shared connection (see ``RouteStats``).

    Raises:
        RemoteRouteError: the route cannot be asked (a producer older than the stats
            route answers "no route": ``refused`` is then set), or the answer is not a
            stats object.
    """
    client = shared_client(url, token, timeout)
    answer = _ask(client, url, route + ".stats", timeout)
    try:
        latency = answer.get("latency")
        return RouteStats(
            streams=int(answer["streams"]),
            outstanding_batches=int(answer["outstanding_batches"]),
            sent_batches=int(answer["sent_batches"]),
            latency_p50=None if latency is None else float(latency["p50"]),
            latency_p99=None if latency is None else float(latency["p99"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RemoteRouteError(
            f"{_where(url, route + '.stats')}: not a partitioned route's stats: {exc!r}"
        ) from exc


def commit_route(
    url: str,
    route: str,
    offsets: Mapping[int, int],
    *,
    token: str | None = None,
    timeout: float = 10.0,
    reconnect: Backoff | None = None,
    acknowledged: bool = False,
    group: str | None = None,
) -> bool:
    """``R.commit`` of each ``partition -> offset`` (records before it may be released).

    On this process's shared connection (``shared_client``): a live producer releases
    what it kept for a replay below each offset. A query commits its micro-batches itself
    (Spark calls the source's commit at the start of the next one); this is for the last
    micro-batch of a query that stopped.

    Args:
        url: the producer's RSocket URL.
        route: the partitioned route's name ``R``.
        offsets: ``partition -> offset``.
        token: the bearer token the producer requires.
        timeout: seconds for the connection, and with ``acknowledged`` for each answer.
        reconnect: a bounded ``Backoff`` for the shared connection; with
            ``acknowledged``, a commit whose connection dropped is sent again once it is
            back, within the same bound.
        acknowledged: send each commit as a request-response and wait for the producer's
            answer (it answers once the commit is applied), instead of fire-and-forget.
        group: the consumer group committing (the readers' ``group``); a live producer
            moves only that group's position, at most to what its readers were sent.
            ``None``: none named (the producer's default group).

    Returns:
        ``True`` once every commit was sent (``acknowledged``: applied); ``False`` when
        the producer could not be reached or did not answer (logged only: a producer that
        is gone has nothing to release).
    """
    try:
        client = shared_client(url, token, timeout, reconnect)
        for partition, offset in offsets.items():
            commit: dict[str, object] = {"partition": int(partition), "offset": int(offset)}
            if group is not None:
                commit["group"] = group
            data = json.dumps(commit).encode("utf-8")
            if acknowledged:
                _acknowledged(client, route + ".commit", data, timeout, reconnect)
            else:
                client.fire_and_forget(route + ".commit", data)
    except (RSocketError, RemoteRouteError, TimeoutError) as exc:
        logger.debug("%s: the commit at %s was not sent: %s", _where(url, route), offsets, exc)
        return False
    return True


def _acknowledged(
    client: RSocketClient, route: str, data: bytes, timeout: float, reconnect: Backoff | None
) -> None:
    """``route`` as a request-response, answered within ``timeout``; again after a drop.

    Raises:
        RSocketError: the producer refused or failed it, or the connection dropped and
            ``reconnect`` allows no more attempts.
        TimeoutError: no answer within ``timeout`` seconds.
    """
    attempt, started = 0, time.monotonic()
    while True:
        try:
            Flow(client.request_response(route, data)).to_list(timeout=timeout)
            return
        except RSocketConnectionError:
            if reconnect is None:
                raise
            delay = reconnect.delay(attempt)
            if not reconnect.allows(attempt, time.monotonic() - started, delay):
                raise
            attempt += 1
            threading.Event().wait(delay)


def decode_batch(data: bytes) -> pa.RecordBatch:
    """One ``PAYLOAD``'s data: an Arrow IPC stream of exactly one record batch.

    Raises:
        ValueError: the data is not one Arrow IPC stream holding one batch.
    """
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(data))
        batch = reader.read_next_batch()
    except (pa.ArrowException, StopIteration) as exc:
        raise ValueError(f"a payload is not an Arrow IPC stream of one batch: {exc}") from exc
    try:
        reader.read_next_batch()
    except StopIteration:
        return batch
    raise ValueError("a payload holds more than one record batch (the protocol sends one)")


@dataclass(frozen=True, slots=True)
class _RouteReader:
    """The opener, counter and commit of ``from_rsocket`` (run in Spark's processes).

    It is pickled into the query's plan without its token (``token=None``); Spark's
    processes get the token from the redacted option ``secret.token`` (``with_secrets``).
    """

    url: str
    token: str | None
    timeout: float
    reconnect: Backoff | None = None
    group: str | None = None

    def with_secrets(self, secrets: Mapping[str, str]) -> _RouteReader:
        """This reader with the token ``from_splits`` kept out of the plan."""
        return replace(self, token=secrets.get("token"))

    def count(self, split: RSocketSplit) -> int:
        """The partition's high-water mark (``R.offsets``)."""
        high_water, _ = route_offsets(
            split.url, split.route, token=self.token, timeout=self.timeout, reconnect=self.reconnect
        )
        if not 0 <= split.partition < len(high_water):
            raise RemoteRouteError(f"{split}: the route has {len(high_water)} partitions now")
        return high_water[split.partition]

    def open(self, split: RSocketSplit, start: int) -> Publisher[pa.RecordBatch]:
        """The partition's batches from record ``start`` on (``R``, request-stream).

        With ``reconnect``: a stream cut by a dropped connection is asked again, once the
        client reconnected, from the record it reached (``Flow.restart``); other errors,
        and a client that gave up reconnecting, end it.
        """
        if self.reconnect is None:
            return _Resuming(self, split, start)()
        resuming = _Resuming(self, split, start)
        return Flow.restart(resuming, self.reconnect, retry_on=resuming.dropped)

    def commit(self, split: RSocketSplit, offset: int) -> None:
        """``R.commit`` (fire-and-forget); a connection that is gone is only logged.

        A producer that stopped (its route ended and it exited) has nothing to release,
        so a commit it cannot hear does not fail the query.
        """
        commit_route(
            split.url,
            split.route,
            {split.partition: offset},
            token=self.token,
            timeout=self.timeout,
            reconnect=self.reconnect,
            group=self.group,
        )


class _Resuming:
    """A partition's stream from the record it reached: ``Flow.restart``'s factory."""

    __slots__ = ("_client", "_position", "_reader", "_split")

    def __init__(self, reader: _RouteReader, split: RSocketSplit, start: int) -> None:
        self._reader = reader
        self._split = split
        self._position = start  # advanced by each batch, serially (one stream at a time)
        self._client: RSocketClient | None = None

    def __call__(self) -> Publisher[pa.RecordBatch]:
        reader, split = self._reader, self._split
        client = shared_client(split.url, reader.token, reader.timeout, reader.reconnect)
        self._client = client
        request: dict[str, object] = {"partition": split.partition, "start": self._position}
        if reader.group is not None:
            request["group"] = reader.group
        stream = client.request_stream(split.route, json.dumps(request).encode("utf-8"))
        batches = Flow(stream).map(decode_batch)
        return batches if reader.reconnect is None else batches.do_on_next(self._advance)

    def _advance(self, batch: pa.RecordBatch) -> None:
        self._position += batch.num_rows

    def dropped(self, error: Exception) -> bool:
        """Whether ``error`` is a dropped connection that the client is dialling again."""
        client = self._client
        return (
            isinstance(error, RSocketConnectionError)
            and error.code != ErrorCode.REJECTED_SETUP
            and client is not None
            and not client.closed
        )


def from_rsocket(
    url: str,
    route: str,
    spark: SparkSession,
    *,
    schema: StructType | str | None = None,
    token: str | None = None,
    transform: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
    max_records_per_trigger: int = 100_000,
    read_timeout: float = 120.0,
    request_timeout: float = 30.0,
    order: Literal["spread", "sequential"] | None = None,
    max_partitions: int | None = None,
    warm_workers: bool = False,
    reconnect: Backoff | None = None,
    group: str | None = None,
) -> DataFrame:
    """A streaming DataFrame of the partitioned RSocket route ``route`` at ``url``.

    The route (``reactive-streams serve``, or any server that follows the protocol in this
    module's docstring) is asked once, here, for its partitions and schema (``R.meta``).
    Then each partition is a split of ``from_splits``: for every micro-batch the streaming
    source runner asks each partition's high-water mark (``R.offsets``) and spreads the
    budget over what is new; each executor's Python worker opens its share as a
    request-stream from the share's first record and requests **one batch at a time**,
    so the demand on the wire is the worker's (a slow Spark slows the producer, and a
    producer is never sent more request-n than Spark asked for). After each micro-batch
    is committed, each partition's offset is sent as ``R.commit``. Each of Spark's
    processes keeps one connection per ``url`` and ``token`` and reuses it.

    A route whose partitions are all final (files) ends: a query with
    ``Trigger.AvailableNow`` reads it all and stops. A live route's partitions grow; a
    query with another trigger reads them as they grow.

    Args:
        url: ``tcp://host:port`` or ``ws://host:port/path``.
        route: the partitioned route's name ``R``.
        spark: a classic SparkSession.
        schema: the rows' schema (``StructType`` or DDL); ``None``: the route's own Arrow
            schema converted to Spark's. Each batch is cast to it by column name.
        token: the bearer token the server requires. It travels to Spark's processes as
            a data source option that Spark redacts (``from_splits``' ``secrets``), never
            inside the query's pickled plan.
        transform: applied to each batch in the executor before it is cast to ``schema``
            (``from_splits``'s, for validation or enrichment next to the data).
        max_records_per_trigger: each micro-batch's default row budget, ``>= 1``.
        read_timeout: seconds a worker waits for a requested batch before failing.
        request_timeout: seconds to wait for a connection and for each request-response
            answer (``R.meta``, ``R.offsets``).
        order: ``from_splits``' order; ``None``: ``"sequential"`` for a route of files
            (each micro-batch the next records of the input, cut into ``max_partitions``
            tasks at multiples of the route's batch size), ``"spread"`` for a live route
            (every partition advances together).
        max_partitions: the most tasks per micro-batch; ``None``: the session's default
            parallelism for a route of files, one task per partition for a live one.
        warm_workers: start the executors' Python workers while the query starts
            (``from_splits``).
        reconnect: a bounded ``Backoff``: each process's connection dials again when the
            producer goes away (``connect(..., reconnect=)``), and a partition's stream
            cut by the drop is asked again from the record it reached, so a producer
            served again on the same port (replaying the same records at the same
            offsets) is picked up exactly. Keep its bound within ``read_timeout`` and
            ``request_timeout``, which the waits for the new connection count against.
            ``None``: a drop fails the query.
        group: the consumer group the query reads as (streams and commits name it): a
            live producer keeps this group's position apart from other consumers', and
            releases retention only below the least of them. Give the same name on a
            restart from the same checkpoint (the main job uses its checkpoint's
            identity). ``None``: the producer's default group.

    Returns:
        A streaming DataFrame; a query restarted from its checkpoint resumes at the
        checkpointed offsets (exact as long as the route serves the same records at the
        same offsets: always for files, while the producer lives for a live route).

    Backpressure:
        Each worker requests one batch (``request(1)``, a ``REQUEST_N`` of 1 on the wire)
        and the next only once Spark took it; the stream is cancelled at the share's end.

    Raises:
        RemoteRouteError: the route cannot be reached or described (here, on the
            driver): connection refused, unknown route, wrong token, no answer within
            ``request_timeout``, or an answer outside the protocol. The message names
            ``url`` and ``route``.
        ValueError, TypeError: see ``from_splits``.

    While the query runs, these fail it, each with a ``SplitReadError`` naming the URL,
    route and partition: the connection dropped (with ``reconnect``: and did not come back
    within its bound), the producer ended a stream with an error, sent more batches than
    requested (Rule 1.1), sent a payload that is not one Arrow batch, or nothing for
    ``read_timeout`` seconds.
    """
    info = describe_route(url, route, token=token, timeout=request_timeout)
    if schema is None:
        from pyspark.sql.pandas.types import from_arrow_schema  # noqa: PLC0415

        schema = from_arrow_schema(info.schema, prefer_timestamp_ntz=False)
    # The token comes back through secrets (kept out of the pickled plan).
    reader = _RouteReader(url, None, float(request_timeout), reconnect, group)
    splits = [RSocketSplit(url, route, partition) for partition in range(info.partitions)]
    files = not info.live
    chosen: Literal["spread", "sequential"] = order or ("sequential" if files else "spread")
    boundaries = None
    if chosen == "sequential":
        step = info.batch_rows
        boundaries = _BatchEdges(step, info.high_water) if files else None
        if max_partitions is None and files:
            max_partitions = max(1, int(spark.sparkContext.defaultParallelism))
    return from_splits(
        splits,
        reader.open,
        spark,
        schema,
        count=reader.count,
        arrow=True,
        transform=transform,
        max_records_per_trigger=max_records_per_trigger,
        read_timeout=read_timeout,
        boundaries=boundaries,
        max_partitions=max_partitions,
        order=chosen,
        on_commit=reader.commit,
        warm_workers=warm_workers,
        secrets={"token": token} if token is not None else None,
    )


@dataclass(frozen=True, slots=True)
class _BatchEdges:
    """A final partition's cheap micro-batch ends: every multiple of the batch size."""

    step: int
    high_water: tuple[int, ...]

    def __call__(self, split: RSocketSplit) -> list[int]:
        end = self.high_water[split.partition]
        return list(range(self.step, end, self.step))
