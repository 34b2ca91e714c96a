"""Time operators on a ``Scheduler``: sample, throttle_first, debounce, timeout, delay, window.

Every operator here takes ``scheduler=`` (``reactive_streams.schedulers``; the shared
thread timer by default, ``reactive_streams.testing.VirtualTimeScheduler`` in tests) and
follows Reactor's semantics. They share ``_TimedStage``: a ``BufferedStage`` whose timer
actions and upstream signals only record state under the stage's lock and then run the
stage's one drain loop, which delivers the ``_ready`` queue within demand (Rule 1.1) and
sends the terminal signal once (Rule 1.7). Every timer is cancelled when the stream ends.

The sampling operators (``sample``, ``throttle_first``, ``debounce``) request without
bound upstream, as Reactor's do: an element they must emit when downstream has no demand
left ends the stream with ``MissingBackpressureError`` (upstream cancelled). Put an
``on_backpressure_*`` operator after them to choose otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar

from .._core import (
    MAX_DEMAND,
    BufferedStage,
    MissingBackpressureError,
    PeriodicTask,
    ScheduledTask,
    Scheduler,
    StageOperator,
    accept_subscription,
    add_demand,
    cancel_quietly,
    check_positive,
    default_scheduler,
)
from ..api import Subscriber
from ._pull import PullPublisher

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .._core import Cancellable
    from ..api import Publisher, Subscription

__all__ = [
    "DebounceOperator",
    "DelayOperator",
    "SampleOperator",
    "ThrottleFirstOperator",
    "TimeoutOperator",
    "WindowOperator",
]

T = TypeVar("T")

_Task = ScheduledTask | PeriodicTask

DELAY_PREFETCH: Final[int] = 256
"""The most elements ``delay`` has requested upstream and not yet delivered."""


def _check_period(what: str, period: float) -> float:
    if isinstance(period, bool) or not isinstance(period, int | float):
        raise TypeError(f"{what} must be seconds as a float, got {type(period).__qualname__}")
    if not period > 0:
        raise ValueError(f"{what} must be positive seconds, got {period!r}")
    return float(period)


class _TimedOperator(StageOperator[Any]):
    """A single-upstream time operator: a period, a scheduler, a stage class."""

    __slots__ = ("_period", "_scheduler")

    def __init__(
        self, upstream: Publisher[Any], period: float, scheduler: Scheduler | None
    ) -> None:
        super().__init__(upstream)
        self._period = _check_period(f"{self.name} period", period)
        self._scheduler = default_scheduler() if scheduler is None else scheduler


class _TimedStage(BufferedStage):
    """Shared state of a time stage: the ready queue, its timers, its drop counter.

    ``_ready`` holds elements due downstream, in order; the drain delivers them within
    demand. An upstream error is signalled ahead of ``_ready`` (Reactor drops what a
    sampling operator holds on error); completion waits until ``_ready`` is delivered.
    """

    __slots__ = ("__weakref__", "_dropped", "_period", "_scheduler", "_tasks")

    _name: ClassVar[str] = "time operator"
    _errors_wait = False  # only ``delay`` keeps the elements before an upstream error

    def __init__(self, downstream: Subscriber[Any], period: float, scheduler: Scheduler) -> None:
        super().__init__(downstream)
        self._period = period
        self._scheduler = scheduler
        self._tasks: list[_Task] = []
        self._dropped = 0

    def _dropped_now(self) -> int:
        return self._dropped

    def on_subscribe(self, subscription: Subscription) -> None:
        """Accept the upstream (Rules 2.5, 2.13), then start the stage's timers/demand."""
        if self._accept_upstream(subscription):
            self._started(subscription)

    def _started(self, subscription: Subscription) -> None:
        """Hook after ``on_subscribe`` went downstream; by default unbounded demand."""
        self.request_upstream(subscription, MAX_DEMAND)

    def _start_ticks(self) -> None:
        """Call ``self._tick`` every ``period`` seconds until the stage ends.

        The periodic task is kept with the stage's timers, so ending the stage cancels it;
        a stage that ended while the task was being scheduled cancels it here.
        """
        task = self._scheduler.schedule_periodic(self._period, self._tick)
        with self._lock:
            alive = not self._done and not self._cancelled
            if alive:
                self._tasks.append(task)
        if not alive:
            task.cancel()

    def _tick(self) -> None:
        """One period has passed (stages that call ``_start_ticks`` override it)."""
        raise NotImplementedError

    def _emit_locked(self, element: Any) -> bool:
        """Queue ``element`` for downstream if it has demand; else fail (lock held).

        Returns whether the caller must run the drain loop (it acquired it).
        """
        if self._demand - len(self._ready) <= 0:
            self._fail_urgently_locked(
                MissingBackpressureError(
                    f"{self._label()}: an element was due but downstream had no demand; "
                    "add an on_backpressure_* operator after it"
                )
            )
        else:
            self._push_locked(element)
        return self._guard.acquire_locked()

    def _label(self) -> str:
        return self._name

    def _stop_timers_locked(self) -> list[_Task]:
        tasks, self._tasks = self._tasks, []
        return tasks

    def _stop_locked(self) -> Sequence[Cancellable]:
        super()._stop_locked()
        return self._stop_timers_locked()


