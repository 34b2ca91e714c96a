"""The server: ``serve`` (its own loop thread), ``serve_async`` (the caller's loop)."""

from __future__ import annotations

import asyncio
import hmac
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from .._core import DaemonThreadPool, LoopThread
from ._admission import Admission, peer_address
from ._connection import Connection, ConnectionSettings
from ._errors import FrameError, RSocketConnectionError
from ._frames import MAX_FRAME_SIZE, ErrorCode, FrameType, encode_error
from ._limits import ServerLimits
from ._memory import MemoryPool
from ._metadata import COMPOSITE, bearer_token, decode_composite, route_of
from ._responder import ResponderStream
from ._statistics import TransportStatistics
from ._websocket import WebSocketServer, WebSocketTransport

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Mapping
    from types import TracebackType

    from ..api import Publisher
    from ._frames import Frame
    from ._payload import Payload

__all__ = ["AsyncRSocketServer", "RSocketServer", "serve", "serve_async"]

logger = logging.getLogger("reactive_streams.rsocket")

_SLACK = 0.5
"""Seconds ``close`` may take beyond its timeout, to hand results between threads."""

_SETUP_HEADER = 1024
"""Bytes a SETUP frame may hold beyond its payload: its fields and two MIME types."""


class _ServerCore:
    """The listening socket and its connections, on one event loop."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        routes: Mapping[str, Callable[[bytes], Publisher[bytes | Payload]]],
        token: str | None,
        ssl_context: ssl.SSLContext | None,
        settings: ConnectionSettings,
        executor: DaemonThreadPool,
        limits: ServerLimits,
    ) -> None:
        self.loop = loop
        self.routes = dict(routes)
        self.token = None if token is None else token.encode("utf-8")
        self.ssl_context = ssl_context
        self.settings = settings
        self.executor = executor
        self.limits = limits
        self.admission = Admission(limits, loop.time)
        assert limits.total_memory is not None  # ServerLimits resolves the default
        self.memory = MemoryPool(limits.total_memory)
        self.connections: set[ServerConnection] = set()
        self._closed_totals = (0, 0, 0, 0)  # counters of the connections already closed
        self._server: Any = None  # an asyncio.Server, or a WebSocketServer

    async def start(self, host: str, port: int, transport: str) -> None:
        if transport == "tcp":
            self._server = await self.loop.create_server(
                lambda: ServerConnection(self), host, port, ssl=self.ssl_context
            )
            return
        if transport != "ws":
            raise ValueError(f"transport must be 'tcp' or 'ws', got {transport!r}")

        async def handler(websocket: Any) -> None:
            connection = ServerConnection(self)
            connection.on_admitted = websocket.admit
            await WebSocketTransport(websocket, connection).run()

        self._server = await WebSocketServer.start(
            handler,
            host,
            port,
            ssl_context=self.ssl_context,
            max_frame_size=self.settings.max_frame_size,  # one frame per message
            # the SETUP's payload and its own header (two MIME types of 255 bytes at most)
            admission_size=self.limits.max_setup_size + _SETUP_HEADER,
        )

    @property
    def port(self) -> int:
        assert self._server is not None
        if isinstance(self._server, WebSocketServer):
            return self._server.port
        port: int = next(iter(self._server.sockets)).getsockname()[1]
        return port

    def forget(self, connection: ServerConnection) -> None:
        """Loop thread: drop a closed connection, keeping its counters in the totals."""
        if connection in self.connections:
            self.connections.discard(connection)
            frames_in, frames_out, bytes_in, bytes_out = self._closed_totals
            self._closed_totals = (
                frames_in + connection.frames_received,
                frames_out + connection.frames_sent,
                bytes_in + connection.bytes_received,
                bytes_out + connection.bytes_sent,
            )

    def statistics(self) -> TransportStatistics:
        """A snapshot of the server's counters, closed connections included."""
        connections = list(self.connections)
        frames_in, frames_out, bytes_in, bytes_out = self._closed_totals
        return TransportStatistics(
            connections=len(connections),
            open_streams=sum(connection.open_streams for connection in connections),
            frames_received=frames_in + sum(c.frames_received for c in connections),
            frames_sent=frames_out + sum(c.frames_sent for c in connections),
            bytes_received=bytes_in + sum(c.bytes_received for c in connections),
            bytes_sent=bytes_out + sum(c.bytes_sent for c in connections),
        )

    def token_ok(self, presented: bytes | None) -> bool:
        return (
            self.token is not None
            and presented is not None
            and hmac.compare_digest(self.token, presented)
        )

    async def aclose(self, timeout: float) -> None:
        """Stop listening and close every connection, within ``timeout`` seconds in all."""
        deadline = self.loop.time() + timeout
        server = self._server
        if server is not None:
            server.close()
        connections = list(self.connections)
        for connection in connections:
            connection.fail(RSocketConnectionError("the server is closing"), notify_peer=False)
        waiters = [connection.closed for connection in connections]
        if waiters:
            await asyncio.wait(waiters, timeout=max(0.0, deadline - self.loop.time()))
        if server is not None:
            await asyncio.wait_for(server.wait_closed(), max(0.0, deadline - self.loop.time()))


