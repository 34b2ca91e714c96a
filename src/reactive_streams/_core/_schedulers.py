"""Schedulers: where and when timed actions run (public as ``reactive_streams.schedulers``).

The public module's docstring describes them; this is their one implementation.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Final, Protocol

from ._hooks import report_undeliverable

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

__all__ = [
    "AsyncioScheduler",
    "Cancellable",
    "PeriodicTask",
    "ScheduledTask",
    "Scheduler",
    "TaskQueue",
    "ThreadTimerScheduler",
    "default_scheduler",
]

_IDLE_EXIT: Final[float] = 5.0
"""Seconds the timer thread waits with nothing scheduled before it exits (it restarts)."""


class Cancellable(Protocol):
    """A pending timer: ``ScheduledTask``, ``PeriodicTask`` or a ``threading.Timer``."""

    def cancel(self) -> None:
        """Keep the timer from running again (idempotent, thread-safe)."""


class ScheduledTask:
    """A pending action: ``cancel()`` makes sure it does not run (if it has not started).

    Thread-safe and idempotent; cancelling a task that already ran does nothing.
    """

    __slots__ = ("_action", "_cancelled", "due")

    def __init__(self, due: float, action: Callable[[], object]) -> None:
        self.due = due
        self._action: Callable[[], object] | None = action
        self._cancelled = False

    def cancel(self) -> None:
        """Drop the action; it will not run unless it already started."""
        self._cancelled = True
        self._action = None

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel()`` was called."""
        return self._cancelled

    def run(self) -> None:
        """Run the action once (nothing if cancelled); a raise goes to the undeliverable hook."""
        action, self._action = self._action, None
        if action is None or self._cancelled:
            return
        try:
            action()
        except Exception as exc:  # an action must not raise: never lose it
            report_undeliverable(exc)


class Scheduler(ABC):
    """Runs actions after a delay and tells the time (seconds, ``float``).

    Implementations run each action once, never before ``now() + delay``, and run actions
    with equal due times in the order they were scheduled. Actions run one at a time per
    scheduler for the built-in kinds, but operators do not rely on it: they guard their
    state with their own lock and drain loop.
    """

    @abstractmethod
    def now(self) -> float:
        """The scheduler's clock in seconds (monotonic; only differences are meaningful)."""

    @abstractmethod
    def schedule(self, delay: float, action: Callable[[], object]) -> ScheduledTask:
        """Run ``action`` after ``delay`` seconds (``<= 0`` means as soon as possible).

        Returns:
            The task, whose ``cancel()`` keeps the action from running.
        """

    def schedule_at(self, instant: float, action: Callable[[], object]) -> ScheduledTask:
        """Run ``action`` at ``instant`` on the ``now()`` clock (a past instant: at once).

        The built-in schedulers queue the task at exactly ``instant``; this default, for
        other implementations, is ``schedule(instant - now(), action)``.
        """
        return self.schedule(instant - self.now(), action)

    def schedule_periodic(
        self, period: float, action: Callable[[], object], *, initial: float | None = None
    ) -> PeriodicTask:
        """Run ``action`` at ``initial`` (``period`` by default) and every ``period`` after.

        Run ``n`` (from 1) is due at ``start + (initial - period) + n * period``, with
        ``start`` the ``now()`` of this call: each due time is computed from ``n``, not
        by adding ``period`` to the previous one, so neither slow actions nor float
        rounding make the series drift. With the default ``initial`` that is
        ``start + n * period``, one rounding: on a clock that starts at 0, run 30 of a
        0.1 s series is due at ``3.0`` (summing 0.1 thirty times gives
        ``3.0000000000000004``). A run is scheduled when the previous one starts;
        ``cancel()`` on the returned task stops the series.

        Args:
            period: seconds between runs, ``> 0``.
            action: the callable; it must not raise (see the module docstring).
            initial: seconds until the first run, ``>= 0``; ``period`` by default.

        Raises:
            ValueError: ``period <= 0``.
        """
        if not period > 0:
            raise ValueError(f"period must be positive seconds, got {period!r}")
        return PeriodicTask(self, period, action, period if initial is None else initial)


