"""Overhead of ``reactive_streams.metrics.metrics_stream`` on case (b) of run.py.

Run from the repository root::

    PYTHONPATH=src python benchmarks/bench_metrics.py

Case (b): 200,000 ints from a producer thread (``subscribe_on``) to a consumer thread
(``publish_on``, bound 256). "off" runs it bare; "on" runs the same flow with a metrics
stream sampling every stage (``period / samples_per_period`` between samples) and a
subscriber taking every snapshot. Runs alternate off/on so drift hits both; the median of
REPEATS runs is reported with the ratio on/off, in wall time and in process CPU time (all
threads; less disturbed by other processes on a shared machine). Last, the cost of one
sample is measured in a loop, and what it costs per second at each period.
"""

from __future__ import annotations

import gc
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from reactive_streams import MAX_DEMAND, Flow, Subscriber, Subscription
from reactive_streams.metrics import MetricsSnapshot, metrics_stream

B_N = 200_000
BOUND = 256
REPEATS = 15


class _Snapshots(Subscriber[MetricsSnapshot]):
    def __init__(self) -> None:
        self.count = 0
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(MAX_DEMAND)

    def on_next(self, element: MetricsSnapshot) -> None:
        self.count += 1

    def on_error(self, error: Exception) -> None:
        raise error

    def on_complete(self) -> None:
        pass


def run_b(
    producer: ThreadPoolExecutor, consumer: ThreadPoolExecutor, period: float | None
) -> tuple[int, int]:
    """Case (b); with ``period``, a metrics stream runs alongside. Returns (sum, snapshots)."""
    done = threading.Event()
    total = [0]

    def add(x: int) -> None:
        total[0] += x

    flow = Flow.range(0, B_N).subscribe_on(producer).publish_on(consumer, prefetch=BOUND)
    flow.subscribe(on_next=add, on_complete=done.set, prefetch=BOUND)
    snapshots = _Snapshots()
    if period is not None:
        metrics_stream(flow, period, until_done=False).subscribe(snapshots)
    if not done.wait(60):
        raise TimeoutError("case (b) did not complete")
    if snapshots.subscription is not None:
        snapshots.subscription.cancel()
    return total[0], snapshots.count


def sample_cost() -> float:
    """Seconds one sample of case (b)'s flow takes (both stages), measured in a loop."""
    from reactive_streams.metrics._stream import _Sampler
    from reactive_streams.schedulers import ThreadTimerScheduler

    with ThreadPoolExecutor(1) as producer, ThreadPoolExecutor(1) as consumer:
        flow = Flow.range(0, B_N).subscribe_on(producer).publish_on(consumer, prefetch=BOUND)
        done = threading.Event()
        flow.subscribe(on_next=lambda _x: None, on_complete=done.set, prefetch=BOUND)
        done.wait(60)
        sampler = _Sampler(flow, (), ThreadTimerScheduler())
        rounds = 20_000
        start = time.perf_counter()
        for _ in range(rounds):
            sampler.sample()
        return (time.perf_counter() - start) / rounds


def main(argv: list[str]) -> None:
    periods = [float(arg) for arg in argv] or [0.1, 1.0]
    with ThreadPoolExecutor(1) as producer, ThreadPoolExecutor(1) as consumer:
        run_b(producer, consumer, None)  # warm up
        times: dict[str, list[float]] = {"off": []}
        cpu: dict[str, list[float]] = {"off": []}
        counts: dict[str, int] = {}
        for period in periods:
            times[f"on, period {period:g} s"] = []
            cpu[f"on, period {period:g} s"] = []
        for _ in range(REPEATS):
            for label, period in [("off", None)] + [
                (f"on, period {period:g} s", period) for period in periods
            ]:
                gc.collect()
                start = time.perf_counter()
                start_cpu = time.process_time()
                result, snapshots = run_b(producer, consumer, period)
                times[label].append(time.perf_counter() - start)
                cpu[label].append(time.process_time() - start_cpu)
                counts[label] = counts.get(label, 0) + snapshots
                assert result == B_N * (B_N - 1) // 2
    base = statistics.median(times["off"])
    base_cpu = statistics.median(cpu["off"])
    print(f"\n## metrics overhead, case (b): {B_N:,} ints across threads, bound {BOUND}\n")
    print(f"median of {REPEATS} alternating runs; 10 samples per period\n")
    print("| metrics | median s | ns/element | snapshots/run | ratio vs off | CPU s | CPU ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, values in times.items():
        median = statistics.median(values)
        per_run: Any = counts.get(label, 0) / REPEATS
        print(
            f"| {label} | {median:.4f} | {median / B_N * 1e9:.0f} | {per_run:.1f} | "
            f"{median / base:.3f}x | {statistics.median(cpu[label]):.4f} | "
            f"{statistics.median(cpu[label]) / base_cpu:.3f}x |"
        )
    cost = sample_cost()
    print(f"\none sample of the flow's 3 stages: {cost * 1e6:.1f} us on the scheduler thread")
    for period in periods:
        share = cost * 10 / period
        print(f"period {period:g} s (10 samples): {share:.2%} of one core spent sampling")


if __name__ == "__main__":
    main(sys.argv[1:])
