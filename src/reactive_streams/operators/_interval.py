"""``Flow.interval``: a hot timer emitting 0, 1, 2, ... every ``period`` seconds."""

from __future__ import annotations

import threading
import time

from .._core import (
    MAX_DEMAND,
    MissingBackpressureError,
    Operator,
    ProtocolViolationError,
    StageStatistics,
    add_demand,
    check_subscriber,
    signal_on_complete,
    signal_on_error,
    signal_on_next,
    signal_on_subscribe,
    validate_request,
)
from ..api import Subscriber, Subscription

__all__ = ["IntervalPublisher"]


class IntervalPublisher(Operator[int]):
    """Emit ``0, 1, 2, ...`` every ``period`` seconds on a dedicated timer thread.

    The timer is hot: it cannot wait for demand. A tick that finds no demand ends the
    stream with ``MissingBackpressureError``; put ``on_backpressure_drop()``,
    ``on_backpressure_latest()`` or ``on_backpressure_buffer(...)`` after it to choose
    what happens instead.

    Marble (``period=1``)::

        interval(1):  -0-1-2-3-...
        request:      (2)
        result:       -0-1-X(MissingBackpressureError)

    Backpressure:
        None by nature; see above.

    Concurrency:
        One daemon thread per subscriber emits every signal, so they are serial; it
        stops at cancellation (its wait is woken at once) or at the terminal signal.
    """

    __slots__ = ("_count", "_period")

    def __init__(self, period: float, count: int | None = None) -> None:
        super().__init__()
        if period <= 0:
            raise ValueError(f"interval period must be positive seconds, got {period!r}")
        if count is not None:
            if isinstance(count, bool) or not isinstance(count, int):
                raise TypeError(f"interval count must be an int, got {type(count).__qualname__}")
            if count < 0:
                raise ValueError(f"interval count must be >= 0, got {count}")
        self._period = period
        self._count = count

    @property
    def name(self) -> str:
        return "interval"

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        """Start a timer thread for ``subscriber`` (Rule 1.9)."""
        check_subscriber(subscriber)
        subscription = _Ticker(subscriber, self._period, self._count)
        self._track(subscription)
        if signal_on_subscribe(subscriber, subscription):
            subscription.start()
        else:
            subscription.cancel()


class _Ticker(Subscription):
    __slots__ = (
        "__weakref__",
        "_cancelled",
        "_count",
        "_delivered",
        "_demand",
        "_error",
        "_lock",
        "_period",
        "_requested",
        "_subscriber",
        "_terminated",
        "_wake",
    )

    def __init__(self, subscriber: Subscriber[int], period: float, count: int | None) -> None:
        self._subscriber: Subscriber[int] | None = subscriber
        self._period = period
        self._count = count
        self._lock = threading.Lock()
        self._demand = 0
        self._requested = 0
        self._delivered = 0
        self._cancelled = False
        self._terminated = False
        self._error: ProtocolViolationError | None = None
        self._wake = threading.Event()

    def statistics(self) -> StageStatistics:
        with self._lock:
            return StageStatistics(
                requested=self._requested,
                delivered=self._delivered,
                buffered=0,
                cancelled=self._cancelled,
                terminated=self._terminated,
            )

    def start(self) -> None:
        threading.Thread(target=self._run, name="reactive-streams-interval", daemon=True).start()

    def request(self, n: int) -> None:
        """Add demand; the timer thread signals a Rule 3.9 error. Never emits here."""
        try:
            count = validate_request(n)
        except ProtocolViolationError as error:
            with self._lock:
                if self._error is None:
                    self._error = error
            self._wake.set()
            return
        with self._lock:
            self._demand = add_demand(self._demand, count)
            self._requested = add_demand(self._requested, count)

    def cancel(self) -> None:
        """Stop the timer thread at once (Rules 3.7, 3.12)."""
        with self._lock:
            self._cancelled = True
        self._wake.set()

    def _run(self) -> None:
        if self._count == 0:  # "count ticks at most": none at all, complete at once
            with self._lock:
                cancelled = self._cancelled
                self._terminated = not cancelled
                self._cancelled = True
            subscriber, self._subscriber = self._subscriber, None
            if subscriber is not None and not cancelled:
                signal_on_complete(subscriber)
            return
        deadline = time.monotonic() + self._period
        tick = 0
        while True:
            self._wake.wait(max(0.0, deadline - time.monotonic()))
            subscriber = self._subscriber
            assert subscriber is not None
            with self._lock:
                error, cancelled = self._error, self._cancelled
                if cancelled or error is not None:
                    self._cancelled = True
                    self._terminated = error is not None and not cancelled
            if cancelled or error is not None:
                self._subscriber = None  # Rule 3.13
                if error is not None and not cancelled:
                    signal_on_error(subscriber, error)  # Rule 3.9
                return
            if time.monotonic() < deadline:
                continue  # spurious: only a Rule 3.9 error or a cancel sets the event
            deadline += self._period
            with self._lock:
                starved = self._demand <= 0
                if starved:
                    self._terminated = self._cancelled = True
                else:
                    if self._demand != MAX_DEMAND:
                        self._demand -= 1
                    self._delivered += 1
            if starved:
                self._subscriber = None
                signal_on_error(
                    subscriber,
                    MissingBackpressureError(
                        f"interval: tick {tick} found no demand; add an on_backpressure_* "
                        "operator after a hot source"
                    ),
                )
                return
            if not signal_on_next(subscriber, tick):
                self.cancel()
                continue
            tick += 1
            if self._count is not None and tick >= self._count:
                with self._lock:
                    self._terminated = self._cancelled = True
                self._subscriber = None
                signal_on_complete(subscriber)
                return