class PeriodicTask:
    """A series of runs from ``Scheduler.schedule_periodic``; ``cancel()`` stops it.

    Run ``n`` (from 1) is due at ``origin + n * period``, with
    ``origin = start + initial - period``; it is scheduled with ``Scheduler.schedule_at``
    when run ``n - 1`` starts.
    """

    __slots__ = (
        "_action",
        "_cancelled",
        "_current",
        "_lock",
        "_origin",
        "_period",
        "_runs",
        "_scheduler",
    )

    def __init__(
        self, scheduler: Scheduler, period: float, action: Callable[[], object], initial: float
    ) -> None:
        self._scheduler = scheduler
        self._period = period
        self._action = action
        self._lock = threading.Lock()
        self._cancelled = False
        self._runs = 1  # the run scheduled next
        self._origin = scheduler.now() + (initial - period)
        with self._lock:  # a scheduler may run the first tick on another thread at once
            self._current = scheduler.schedule_at(self._origin + period, self._tick)

    def _tick(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._runs += 1
            due = self._origin + self._runs * self._period
            self._current = self._scheduler.schedule_at(due, self._tick)
        self._action()

    def cancel(self) -> None:
        """Stop the series; a run already started finishes."""
        with self._lock:
            self._cancelled = True
            current = self._current
        current.cancel()


class TaskQueue:
    """A heap of tasks by (due, sequence): equal due times keep their scheduling order."""

    __slots__ = ("_heap", "_sequence")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, ScheduledTask]] = []
        self._sequence = itertools.count()

    def push(self, task: ScheduledTask) -> None:
        heapq.heappush(self._heap, (task.due, next(self._sequence), task))

    def pop_due(self, now: float) -> ScheduledTask | None:
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        if heap and heap[0][0] <= now:
            return heapq.heappop(heap)[2]
        return None

    def next_due(self) -> float | None:
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def __len__(self) -> int:
        return sum(1 for _, _, task in self._heap if not task.cancelled)


class ThreadTimerScheduler(Scheduler):
    """One daemon timer thread runs every action, in due order, on ``time.monotonic()``.

    The thread starts at the first ``schedule`` and exits after a few idle seconds; a
    later ``schedule`` starts it again. Actions run on that thread one at a time, so a
    slow action delays the others: keep actions short (the operators' actions only
    record state and run a drain pass).

    Concurrency: ``schedule`` and ``cancel`` may be called from any thread.
    """

    __slots__ = ("_condition", "_name", "_queue", "_running")

    def __init__(self, name: str = "reactive-streams-timer") -> None:
        self._condition = threading.Condition(threading.Lock())
        self._queue = TaskQueue()
        self._running = False
        self._name = name

    def now(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    def schedule(self, delay: float, action: Callable[[], object]) -> ScheduledTask:
        """Run ``action`` on the timer thread after ``delay`` seconds."""
        return self._push(ScheduledTask(time.monotonic() + max(0.0, delay), action))

    def schedule_at(self, instant: float, action: Callable[[], object]) -> ScheduledTask:
        """Run ``action`` on the timer thread at ``instant`` (``time.monotonic()`` clock)."""
        return self._push(ScheduledTask(instant, action))

    def _push(self, task: ScheduledTask) -> ScheduledTask:
        with self._condition:
            self._queue.push(task)
            start = not self._running
            self._running = True
            self._condition.notify()
        if start:
            threading.Thread(target=self._run, name=self._name, daemon=True).start()
        return task

    def _run(self) -> None:
        condition = self._condition
        idle_since = time.monotonic()
        while True:
            with condition:
                now = time.monotonic()
                task = self._queue.pop_due(now)
                if task is None:
                    due = self._queue.next_due()
                    if due is None:
                        if now - idle_since >= _IDLE_EXIT:
                            self._running = False
                            return
                        condition.wait(_IDLE_EXIT)
                    else:
                        condition.wait(due - now)
                        idle_since = time.monotonic()
                    continue
            task.run()
            idle_since = time.monotonic()


class AsyncioScheduler(Scheduler):
    """Runs actions on an asyncio event loop (``loop.call_at``), on the loop's clock.

    ``schedule`` may be called from any thread (it goes through
    ``loop.call_soon_threadsafe``); the actions run on the loop thread, so they must not
    block. Actions scheduled after the loop closed are dropped and reported through the
    undeliverable hook as a ``RuntimeError``.

    Args:
        loop: the event loop to run on.
    """

    __slots__ = ("_loop",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def now(self) -> float:
        """``loop.time()``."""
        return self._loop.time()

    def schedule(self, delay: float, action: Callable[[], object]) -> ScheduledTask:
        """Run ``action`` on the loop after ``delay`` seconds."""
        return self._arm(ScheduledTask(self._loop.time() + max(0.0, delay), action))

    def schedule_at(self, instant: float, action: Callable[[], object]) -> ScheduledTask:
        """Run ``action`` on the loop at ``instant`` (``loop.time()`` clock)."""
        return self._arm(ScheduledTask(instant, action))

    def _arm(self, task: ScheduledTask) -> ScheduledTask:
        loop = self._loop

        def arm() -> None:
            if not task.cancelled:
                loop.call_at(task.due, task.run)

        try:
            loop.call_soon_threadsafe(arm)
        except RuntimeError as exc:  # the loop is closed
            report_undeliverable(exc)
            task.cancel()
        return task


_default_lock = threading.Lock()
_default: ThreadTimerScheduler | None = None


def default_scheduler() -> ThreadTimerScheduler:
    """The shared ``ThreadTimerScheduler`` used when an operator gets no ``scheduler=``."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ThreadTimerScheduler()
        return _default
