"""Schedulers and the time operators, on virtual time: exact and without wall time.

Scripts are lists of elements at virtual instants ``n + 0.25`` and periods ``k + 0.5``, so
no element ever arrives at the very instant a timer fires: the reference models below
need no tie-breaking rule.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import (
    MAX_DEMAND,
    MissingBackpressureError,
    NonPositiveDemandError,
    Publisher,
    Subscriber,
)
from reactive_streams.api import Subscription
from reactive_streams.operators import Flow
from reactive_streams.schedulers import AsyncioScheduler, ThreadTimerScheduler
from reactive_streams.tck import PublisherVerification
from reactive_streams.testing import RecordingSubscriber, VirtualTimeScheduler

from .helpers import ManualPublisher, Recorder

# --------------------------------------------------------------------------- helpers


class _Script(Publisher[Any]):
    """A hot source: each element at its virtual instant, then the end (``None``: complete)."""

    def __init__(
        self,
        scheduler: VirtualTimeScheduler,
        events: list[tuple[float, Any]],
        end: float | None,
        error: Exception | None = None,
    ) -> None:
        self._scheduler = scheduler
        self._events = events
        self._end = end
        self._error = error

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        state = {"cancelled": False}

        class _Subscription(Subscription):
            def request(self, n: int) -> None:
                pass

            def cancel(self) -> None:
                state["cancelled"] = True

        subscriber.on_subscribe(_Subscription())
        start = self._scheduler.now()

        def emit(value: Any) -> None:
            if not state["cancelled"]:
                subscriber.on_next(value)

        def end() -> None:
            if state["cancelled"]:
                return
            if self._error is None:
                subscriber.on_complete()
            else:
                subscriber.on_error(self._error)

        for instant, value in self._events:
            self._scheduler.schedule(instant - start, functools.partial(emit, value))
        if self._end is not None:
            self._scheduler.schedule(self._end - start, end)


class _TimedRecorder(Subscriber[Any]):
    """Records ``(instant, element)`` and the terminal signal with its instant."""

    def __init__(self, scheduler: VirtualTimeScheduler, request: int = MAX_DEMAND) -> None:
        self._scheduler = scheduler
        self._request = request
        self.subscription: Subscription | None = None
        self.elements: list[tuple[float, Any]] = []
        self.completed_at: float | None = None
        self.error: Exception | None = None
        self.error_at: float | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        if self._request:
            subscription.request(self._request)

    def on_next(self, element: Any) -> None:
        self.elements.append((self._scheduler.now(), element))

    def on_error(self, error: Exception) -> None:
        self.error, self.error_at = error, self._scheduler.now()

    def on_complete(self) -> None:
        self.completed_at = self._scheduler.now()


def _run(
    build: Any,
    events: list[tuple[float, Any]],
    end: float | None,
    *,
    horizon: float = 1_000.0,
    request: int = MAX_DEMAND,
) -> tuple[_TimedRecorder, VirtualTimeScheduler]:
    scheduler = VirtualTimeScheduler()
    recorder = _TimedRecorder(scheduler, request)
    build(Flow.from_publisher(_Script(scheduler, events, end)), scheduler).subscribe(recorder)
    scheduler.advance(horizon)
    return recorder, scheduler


# --------------------------------------------------------------------------- schedulers


def test_virtual_time_runs_actions_in_due_order_and_only_when_advanced() -> None:
    scheduler = VirtualTimeScheduler()
    seen: list[tuple[str, float]] = []
    scheduler.schedule(2.0, lambda: seen.append(("b", scheduler.now())))
    scheduler.schedule(1.0, lambda: seen.append(("a", scheduler.now())))
    scheduler.schedule(2.0, lambda: seen.append(("c", scheduler.now())))
    cancelled = scheduler.schedule(1.5, lambda: seen.append(("x", scheduler.now())))
    cancelled.cancel()
    assert scheduler.pending == 3
    scheduler.advance(0.5)
    assert seen == []
    scheduler.advance(5)
    assert seen == [("a", 1.0), ("b", 2.0), ("c", 2.0)]
    assert scheduler.now() == 5.5
    assert scheduler.pending == 0


def test_virtual_time_runs_actions_scheduled_inside_the_advanced_span() -> None:
    scheduler = VirtualTimeScheduler()
    seen: list[float] = []
    scheduler.schedule(1, lambda: scheduler.schedule(1, lambda: seen.append(scheduler.now())))
    scheduler.advance(2)
    assert seen == [2.0]
    with pytest.raises(ValueError, match=r"^virtual time cannot go back: advance\(-1\)$"):
        scheduler.advance(-1)


def test_periodic_tasks_do_not_drift_and_stop_on_cancel() -> None:
    scheduler = VirtualTimeScheduler()
    seen: list[float] = []
    task = scheduler.schedule_periodic(1.5, lambda: seen.append(scheduler.now()))
    scheduler.advance(5)
    task.cancel()
    scheduler.advance(5)
    assert seen == [1.5, 3.0, 4.5]
    assert scheduler.pending == 0


def test_periodic_due_times_are_computed_not_accumulated() -> None:
    scheduler = VirtualTimeScheduler()
    seen: list[float] = []
    task = scheduler.schedule_periodic(0.1, lambda: seen.append(scheduler.now()))
    scheduler.advance_to(1.0)
    accumulated = [0.1]
    while len(accumulated) < 10:
        accumulated.append(accumulated[-1] + 0.1)
    assert seen == [n * 0.1 for n in range(1, 11)]  # start + n * period, one rounding
    assert seen[-1] == 1.0
    assert seen != accumulated  # 0.1 added up ten times falls short of 1.0
    task.cancel()
    assert scheduler.pending == 0


def test_periodic_with_an_initial_delay() -> None:
    scheduler = VirtualTimeScheduler()
    seen: list[float] = []
    task = scheduler.schedule_periodic(2.0, lambda: seen.append(scheduler.now()), initial=0.5)
    scheduler.advance(5)
    task.cancel()
    assert seen == [0.5, 2.5, 4.5]


def test_schedule_at_runs_at_the_exact_instant() -> None:
    scheduler = VirtualTimeScheduler()
    seen: list[float] = []
    scheduler.schedule_at(0.3, lambda: seen.append(scheduler.now()))
    scheduler.advance(0.1)
    scheduler.schedule_at(0.05, lambda: seen.append(scheduler.now()))  # past: next advance
    scheduler.advance_to(0.3)
    assert seen == [0.1, 0.3]


def test_thread_timer_scheduler_runs_in_due_order() -> None:
    scheduler = ThreadTimerScheduler()
    seen: list[str] = []
    done = threading.Event()

    def late() -> None:
        seen.append("late")
        done.set()

    # Gaps of a quarter second: a thread paused for a few milliseconds between two calls
    # (a loaded machine) must not reorder what this test schedules.
    scheduler.schedule(0.5, late)
    scheduler.schedule(0.0, lambda: seen.append("early"))
    scheduler.schedule(0.25, lambda: seen.append("never")).cancel()
    assert done.wait(5)
    assert seen == ["early", "late"]


def test_asyncio_scheduler_runs_on_the_loop() -> None:
    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()
        scheduler = AsyncioScheduler(loop)
        return await asyncio.wait_for(
            asyncio.to_thread(
                lambda: Flow.range(0, 3).delay(0.001, scheduler=scheduler).to_list(timeout=5)
            ),
            5,
        )

    assert asyncio.run(main()) == [0, 1, 2]


def test_scheduled_interval_on_virtual_time() -> None:
    scheduler = VirtualTimeScheduler()
    recorder = _TimedRecorder(scheduler)
    Flow.interval(2, count=3, scheduler=scheduler).subscribe(recorder)
    scheduler.advance(100)
    assert recorder.elements == [(2.0, 0), (4.0, 1), (6.0, 2)]
    assert recorder.completed_at == 6.0
    empty = RecordingSubscriber[int](initial_request=1)
    Flow.interval(2, count=0, scheduler=scheduler).subscribe(empty)
    assert empty.completed


def test_scheduled_interval_without_demand_is_missing_backpressure() -> None:
    scheduler = VirtualTimeScheduler()
    recorder = _TimedRecorder(scheduler, request=1)
    Flow.interval(1, scheduler=scheduler).subscribe(recorder)
    scheduler.advance(10)
    assert recorder.elements == [(1.0, 0)]
    assert isinstance(recorder.error, MissingBackpressureError)
    assert recorder.error_at == 2.0
    assert scheduler.pending == 0


# --------------------------------------------------------------------------- operators


def test_sample_marble() -> None:
    events = [(1.25, "a"), (2.25, "b"), (5.25, "c"), (11.25, "d")]
    recorder, _ = _run(lambda f, s: f.sample(2.5, scheduler=s), events, end=12.25)
    assert recorder.elements == [(2.5, "b"), (7.5, "c"), (12.25, "d")]
    assert recorder.completed_at == 12.25


def test_throttle_first_marble() -> None:
    events = [(0.25, "a"), (1.25, "b"), (2.25, "c"), (4.25, "d"), (5.25, "e")]
    recorder, _ = _run(lambda f, s: f.throttle_first(3.5, scheduler=s), events, end=6.25)
    assert recorder.elements == [(0.25, "a"), (4.25, "d")]
    assert recorder.completed_at == 6.25


def test_debounce_emits_the_pending_element_on_completion() -> None:
    events = [(1.25, "a"), (2.25, "b"), (9.25, "c"), (10.25, "d")]
    recorder, _ = _run(lambda f, s: f.debounce(2.5, scheduler=s), events, end=11.25)
    assert recorder.elements == [(4.75, "b"), (11.25, "d")]
    assert recorder.completed_at == 11.25


def test_debounce_drops_the_pending_element_on_error() -> None:
    scheduler = VirtualTimeScheduler()
    recorder = _TimedRecorder(scheduler)
    failure = RuntimeError("boom")
    source = _Script(scheduler, [(1.25, "a")], end=2.25, error=failure)
    Flow.from_publisher(source).debounce(5, scheduler=scheduler).subscribe(recorder)
    scheduler.advance(100)
    assert recorder.elements == []
    assert recorder.error is failure
    assert scheduler.pending == 0


def test_timeout_fails_after_silence_and_cancels_upstream() -> None:
    events = [(0.25, "a"), (1.25, "b"), (9.25, "c")]
    recorder, scheduler = _run(lambda f, s: f.timeout(3.5, scheduler=s), events, end=10.25)
    assert recorder.elements == [(0.25, "a"), (1.25, "b")]
    assert isinstance(recorder.error, TimeoutError)
    assert str(recorder.error) == "timeout: no element within 3.5 seconds"
    assert recorder.error_at == 4.75
    assert scheduler.pending == 0


def test_timeout_switches_to_the_fallback_with_the_outstanding_demand() -> None:
    scheduler = VirtualTimeScheduler()
    source = ManualPublisher[str]()
    fallback = ManualPublisher[str]()
    recorder: Recorder[str] = Recorder(5)
    Flow.from_publisher(source).timeout(3, fallback, scheduler=scheduler).subscribe(recorder)
    source.next("a", "b")
    scheduler.advance(2.5)
    assert fallback.subscriber is None
    scheduler.advance(1)
    assert source.subscription.cancelled == 1
    assert fallback.subscription.requests == [3]  # 5 requested, 2 delivered
    source.next("late")  # on its way when cancelled: ignored
    source.complete()
    fallback.next("x")
    recorder.request(2)
    assert fallback.subscription.requests == [3, 2]
    scheduler.advance(100)  # the fallback is not timed
    fallback.next("y")
    fallback.complete()
    assert recorder.elements == ["a", "b", "x", "y"]
    assert recorder.completed == 1
    assert recorder.errors == []
    assert scheduler.pending == 0


def test_timeout_fallback_error_and_cancel() -> None:
    scheduler = VirtualTimeScheduler()
    recorder: Recorder[int] = Recorder(1)
    failing = Flow.error(KeyError("fallback"))
    Flow.from_publisher(ManualPublisher[int]()).timeout(1, failing, scheduler=scheduler).subscribe(
        recorder
    )
    scheduler.advance(1)
    assert isinstance(recorder.errors[0], KeyError)
    fallback = ManualPublisher[int]()
    recorder = Recorder(1)
    Flow.from_publisher(ManualPublisher[int]()).timeout(1, fallback, scheduler=scheduler).subscribe(
        recorder
    )
    scheduler.advance(1)
    recorder.cancel()
    assert fallback.subscription.cancelled == 1


def test_delay_shifts_every_signal() -> None:
    events = [(0.25, "a"), (1.25, "b"), (4.25, "c")]
    recorder, _ = _run(lambda f, s: f.delay(2.5, scheduler=s), events, end=5.25)
    assert recorder.elements == [(2.75, "a"), (3.75, "b"), (6.75, "c")]
    assert recorder.completed_at == 7.75


def test_delay_error_comes_after_the_elements_before_it() -> None:
    scheduler = VirtualTimeScheduler()
    recorder = _TimedRecorder(scheduler)
    failure = RuntimeError("late")
    source = _Script(scheduler, [(0.25, "a")], end=0.5, error=failure)
    Flow.from_publisher(source).delay(1, scheduler=scheduler).subscribe(recorder)
    scheduler.advance(10)
    assert recorder.elements == [(1.25, "a")]
    assert recorder.error is failure
    assert recorder.error_at == 1.5


def test_delay_keeps_demand_and_cancel_drops_timers() -> None:
    scheduler = VirtualTimeScheduler()
    recorder = RecordingSubscriber[int](initial_request=2)
    Flow.range(0, 10).delay(1, scheduler=scheduler).subscribe(recorder)
    assert scheduler.pending == 2  # only the requested elements are in flight
    scheduler.advance(1)
    assert recorder.elements == [0, 1]
    recorder.request(3)
    recorder.cancel()
    assert scheduler.pending == 0


def test_window_by_count_and_time() -> None:
    events = [(0.25, "a"), (1.25, "b"), (2.25, "c"), (8.25, "d")]
    recorder, _ = _run(lambda f, s: f.window(2, 5.5, scheduler=s), events, end=9.25)
    windows = [(instant, window.to_list()) for instant, window in recorder.elements]
    assert windows == [(1.25, ["a", "b"]), (5.5, ["c"]), (9.25, ["d"])]
    assert recorder.completed_at == 9.25


def test_window_by_count_requests_count_times_demand() -> None:
    scheduler = VirtualTimeScheduler()
    recorder = RecordingSubscriber[Flow[int]](initial_request=2)
    Flow.range(0, 7).window(3, scheduler=scheduler).subscribe(recorder)
    assert [w.to_list() for w in recorder.elements] == [[0, 1, 2], [3, 4, 5]]
    recorder.request(5)
    assert recorder.completed
    assert [w.to_list() for w in recorder.elements][-1] == [6]


@pytest.mark.parametrize(
    "build",
    [
        lambda f, s: f.sample(0.5, scheduler=s),
        lambda f, s: f.throttle_first(0.5, scheduler=s),
        lambda f, s: f.debounce(0.5, scheduler=s),
        lambda f, s: f.window(timespan=1.5, scheduler=s),
    ],
    ids=["sample", "throttle_first", "debounce", "window"],
)
def test_sampling_operators_without_demand_fail_with_missing_backpressure(build: Any) -> None:
    events = [(float(i) + 0.25, i) for i in range(10)]
    recorder, scheduler = _run(build, events, end=20.25, request=1)
    assert len(recorder.elements) == 1
    assert isinstance(recorder.error, MissingBackpressureError)
    assert scheduler.pending == 0  # every timer was cancelled with the stream


def test_statistics_count_drops() -> None:
    scheduler = VirtualTimeScheduler()
    flow = Flow.range(0, 10).throttle_first(5, scheduler=scheduler)
    assert flow.to_list() == [0]
    stats = flow.metrics()["1:throttle_first"]
    assert stats.dropped == 9


@pytest.mark.parametrize("period", [0, -1.0, float("nan")])
def test_periods_must_be_positive(period: float) -> None:
    with pytest.raises(ValueError, match=r"^debounce period must be positive seconds"):
        Flow.range(1).debounce(period)


def test_window_needs_a_bound() -> None:
    with pytest.raises(ValueError, match=r"^window\(\) needs count=, timespan= or both$"):
        Flow.range(1).window()


# --------------------------------------------------------------------------- reference models

_periods = st.integers(0, 4).map(lambda k: k + 0.5)


@st.composite
def _scripts(draw: st.DrawFn) -> tuple[list[tuple[float, int]], float]:
    instants = sorted(draw(st.sets(st.integers(0, 40), max_size=25)))
    events = [(instant + 0.25, index) for index, instant in enumerate(instants)]
    last = instants[-1] if instants else 0
    end = last + draw(st.integers(1, 6)) + 0.25
    return events, end


def _model_sample(events: list[tuple[float, int]], end: float, period: float) -> list[Any]:
    out: list[tuple[float, int]] = []
    tick = period
    latest: int | None = None
    queue = list(events)
    while True:
        boundary = min(tick, end)
        while queue and queue[0][0] <= boundary:
            latest = queue.pop(0)[1]
        if latest is not None:
            out.append((boundary, latest))
            latest = None
        if tick >= end:
            return out
        tick += period


def _model_throttle_first(events: list[tuple[float, int]], period: float) -> list[Any]:
    out: list[tuple[float, int]] = []
    for instant, value in events:
        if not out or instant >= out[-1][0] + period:
            out.append((instant, value))
    return out


def _model_debounce(events: list[tuple[float, int]], end: float, period: float) -> list[Any]:
    out: list[tuple[float, int]] = []
    for index, (instant, value) in enumerate(events):
        following = events[index + 1][0] if index + 1 < len(events) else end
        if instant + period < following:
            out.append((instant + period, value))
        elif index + 1 == len(events):
            out.append((end, value))
    return out


def _model_timeout(
    events: list[tuple[float, int]], end: float, period: float
) -> tuple[list[Any], float | None]:
    previous = 0.0
    for index, (instant, _) in enumerate([*events, (end, -1)]):
        if instant - previous > period:
            return events[:index], previous + period
        previous = instant
    return events, None


@settings(max_examples=150, deadline=None)
@given(_scripts(), _periods)
def test_sample_matches_the_model(script: Any, period: float) -> None:
    events, end = script
    recorder, _ = _run(lambda f, s: f.sample(period, scheduler=s), events, end)
    assert recorder.elements == _model_sample(events, end, period)
    assert recorder.completed_at == end


@settings(max_examples=150, deadline=None)
@given(_scripts(), _periods)
def test_throttle_first_matches_the_model(script: Any, period: float) -> None:
    events, end = script
    recorder, _ = _run(lambda f, s: f.throttle_first(period, scheduler=s), events, end)
    assert recorder.elements == _model_throttle_first(events, period)
    assert recorder.completed_at == end


@settings(max_examples=150, deadline=None)
@given(_scripts(), _periods)
def test_debounce_matches_the_model(script: Any, period: float) -> None:
    events, end = script
    recorder, _ = _run(lambda f, s: f.debounce(period, scheduler=s), events, end)
    assert recorder.elements == _model_debounce(events, end, period)
    assert recorder.completed_at == end


@settings(max_examples=150, deadline=None)
@given(_scripts(), _periods)
def test_delay_matches_the_model(script: Any, period: float) -> None:
    events, end = script
    recorder, _ = _run(lambda f, s: f.delay(period, scheduler=s), events, end)
    assert recorder.elements == [(instant + period, value) for instant, value in events]
    assert recorder.completed_at == end + period


@settings(max_examples=150, deadline=None)
@given(_scripts(), _periods)
def test_timeout_matches_the_model(script: Any, period: float) -> None:
    events, end = script
    recorder, scheduler = _run(lambda f, s: f.timeout(period, scheduler=s), events, end)
    expected, error_at = _model_timeout(events, end, period)
    assert recorder.elements == expected
    if error_at is None:
        assert recorder.completed_at == end
    else:
        assert isinstance(recorder.error, TimeoutError)
        assert recorder.error_at == error_at
    assert scheduler.pending == 0


def _model_timeout_fallback(
    events: list[tuple[float, int]], end: float, period: float, delay: float, size: int
) -> tuple[list[Any], float]:
    """Upstream's elements until the timeout; then the fallback's, ``delay`` after it."""
    expected, switch_at = _model_timeout(events, end, period)
    if switch_at is None:
        return expected, end
    return [*expected, *((switch_at + delay, 100 + i) for i in range(size))], switch_at + delay


@settings(max_examples=150, deadline=None)
@given(_scripts(), _periods, st.integers(0, 3), st.integers(0, 4))
def test_timeout_with_fallback_matches_the_model(
    script: Any, period: float, delay: int, size: int
) -> None:
    events, end = script

    def build(flow: Flow[Any], scheduler: VirtualTimeScheduler) -> Flow[Any]:
        fallback = Flow.range(100, 100 + size)
        if delay:
            fallback = fallback.delay(delay, scheduler=scheduler)
        return flow.timeout(period, fallback, scheduler=scheduler)

    recorder, scheduler = _run(build, events, end)
    expected, completed_at = _model_timeout_fallback(events, end, period, delay, size)
    assert recorder.elements == expected
    assert recorder.error is None
    assert recorder.completed_at == completed_at
    assert scheduler.pending == 0


def _model_throttle(arrivals: list[float], interval: float, burst: int) -> list[float]:
    """Token bucket as a theoretical arrival time: each element's earliest instant."""
    due = 0.0  # subscription at 0: the bucket is full
    out: list[float] = []
    for arrival in arrivals:
        instant = max(arrival, due - (burst - 1) * interval, out[-1] if out else 0.0)
        out.append(instant)
        due = max(due, instant) + interval
    return out


