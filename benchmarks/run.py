"""Benchmarks of reactive_streams.Flow against plain Python and its peers.

Run from the repository root::

    PYTHONPATH=src python benchmarks/run.py            # all cases
    PYTHONPATH=src python benchmarks/run.py a b        # some cases

Each case is measured in the same process as its peers (memory cases each in a fresh
subprocess so peak RSS is clean), the median of several repeats is reported, and ratios
are printed against the reference named in the table. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import operator
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from reactive_streams import Flow, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable

REPEATS = 5


SLOW_REPEATS = 3
"""Repeats for peers that take many seconds per run (reactivex)."""


def measure(fn: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, Any]:
    """Median wall time of ``fn()`` in seconds, and its last result."""
    times: list[float] = []
    result: Any = None
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def measure_alternating(
    cases: list[tuple[str, Callable[[], Any]]], repeats: int = REPEATS
) -> dict[str, tuple[list[float], Any]]:
    """Each case's wall times over ``repeats`` rounds, every round running each case once.

    Alternating the cases spreads a drift in the machine's load over all of them, so the
    ratio of two cases in one round compares them under the same load.
    """
    times: dict[str, list[float]] = {name: [] for name, _ in cases}
    results: dict[str, Any] = {}
    for _ in range(repeats):
        for name, fn in cases:
            gc.collect()
            start = time.perf_counter()
            results[name] = fn()
            times[name].append(time.perf_counter() - start)
    return {name: (times[name], results[name]) for name, _ in cases}


def report_alternating(
    title: str, runs: dict[str, tuple[list[float], Any]], reference: str, per: int
) -> None:
    """Median time per case, and the best and median of its per-round ratios."""
    base = runs[reference][0]
    print(f"\n## {title}\n")
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print(f"| implementation | median s | ns/element | ratio vs {reference}: median | best |")
    print("|---|---:|---:|---:|---:|")
    for name, (seconds, _) in runs.items():
        ratios = [mine / theirs for mine, theirs in zip(seconds, base, strict=True)]
        median = statistics.median(seconds)
        print(
            f"| {name} | {median:.4f} | {median / per * 1e9:.0f} "
            f"| {statistics.median(ratios):.2f}x | {min(ratios):.2f}x |"
        )
    results = {repr(result) for _, result in runs.values()}
    if len(results) != 1:
        print(f"\n**results differ**: {results}")


def report(title: str, rows: list[tuple[str, float, Any]], reference: str, per: int) -> None:
    base = {name: seconds for name, seconds, _ in rows}[reference]
    print(f"\n## {title}\n")
    print(f"| implementation | median s | ns/element | ratio vs {reference} |")
    print("|---|---:|---:|---:|")
    for name, seconds, _ in rows:
        print(f"| {name} | {seconds:.4f} | {seconds / per * 1e9:.0f} | {seconds / base:.2f}x |")
    results = {repr(result) for _, _, result in rows}
    if len(results) != 1:
        print(f"\n**results differ**: {results}")


# ---------------------------------------------------------------- (a) synchronous
A_N = 1_000_000


def a_plain() -> int:
    total = 0
    for x in range(A_N):
        y = x * 2
        if y % 3 == 0:
            total += y
    return total


def a_generator() -> int:
    return sum(y for y in (x * 2 for x in range(A_N)) if y % 3 == 0)


def a_flow() -> int:
    return (
        Flow.range(0, A_N)
        .map(lambda x: x * 2)
        .filter(lambda x: x % 3 == 0)
        .reduce(operator.add, 0)
        .first()
    )


def a_reactivex() -> int:
    """reactivex's fastest idiomatic path: ``from_iterable`` emits in one loop."""
    import reactivex
    from reactivex import operators as ops

    out: list[int] = []
    reactivex.from_iterable(range(A_N)).pipe(
        ops.map(lambda x: x * 2), ops.filter(lambda x: x % 3 == 0), ops.sum()
    ).subscribe(out.append)
    return out[0]


def a_reactivex_range() -> int:
    """``reactivex.range``: every element scheduled on the trampoline (the slow path)."""
    import reactivex
    from reactivex import operators as ops

    out: list[int] = []
    reactivex.range(0, A_N).pipe(
        ops.map(lambda x: x * 2), ops.filter(lambda x: x % 3 == 0), ops.sum()
    ).subscribe(out.append)
    return out[0]