class ServerConnection(Connection):
    """One accepted connection: SETUP checks, token, routing, responder streams."""

    def __init__(self, core: _ServerCore) -> None:
        super().__init__(core.loop, core.settings)
        self._core = core
        self._established = False
        self._refusing = False  # a failed authentication's refusal is on its way
        self._address = "unknown"
        self._counted = False  # in the admission books (until _forget)
        self.on_admitted: Callable[[], None] | None = None  # the transport reads on
        self._metadata_mime = COMPOSITE
        self.on_closed = self._forget

    def _opened(self) -> None:
        connections = self._core.connections
        limit = self._core.limits.max_connections
        if len(connections) >= limit:
            logger.warning("refused a connection: %d connections open (the limit)", limit)
            self._reject(
                ErrorCode.REJECTED_SETUP, f"the server is at its limit of {limit} connections"
            )
            return
        if self._core.memory.spent:
            budget = self._core.limits.total_memory
            logger.warning("refused a connection: the server's memory budget is spent")
            self._reject(
                ErrorCode.REJECTED_SETUP,
                f"the server holds its whole memory budget ({budget} bytes) for other peers",
            )
            return
        assert self._transport is not None
        self._address = peer_address(self._transport.get_extra_info("peername"))
        refusal = self._core.admission.refusal(self._address)
        if refusal is not None:
            logger.warning("refused a connection: %s", refusal)
            self._reject(ErrorCode.REJECTED_SETUP, refusal)
            return
        self._counted = True
        connections.add(self)

    def _tick_interval(self) -> float:
        if not self._established:
            return self._core.limits.setup_timeout  # the SETUP deadline
        return super()._tick_interval()

    def _tick(self) -> None:
        if self._established:
            super()._tick()
            return
        self.fail(
            RSocketConnectionError(
                f"no SETUP within {self._core.limits.setup_timeout:g} s of connecting",
                code=ErrorCode.CONNECTION_ERROR,
            ),
            notify_peer=True,
        )

    def _check_held(self) -> None:
        if not self._established:
            limit = self._core.limits.max_setup_size
            announced = self._reader.expected - 3  # the length prefix is not the frame's
            if announced > limit:
                self._reject(
                    ErrorCode.REJECTED_SETUP,
                    f"a {announced}-byte frame before SETUP: the limit is {limit} bytes",
                )
                return
        super()._check_held()

    def _held_changed(self) -> None:
        if self._counted:
            self._core.memory.report(self)

    def _forget(self, connection: Connection, error: RSocketConnectionError) -> None:
        self._core.memory.forget(self)
        if self._counted:
            self._counted = False
            self._core.admission.closed(self._address, pending=not self._established)
        self._core.forget(self)

    def _dispatch(self, frame: Frame) -> None:
        if self._established:
            super()._dispatch(frame)
            return
        if self._refusing:
            return  # its refusal is delayed (failed authentication): nothing more is read
        if frame.frame_type == FrameType.SETUP and frame.stream_id == 0:
            self._setup(frame)
            return
        if frame.frame_type == FrameType.RESUME:
            self._reject(ErrorCode.REJECTED_RESUME, "resumption is not supported")
            return
        self._reject(
            ErrorCode.INVALID_SETUP,
            f"the first frame must be SETUP on stream 0, got {frame!r}",
        )

    def _reject(self, code: ErrorCode, message: str) -> None:
        self.fail(RSocketConnectionError(message, code=code), notify_peer=True)

    def _setup(self, frame: Frame) -> None:
        if self._established:
            return  # spec: a second SETUP is ignored
        setup = frame.setup
        assert setup is not None
        limits = self._core.limits
        size = len(frame.data) + len(frame.metadata or b"")
        if size > limits.max_setup_size:
            self._reject(
                ErrorCode.REJECTED_SETUP,
                f"SETUP with {size} bytes of payload: the limit is {limits.max_setup_size}",
            )
            return
        if setup.major_version != 1:
            self._reject(
                ErrorCode.UNSUPPORTED_SETUP,
                f"protocol version {setup.major_version}.{setup.minor_version} "
                "is not supported (1.x is)",
            )
            return
        if setup.resume_token is not None:
            self._reject(ErrorCode.REJECTED_SETUP, "resumption is not supported")
            return
        if setup.lease:
            self._reject(ErrorCode.UNSUPPORTED_SETUP, "leasing is not supported")
            return
        if setup.keepalive_ms <= 0 or setup.max_lifetime_ms <= 0:
            self._reject(ErrorCode.INVALID_SETUP, "keepalive and max lifetime must be > 0")
            return
        if self._core.token is not None:
            presented = None
            if setup.metadata_mime == COMPOSITE and frame.metadata:
                try:
                    presented = bearer_token(decode_composite(frame.metadata))
                except FrameError as error:
                    self._reject(ErrorCode.INVALID_SETUP, str(error))
                    return
            if not self._core.token_ok(presented):
                self._refuse_authentication(
                    "authentication required: the SETUP carries no bearer token"
                    if presented is None
                    else "invalid bearer token"
                )
                return
        self._metadata_mime = setup.metadata_mime
        self._established = True
        if self._counted:
            self._core.admission.admitted(self._address)
        if self.on_admitted is not None:
            self.on_admitted()
        # the client's intervals, kept within the server's bounds (a timer per millisecond
        # per connection is the server's cost, and so is a silent peer kept for weeks)
        self._settings = self._settings.with_keepalive(
            min(max(setup.keepalive_ms / 1000, limits.min_keepalive), limits.max_keepalive),
            min(max(setup.max_lifetime_ms / 1000, limits.min_keepalive), limits.max_keepalive),
        )
        if self._timer is not None:
            self._timer.cancel()
        self._schedule_tick()

    def _refuse_authentication(self, reason: str) -> None:
        """Refuse a SETUP for its token, after the address's growing delay (logged)."""
        delay = self._core.admission.failed(self._address)
        logger.warning("refused a SETUP from %s: %s", self._address, reason)
        self._refusing = True
        self._loop.call_later(delay, self._reject, ErrorCode.REJECTED_SETUP, reason)

    def _admit(self, frame: Frame) -> bool:
        # The first fragment of a request: the route and the token must be in it, so a
        # peer cannot make the server buffer a chain it would refuse once whole.
        kind = FrameType(frame.frame_type)
        stream_id = frame.stream_id
        if not self._stream_id_ok(kind, stream_id):
            return False
        try:
            route, _ = route_of(self._metadata_mime, frame.metadata)
        except FrameError:
            route = None
        if route is None:
            self._refuse(
                kind,
                stream_id,
                ErrorCode.REJECTED,
                "a fragmented request must carry its route (and token) in its first fragment",
            )
            return False
        return self._route(kind, stream_id, route) is not None

    def _stream_id_ok(self, kind: FrameType, stream_id: int) -> bool:
        """A request's stream ID is odd and not in use.

        An even ID is refused with ``ERROR[INVALID]`` on it. A request on an ID still in
        use is ignored (logged): the requester reused an ID before it heard the stream
        end, and any answer on that ID would reach it as the end of the stream it already
        has (it cannot tell the two apart). The server frees an ID before it sends the
        stream's last frame, so a requester that waits to hear a stream end before reusing
        its ID is never ignored.
        """
        if not stream_id & 1:
            logger.warning("refused %s on stream %d: even stream ID", kind.name, stream_id)
            message = f"stream ID {stream_id} is even: a client's stream IDs are odd"
            self._refuse(kind, stream_id, ErrorCode.INVALID, message)
            return False
        with self._lock:
            in_use = stream_id in self._streams
        if in_use:
            logger.warning("ignored %s on stream %d: stream ID in use", kind.name, stream_id)
            return False
        return True

    def _route(
        self, kind: FrameType, stream_id: int, route: str | None
    ) -> Callable[[bytes], Publisher[bytes | Payload]] | None:
        """The factory serving a request, or ``None`` once it has been refused."""
        if kind == FrameType.REQUEST_CHANNEL:
            self._refuse(kind, stream_id, ErrorCode.REJECTED, "request-channel is not supported")
            return None
        factory = self._core.routes.get(route) if route is not None else None
        if factory is None:
            message = "no route given" if route is None else f"no route {route!r}"
            logger.warning("refused %s on stream %d: %s", kind.name, stream_id, message)
            self._refuse(kind, stream_id, ErrorCode.REJECTED, message)
            return None
        limit = self._core.limits.max_streams
        if self.open_streams >= limit:
            logger.warning("refused %s on stream %d: %d streams open", kind.name, stream_id, limit)
            self._refuse(
                kind, stream_id, ErrorCode.REJECTED, f"too many streams open (the limit is {limit})"
            )
            return None
        return factory

    def _request(self, frame: Frame) -> None:
        """Serve a request: check its stream ID, metadata, token and route, then start it.

        Stream IDs (spec, "Stream Identifiers"): a client's are odd, so a request on an
        even ID gets ``ERROR[INVALID]``. IDs may come in any order, since a client may
        wrap past ``2**31 - 1`` and reuse the IDs of ended streams; a request on an ID
        still in use is ignored (see ``_stream_id_ok``).
        Malformed routing or composite metadata gets ``ERROR[INVALID]`` on that stream;
        the connection and its other streams go on. Fire-and-forget gets no answer.
        """
        stream_id = frame.stream_id
        kind = FrameType(frame.frame_type)
        if not self._stream_id_ok(kind, stream_id):
            return
        try:
            route, _ = route_of(self._metadata_mime, frame.metadata)
        except FrameError as error:
            logger.warning("refused %s on stream %d: %s", kind.name, stream_id, error)
            self._refuse(kind, stream_id, ErrorCode.INVALID, str(error))
            return
        factory = self._route(kind, stream_id, route)
        if factory is None:
            return
        initial_n = frame.number if kind == FrameType.REQUEST_STREAM else 1
        stream = ResponderStream(
            self,
            kind=kind,
            route=route or "",
            factory=factory,
            data=frame.data,
            initial_n=initial_n,
            executor=self._core.executor,
        )
        if self.register(stream, stream_id):
            stream.start()

    def _refuse(self, kind: FrameType, stream_id: int, code: ErrorCode, message: str) -> None:
        if kind != FrameType.REQUEST_FNF:
            self.send(encode_error(stream_id, code, message))

    def _connection_error_frame(self, frame: Frame) -> None:
        if frame.number in (0x001, 0x002, 0x003, 0x004):
            return  # spec: a server ignores setup and resume errors
        super()._connection_error_frame(frame)


