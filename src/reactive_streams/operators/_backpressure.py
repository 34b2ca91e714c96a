"""``on_backpressure_buffer`` / ``_drop`` / ``_latest``: strategies for hot sources.

A hot source (a timer, a sensor, a socket) cannot slow down. These stages request
unbounded demand upstream and decide what to do with elements that arrive when downstream
has not asked for them. Nothing is ever dropped silently: every dropped element is counted
in ``statistics().dropped`` and passed to the ``on_drop`` callback when one is given.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .._demand import MAX_DEMAND, add_demand, validate_request
from .._exceptions import MissingBackpressureError, ProtocolViolationError
from .._hooks import report_undeliverable
from .._signals import report_violation, signal_on_complete, signal_on_error, signal_on_subscribe
from ..api import Publisher, Subscriber, Subscription
from ._base import StageOperator, StageStatistics

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["OnBackpressureOperator", "Overflow"]

T = TypeVar("T")

Overflow = Literal["error", "drop_oldest", "drop_latest"]


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
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
            raise ValueError(f"capacity must be an int >= 0, got {capacity!r}")
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


class _OnBackpressure(Subscriber[Any], Subscription):
    __slots__ = (
        "__weakref__",
        "_buffer",
        "_cancelled",
        "_capacity",
        "_delivered",
        "_demand",
        "_done",
        "_downstream",
        "_dropped",
        "_error",
        "_high_water",
        "_lock",
        "_on_drop",
        "_overflow",
        "_requested",
        "_terminated",
        "_upstream",
        "_urgent",
        "_wip",
    )

    def __init__(
        self,
        downstream: Subscriber[Any],
        capacity: int,
        overflow: Overflow,
        on_drop: Callable[[Any], object] | None,
    ) -> None:
        self._downstream: Subscriber[Any] | None = downstream
        self._capacity = capacity
        self._overflow = overflow
        self._on_drop = on_drop
        self._lock = threading.Lock()
        self._buffer: deque[Any] = deque()
        self._upstream: Subscription | None = None
        self._demand = 0
        self._requested = 0
        self._delivered = 0
        self._dropped = 0
        self._high_water = 0
        self._done = False
        self._error: Exception | None = None
        self._cancelled = False
        self._terminated = False
        self._urgent = False  # our own error: signal it at once and cancel upstream
        self._wip = False

    def statistics(self) -> StageStatistics:
        with self._lock:
            return StageStatistics(
                requested=self._requested,
                delivered=self._delivered,
                buffered=len(self._buffer),
                cancelled=self._cancelled,
                terminated=self._terminated,
                high_water_mark=self._high_water,
                dropped=self._dropped,
            )

    def on_subscribe(self, subscription: Subscription) -> None:
        if subscription is None:
            raise TypeError("Rule 2.13: on_subscribe(None)")
        if self._upstream is not None:
            subscription.cancel()  # Rule 2.5
            return
        self._upstream = subscription
        downstream = self._downstream
        if downstream is None or not signal_on_subscribe(downstream, self):
            self.cancel()
            return
        subscription.request(MAX_DEMAND)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        dropped: Any = None
        with self._lock:
            if self._done or self._cancelled:
                return
            buffer = self._buffer
            if len(buffer) < self._demand + self._capacity:
                buffer.append(element)
                self._high_water = max(self._high_water, len(buffer) - self._demand)
            elif self._overflow == "drop_latest" or not buffer:
                dropped = element
                self._dropped += 1
            elif self._overflow == "drop_oldest":
                dropped = buffer.popleft()
                buffer.append(element)
                self._dropped += 1
            else:
                self._done = True
                self._urgent = True
                self._error = MissingBackpressureError(
                    f"on_backpressure_buffer: the buffer of {self._capacity} elements is "
                    "full and the overflow strategy is 'error'"
                )
            start = not self._wip
            self._wip = True
        if dropped is not None and self._on_drop is not None:
            try:
                self._on_drop(dropped)
            except Exception as exc:
                report_undeliverable(exc)
        if start:
            self._drain()

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        with self._lock:
            if self._done:
                return
            self._done = True
            self._error = error
            start = not self._wip
            self._wip = True
        if start:
            self._drain()

    def on_complete(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            start = not self._wip
            self._wip = True
        if start:
            self._drain()

    def request(self, n: int) -> None:
        try:
            count = validate_request(n)
        except ProtocolViolationError as error:
            with self._lock:
                if not self._terminated:  # even after upstream completed (Rule 3.9)
                    self._error = error
                    self._done = True
                    self._urgent = True
                start = not self._wip
                self._wip = True
        else:
            with self._lock:
                self._demand = add_demand(self._demand, count)
                self._requested = add_demand(self._requested, count)
                start = not self._wip
                self._wip = True
        if start:
            self._drain()

    def cancel(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            start = not self._wip
            self._wip = True
        if start:
            self._drain()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if self._terminated:
                    return
                downstream = self._downstream
                upstream = self._upstream
                if self._cancelled or downstream is None:
                    self._terminated = True
                    self._buffer.clear()
                    self._downstream = None
                    cancel_only = True
                else:
                    cancel_only = False
                    buffer = self._buffer
                    count = min(len(buffer), self._demand)
                    batch = [buffer.popleft() for _ in range(count)]
                    if count and self._demand != MAX_DEMAND:
                        self._demand -= count
                    error = self._error
                    urgent = self._urgent
                    finished = self._done and (not buffer or urgent)
                    if finished:
                        self._terminated = True
                        self._downstream = None
                        buffer.clear()
                    if not count and not finished:
                        self._wip = False
                        return
            if cancel_only:
                if upstream is not None:
                    upstream.cancel()
                return
            assert downstream is not None
            sent = 0
            for element in batch:
                try:
                    downstream.on_next(element)
                except Exception as exc:  # Rule 2.13
                    report_violation(downstream, "on_next", exc)
                    with self._lock:
                        self._cancelled = True
                    break
                sent += 1
            with self._lock:
                self._delivered += sent
            if finished:
                if error is not None:
                    if upstream is not None and urgent:
                        upstream.cancel()  # our own error: upstream is still running
                    signal_on_error(downstream, error)
                else:
                    signal_on_complete(downstream)
                return
