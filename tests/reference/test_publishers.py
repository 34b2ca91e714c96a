"""The reference publishers, rule by rule (each test names the rule it checks)."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from reactive_streams import (
    MAX_DEMAND,
    DemandTypeError,
    ExecutorRejectedError,
    NonPositiveDemandError,
    ProtocolViolationError,
    Publisher,
    Subscriber,
    Subscription,
)
from reactive_streams.reference import ExecutorIterablePublisher, IterablePublisher, RangePublisher
from reactive_streams.testing import RecordingSubscriber, collect

from .conftest import PublisherFactory

TIMEOUT = 10.0


def subscribe(publisher: object, **kwargs: int) -> RecordingSubscriber[int]:
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(**kwargs)
    publisher.subscribe(subscriber)  # type: ignore[attr-defined]
    return subscriber


def wait_subscribed(subscriber: RecordingSubscriber[int]) -> None:
    deadline = threading.Event()
    for _ in range(int(TIMEOUT / 0.01)):
        if subscriber.subscription is not None:
            return
        deadline.wait(0.01)
    raise AssertionError("no on_subscribe within the timeout")


@pytest.mark.rule("1.1")
def test_rule_1_1_never_more_elements_than_requested(make_publisher: PublisherFactory) -> None:
    subscriber = subscribe(make_publisher(10))
    wait_subscribed(subscriber)
    subscriber.request(3)
    assert subscriber.wait_for_elements(3, TIMEOUT)
    subscriber.request(2)
    assert subscriber.wait_for_elements(5, TIMEOUT)
    assert subscriber.elements == [0, 1, 2, 3, 4]
    assert not subscriber.terminated
    assert subscriber.violations == []
    subscriber.cancel()


@pytest.mark.rule("1.2")
@pytest.mark.rule("1.5")
def test_rule_1_5_completes_after_the_last_element_without_more_demand(
    make_publisher: PublisherFactory,
) -> None:
    subscriber = subscribe(make_publisher(3), initial_request=3)
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.elements == [0, 1, 2]
    assert subscriber.completed and subscriber.error is None
    assert subscriber.violations == []


@pytest.mark.rule("2.9")
def test_rule_2_9_empty_stream_completes_without_demand(make_publisher: PublisherFactory) -> None:
    subscriber = subscribe(make_publisher(0))
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.completed and subscriber.elements == []


@pytest.mark.rule("1.9")
def test_rule_1_9_subscribe_none_raises_type_error(make_publisher: PublisherFactory) -> None:
    with pytest.raises(
        TypeError, match=r"^Rule 1\.9: subscribe\(\) requires a subscriber, got None$"
    ):
        make_publisher(1).subscribe(None)  # type: ignore[arg-type]


@pytest.mark.rule("1.11")
def test_rule_1_11_each_subscriber_gets_its_own_sequence() -> None:
    publisher = RangePublisher(0, 4)
    assert collect(publisher) == collect(publisher) == [0, 1, 2, 3]


@pytest.mark.rule("3.9")
@pytest.mark.parametrize("bad", [0, -1])
def test_rule_3_9_non_positive_request_signals_value_error_once(
    make_publisher: PublisherFactory, bad: int
) -> None:
    subscriber = subscribe(make_publisher(10))
    wait_subscribed(subscriber)
    subscriber.request(bad)
    assert subscriber.wait_terminated(TIMEOUT)
    assert isinstance(subscriber.error, NonPositiveDemandError)
    assert isinstance(subscriber.error, ValueError)
    assert str(subscriber.error) == f"Rule 3.9: non-positive subscription request (n={bad})"
    subscriber.request(5)  # Rule 3.6 after the terminal state: nothing more
    assert not subscriber.wait_for_elements(1, 0.05) or subscriber.elements == []
    assert subscriber.violations == []


@pytest.mark.rule("3.9")
@pytest.mark.parametrize("bad", [1.5, True])
def test_rule_3_9_non_int_request_signals_type_error(
    make_publisher: PublisherFactory, bad: object
) -> None:
    subscriber = subscribe(make_publisher(10))
    wait_subscribed(subscriber)
    subscriber.request(bad)  # type: ignore[arg-type]
    assert subscriber.wait_terminated(TIMEOUT)
    assert isinstance(subscriber.error, DemandTypeError)
    assert isinstance(subscriber.error, TypeError)
    assert subscriber.elements == []


@pytest.mark.rule("3.16")
@pytest.mark.rule("3.15")
def test_rule_3_15_3_16_request_and_cancel_return_normally(
    make_publisher: PublisherFactory,
) -> None:
    subscriber = subscribe(make_publisher(5))
    wait_subscribed(subscriber)
    subscription = subscriber.subscription
    assert subscription is not None
    for bad in (0, -3, 2.5, "x", None, True):
        subscription.request(bad)  # type: ignore[arg-type]
    subscription.cancel()
    subscription.cancel()


@pytest.mark.rule("3.6")
@pytest.mark.rule("3.7")
def test_rule_3_6_3_7_after_cancel_requests_and_cancels_are_no_ops(
    make_publisher: PublisherFactory,
) -> None:
    subscriber = subscribe(make_publisher(5))
    wait_subscribed(subscriber)
    subscriber.cancel()
    subscriber.request(3)
    subscriber.request(0)
    subscriber.cancel()
    assert not subscriber.wait_for_elements(1, 0.1)
    assert subscriber.elements == [] and not subscriber.terminated


@pytest.mark.rule("3.17")
def test_rule_3_17_cumulative_demand_up_to_max(make_publisher: PublisherFactory) -> None:
    subscriber = subscribe(make_publisher(3))
    wait_subscribed(subscriber)
    subscriber.request(MAX_DEMAND // 2)
    subscriber.request(MAX_DEMAND // 2)
    subscriber.request(1)
    subscriber.request(MAX_DEMAND)  # beyond the cap: saturates, no error
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.elements == [0, 1, 2] and subscriber.completed


@pytest.mark.rule("3.3")
def test_rule_3_3_recursion_depth_stays_one() -> None:
    depth = [0]
    max_depth = [0]
    received: list[int] = []

    class Reentrant(Subscriber[int]):
        def on_subscribe(self, subscription: Subscription) -> None:
            self.subscription = subscription
            subscription.request(1)

        def on_next(self, element: int) -> None:
            depth[0] += 1
            max_depth[0] = max(max_depth[0], depth[0])
            received.append(element)
            self.subscription.request(1)  # re-entrant: must not recurse
            depth[0] -= 1

        def on_error(self, error: Exception) -> None:
            raise AssertionError(error)

        def on_complete(self) -> None:
            pass

    for publisher in (RangePublisher(0, 10_000), IterablePublisher(range(10_000))):
        received.clear()
        publisher.subscribe(Reentrant())
        assert len(received) == 10_000
        assert max_depth[0] == 1


@pytest.mark.rule("3.10")
def test_rule_3_10_synchronous_publishers_emit_on_the_requesting_thread() -> None:
    threads: list[str] = []

    class Recorder(RecordingSubscriber[int]):
        def on_next(self, element: int) -> None:
            threads.append(threading.current_thread().name)
            super().on_next(element)

    subscriber: Recorder = Recorder()
    RangePublisher(0, 3).subscribe(subscriber)
    worker = threading.Thread(target=subscriber.request, args=(3,), name="requester")
    worker.start()
    worker.join(TIMEOUT)
    assert threads == ["requester"] * 3


@pytest.mark.rule("1.4")
def test_rule_1_4_an_iterator_that_raises_ends_with_its_error() -> None:
    def failing() -> object:
        yield 1
        yield 2
        raise KeyError("source broke")

    subscriber = subscribe(IterablePublisher(failing()), initial_request=10)  # type: ignore[arg-type]
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.elements == [1, 2]
    assert isinstance(subscriber.error, KeyError)


@pytest.mark.rule("1.4")
def test_rule_1_4_iter_that_raises_signals_on_subscribe_then_on_error() -> None:
    class Unstartable:
        def __iter__(self) -> object:
            raise OSError("cannot open")

    subscriber = subscribe(IterablePublisher(Unstartable()))  # type: ignore[arg-type]
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.subscription is not None
    assert isinstance(subscriber.error, OSError)
    assert subscriber.violations == []


@pytest.mark.rule("2.13")
def test_rule_2_13_a_none_element_is_a_type_error_naming_its_position() -> None:
    subscriber = subscribe(IterablePublisher([1, None, 3]), initial_request=10)
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.elements == [1]
    assert isinstance(subscriber.error, TypeError)
    assert str(subscriber.error).startswith("Rule 2.13: the iterable produced None at position 1")


@pytest.mark.rule("2.13")
def test_rule_2_13_on_next_that_raises_cancels_and_is_reported(
    make_publisher: PublisherFactory, undeliverable: list[BaseException]
) -> None:
    class Failing(RecordingSubscriber[int]):
        def on_next(self, element: int) -> None:
            super().on_next(element)
            if element == 2:
                raise RuntimeError("subscriber bug")

    subscriber = Failing(initial_request=10)
    make_publisher(10).subscribe(subscriber)
    assert subscriber.wait_for_elements(3, TIMEOUT)
    assert not subscriber.wait_terminated(0.1)
    assert subscriber.elements == [0, 1, 2]  # nothing after the failure: treated as cancelled
    assert len(undeliverable) == 1
    violation = undeliverable[0]
    assert isinstance(violation, ProtocolViolationError) and violation.rule == "2.13"
    assert isinstance(violation.__cause__, RuntimeError)
    assert "Failing.on_next raised RuntimeError: subscriber bug" in str(violation)


@pytest.mark.rule("3.13")
def test_rule_3_13_cancel_drops_the_subscriber(make_publisher: PublisherFactory) -> None:
    subscriber = subscribe(make_publisher(100), initial_request=1)
    assert subscriber.wait_for_elements(1, TIMEOUT)
    subscription = subscriber.subscription
    subscriber.cancel()
    reference = weakref.ref(subscriber)
    del subscriber
    for _ in range(50):
        gc.collect()
        if reference() is None:
            break
        threading.Event().wait(0.02)
    assert reference() is None
    assert subscription is not None  # the subscription itself may live on, inert


@pytest.mark.rule("1.8")
def test_rule_1_8_cancel_from_on_next_stops_the_stream(make_publisher: PublisherFactory) -> None:
    class CancelAtThree(RecordingSubscriber[int]):
        def on_next(self, element: int) -> None:
            super().on_next(element)
            if element == 3:
                self.cancel()

    subscriber = CancelAtThree(initial_request=MAX_DEMAND)
    make_publisher(1_000).subscribe(subscriber)
    assert subscriber.wait_for_elements(4, TIMEOUT)
    assert not subscriber.wait_for_elements(5, 0.1)
    assert subscriber.elements == [0, 1, 2, 3]


def test_generator_is_closed_on_cancel() -> None:
    closed = threading.Event()

    def endless() -> object:
        try:
            value = 0
            while True:
                yield value
                value += 1
        finally:
            closed.set()

    subscriber = subscribe(IterablePublisher(endless()), initial_request=5)  # type: ignore[arg-type]
    assert subscriber.wait_for_elements(5, TIMEOUT)
    subscriber.cancel()
    assert closed.wait(TIMEOUT)


def test_executor_publisher_signals_only_on_the_executor() -> None:
    threads: set[str] = set()

    class Recorder(RecordingSubscriber[int]):
        def on_subscribe(self, subscription: Subscription) -> None:
            threads.add(threading.current_thread().name)
            super().on_subscribe(subscription)

        def on_next(self, element: int) -> None:
            threads.add(threading.current_thread().name)
            super().on_next(element)

    with ThreadPoolExecutor(2, thread_name_prefix="pool") as pool:
        subscriber = Recorder(initial_request=50)
        ExecutorIterablePublisher(range(50), pool, batch_size=4).subscribe(subscriber)
        assert subscriber.wait_terminated(TIMEOUT)
    assert threads and all(name.startswith("pool") for name in threads)
    assert subscriber.elements == list(range(50))


@pytest.mark.rule("1.4")
def test_executor_that_rejects_ends_the_stream_with_executor_rejected_error() -> None:
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    subscriber = subscribe(ExecutorIterablePublisher(range(5), pool), initial_request=5)
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.subscription is not None  # on_subscribe first (Rule 1.9)
    assert isinstance(subscriber.error, ExecutorRejectedError)
    assert subscriber.violations == []


def test_statistics_snapshot(make_publisher: PublisherFactory) -> None:
    subscriber = subscribe(make_publisher(10), initial_request=4)
    assert subscriber.wait_for_elements(4, TIMEOUT)
    subscription = subscriber.subscription
    stats = subscription.statistics()  # type: ignore[union-attr]
    assert (stats.requested, stats.delivered, stats.cancelled, stats.terminated) == (
        4,
        4,
        False,
        False,
    )
    subscriber.cancel()
    assert subscription.statistics().cancelled  # type: ignore[union-attr]


def test_constructor_errors(executor: ThreadPoolExecutor) -> None:
    with pytest.raises(TypeError, match="start must be an int"):
        RangePublisher(0.5, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^batch_size must be positive, got 0$"):
        ExecutorIterablePublisher(range(3), executor, batch_size=0)
    with pytest.raises(TypeError, match=r"^batch_size must be an int, got str$"):
        ExecutorIterablePublisher(range(3), executor, batch_size="8")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"executor must be a concurrent\.futures\.Executor"):
        ExecutorIterablePublisher(range(3), object())  # type: ignore[arg-type]


@pytest.mark.parametrize("on_executor", [False, True], ids=["iterable", "executor"])
def test_an_element_goes_out_before_the_next_one_is_read(on_executor: bool) -> None:
    # A sporadic feed: the iterator cannot produce e2 until e1 has reached the subscriber.
    # Reading one ahead before delivering would hold e1 back until e2 exists.
    delivered = threading.Event()
    waits: list[bool] = []

    def feed() -> Iterator[str]:
        yield "e1"
        waits.append(delivered.wait(5.0))
        yield "e2"

    class Signalling(RecordingSubscriber[str]):
        def on_next(self, element: str) -> None:
            super().on_next(element)
            delivered.set()

    subscriber = Signalling(initial_request=5)
    with ThreadPoolExecutor(1) as pool:
        publisher: Publisher[str] = (
            ExecutorIterablePublisher(feed(), pool) if on_executor else IterablePublisher(feed())
        )
        publisher.subscribe(subscriber)
        assert subscriber.wait_terminated(TIMEOUT)
    assert waits == [True]
    assert subscriber.elements == ["e1", "e2"]
    assert subscriber.completed


# -- runs: a subscriber that declares on_next_run takes its elements in one call ----------


class _RunRecorder(Subscriber[int]):
    """Declares ``on_next_run``; takes at most ``take`` elements of each run.

    ``cancel_at``: cancel from inside the run once that element was taken.
    """

    def __init__(self, take: int = MAX_DEMAND, cancel_at: int | None = None) -> None:
        self.elements: list[int] = []
        self.runs: list[list[int]] = []
        self.per_element = 0
        self.completed = False
        self.error: Exception | None = None
        self.subscription: Subscription | None = None
        self._take = take
        self._cancel_at = cancel_at

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription

    def on_next(self, element: int) -> None:
        self.per_element += 1
        self.elements.append(element)

    def on_next_run(self, elements: Iterator[int]) -> None:
        run: list[int] = []
        self.runs.append(run)
        for taken, element in enumerate(elements, 1):
            run.append(element)
            self.elements.append(element)
            if element == self._cancel_at:
                assert self.subscription is not None
                self.subscription.cancel()
                return
            if taken == self._take:
                return  # stops before asking for the next one

    def on_error(self, error: Exception) -> None:
        self.error = error

    def on_complete(self) -> None:
        self.completed = True


def test_a_subscriber_that_takes_runs_gets_each_request_in_one_call() -> None:
    subscriber = _RunRecorder()
    IterablePublisher(range(7)).subscribe(subscriber)
    assert subscriber.subscription is not None
    subscriber.subscription.request(4)
    subscriber.subscription.request(3)
    assert subscriber.runs == [[0, 1, 2, 3], [4, 5, 6]]
    assert subscriber.per_element == 0
    assert subscriber.completed  # Rule 1.5: right after the last, no more demand needed


def test_a_run_that_stops_short_leaves_the_rest_for_later_and_does_not_complete() -> None:
    # The subscriber takes 2 of each run and stops without asking for a third: the
    # publisher must still read ahead after the second (Rule 1.5) and not mistake the
    # unread rest for the end of the source.
    subscriber = _RunRecorder(take=2)
    IterablePublisher(range(5)).subscribe(subscriber)
    assert subscriber.subscription is not None
    subscriber.subscription.request(2)
    assert (subscriber.elements, subscriber.completed) == ([0, 1], False)
    subscriber.subscription.request(3)
    assert subscriber.elements == [0, 1, 2, 3]  # two taken of the demand of three
    subscriber.subscription.request(1)
    assert subscriber.elements == [0, 1, 2, 3, 4]
    assert subscriber.completed
    assert subscriber.per_element == 0


@pytest.mark.rule("3.12")
def test_a_cancel_inside_a_run_reads_nothing_more_from_the_source() -> None:
    pulled: list[int] = []

    def source() -> Iterator[int]:
        for index in range(10):
            pulled.append(index)
            yield index

    subscriber = _RunRecorder(cancel_at=3)
    IterablePublisher(source()).subscribe(subscriber)
    assert subscriber.subscription is not None
    subscriber.subscription.request(10)
    assert subscriber.runs == [[0, 1, 2, 3]]
    assert pulled == [0, 1, 2, 3]
    assert not subscriber.completed
    assert subscriber.error is None


@pytest.mark.rule("1.4")
def test_a_source_that_fails_inside_a_run_ends_with_its_error_after_the_elements() -> None:
    def source() -> Iterator[int]:
        yield 0
        yield 1
        raise RuntimeError("boom")

    subscriber = _RunRecorder()
    IterablePublisher(source()).subscribe(subscriber)
    assert subscriber.subscription is not None
    subscriber.subscription.request(5)
    assert subscriber.runs == [[0, 1]]
    assert isinstance(subscriber.error, RuntimeError)


@pytest.mark.rule("2.13")
def test_a_none_inside_a_run_ends_the_stream_after_the_elements_before_it() -> None:
    subscriber = _RunRecorder()
    elements: list[int] = [0, 1, None, 3]  # type: ignore[list-item]
    IterablePublisher(elements).subscribe(subscriber)
    assert subscriber.subscription is not None
    subscriber.subscription.request(4)
    assert subscriber.runs == [[0, 1]]
    assert isinstance(subscriber.error, TypeError)
    assert str(subscriber.error) == (
        "Rule 2.13: the iterable produced None at position 2; None is never a valid element"
    )
