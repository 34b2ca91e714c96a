"""Frozen snapshots of a stream's counters, returned by every ``statistics()`` method."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

__all__ = ["LatencyWindow", "StreamStatistics"]


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


class LatencyWindow:
    """The last ``size`` latencies, in seconds, and their median and 99th percentile.

    Thread-safe: ``add`` from any thread, ``quantiles`` from another. The percentiles are
    nearest-rank over the window (the oldest samples fall out once it is full), so they
    follow what the stream does now, not since it started.

    Raises:
        ValueError: ``size`` is below 1.
    """

    __slots__ = ("_lock", "_samples")

    def __init__(self, size: int = 10_000) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self._lock = threading.Lock()
        self._samples: deque[float] = deque(maxlen=size)

    def add(self, seconds: float) -> None:
        """Keep one latency, in seconds."""
        with self._lock:
            self._samples.append(seconds)

    def quantiles(self) -> tuple[float, float, int] | None:
        """``(p50, p99, samples)`` in seconds, or ``None`` before the first sample."""
        with self._lock:
            ordered = sorted(self._samples)
        if not ordered:
            return None
        last = len(ordered) - 1
        return ordered[round(0.5 * last)], ordered[round(0.99 * last)], len(ordered)