@settings(max_examples=150, deadline=None)
@given(
    _scripts(),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([1.0, 2.0]),
    st.integers(1, 4),
)
def test_throttle_matches_the_token_bucket_model(
    script: Any, elements: int, per: float, burst: int
) -> None:
    """Every element at the earliest instant the bucket allows: none early, none dropped."""
    events, end = script
    arrivals: list[float] = []

    def build(flow: Flow[Any], scheduler: VirtualTimeScheduler) -> Flow[Any]:
        return (
            flow.on_backpressure_buffer(1_000)
            .do_on_next(lambda _: arrivals.append(scheduler.now()))
            .throttle(elements, per, burst=burst, scheduler=scheduler)
        )

    recorder, scheduler = _run(build, events, end)
    assert [value for _, value in recorder.elements] == [value for _, value in events]
    expected = _model_throttle(arrivals, per / elements, burst)
    assert [instant for instant, _ in recorder.elements] == expected
    assert recorder.completed_at == max([end, *expected])
    assert scheduler.pending == 0


def test_throttle_spends_tokens_only_on_demanded_elements() -> None:
    scheduler = VirtualTimeScheduler()
    recorder = _TimedRecorder(scheduler, request=1)
    Flow.range(0, 10).throttle(1, 1.0, scheduler=scheduler).subscribe(recorder)
    scheduler.advance(10)
    assert recorder.elements == [(0.0, 0)]
    assert recorder.subscription is not None
    recorder.subscription.request(3)  # ten quiet seconds, but the bucket holds one token
    scheduler.advance(10)
    assert recorder.elements == [(0.0, 0), (10.0, 1), (11.0, 2), (12.0, 3)]