def _check_element(element: object) -> None:
    if element is None:
        raise TypeError("Rule 2.13: on_next(None)")


# --------------------------------------------------------------------------- sample
class SampleOperator(_TimedOperator):
    """Every ``period`` seconds, emit the latest element if one arrived since the last tick.

    Marble (``period=2``; ticks at 2, 4, 6)::

        source:  -a-b---c-----d|     (one dash per second)
        ticks:   --T---T---T---T
        result:  --b-----c-----d|

    On completion the element still waiting for a tick is emitted, then ``on_complete``;
    on error it is dropped. Elements replaced before a tick are counted in
    ``statistics().dropped``.

    Backpressure:
        Unbounded upstream demand; a tick with an element and no downstream demand ends the
        stream with ``MissingBackpressureError``.

    Concurrency:
        Ticks run on the scheduler; delivery is serial through the stage's drain loop.
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        return "sample"

    def _new_stage(self, subscriber: Subscriber[Any]) -> Subscriber[Any]:
        return _Sample(subscriber, self._period, self._scheduler)


class _Sample(_TimedStage):
    __slots__ = ("_latest",)
    _name = "sample"

    def __init__(self, downstream: Subscriber[Any], period: float, scheduler: Scheduler) -> None:
        super().__init__(downstream, period, scheduler)
        self._latest: Any = None

    def _buffered_now(self) -> int:
        return len(self._ready) + (self._latest is not None)

    def _started(self, subscription: Subscription) -> None:
        self._start_ticks()
        super()._started(subscription)

    def on_next(self, element: Any) -> None:
        _check_element(element)
        with self._lock:
            if self._done or self._cancelled:
                return
            if self._latest is not None:
                self._dropped += 1
            self._latest = element

    def _tick(self) -> None:
        with self._lock:
            latest, self._latest = self._latest, None
            if latest is None or self._done or self._cancelled:
                return
            start = self._emit_locked(latest)
        if start:
            self._loop.start_owned()

    def _upstream_completed(self) -> None:
        latest, self._latest = self._latest, None
        if latest is not None:
            self._ready.append(latest)


# --------------------------------------------------------------------------- throttle_first
class ThrottleFirstOperator(_TimedOperator):
    """Emit an element, then drop every element for ``period`` seconds (Reactor ``sampleFirst``).

    An element arriving ``period`` or more seconds after the last emitted one is emitted;
    the others are counted in ``statistics().dropped``.

    Marble (``period=3``)::

        source:  -a-b-c---d-e|
        result:  -a-------d--|

    Backpressure:
        Unbounded upstream demand; an element to emit without downstream demand ends the
        stream with ``MissingBackpressureError``.

    Concurrency:
        No timer: the scheduler's clock is read on the upstream's thread.
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        return "throttle_first"

    def _new_stage(self, subscriber: Subscriber[Any]) -> Subscriber[Any]:
        return _ThrottleFirst(subscriber, self._period, self._scheduler)


class _ThrottleFirst(_TimedStage):
    __slots__ = ("_open_at",)
    _name = "throttle_first"

    def __init__(self, downstream: Subscriber[Any], period: float, scheduler: Scheduler) -> None:
        super().__init__(downstream, period, scheduler)
        self._open_at: float | None = None

    def on_next(self, element: Any) -> None:
        _check_element(element)
        now = self._scheduler.now()
        with self._lock:
            if self._done or self._cancelled:
                return
            if self._open_at is not None and now < self._open_at:
                self._dropped += 1
                return
            self._open_at = now + self._period
            start = self._emit_locked(element)
        if start:
            self._loop.start_owned()


