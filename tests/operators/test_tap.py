"""``tap``/``do_on_*`` and ``log``: callbacks see every signal; a raising one ends the flow."""

from __future__ import annotations

import logging
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import MAX_DEMAND, Subscription, set_undeliverable_hook
from reactive_streams.operators import Flow

from .helpers import ManualPublisher, Recorder


def test_callbacks_see_every_signal_in_order() -> None:
    events: list[object] = []
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(3)
    Flow.from_publisher(source).tap(
        on_subscribe=lambda s: events.append("subscribe"),
        on_request=lambda n: events.append(("request", n)),
        on_next=lambda x: events.append(("next", x)),
        on_complete=lambda: events.append("complete"),
    ).subscribe(recorder)
    source.next(1, 2)
    source.complete()
    recorder.wait()
    assert events == ["subscribe", ("request", 3), ("next", 1), ("next", 2), "complete"]
    assert recorder.elements == [1, 2]
    assert recorder.completed == 1


def test_do_on_error_sees_the_error_and_passes_it_on() -> None:
    seen: list[Exception] = []
    boom = RuntimeError("boom")
    recorder: Recorder[int] = Recorder(1)
    Flow.error(boom).do_on_error(seen.append).subscribe(recorder)
    recorder.wait()
    assert seen == [boom]
    assert recorder.errors == [boom]


def test_a_raising_on_next_cancels_upstream_and_fails_downstream() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(10)
    failure = ValueError("bad element")

    def check(x: int) -> None:
        if x == 2:
            raise failure

    Flow.from_publisher(source).do_on_next(check).subscribe(recorder)
    source.next(1, 2, 3)
    recorder.wait()
    assert recorder.elements == [1]
    assert recorder.errors == [failure]
    assert source.subscription.cancelled == 1
    assert recorder.signals_after_terminal == 0


def test_a_raising_on_request_fails_without_requesting_upstream() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(5)
    failure = ValueError("no requests")

    def refuse(n: int) -> None:
        raise failure

    Flow.from_publisher(source).do_on_request(refuse).subscribe(recorder)
    recorder.wait()
    assert recorder.errors == [failure]
    assert source.subscription.requests == []
    assert source.subscription.cancelled == 1


def test_a_raising_on_complete_becomes_the_error() -> None:
    failure = ValueError("cleanup failed")

    def fail() -> None:
        raise failure

    recorder: Recorder[int] = Recorder(5)
    Flow.just(1).do_on_complete(fail).subscribe(recorder)
    recorder.wait()
    assert recorder.elements == [1]
    assert recorder.errors == [failure]
    assert recorder.completed == 0


def test_a_raising_on_error_replaces_the_error_keeping_it_as_context() -> None:
    original = RuntimeError("original")
    failure = ValueError("handler failed")

    def fail(error: Exception) -> None:
        raise failure

    recorder: Recorder[int] = Recorder(1)
    Flow.error(original).do_on_error(fail).subscribe(recorder)
    recorder.wait()
    assert recorder.errors == [failure]
    assert failure.__context__ is original


def test_a_raising_on_subscribe_cancels_upstream_and_fails_after_on_subscribe() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(5)
    failure = ValueError("no subscription")

    def fail(subscription: Subscription) -> None:
        raise failure

    Flow.from_publisher(source).do_on_subscribe(fail).subscribe(recorder)
    recorder.wait()
    assert recorder.subscription is not None
    assert recorder.errors == [failure]
    assert source.subscription.cancelled == 1
    assert source.subscription.requests == []


def test_on_cancel_runs_once_and_its_error_is_undeliverable() -> None:
    reported: list[BaseException] = []
    previous = set_undeliverable_hook(reported.append)
    try:
        source = ManualPublisher[int]()
        recorder: Recorder[int] = Recorder(1)
        calls: list[int] = []
        failure = ValueError("cancel hook")

        def on_cancel() -> None:
            calls.append(1)
            raise failure

        Flow.from_publisher(source).do_on_cancel(on_cancel).subscribe(recorder)
        recorder.cancel()
        recorder.cancel()
        assert calls == [1]
        assert reported == [failure]
        assert source.subscription.cancelled == 1
    finally:
        set_undeliverable_hook(previous)


def test_on_cancel_does_not_run_after_completion() -> None:
    calls: list[int] = []
    recorder: Recorder[int] = Recorder(5)
    Flow.just(1).do_on_cancel(lambda: calls.append(1)).subscribe(recorder)
    recorder.wait()
    recorder.cancel()
    assert calls == []


def test_log_writes_every_signal_with_its_demand(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="reactive_streams"):
        assert Flow.just(7, 8).log("numbers").take(1).to_list() == [7]
    lines = [r.getMessage() for r in caplog.records if r.name == "reactive_streams"]
    assert [line.split(" [thread")[0] for line in lines] == [
        "numbers | on_subscribe(PullSubscription)",
        "numbers | request(1) demand=1",
        "numbers | on_next(7) demand=1",
        "numbers | cancel()",
    ]


def test_log_shows_unbounded_demand(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="reactive_streams"):
        Flow.just(1).log("n").to_list()
    expected = f"request({MAX_DEMAND}) demand=unbounded"
    assert any(expected in record.getMessage() for record in caplog.records)


@settings(max_examples=100, deadline=None)
@given(requests=st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=8))
def test_tap_sees_what_downstream_gets_from_another_thread(requests: list[int]) -> None:
    """Requests from a second thread: the tap's view equals downstream's, in order."""
    seen: list[int] = []
    asked: list[int] = []
    total = sum(requests)
    recorder: Recorder[int] = Recorder()
    Flow.range(0, total + 5).tap(on_next=seen.append, on_request=asked.append).subscribe(recorder)

    def ask() -> None:
        for n in requests:
            recorder.request(n)

    thread = threading.Thread(target=ask)
    thread.start()
    thread.join(10)
    recorder.wait_for_count(total)
    assert recorder.elements == list(range(total))
    assert seen == recorder.elements
    assert asked == requests
