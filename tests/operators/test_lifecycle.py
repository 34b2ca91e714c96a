"""Lifecycle: ``Flow.using`` (cleanup exactly once) and ``KillSwitch`` (stop flows from outside)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import Subscriber, Subscription, set_undeliverable_hook
from reactive_streams.operators import Flow, KillSwitch

from .helpers import ManualPublisher, Recorder


class _Resource:
    """Records what happened to it, and in which order relative to the stream's signals."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.source = ManualPublisher[int]()

    def close(self) -> None:
        self.log.append("cleanup")


class _Logging(Recorder[int]):
    def __init__(self, log: list[str], initial: int = 0) -> None:
        super().__init__(initial)
        self.log = log

    def on_error(self, error: Exception) -> None:
        self.log.append("on_error")
        super().on_error(error)

    def on_complete(self) -> None:
        self.log.append("on_complete")
        super().on_complete()


def _using(initial: int = 0) -> tuple[_Resource, _Logging, list[str]]:
    log: list[str] = []
    resources: list[_Resource] = []

    def open_resource() -> _Resource:
        resources.append(_Resource(log))
        return resources[-1]

    recorder = _Logging(log, initial)
    Flow.using(open_resource, lambda r: r.source, _Resource.close).subscribe(recorder)
    return resources[0], recorder, log


def test_using_cleans_up_before_completion() -> None:
    resource, recorder, log = _using(5)
    resource.source.next(1, 2)
    resource.source.complete()
    assert recorder.elements == [1, 2]
    assert log == ["cleanup", "on_complete"]


def test_using_cleans_up_before_an_error() -> None:
    resource, _, log = _using(5)
    resource.source.error(KeyError("boom"))
    assert log == ["cleanup", "on_error"]


def test_using_cancels_upstream_then_cleans_up() -> None:
    log: list[str] = []
    source = ManualPublisher[int]()
    cancelled_at_cleanup: list[int] = []

    def cleanup(_: object) -> None:
        cancelled_at_cleanup.append(source.subscription.cancelled)

    recorder: Recorder[int] = Recorder(1)
    Flow.using(lambda: "r", lambda _: source, cleanup).subscribe(recorder)
    recorder.cancel()
    recorder.cancel()
    assert cancelled_at_cleanup == [1]
    assert log == []


@pytest.mark.parametrize("how", ["bad_request", "raising_on_next"])
def test_using_cleans_up_when_the_stage_ends_itself(how: str) -> None:
    cleaned: list[object] = []
    source = ManualPublisher[int]()

    class Raising(Recorder[int]):
        def on_next(self, element: int) -> None:
            raise RuntimeError("downstream broke Rule 2.13")

    recorder: Recorder[int] = Raising(1) if how == "raising_on_next" else Recorder()
    Flow.using(lambda: "r", lambda _: source, cleaned.append).subscribe(recorder)
    if how == "bad_request":
        recorder.request(0)
        assert recorder.errors
    else:
        source.next(1)
    assert cleaned == ["r"]
    assert source.subscription.cancelled >= 1


def test_using_factories_that_raise() -> None:
    cleaned: list[object] = []

    def no_resource() -> str:
        raise OSError("cannot open")

    recorder: Recorder[int] = Recorder(1)
    Flow.using(no_resource, lambda _: Flow.just(1), cleaned.append).subscribe(recorder)
    assert isinstance(recorder.errors[0], OSError)
    assert cleaned == []

    def no_flow(_: str) -> Flow[int]:
        raise ValueError("no flow")

    recorder = Recorder(1)
    Flow.using(lambda: "r", no_flow, cleaned.append).subscribe(recorder)
    assert isinstance(recorder.errors[0], ValueError)
    assert cleaned == ["r"]


def test_a_raising_cleanup_fails_a_completion_and_is_reported_after_a_cancel() -> None:
    def cleanup(_: object) -> None:
        raise OSError("close failed")

    recorder: Recorder[int] = Recorder(5)
    Flow.using(lambda: "r", lambda _: Flow.just(1), cleanup).subscribe(recorder)
    assert recorder.elements == [1]
    assert [str(e) for e in recorder.errors] == ["close failed"]
    assert recorder.completed == 0
    reported: list[BaseException] = []
    previous = set_undeliverable_hook(reported.append)
    try:
        source = ManualPublisher[int]()
        recorder = Recorder(1)
        Flow.using(lambda: "r", lambda _: source, cleanup).subscribe(recorder)
        recorder.cancel()
    finally:
        set_undeliverable_hook(previous)
    assert [str(e) for e in reported] == ["close failed"]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from(["next", "request", "complete", "error", "cancel", "bad"])),
)
def test_using_cleans_up_exactly_once_whatever_happens(steps: list[str]) -> None:
    cleaned: list[object] = []
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(1)
    Flow.using(lambda: "r", lambda _: source, cleaned.append).subscribe(recorder)
    requested = 1
    sent = 0
    ended = False
    for step in steps:
        if step == "next" and not ended and sent < requested:
            source.next(sent)
            sent += 1
        elif step == "request":
            recorder.request(1)
            requested += 1
        elif step in ("complete", "error") and not ended:
            ended = True
            source.complete() if step == "complete" else source.error(KeyError("e"))
        elif step == "cancel":
            recorder.cancel()
        elif step == "bad":
            recorder.request(-1)
    recorder.cancel()  # whatever happened, the stream is over now
    assert cleaned == ["r"]
    assert recorder.completed + len(recorder.errors) <= 1
    assert recorder.signals_after_terminal == 0


