"""``Backoff`` and ``Flow.retry_backoff``, on virtual time."""

from __future__ import annotations

import doctest
import itertools
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import Backoff, Publisher
from reactive_streams.operators import Flow
from reactive_streams.tck import PublisherVerification
from reactive_streams.testing import RecordingSubscriber, VirtualTimeScheduler


class FailingSource:
    """Each subscription emits ``emit`` elements, then fails with ``failure <n>``."""

    def __init__(self, scheduler: VirtualTimeScheduler, emit: int = 0) -> None:
        self.scheduler = scheduler
        self.emit = emit
        self.subscribed_at: list[float] = []

    def flow(self) -> Flow[Any]:
        def subscription() -> Publisher[Any]:
            self.subscribed_at.append(self.scheduler.now())
            number = len(self.subscribed_at)
            failure = Flow.error(RuntimeError(f"failure {number}"))
            return Flow.range(0, self.emit).map(lambda x: (number, x)).concat_with(failure)

        return Flow.defer(subscription)

    def gaps(self) -> list[float]:
        times = self.subscribed_at
        return [later - earlier for earlier, later in itertools.pairwise(times)]


def _run(flow: Flow[Any], scheduler: VirtualTimeScheduler) -> RecordingSubscriber[Any]:
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(initial_request=1_000)
    flow.subscribe(subscriber)
    for _ in range(200):
        if subscriber.terminated:
            break
        scheduler.advance(0.5)
    return subscriber


# -- Backoff -------------------------------------------------------------------------------


