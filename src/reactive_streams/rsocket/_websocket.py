"""The WebSocket transport: one RSocket frame per binary message, via ``aiohttp``.

``Connection`` speaks to an ``asyncio.Transport``. ``WebSocketTransport`` is that
transport over an ``aiohttp`` WebSocket (a client's ``ClientWebSocketResponse`` or a
server's ``WebSocketResponse``, the handshake done): ``write`` receives whole
length-prefixed frames (the connection only ever writes whole frames) and queues each
frame, without its prefix, as one binary message (the RSocket WebSocket transport, and
rsocket-py and rsocket-java with it, read each message as exactly one frame, so frames are
never coalesced into a message). A writer task frames the queued messages with
``aiohttp``'s ``WebSocketWriter`` (masked on the client's side, as RFC 6455 requires) and
writes each batch to the socket in one write, waiting while the socket's buffer is above
its high-water mark; above ``set_write_buffer_limits``' mark it pauses the connection's
writers. A reader task gives the messages back to the connection with length prefixes, so
framing, validation and the frame limit are the same as over TCP: the messages ``aiohttp``
has already parsed go over together, one ``data_received`` per batch, not per frame.
``pause_reading`` holds the reader between messages (``aiohttp``'s queue then stops
reading from the socket). Control frames (ping, pong, close) are ``aiohttp``'s: it answers
pings and the close handshake, and refuses a message beyond ``max_msg_size`` (close code
1009) as soon as its header is read.

Reading never waits behind writing: the writer yields to the loop every ``_YIELD_EVERY``
messages, so a writer with a long queue and a fast peer does not keep the loop for the
whole queue, and a ``CANCEL`` does not wait behind every frame queued before it.
``aiohttp`` is imported lazily: only ``ws://`` URLs and ``serve(..., transport="ws")``
need it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ._connection import Connection

__all__ = ["WebSocketServer", "WebSocketTransport", "import_aiohttp"]

_YIELD_EVERY: Final[int] = 64
"""Messages the writer sends before it lets the loop serve reads (and everything else)."""

_LINGER: Final[float] = 5.0
"""Seconds a server keeps reading (and dropping) what a peer still sends after the close."""

_CLEAN_CLOSE_CODES: Final[frozenset[int | None]] = frozenset({1000, 1001})
"""Close codes that end a connection without an error (normal closure, going away)."""


def import_aiohttp() -> Any:
    """Import ``aiohttp``, or explain how to install it."""
    try:
        import aiohttp  # noqa: PLC0415 - optional dependency
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the WebSocket transport needs the aiohttp package: "
            "pip install 'reactive-streams-py[rsocket-ws]'"
        ) from exc
    return aiohttp


class _Collector(asyncio.Transport):
    """Where the frame writer puts its bytes: kept until the batch goes out in one write."""

    def __init__(self, socket: asyncio.BaseTransport) -> None:
        super().__init__()
        self._socket = socket
        self.chunks: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.chunks.append(bytes(data))

    def is_closing(self) -> bool:
        return self._socket.is_closing()


class WebSocketTransport(asyncio.Transport):
    """An ``asyncio.Transport`` facade over an ``aiohttp`` WebSocket (see the module).

    ``session``: a client's ``aiohttp.ClientSession``, closed when the connection ends.
    """

    def __init__(self, websocket: Any, protocol: Connection, session: Any = None) -> None:
        super().__init__()
        from aiohttp.http import WebSocketWriter  # noqa: PLC0415 - optional dependency

        self._websocket = websocket
        self._protocol = protocol
        self._session = session
        # aiohttp's own writer for this WebSocket knows the socket, its protocol (whose
        # pause_writing the socket calls) and whether to mask; ours frames into a batch
        # and waits on that protocol whenever the socket's buffer is above its mark.
        own = websocket._writer
        self._socket: asyncio.Transport = own.transport
        self._collector = _Collector(self._socket)
        self._framer = WebSocketWriter(
            own.protocol, self._collector, use_mask=own.use_mask, limit=0
        )
        self._messages: deque[bytes] = deque()
        self._queued = 0
        self._high_water = 64 * 1024
        self._low_water = 16 * 1024
        self._paused = False
        self._reading = asyncio.Event()
        self._reading.set()
        self._closing = False
        self._wakeup = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._received: list[bytes] = []  # length prefixes and frames not yet delivered
        self.task: asyncio.Task[None] | None = None  # run(), kept referenced here

    async def run(self) -> None:
        """Pump messages both ways until either side ends; then tell the protocol."""
        from aiohttp import WSMsgType  # noqa: PLC0415 - optional dependency

        binary, text = WSMsgType.BINARY, WSMsgType.TEXT
        websocket = self._websocket
        self._protocol.connection_made(self)
        self._writer = asyncio.create_task(self._write_loop())
        loop = asyncio.get_running_loop()
        error: Exception | None = None
        try:
            while True:
                message = await websocket.receive()
                kind = message.type
                if kind is binary:
                    frame = message.data
                elif kind is text:
                    frame = message.data.encode("utf-8")
                else:  # closed, closing, or an error (aiohttp has sent the close)
                    error = self._ending(message)
                    break
                received = self._received
                received += (len(frame).to_bytes(3, "big"), frame)
                if len(received) == 2:  # the first of a batch: hand them over once idle
                    loop.call_soon(self._deliver)
                if not self._reading.is_set():
                    self._deliver()
                    await self._reading.wait()
        except Exception as exc:  # the connection broke
            error = exc
        finally:
            self._deliver()
            self._closing = True
            self._wakeup.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._writer, 5.0)
            if self._session is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._session.close(), 5.0)
            self._protocol.connection_lost(error)

    def _ending(self, message: Any) -> Exception | None:
        """The error a non-data message ends the connection with (``None``: a clean close)."""
        from aiohttp import WSMsgType  # noqa: PLC0415 - optional dependency

        if message.type is WSMsgType.ERROR:
            data = message.data
            return data if isinstance(data, Exception) else ConnectionError(str(data))
        code = self._websocket.close_code
        if code in _CLEAN_CLOSE_CODES or self._closing:
            return None
        return ConnectionResetError(f"the WebSocket closed with code {code}")

    def _deliver(self) -> None:
        """Give the protocol every message received since the last call, in one piece.

        ``receive`` returns the messages ``aiohttp`` has already parsed without
        suspending, so the reader collects them until it would wait, and this callback
        (queued behind it) passes them on together: one decode and one wake-up of a
        stream per batch.
        """
        received = self._received
        if received:
            self._received = []
            self._protocol.data_received(b"".join(received))

    async def _write_loop(self) -> None:
        messages = self._messages
        try:
            while True:
                while messages:
                    count = min(len(messages), _YIELD_EVERY)
                    batch = [messages.popleft() for _ in range(count)]
                    self._queued -= sum(map(len, batch))
                    await self._send(batch)
                    if self._paused and self._queued < self._low_water:
                        self._paused = False
                        self._protocol.resume_writing()
                    if messages:
                        await asyncio.sleep(0)  # let reads in (see the module docstring)
                if self._closing:
                    break
                self._wakeup.clear()
                await self._wakeup.wait()
        except Exception:  # the peer went away; the reader will see it too
            messages.clear()
        with contextlib.suppress(Exception):
            await self._websocket.close()

    async def _send(self, batch: list[bytes]) -> None:
        """Send each of ``batch`` as one binary message, in one write to the socket.

        The frame writer waits (inside ``send_frame``) while the socket's buffer is above
        its high-water mark, and raises if the socket has gone; a WebSocket that started
        closing meanwhile gets nothing more (no data may follow a close frame).
        """
        collector = self._collector
        send_frame = self._framer.send_frame
        for message in batch:
            await send_frame(message, 0x2)  # binary
        chunks = collector.chunks
        collector.chunks = []
        if self._websocket.closed or self._socket.is_closing():
            raise ConnectionResetError("the WebSocket is closing")
        self._socket.write(b"".join(chunks))

    # -- asyncio.Transport ----------------------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        if type(data) is not bytes:
            data = bytes(data)
        append = self._messages.append
        position = 0
        end = len(data)
        queued = 0
        while position + 3 <= end:
            start = position + 3
            position = start + (data[position] << 16 | data[position + 1] << 8 | data[start - 1])
            append(data[start:position])
            queued += position - start
        self._queued += queued
        self._wakeup.set()
        if not self._paused and self._queued > self._high_water:
            self._paused = True
            self._protocol.pause_writing()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if high is not None:
            self._high_water = high
        self._low_water = low if low is not None else self._high_water // 4

    def get_write_buffer_size(self) -> int:
        return self._queued

    def pause_reading(self) -> None:
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def is_reading(self) -> bool:
        return self._reading.is_set()

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True
        self._wakeup.set()
        self._reading.set()

    def abort(self) -> None:
        self._messages.clear()
        self.close()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name in ("peername", "sockname"):  # the socket's: who the peer is
            return self._socket.get_extra_info(name, default)
        return default


def _header_length(header: bytearray) -> int:
    """The length of a WebSocket frame header whose first two bytes are ``header``'s."""
    sized = header[1] & 0x7F
    extended = 2 if sized == 126 else 8 if sized == 127 else 0
    return 2 + extended + (4 if header[1] & 0x80 else 0)


