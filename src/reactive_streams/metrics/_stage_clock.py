"""``StageClock``: the time a stage spent busy, idle and backpressured, sample by sample."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .._core import MAX_DEMAND

__all__ = ["StageClock", "StageState", "outstanding_demand"]

StageState = Literal["busy", "idle", "backpressured"]
"""A stage's state at one sample (Flink's split of a task's time)."""


def outstanding_demand(requested: int, delivered: int) -> int:
    """Demand asked for and not yet met, in elements; ``MAX_DEMAND`` once unbounded.

    ``requested`` is the sum of every ``request(n)`` (capped at ``MAX_DEMAND``, Rule 3.17),
    ``delivered`` the ``on_next`` calls so far; an unbounded request stays unbounded
    however many elements were delivered.
    """
    if requested >= MAX_DEMAND:
        return MAX_DEMAND
    return max(0, requested - delivered)


@dataclass(slots=True)
class StageClock:
    """Seconds a stage spent in each state during the current period.

    A sampler calls ``charge`` with the state it saw and the seconds since its last
    sample, and ``per_second`` at the end of the period (then ``reset``). Not
    thread-safe: one sampler owns it (the metrics streams sample on one thread).
    """

    busy: float = 0.0
    idle: float = 0.0
    backpressured: float = 0.0

    def charge(self, state: StageState, seconds: float) -> None:
        """Add ``seconds`` (``>= 0``) to ``state``."""
        if state == "busy":
            self.busy += seconds
        elif state == "backpressured":
            self.backpressured += seconds
        else:
            self.idle += seconds

    @property
    def total(self) -> float:
        """Seconds charged in this period."""
        return self.busy + self.idle + self.backpressured

    def per_second(self) -> tuple[float, float, float]:
        """``(busy, idle, backpressured)`` in ms per second of the period charged.

        All zero when nothing was charged.
        """
        total = self.total
        scale = 1000.0 / total if total > 0 else 0.0
        return self.busy * scale, self.idle * scale, self.backpressured * scale

    def reset(self) -> None:
        """Start a new period."""
        self.busy = self.idle = self.backpressured = 0.0