def test_delays_grow_by_the_factor_up_to_the_maximum() -> None:
    policy = Backoff(min_backoff=0.5, max_backoff=3.0, jitter=0.0, factor=2)
    assert [policy.delay(k) for k in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.delay(10_000) == 3.0  # no overflow for a long series


@settings(max_examples=200, deadline=None)
@given(
    range_=st.tuples(st.floats(0.001, 10), st.floats(1, 100)),
    jitter=st.floats(0, 1),
    factor=st.floats(1, 4),
    attempt=st.integers(0, 80),
    draw=st.floats(0, 1, exclude_max=True),
)
def test_a_jittered_delay_stays_within_its_bounds(
    range_: tuple[float, float], jitter: float, factor: float, attempt: int, draw: float
) -> None:
    min_backoff, spread = range_
    policy = Backoff(min_backoff, min_backoff * spread, jitter=jitter, factor=factor)
    low, high = policy.bounds(attempt)
    delay = policy.delay(attempt, lambda: draw)
    assert policy.min_backoff <= low <= delay <= high <= policy.max_backoff
    assert low <= policy.base(attempt) <= high
    assert policy.base(attempt) <= policy.base(attempt + 1)


def test_allows_counts_attempts_and_the_deadline() -> None:
    policy = Backoff(1, 8, jitter=0, max_attempts=3, deadline=10)
    assert policy.allows(0, 0, 1)
    assert not policy.allows(3, 0, 1)
    assert policy.allows(1, 9, 1)
    assert not policy.allows(1, 9.5, 1)
    assert policy.describe() == "3 attempts and a 10s deadline"
    assert Backoff().describe() == "no bound"


@pytest.mark.parametrize(
    ("fields", "kind", "message"),
    [
        ({"min_backoff": 0}, ValueError, r"^min_backoff must be a finite number of seconds > 0"),
        ({"min_backoff": "1"}, TypeError, r"^min_backoff must be a number of seconds, got str$"),
        ({"min_backoff": 2, "max_backoff": 1}, ValueError, r"^max_backoff must be >= min"),
        ({"max_backoff": math.inf}, ValueError, r"^max_backoff must be a finite number"),
        ({"jitter": 1.5}, ValueError, r"^jitter must be within \[0, 1\], got 1\.5$"),
        ({"max_attempts": -1}, ValueError, r"^max_attempts must be >= 0, got -1$"),
        ({"max_attempts": 1.0}, TypeError, r"^max_attempts must be an int or None"),
        ({"deadline": 0}, ValueError, r"^deadline must be a finite number of seconds > 0"),
        ({"factor": 0.5}, ValueError, r"^factor must be a finite number >= 1, got 0\.5$"),
    ],
)
def test_a_backoff_is_validated(
    fields: dict[str, Any], kind: type[Exception], message: str
) -> None:
    with pytest.raises(kind, match=message):
        Backoff(**fields)


def test_the_backoff_docstring_examples_run() -> None:
    runner = doctest.DocTestRunner()
    finder = doctest.DocTestFinder()
    for test in finder.find(Backoff, "Backoff", module=False, globs={"Backoff": Backoff}):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.attempted >= 2
    assert results.failed == 0


def test_a_backoff_is_frozen() -> None:
    policy = Backoff()
    with pytest.raises(AttributeError):
        policy.jitter = 0.1  # type: ignore[misc]


# -- retry_backoff ---------------------------------------------------------------------------


def test_retries_wait_growing_delays_and_the_last_failure_is_signalled() -> None:
    scheduler = VirtualTimeScheduler()
    source = FailingSource(scheduler)
    policy = Backoff(1, 4, jitter=0, max_attempts=4)
    subscriber = _run(source.flow().retry_backoff(policy, scheduler=scheduler), scheduler)
    assert source.subscribed_at == [0, 1, 3, 7, 11]  # delays 1, 2, 4, 4
    assert isinstance(subscriber.error, RuntimeError)
    assert str(subscriber.error) == "failure 5"
    assert subscriber.violations == []


def test_no_subscription_before_the_delay_has_passed() -> None:
    scheduler = VirtualTimeScheduler()
    source = FailingSource(scheduler)
    flow = source.flow().retry_backoff(Backoff(2, 4, jitter=0), scheduler=scheduler)
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(initial_request=1)
    flow.subscribe(subscriber)
    scheduler.advance_to(1.999)
    assert len(source.subscribed_at) == 1
    scheduler.advance_to(2.0)
    assert len(source.subscribed_at) == 2
    subscriber.cancel()


def test_the_deadline_bounds_the_retries() -> None:
    scheduler = VirtualTimeScheduler()
    source = FailingSource(scheduler)
    policy = Backoff(1, 4, jitter=0, deadline=5)
    subscriber = _run(source.flow().retry_backoff(policy, scheduler=scheduler), scheduler)
    # retries at 1 (ends 1 s into the series) and 3 (3 s); the next would start at 7 > 5
    assert source.subscribed_at == [0, 1, 3]
    assert str(subscriber.error) == "failure 3"


def test_jittered_delays_stay_within_their_bounds_and_attempts_are_bounded() -> None:
    scheduler = VirtualTimeScheduler()
    source = FailingSource(scheduler)
    policy = Backoff(1, 16, jitter=0.5, max_attempts=6)
    subscriber = _run(source.flow().retry_backoff(policy, scheduler=scheduler), scheduler)
    gaps = source.gaps()
    assert len(gaps) == 6
    for attempt, gap in enumerate(gaps):
        low, high = policy.bounds(attempt)
        assert low - 1e-9 <= gap <= high + 1e-9
    assert str(subscriber.error) == "failure 7"


def test_an_element_resets_the_series_by_default() -> None:
    scheduler = VirtualTimeScheduler()
    source = FailingSource(scheduler, emit=1)
    policy = Backoff(1, 8, jitter=0, max_attempts=2)
    flow = source.flow().retry_backoff(policy, scheduler=scheduler)
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(initial_request=1_000)
    flow.subscribe(subscriber)
    scheduler.advance(10)
    assert source.gaps() == [1.0] * 10  # always the first delay: every run had an element
    assert not subscriber.terminated
    subscriber.cancel()


def test_without_reset_attempts_add_up_across_successes() -> None:
    scheduler = VirtualTimeScheduler()
    source = FailingSource(scheduler, emit=1)
    policy = Backoff(1, 8, jitter=0, max_attempts=2, reset_on_success=False)
    subscriber = _run(source.flow().retry_backoff(policy, scheduler=scheduler), scheduler)
    assert source.gaps() == [1.0, 2.0]
    assert subscriber.elements == [(1, 0), (2, 0), (3, 0)]
    assert str(subscriber.error) == "failure 3"


def test_demand_is_carried_over_and_nothing_is_requested_while_waiting() -> None:
    scheduler = VirtualTimeScheduler()
    source = FailingSource(scheduler, emit=2)
    policy = Backoff(1, 1, jitter=0, max_attempts=1, reset_on_success=False)
    flow = source.flow().retry_backoff(policy, scheduler=scheduler)
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(initial_request=3)
    flow.subscribe(subscriber)
    assert subscriber.elements == [(1, 0), (1, 1)]
    subscriber.request(1)  # during the wait: goes to the next subscription
    scheduler.advance(1)
    assert subscriber.elements == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert str(subscriber.error) == "failure 2"


def test_a_cancel_during_the_wait_stops_the_retry() -> None:
    scheduler = VirtualTimeScheduler()
    source = FailingSource(scheduler)
    flow = source.flow().retry_backoff(Backoff(1, 1, jitter=0), scheduler=scheduler)
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(initial_request=1)
    flow.subscribe(subscriber)
    subscriber.cancel()
    scheduler.advance(10)
    assert source.subscribed_at == [0]
    assert not subscriber.terminated


@pytest.mark.parametrize(
    "retry_on",
    [ConnectionError, (KeyError, ConnectionError), lambda error: "transient" in str(error)],
)
def test_only_the_errors_retry_on_matches_are_retried(retry_on: Any) -> None:
    scheduler = VirtualTimeScheduler()
    failures = iter(
        [ConnectionResetError("transient"), ConnectionAbortedError("transient"), ValueError("no")]
    )
    subscribed: list[float] = []

    def failing() -> Publisher[int]:
        subscribed.append(scheduler.now())
        return Flow.error(next(failures))

    policy = Backoff(1, 1, jitter=0, max_attempts=10)
    flow = Flow.defer(failing).retry_backoff(policy, retry_on=retry_on, scheduler=scheduler)
    subscriber = _run(flow, scheduler)
    assert subscribed == [0, 1, 2]  # the ValueError is not retried: it ends the flow
    assert isinstance(subscriber.error, ValueError)


def test_a_raising_retry_on_ends_the_flow_with_its_error() -> None:
    scheduler = VirtualTimeScheduler()

    def broken(error: Exception) -> bool:
        raise LookupError("the predicate broke")

    flow = Flow.error(ValueError("cause")).retry_backoff(
        Backoff(1, 1), retry_on=broken, scheduler=scheduler
    )
    subscriber = _run(flow, scheduler)
    assert isinstance(subscriber.error, LookupError)
    assert isinstance(subscriber.error.__context__, ValueError)


def test_retry_on_must_name_exceptions_or_be_a_function() -> None:
    with pytest.raises(TypeError, match=r"^retry_on must be an exception class"):
        Flow.range(0, 1).retry_backoff(Backoff(), retry_on=(ValueError, int))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^retry_on must be an exception class"):
        Flow.restart(Flow.empty, Backoff(), retry_on=str)


def test_retry_backoff_refuses_a_non_backoff() -> None:
    with pytest.raises(TypeError, match=r"^backoff must be a Backoff, got int$"):
        Flow.range(0, 1).retry_backoff(3)  # type: ignore[arg-type]


@settings(max_examples=80, deadline=None)
@given(
    min_backoff=st.sampled_from([0.5, 1.0, 2.0]),
    spread=st.sampled_from([1, 2, 8]),
    jitter=st.sampled_from([0.0, 0.25, 1.0]),
    max_attempts=st.integers(0, 6),
)
def test_retry_backoff_follows_its_policy(
    min_backoff: float, spread: int, jitter: float, max_attempts: int
) -> None:
    scheduler = VirtualTimeScheduler()
    source = FailingSource(scheduler)
    policy = Backoff(min_backoff, min_backoff * spread, jitter=jitter, max_attempts=max_attempts)
    subscriber = _run(source.flow().retry_backoff(policy, scheduler=scheduler), scheduler)
    gaps = source.gaps()
    assert len(gaps) == max_attempts
    for attempt, gap in enumerate(gaps):
        low, high = policy.bounds(attempt)
        assert low - 1e-9 <= gap <= high + 1e-9
    assert str(subscriber.error) == f"failure {max_attempts + 1}"


class TestRetryBackoffTck(PublisherVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return Flow.range(0, elements).retry_backoff(Backoff(0.001, 0.01))

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return Flow.error(RuntimeError("TCK")).retry_backoff(Backoff(0.001, 0.01, max_attempts=1))


# -- restart ---------------------------------------------------------------------------------


def test_restart_makes_the_source_again_after_a_failure() -> None:
    scheduler = VirtualTimeScheduler()
    source = FailingSource(scheduler, emit=1)
    policy = Backoff(1, 8, jitter=0, max_attempts=2, reset_on_success=False)
    flow = Flow.restart(source.flow, policy, scheduler=scheduler)  # flow() per restart
    subscriber = _run(flow, scheduler)
    assert source.subscribed_at == [0, 1, 3]
    assert subscriber.elements == [(1, 0), (2, 0), (3, 0)]
    assert str(subscriber.error) == "failure 3"


def test_restart_resumes_where_the_factory_says() -> None:
    scheduler = VirtualTimeScheduler()
    seen: list[int] = []
    failures = iter([True, True, False])

    def from_offset() -> Publisher[int]:
        offset = len(seen)  # resume after what was delivered
        rest = Flow.range(offset, min(offset + 3, 7)).do_on_next(seen.append)
        return rest.concat_with(Flow.error(RuntimeError("dropped"))) if next(failures) else rest

    subscriber = _run(Flow.restart(from_offset, Backoff(1, 1), scheduler=scheduler), scheduler)
    assert subscriber.elements == [0, 1, 2, 3, 4, 5, 6]
    assert subscriber.completed


def test_restart_after_a_completion_only_when_asked() -> None:
    scheduler = VirtualTimeScheduler()
    calls: list[float] = []

    def once() -> Publisher[int]:
        calls.append(scheduler.now())
        return Flow.just(len(calls))

    policy = Backoff(1, 2, jitter=0, max_attempts=3, reset_on_success=False)
    subscriber = _run(Flow.restart(once, policy, scheduler=scheduler), scheduler)
    assert subscriber.elements == [1]
    assert subscriber.completed
    calls.clear()
    restarting = Flow.restart(once, policy, on_complete=True, scheduler=scheduler)
    subscriber = _run(restarting, scheduler)
    assert subscriber.elements == [1, 2, 3, 4]
    assert [later - earlier for earlier, later in itertools.pairwise(calls)] == [1, 2, 2]
    assert subscriber.completed  # the bound passed: the last completion passes through


def test_a_raising_factory_counts_as_a_failure() -> None:
    scheduler = VirtualTimeScheduler()
    calls: list[int] = []

    def broken() -> Publisher[int]:
        calls.append(1)
        raise ConnectionRefusedError(f"refused {len(calls)}")

    policy = Backoff(1, 1, max_attempts=2)
    subscriber = _run(Flow.restart(broken, policy, scheduler=scheduler), scheduler)
    assert len(calls) == 3
    assert isinstance(subscriber.error, ConnectionRefusedError)
    assert str(subscriber.error) == "refused 3"


def test_a_cancel_during_the_restart_wait_stops_it() -> None:
    scheduler = VirtualTimeScheduler()
    source = FailingSource(scheduler)
    flow = Flow.restart(source.flow, Backoff(1, 1), scheduler=scheduler)
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(initial_request=1)
    flow.subscribe(subscriber)
    subscriber.cancel()
    scheduler.advance(5)
    assert source.subscribed_at == [0]


class TestRestartTck(PublisherVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return Flow.restart(lambda: Flow.range(0, elements), Backoff(0.001, 0.01))

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return Flow.restart(lambda: Flow.error(RuntimeError("TCK")), Backoff(0.001, max_attempts=0))
