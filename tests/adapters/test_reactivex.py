"""reactive_streams.adapters.reactivex: Observables in, Observables out."""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest
import reactivex
from reactivex import operators as rx_ops
from reactivex.subject import Subject

from reactive_streams import (
    MAX_DEMAND,
    MissingBackpressureError,
    Publisher,
    Subscriber,
    Subscription,
)
from reactive_streams.adapters.reactivex import from_observable, to_observable
from reactive_streams.operators import Flow
from reactive_streams.tck import PublisherVerification
from reactive_streams.testing import RecordingSubscriber, collect

TIMEOUT = 10.0


class _SpySubscription(Subscription):
    def __init__(self, inner: Subscription, spy: _Spy) -> None:
        self._inner = inner
        self._spy = spy

    def request(self, n: int) -> None:
        self._spy.requests.append(n)
        self._inner.request(n)

    def cancel(self) -> None:
        self._spy.cancelled.set()
        self._inner.cancel()


class _SpySubscriber(Subscriber[Any]):
    def __init__(self, downstream: Subscriber[Any], spy: _Spy) -> None:
        self._downstream = downstream
        self._spy = spy

    def on_subscribe(self, subscription: Subscription) -> None:
        self._downstream.on_subscribe(_SpySubscription(subscription, self._spy))

    def on_next(self, element: Any) -> None:
        self._downstream.on_next(element)

    def on_error(self, error: Exception) -> None:
        self._downstream.on_error(error)

    def on_complete(self) -> None:
        self._downstream.on_complete()


class _Spy(Publisher[Any]):
    """Records the requests and the cancel its subscriber sends upstream."""

    def __init__(self, source: Publisher[Any]) -> None:
        self._source = source
        self.requests: list[int] = []
        self.cancelled = threading.Event()

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self._source.subscribe(_SpySubscriber(subscriber, self))


# ---------------------------------------------------------------- round trips
def test_from_observable_round_trip_is_exact() -> None:
    data = list(range(1000))
    publisher = from_observable(reactivex.from_iterable(data), buffer_size=len(data))
    assert collect(publisher) == data
    assert publisher.statistics().dropped == 0


def test_to_observable_round_trip_is_exact() -> None:
    data = list(range(1000))
    received: list[list[int]] = []
    to_observable(Flow.from_iterable(data), prefetch=16).pipe(rx_ops.to_list()).subscribe(
        on_next=received.append
    )
    assert received == [data]


def test_both_directions_round_trip() -> None:
    data = [f"item-{i}" for i in range(500)]
    observable = to_observable(Flow.from_iterable(data), prefetch=8)
    assert collect(from_observable(observable, buffer_size=len(data))) == data


def test_to_observable_requests_in_batches_and_replenishes_at_75_percent() -> None:
    spy = _Spy(Flow.range(0, 100))
    out: list[int] = []
    to_observable(spy, prefetch=16).subscribe(on_next=out.append)
    assert out == list(range(100))
    assert spy.requests[0] == 16
    assert set(spy.requests[1:]) == {12}  # replenish_threshold(16) == 12


def test_to_observable_dispose_cancels() -> None:
    spy = _Spy(Flow.interval(0.001))
    got = threading.Event()
    disposable = to_observable(spy, prefetch=4).subscribe(on_next=lambda _x: got.set())
    assert got.wait(TIMEOUT)
    disposable.dispose()
    assert spy.cancelled.wait(TIMEOUT)


def test_to_observable_passes_errors_on() -> None:
    errors: list[Exception] = []
    to_observable(Flow.error(ValueError("boom"))).subscribe(on_error=errors.append)
    assert [str(e) for e in errors] == ["boom"]


@pytest.mark.parametrize(
    "source", [Flow.range(0, 3), Flow.error(ValueError("boom"))], ids=["complete", "error"]
)
def test_to_observable_does_not_cancel_from_a_terminal_signal(source: Flow[int]) -> None:
    # reactivex's AutoDetachObserver disposes as it passes on_completed/on_error on; that
    # dispose must not become a cancel from inside on_complete/on_error (Rule 2.3).
    spy = _Spy(source)
    ended = threading.Event()
    to_observable(spy, prefetch=4).subscribe(
        on_error=lambda _e: ended.set(), on_completed=ended.set
    )
    assert ended.wait(TIMEOUT)
    assert not spy.cancelled.is_set()


def test_from_observable_passes_errors_on() -> None:
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=10)
    from_observable(
        reactivex.concat(reactivex.of(1, 2), reactivex.throw(KeyError("x"))), buffer_size=4
    ).subscribe(subscriber)
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.elements == [1, 2]
    assert isinstance(subscriber.error, KeyError)


def test_cancel_disposes_the_observable_subscription() -> None:
    subject: Subject[int] = Subject()
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=5)
    from_observable(subject, buffer_size=4).subscribe(subscriber)
    subject.on_next(1)
    assert subject.observers
    assert subscriber.subscription is not None
    subscriber.subscription.cancel()
    assert not subject.observers


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match=r"^buffer_size must be positive, got 0$"):
        from_observable(reactivex.empty(), buffer_size=0)
    with pytest.raises(ValueError, match=r"overflow must be"):
        from_observable(reactivex.empty(), buffer_size=1, overflow="wat")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^prefetch must be positive, got 0$"):
        to_observable(Flow.empty(), prefetch=0)


