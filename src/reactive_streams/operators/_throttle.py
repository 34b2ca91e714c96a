"""``throttle``: pace a stream to a rate with a token bucket, by delaying, never dropping."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Final

from .._core import (
    StageOperator,
    check_positive,
    default_scheduler,
)
from ._time import _check_element, _check_period, _TimedStage

if TYPE_CHECKING:
    from .._core import Scheduler
    from ..api import Publisher, Subscriber, Subscription

__all__ = ["THROTTLE_PREFETCH", "ThrottleOperator"]

THROTTLE_PREFETCH: Final[int] = 16
"""With a smaller ``burst``, the most elements ``throttle`` requests ahead of delivery."""

_EARLY: Final[float] = 1e-9
"""A timer this much early (float rounding of the due instant) still counts as on time."""


class ThrottleOperator(StageOperator[Any]):
    """Deliver at most ``elements`` per ``per`` seconds, with bursts of up to ``burst``.

    Akka's ``throttle`` in shaping mode: a token bucket of ``burst`` tokens, full at
    subscription, gains one token every ``per / elements`` seconds (never more than
    ``burst``); each element takes one token, and waits for it when the bucket is empty.
    Nothing is dropped and the order is kept. Completion and an upstream error wait
    behind the elements that arrived before them.

    Backpressure:
        At most ``min(downstream demand, max(burst, THROTTLE_PREFETCH))`` elements are
        requested upstream and not yet delivered, so every element that gets its token
        has downstream demand waiting for it (a token is only spent on a delivery).

    Concurrency:
        The waits run on the scheduler; delivery is serial through the stage's drain loop,
        on the timer's thread or the thread of the upstream signal.
    """

    __slots__ = ("_burst", "_interval", "_scheduler")

    def __init__(
        self,
        upstream: Publisher[Any],
        elements: int,
        per: float,
        burst: int,
        scheduler: Scheduler | None,
    ) -> None:
        super().__init__(upstream)
        count = check_positive("throttle elements", elements)
        self._interval = _check_period("throttle per", per) / count
        self._burst = check_positive("throttle burst", burst)
        self._scheduler = default_scheduler() if scheduler is None else scheduler

    @property
    def name(self) -> str:
        return "throttle"

    def _new_stage(self, subscriber: Subscriber[Any]) -> Subscriber[Any]:
        return _Throttle(subscriber, self._interval, self._burst, self._scheduler)


class _Throttle(_TimedStage):
    """The bucket as a theoretical arrival time (GCRA, equivalent to a token bucket).

    ``_due`` is the instant at which the bucket would be full again after the tokens spent
    so far; an element may go once ``now >= _due - (burst - 1) * interval`` (the bucket
    holds a token), and taking it moves ``_due`` to ``max(_due, now) + interval``.
    ``_waiting`` holds the elements that arrived and wait for a token, ``_outstanding`` the
    elements requested upstream and not yet delivered, ``_ended`` upstream's terminal
    signal (``(error,)``) until ``_waiting`` is empty.
    """

    __slots__ = ("_burst", "_due", "_ended", "_outstanding", "_timer_set", "_waiting")
    _name = "throttle"
    _errors_wait = True  # never drop: an upstream error waits behind every element

    def __init__(
        self, downstream: Subscriber[Any], interval: float, burst: int, scheduler: Scheduler
    ) -> None:
        super().__init__(downstream, interval, scheduler)
        self._burst = burst
        self._due = scheduler.now()  # the bucket starts full, at subscription
        self._waiting: deque[Any] = deque()
        self._outstanding = 0
        self._ended: tuple[Exception | None] | None = None
        self._timer_set = False

    def _buffered_now(self) -> int:
        return len(self._ready) + len(self._waiting)

    def _started(self, subscription: Subscription) -> None:
        self._top_up()

    def _demand_added(self, count: int) -> None:
        self._top_up()

    def _after_delivery(self, count: int) -> None:
        with self._lock:
            self._outstanding -= count
        self._top_up()

    def _top_up(self) -> None:
        """Keep ``min(demand, max(burst, THROTTLE_PREFETCH))`` requested and undelivered."""
        with self._lock:
            if self._upstream is None or self._done or self._cancelled or self._ended:
                return
            ahead = max(self._burst, THROTTLE_PREFETCH)
            extra = min(self._demand, ahead) - self._outstanding
            if extra <= 0:
                return
            self._outstanding += extra
            upstream = self._upstream
        self.request_upstream(upstream, extra)

    def on_next(self, element: Any) -> None:
        _check_element(element)
        with self._lock:
            if self._done or self._cancelled:
                return
            self._waiting.append(element)
            self._high_water = max(self._high_water, len(self._waiting) + len(self._ready))
        self._release()

    def on_error(self, error: Exception) -> None:
        """Upstream failed: signalled after the elements that wait for their tokens."""
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        self._end((error,))

    def on_complete(self) -> None:
        """Upstream completed: ``on_complete`` after the elements that wait for tokens."""
        self._end((None,))

    def _end(self, signal: tuple[Exception | None]) -> None:
        with self._lock:
            if self._done or self._ended is not None:
                return
            self._ended = signal
        self._release()

    def _release(self) -> None:
        """Move the waiting elements that have a token to ``_ready``; set a timer for the next."""
        now = self._scheduler.now()
        wait = None
        with self._lock:
            if self._done or self._cancelled:
                return
            span = (self._burst - 1) * self._period
            while self._waiting:
                opens = self._due - span
                if now + _EARLY < opens:
                    if not self._timer_set:
                        self._timer_set = True
                        wait = opens
                    break
                self._ready.append(self._waiting.popleft())
                self._due = max(self._due, now) + self._period
            if not self._waiting and self._ended is not None:
                self._done = True
                self._error = self._ended[0]
            start = self._guard.acquire_locked()
        if wait is not None:
            self._set_timer(wait)
        if start:
            self._loop.start_owned()

    def _set_timer(self, instant: float) -> None:
        task = self._scheduler.schedule_at(instant, self._tick)
        with self._lock:
            alive = not self._done and not self._cancelled
            if alive:
                self._tasks.append(task)
        if not alive:
            task.cancel()

    def _tick(self) -> None:
        with self._lock:
            self._timer_set = False
            self._tasks = []
        self._release()