def case_a() -> None:
    rows = [
        (name, *measure(fn, repeats))
        for name, fn, repeats in [
            ("plain loop", a_plain, REPEATS),
            ("generator pipeline", a_generator, REPEATS),
            ("Flow (fused)", a_flow, REPEATS),
            ("reactivex from_iterable(range)", a_reactivex, REPEATS),
            ("reactivex range (trampoline)", a_reactivex_range, SLOW_REPEATS),
        ]
    ]
    report(f"(a) synchronous: {A_N:,} ints, map(x*2) filter(x%3==0) sum", rows, "plain loop", A_N)


# ---------------------------------------------------------------- (b) thread boundary
B_N = 200_000
BOUND = 256


def b_queue() -> int:
    channel: queue.Queue[int | None] = queue.Queue(BOUND)
    total = [0]

    def consume() -> None:
        acc = 0
        while True:
            item = channel.get()
            if item is None:
                break
            acc += item
        total[0] = acc

    consumer = threading.Thread(target=consume)
    consumer.start()
    for x in range(B_N):
        channel.put(x)
    channel.put(None)
    consumer.join(60)
    return total[0]


def b_flow(producer: ThreadPoolExecutor, consumer: ThreadPoolExecutor) -> int:
    done = threading.Event()
    total = [0]

    def add(x: int) -> None:
        total[0] += x

    Flow.range(0, B_N).subscribe_on(producer).publish_on(consumer, prefetch=BOUND).subscribe(
        on_next=add, on_complete=done.set, prefetch=BOUND
    )
    if not done.wait(60):
        raise TimeoutError("flow (b) did not complete")
    return total[0]


def b_reactivex() -> int:
    import reactivex
    from reactivex import operators as ops
    from reactivex.scheduler import EventLoopScheduler

    done = threading.Event()
    total = [0]

    def add(x: int) -> None:
        total[0] += x

    reactivex.from_iterable(range(B_N)).pipe(
        ops.subscribe_on(EventLoopScheduler()), ops.observe_on(EventLoopScheduler())
    ).subscribe(on_next=add, on_completed=done.set)
    if not done.wait(60):
        raise TimeoutError("reactivex (b) did not complete")
    return total[0]


def case_b() -> None:
    with ThreadPoolExecutor(1) as producer, ThreadPoolExecutor(1) as consumer:
        rows = [
            (name, *measure(fn, repeats))
            for name, fn, repeats in [
                ("queue.Queue(256)", b_queue, REPEATS),
                (
                    "Flow subscribe_on+publish_on(256)",
                    lambda: b_flow(producer, consumer),
                    REPEATS,
                ),
                ("reactivex from_iterable observe_on (unbounded)", b_reactivex, SLOW_REPEATS),
            ]
        ]
    report(
        f"(b) thread boundary: {B_N:,} ints, producer thread -> consumer thread, bound {BOUND}",
        rows,
        "queue.Queue(256)",
        B_N,
    )


# ---------------------------------------------------------------- (c) asyncio
C_N = 200_000


async def c_queue() -> int:
    channel: asyncio.Queue[int | None] = asyncio.Queue(BOUND)

    async def produce() -> None:
        for x in range(C_N):
            await channel.put(x)
        await channel.put(None)

    async def consume() -> int:
        total = 0
        while (item := await channel.get()) is not None:
            total += item
        return total

    producer = asyncio.create_task(produce())
    total = await consume()
    await producer
    return total


async def c_queue_nowait() -> int:
    """asyncio.Queue's fastest idiomatic use: ``*_nowait`` first, await only at the bound."""
    channel: asyncio.Queue[int | None] = asyncio.Queue(BOUND)

    async def produce() -> None:
        for x in range(C_N):
            try:
                channel.put_nowait(x)
            except asyncio.QueueFull:
                await channel.put(x)
        await channel.put(None)

    async def consume() -> int:
        total = 0
        while True:
            try:
                item = channel.get_nowait()
            except asyncio.QueueEmpty:
                item = await channel.get()
            if item is None:
                return total
            total += item

    producer = asyncio.create_task(produce())
    total = await consume()
    await producer
    return total


