"""``skip_while``, ``distinct`` (bounded memory) and ``take_until``."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import MAX_DEMAND, Publisher, Subscriber
from reactive_streams.operators import Flow
from reactive_streams.reference import IterablePublisher

from .helpers import ManualPublisher, Recorder


def test_skip_while_on_both_paths() -> None:
    numbers = [1, 2, 5, 1, 7]
    expected = [5, 1, 7]
    assert Flow.from_iterable(numbers).skip_while(lambda x: x < 3).to_list() == expected
    pushed = Flow.from_publisher(IterablePublisher(numbers))
    assert pushed.skip_while(lambda x: x < 3).to_list() == expected


def test_skip_while_stops_calling_the_predicate() -> None:
    calls: list[int] = []

    def small(x: int) -> bool:
        calls.append(x)
        return x < 3

    assert Flow.just(1, 5, 1, 2).skip_while(small).to_list() == [5, 1, 2]
    assert calls == [1, 5]


def test_skip_while_re_requests_dropped_elements() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(1)
    Flow.from_publisher(source).skip_while(lambda x: x < 3).subscribe(recorder)
    source.next(0, 1)
    assert source.subscription.requests == [1, 1, 1]
    source.next(4)
    assert recorder.elements == [4]


@settings(max_examples=150, deadline=None)
@given(
    numbers=st.lists(st.integers(min_value=0, max_value=9), max_size=40),
    max_keys=st.integers(min_value=1, max_value=12),
    pushed=st.booleans(),
)
def test_distinct_matches_a_bounded_lru_model(
    numbers: list[int], max_keys: int, pushed: bool
) -> None:
    remembered: list[int] = []  # least recently seen first
    expected = []
    for x in numbers:
        if x in remembered:
            remembered.remove(x)
            remembered.append(x)
            continue
        expected.append(x)
        remembered.append(x)
        if len(remembered) > max_keys:
            remembered.pop(0)
        assert len(remembered) <= max_keys
    source = (
        Flow.from_publisher(IterablePublisher(numbers)) if pushed else Flow.from_iterable(numbers)
    )
    assert source.distinct(max_keys=max_keys).to_list() == expected


def test_distinct_with_a_key_and_the_default_bound() -> None:
    assert Flow.just("a", "B", "A", "b", "c").distinct(str.lower).to_list() == ["a", "B", "c"]
    with pytest.raises(ValueError, match="max_keys"):
        Flow.just(1).distinct(max_keys=0)


def test_take_until_subscribes_to_other_first() -> None:
    order: list[str] = []

    class Noted(Publisher[int]):
        def __init__(self, name: str, inner: Publisher[int]) -> None:
            self.name = name
            self.inner = inner

        def subscribe(self, subscriber: Subscriber[int]) -> None:
            order.append(self.name)
            self.inner.subscribe(subscriber)

    main = Noted("main", ManualPublisher[int]())
    other = Noted("other", ManualPublisher[int]())
    Flow.from_publisher(main).take_until(other).subscribe(Recorder[int](1))
    assert order == ["other", "main"]


def test_take_until_completes_at_others_first_element_and_cancels_both() -> None:
    source = ManualPublisher[int]()
    other = ManualPublisher[str]()
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    Flow.from_publisher(source).take_until(other).subscribe(recorder)
    assert other.subscription.requests == [1]
    source.next(1, 2)
    other.next("stop")
    recorder.wait()
    assert recorder.elements == [1, 2]
    assert recorder.completed == 1
    assert source.subscription.cancelled == 1
    assert other.subscription.cancelled == 1
    source.next(3)  # a late element after cancel is ignored (Rule 2.8)
    assert recorder.elements == [1, 2]
    assert recorder.signals_after_terminal == 0


def test_take_until_other_completing_alone_does_not_stop() -> None:
    source = ManualPublisher[int]()
    other = ManualPublisher[str]()
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    Flow.from_publisher(source).take_until(other).subscribe(recorder)
    other.complete()
    source.next(1)
    source.complete()
    recorder.wait()
    assert recorder.elements == [1]
    assert recorder.completed == 1


def test_take_until_others_error_fails_and_cancels_upstream() -> None:
    source = ManualPublisher[int]()
    other = ManualPublisher[str]()
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    failure = RuntimeError("other failed")
    Flow.from_publisher(source).take_until(other).subscribe(recorder)
    other.error(failure)
    recorder.wait()
    assert recorder.errors == [failure]
    assert source.subscription.cancelled == 1


def test_take_until_cancels_other_when_the_source_completes() -> None:
    other = ManualPublisher[str]()
    assert Flow.just(1, 2).take_until(other).to_list() == [1, 2]
    assert other.subscription.cancelled == 1


def test_take_until_an_immediate_other_gives_an_empty_flow() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(5)
    Flow.from_publisher(source).take_until(Flow.just("now")).subscribe(recorder)
    recorder.wait()
    assert recorder.subscription is not None  # on_subscribe came first (Rule 1.9)
    assert recorder.elements == []
    assert recorder.completed == 1
    assert source.subscription.cancelled == 1


@settings(max_examples=60, deadline=None)
@given(elements=st.integers(min_value=0, max_value=300), stop_after=st.integers(0, 300))
def test_take_until_from_another_thread_ends_once_with_a_prefix(
    elements: int, stop_after: int
) -> None:
    """``other`` fires on a second thread while the source emits: one terminal, a prefix."""
    source = ManualPublisher[int]()
    other = ManualPublisher[str]()
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    Flow.from_publisher(source).take_until(other).subscribe(recorder)
    half = threading.Event()

    def fire() -> None:
        half.wait(10)
        other.next("stop")

    thread = threading.Thread(target=fire)
    thread.start()
    for number in range(elements):
        if number == stop_after:
            half.set()
        source.next(number)
    half.set()
    thread.join(10)
    recorder.wait()
    assert recorder.completed == 1
    assert not recorder.errors
    assert recorder.elements == list(range(len(recorder.elements)))
    assert len(recorder.elements) >= min(stop_after, elements)
    assert recorder.signals_after_terminal == 0
