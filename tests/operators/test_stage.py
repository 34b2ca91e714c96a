"""The shared stage bases in ``operators/_stage.py``, through minimal concrete stages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reactive_streams import (
    MAX_DEMAND,
    ProtocolViolationError,
    Subscription,
    set_undeliverable_hook,
)
from reactive_streams._core import BufferedStage, DownstreamStage, PassThroughStage

from .helpers import ManualSubscription, Recorder


class _QueueStage(BufferedStage):
    """A stage that delivers what ``offer`` queued, within demand; signals after the queue.

    It keeps ``BufferedStage``'s own drain pass, counting the passes.
    """

    def __init__(self, downstream: Recorder[Any]) -> None:
        super().__init__(downstream)
        self.passes = 0

    def on_subscribe(self, subscription: Subscription) -> None:
        self._accept_upstream(subscription)

    def on_next(self, element: Any) -> None:
        with self._lock:
            if self._done or self._cancelled:
                return
            self._ready.append(element)
        self._schedule()

    def offer(self, *elements: Any) -> None:
        for element in elements:
            self.on_next(element)

    def _drain(self) -> None:
        self.passes += 1
        super()._drain()


@pytest.fixture
def undeliverable() -> Iterator[list[BaseException]]:
    errors: list[BaseException] = []
    previous = set_undeliverable_hook(errors.append)
    yield errors
    set_undeliverable_hook(previous)


def _subscribed(initial: int = 0) -> tuple[_QueueStage, Recorder[Any], ManualSubscription]:
    recorder: Recorder[Any] = Recorder(initial)
    stage = _QueueStage(recorder)
    upstream = ManualSubscription()
    stage.on_subscribe(upstream)
    return stage, recorder, upstream


def test_demand_is_added_capped_and_counted() -> None:
    stage, recorder, _ = _subscribed(2)
    stage.offer(1, 2, 3)
    assert recorder.elements == [1, 2]
    stage.request(MAX_DEMAND)
    stage.request(MAX_DEMAND)
    stage.offer(4)
    assert recorder.elements == [1, 2, 3, 4]
    snapshot = stage.statistics()
    assert (snapshot.requested, snapshot.delivered, snapshot.buffered) == (MAX_DEMAND, 4, 0)


@pytest.mark.rule("3.9")
@pytest.mark.parametrize("bad", [0, -1])
def test_non_positive_request_is_signalled_and_cancels_upstream(bad: int) -> None:
    stage, recorder, upstream = _subscribed()
    stage.offer(1)
    stage.request(bad)
    assert recorder.elements == []
    assert len(recorder.errors) == 1
    assert isinstance(recorder.errors[0], ValueError)
    assert isinstance(recorder.errors[0], ProtocolViolationError)
    assert recorder.errors[0].rule == "3.9"
    assert upstream.cancelled == 1  # an urgent error: upstream is still running


@pytest.mark.rule("3.9")
def test_non_int_request_is_a_type_error() -> None:
    stage, recorder, _ = _subscribed()
    stage.request("3")  # type: ignore[arg-type]
    assert len(recorder.errors) == 1
    assert isinstance(recorder.errors[0], TypeError)


@pytest.mark.rule("3.7")
def test_cancel_is_once_and_cancels_upstream_once() -> None:
    stage, recorder, upstream = _subscribed(5)
    stage.cancel()
    passes = stage.passes
    stage.cancel()
    stage.request(1)
    stage.offer(1)
    assert stage.passes == passes  # the stage is over: nothing schedules a drain again
    assert upstream.cancelled == 1
    assert recorder.elements == []
    assert stage.statistics().cancelled
    assert stage.statistics().terminated


def test_upstream_terminal_signal_waits_behind_the_queue() -> None:
    stage, recorder, upstream = _subscribed(1)
    stage.offer(1, 2)
    stage.on_error(RuntimeError("upstream failed"))
    assert recorder.errors == []
    stage.request(1)
    assert recorder.elements == [1, 2]
    assert [str(error) for error in recorder.errors] == ["upstream failed"]
    assert upstream.cancelled == 0  # upstream ended by itself (Rule 1.6)


@pytest.mark.rule("2.5")
def test_second_subscription_is_cancelled() -> None:
    stage, _, first = _subscribed()
    second = ManualSubscription()
    stage.on_subscribe(second)
    assert (first.cancelled, second.cancelled) == (0, 1)


@pytest.mark.rule("2.13")
def test_on_subscribe_none_is_a_type_error() -> None:
    stage = _QueueStage(Recorder())
    with pytest.raises(TypeError, match=r"^Rule 2\.13: on_subscribe\(None\)$"):
        stage.on_subscribe(None)  # type: ignore[arg-type]


@pytest.mark.rule("2.13")
def test_raising_on_next_stops_the_batch_and_cancels(undeliverable: list[BaseException]) -> None:
    class Fragile(Recorder[int]):
        def on_next(self, element: int) -> None:
            if element == 2:
                raise RuntimeError("boom")
            super().on_next(element)

    recorder = Fragile()
    stage = _QueueStage(recorder)
    upstream = ManualSubscription()
    stage.on_subscribe(upstream)
    stage.offer(1, 2, 3)
    stage.request(3)
    assert recorder.elements == [1]
    assert stage.statistics().delivered == 1  # the element whose on_next raised is not
    assert upstream.cancelled == 1
    assert len(undeliverable) == 1
    assert isinstance(undeliverable[0], ProtocolViolationError)
    assert undeliverable[0].rule == "2.13"


def test_fail_keeps_the_first_error(undeliverable: list[BaseException]) -> None:
    class Stage(DownstreamStage):
        def _buffered_now(self) -> int:
            return 0

        def _drain(self) -> None:
            """Leave the errors in place so the test can look at them."""
            with self._lock:
                self._wip = False

    stage = Stage(Recorder())
    first, second = RuntimeError("first"), RuntimeError("second")
    stage.fail(first)
    stage.fail(second)
    assert stage._error is first
    assert undeliverable == [second]


def test_pass_through_forwards_one_terminal_signal() -> None:
    class Stage(PassThroughStage[int]):
        def on_subscribe(self, subscription: Any) -> None:
            self._upstream = subscription

        def on_next(self, element: int) -> None:
            downstream = self._downstream
            if downstream is not None:
                downstream.on_next(element)

        def request(self, n: int) -> None:
            """Unused here."""

        def cancel(self) -> None:
            """Unused here."""

    recorder: Recorder[int] = Recorder()
    stage = Stage(recorder)
    stage.on_complete()
    stage.on_error(RuntimeError("late"))
    stage.on_complete()
    assert (recorder.completed, recorder.errors, recorder.signals_after_terminal) == (1, [], 0)
    with pytest.raises(TypeError, match=r"^Rule 2\.13: on_error\(None\)$"):
        stage.on_error(None)  # type: ignore[arg-type]
