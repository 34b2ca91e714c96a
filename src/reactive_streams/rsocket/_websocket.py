"""The WebSocket transport: one RSocket frame per binary message, via ``websockets``.

``Connection`` speaks to an ``asyncio.Transport``. ``WebSocketTransport`` is that
transport over a ``websockets`` connection: ``write`` receives whole length-prefixed
frames (the connection only ever writes whole frames) and queues each frame, without its
prefix, as one binary message; a writer task sends them in order with ``websockets``' own
flow control, and pauses the connection's writers above a high-water mark. A reader task
gives each message back to the connection with a length prefix, so framing, validation
and the frame limit are the same as over TCP. ``websockets`` is imported lazily: only
``ws://`` URLs and ``serve(..., transport="ws")`` need it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ._connection import Connection

__all__ = ["WebSocketTransport", "import_websockets"]

_HIGH_WATER: Final[int] = 1 << 20
_LOW_WATER: Final[int] = 1 << 18


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
        self._paused = False
        self._closing = False
        self._wakeup = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self.task: asyncio.Task[None] | None = None  # run(), kept referenced here

    async def run(self) -> None:
        """Pump messages both ways until either side ends; then tell the protocol."""
        self._protocol.connection_made(self)
        self._writer = asyncio.create_task(self._write_loop())
        error: Exception | None = None
        try:
            async for message in self._websocket:
                frame = message.encode("utf-8") if isinstance(message, str) else message
                self._protocol.data_received(len(frame).to_bytes(3, "big") + frame)
        except Exception as exc:  # the connection broke
            error = exc
        finally:
            self._closing = True
            self._wakeup.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._writer, 5.0)
            self._protocol.connection_lost(error)

    async def _write_loop(self) -> None:
        websocket = self._websocket
        try:
            while True:
                while self._messages:
                    message = self._messages.popleft()
                    self._queued -= len(message)
                    await websocket.send(message)
                    if self._paused and self._queued < _LOW_WATER:
                        self._paused = False
                        self._protocol.resume_writing()
                if self._closing:
                    break
                self._wakeup.clear()
                await self._wakeup.wait()
        except Exception:  # the peer went away; the reader will see it too
            self._messages.clear()
        with contextlib.suppress(Exception):
            await websocket.close()

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
        if not self._paused and self._queued > _HIGH_WATER:
            self._paused = True
            self._protocol.pause_writing()

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True
        self._wakeup.set()

    def abort(self) -> None:
        self._messages.clear()
        self.close()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default
