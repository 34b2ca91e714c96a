"""``on_backpressure_buffer`` / ``_drop`` / ``_latest``: strategies for hot sources.

A hot source (a timer, a sensor, a socket) cannot slow down. These stages request
unbounded demand upstream and decide what to do with elements that arrive when downstream
has not asked for them. Nothing is ever dropped silently: every dropped element is counted
in ``statistics().dropped`` and passed to the ``on_drop`` callback when one is given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ._demand import MAX_DEMAND
from ._exceptions import MissingBackpressureError
from ._hooks import report_undeliverable
from ._operator import StageOperator
from ._stage import BufferedStage

if TYPE_CHECKING:
    from collections import deque
    from collections.abc import Callable

    from ..api import Publisher, Subscriber, Subscription

__all__ = ["Admission", "OnBackpressureOperator", "Overflow", "admit"]

T = TypeVar("T")

Overflow = Literal["error", "drop_oldest", "drop_latest"]

Admission = Literal["enqueued", "dropped", "overflow"]
"""What ``admit`` did with an element: queued it (perhaps dropping the oldest to make
room), dropped it, or found the buffer full under the ``"error"`` strategy."""


def admit(
    buffer: deque[Any], limit: int, overflow: Overflow, element: Any
) -> tuple[Admission, Any]:
    """Put ``element`` into ``buffer`` unless it already holds ``limit`` elements.

    The one place where the overflow strategies are decided; the caller holds the lock
    that guards ``buffer``, counts the drops and reports them (without the lock).

    Returns:
        ``("enqueued", None)``: there was room. ``("enqueued", oldest)``: ``"drop_oldest"``
        made room by dropping ``oldest``. ``("dropped", element)``: ``"drop_latest"`` (or
        ``"drop_oldest"`` with an empty buffer and no room) dropped the new element.
        ``("overflow", None)``: the buffer is full and the strategy is ``"error"``; the
        buffer is unchanged and the caller fails the stream with
        ``MissingBackpressureError``.
    """
    if len(buffer) < limit:
        buffer.append(element)
        return "enqueued", None
    if overflow == "drop_latest" or not buffer:
        return "dropped", element
    if overflow == "drop_oldest":
        oldest = buffer.popleft()
        buffer.append(element)
        return "enqueued", oldest
    return "overflow", None


class OnBackpressureOperator(StageOperator[T]):
    """Absorb an upstream that ignores demand, with a bounded buffer and a strategy.

    Marble (``capacity=1``, ``overflow="drop_oldest"``: ``on_backpressure_latest``)::

        source:   -1-2-3-4-5-|
        request:  (1)......(1)
        result:   -1.......5-|     dropped: 2, 3, 4

    Args:
        capacity: elements kept beyond the outstanding downstream demand.
        overflow: what a full buffer does with a new element: ``"error"`` signals
            ``MissingBackpressureError`` (and cancels upstream), ``"drop_latest"`` drops
            the new element, ``"drop_oldest"`` drops the oldest buffered one.
        on_drop: called with every dropped element, on the thread that delivered it.

    Backpressure:
        Requests ``MAX_DEMAND`` upstream; at most ``capacity`` elements wait beyond what
        downstream requested.

    Concurrency:
        Upstream and downstream may be on different threads; one drain loop under one
        lock delivers serially (Rule 1.3). ``on_drop`` runs without the lock held.
    """

    __slots__ = ("_capacity", "_label", "_on_drop", "_overflow")

    def __init__(
        self,
        upstream: Publisher[T],
        capacity: int,
        overflow: Overflow,
        on_drop: Callable[[T], object] | None,
        label: str,
    ) -> None:
        super().__init__(upstream)
        if isinstance(capacity, bool) or not isinstance(capacity, int):
            raise TypeError(f"capacity must be an int, got {type(capacity).__qualname__}")
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        if overflow not in ("error", "drop_oldest", "drop_latest"):
            raise ValueError(
                f"overflow must be 'error', 'drop_oldest' or 'drop_latest', got {overflow!r}"
            )
        self._capacity = capacity
        self._overflow = overflow
        self._on_drop = on_drop
        self._label = label

    @property
    def name(self) -> str:
        return self._label

    def _new_stage(self, subscriber: Subscriber[T]) -> Subscriber[Any]:
        return _OnBackpressure(subscriber, self._capacity, self._overflow, self._on_drop)


class _OnBackpressure(BufferedStage):
    __slots__ = (
        "__weakref__",
        "_capacity",
        "_dropped",
        "_on_drop",
        "_overflow",
    )

    def __init__(
        self,
        downstream: Subscriber[Any],
        capacity: int,
        overflow: Overflow,
        on_drop: Callable[[Any], object] | None,
    ) -> None:
        super().__init__(downstream)
        self._capacity = capacity
        self._overflow = overflow
        self._on_drop = on_drop
        self._dropped = 0

    def _dropped_now(self) -> int:
        return self._dropped

    def on_subscribe(self, subscription: Subscription) -> None:
        if self._accept_upstream(subscription):
            self.request_upstream(subscription, MAX_DEMAND)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        dropped: Any = None
        with self._lock:
            if self._done or self._cancelled:
                return
            buffer = self._ready
            outcome, dropped = admit(buffer, self._demand + self._capacity, self._overflow, element)
            if dropped is not None:
                self._dropped += 1
            if outcome == "enqueued":
                self._high_water = max(self._high_water, len(buffer) - self._demand)
            elif outcome == "overflow":
                self._done = True
                self._urgent = True
                self._error = MissingBackpressureError(
                    f"on_backpressure_buffer: the buffer of {self._capacity} elements is "
                    "full and the overflow strategy is 'error'"
                )
            start = self._guard.acquire_locked()
        if dropped is not None and self._on_drop is not None:
            try:
                self._on_drop(dropped)
            except Exception as exc:
                report_undeliverable(exc)
        if start:
            self._loop.start_owned()