class _Screen:
    """What ``aiohttp``'s WebSocket parser is fed until the connection is admitted.

    ``aiohttp`` reads a whole message before the server sees its first byte, so a peer
    could make it hold ``max_frame_size`` bytes before its ``SETUP`` is even read. Until
    ``admit``, the screen reads the frame headers itself, ahead of the parser: a first
    message announcing more than ``limit`` bytes ends the connection (close code 1009,
    as ``aiohttp`` does for a message beyond ``max_msg_size``) before its body is read.
    Once the first message is whole, whatever follows is held, with reading from the
    socket paused, until ``admit`` passes it on; a connection refused instead closes
    with it. So a peer not yet admitted holds at most ``limit`` bytes and one read.
    """

    def __init__(self, parser: Any, queue: Any, protocol: Any, limit: int) -> None:
        self._parser = parser  # aiohttp's WebSocketReader
        self._queue = queue  # its WebSocketDataQueue
        self._protocol = protocol  # aiohttp's RequestHandler: pause_reading, resume_reading
        self._limit = limit
        self._open = False
        self._held: bytearray | None = None  # after the first message, until admitted
        self._header = bytearray()  # a frame header being read
        self._skip = 0  # payload bytes of the current frame still to come
        self._size = 0  # data bytes of the first message so far
        self._last = False  # the current frame ends the first message

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if self._open:
            return self._feed(data)
        if self._held is not None:
            self._held += data
            self._protocol.pause_reading()  # aiohttp resumes it when its queue is read
            return False, b""
        try:
            end = self._scan(data)
        except ValueError as exc:
            from aiohttp import WebSocketError, WSCloseCode  # noqa: PLC0415 - optional

            self._queue.set_exception(WebSocketError(WSCloseCode.MESSAGE_TOO_BIG, str(exc)))
            self._open = True
            return True, b""
        if end is None:
            return self._feed(data)
        self._held = bytearray(data[end:])
        self._protocol.pause_reading()
        return self._feed(data[:end])

    def _feed(self, data: bytes) -> tuple[bool, bytes]:
        result: tuple[bool, bytes] = self._parser.feed_data(data)
        return result

    def feed_eof(self) -> None:
        self._parser.feed_eof()

    def admit(self) -> None:
        """The connection was admitted: pass on what was held, and read the socket again."""
        if self._open:
            return
        self._open = True
        held, self._held = self._held, None
        if held:
            eof, _ = self._parser.feed_data(bytes(held))
            if eof:
                self._protocol.close()
                return
        self._protocol.resume_reading()

    def _scan(self, data: bytes) -> int | None:
        """Where in ``data`` the first message ends (``None``: not in it).

        Raises:
            ValueError: the first message is over ``limit`` bytes.
        """
        position, end = 0, len(data)
        header = self._header
        while position < end:
            if self._skip:
                step = min(self._skip, end - position)
                self._skip -= step
                position += step
                if not self._skip and self._last:
                    return position
                continue
            want = 2 if len(header) < 2 else _header_length(header)
            take = min(want - len(header), end - position)
            header += data[position : position + take]
            position += take
            if len(header) < 2 or len(header) < _header_length(header):
                continue
            sized = header[1] & 0x7F
            length = (
                int.from_bytes(header[2:4], "big")
                if sized == 126
                else int.from_bytes(header[2:10], "big")
                if sized == 127
                else sized
            )
            opcode, final = header[0] & 0x0F, bool(header[0] & 0x80)
            header.clear()
            self._last = False
            if opcode < 0x8:  # continuation, text or binary: the message's data
                self._size += length
                if self._size > self._limit:
                    raise ValueError(
                        f"a {self._size}-byte message before the connection was admitted: "
                        f"the limit is {self._limit} bytes"
                    )
                self._last = final
            self._skip = length
            if not length and self._last:
                return position
        return None


