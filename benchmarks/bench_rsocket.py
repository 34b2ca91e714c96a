"""RSocket over loopback TCP: ours against rsocket-py 0.4.20 and the floor, same run.

Usage::

    PYTHONPATH=src python benchmarks/bench_rsocket.py                  # all four parts
    PYTHONPATH=src python benchmarks/bench_rsocket.py --elements 20000 --skip-memory
    PYTHONPATH=src python benchmarks/bench_rsocket.py --frames-only --rounds 7

0. Frames (8-byte payloads, request-stream, loopback TCP), in alternating rounds:
   **the floor**, a bare asyncio client that reads the same PAYLOAD frames in 64 KiB
   reads (``BufferedProtocol``) and walks them with ``struct``, no demand and no object
   per frame, from a bare server that writes them pre-encoded; our ``serve`` +
   ``connect`` over TCP and over WebSocket with a subscriber that requests 256 at a time
   (128 more each time half are consumed); rsocket-py on its idiomatic path. Best and
   median of ``--rounds`` rounds, and the ratios ours / floor, WebSocket / TCP and
   rsocket-py / ours, of the medians and of the bests. Our server runs in this process
   (its work then shares the GIL with the client's), or with ``--server-process`` in a
   child process, as the floor's trivial server might as well.

1. Elements/s with short payloads (``b"element-<i>"``): our ``serve`` + ``connect`` with a
   subscriber that requests unbounded demand, against rsocket-py's ``RSocketServer`` +
   ``RSocketClient`` with ``StreamFromGenerator`` and ``AwaitableRSocket.request_stream``
   (its idiomatic collect path). Both peers of each pair run in this process; best of
   ``--repeat``; the ratio is ours / theirs.
2. Bytes/s with 64 KiB payloads, same pairs.
3. The sender's memory while the receiver is 10x slower: our server runs in a child process
   (so its RSS is the sender's alone); the client consumes 16 KiB payloads at a tenth of
   the unthrottled rate, requesting 256 at a time; the child's RSS is sampled every 0.5 s.
   Flat means demand on the wire holds the sender back.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import statistics
import struct
import subprocess
import sys
import threading
import time
from typing import Any

import psutil

from reactive_streams import MAX_DEMAND, Publisher, Subscriber, Subscription
from reactive_streams.reference import IterablePublisher
from reactive_streams.rsocket import connect, serve

TIMEOUT = 600.0
logging.getLogger("pyrsocket").setLevel(logging.CRITICAL)  # its close() logs a benign traceback


class _Counter(Subscriber[bytes]):
    """Counts elements and bytes; requests ``batch`` at a time (``MAX_DEMAND``: once)."""

    def __init__(self, batch: int = MAX_DEMAND, delay: float = 0.0) -> None:
        self.count = 0
        self.bytes = 0
        self.done = threading.Event()
        self.error: Exception | None = None
        self._batch = batch
        self._delay = delay
        self._subscription: Subscription | None = None
        self._left = 0

    def on_subscribe(self, subscription: Subscription) -> None:
        self._subscription = subscription
        self._left = self._batch
        subscription.request(self._batch)

    def on_next(self, element: bytes) -> None:
        self.count += 1
        self.bytes += len(element)
        if self._delay:
            time.sleep(self._delay)
        if self._batch != MAX_DEMAND:
            self._left -= 1
            if self._left == self._batch // 2:
                self._left += self._batch // 2
                assert self._subscription is not None
                self._subscription.request(self._batch // 2)

    def cancel(self) -> None:
        if self._subscription is not None:
            self._subscription.cancel()
        self.done.set()

    def on_error(self, error: Exception) -> None:
        self.error = error
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


def _payloads(count: int, size: int) -> list[bytes]:
    if size < 0:  # short payloads of exactly -size bytes
        return _small_payloads(count)
    if size:
        blob = os.urandom(size)
        return [blob] * count
    return [b"element-%d" % index for index in range(count)]


def _route(payloads: list[bytes]) -> Any:
    def factory(data: bytes) -> Publisher[bytes]:
        return IterablePublisher(payloads)

    return factory


def ours(count: int, size: int) -> tuple[float, int]:
    payloads = _payloads(count, size)
    with (
        serve({"items": _route(payloads)}) as server,
        connect(f"tcp://127.0.0.1:{server.port}") as client,
    ):
        counter = _Counter()
        started = time.perf_counter()
        client.request_stream("items").subscribe(counter)
        if not counter.done.wait(TIMEOUT) or counter.error is not None:
            raise RuntimeError(f"our stream failed: {counter.error!r}")
        elapsed = time.perf_counter() - started
    assert counter.count == count, counter.count
    return elapsed, counter.bytes


def theirs(count: int, size: int) -> tuple[float, int]:
    from rsocket.awaitable.awaitable_rsocket import AwaitableRSocket
    from rsocket.extensions.helpers import composite, route
    from rsocket.extensions.mimetypes import WellKnownMimeTypes
    from rsocket.payload import Payload
    from rsocket.routing.request_router import RequestRouter
    from rsocket.routing.routing_request_handler import RoutingRequestHandler
    from rsocket.rsocket_client import RSocketClient
    from rsocket.rsocket_server import RSocketServer
    from rsocket.streams.stream_from_generator import StreamFromGenerator
    from rsocket.transports.tcp import TransportTCP

    payloads = _payloads(count, size)

    async def main() -> tuple[float, int]:
        router = RequestRouter()

        @router.stream("items")
        async def items() -> StreamFromGenerator:
            def generate() -> Any:
                last = count - 1
                for index, element in enumerate(payloads):
                    yield Payload(element), index == last

            return StreamFromGenerator(generate)

        sessions: list[RSocketServer] = []

        async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sessions.append(
                RSocketServer(
                    TransportTCP(reader, writer),
                    handler_factory=lambda: RoutingRequestHandler(router),
                )
            )

        server = await asyncio.start_server(session, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)

        async def transports() -> Any:
            yield TransportTCP(reader, writer)

        async with RSocketClient(
            transports(),
            metadata_encoding=WellKnownMimeTypes.MESSAGE_RSOCKET_COMPOSITE_METADATA,
            data_encoding=WellKnownMimeTypes.APPLICATION_OCTET_STREAM,
        ) as client:
            started = time.perf_counter()
            received = await AwaitableRSocket(client).request_stream(
                Payload(metadata=composite(route("items")))
            )
            elapsed = time.perf_counter() - started
        for running in sessions:
            await running.close()
        server.close()
        await server.wait_closed()
        assert len(received) == count, len(received)
        return elapsed, sum(len(payload.data) for payload in received)

    return asyncio.run(main())


def _best(run: Any, repeat: int, count: int, size: int) -> tuple[float, int]:
    results = [run(count, size) for _ in range(repeat)]
    return min(results)


def compare(label: str, count: int, size: int, repeat: int, their_count: int) -> None:
    our_time, our_bytes = _best(ours, repeat, count, size)
    their_time, their_bytes = _best(theirs, repeat, their_count, size)
    our_rate = count / our_time
    their_rate = their_count / their_time
    print(f"\n{label}")
    print(
        f"  ours       {count:>9,} elements in {our_time:7.3f} s: {our_rate:>12,.0f} elements/s"
        f"  {our_bytes / our_time / 2**20:9.1f} MiB/s"
    )
    print(
        f"  rsocket-py {their_count:>9,} elements in {their_time:7.3f} s: {their_rate:>12,.0f}"
        f" elements/s  {their_bytes / their_time / 2**20:9.1f} MiB/s"
    )
    print(f"  ratio (ours / rsocket-py): {our_rate / their_rate:.1f}x")


# -- 0. frames: the floor, ours (TCP and WebSocket), rsocket-py -------------------------

_SMALL = 8
"""Bytes of data per payload in the frames comparison."""
_READ_SIZE = 64 * 1024
_FRAME_PREFIX = struct.Struct(">BHIH")  # 24-bit length as u8 + u16, stream ID, type+flags


def _small_payloads(count: int) -> list[bytes]:
    return [b"%08d" % (index % 100_000_000) for index in range(count)]


def _floor_frames(count: int) -> bytes:
    """``count`` PAYLOAD (NEXT) frames of 8 bytes on stream 1, then PAYLOAD (COMPLETE)."""
    next_bits = (0x0A << 10) | 0x20
    complete_bits = (0x0A << 10) | 0x40
    header = _FRAME_PREFIX.pack(0, 6 + _SMALL, 1, next_bits)
    parts = [header + payload for payload in _small_payloads(count)]
    parts.append(_FRAME_PREFIX.pack(0, 6, 1, complete_bits))
    return b"".join(parts)


class _FloorReader(asyncio.BufferedProtocol):
    """The floor's client: 64 KiB reads, frames walked in place with ``struct``."""

    def __init__(self, done: asyncio.Future[int]) -> None:
        self._buffer = bytearray(_READ_SIZE)
        self._view = memoryview(self._buffer)
        self._filled = 0
        self._done = done
        self.count = 0
        self.bytes = 0

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        end = self._filled + nbytes
        buffer = self._buffer
        unpack = _FRAME_PREFIX.unpack_from
        position = 0
        count = 0
        size = 0
        while end - position >= 9:
            high, low, _stream, bits = unpack(buffer, position)
            stop = position + 3 + ((high << 16) | low)
            if stop > end:
                break
            if bits & 0x20:  # NEXT: an element
                count += 1
                size += stop - position - 9
            if bits & 0x40 and not self._done.done():  # COMPLETE
                self._done.set_result(self.count + count)
            position = stop
        self.count += count
        self.bytes += size
        left = end - position
        buffer[:left] = buffer[position:end]
        self._filled = left

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._done.done():
            self._done.set_exception(RuntimeError(f"the floor's connection was lost: {exc!r}"))