# --------------------------------------------------------------------------- debounce
class DebounceOperator(_TimedOperator):
    """Emit an element once ``period`` seconds pass without a newer one (Reactor semantics).

    Each element replaces the waiting one (counted in ``statistics().dropped``) and
    restarts the wait. On completion the waiting element is emitted at once, then
    ``on_complete``; on error it is dropped.

    Marble (``period=2``)::

        source:  -a-b------c-d-|
        result:  -----b--------d|

    Backpressure:
        Unbounded upstream demand; an element due without downstream demand ends the
        stream with ``MissingBackpressureError``.

    Concurrency:
        The wait runs on the scheduler; delivery is serial through the drain loop.
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        return "debounce"

    def _new_stage(self, subscriber: Subscriber[Any]) -> Subscriber[Any]:
        return _Debounce(subscriber, self._period, self._scheduler)


class _Debounce(_TimedStage):
    __slots__ = ("_generation", "_pending")
    _name = "debounce"

    def __init__(self, downstream: Subscriber[Any], period: float, scheduler: Scheduler) -> None:
        super().__init__(downstream, period, scheduler)
        self._pending: Any = None
        self._generation = 0

    def _buffered_now(self) -> int:
        return len(self._ready) + (self._pending is not None)

    def on_next(self, element: Any) -> None:
        _check_element(element)
        with self._lock:
            if self._done or self._cancelled:
                return
            if self._pending is not None:
                self._dropped += 1
            self._pending = element
            self._generation += 1
            generation = self._generation
            previous = self._stop_timers_locked()
        for task in previous:
            task.cancel()
        task = self._scheduler.schedule(self._period, lambda: self._fire(generation))
        with self._lock:
            if generation == self._generation and not self._done and not self._cancelled:
                self._tasks.append(task)
                return
        task.cancel()

    def _fire(self, generation: int) -> None:
        with self._lock:
            if generation != self._generation or self._pending is None:
                return
            if self._done or self._cancelled:
                return
            pending, self._pending = self._pending, None
            self._tasks = []
            start = self._emit_locked(pending)
        if start:
            self._loop.start_owned()

    def _upstream_completed(self) -> None:
        pending, self._pending = self._pending, None
        self._generation += 1
        if pending is not None:
            self._ready.append(pending)


# --------------------------------------------------------------------------- timeout
class TimeoutOperator(_TimedOperator):
    """Fail with ``TimeoutError``, or switch to ``fallback``, after ``period`` seconds of silence.

    The first wait starts at subscription, each element restarts it (Reactor's
    ``timeout(Duration)`` and ``timeout(Duration, Publisher)``). The clock does not stop
    while downstream has no demand: a consumer that requests nothing for ``period``
    seconds times the stream out too. On a timeout upstream is cancelled; without a
    ``fallback`` the stream fails, with one it goes on with ``fallback``'s elements (which
    are not timed), after the upstream elements that already arrived.

    Marble (``period=3``)::

        source:    -a-b-------c|
        result:    -a-b---X(TimeoutError)
        fallback:         -x-y|
        result:    -a-b----x-y|        (with the fallback)

    Backpressure:
        Demand passes through unchanged. On a switch, ``fallback`` is requested the
        outstanding demand (requested downstream, not delivered nor waiting), and later
        requests go to it.

    Concurrency:
        The timer runs on the scheduler; the timeout cancels upstream and is signalled
        (or the fallback subscribed) from the timer's thread, through the drain loop, so it
        never overlaps another signal (Rule 1.3). Upstream signals that were on their way
        when it was cancelled are ignored.
    """

    __slots__ = ("_fallback",)

    def __init__(
        self,
        upstream: Publisher[Any],
        period: float,
        scheduler: Scheduler | None,
        fallback: Publisher[Any] | None = None,
    ) -> None:
        super().__init__(upstream, period, scheduler)
        self._fallback = fallback

    @property
    def name(self) -> str:
        return "timeout"

    def _new_stage(self, subscriber: Subscriber[Any]) -> Subscriber[Any]:
        return _Timeout(subscriber, self._period, self._scheduler, self._fallback)


class _Timeout(_TimedStage):
    """``_fallback`` is the publisher to switch to; ``_switched`` says the switch happened.

    After the switch ``_upstream`` is the fallback's subscription (``None`` until it
    arrives) and ``_owed`` what was requested of it and not received; ``_top_up`` keeps
    it at the downstream demand not covered by ``_ready``.
    """

    __slots__ = ("_fallback", "_generation", "_owed", "_switched")
    _name = "timeout"

    def __init__(
        self,
        downstream: Subscriber[Any],
        period: float,
        scheduler: Scheduler,
        fallback: Publisher[Any] | None = None,
    ) -> None:
        super().__init__(downstream, period, scheduler)
        self._generation = 0
        self._fallback = fallback
        self._switched = False
        self._owed = 0

    def _started(self, subscription: Subscription) -> None:
        self._arm(0)

    def _demand_added(self, count: int) -> None:
        if self._switched:
            self._top_up()
            return
        upstream = self._upstream
        if upstream is not None:
            self.request_upstream(upstream, count)

    def _arm(self, generation: int) -> None:
        task = self._scheduler.schedule(self._period, lambda: self._fire(generation))
        with self._lock:
            if generation == self._generation and not self._done and not self._cancelled:
                self._tasks.append(task)
                return
        task.cancel()

    def on_next(self, element: Any) -> None:
        _check_element(element)
        with self._lock:
            if self._done or self._cancelled or self._switched:
                return
            self._generation += 1
            generation = self._generation
            previous = self._stop_timers_locked()
            self._push_locked(element)
            start = self._guard.acquire_locked()
        for task in previous:
            task.cancel()
        self._arm(generation)
        if start:
            self._loop.start_owned()

    def on_error(self, error: Exception) -> None:
        """Upstream failed: signalled after the elements before it (ignored once switched)."""
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        self._upstream_ended(error)

    def on_complete(self) -> None:
        """Upstream completed (ignored once switched to the fallback)."""
        self._upstream_ended(None)

    def _upstream_ended(self, error: Exception | None, *, fallback: bool = False) -> None:
        """A terminal signal of the source in use (upstream before a switch, then fallback)."""
        with self._lock:
            if self._done or self._switched != fallback:
                return
            self._done = True
            self._error = error
        self._schedule()

    def _fire(self, generation: int) -> None:
        with self._lock:
            if generation != self._generation or self._done or self._cancelled:
                return
            if self._fallback is None:
                self._fail_urgently_locked(
                    TimeoutError(f"timeout: no element within {self._period:g} seconds")
                )
                switch = None
            else:
                self._switched = True
                self._tasks = []
                upstream, self._upstream = self._upstream, None
                switch = self._fallback
        if switch is None:
            self._schedule()
            return
        if upstream is not None:
            cancel_quietly(upstream)
        try:
            switch.subscribe(_FallbackSubscriber(self))
        except Exception as exc:  # the fallback broke Rule 1.9
            self._fail_urgently(exc)
            self._schedule()

    # ------------------------------------------------------------------ the fallback
    def fallback_claimed(self, subscription: Subscription) -> bool:
        """Keep the fallback's subscription unless the stage ended meanwhile (or Rule 2.5)."""
        with self._lock:
            live = self._upstream is None and not self._done and not self._cancelled
            if live:
                self._upstream = subscription
        return live

    def _top_up(self) -> None:
        """Request of the fallback what downstream is owed and nobody will send."""
        with self._lock:
            subscription = self._upstream
            if subscription is None or self._done or self._cancelled:
                return
            if self._demand == MAX_DEMAND:
                extra = 0 if self._owed == MAX_DEMAND else MAX_DEMAND
            else:
                extra = self._demand - len(self._ready) - self._owed
            if extra <= 0:
                return
            self._owed = add_demand(self._owed, extra)
        self.request_upstream(subscription, extra)

    def fallback_next(self, element: Any) -> None:
        _check_element(element)
        with self._lock:
            if self._done or self._cancelled:
                return
            if self._owed != MAX_DEMAND:
                self._owed = max(0, self._owed - 1)
            self._ready.append(element)
            self._high_water = max(self._high_water, len(self._ready))
            start = self._guard.acquire_locked()
        if start:
            self._loop.start_owned()

    def fallback_ended(self, error: Exception | None) -> None:
        self._upstream_ended(error, fallback=True)


