"""The client: ``connect(url)`` and ``RSocketClient``."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal, overload
from urllib.parse import urlsplit

from .._core import LoopThread
from ._client_connection import ClientConnection
from ._connection import ConnectionSettings, StreamHandler
from ._errors import RSocketConnectionError
from ._frames import (
    MAX_FRAME_SIZE,
    MAX_REQUEST_N,
    FrameType,
    encode_fragments,
)
from ._metadata import AUTHENTICATION, ROUTING, encode_bearer, encode_composite
from ._metadata import encode_routing as _encode_routing
from ._reconnect import (
    Redialer,
    RedialingPublisher,
    bound_seconds,
    check_bounded,
    dial_with_backoff,
)
from ._requester import RemotePublisher
from ._statistics import TransportStatistics
from ._websocket import WebSocketTransport, import_aiohttp

if TYPE_CHECKING:
    import ssl
    from types import TracebackType

    from .._core import Backoff
    from ..api import Publisher
    from ._frames import Frame
    from ._payload import Payload

__all__ = ["RSocketClient", "connect"]


class RSocketClient:
    """A connection to an RSocket server; open streams with ``request_stream``.

    Create it with ``connect``. The connection runs on the client's own event-loop thread;
    subscribers are called on a small thread pool owned by the client, never on the loop.
    Use it as a context manager, or call ``close``.

    Made with ``connect(url, reconnect=Backoff(...))``, the client dials again when its
    connection drops, within the policy's bound: requests made meanwhile wait and go out
    on the new connection, streams open on the lost one fail with
    ``RSocketConnectionError`` (resume them from your offset); once the bound passes,
    every waiting and later request fails with one error naming the URL and the
    attempts, and ``closed`` is true.

    Concurrency: every method is thread-safe.
    """

    def __init__(
        self,
        loop_thread: LoopThread,
        connection: ClientConnection,
        executor: ThreadPoolExecutor,
        token: str | None,
        redialer: Redialer | None = None,
    ) -> None:
        self._loop_thread = loop_thread
        self._connection = connection
        self._executor = executor
        self._token = token
        self._redialer = redialer
        self._close_lock = threading.Lock()
        self._closed = False

    @property
    def _current(self) -> ClientConnection:
        """The connection requests go to now (the latest one, when reconnecting)."""
        redialer = self._redialer
        return self._connection if redialer is None else redialer.connection

    @property
    def reconnects(self) -> int:
        """How many times the connection was made again after a drop (0 without ``reconnect``)."""
        redialer = self._redialer
        return 0 if redialer is None else redialer.reconnects

    def _metadata(self, route: str) -> bytes:
        entries = [(ROUTING, _encode_routing(route))]
        if self._token is not None:
            entries.append((AUTHENTICATION, encode_bearer(self._token)))
        return encode_composite(entries)

    @overload
    def request_stream(
        self,
        route: str,
        data: bytes = b"",
        *,
        window: int = MAX_REQUEST_N,
        payloads: Literal[False] = False,
    ) -> Publisher[bytes]: ...

    @overload
    def request_stream(
        self,
        route: str,
        data: bytes = b"",
        *,
        window: int = MAX_REQUEST_N,
        payloads: Literal[True],
    ) -> Publisher[Payload]: ...

    def request_stream(
        self,
        route: str,
        data: bytes = b"",
        *,
        window: int = MAX_REQUEST_N,
        payloads: bool = False,
    ) -> Publisher[bytes] | Publisher[Payload]:
        """A publisher of the stream the server serves at ``route`` for ``data``.

        Every ``subscribe`` opens a new stream (``REQUEST_STREAM``) on this connection
        right after ``on_subscribe`` returns, with the demand signalled there as its
        initial request-n, or 1 (an element then waits in a one-element buffer for the
        first ``request``), so a failing route ends the stream with ``on_error`` even
        without demand (Rules 1.4, 1.9). Demand travels on the wire; see
        ``reactive_streams.rsocket`` for the full mapping of signals to frames.

        Args:
            route: the route, sent as routing metadata (``message/x.rsocket.routing.v0``
                inside composite metadata), with the bearer token if the client has one.
            data: the request's data.
            window: the most credit (elements) granted to the server at once,
                ``1 <= window <= 2**31 - 1``; it bounds what the client may have to buffer.
            payloads: deliver ``Payload`` elements (data and the frame's metadata) instead
                of the data alone.

        Returns:
            A ``Publisher[bytes]`` (``Publisher[Payload]`` with ``payloads=True``): each
            element is one payload. Errors arrive as
            ``on_error``: ``RSocketStreamError`` (the server's ERROR frame, e.g. an unknown
            route), ``RSocketConnectionError`` (the connection failed) or
            ``ProtocolViolationError`` (the server sent more than was requested).

        Raises:
            ValueError: ``window`` is out of range.
        """
        if not 1 <= window <= MAX_REQUEST_N:
            raise ValueError(f"window must be in [1, {MAX_REQUEST_N}], got {window}")
        return self._requester(
            FrameType.REQUEST_STREAM, self._metadata(route), bytes(data), window, payloads
        )

    def _requester(
        self, kind: FrameType, metadata: bytes, data: bytes, window: int, payloads: bool
    ) -> Publisher[Any]:
        def on(connection: ClientConnection) -> Publisher[Any]:
            return RemotePublisher(
                connection,
                kind=kind,
                metadata=metadata,
                data=data,
                executor=self._executor,
                window=window,
                payloads=payloads,
            )

        redialer = self._redialer
        return on(self._connection) if redialer is None else RedialingPublisher(redialer, on)

    def request_response(self, route: str, data: bytes = b"") -> Publisher[bytes]:
        """A publisher of the single response to ``data`` at ``route`` (request-response).

        ``REQUEST_RESPONSE`` is sent right after ``on_subscribe`` returns; the response
        waits for the subscriber's first request and is one ``on_next`` then
        ``on_complete`` (or ``on_complete`` alone for an empty response), or ``on_error``,
        which needs no request (Rule 1.4).
        """
        return self._requester(
            FrameType.REQUEST_RESPONSE, self._metadata(route), bytes(data), 1, False
        )

    def fire_and_forget(self, route: str, data: bytes = b"") -> None:
        """Send ``data`` to ``route`` with no response (``REQUEST_FNF``); returns at once.

        Raises:
            RSocketConnectionError: the connection is closed (or, with ``reconnect``,
                being made again: a fire-and-forget is not kept for later).
        """
        connection = self._current
        stream_id = connection.open_stream(_NoHandler())
        frames = (
            encode_fragments(
                FrameType.REQUEST_FNF,
                stream_id,
                bytes(data),
                self._metadata(route),
                max_frame_size=connection.settings.max_frame_size,
            )
            if stream_id
            else []
        )
        if not stream_id or not connection.send_all(frames):
            raise connection.error or RSocketConnectionError("the connection is closed")
        connection.unregister(stream_id)

    def statistics(self) -> TransportStatistics:
        """A snapshot of the connection's counters (frames and bytes both ways)."""
        connection = self._current
        return TransportStatistics(
            connections=0 if connection.is_closed else 1,
            open_streams=connection.open_streams,
            frames_received=connection.frames_received,
            frames_sent=connection.frames_sent,
            bytes_received=connection.bytes_received,
            bytes_sent=connection.bytes_sent,
        )

    @property
    def closed(self) -> bool:
        """Whether the connection has ended (closed here, by the peer, or failed).

        With ``reconnect``: whether the client was closed or gave up reconnecting (a
        connection being made again is not closed).
        """
        redialer = self._redialer
        return self._connection.is_closed if redialer is None else redialer.closed

    def close(self, timeout: float = 5.0) -> None:
        """Close the connection; open streams get ``on_error``; idempotent.

        Waits at most ``timeout`` seconds for the socket to close, then stops the loop
        thread and shuts the subscribers' thread pool down, waiting for the delivery
        passes already queued (they carry the streams' ``on_error``), except when called
        from one of the pool's threads, such as inside ``on_next``.
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        closing = RSocketConnectionError("the client closed the connection")
        if self._redialer is not None:
            for waiting in self._redialer.close():  # requests waiting for a reconnection
                waiting(None, closing)
        connection = self._current
        connection.close(closing)
        if not self._loop_thread.in_loop_thread:

            async def _wait_closed() -> None:
                await asyncio.wait_for(asyncio.shield(connection.closed), timeout)

            with contextlib.suppress(TimeoutError, RuntimeError):
                self._loop_thread.call(_wait_closed(), timeout + 1.0)
        self._loop_thread.stop(timeout)
        in_pool = threading.current_thread().name.startswith("rsocket-client")
        self._executor.shutdown(wait=not in_pool)

    def __enter__(self) -> RSocketClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class _NoHandler(StreamHandler):
    """A placeholder for the stream table while a fire-and-forget request is sent."""

    def on_frame(self, frame: Frame) -> None:
        pass

    def on_connection_error(self, error: RSocketConnectionError) -> None:
        pass


def _parse_url(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    if parts.scheme not in ("tcp", "ws", "wss"):
        raise ValueError(
            f"unsupported RSocket URL {url!r}: use tcp://host:port, ws://host:port/path "
            "or wss://host:port/path"
        )
    if not parts.hostname or (parts.port is None and parts.scheme == "tcp"):
        raise ValueError(f"RSocket URL {url!r} needs a host and a port: tcp://host:port")
    return parts.scheme, parts.hostname, parts.port or 0


def connect(
    url: str,
    *,
    token: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
    keepalive: float = 20.0,
    max_lifetime: float = 90.0,
    max_frame_size: int = MAX_FRAME_SIZE,
    timeout: float = 10.0,
    workers: int = 4,
    reconnect: Backoff | None = None,
) -> RSocketClient:
    """Connect to the RSocket server at ``url`` and send ``SETUP``.

    Args:
        url: ``tcp://host:port``, or ``ws://host:port/path`` (``wss://`` with
            ``ssl_context``) for RSocket over WebSocket (needs the ``aiohttp`` package:
            ``pip install 'reactive-streams-py[rsocket-ws]'``).
        token: a bearer token, sent as ``message/x.rsocket.authentication.v0`` in the
            SETUP metadata and in every request's composite metadata.
        ssl_context: a client-side context for TLS (the server's name is checked against
            ``host``).
        keepalive: seconds between ``KEEPALIVE`` frames.
        max_lifetime: seconds of silence from the server after which the connection fails
            and every open stream gets ``on_error``.
        max_frame_size: larger frames are fragmented on send and refused on receipt.
        timeout: seconds to wait for the TCP (and TLS) connection.
        workers: threads that call subscribers.
        reconnect: dial again with this policy when the connection drops (and retry
            the first connection with it): a ``Backoff`` with a bound (``max_attempts``
            or ``deadline``), since requests wait for the reconnection. A server that
            refuses the setup (``REJECTED_SETUP``) is not dialled again.

    Returns:
        A connected ``RSocketClient``. A server that refuses the setup (for example a
        wrong token) answers with ``ERROR[REJECTED_SETUP]``; the connection then closes and
        every stream fails with ``RSocketConnectionError`` carrying that code.

    Raises:
        ValueError: a malformed URL, or an unbounded ``reconnect``.
        TypeError: ``reconnect`` is not a ``Backoff``.
        RSocketConnectionError: the connection could not be made within ``timeout``
            (with ``reconnect``: within its bound; the message names the URL and the
            attempts).
    """
    scheme, host, port = _parse_url(url)
    backoff = None if reconnect is None else check_bounded(reconnect)
    settings = ConnectionSettings(
        max_frame_size=max_frame_size, keepalive=keepalive, max_lifetime=max_lifetime
    )
    setup_metadata = (
        None if token is None else encode_composite([(AUTHENTICATION, encode_bearer(token))])
    )
    loop_thread = LoopThread("rsocket-client-loop")
    loop = loop_thread.loop

    async def _connect() -> ClientConnection:
        _, protocol = await loop.create_connection(
            lambda: ClientConnection(loop, settings, setup_metadata),
            host,
            port,
            ssl=ssl_context,
            server_hostname=host if ssl_context is not None else None,
        )
        return protocol

    async def _connect_websocket() -> ClientConnection:
        aiohttp = import_aiohttp()
        session = aiohttp.ClientSession()
        try:
            websocket = await session.ws_connect(
                url,
                ssl=ssl_context if scheme == "wss" and ssl_context is not None else True,
                max_msg_size=MAX_FRAME_SIZE + 1,  # aiohttp refuses a message of max_msg_size
                compress=0,
                autoping=True,
                heartbeat=None,  # RSocket keeps itself alive
            )
        except BaseException as exc:
            await session.close()
            if isinstance(exc, aiohttp.ClientError) and not isinstance(exc, OSError):
                raise ConnectionError(f"the WebSocket handshake failed: {exc}") from exc
            raise
        protocol = ClientConnection(loop, settings, setup_metadata)
        transport = WebSocketTransport(websocket, protocol, session)
        transport.task = loop.create_task(transport.run())
        await asyncio.sleep(0)  # run() calls connection_made, which sends SETUP
        return protocol

    opener = _connect if scheme == "tcp" else _connect_websocket

    async def dial() -> ClientConnection:
        try:
            return await asyncio.wait_for(opener(), timeout)
        except (OSError, TimeoutError) as exc:
            raise RSocketConnectionError(f"could not connect to {url}: {exc}") from exc

    try:
        if backoff is None:
            connection = loop_thread.call(dial(), timeout + 1.0)
        else:
            connection, _ = loop_thread.call(
                dial_with_backoff(url, dial, backoff, first_delay=False),
                bound_seconds(backoff, timeout),
            )
    except (RSocketConnectionError, TimeoutError, ImportError) as exc:
        if isinstance(exc, ImportError):
            loop_thread.stop()
            raise
        loop_thread.stop()
        if isinstance(exc, RSocketConnectionError):
            raise
        raise RSocketConnectionError(f"could not connect to {url}: {exc}") from exc
    except BaseException:
        loop_thread.stop()
        raise
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rsocket-client")
    redialer = (
        None
        if backoff is None
        else Redialer(
            url,
            backoff=backoff,
            loop=loop,
            dial=dial,
            executor=executor,
            connection=connection,
        )
    )
    return RSocketClient(loop_thread, connection, executor, token, redialer)
