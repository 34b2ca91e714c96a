"""The relay: daemon threads that take over a drain from a caller's thread (Rule 3.4).

A drain started by ``request`` or ``subscribe`` runs on its caller's thread, which came
only to ask. When such a drain still has elements to deliver after ``CALLER_BUDGET`` of
them, ``DrainLoop`` hands the rest of its run to the relay and gives the caller its
thread back. The relay runs each drain in passes of the same bound and queues it again
behind the others, so one endless stream cannot keep a relay thread to itself.

Threads are started on demand (one per task waiting with no idle thread, at most
``RELAY_THREADS``), are daemons (an endless stream never keeps the interpreter alive)
and exit after ``_IDLE_EXIT`` seconds without work.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Final

from ._hooks import report_undeliverable

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["RELAY_THREADS", "Relay", "relay"]

RELAY_THREADS: Final[int] = 8
"""The most relay threads alive at once; further tasks wait in the relay's FIFO queue."""

_IDLE_EXIT: Final[float] = 5.0
"""Seconds a relay thread waits without a task before it exits (new ones start on demand)."""


class Relay:
    """A FIFO of tasks served by up to ``threads`` daemon threads.

    Args:
        threads: the most threads alive at once, ``>= 1``.
        name: the threads' name prefix (shows in thread dumps and tracebacks).

    Concurrency: ``submit`` may be called from any thread and never blocks.
    """

    __slots__ = ("_cond", "_idle", "_live", "_name", "_started", "_tasks", "_threads")

    def __init__(self, threads: int = RELAY_THREADS, name: str = "reactive-streams-relay") -> None:
        self._threads = threads
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._tasks: deque[Callable[[], object]] = deque()
        self._idle = 0
        self._live = 0
        self._started = 0

    def submit(self, task: Callable[[], object]) -> None:
        """Queue ``task``; a relay thread runs it soon (a raise goes to the undeliverable hook)."""
        with self._cond:
            self._tasks.append(task)
            if self._idle:
                self._cond.notify()
                return
            if self._live >= self._threads:
                return  # every thread is busy: the task waits its turn
            self._live += 1
            self._started += 1
            name = f"{self._name}-{self._started}"
        threading.Thread(target=self._work, name=name, daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._tasks:
                    self._idle += 1
                    woken = self._cond.wait(_IDLE_EXIT)
                    self._idle -= 1
                    if not woken and not self._tasks:
                        self._live -= 1
                        return
                task = self._tasks.popleft()
            try:
                task()
            except Exception as exc:  # a relayed drain ends its own stream; never lose it
                report_undeliverable(exc)


_RELAY = Relay()


def relay() -> Relay:
    """The process-wide relay that ``DrainLoop`` hands callers' drains to."""
    return _RELAY
