"""Edges a new user or an adversary reaches: odd arguments, cancels and races, interrupts.

Arguments out of range or of the wrong type, a hub whose only subscriber cancelled, a
Rule 3.9 error racing a running ``on_next``, a late subscriber of ``share``, and a
``KeyboardInterrupt`` on an executor.
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest

from reactive_streams import (
    Flow,
    MissingBackpressureError,
    Publisher,
    StreamInterruptedError,
    Subscriber,
    Subscription,
)
from reactive_streams.testing import RecordingSubscriber

if TYPE_CHECKING:
    from collections.abc import Iterator

TIMEOUT = 5.0


@pytest.fixture(scope="module")
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(4) as pool:
        yield pool


# --------------------------------------------------------------------------- arguments and hubs


def test_interval_with_count_zero_emits_nothing() -> None:
    recorder: RecordingSubscriber[int] = RecordingSubscriber(initial_request=5)
    Flow.interval(0.001, count=0).subscribe(recorder)
    assert recorder.wait_terminated(TIMEOUT)
    assert recorder.elements == []
    assert recorder.completed
    assert recorder.violations == []


def test_interval_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match="count must be >= 0"):
        Flow.interval(0.01, count=-1)


@pytest.mark.parametrize("capacity", [0, -1])
def test_on_backpressure_buffer_refuses_no_capacity(capacity: int) -> None:
    with pytest.raises(ValueError, match=r"^capacity must be positive, got -?\d+$"):
        Flow.range(0, 3).on_backpressure_buffer(capacity)


_BAD: Any = "2"  # typed Any: the point is a wrong type at run time


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (lambda: Flow.range(0, 3).publish_on(ThreadPoolExecutor(1), prefetch=_BAD), "prefetch"),
        (lambda: Flow.range(0, 3).buffer(_BAD), "buffer size"),
        (lambda: Flow.range(0, 3).flat_map(Flow.just, prefetch=_BAD), "prefetch"),
        (lambda: Flow.range(0, 3).share(prefetch=_BAD), "prefetch"),
        (lambda: Flow.zip(Flow.range(0, 3), prefetch=_BAD), "prefetch"),
    ],
)
def test_a_non_int_size_is_a_type_error(make: Any, what: str) -> None:
    with pytest.raises(TypeError, match=rf"^{what} must be an int, got \w+$"):
        make()


class _Overflowing(Publisher[int]):
    """Sends ``count`` elements at the first request, whatever was requested (Rule 1.1)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.cancelled = threading.Event()

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        outer = self

        class _Sub(Subscription):
            sent = False

            def request(self, n: int) -> None:
                if self.sent:
                    return
                self.sent = True
                for i in range(outer.count):
                    if outer.cancelled.is_set():
                        return
                    subscriber.on_next(i)

            def cancel(self) -> None:
                outer.cancelled.set()

        subscriber.on_subscribe(_Sub())


def test_multicast_hub_checks_rule_1_1_on_upstream_overflow() -> None:
    source = _Overflowing(10)
    # no demand downstream, so the hub never refills: the 5th element breaks Rule 1.1
    recorder: RecordingSubscriber[int] = RecordingSubscriber()
    Flow.from_publisher(source).share(prefetch=4).subscribe(recorder)
    assert recorder.wait_terminated(TIMEOUT)
    assert isinstance(recorder.error, MissingBackpressureError)
    assert "Rule 1.1" in str(recorder.error)
    assert source.cancelled.is_set()
    assert recorder.elements == []


def test_publish_stops_requesting_once_its_only_subscriber_cancelled() -> None:
    produced: list[int] = []

    def count(x: int) -> int:
        produced.append(x)
        return x

    flow = Flow.range(0, 10**6).map(count).publish(prefetch=8)

    class CancelFirst(RecordingSubscriber[int]):
        def on_next(self, element: int) -> None:
            super().on_next(element)
            self.cancel()

    recorder = CancelFirst(initial_request=1)
    flow.subscribe(recorder)
    flow.connect()
    assert recorder.elements == [0]
    # a hub that kept refilling from the cancelled subscriber's request(1) would push the
    # whole million through count() on this thread
    assert len(produced) <= 16


