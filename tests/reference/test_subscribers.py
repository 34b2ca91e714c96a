"""SyncSubscriber and ExecutorSubscriber, rule by rule."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor

import pytest

from reactive_streams import ExecutorRejectedError, Subscription
from reactive_streams.reference import (
    ExecutorIterablePublisher,
    ExecutorSubscriber,
    IterablePublisher,
    RangePublisher,
    SyncSubscriber,
)

TIMEOUT = 10.0


class _Upstream(Subscription):
    """A hand-driven upstream that records calls and flags any from a terminal handler."""

    def __init__(self) -> None:
        self.requests: list[int] = []
        self.requested = threading.Event()
        self.cancelled = threading.Event()
        self.in_terminal = False
        self.calls_from_terminal = 0

    def request(self, n: int) -> None:
        self.calls_from_terminal += self.in_terminal
        self.requests.append(n)
        self.requested.set()

    def cancel(self) -> None:
        self.calls_from_terminal += self.in_terminal
        self.cancelled.set()


class _Collect(SyncSubscriber[int]):
    def __init__(
        self, *, stop_at: int | None = None, fail_at: int | None = None, batch_size: int = 8
    ) -> None:
        super().__init__(batch_size=batch_size)
        self.stop_at, self.fail_at = stop_at, fail_at
        self.elements: list[int] = []
        self.completed = False
        self.errors: list[Exception] = []

    def when_next(self, element: int) -> bool:
        if element == self.fail_at:
            raise ValueError(f"cannot handle {element}")
        self.elements.append(element)
        return element != self.stop_at

    def when_complete(self) -> None:
        self.completed = True

    def when_error(self, error: Exception) -> None:
        self.errors.append(error)


class _ExecutorCollect(ExecutorSubscriber[int]):
    def __init__(
        self, executor: Executor, *, stop_at: int | None = None, batch_size: int = 8
    ) -> None:
        super().__init__(executor, batch_size=batch_size)
        self.stop_at = stop_at
        self.elements: list[int] = []
        self.threads: set[str] = set()
        self.completed = False

    def when_next(self, element: int) -> bool:
        self.threads.add(threading.current_thread().name)
        self.elements.append(element)
        return element != self.stop_at

    def when_complete(self) -> None:
        self.completed = True


SubscriberFactory = Callable[..., "_Collect | _ExecutorCollect"]


@pytest.fixture(params=["sync", "executor"])
def make_subscriber(
    request: pytest.FixtureRequest, executor: ThreadPoolExecutor
) -> SubscriberFactory:
    if request.param == "sync":
        return _Collect
    return lambda **kwargs: _ExecutorCollect(executor, **kwargs)


def test_consumes_a_whole_stream(make_subscriber: SubscriberFactory) -> None:
    subscriber = make_subscriber()
    RangePublisher(0, 1000).subscribe(subscriber)
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.elements == list(range(1000))
    assert subscriber.completed
    stats = subscriber.statistics()
    assert stats.delivered == 1000 and stats.terminated


@pytest.mark.rule("2.1")
def test_rule_2_1_requests_in_batches_with_replenishment(
    make_subscriber: SubscriberFactory,
) -> None:
    subscriber = make_subscriber(batch_size=8)
    upstream = _Upstream()
    subscriber.on_subscribe(upstream)
    for element in range(6):  # 6 = 75% of 8: the replenishment point
        subscriber.on_next(element)
    subscriber.on_complete()
    assert subscriber.wait_terminated(TIMEOUT)
    assert upstream.requests == [8, 6]


@pytest.mark.rule("2.5")
def test_rule_2_5_a_second_subscription_is_cancelled(make_subscriber: SubscriberFactory) -> None:
    subscriber = make_subscriber()
    first, second = _Upstream(), _Upstream()
    subscriber.on_subscribe(first)
    subscriber.on_subscribe(second)
    assert second.cancelled.wait(TIMEOUT)
    assert second.requests == []
    assert not first.cancelled.is_set()


@pytest.mark.rule("2.13")
@pytest.mark.parametrize("method", ["on_subscribe", "on_next", "on_error"])
def test_rule_2_13_none_arguments_raise_type_error(
    make_subscriber: SubscriberFactory, method: str
) -> None:
    subscriber = make_subscriber()
    if method != "on_subscribe":
        subscriber.on_subscribe(_Upstream())
    with pytest.raises(TypeError, match=rf"^Rule 2\.13: {method}\(\w+\) must not be None$"):
        getattr(subscriber, method)(None)


@pytest.mark.rule("2.3")
def test_rule_2_3_terminal_handlers_never_call_the_subscription(
    make_subscriber: SubscriberFactory,
) -> None:
    for terminal in ("complete", "error"):
        subscriber = make_subscriber(batch_size=4)
        upstream = _Upstream()
        subscriber.on_subscribe(upstream)
        assert upstream.requested.wait(TIMEOUT)  # the executor subscriber requests later
        upstream.in_terminal = True
        if terminal == "complete":
            subscriber.on_complete()
        else:
            subscriber.on_error(RuntimeError("upstream failed"))
        assert subscriber.wait_terminated(TIMEOUT)
        assert upstream.calls_from_terminal == 0


@pytest.mark.rule("2.6")
def test_rule_2_6_returning_false_cancels(make_subscriber: SubscriberFactory) -> None:
    subscriber = make_subscriber(stop_at=5)
    RangePublisher(0, 1_000_000).subscribe(subscriber)
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.elements == [0, 1, 2, 3, 4, 5]
    assert subscriber.statistics().cancelled


@pytest.mark.rule("2.13")
def test_rule_2_13_when_next_raising_cancels_and_reaches_when_error() -> None:
    subscriber = _Collect(fail_at=3)
    RangePublisher(0, 100).subscribe(subscriber)
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.elements == [0, 1, 2]
    assert len(subscriber.errors) == 1 and isinstance(subscriber.errors[0], ValueError)
    assert subscriber.error is subscriber.errors[0]


@pytest.mark.rule("2.8")
def test_rule_2_8_elements_after_cancel_are_ignored(make_subscriber: SubscriberFactory) -> None:
    subscriber = make_subscriber()
    upstream = _Upstream()
    subscriber.on_subscribe(upstream)
    subscriber.cancel()
    assert upstream.cancelled.wait(TIMEOUT)
    subscriber.on_next(1)
    subscriber.on_next(2)
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.elements == []


@pytest.mark.rule("2.2")
def test_rule_2_2_executor_subscriber_handles_signals_on_its_executor() -> None:
    with ThreadPoolExecutor(1, thread_name_prefix="handler") as pool:
        subscriber = _ExecutorCollect(pool)
        IterablePublisher(range(100)).subscribe(subscriber)
        assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.threads == {"handler_0"}
    assert subscriber.elements == list(range(100))


@pytest.mark.rule("2.7")
def test_rule_2_7_cancel_from_another_thread_while_elements_flow(
    executor: ThreadPoolExecutor,
) -> None:

    subscriber = _Collect(batch_size=4)
    ExecutorIterablePublisher(range(10_000_000), executor, batch_size=4).subscribe(subscriber)
    canceller = threading.Thread(target=subscriber.cancel)
    canceller.start()
    canceller.join(TIMEOUT)
    assert subscriber.wait_terminated(TIMEOUT)
    count = len(subscriber.elements)
    assert subscriber.elements == list(range(count))


def test_executor_subscriber_reports_a_rejecting_executor() -> None:
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    subscriber = _ExecutorCollect(pool)
    upstream = _Upstream()
    subscriber.on_subscribe(upstream)
    assert subscriber.wait_terminated(TIMEOUT)
    assert upstream.cancelled.is_set()
    assert isinstance(subscriber.error, ExecutorRejectedError)


def test_batch_size_is_validated() -> None:
    with pytest.raises(ValueError, match=r"^batch_size must be positive, got 0$"):
        _Collect(batch_size=0)
    with pytest.raises(TypeError, match=r"^batch_size must be an int, got float$"):
        _Collect(batch_size=2.0)  # type: ignore[arg-type]
