"""``RangePublisher``: the integers of a range, emitted synchronously on demand."""

from __future__ import annotations

from .._core import MAX_DEMAND, EmitLoopSubscription
from ..api import Publisher, Subscriber

__all__ = ["RangePublisher"]


class RangePublisher(Publisher[int]):
    """Publishes ``start, start + 1, ..., stop - 1`` to each subscriber, then completes.

    Synchronous: elements are emitted on the thread that calls ``request`` (Rule 3.10),
    by an emit loop that a re-entrant ``request`` from ``on_next`` only feeds, so the
    recursion depth stays 1 (Rule 3.3). Any number of subscribers, each with its own
    sequence from ``start`` (unicast, Rule 1.11). An empty range completes right after
    ``on_subscribe``, without waiting for demand (Rule 2.9).

    Args:
        start: first element (inclusive).
        stop: end (exclusive); ``stop <= start`` gives an empty stream.

    Raises:
        TypeError: if ``start`` or ``stop`` is not an ``int``.

    Example:
        >>> from reactive_streams.reference import RangePublisher
        >>> from reactive_streams.testing import collect
        >>> collect(RangePublisher(0, 5))
        [0, 1, 2, 3, 4]
    """

    __slots__ = ("_start", "_stop")

    def __init__(self, start: int, stop: int) -> None:
        for name, value in (("start", start), ("stop", stop)):
            if type(value) is not int:
                raise TypeError(f"RangePublisher {name} must be an int, got {type(value).__name__}")
        self._start = start
        self._stop = max(start, stop)

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        """Start a new sequence for ``subscriber`` (Rules 1.9, 1.11).

        Raises:
            TypeError: if ``subscriber`` is ``None`` (Rule 1.9).
        """
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe() requires a subscriber, got None")
        _RangeSubscription(subscriber, self._start, self._stop).start()

    def __repr__(self) -> str:
        return f"RangePublisher({self._start}, {self._stop})"


class _RangeSubscription(EmitLoopSubscription[int]):
    __slots__ = ("_index", "_stop")

    def __init__(self, subscriber: Subscriber[int], start: int, stop: int) -> None:
        super().__init__(subscriber, batch_size=MAX_DEMAND)
        self._index = start
        self._stop = stop

    def _open(self) -> None:
        pass  # nothing to prepare: the next element is always self._index

    def _emit(self, subscriber: Subscriber[int], count: int) -> int:
        index = self._index
        end = min(self._stop, index + count)
        election = self._election
        try:
            while index < end and not election.cancelled:  # Rule 1.8: stop soon after cancel
                element = index
                index += 1
                subscriber.on_next(element)
        except Exception as exc:
            self._deliver_failed(subscriber, exc)
        emitted = index - self._index
        self._index = index
        return emitted

    def _exhausted(self) -> bool:
        return self._index >= self._stop

    def _failure(self) -> Exception | None:
        return None