# --------------------------------------------------------------------------- races and interrupts


class _HoldFirst(RecordingSubscriber[int]):
    """Blocks in its first ``on_next`` until released, so a race window is always open."""

    def __init__(self) -> None:
        super().__init__(initial_request=10)
        self.entered = threading.Event()
        self.release = threading.Event()

    def on_next(self, element: int) -> None:
        self._enter("on_next")
        try:
            with self._condition:
                self.elements.append(element)
            if len(self.elements) == 1:
                self.entered.set()
                self.release.wait(TIMEOUT)
        finally:
            self._leave()


@pytest.mark.parametrize("operator", ["retry", "on_error_resume"])
def test_a_rule_3_9_error_waits_for_the_running_on_next(
    operator: str, executor: ThreadPoolExecutor
) -> None:
    for _ in range(50):
        source = Flow.range(0, 1000).publish_on(executor, prefetch=16)
        flow = source.retry(1) if operator == "retry" else source.on_error_resume(Flow.error)
        recorder = _HoldFirst()
        flow.subscribe(recorder)
        assert recorder.entered.wait(TIMEOUT)
        recorder.request(0)  # Rule 3.9: on another thread, while on_next runs
        recorder.release.set()
        assert recorder.wait_terminated(TIMEOUT)
        assert isinstance(recorder.error, ValueError)
        with recorder._condition:
            assert recorder.violations == []  # no Rule 1.3 overlap, no Rule 1.7 on_next


def test_share_never_strands_a_late_subscriber() -> None:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for trial in range(600):
            shared = Flow.range(0, 10**9).share(prefetch=4)
            first: RecordingSubscriber[int] = RecordingSubscriber(initial_request=1)
            shared.subscribe(first)
            late: RecordingSubscriber[int] = RecordingSubscriber(initial_request=1)
            leaving = threading.Thread(target=first.cancel)
            leaving.start()
            shared.subscribe(late)
            leaving.join(TIMEOUT)
            assert late.wait_for_elements(1, TIMEOUT), f"trial {trial}: late subscriber stranded"
            late.cancel()
    finally:
        sys.setswitchinterval(previous)


def _interrupt(x: int) -> int:
    if x == 2:
        raise KeyboardInterrupt
    return x


class _Source(Publisher[int]):
    """A non-iterable source that emits on ``request`` (so no fusion applies)."""

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        state = {"next": 0}

        class _Sub(Subscription):
            def request(self, n: int) -> None:
                for _ in range(n):
                    state["next"] += 1
                    subscriber.on_next(state["next"])

            def cancel(self) -> None:
                pass

        subscriber.on_subscribe(_Sub())


@pytest.mark.parametrize(
    "build",
    [
        lambda ex: Flow.range(0, 10).map(_interrupt).publish_on(ex),
        lambda ex: Flow.range(0, 10).map(_interrupt).subscribe_on(ex),
        lambda ex: Flow.from_publisher(_Source()).publish_on(ex).map(_interrupt),
        lambda ex: Flow.from_publisher(_Source()).map(_interrupt).subscribe_on(ex),
    ],
    ids=["publish_on-fused", "subscribe_on-fused", "publish_on", "subscribe_on"],
)
def test_keyboard_interrupt_on_an_executor_ends_the_stream(build: Any) -> None:
    reported: list[BaseException] = []
    from reactive_streams import set_undeliverable_hook

    previous = set_undeliverable_hook(reported.append)
    pool = ThreadPoolExecutor(1)
    try:
        recorder: RecordingSubscriber[int] = RecordingSubscriber(initial_request=100)
        build(pool).subscribe(recorder)
        assert recorder.wait_terminated(TIMEOUT), "the flow never ended"
        assert isinstance(recorder.error, StreamInterruptedError)
        assert isinstance(recorder.error.__cause__, KeyboardInterrupt)
        assert any(isinstance(error, KeyboardInterrupt) for error in reported)
    finally:
        pool.shutdown(wait=True)
        set_undeliverable_hook(previous)