class _FallbackSubscriber(Subscriber[Any]):
    """The subscriber to the fallback publisher: everything goes to the timeout stage."""

    __slots__ = ("_stage",)

    def __init__(self, stage: _Timeout) -> None:
        self._stage = stage

    def on_subscribe(self, subscription: Subscription) -> None:
        if accept_subscription(subscription, self._stage.fallback_claimed):
            self._stage._top_up()

    def on_next(self, element: Any) -> None:
        self._stage.fallback_next(element)

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        self._stage.fallback_ended(error)

    def on_complete(self) -> None:
        self._stage.fallback_ended(None)


# --------------------------------------------------------------------------- delay
class DelayOperator(_TimedOperator):
    """Shift every signal ``period`` seconds later (Reactor ``delaySequence``).

    Each element, the completion and the error are signalled ``period`` seconds after
    they arrived, in their order; spacing between elements is kept.

    Marble (``period=2``)::

        source:  -a-b---c|
        result:  ---a-b---c|

    Backpressure:
        Downstream demand is passed up, but at most ``DELAY_PREFETCH`` (256) elements are
        requested and not yet delivered at any time: that bounds the elements in flight.

    Concurrency:
        Signals are moved to the scheduler; delivery is serial through the drain loop.
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        return "delay"

    def _new_stage(self, subscriber: Subscriber[Any]) -> Subscriber[Any]:
        return _Delay(subscriber, self._period, self._scheduler)


class _Delay(_TimedStage):
    __slots__ = ("_flight", "_outstanding", "_sequence", "_upstream_done")
    _name = "delay"
    _errors_wait = True

    def __init__(self, downstream: Subscriber[Any], period: float, scheduler: Scheduler) -> None:
        super().__init__(downstream, period, scheduler)
        self._flight: dict[int, ScheduledTask | None] = {}  # signals on their way
        self._sequence = 0
        self._upstream_done = False
        self._outstanding = 0  # requested upstream, not yet delivered downstream

    def _buffered_now(self) -> int:
        return len(self._ready) + len(self._flight)

    def _started(self, subscription: Subscription) -> None:
        """Demand is forwarded as it comes (``_demand_added``)."""

    def _demand_added(self, count: int) -> None:
        self._top_up()

    def _after_delivery(self, count: int) -> None:
        with self._lock:
            self._outstanding -= count
        self._top_up()

    def _top_up(self) -> None:
        """Keep ``min(demand, DELAY_PREFETCH)`` elements requested upstream, no more."""
        with self._lock:
            extra = min(self._demand, DELAY_PREFETCH) - self._outstanding
            if extra <= 0 or self._done or self._cancelled:
                return
            self._outstanding += extra
            upstream = self._upstream
        if upstream is not None:
            self.request_upstream(upstream, extra)

    def _stop_timers_locked(self) -> list[_Task]:
        tasks: list[_Task] = [task for task in self._flight.values() if task is not None]
        self._flight.clear()
        return tasks

    def _later(self, signal: Any, error: Exception | None) -> None:
        """Move one signal ``period`` seconds later (serial: upstream signals are, Rule 1.3)."""
        with self._lock:
            if self._cancelled:
                return
            key = self._sequence
            self._sequence += 1
            self._flight[key] = None
        task = self._scheduler.schedule(self._period, lambda: self._arrive(key, signal, error))
        with self._lock:
            if key in self._flight:  # not run yet: keep it to cancel
                self._flight[key] = task

    def on_next(self, element: Any) -> None:
        _check_element(element)
        if not self._upstream_done:
            self._later(element, None)

    def on_error(self, error: Exception) -> None:
        """Signal the upstream error ``period`` seconds later, after the elements before it."""
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        if not self._upstream_done:
            self._upstream_done = True
            self._later(None, error)

    def on_complete(self) -> None:
        """Signal completion ``period`` seconds later, after the elements before it."""
        if not self._upstream_done:
            self._upstream_done = True
            self._later(None, None)

    def _arrive(self, key: int, element: Any, error: Exception | None) -> None:
        with self._lock:
            if key not in self._flight:  # cancelled meanwhile
                return
            del self._flight[key]
            if self._done or self._cancelled:
                return
            if element is not None:
                self._ready.append(element)
                self._high_water = max(self._high_water, len(self._ready) + len(self._flight))
            else:
                self._done = True
                self._error = error
            start = self._guard.acquire_locked()
        if start:
            self._loop.start_owned()


# --------------------------------------------------------------------------- window
class WindowOperator(StageOperator[Any]):
    """Split the stream into windows of ``count`` elements and/or ``timespan`` seconds.

    Each window is emitted when it closes, as a cold ``Flow`` of its elements (it can be
    subscribed any number of times). A window closes when it holds ``count`` elements, or
    at each ``timespan`` tick (every ``timespan`` seconds from subscription), or at
    completion; empty windows are not emitted. On error, the open window is dropped.

    Marble (``count=2, timespan=5``; ticks at 5, 10, 15)::

        source:  -a-b-c-------d--|
        result:  ---W----W--------W|
        windows:    [a,b] [c]     [d]

    Backpressure:
        With ``count``, ``request(n)`` becomes ``request(n * count)`` upstream; windows
        closed early by a tick wait for demand in a queue bounded by the upstream demand.
        With ``timespan`` only, upstream demand is unbounded and a window that closes
        without downstream demand ends the stream with ``MissingBackpressureError``.

    Concurrency:
        Ticks run on the scheduler; delivery is serial through the drain loop.

    Args:
        upstream: the source.
        count: the most elements per window, or ``None``.
        timespan: the seconds between ticks, or ``None``.
        scheduler: where the ticks run; ``default_scheduler()`` if ``None``.
        window: makes the element emitted for a window from a cold publisher of its
            elements (``Flow.window`` passes ``Flow``).
    """

    __slots__ = ("_count", "_scheduler", "_timespan", "_window")

    def __init__(
        self,
        upstream: Publisher[Any],
        count: int | None,
        timespan: float | None,
        scheduler: Scheduler | None,
        window: Callable[[Publisher[Any]], Publisher[Any]],
    ) -> None:
        super().__init__(upstream)
        self._window = window
        if count is None and timespan is None:
            raise ValueError("window() needs count=, timespan= or both")
        self._count = None if count is None else check_positive("window count", count)
        self._timespan = None if timespan is None else _check_period("window timespan", timespan)
        self._scheduler = default_scheduler() if scheduler is None else scheduler

    @property
    def name(self) -> str:
        return "window"

    def _new_stage(self, subscriber: Subscriber[Any]) -> Subscriber[Any]:
        return _Window(subscriber, self._count, self._timespan, self._scheduler, self._window)


class _Window(_TimedStage):
    __slots__ = ("_count", "_current", "_window")
    _name = "window"

    def __init__(
        self,
        downstream: Subscriber[Any],
        count: int | None,
        timespan: float | None,
        scheduler: Scheduler,
        window: Callable[[Publisher[Any]], Publisher[Any]],
    ) -> None:
        super().__init__(downstream, 0.0 if timespan is None else timespan, scheduler)
        self._count = count
        self._window = window
        self._current: list[Any] = []

    def _buffered_now(self) -> int:
        return len(self._current) + len(self._ready)

    def _started(self, subscription: Subscription) -> None:
        if self._period > 0:
            self._start_ticks()
        if self._count is None:
            self.request_upstream(subscription, MAX_DEMAND)

    def _demand_added(self, count: int) -> None:
        upstream = self._upstream
        if upstream is not None and self._count is not None:
            self.request_upstream(
                upstream, count * self._count if count < MAX_DEMAND else MAX_DEMAND
            )

    def on_next(self, element: Any) -> None:
        _check_element(element)
        with self._lock:
            if self._done or self._cancelled:
                return
            self._current.append(element)
            if self._count is None or len(self._current) < self._count:
                return
            window, self._current = self._current, []
            self._push_locked(self._window_of(window))
            start = self._guard.acquire_locked()
        if start:
            self._loop.start_owned()

    def _tick(self) -> None:
        with self._lock:
            if not self._current or self._done or self._cancelled:
                return
            window, self._current = self._current, []
            if self._count is None:
                start = self._emit_locked(self._window_of(window))
            else:  # bounded: every window holds at least one requested element
                self._ready.append(self._window_of(window))
                start = self._guard.acquire_locked()
        if start:
            self._loop.start_owned()

    def _upstream_completed(self) -> None:
        if self._current:
            window, self._current = self._current, []
            self._ready.append(self._window_of(window))

    def _window_of(self, elements: list[Any]) -> Publisher[Any]:
        items = tuple(elements)
        return self._window(PullPublisher(lambda: items, (), "window"))
