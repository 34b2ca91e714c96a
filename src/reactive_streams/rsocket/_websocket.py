"""The WebSocket transport: one RSocket frame per binary message, via ``websockets``.

``Connection`` speaks to an ``asyncio.Transport``. ``WebSocketTransport`` is that
transport over a ``websockets`` connection: ``write`` receives whole length-prefixed
frames (the connection only ever writes whole frames) and queues each frame, without its
prefix, as one binary message (the RSocket WebSocket transport, and rsocket-py and
rsocket-java with it, read each message as exactly one frame, so frames are never
coalesced into a message); a writer task sends them in order, the messages of a batch
in one write to the socket, with ``websockets``' own flow control, and pauses the
connection's writers above a high-water mark (``set_write_buffer_limits``). A reader task
gives the messages back to the connection with length prefixes, so framing, validation
and the frame limit are the same as over TCP: the messages ``websockets`` has already read
go over together, one ``data_received`` per batch, not per frame. ``pause_reading``
holds the reader between messages.

Reading never waits behind writing: ``websockets``' ``send`` only suspends when the
socket's buffer is full, so a writer with a long queue and a fast peer would otherwise keep
the loop for the whole queue, and a ``CANCEL`` would wait behind every frame queued before
it. The writer yields to the loop every ``_YIELD_EVERY`` messages. ``websockets`` is
imported lazily: only ``ws://`` URLs and ``serve(..., transport="ws")`` need it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import TYPE_CHECKING, Any, Final

from ._errors import FrameError
from ._frames import MAX_FRAME_SIZE

if TYPE_CHECKING:
    from ._connection import Connection

__all__ = ["WebSocketTransport", "import_websockets"]

_YIELD_EVERY: Final[int] = 64
"""Messages the writer sends before it lets the loop serve reads (and everything else)."""


def import_websockets() -> Any:
    """Import ``websockets``, or explain how to install it."""
    try:
        import websockets  # noqa: PLC0415 - optional dependency
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the WebSocket transport needs the websockets package: pip install websockets"
        ) from exc
    return websockets


class WebSocketTransport(asyncio.Transport):
    """An ``asyncio.Transport`` facade over a ``websockets`` connection (see the module)."""

    def __init__(self, websocket: Any, protocol: Connection) -> None:
        super().__init__()
        self._websocket = websocket
        self._protocol = protocol
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
        self._protocol.connection_made(self)
        self._writer = asyncio.create_task(self._write_loop())
        loop = asyncio.get_running_loop()
        error: Exception | None = None
        try:
            async for message in self._websocket:
                frame = message.encode("utf-8") if isinstance(message, str) else message
                if len(frame) > MAX_FRAME_SIZE:  # websockets' max_size should stop it first
                    self._deliver()
                    self._protocol.fail(
                        FrameError(
                            f"a WebSocket message of {len(frame)} bytes is beyond the "
                            f"maximum frame size of {MAX_FRAME_SIZE} bytes"
                        ),
                        notify_peer=True,
                    )
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
            self._protocol.connection_lost(error)

    def _deliver(self) -> None:
        """Give the protocol every message received since the last call, in one piece.

        ``websockets`` hands over messages it has already read without suspending, so the
        reader collects them until it would wait, and this callback (queued behind it)
        passes them on together: one decode and one wake-up of a stream per batch.
        """
        received = self._received
        if received:
            self._received = []
            self._protocol.data_received(b"".join(received))

    async def _write_loop(self) -> None:
        websocket = self._websocket
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
            await websocket.close()

    async def _send(self, batch: list[bytes]) -> None:
        """Send each of ``batch`` as one binary message, in one write to the socket.

        All but the last are framed by the connection's sans-I/O protocol
        (``protocol.send_binary``) and written together; the last goes through
        ``websocket.send``, which writes it, waits for the socket's buffer to drain and
        raises ``ConnectionClosed`` if the connection is no longer open.
        """
        websocket = self._websocket
        if len(batch) > 1:
            with contextlib.suppress(Exception):  # not open any more: send says how below
                protocol = websocket.protocol
                for message in batch[:-1]:
                    protocol.send_binary(message)
                chunks = protocol.data_to_send()
                if all(chunks):  # no end-of-stream marker: one write for them all
                    websocket.transport.write(b"".join(chunks))
                else:  # pragma: no cover - only after a close, which send handles
                    for chunk in chunks:
                        if chunk:
                            websocket.transport.write(chunk)
        await websocket.send(batch[-1])

    # -- asyncio.Transport ----------------------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        view = memoryview(data)
        position = 0
        end = len(view)
        while position + 3 <= end:
            length = int.from_bytes(view[position : position + 3], "big")
            message = bytes(view[position + 3 : position + 3 + length])
            self._messages.append(message)
            self._queued += len(message)
            position += 3 + length
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
        return default
