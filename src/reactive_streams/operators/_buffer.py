"""``buffer``: group elements into lists of ``size``, optionally flushed after a timeout."""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, TypeVar

from .._demand import MAX_DEMAND, add_demand, validate_request
from .._exceptions import ProtocolViolationError
from .._signals import report_violation, signal_on_complete, signal_on_error, signal_on_subscribe
from ..api import Publisher, Subscriber, Subscription
from ._base import StageOperator, StageStatistics

__all__ = ["BufferOperator"]

T = TypeVar("T")


class BufferOperator(StageOperator[list[T]]):
    """Emit lists of ``size`` elements; the last list may be shorter.

    With ``timeout`` (seconds), a non-empty partial list is also emitted when ``timeout``
    has passed since its first element arrived, so a slow source still makes progress.

    Marble (``size=2``)::

        source:     -1-2-3-4-5-|
        buffer(2):  ---[1,2]---[3,4]-[5]|

    Backpressure:
        ``request(n)`` downstream becomes ``request(n * size)`` upstream. Lists flushed early
        by the timeout wait for demand in a queue bounded by the upstream demand.

    Concurrency:
        The timeout runs on a ``threading.Timer`` thread; it and the upstream thread only
        append under one lock, and one drain loop delivers the lists serially (Rule 1.3).
        The timer is cancelled when the stream ends.
    """

    __slots__ = ("_size", "_timeout")

    def __init__(self, upstream: Publisher[T], size: int, timeout: float | None) -> None:
        super().__init__(upstream)
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"buffer size must be a positive int, got {size!r}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"buffer timeout must be positive seconds, got {timeout!r}")
        self._size = size
        self._timeout = timeout

    @property
    def name(self) -> str:
        return "buffer"

    def _new_stage(self, subscriber: Subscriber[list[T]]) -> Subscriber[Any]:
        return _Buffer(subscriber, self._size, self._timeout)


class _Buffer(Subscriber[Any], Subscription):
    __slots__ = (
        "__weakref__",
        "_cancelled",
        "_current",
        "_delivered",
        "_demand",
        "_done",
        "_downstream",
        "_error",
        "_high_water",
        "_lock",
        "_ready",
        "_requested",
        "_size",
        "_terminated",
        "_timeout",
        "_timer",
        "_upstream",
        "_urgent",
        "_wip",
    )

    def __init__(self, downstream: Subscriber[Any], size: int, timeout: float | None) -> None:
        self._downstream: Subscriber[Any] | None = downstream
        self._size = size
        self._timeout = timeout
        self._lock = threading.Lock()
        self._upstream: Subscription | None = None
        self._current: list[Any] = []
        self._ready: deque[list[Any]] = deque()
        self._timer: threading.Timer | None = None
        self._demand = 0
        self._requested = 0
        self._delivered = 0
        self._high_water = 0
        self._done = False
        self._urgent = False
        self._error: Exception | None = None
        self._cancelled = False
        self._terminated = False
        self._wip = False

    def statistics(self) -> StageStatistics:
        with self._lock:
            buffered = len(self._current) + sum(len(chunk) for chunk in self._ready)
            return StageStatistics(
                requested=self._requested,
                delivered=self._delivered,
                buffered=buffered,
                cancelled=self._cancelled,
                terminated=self._terminated,
                high_water_mark=self._high_water,
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

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        start_timer = False
        with self._lock:
            if self._done or self._cancelled:
                return
            current = self._current
            current.append(element)
            if len(current) == 1 and self._timeout is not None:
                start_timer = True
            if len(current) >= self._size:
                self._ready.append(current)
                self._current = []
                start_timer = False
                timer, self._timer = self._timer, None
            else:
                timer = None
            self._high_water = max(
                self._high_water, len(self._current) + self._size * len(self._ready)
            )
            start = not self._wip and bool(self._ready)
            if start:
                self._wip = True
        if timer is not None:
            timer.cancel()
        if start_timer:
            self._arm_timer()
        if start:
            self._drain()

    def _arm_timer(self) -> None:
        assert self._timeout is not None
        timer = threading.Timer(self._timeout, self._flush)
        timer.daemon = True
        with self._lock:
            if self._done or self._cancelled or not self._current:
                return
            previous, self._timer = self._timer, timer
        if previous is not None:
            previous.cancel()
        timer.start()

    def _flush(self) -> None:
        with self._lock:
            if not self._current or self._done or self._cancelled:
                return
            self._ready.append(self._current)
            self._current = []
            self._timer = None
        self._schedule()

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        with self._lock:
            if self._done:
                return
            self._done = True
            self._error = error
        self._schedule()

    def on_complete(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            if self._current:
                self._ready.append(self._current)
                self._current = []
        self._schedule()

    def request(self, n: int) -> None:
        try:
            count = validate_request(n)
        except ProtocolViolationError as error:
            with self._lock:
                if not self._terminated:  # even after upstream completed (Rule 3.9)
                    self._done = True
                    self._urgent = True
                    self._error = error
            self._schedule()
            return
        with self._lock:
            self._demand = add_demand(self._demand, count)
            self._requested = add_demand(self._requested, count)
        upstream = self._upstream
        if upstream is not None:
            upstream.request(count * self._size if count < MAX_DEMAND else MAX_DEMAND)
        self._schedule()

    def cancel(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
        self._schedule()

    def _schedule(self) -> None:
        with self._lock:
            if self._wip:
                return
            self._wip = True
        self._drain()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if self._terminated:
                    return
                downstream = self._downstream
                upstream = self._upstream
                timer = self._timer
                if self._cancelled or downstream is None:
                    self._terminated = True
                    self._downstream = None
                    self._ready.clear()
                    self._current = []
                    self._timer = None
                    cancel_only = True
                else:
                    cancel_only = False
                    count = min(len(self._ready), self._demand)
                    batch = [self._ready.popleft() for _ in range(count)]
                    if count and self._demand != MAX_DEMAND:
                        self._demand -= count
                    error = self._error
                    urgent = self._urgent
                    finished = self._done and (not self._ready or urgent or error is not None)
                    if finished:
                        self._terminated = True
                        self._downstream = None
                        self._timer = None
                    if not count and not finished:
                        self._wip = False
                        return
            if (cancel_only or finished) and timer is not None:
                timer.cancel()
            if cancel_only:
                if upstream is not None:
                    upstream.cancel()
                return
            assert downstream is not None
            sent = 0
            for chunk in batch:
                try:
                    downstream.on_next(chunk)
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
                    if urgent and upstream is not None:
                        upstream.cancel()
                    signal_on_error(downstream, error)
                else:
                    signal_on_complete(downstream)
                return
