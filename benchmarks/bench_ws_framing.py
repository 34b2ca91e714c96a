"""Per-message cost of WebSocket framing and parsing, library against library.

``PYTHONPATH=src python benchmarks/bench_ws_framing.py [--messages N] [--rounds R]``

Small binary messages (14 bytes: an RSocket ``PAYLOAD`` frame of an 8-byte element, its
length prefix dropped) are framed and parsed without sockets by each library's own
machinery, the way a connection would use it:

- **frame**: ``N`` messages framed, then the bytes to send collected (``websockets``:
  ``Protocol.send_binary`` and ``data_to_send``; ``aiohttp``: ``WebSocketWriter``'s frame
  writer into a transport that keeps the chunks; ``wsproto``: ``Connection.send``);
  unmasked, as a server sends, and masked, as a client must;
- **parse**: the same ``N`` messages fed in 64 KiB reads and each message taken out
  (``websockets``: ``receive_data`` and ``events_received``; ``aiohttp``: the Cython
  ``WebSocketReader.feed_data`` and its queue; ``wsproto``: ``receive_data`` and
  ``events``).

Prints microseconds per message (best and median of ``R`` rounds, alternating the
libraries) and each library's ratio to ``websockets``. A library that is not installed is
left out.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

MESSAGE = bytes(range(14))
READ_SIZE = 64 * 1024


def _chunks(data: bytes) -> list[bytes]:
    return [data[i : i + READ_SIZE] for i in range(0, len(data), READ_SIZE)]


# -- websockets ---------------------------------------------------------------------------


def _websockets_protocol(side: str) -> Any:
    from websockets.protocol import OPEN, Protocol, Side

    return Protocol(Side.CLIENT if side == "client" else Side.SERVER, state=OPEN, max_size=None)


def websockets_frame(count: int, masked: bool) -> Callable[[], int]:
    def run() -> int:
        protocol = _websockets_protocol("client" if masked else "server")
        send = protocol.send_binary
        for _ in range(count):
            send(MESSAGE)
        return len(b"".join(protocol.data_to_send()))

    return run


def websockets_parse(count: int, masked: bool) -> Callable[[], int]:
    sender = _websockets_protocol("client" if masked else "server")
    for _ in range(count):
        sender.send_binary(MESSAGE)
    chunks = _chunks(b"".join(sender.data_to_send()))

    def run() -> int:
        protocol = _websockets_protocol("server" if masked else "client")
        received = 0
        for chunk in chunks:
            protocol.receive_data(chunk)
            for _frame in protocol.events_received():
                received += 1
        assert received == count, received
        return received

    return run


# -- aiohttp ------------------------------------------------------------------------------


class _Sink(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[bytes] = []
        self.write = self.chunks.append  # type: ignore[method-assign]

    def is_closing(self) -> bool:
        return False


class _Protocol:
    _paused = False
    _reading_paused = False

    def pause_reading(self) -> None:
        self._reading_paused = True

    def resume_reading(self) -> None:
        self._reading_paused = False


def aiohttp_frame(count: int, masked: bool) -> Callable[[], int]:
    from aiohttp._websocket.writer import WebSocketWriter

    def run() -> int:
        sink = _Sink()
        writer = WebSocketWriter(_Protocol(), sink, use_mask=masked)  # type: ignore[arg-type]
        frame = writer._write_websocket_frame
        for _ in range(count):
            frame(MESSAGE, 2, 0)
        return len(b"".join(sink.chunks))

    return run


def aiohttp_parse(count: int, masked: bool) -> Callable[[], int]:
    from aiohttp._websocket.reader import (
        WebSocketDataQueue,
        WebSocketReader,
    )
    from aiohttp._websocket.writer import WebSocketWriter

    sink = _Sink()
    writer = WebSocketWriter(_Protocol(), sink, use_mask=masked)  # type: ignore[arg-type]
    for _ in range(count):
        writer._write_websocket_frame(MESSAGE, 2, 0)
    chunks = _chunks(b"".join(sink.chunks))
    loop = asyncio.new_event_loop()

    async def parse() -> int:
        queue = WebSocketDataQueue(_Protocol(), 2**30, loop=loop)  # type: ignore[arg-type]
        reader = WebSocketReader(queue, 2**24, compress=False, decode_text=False)
        buffer = queue._buffer
        read = queue.read
        received = 0
        for chunk in chunks:
            reader.feed_data(chunk)
            while buffer:  # read() returns at once while the queue holds messages
                await read()
                received += 1
        assert received == count, received
        return received

    def run() -> int:
        return loop.run_until_complete(parse())

    return run


# -- wsproto ------------------------------------------------------------------------------


def wsproto_frame(count: int, masked: bool) -> Callable[[], int]:
    from wsproto.connection import Connection, ConnectionType
    from wsproto.events import BytesMessage

    def run() -> int:
        connection = Connection(ConnectionType.CLIENT if masked else ConnectionType.SERVER)
        send = connection.send
        out = [send(BytesMessage(data=MESSAGE)) for _ in range(count)]
        return len(b"".join(out))

    return run


def wsproto_parse(count: int, masked: bool) -> Callable[[], int]:
    from wsproto.connection import Connection, ConnectionType
    from wsproto.events import BytesMessage

    sender = Connection(ConnectionType.CLIENT if masked else ConnectionType.SERVER)
    chunks = _chunks(b"".join(sender.send(BytesMessage(data=MESSAGE)) for _ in range(count)))

    def run() -> int:
        connection = Connection(ConnectionType.SERVER if masked else ConnectionType.CLIENT)
        received = 0
        for chunk in chunks:
            connection.receive_data(chunk)
            for event in connection.events():
                received += event.message_finished  # a frame cut by a read comes in parts
        assert received == count, received
        return received

    return run


Case = "Callable[..., Callable[[], int]]"
LIBRARIES: dict[str, tuple[str, Case, Case]] = {
    "websockets": ("websockets", websockets_frame, websockets_parse),
    "aiohttp": ("aiohttp", aiohttp_frame, aiohttp_parse),
    "wsproto": ("wsproto", wsproto_frame, wsproto_parse),
}


def _installed(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    count = args.messages
    names = [name for name, (module, _, _) in LIBRARIES.items() if _installed(module)]
    print(f"load average {os.getloadavg()[0]:.1f}; {count:,} messages of {len(MESSAGE)} bytes")
    print("| case | library | best us/msg | median us/msg | median / websockets |")
    print("| --- | --- | ---: | ---: | ---: |")
    for what in ("frame", "parse"):
        for masked in (False, True):
            runs = {
                name: (LIBRARIES[name][1] if what == "frame" else LIBRARIES[name][2])(count, masked)
                for name in names
            }
            times: dict[str, list[float]] = {name: [] for name in names}
            for _ in range(args.rounds):
                for name in names:
                    start = time.perf_counter()
                    runs[name]()
                    times[name].append((time.perf_counter() - start) / count * 1e6)
            base = statistics.median(times["websockets"]) if "websockets" in times else 0.0
            case = f"{what}, {'masked' if masked else 'unmasked'}"
            for name in names:
                median = statistics.median(times[name])
                ratio = f"{median / base:.2f}" if base else "-"
                print(f"| {case} | {name} | {min(times[name]):.3f} | {median:.3f} | {ratio} |")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
