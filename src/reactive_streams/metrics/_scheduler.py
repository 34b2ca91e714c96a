"""The clock and timer a metrics stream runs on: a two-method protocol and a thread default."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from .._hooks import report_undeliverable

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Cancellable", "Scheduler", "ThreadScheduler"]


class Cancellable(Protocol):
    """What ``Scheduler.call_later`` returns: ``cancel()`` stops the call if it has not run."""

    def cancel(self) -> Any:
        """Stop the scheduled call; a no-op once it ran."""
        ...


class Scheduler(Protocol):
    """A clock and a one-shot timer; a virtual-time scheduler for tests fits as well.

    ``now()`` is in seconds on any monotonic scale; ``call_later(delay, action)`` runs
    ``action()`` once, ``delay`` seconds (of that clock) later, on any thread, and must
    not run it from inside ``call_later`` itself.
    """

    def now(self) -> float:
        """The current time in seconds."""
        ...

    def call_later(self, delay: float, action: Callable[[], None]) -> Cancellable:
        """Run ``action`` once after ``delay`` seconds."""
        ...


class _Entry:
    __slots__ = ("action", "cancelled")

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ThreadScheduler:
    """The default scheduler: ``time.monotonic`` and one daemon thread for all timers.

    The thread starts with the first ``call_later`` and runs actions in due order; an
    action that raises is reported through the undeliverable hook. Actions must be short
    (a metrics sample is a few microseconds per stage).
    """

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._heap: list[tuple[float, int, _Entry]] = []
        self._sequence = itertools.count()
        self._thread: threading.Thread | None = None

    def now(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    def call_later(self, delay: float, action: Callable[[], None]) -> Cancellable:
        """Run ``action`` on the scheduler thread after ``delay`` seconds."""
        entry = _Entry(action)
        with self._condition:
            heapq.heappush(self._heap, (time.monotonic() + delay, next(self._sequence), entry))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="reactive-streams-metrics", daemon=True
                )
                self._thread.start()
            self._condition.notify()
        return entry

    def _run(self) -> None:
        while True:
            with self._condition:
                while True:
                    if not self._heap:
                        self._condition.wait()
                        continue
                    due, _, entry = self._heap[0]
                    wait = due - time.monotonic()
                    if wait <= 0:
                        heapq.heappop(self._heap)
                        break
                    self._condition.wait(wait)
            if entry.cancelled:
                continue
            try:
                entry.action()
            except Exception as exc:
                report_undeliverable(exc)


_DEFAULT: ThreadScheduler | None = None
_DEFAULT_LOCK = threading.Lock()


def default_scheduler() -> ThreadScheduler:
    """The shared ``ThreadScheduler`` used when ``metrics_stream`` gets none."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = ThreadScheduler()
        return _DEFAULT