def _race_cancel_with_completion() -> list[object]:
    cleaned: list[object] = []
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(1)
    Flow.using(lambda: "r", lambda _: source, cleaned.append).subscribe(recorder)
    racer = threading.Thread(target=recorder.cancel)
    racer.start()
    source.complete()
    racer.join(10)
    assert not racer.is_alive()
    return cleaned


def test_using_cleanup_once_when_cancel_races_completion() -> None:
    for _ in range(200):
        assert _race_cancel_with_completion() == ["r"]


# --------------------------------------------------------------------------- KillSwitch


def test_shutdown_completes_every_attached_flow_and_cancels_upstream() -> None:
    switch = KillSwitch("test")
    sources = [ManualPublisher[int](), ManualPublisher[int]()]
    recorders: list[Recorder[int]] = [Recorder(5), Recorder(5)]
    for source, recorder in zip(sources, recorders, strict=True):
        Flow.from_publisher(source).via(switch.flow()).subscribe(recorder)
    sources[0].next(1)
    assert switch.attached == 2
    switch.shutdown()
    switch.abort(KeyError("too late"))  # the first trigger wins
    assert [r.completed for r in recorders] == [1, 1]
    assert recorders[0].elements == [1]
    assert [s.subscription.cancelled for s in sources] == [1, 1]
    assert switch.attached == 0
    assert switch.triggered
    late: Recorder[int] = Recorder(5)
    Flow.just(1, 2).via(switch.flow()).subscribe(late)
    assert late.completed == 1
    assert late.elements == []


def test_abort_fails_every_attached_flow() -> None:
    switch = KillSwitch()
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(5)
    Flow.from_publisher(source).via(switch.flow()).subscribe(recorder)
    failure = KeyError("stop")
    switch.abort(failure)
    assert recorder.errors == [failure]
    assert source.subscription.cancelled == 1
    late: Recorder[int] = Recorder(5)
    Flow.just(1).via(switch.flow()).subscribe(late)
    assert late.errors == [failure]
    with pytest.raises(TypeError, match="needs an Exception"):
        switch.abort("no")  # type: ignore[arg-type]


def test_flows_that_end_by_themselves_detach() -> None:
    switch = KillSwitch()
    assert Flow.range(0, 3).via(switch.flow()).to_list() == [0, 1, 2]
    assert Flow.range(0, 3).via(switch.flow()).take(1).to_list() == [0]
    assert switch.attached == 0
    assert not switch.triggered


class _Endless(Subscriber[int]):
    """Requests one at a time from inside ``on_next``, forever."""

    def __init__(self) -> None:
        self.subscription: Subscription | None = None
        self.count = 0
        self.terminals: list[Any] = []
        self.started = threading.Event()
        self.ended = threading.Event()

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(1)

    def on_next(self, element: int) -> None:
        self.count += 1
        self.started.set()
        assert self.subscription is not None
        self.subscription.request(1)

    def on_error(self, error: Exception) -> None:
        self.terminals.append(error)
        self.ended.set()

    def on_complete(self) -> None:
        self.terminals.append("complete")
        self.ended.set()


def test_shutdown_from_another_thread_stops_running_flows() -> None:
    switch = KillSwitch()
    subscribers = [_Endless() for _ in range(3)]
    threads = []
    for subscriber in subscribers:
        flow = Flow.range(0, 10**12).via(switch.flow())
        thread = threading.Thread(target=flow.subscribe, args=(subscriber,), daemon=True)
        thread.start()
        threads.append(thread)
    for subscriber in subscribers:
        assert subscriber.started.wait(10)
    switch.shutdown()
    for subscriber, thread in zip(subscribers, threads, strict=True):
        assert subscriber.ended.wait(10)
        thread.join(10)
        assert not thread.is_alive()
        assert subscriber.terminals == ["complete"]


def test_the_switch_processor_outside_via_waits_for_its_subscriber() -> None:
    processor = KillSwitch().flow()()
    source = ManualPublisher[int]()
    source.subscribe(processor)  # upstream first: kept until a subscriber comes
    recorder: Recorder[int] = Recorder(2)
    processor.subscribe(recorder)
    source.next(1)
    source.complete()
    assert recorder.elements == [1]
    assert recorder.completed == 1
    second: Recorder[int] = Recorder(1)
    processor.subscribe(second)  # a processor serves one subscriber
    assert len(second.errors) == 1

    processor = KillSwitch().flow()()
    source = ManualPublisher[int]()
    source.subscribe(processor)
    source.next(1)  # nobody requested it: upstream broke Rule 1.1
    recorder = Recorder(1)
    processor.subscribe(recorder)
    assert "Rule 1.1" in str(recorder.errors[0])
    assert source.subscription.cancelled == 1
