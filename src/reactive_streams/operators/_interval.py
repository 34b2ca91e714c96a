"""``Flow.interval``: a hot timer emitting 0, 1, 2, ... every ``period`` seconds."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from .._core import (
    EmitLoopSubscription,
    MissingBackpressureError,
    Operator,
    StageStatistics,
    check_subscriber,
)
from ._time import _check_period

if TYPE_CHECKING:
    from .._core import PeriodicTask, Scheduler
    from ..api import Subscriber

__all__ = ["IntervalPublisher"]

_BATCH = 1024
"""Ticks emitted per pass at most (only a slow subscriber lets ticks accumulate)."""


class IntervalPublisher(Operator[int]):
    """Emit ``0, 1, 2, ...`` every ``period`` seconds, ``count`` ticks at most.

    The timer is hot: it cannot wait for demand. A tick that finds no demand ends the
    stream with ``MissingBackpressureError`` (after the ticks before it); put
    ``on_backpressure_drop()``, ``on_backpressure_latest()`` or
    ``on_backpressure_buffer(...)`` after it to choose what happens instead. ``count=0``
    completes at once. Ticks are due ``period, 2 * period, ...`` after subscription,
    computed from the start, so they do not drift.

    Marble (``period=1``)::

        interval(1):  -0-1-2-3-...
        request:      (2)
        result:       -0-1-X(MissingBackpressureError)

    Backpressure:
        None by nature; see above.

    Concurrency:
        Without ``scheduler`` each subscriber gets a daemon timer thread, which stops at
        cancellation (its wait is woken at once) or at the terminal signal; with one (a
        ``VirtualTimeScheduler`` in tests) the ticks run there. Every signal comes from
        the subscription's one emit loop (``EmitLoopSubscription``), so they are serial:
        usually on the tick's thread; a Rule 3.9 error or a cancel is handled on the
        thread that calls ``request`` or ``cancel``.

    Raises:
        TypeError: ``period`` is not a number, or ``count`` not an ``int``.
        ValueError: ``period <= 0`` or ``count < 0``.
    """

    __slots__ = ("_count", "_period", "_scheduler")

    def __init__(
        self, period: float, count: int | None = None, scheduler: Scheduler | None = None
    ) -> None:
        super().__init__()
        self._period = _check_period("interval period", period)
        if count is not None:
            if isinstance(count, bool) or not isinstance(count, int):
                raise TypeError(f"interval count must be an int, got {type(count).__qualname__}")
            if count < 0:
                raise ValueError(f"interval count must be >= 0, got {count}")
        self._count = count
        self._scheduler = scheduler

    @property
    def name(self) -> str:
        return "interval"

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        """Start ticking for ``subscriber`` after ``on_subscribe`` (Rule 1.9)."""
        check_subscriber(subscriber)
        subscription = _Interval(subscriber, self._period, self._count, self._scheduler)
        self._track(subscription)
        subscription.start()


class _Interval(EmitLoopSubscription[int]):
    """One subscriber's ticks: the timer counts them, the emit loop delivers them.

    The timer (a thread, or a periodic task on a scheduler) only counts: ``_tick`` adds
    one to ``_fired`` when the subscriber asked for that many ticks in total, or records
    ``MissingBackpressureError`` when it did not, and then wakes the emit loop. The loop
    delivers ticks ``_next`` to ``_fired - 1`` within demand, then the terminal signal.
    """

    __slots__ = (
        "__weakref__",
        "_count",
        "_fired",
        "_lock",
        "_next",
        "_period",
        "_scheduler",
        "_starved",
        "_stop",
        "_task",
    )

    def __init__(
        self,
        subscriber: Subscriber[int],
        period: float,
        count: int | None,
        scheduler: Scheduler | None,
    ) -> None:
        super().__init__(subscriber, batch_size=_BATCH)
        self._period = period
        self._count = count
        self._scheduler = scheduler
        self._lock = threading.Lock()
        self._fired = 0  # ticks due to the subscriber (the timer's count, under _lock)
        self._next = 0  # the next tick to deliver (the emit loop's own)
        self._starved: MissingBackpressureError | None = None
        self._stop = threading.Event()  # the timer stops: the stream ended or no ticks left
        self._task: PeriodicTask | None = None

    def statistics(self) -> StageStatistics:
        """A snapshot of the subscription's counters (``buffered``: ticks not yet sent)."""
        base = super().statistics()
        return StageStatistics(
            requested=base.requested,
            delivered=base.delivered,
            buffered=base.buffered,
            cancelled=base.cancelled,
            terminated=base.terminated,
        )

    # -- the timer (its own thread, or the scheduler's) -----------------------------------

    def _tick(self) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            if self._fired >= self._election.requested:  # this tick finds no demand
                self._starved = MissingBackpressureError(
                    f"interval: tick {self._fired} found no demand; add an on_backpressure_* "
                    "operator after a hot source"
                )
                self._stop.set()
            else:
                self._fired += 1
                if self._count is not None and self._fired >= self._count:
                    self._stop.set()
        self.wake()

    def _run_thread(self) -> None:
        start = time.monotonic()
        ticks = 0
        while True:
            due = start + (ticks + 1) * self._period  # computed, not summed: no drift
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
            if time.monotonic() >= due:  # else woken early: only _stop wakes it
                ticks += 1
                self._tick()

    # -- the source of the emit loop (runs under the election) ----------------------------

    def _open(self) -> None:
        if self._count == 0:
            self._stop.set()
            return
        scheduler = self._scheduler
        if scheduler is None:
            threading.Thread(
                target=self._run_thread, name="reactive-streams-interval", daemon=True
            ).start()
        else:
            self._task = scheduler.schedule_periodic(self._period, self._tick)

    def _emit(self, subscriber: Subscriber[int], count: int) -> int:
        with self._lock:
            available = self._fired - self._next
        sent = 0
        for _ in range(min(count, available)):
            tick = self._next
            self._next = tick + 1
            try:
                subscriber.on_next(tick)
            except Exception as exc:  # Rule 2.13
                self._deliver_failed(subscriber, exc)
                return sent
            sent += 1
            if self._election.cancelled:
                break
        return sent

    def _exhausted(self) -> bool:
        with self._lock:
            if self._next < self._fired:
                return False  # ticks with demand go out before the end
            return self._starved is not None or (
                self._count is not None and self._fired >= self._count
            )

    def _failure(self) -> Exception | None:
        with self._lock:
            return self._starved if self._next >= self._fired else None

    def _close(self) -> None:
        self._stop.set()  # wakes the timer thread at once
        task, self._task = self._task, None
        if task is not None:
            task.cancel()

    def _buffered(self) -> int:
        with self._lock:
            return self._fired - self._next
