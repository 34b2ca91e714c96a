"""RSocket over loopback TCP: ours against rsocket-py 0.4.20, same stream, same run.

Usage::

    PYTHONPATH=src python benchmarks/bench_rsocket.py                  # all three parts
    PYTHONPATH=src python benchmarks/bench_rsocket.py --elements 20000 --skip-memory

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
import logging
import os
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
    parser.add_argument("--serve-child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_child:
        serve_child(args.serve_child)
        return
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, best of {args.repeat}")
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
