"""Frozen snapshots of a stream's counters, returned by every ``statistics()`` method."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StreamStatistics"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamStatistics:
    """A point-in-time snapshot of one subscription, subscriber or stage.

    Attributes:
        requested: total demand ever requested, in elements, capped at ``MAX_DEMAND``.
        delivered: total ``on_next`` signals sent (for a publisher side) or received (for a
            subscriber side).
        buffered: elements held right now, received and not yet handed on.
        cancelled: the subscription was cancelled, or ended by a terminal signal (Rule 1.6).
        terminated: ``on_complete`` or ``on_error`` was signalled.
    """

    requested: int
    delivered: int
    buffered: int
    cancelled: bool
    terminated: bool