# ---------------------------------------------------------------- a hot Subject, 10x too fast
PUSHED = 200
BUFFER = 8


def _push_ten_times_faster(
    overflow: Any,
) -> tuple[RecordingSubscriber[int], Any, list[int]]:
    """Push PUSHED elements; the subscriber takes one element per ten pushed."""
    subject: Subject[int] = Subject()
    drops: list[int] = []
    publisher = from_observable(
        subject, buffer_size=BUFFER, overflow=overflow, on_drop=drops.append
    )
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=1)
    publisher.subscribe(subscriber)
    for value in range(PUSHED):
        subject.on_next(value)
        if value % 10 == 9:
            subscriber.request(1)
    subject.on_completed()
    return subscriber, publisher, drops


@pytest.mark.parametrize("overflow", ["drop_oldest", "drop_latest"])
def test_hot_subject_drops_are_counted(overflow: str) -> None:
    subscriber, publisher, drops = _push_ten_times_faster(overflow)
    arrived_before_drain = len(subscriber.elements)
    assert arrived_before_drain == 1 + PUSHED // 10  # the first, then one per ten pushed
    subscriber.request(MAX_DEMAND)  # take what is still buffered
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.completed
    stats = publisher.statistics()
    arrived = len(subscriber.elements)
    assert stats.dropped == len(drops) == PUSHED - arrived
    # the last request took one element out of a full buffer: BUFFER - 1 were left
    assert arrived == arrived_before_drain + BUFFER - 1
    assert subscriber.elements == sorted(subscriber.elements)
    assert sorted(subscriber.elements + drops) == list(range(PUSHED))
    # drop_oldest keeps the newest BUFFER elements, drop_latest the oldest waiting ones
    tail = subscriber.elements[-BUFFER:]
    if overflow == "drop_oldest":
        assert tail == list(range(PUSHED - BUFFER, PUSHED))
    else:
        assert tail[-1] < PUSHED - BUFFER


def test_hot_subject_overflow_error_names_the_bound() -> None:
    subscriber, publisher, drops = _push_ten_times_faster("error")
    assert subscriber.wait_terminated(TIMEOUT)
    assert isinstance(subscriber.error, MissingBackpressureError)
    assert f"buffer of {BUFFER} elements is full" in str(subscriber.error)
    assert drops == []
    assert publisher.statistics().dropped == 0
    # the first element was requested; then BUFFER + 1 pushed without demand overflows
    assert subscriber.elements == [0]


def test_hot_subject_from_another_thread() -> None:
    subject: Subject[int] = Subject()
    publisher = from_observable(subject, buffer_size=BUFFER, overflow="drop_latest")
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=3)
    publisher.subscribe(subscriber)

    def push() -> None:
        for value in range(1000):
            subject.on_next(value)
        subject.on_completed()

    thread = threading.Thread(target=push)
    thread.start()
    thread.join(TIMEOUT)
    subscriber.request(MAX_DEMAND)
    assert subscriber.wait_terminated(TIMEOUT)
    assert len(subscriber.elements) + publisher.statistics().dropped == 1000
    assert subscriber.elements == sorted(subscriber.elements)


def test_metrics_show_the_adapter() -> None:
    flow = Flow.from_publisher(from_observable(reactivex.of(1, 2, 3), buffer_size=4)).map(str)
    assert list(flow) == ["1", "2", "3"]
    names = [key.split(":", 1)[1] for key in flow.metrics()]
    assert "from_observable" in names


# ---------------------------------------------------------------- the TCK
class TestFromColdObservable(PublisherVerification):
    """``from_observable`` of a cold Observable whose buffer holds the whole stream."""

    max_elements_from_publisher = 1024

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return from_observable(reactivex.from_iterable(range(elements)), buffer_size=1024)

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return from_observable(reactivex.throw(RuntimeError("TCK: failed")), buffer_size=1)


class TestToObservableRoundTrip(PublisherVerification):
    """``to_observable`` seen through ``from_observable``: the pair passes the TCK."""

    max_elements_from_publisher = 1024

    def create_publisher(self, elements: int) -> Publisher[Any]:
        observable = to_observable(Flow.range(0, elements), prefetch=32)
        return from_observable(observable, buffer_size=1024)

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return from_observable(to_observable(Flow.error(RuntimeError("TCK"))), buffer_size=1)


def test_without_reactivex_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "reactivex", None)
    hint = (
        r"^reactive_streams.adapters.reactivex needs reactivex: "
        r"pip install 'reactive-streams-py\[reactivex\]'$"
    )
    with pytest.raises(ImportError, match=hint):
        from_observable(Subject(), buffer_size=1)
    with pytest.raises(ImportError, match=hint):
        to_observable(Flow.empty())
