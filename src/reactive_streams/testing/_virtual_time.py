"""``VirtualTimeScheduler``: a clock that only moves when the test says so."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .._core import ScheduledTask, Scheduler, TaskQueue

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["VirtualTimeScheduler"]


class VirtualTimeScheduler(Scheduler):
    """A scheduler on virtual time: exact, reproducible, no wall time spent.

    The clock starts at ``0.0`` and moves only in ``advance``/``advance_to``, which run
    every action due on the way, in due order (equal due times in scheduling order), on the
    calling thread, with ``now()`` set to each action's due time while it runs. An action
    scheduled during ``advance`` with a due time inside the advanced span runs in the same
    call. Reactor's ``VirtualTimeScheduler``, RxPY's ``TestScheduler``.

    >>> scheduler = VirtualTimeScheduler()
    >>> seen = []
    >>> _ = scheduler.schedule(0.5, lambda: seen.append("a"))
    >>> _ = scheduler.schedule(0.25, lambda: seen.append("b"))
    >>> scheduler.advance(1.0)
    >>> seen, scheduler.now()
    (['b', 'a'], 1.0)

    Concurrency: ``schedule`` may be called from any thread; ``advance`` should be called
    by one thread at a time (the test's).
    """

    __slots__ = ("_clock", "_lock", "_queue")

    def __init__(self, start: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._clock = start
        self._queue = TaskQueue()

    def now(self) -> float:
        """The virtual clock in seconds."""
        with self._lock:
            return self._clock

    def schedule(self, delay: float, action: Callable[[], object]) -> ScheduledTask:
        """Queue ``action`` at ``now() + delay`` virtual seconds; nothing runs here."""
        with self._lock:
            task = ScheduledTask(self._clock + max(0.0, delay), action)
            self._queue.push(task)
        return task

    def schedule_at(self, instant: float, action: Callable[[], object]) -> ScheduledTask:
        """Queue ``action`` at exactly ``instant`` virtual seconds (a past one: next advance)."""
        with self._lock:
            task = ScheduledTask(instant, action)
            self._queue.push(task)
        return task

    def advance(self, seconds: float = 0.0) -> None:
        """Move the clock forward by ``seconds``, running every action due on the way.

        ``advance()`` (zero seconds) runs the actions already due, such as those scheduled
        with no delay.

        Raises:
            ValueError: ``seconds < 0``.
        """
        if seconds < 0:
            raise ValueError(f"virtual time cannot go back: advance({seconds!r})")
        with self._lock:
            target = self._clock + seconds
        self.advance_to(target)

    def advance_to(self, instant: float) -> None:
        """Move the clock to ``instant``, running every action due up to it, in order.

        Raises:
            ValueError: ``instant`` is before ``now()``.
        """
        with self._lock:
            if instant < self._clock:
                raise ValueError(f"virtual time cannot go back from {self._clock} to {instant}")
        while True:
            with self._lock:
                task = self._queue.pop_due(instant)
                if task is None:
                    self._clock = instant
                    return
                self._clock = max(self._clock, task.due)
            task.run()

    @property
    def pending(self) -> int:
        """Actions scheduled and not yet run nor cancelled."""
        with self._lock:
            return len(self._queue)