def test_throttle_requests_a_bounded_amount_ahead() -> None:
    scheduler = VirtualTimeScheduler()
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(1_000)
    Flow.from_publisher(source).throttle(1, 1.0, burst=4, scheduler=scheduler).subscribe(recorder)
    assert source.subscription.requests == [16]
    source.next(*range(16))
    assert recorder.elements == [0, 1, 2, 3]  # the burst
    assert source.subscription.total_requested == 20  # refilled as delivered
    source.error(KeyError("late"))
    scheduler.advance(12)
    assert recorder.elements == list(range(16))
    assert isinstance(recorder.errors[0], KeyError)  # after every element before it


def test_throttle_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="throttle elements"):
        Flow.range(0, 1).throttle(0, 1.0)
    with pytest.raises(ValueError, match="throttle per"):
        Flow.range(0, 1).throttle(1, 0)
    with pytest.raises(ValueError, match="throttle burst"):
        Flow.range(0, 1).throttle(1, 1.0, burst=0)


# --------------------------------------------------------------------------- the TCK


def _numbers(elements: int) -> Flow[int]:
    if elements == MAX_DEMAND:
        return Flow.from_iterable(itertools.count())
    return Flow.range(0, elements)


class _TimedVerification(PublisherVerification):
    """The time operators run on a real timer here: the TCK waits in wall time."""

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return Flow.error(RuntimeError("TCK: failed publisher")).delay(0.001)

    def executor(self) -> ThreadPoolExecutor:
        pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tck-time")
        self.add_cleanup(lambda: pool.shutdown(wait=False, cancel_futures=True))
        return pool