def floor(count: int) -> tuple[float, int]:
    """The floor: a bare client reading ``count`` pre-encoded PAYLOAD frames."""
    blob = _floor_frames(count)

    async def main() -> tuple[float, int]:
        loop = asyncio.get_running_loop()

        async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readexactly(1)  # the request: send the stream then
            writer.write(blob)
            await writer.drain()
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

        server = await asyncio.start_server(session, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        done: asyncio.Future[int] = loop.create_future()
        transport, protocol = await loop.create_connection(
            lambda: _FloorReader(done), "127.0.0.1", port
        )
        started = time.perf_counter()
        transport.write(b"\x00")
        received = await asyncio.wait_for(done, TIMEOUT)
        elapsed = time.perf_counter() - started
        transport.close()
        server.close()
        await server.wait_closed()
        assert received == count, received
        return elapsed, protocol.bytes

    return asyncio.run(main())


def ours_frames(count: int, transport: str, port: int = 0) -> tuple[float, int]:
    """Our client, 8-byte payloads, a subscriber requesting 256 at a time.

    Our server runs in this process, or is the child process listening on ``port``.
    """
    scheme = "ws" if transport == "ws" else "tcp"
    with contextlib.ExitStack() as stack:
        if not port:
            routes = {"items": _route(_small_payloads(count))}
            port = stack.enter_context(serve(routes, transport=transport)).port
        client = stack.enter_context(connect(f"{scheme}://127.0.0.1:{port}/rsocket"))
        counter = _Counter(batch=256)
        started = time.perf_counter()
        client.request_stream("items", b"%d" % count).subscribe(counter)
        if not counter.done.wait(TIMEOUT) or counter.error is not None:
            raise RuntimeError(f"our stream failed: {counter.error!r}")
        elapsed = time.perf_counter() - started
    assert counter.count == count, counter.count
    return elapsed, counter.bytes


def serve_frames_child(transport: str) -> None:
    """Child process: serve ``items`` (the request's data: how many 8-byte payloads)."""
    cache: dict[int, list[bytes]] = {}

    def factory(data: bytes) -> Publisher[bytes]:
        count = int(data)
        if count not in cache:
            cache[count] = _small_payloads(count)
        return IterablePublisher(cache[count])

    with serve({"items": factory}, transport=transport) as server:
        print(server.port, flush=True)
        sys.stdin.read()


@contextlib.contextmanager
def _frames_server(transport: str, count: int) -> Any:
    """Our server in a child process; yields its port once it has built its payloads."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve-frames-child", transport],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        ours_frames(count, transport, port)  # warm: the child builds its payloads
        yield port
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(30)


def theirs_frames(count: int) -> tuple[float, int]:
    """rsocket-py on its idiomatic path, 8-byte payloads."""
    return theirs(count, -_SMALL)


def frames(elements: int, their_elements: int, rounds: int, server_process: bool) -> None:
    """Alternating rounds of the floor, ours over TCP and WebSocket, and rsocket-py."""
    with contextlib.ExitStack() as stack:
        tcp_port = ws_port = 0
        if server_process:
            tcp_port = stack.enter_context(_frames_server("tcp", elements))
            ws_port = stack.enter_context(_frames_server("ws", elements))
        _frames_rounds(elements, their_elements, rounds, tcp_port, ws_port)


def _frames_rounds(
    elements: int, their_elements: int, rounds: int, tcp_port: int, ws_port: int
) -> None:
    contenders: list[tuple[str, Any, int]] = [
        ("floor", floor, elements * 4),
        ("ours, TCP", lambda count: ours_frames(count, "tcp", tcp_port), elements),
        ("ours, WebSocket", lambda count: ours_frames(count, "ws", ws_port), elements),
        ("rsocket-py", theirs_frames, their_elements),
    ]
    rates: dict[str, list[float]] = {name: [] for name, _, _ in contenders}
    for _ in range(rounds):
        for name, run, count in contenders:
            elapsed, _ = run(count)
            rates[name].append(count / elapsed)
    where = "in a child process" if tcp_port else "in this process"
    print(
        f"\nframes: 8-byte payloads, request-stream, loopback TCP; our server {where};"
        f" {rounds} alternating rounds (load average {os.getloadavg()[0]:.1f})"
    )
    for name, _, count in contenders:
        values = rates[name]
        print(
            f"  {name:<16} {count:>9,} elements: best {max(values):>12,.0f} el/s,"
            f" median {statistics.median(values):>12,.0f} el/s"
        )

    def ratio(top: str, bottom: str) -> str:
        best = max(rates[top]) / max(rates[bottom])
        median = statistics.median(rates[top]) / statistics.median(rates[bottom])
        return f"median {median:.3f}, best {best:.3f}"

    print(f"  ours TCP / floor:        {ratio('ours, TCP', 'floor')}")
    print(f"  ours WebSocket / floor:  {ratio('ours, WebSocket', 'floor')}")
    print(f"  ours WebSocket / TCP:    {ratio('ours, WebSocket', 'ours, TCP')}")
    print(f"  rsocket-py / ours TCP:   {ratio('rsocket-py', 'ours, TCP')}")
    print(f"  ours TCP / rsocket-py:   {ratio('ours, TCP', 'rsocket-py')}")


def serve_child(size: int) -> None:
    """Child process: serve an endless stream of ``size``-byte payloads until stdin closes."""

    class _Endless:
        def __iter__(self) -> Any:
            blob = os.urandom(size)
            while True:
                yield blob

    def factory(data: bytes) -> Publisher[bytes]:
        return IterablePublisher(_Endless())

    with serve({"endless": factory}) as server:
        print(server.port, flush=True)
        sys.stdin.read()


def memory(size: int, seconds: float) -> None:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve-child", str(size)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        process = psutil.Process(child.pid)
        with connect(f"tcp://127.0.0.1:{port}") as client:
            # the unthrottled rate first, then a receiver ten times slower
            fast = _Counter(batch=256)
            client.request_stream("endless").subscribe(fast)
            time.sleep(2.0)
            fast_rate = fast.count / 2.0
            delay = 10.0 / fast_rate
            fast.cancel()
            fast_seen = fast.count
            fast_rss = process.memory_info().rss
            slow = _Counter(batch=256, delay=delay)
            client.request_stream("endless").subscribe(slow)
            samples: list[int] = []
            started = time.perf_counter()
            while time.perf_counter() - started < seconds:
                time.sleep(0.5)
                samples.append(process.memory_info().rss)
            slow_rate = slow.count / (time.perf_counter() - started)
        print(
            f"\nsender memory, {size // 1024} KiB payloads, receiver 10x slower for {seconds:g} s"
        )
        print(
            f"  unthrottled receiver: {fast_rate:,.0f} payloads/s ({fast_seen:,} in 2 s), "
            f"sender RSS {fast_rss / 2**20:.1f} MiB"
        )
        print(f"  slow receiver: {slow_rate:,.0f} payloads/s (sleep {delay * 1e3:.3f} ms each)")
        mib = [sample / 2**20 for sample in samples]
        quarters = [mib[min(len(mib) - 1, len(mib) * part // 4)] for part in range(5)]
        print(
            "  sender RSS at 0/25/50/75/100% of the run: "
            + ", ".join(f"{value:.1f}" for value in quarters)
            + " MiB"
            f" (max {max(mib):.1f} MiB, {len(mib)} samples)"
        )
        slow.cancel()
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=200_000)
    parser.add_argument("--their-elements", type=int, default=50_000)
    parser.add_argument("--large", type=int, default=4_000, help="64 KiB payloads")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--frames-elements", type=int, default=200_000)
    parser.add_argument("--frames-their-elements", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5, help="frames: alternating rounds")
    parser.add_argument("--frames-only", action="store_true")
    parser.add_argument(
        "--server-process", action="store_true", help="frames: our server in a child process"
    )
    parser.add_argument("--serve-frames-child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--serve-child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_child:
        serve_child(args.serve_child)
        return
    if args.serve_frames_child:
        serve_frames_child(args.serve_frames_child)
        return
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, best of {args.repeat}")
    frames(args.frames_elements, args.frames_their_elements, args.rounds, args.server_process)
    if args.frames_only:
        return
    compare(
        "short payloads (b'element-<i>'), elements/s",
        args.elements,
        0,
        args.repeat,
        args.their_elements,
    )
    compare("64 KiB payloads, bytes/s", args.large, 65536, args.repeat, args.large)
    if not args.skip_memory:
        memory(16384, args.seconds)


if __name__ == "__main__":
    main()