async def c_flow_callbacks() -> int:
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    total = [0]

    def add(x: int) -> None:
        total[0] += x

    Flow.range(0, C_N).publish_on(loop, prefetch=BOUND).subscribe(
        on_next=add, on_complete=done.set, prefetch=BOUND
    )
    await asyncio.wait_for(done.wait(), 60)
    return total[0]


async def c_flow_buffered() -> int:
    """A source that is not an iterable, so publish_on really buffers and hands off."""
    from reactive_streams.reference import RangePublisher

    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    total = [0]

    def add(x: int) -> None:
        total[0] += x

    Flow.from_publisher(RangePublisher(0, C_N)).publish_on(loop, prefetch=BOUND).subscribe(
        on_next=add, on_complete=done.set, prefetch=BOUND
    )
    await asyncio.wait_for(done.wait(), 60)
    return total[0]


class _SumSubscriber(Subscriber[int]):
    """A hand-written ``Subscriber`` (not the callback sink, so nothing is fused with it)."""

    def __init__(self, done: asyncio.Event) -> None:
        self.done = done
        self.total = 0
        self.consumed = 0
        self.subscription: Any = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(BOUND)

    def on_next(self, element: int) -> None:
        self.total += element
        consumed = self.consumed + 1
        if consumed == BOUND - BOUND // 4:  # replenish at 75%, like the callback sink
            self.consumed = 0
            self.subscription.request(consumed)
        else:
            self.consumed = consumed

    def on_error(self, error: Exception) -> None:
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


async def c_flow_buffered_subscriber() -> int:
    """As ``c_flow_buffered``, into a ``Subscriber`` subclass instead of callables."""
    from reactive_streams.reference import RangePublisher

    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    subscriber = _SumSubscriber(done)
    Flow.from_publisher(RangePublisher(0, C_N)).publish_on(loop, prefetch=BOUND).subscribe(
        subscriber
    )
    await asyncio.wait_for(done.wait(), 60)
    return subscriber.total


async def c_flow_async_for() -> int:
    """``async for`` over a Flow: the default path, upstream calls on an executor."""
    total = 0
    async for x in Flow.range(0, C_N).aiter(prefetch=BOUND):
        total += x
    return total


async def c_flow_async_for_non_blocking() -> int:
    """As ``c_flow_async_for`` with ``non_blocking=True``: upstream calls on the loop."""
    total = 0
    async for x in Flow.range(0, C_N).aiter(prefetch=BOUND, non_blocking=True):
        total += x
    return total


async def c_adapter_async_for() -> int:
    """``to_async_iterator`` over a non-iterable publisher, the default (executor) path."""
    from reactive_streams.adapters.asyncio import to_async_iterator
    from reactive_streams.reference import RangePublisher

    total = 0
    async for x in to_async_iterator(RangePublisher(0, C_N), prefetch=BOUND):
        total += x
    return total


async def c_adapter_async_for_non_blocking() -> int:
    """As ``c_adapter_async_for`` with ``non_blocking=True``."""
    from reactive_streams.adapters.asyncio import to_async_iterator
    from reactive_streams.reference import RangePublisher

    total = 0
    async for x in to_async_iterator(RangePublisher(0, C_N), prefetch=BOUND, non_blocking=True):
        total += x
    return total