class TestDelay(_TimedVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return _numbers(elements).delay(0.001)


class TestTimeout(_TimedVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return _numbers(elements).timeout(60)


class TestWindowByCount(_TimedVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        if elements == MAX_DEMAND:
            return _numbers(elements).window(2, 60)
        return Flow.range(0, elements * 2).window(2, 60)


def test_interval_signals_a_rule_3_9_error_and_stops_its_timer() -> None:
    scheduler = VirtualTimeScheduler()
    recorder = RecordingSubscriber[int](initial_request=2)
    Flow.interval(1, scheduler=scheduler).subscribe(recorder)
    scheduler.advance(1)
    assert recorder.subscription is not None
    recorder.subscription.request(0)
    assert recorder.elements == [0]
    assert isinstance(recorder.error, NonPositiveDemandError)
    assert scheduler.pending == 0
    scheduler.advance(10)
    assert recorder.elements == [0]


def test_interval_cancel_stops_its_timer_and_ticks_wait_for_no_one() -> None:
    scheduler = VirtualTimeScheduler()
    recorder = RecordingSubscriber[int](initial_request=10)
    Flow.interval(1, scheduler=scheduler).subscribe(recorder)
    scheduler.advance(3)
    assert recorder.subscription is not None
    recorder.subscription.cancel()
    assert scheduler.pending == 0
    scheduler.advance(10)
    assert recorder.elements == [0, 1, 2]
    assert recorder.error is None and not recorder.completed


def test_interval_ticks_within_total_demand_then_missing_backpressure() -> None:
    scheduler = VirtualTimeScheduler()
    recorder = RecordingSubscriber[int](initial_request=1)
    Flow.interval(1, scheduler=scheduler).subscribe(recorder)
    scheduler.advance(1)
    assert recorder.subscription is not None
    recorder.subscription.request(2)  # three ticks asked for in total
    scheduler.advance(2)
    assert (recorder.elements, recorder.error) == ([0, 1, 2], None)
    scheduler.advance(1)
    assert isinstance(recorder.error, MissingBackpressureError)
    assert str(recorder.error).startswith("interval: tick 3 found no demand")
    assert scheduler.pending == 0