def _make_core(
    loop: asyncio.AbstractEventLoop,
    *,
    routes: Mapping[str, Callable[[bytes], Publisher[bytes | Payload]]],
    token: str | None,
    ssl_context: ssl.SSLContext | None,
    max_frame_size: int,
    workers: int,
    limits: ServerLimits | None,
) -> _ServerCore:
    limits = ServerLimits() if limits is None else limits
    settings = ConnectionSettings(
        max_frame_size=max_frame_size,
        write_high_water=limits.write_high_water,
        memory_budget=limits.connection_memory,
    )
    executor = DaemonThreadPool(max_workers=workers, thread_name_prefix="rsocket-server")
    return _ServerCore(
        loop,
        routes=routes,
        token=token,
        ssl_context=ssl_context,
        settings=settings,
        executor=executor,
        limits=limits,
    )


class RSocketServer:
    """An RSocket server running on its own event-loop thread (see ``serve``).

    Attributes:
        host: the address it listens on.
        port: the port it listens on (the one the OS chose when ``serve`` got ``port=0``).
    """

    def __init__(self, loop_thread: LoopThread, core: _ServerCore, host: str) -> None:
        self._loop_thread = loop_thread
        self._core = core
        self.host = host
        self.port = core.port
        self._closed = False
        self._close_lock = threading.Lock()

    @property
    def connection_count(self) -> int:
        """How many client connections are open right now."""
        return len(self._core.connections)

    def statistics(self) -> TransportStatistics:
        """A snapshot of the server's counters (connections, streams, frames, bytes)."""
        return self._core.statistics()

    def close(self, timeout: float = 5.0) -> None:
        """Stop listening, close every connection (its streams' publishers are cancelled).

        Returns within about ``timeout`` seconds in all (a fraction of a second more at
        most): it waits for the sockets to close, then for the calls into route
        publishers already running or queued (cancellations) to return. A call still
        blocked at the deadline, such as a publisher stuck inside ``request``, is left
        running on its worker, a daemon thread that will not keep the process alive;
        calls that had not started are cancelled. Idempotent.
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        deadline = time.monotonic() + timeout
        try:
            self._loop_thread.call(self._core.aclose(timeout), timeout + _SLACK)
        except (TimeoutError, RuntimeError):
            logger.warning("the RSocket server did not close within %s s", timeout)
        self._loop_thread.stop(max(0.0, deadline - time.monotonic()))
        executor = self._core.executor
        executor.shutdown(wait=True, timeout=max(0.0, deadline - time.monotonic()))
        executor.shutdown(wait=False, cancel_futures=True)  # what could not run in time

    def __enter__(self) -> RSocketServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class AsyncRSocketServer:
    """An RSocket server on the caller's event loop (see ``serve_async``).

    Attributes:
        host: the address it listens on.
        port: the port it listens on.
    """

    def __init__(self, core: _ServerCore, host: str) -> None:
        self._core = core
        self.host = host
        self.port = core.port
        self._closed = False

    @property
    def connection_count(self) -> int:
        """How many client connections are open right now."""
        return len(self._core.connections)

    def statistics(self) -> TransportStatistics:
        """A snapshot of the server's counters (connections, streams, frames, bytes)."""
        return self._core.statistics()

    async def aclose(self, timeout: float = 5.0) -> None:
        """Stop listening and close every connection; idempotent.

        Returns within about ``timeout`` seconds, as ``RSocketServer.close`` does: the
        workers that run route publishers are shut down without blocking the loop, and a
        call still blocked at the deadline is left on its daemon thread.
        """
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await self._core.aclose(timeout)
        executor = self._core.executor
        remaining = max(0.0, deadline - loop.time())
        await loop.run_in_executor(None, lambda: executor.shutdown(wait=True, timeout=remaining))
        executor.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> AsyncRSocketServer:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def serve(
    routes: Mapping[str, Callable[[bytes], Publisher[bytes | Payload]]],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    token: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_frame_size: int = MAX_FRAME_SIZE,
    workers: int = 8,
    transport: str = "tcp",
    limits: ServerLimits | None = None,
) -> RSocketServer:
    """Serve ``routes`` over RSocket/TCP from a background event-loop thread.

    Args:
        routes: route name -> factory. A request for a route calls its factory with the
            request's data (``bytes``), on a worker thread, and streams the returned
            ``Publisher[bytes]`` (or of ``Payload``, to send metadata with the elements)
            to the requester under the requester's demand.
            Request-stream sends every element; request-response sends the first and
            cancels the publisher; fire-and-forget runs it and discards the elements.
        host: the address to listen on.
        port: the port to listen on; ``0`` lets the OS choose (read ``.port``).
        token: require this bearer token (``message/x.rsocket.authentication.v0``) in
            the SETUP's composite metadata: admission before work. A SETUP without it, or
            with another, gets ``ERROR[REJECTED_SETUP]`` after a delay that grows with
            the peer address's failures, and the connection is closed; until its SETUP
            is admitted a connection holds at most ``limits.max_setup_size`` bytes and
            gets no keepalive echo (``ServerLimits``). Refusals are logged on the
            ``reactive_streams.rsocket`` logger.
        ssl_context: a server-side context to serve TLS.
        max_frame_size: larger frames are fragmented on send and refused on receipt.
        workers: threads that run factories and the publishers' ``request``/``cancel``.
            Connections use no thread of their own: idle ones cost a socket only.
        transport: ``"tcp"`` (length-prefixed frames) or ``"ws"`` (RSocket over WebSocket,
            one frame per binary message, any path; needs the ``aiohttp`` package:
            ``pip install 'reactive-streams-py[rsocket-ws]'``).
            A WebSocket message longer than ``max_frame_size`` closes the connection
            (close code 1009) before it is buffered whole.
        limits: what one peer may make the server hold, and for how long: connections,
            streams per connection, the SETUP deadline and size, the memory budget of a
            connection, the write high-water mark, the keepalive floor. ``None``: the
            defaults of ``ServerLimits`` (each named after the Netty, rsocket-java or
            nginx default it follows).

    Returns:
        A running ``RSocketServer``; close it (or use it as a context manager).

    Raises:
        OSError: the address could not be bound.
        ValueError: an unknown ``transport``.
    """
    loop_thread = LoopThread("rsocket-server-loop")
    core = _make_core(
        loop_thread.loop,
        routes=routes,
        token=token,
        ssl_context=ssl_context,
        max_frame_size=max_frame_size,
        workers=workers,
        limits=limits,
    )
    try:
        loop_thread.call(core.start(host, port, transport), 30.0)
    except BaseException:
        loop_thread.stop()
        core.executor.shutdown(wait=False)
        raise
    return RSocketServer(loop_thread, core, host)


async def serve_async(
    routes: Mapping[str, Callable[[bytes], Publisher[bytes | Payload]]],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    token: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_frame_size: int = MAX_FRAME_SIZE,
    workers: int = 8,
    transport: str = "tcp",
    limits: ServerLimits | None = None,
) -> AsyncRSocketServer:
    """Serve ``routes`` on the running event loop; the arguments are those of ``serve``.

    The loop only moves frames: factories, ``subscribe``, ``request`` and ``cancel`` run
    on the server's worker threads, so a synchronous route publisher never runs on the
    loop. Close with ``await server.aclose()`` or ``async with``.
    """
    loop = asyncio.get_running_loop()
    core = _make_core(
        loop,
        routes=routes,
        token=token,
        ssl_context=ssl_context,
        max_frame_size=max_frame_size,
        workers=workers,
        limits=limits,
    )
    try:
        await core.start(host, port, transport)
    except BaseException:
        core.executor.shutdown(wait=False)
        raise
    return AsyncRSocketServer(core, host)