class WebSocketServer:
    """An ``aiohttp`` server that runs ``handler`` for every WebSocket, on any path.

    ``handler(websocket)`` gets a ``WebSocketResponse`` after the handshake and returns
    when the connection is over. Messages beyond ``max_frame_size`` bytes are refused with
    close code 1009 as soon as their header is read. With ``admission_size``, so is a
    first message beyond it, and nothing after the first message is read until the
    handler calls ``websocket.admit()`` (``_Screen``).
    """

    def __init__(self, runner: Any) -> None:
        self._runner = runner
        self._cleanup: asyncio.Task[None] | None = None

    @classmethod
    async def start(
        cls,
        handler: Any,
        host: str,
        port: int,
        *,
        ssl_context: Any,
        max_frame_size: int,
        admission_size: int | None = None,
    ) -> WebSocketServer:
        """Listen on ``host:port`` (``ssl_context``: TLS); raises ``OSError`` if unbound."""
        import_aiohttp()
        from aiohttp import web  # noqa: PLC0415 - optional dependency

        class LingeringResponse(web.WebSocketResponse):
            """A ``WebSocketResponse`` whose socket half-closes first, then closes.

            ``aiohttp`` closes the socket right after its close frame; a peer still
            sending (the rest of a message refused as too big, say) then gets a reset,
            and its kernel drops the close frame unread. Here the server sends the close
            frame and a FIN, keeps reading (``aiohttp`` drops what arrives once it is
            closing) until the peer closes too or ``_LINGER`` seconds pass, as RFC 6455
            (section 7.1.1) has servers close: so the peer reads why (code 1009).
            """

            lingering: asyncio.Transport | None = None
            screen: _Screen | None = None

            def _post_start(self, request: Any, protocol: Any, writer: Any) -> None:
                super()._post_start(request, protocol, writer)
                if admission_size is not None:  # aiohttp's parser, behind the screen
                    handler = request.protocol
                    self.screen = _Screen(
                        handler._payload_parser, self._reader, handler, admission_size
                    )
                    handler._payload_parser = self.screen

            def admit(self) -> None:
                """The peer is admitted: read its messages as they come."""
                if self.screen is not None:
                    self.screen.admit()

            def _close_transport(self) -> None:
                request = self._req
                transport = None if request is None else request.transport
                if transport is None or transport.is_closing():
                    return
                if transport.can_write_eof():
                    transport.write_eof()
                    self.lingering = transport
                    asyncio.get_running_loop().call_later(_LINGER, transport.close)
                else:  # TLS: no half-close
                    transport.close()

            async def linger(self) -> None:
                """Wait until the half-closed socket has closed (at most ``_LINGER`` s).

                The handler must not return before: ``aiohttp`` closes the socket then.
                """
                transport = self.lingering
                if transport is None:
                    return
                deadline = asyncio.get_running_loop().time() + _LINGER
                while not transport.is_closing() and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.05)

        async def upgrade(request: Any) -> Any:
            websocket = LingeringResponse(
                max_msg_size=max_frame_size + 1,  # aiohttp refuses a message of max_msg_size
                compress=False,
                autoping=True,
                heartbeat=None,  # RSocket keeps itself alive
            )
            await websocket.prepare(request)
            await handler(websocket)
            await websocket.linger()
            return websocket

        app = web.Application()
        app.router.add_get("/{path:.*}", upgrade)
        runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=5.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port, ssl_context=ssl_context).start()
        except BaseException:
            await runner.cleanup()
            raise
        return cls(runner)

    @property
    def port(self) -> int:
        """The port the server listens on."""
        port: int = self._runner.addresses[0][1]
        return port

    def close(self) -> None:
        """Stop listening, and start closing the connections' handlers."""
        if self._cleanup is None:
            self._cleanup = asyncio.get_running_loop().create_task(self._runner.cleanup())

    async def wait_closed(self) -> None:
        """Wait until ``close`` has finished."""
        self.close()
        assert self._cleanup is not None
        await asyncio.shield(self._cleanup)
