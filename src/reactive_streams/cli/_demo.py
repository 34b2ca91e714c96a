"""``reactive-streams demo``: a fast source, a slow subscriber, and memory that stays flat."""

from __future__ import annotations

import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.live import Live
from rich.table import Table

from ..reference import ExecutorIterablePublisher, ExecutorSubscriber

if TYPE_CHECKING:
    from collections.abc import Iterator


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


class _Source:
    """A source that could produce far faster than anyone consumes; it counts its pulls."""

    def __init__(self, elements: int, payload_bytes: int) -> None:
        self.elements = elements
        self.payload_bytes = payload_bytes
        self.produced = 0

    def __iter__(self) -> Iterator[bytes]:
        for index in range(self.elements):
            self.produced = index + 1
            yield index.to_bytes(8, "little") * (self.payload_bytes // 8)


class _SlowSubscriber(ExecutorSubscriber[bytes]):
    def __init__(self, executor: ThreadPoolExecutor, *, batch_size: int, delay: float) -> None:
        super().__init__(executor, batch_size=batch_size)
        self.delay = delay
        self.consumed = 0
        self.max_gap = 0  # the most elements ever produced but not yet consumed
        self.source: _Source | None = None

    def when_next(self, element: bytes) -> bool:
        time.sleep(self.delay)  # the slow work this demo is about
        self.consumed += 1
        if self.source is not None:
            self.max_gap = max(self.max_gap, self.source.produced - self.consumed)
        return True


def _table(source: _Source, subscriber: _SlowSubscriber, started: float) -> Table:
    stats = subscriber.statistics()
    elapsed = max(time.monotonic() - started, 1e-9)
    table = Table(title="fast source -> slow subscriber, with backpressure")
    for column in ("produced", "consumed", "in flight", "max in flight", "rate /s", "peak RSS"):
        table.add_column(column, justify="right")
    table.add_row(
        f"{source.produced:,}",
        f"{subscriber.consumed:,}",
        f"{source.produced - subscriber.consumed:,}",
        f"{subscriber.max_gap:,}",
        f"{subscriber.consumed / elapsed:,.0f}",
        f"{_peak_rss_mib():,.1f} MiB",
    )
    table.caption = (
        f"requested so far: {stats.requested:,}; buffered in subscriber: {stats.buffered}"
    )
    return table


@click.command()
@click.option("--elements", default=20_000, show_default=True, help="Elements the source offers.")
@click.option("--payload", default=1024, show_default=True, help="Bytes per element.")
@click.option(
    "--delay-ms", default=0.2, show_default=True, help="Work per element in the subscriber."
)
@click.option(
    "--batch", default=64, show_default=True, help="Subscriber demand: the in-flight bound."
)
@click.option("--quiet", is_flag=True, help="Print only the final line.")
def demo(elements: int, payload: int, delay_ms: float, batch: int, quiet: bool) -> None:
    """Show backpressure: a source that could flood a slow subscriber stays within its demand.

    The source is an iterator that could yield millions of elements per second; the
    subscriber takes DELAY-MS per element and requests BATCH at a time. Elements in flight
    (produced but not yet consumed) never exceed BATCH plus the one element the publisher
    reads ahead, so memory stays flat however many elements flow.
    """
    if elements < 1 or batch < 1 or delay_ms < 0 or payload < 8:
        raise click.BadParameter("elements and batch must be >= 1, payload >= 8, delay >= 0")
    console = Console(quiet=quiet)
    source = _Source(elements, payload)
    started = time.monotonic()
    with ThreadPoolExecutor(1, "source") as source_pool, ThreadPoolExecutor(1, "sink") as sink_pool:
        subscriber = _SlowSubscriber(sink_pool, batch_size=batch, delay=delay_ms / 1000)
        subscriber.source = source
        ExecutorIterablePublisher(source, source_pool, batch_size=batch).subscribe(subscriber)
        with Live(
            _table(source, subscriber, started), console=console, refresh_per_second=8
        ) as live:
            while not subscriber.wait_terminated(timeout=0.125):
                live.update(_table(source, subscriber, started))
            live.update(_table(source, subscriber, started))
        console.print()
    if subscriber.error is not None:
        raise click.ClickException(f"the stream failed: {subscriber.error!r}")
    bound = batch + 1
    verdict = "within" if subscriber.max_gap <= bound else "ABOVE"
    click.echo(
        f"consumed {subscriber.consumed:,} of {elements:,} elements; at most "
        f"{subscriber.max_gap} in flight ({verdict} the bound of {bound}); "
        f"peak RSS {_peak_rss_mib():.1f} MiB"
    )
    if subscriber.max_gap > bound or subscriber.consumed != elements:
        sys.exit(1)