async def c_hop_floor() -> int:
    """The default path's floor for its hops: one loop -> thread -> loop round trip per batch.

    No elements: the loop thread releases a lock a parked thread waits on, and that thread
    wakes the loop with ``call_soon_threadsafe``, once per ``BOUND - BOUND // 4`` (the
    batch that ``async for`` requests), as the lane and the consumer do. Per element of
    ``C_N``, this is what the two thread wake-ups cost by themselves.
    """
    loop = asyncio.get_running_loop()
    go = threading.Lock()
    go.acquire()
    box: list[asyncio.Future[None] | None] = [None]

    def lane() -> None:
        while True:
            go.acquire()
            waiter = box[0]
            if waiter is None:
                return
            loop.call_soon_threadsafe(waiter.set_result, None)

    thread = threading.Thread(target=lane, daemon=True)
    thread.start()
    for _ in range(0, C_N, BOUND - BOUND // 4):
        waiter = box[0] = loop.create_future()
        go.release()
        await waiter
    box[0] = None
    go.release()
    thread.join(60)
    return sum(range(C_N))  # the same result as the others, for the table's check


async def c_aiostream() -> int:
    from aiostream import stream

    total = 0
    async with stream.iterate(range(C_N)).stream() as items:
        async for x in items:
            total += x
    return total


async def c_anyio() -> int:
    import anyio

    send, receive = anyio.create_memory_object_stream[int](BOUND)
    total = 0

    async def produce() -> None:
        async with send:
            for x in range(C_N):
                await send.send(x)

    async with anyio.create_task_group() as group:
        group.start_soon(produce)
        async with receive:
            async for x in receive:
                total += x
    return total


async def c_anyio_nowait() -> int:
    """anyio's fastest idiomatic use: ``*_nowait`` first, await only at the bound."""
    import anyio

    send, receive = anyio.create_memory_object_stream[int](BOUND)
    total = 0

    async def produce() -> None:
        async with send:
            for x in range(C_N):
                try:
                    send.send_nowait(x)
                except anyio.WouldBlock:
                    await send.send(x)

    async with anyio.create_task_group() as group:
        group.start_soon(produce)
        async with receive:
            while True:
                try:
                    x = receive.receive_nowait()
                except anyio.WouldBlock:
                    try:
                        x = await receive.receive()
                    except anyio.EndOfStream:
                        break
                except anyio.EndOfStream:
                    break
                total += x
    return total


def case_c() -> None:
    cases = [
        ("asyncio.Queue(256)", c_queue),
        ("asyncio.Queue(256), put_nowait/get_nowait first", c_queue_nowait),
        ("Flow publish_on(loop, 256) + callbacks (fused)", c_flow_callbacks),
        ("Flow publish_on(loop, 256) + callbacks (buffered)", c_flow_buffered),
        ("Flow publish_on(loop, 256) + Subscriber (buffered)", c_flow_buffered_subscriber),
        ("async for Flow.range (default: executor hop)", c_flow_async_for),
        ("async for Flow.range (non_blocking=True)", c_flow_async_for_non_blocking),
        ("async for RangePublisher (default: executor hop)", c_adapter_async_for),
        ("async for RangePublisher (non_blocking=True)", c_adapter_async_for_non_blocking),
        ("floor of the hops: a loop-thread round trip per 192, no elements", c_hop_floor),
        ("aiostream iterate", c_aiostream),
        ("anyio memory stream(256)", c_anyio),
        ("anyio memory stream(256), *_nowait first", c_anyio_nowait),
    ]
    runs = measure_alternating(
        [(name, lambda fn=fn: asyncio.run(fn())) for name, fn in cases]  # type: ignore[misc]
    )
    report_alternating(
        f"(c) asyncio: {C_N:,} ints, producer -> consumer on one event loop, bound {BOUND}",
        runs,
        "asyncio.Queue(256)",
        C_N,
    )


# ---------------------------------------------------------------- (d) overload, peak RSS
D_N = int(os.environ.get("BENCH_D_N", "2000000"))


def _items(count: int) -> Any:
    for i in range(count):
        yield b"%0100d" % i  # a fresh 100-byte object per item


def _spin(rounds: int) -> None:
    for _ in range(rounds):
        pass


def _calibrate() -> int:
    """Spin rounds that make the consumer about 10x slower than producing one item."""
    start = time.perf_counter()
    for _ in _items(100_000):
        pass
    produce = (time.perf_counter() - start) / 100_000
    start = time.perf_counter()
    for _ in range(1000):
        _spin(100)
    per_round = (time.perf_counter() - start) / 100_000
    return max(1, round(10 * produce / per_round))


def d_child(name: str) -> dict[str, float]:
    """Run one overload case in this (fresh) process; return RSS figures in MiB."""
    import psutil

    rounds = _calibrate()
    gc.collect()
    process = psutil.Process()
    baseline = process.memory_info().rss
    peak = [baseline]
    stop_sampling = threading.Event()

    def sample() -> None:  # RSS every 5 ms while the case runs
        while not stop_sampling.wait(0.005):
            peak[0] = max(peak[0], process.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    consumed = [0]
    done = threading.Event()

    def slow(_item: bytes) -> None:
        _spin(rounds)
        consumed[0] += 1

    start = time.perf_counter()
    if name == "Flow subscribe_on+publish_on(256)":
        with ThreadPoolExecutor(1) as producer, ThreadPoolExecutor(1) as consumer:
            Flow.from_iterable(_items(D_N)).subscribe_on(producer).publish_on(
                consumer, prefetch=BOUND
            ).subscribe(on_next=slow, on_complete=done.set, prefetch=BOUND)
            done.wait(3600)
    elif name == "Flow hot source + on_backpressure_drop":
        with ThreadPoolExecutor(1) as consumer:
            source = Flow.from_iterable(_items(D_N)).on_backpressure_drop()
            source.publish_on(consumer, prefetch=BOUND).subscribe(
                on_next=slow, on_complete=done.set, prefetch=BOUND
            )
            done.wait(3600)
    elif name == "reactivex subscribe_on+observe_on":
        import reactivex
        from reactivex import operators as ops
        from reactivex.scheduler import EventLoopScheduler

        reactivex.from_iterable(_items(D_N)).pipe(
            ops.subscribe_on(EventLoopScheduler()), ops.observe_on(EventLoopScheduler())
        ).subscribe(on_next=slow, on_completed=done.set)
        done.wait(3600)
    elif name == "aioreactive from_iterable -> async observer":
        import aioreactive as rx

        async def run() -> None:
            finished = asyncio.Event()

            async def asend(item: bytes) -> None:
                slow(item)
                if consumed[0] % 1000 == 0:
                    await asyncio.sleep(0)

            async def aclose() -> None:
                finished.set()

            observer: Any = rx.AsyncAnonymousObserver(asend, aclose=aclose)
            await rx.from_iterable(_items(D_N)).subscribe_async(observer)
            await finished.wait()

        asyncio.run(run())
    else:
        raise ValueError(name)
    seconds = time.perf_counter() - start
    stop_sampling.set()
    sampler.join(5)
    peak[0] = max(peak[0], process.memory_info().rss)
    return {
        "consumed": consumed[0],
        "seconds": seconds,
        "growth_mib": (peak[0] - baseline) / 2**20,
        "spin_rounds": rounds,
    }


D_CASES = [
    "Flow subscribe_on+publish_on(256)",
    "Flow hot source + on_backpressure_drop",
    "reactivex subscribe_on+observe_on",
    "aioreactive from_iterable -> async observer",
]


def case_d() -> None:
    print(f"\n## (d) overload: {D_N:,} items of 100 bytes into a consumer ~10x slower\n")
    print("| implementation | delivered | seconds | peak RSS growth MiB |")
    print("|---|---:|---:|---:|")
    for name in D_CASES:
        output = subprocess.run(
            [sys.executable, __file__, "--d-child", name],
            capture_output=True,
            text=True,
            check=True,
            timeout=3600,
        ).stdout
        figures = json.loads(output.strip().splitlines()[-1])
        print(
            f"| {name} | {figures['consumed']:,.0f} | {figures['seconds']:.1f} | "
            f"{figures['growth_mib']:.1f} |",
            flush=True,
        )


CASES: dict[str, Callable[[], None]] = {"a": case_a, "b": case_b, "c": case_c, "d": case_d}


def main(argv: list[str]) -> None:
    if argv[:1] == ["--d-child"]:
        print(json.dumps(d_child(argv[1])))
        return
    parser = argparse.ArgumentParser(
        description="Benchmarks of reactive_streams.Flow against plain Python and its peers.",
        epilog="(a) synchronous, (b) thread boundary, (c) asyncio, (d) overload / peak RSS "
        "(BENCH_D_N sets its item count).",
    )
    parser.add_argument("cases", nargs="*", metavar="CASE", help="a, b, c or d (default: all)")
    cases = parser.parse_args(argv).cases or list(CASES)
    unknown = [case for case in cases if case not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    print(f"Python {sys.version.split()[0]} on {os.uname().sysname}, {os.cpu_count()} CPUs")
    for key in cases:
        CASES[key]()
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
