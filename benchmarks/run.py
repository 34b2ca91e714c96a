"""Benchmarks of reactive_streams.Flow against plain Python and its peers.

Run from the repository root::

    PYTHONPATH=src python benchmarks/run.py            # all cases
    PYTHONPATH=src python benchmarks/run.py a b        # some cases

Each case is measured in the same process as its peers (memory cases each in a fresh
subprocess so peak RSS is clean), the median of several repeats is reported, and ratios
are printed against the reference named in the table. Not part of the test suite.
"""

from __future__ import annotations

import gc
import operator
import os
import queue
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from reactive_streams import Flow

if TYPE_CHECKING:
    from collections.abc import Callable

REPEATS = 5


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
    import reactivex
    from reactivex import operators as ops

    out: list[int] = []
    reactivex.range(0, A_N).pipe(
        ops.map(lambda x: x * 2), ops.filter(lambda x: x % 3 == 0), ops.sum()
    ).subscribe(out.append)
    return out[0]


def case_a() -> None:
    rows = [
        (name, *measure(fn))
        for name, fn in [
            ("plain loop", a_plain),
            ("generator pipeline", a_generator),
            ("Flow (fused)", a_flow),
            ("reactivex", a_reactivex),
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

    reactivex.range(0, B_N).pipe(
        ops.subscribe_on(EventLoopScheduler()), ops.observe_on(EventLoopScheduler())
    ).subscribe(on_next=add, on_completed=done.set)
    if not done.wait(60):
        raise TimeoutError("reactivex (b) did not complete")
    return total[0]


def case_b() -> None:
    with ThreadPoolExecutor(1) as producer, ThreadPoolExecutor(1) as consumer:
        rows = [
            (name, *measure(fn))
            for name, fn in [
                ("queue.Queue(256)", b_queue),
                ("Flow subscribe_on+publish_on(256)", lambda: b_flow(producer, consumer)),
                ("reactivex observe_on (unbounded)", b_reactivex),
            ]
        ]
    report(
        f"(b) thread boundary: {B_N:,} ints, producer thread -> consumer thread, bound {BOUND}",
        rows,
        "queue.Queue(256)",
        B_N,
    )


CASES: dict[str, Callable[[], None]] = {"a": case_a, "b": case_b}


def main(argv: list[str]) -> None:
    print(f"Python {sys.version.split()[0]} on {os.uname().sysname}, {os.cpu_count()} CPUs")
    for key in argv or list(CASES):
        CASES[key]()


if __name__ == "__main__":
    main(sys.argv[1:])
