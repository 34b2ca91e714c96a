"""The kit's EmitLoopSubscription: where its loop runs (caller, executor, event loop)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from reactive_streams import Subscriber
from reactive_streams._core import (
    DaemonThreadPool,
    EmitLoopSubscription,
    LoopExecutor,
    SourceCancelledError,
)
from reactive_streams.testing import RecordingSubscriber

TIMEOUT = 10.0


class _ListSubscription(EmitLoopSubscription[int]):
    """A list as a source; records the threads that ran its passes."""

    def __init__(self, subscriber: Subscriber[int], items: list[int], **kwargs: Any) -> None:
        super().__init__(subscriber, batch_size=16, **kwargs)
        self.items = items
        self.position = 0
        self.threads: set[str] = set()
        self.closed = 0

    def _open(self) -> None:
        self.threads.add(threading.current_thread().name)

    def _emit(self, subscriber: Subscriber[int], count: int) -> int:
        self.threads.add(threading.current_thread().name)
        sent = 0
        while sent < count and self.position < len(self.items):
            subscriber.on_next(self.items[self.position])
            self.position += 1
            sent += 1
        return sent

    def _exhausted(self) -> bool:
        return self.position >= len(self.items)

    def _failure(self) -> Exception | None:
        return None

    def _close(self) -> None:
        self.closed += 1


class _ThreadOfOnSubscribe(RecordingSubscriber[int]):
    def __init__(self, initial_request: int) -> None:
        super().__init__(initial_request=initial_request)
        self.on_subscribe_thread: str | None = None

    def on_subscribe(self, subscription: Any) -> None:
        self.on_subscribe_thread = threading.current_thread().name
        super().on_subscribe(subscription)


def test_subscribe_on_caller_signals_on_subscribe_here_and_starts_the_loop_on_request() -> None:
    pool = DaemonThreadPool(1, thread_name_prefix="emit-loop-test")
    subscriber = _ThreadOfOnSubscribe(initial_request=0)
    subscription = _ListSubscription(subscriber, [1, 2, 3], executor=pool, subscribe_on_caller=True)
    subscription.start()
    assert subscriber.on_subscribe_thread == threading.current_thread().name
    assert subscription.threads == set()  # no pass yet: nothing was requested
    subscriber.request(5)
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.elements == [1, 2, 3]
    assert subscription.threads == {"emit-loop-test_0"}  # _open and _emit on the loop
    assert subscription.closed == 1
    pool.shutdown(timeout=TIMEOUT)


def test_a_request_from_on_subscribe_on_the_caller_runs_after_it_returned() -> None:
    pool = DaemonThreadPool(1, thread_name_prefix="emit-loop-test")
    subscriber = _ThreadOfOnSubscribe(initial_request=2)
    subscription = _ListSubscription(subscriber, [1, 2], executor=pool, subscribe_on_caller=True)
    subscription.start()
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.elements == [1, 2]
    assert subscriber.violations == []
    pool.shutdown(timeout=TIMEOUT)


def test_on_an_event_loop_every_pass_runs_there_and_a_closed_loop_is_abandoned() -> None:
    loop = asyncio.new_event_loop()
    subscriber = _ThreadOfOnSubscribe(initial_request=1)
    subscription = _ListSubscription(subscriber, [1, 2, 3], executor=LoopExecutor(loop))
    subscription.start()
    assert subscriber.subscription is None  # queued on the loop, not run here
    loop.run_until_complete(asyncio.sleep(0))
    assert subscriber.elements == [1]
    assert subscriber.on_subscribe_thread == threading.current_thread().name
    loop.close()
    subscriber.request(1)  # the loop refuses the pass: the stream ends with an error
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.elements == [1]
    assert subscriber.error is not None
    subscription.abandon(SourceCancelledError("closed"))  # already over: nothing more
    assert subscriber.violations == []
    assert subscription.closed == 1


def test_abandon_takes_over_from_a_pass_that_can_never_run() -> None:
    loop = asyncio.new_event_loop()
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=1)
    subscription = _ListSubscription(subscriber, [1], executor=LoopExecutor(loop))
    subscription.start()  # the first pass is queued on the loop and owns the election
    loop.close()
    subscription.abandon(SourceCancelledError("the loop closed"))
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.subscription is not None  # on_subscribe first (Rule 1.9)
    assert isinstance(subscriber.error, SourceCancelledError)
    assert subscriber.violations == []
    assert subscription.closed == 1
