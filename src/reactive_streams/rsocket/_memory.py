"""``MemoryPool``: one memory budget for every connection of a server.

Each connection has its own budget (``ServerLimits.connection_memory``); many connections
at their own budgets can still hold more than the machine has. The pool adds up what every
connection holds (``Connection.held_bytes``: the frame being read, reassembly, queued and
buffered writes). While the sum is over the server's budget, the server stops reading from
the connections that hold the most, one more at each report while it stays over, and
refuses new connections; once the sum falls below nine tenths of the budget, every
connection it stopped is read again. It lives on the server's event loop and is used from
that thread only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

__all__ = ["MemoryPool", "MemoryStatistics", "default_total_memory"]

_RESUME_SHARE = 0.9
"""Stopped connections are read again once the sum is below this share of the budget."""

_MACHINE_SHARE = 8
"""The default budget is an eighth of the machine's memory."""


def default_total_memory(connection_memory: int) -> int:
    """An eighth of the machine's physical memory, and at least four connections' budgets."""
    try:
        machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # not POSIX: 4 GiB as the machine
        machine = 4 * 2**30
    return max(4 * connection_memory, machine // _MACHINE_SHARE)


class _Holder(Protocol):
    """What the pool needs of a connection."""

    @property
    def held_bytes(self) -> int: ...

    def hold_reading(self, reason: str) -> None: ...

    def release_reading(self, reason: str) -> None: ...


@dataclass(frozen=True, slots=True)
class MemoryStatistics:
    """A snapshot of the pool.

    Attributes:
        budget: the server's budget, in bytes.
        held: bytes held by every connection at their last report.
        stopped: connections not read because of the budget now.
        high_water: the most bytes held at once so far.
    """

    budget: int
    held: int
    stopped: int
    high_water: int


class MemoryPool:
    """The books of the server-wide budget (loop thread only).

    Args:
        budget: the most bytes all connections together may hold, ``>= 1``.
    """

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._held: dict[_Holder, int] = {}
        self._sum = 0
        self._stopped: set[_Holder] = set()
        self._high_water = 0

    @property
    def spent(self) -> bool:
        """Whether the connections hold the whole budget (new ones are refused)."""
        return self._sum >= self._budget

    def report(self, connection: _Holder) -> None:
        """``connection``'s holding may have changed: count it, then stop or resume reads."""
        held = connection.held_bytes
        self._sum += held - self._held.get(connection, 0)
        self._held[connection] = held
        self._high_water = max(self._high_water, self._sum)
        if self._sum > self._budget:
            self._stop_the_largest()
        else:
            self._resume_if_below()

    def forget(self, connection: _Holder) -> None:
        """``connection`` closed: what it held is free again."""
        self._sum -= self._held.pop(connection, 0)
        self._stopped.discard(connection)
        self._resume_if_below()

    def _resume_if_below(self) -> None:
        if self._stopped and self._sum < self._budget * _RESUME_SHARE:
            stopped, self._stopped = self._stopped, set()
            for held_back in stopped:
                held_back.release_reading("budget")

    def _stop_the_largest(self) -> None:
        reading = [(held, id(c), c) for c, held in self._held.items() if c not in self._stopped]
        if not reading:
            return
        _, _, largest = max(reading, key=lambda entry: (entry[0], entry[1]))
        self._stopped.add(largest)
        largest.hold_reading("budget")

    def statistics(self) -> MemoryStatistics:
        """A snapshot of the books."""
        return MemoryStatistics(
            budget=self._budget,
            held=self._sum,
            stopped=len(self._stopped),
            high_water=self._high_water,
        )
