"""publish_on's buffered path: synchronous re-entrant sources and the fused callback sink."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest

from reactive_streams import MAX_DEMAND, MissingBackpressureError, Publisher, Subscriber
from reactive_streams.operators import CallbackSubscriber, Flow
from reactive_streams.reference import RangePublisher

from .helpers import ManualPublisher, ManualSubscription, Recorder

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1, thread_name_prefix="consumer") as pool:
        yield pool


class _OverEmitting(Publisher[int]):
    """Emits synchronously inside ``request``: ``n`` elements, but one extra on request ``bad``."""

    def __init__(self, bad: int) -> None:
        self.bad = bad
        self.subscription = _OverEmittingSubscription(self)

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self.subscription.subscriber = subscriber
        subscriber.on_subscribe(self.subscription)


class _OverEmittingSubscription(ManualSubscription):
    def __init__(self, publisher: _OverEmitting) -> None:
        super().__init__()
        self.publisher = publisher
        self.subscriber: Subscriber[int] | None = None
        self.next_element = 0
        self.threads: set[int] = set()

    def request(self, n: int) -> None:
        super().request(n)
        assert self.subscriber is not None
        self.threads.add(threading.get_ident())
        extra = 1 if len(self.requests) == self.publisher.bad else 0
        for _ in range(n + extra):
            self.subscriber.on_next(self.next_element)
            self.next_element += 1


def test_synchronous_source_through_the_buffer(executor: ThreadPoolExecutor) -> None:
    """A source that emits inside ``request`` re-enters the drain's refill: all in order."""
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    flow = Flow.from_publisher(RangePublisher(0, 10_000)).publish_on(executor, prefetch=16)
    flow.subscribe(recorder)
    recorder.wait()
    assert recorder.elements == list(range(10_000))
    assert recorder.completed == 1
    assert len(recorder.threads) == 1
    assert threading.get_ident() not in recorder.threads
    assert flow.metrics()["1:publish_on"].high_water_mark <= 16


@pytest.mark.rule("1.1")
def test_overflow_inside_the_drains_refill(executor: ThreadPoolExecutor) -> None:
    """The extra element arrives on the drain's thread, inside its own ``request``."""
    source = _OverEmitting(bad=2)
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    flow = Flow.from_publisher(source).publish_on(executor, prefetch=4)
    flow.subscribe(recorder)
    recorder.wait()
    assert source.subscription.requests == [4, 4]
    assert len(source.subscription.threads) == 2  # the refill came from the drain's thread
    assert recorder.elements == list(range(8))  # what was requested, not the ninth
    assert isinstance(recorder.errors[0], MissingBackpressureError)
    assert "Rule 1.1" in str(recorder.errors[0])
    assert source.subscription.cancelled == 1  # the stage stops the upstream that broke it
    assert flow.metrics()["1:publish_on"].high_water_mark <= 4
    assert recorder.signals_after_terminal == 0


def test_callbacks_fused_with_the_drain_deliver_everything(executor: ThreadPoolExecutor) -> None:
    received: list[int] = []
    threads: set[int] = set()
    done = threading.Event()

    def on_next(x: int) -> None:
        threads.add(threading.get_ident())
        received.append(x)

    Flow.from_publisher(RangePublisher(0, 5000)).publish_on(executor, prefetch=16).subscribe(
        on_next=on_next, on_complete=done.set, prefetch=8
    )
    assert done.wait(10)
    assert received == list(range(5000))
    assert len(threads) == 1
    assert threading.get_ident() not in threads


@pytest.mark.rule("2.13")
def test_fused_callback_that_raises_cancels_upstream(executor: ThreadPoolExecutor) -> None:
    source: ManualPublisher[int] = ManualPublisher()
    received: list[int] = []
    errors: list[Exception] = []
    done = threading.Event()
    boom = RuntimeError("boom")

    def on_next(x: int) -> None:
        received.append(x)
        if x == 5:
            raise boom

    def on_error(error: Exception) -> None:
        errors.append(error)
        done.set()

    flow = Flow.from_publisher(source).publish_on(executor, prefetch=16)
    flow.subscribe(on_next=on_next, on_error=on_error)
    source.next(*range(16))
    assert done.wait(10)
    executor.submit(lambda: None).result(10)  # the drain that cancelled upstream is over
    assert received == list(range(6))
    assert errors == [boom]
    assert source.subscription.cancelled == 1
    stats = flow.metrics()["1:publish_on"]
    assert stats.cancelled
    assert stats.delivered == 6


@pytest.mark.rule("3.12")
def test_fused_callback_cancelling_stops_at_once(executor: ThreadPoolExecutor) -> None:
    received: list[int] = []
    cancelled = threading.Event()

    def on_next(x: int) -> None:
        received.append(x)
        if x == 3:
            subscriber.cancel()
            cancelled.set()

    subscriber: CallbackSubscriber[int] = CallbackSubscriber(on_next, prefetch=64)
    flow = Flow.from_publisher(RangePublisher(0, 1000)).publish_on(executor, prefetch=32)
    flow.subscribe(subscriber)
    assert cancelled.wait(10)
    executor.submit(lambda: None).result(10)
    assert received == [0, 1, 2, 3]
    assert flow.metrics()["1:publish_on"].cancelled


def test_on_next_run_replenishes_what_was_consumed() -> None:
    received: list[int] = []
    subscriber: CallbackSubscriber[int] = CallbackSubscriber(received.append, prefetch=8)
    subscription = ManualSubscription()
    subscriber.on_subscribe(subscription)
    subscriber.on_next_run(iter(range(5)))  # 5 consumed: below 75% of 8, no request yet
    assert subscription.requests == [8]
    subscriber.on_next_run(iter(range(5, 8)))  # 8 consumed: request all 8 back
    assert subscription.requests == [8, 8]
    assert received == list(range(8))


def test_on_next_run_leaves_the_rest_after_a_cancel() -> None:
    received: list[int] = []
    subscription = ManualSubscription()

    def on_next(x: int) -> None:
        received.append(x)
        if x == 2:
            subscriber.cancel()

    subscriber: CallbackSubscriber[int] = CallbackSubscriber(on_next, prefetch=8)
    subscriber.on_subscribe(subscription)
    elements = iter(range(10))
    subscriber.on_next_run(elements)
    assert received == [0, 1, 2]
    assert list(elements) == list(range(3, 10))
    assert subscription.cancelled == 1
    assert subscription.requests == [8]  # nothing requested once cancelled
    subscriber.on_next_run(iter(range(3)))  # done: takes nothing, calls nothing
    assert received == [0, 1, 2]


def test_on_next_run_without_a_callable_counts_demand() -> None:
    completed: list[bool] = []
    subscriber: CallbackSubscriber[int] = CallbackSubscriber(
        on_complete=lambda: completed.append(True), prefetch=4
    )
    subscription = ManualSubscription()
    subscriber.on_subscribe(subscription)
    elements = iter(range(3))
    subscriber.on_next_run(elements)
    assert list(elements) == []
    assert subscription.requests == [4, 3]  # 3 consumed: 75% of 4
    subscriber.on_complete()
    assert completed == [True]
