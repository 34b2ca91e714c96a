"""Fusion is a capability a class declares, not a test of concrete classes."""

from __future__ import annotations

import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from reactive_streams import Flow, Subscriber, Subscription
from reactive_streams._core import (
    ExecutorSubscribable,
    Operator,
    StageStatistics,
    run_receiver,
)
from reactive_streams.operators import CallbackSubscriber
from reactive_streams.testing import RecordingSubscriber

if TYPE_CHECKING:
    from collections.abc import Iterator

TIMEOUT = 10.0


class _OwnSource(Operator[int]):
    """A source of its own that declares ExecutorSubscribable by implementing it."""

    def __init__(self) -> None:
        super().__init__()
        self.executors: list[Executor | None] = []

    @property
    def name(self) -> str:
        return "own"

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self.subscribe_on_executor(subscriber, None)

    def subscribe_on_executor(self, subscriber: Subscriber[int], executor: Executor | None) -> None:
        self.executors.append(executor)
        Flow.just(1, 2, 3).subscribe(subscriber)

    def last_statistics(self) -> StageStatistics | None:
        return None


def test_publish_on_and_subscribe_on_hand_the_executor_to_a_declared_source() -> None:
    source = _OwnSource()
    assert isinstance(source, ExecutorSubscribable)
    with ThreadPoolExecutor(1) as pool:
        for flow in (Flow(source).publish_on(pool), Flow(source).subscribe_on(pool)):
            subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=10)
            flow.subscribe(subscriber)
            assert subscriber.wait_terminated(TIMEOUT)
            assert subscriber.elements == [1, 2, 3]
    assert source.executors == [pool, pool]  # no buffering stage in between


class _RunTaker(Subscriber[int]):
    """A subscriber of its own that takes runs of elements."""

    def __init__(self) -> None:
        self.runs: list[list[int]] = []
        self.done = threading.Event()
        self._subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self._subscription = subscription
        subscription.request(1_000)

    def on_next(self, element: int) -> None:
        self.runs.append([element])

    def on_next_run(self, elements: Iterator[int]) -> None:
        self.runs.append(list(elements))

    def on_error(self, error: Exception) -> None:
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


def test_publish_on_hands_batches_to_a_declared_run_subscriber() -> None:
    subscriber = _RunTaker()
    with ThreadPoolExecutor(1) as pool:
        # One worker: the source emits all 100 in one task, then the drain task runs.
        Flow.range(0, 100).subscribe_on(pool).publish_on(pool, prefetch=256).subscribe(subscriber)
        assert subscriber.done.wait(TIMEOUT)
    assert [x for run in subscriber.runs for x in run] == list(range(100))
    assert any(len(run) > 1 for run in subscriber.runs)


def test_run_receiver_takes_on_next_run_from_the_class_itself_only() -> None:
    class Subclass(CallbackSubscriber[Any]):
        def on_next(self, element: Any) -> None:  # would be bypassed by an inherited run
            super().on_next(element)

    assert run_receiver(CallbackSubscriber(print)) is not None
    assert run_receiver(Subclass(print)) is None
    assert run_receiver(RecordingSubscriber()) is None
