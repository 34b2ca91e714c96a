"""Folds (one-element flows, Reactor's semantics), ``take_last``, and the empty-stream pair."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import MAX_DEMAND
from reactive_streams.operators import Flow
from reactive_streams.reference import IterablePublisher

from .helpers import ManualPublisher, Recorder


def test_count_last_collect_to_dict() -> None:
    numbers = Flow.range(0, 6)
    assert numbers.count().to_list() == [6]
    assert Flow.empty().count().to_list() == [0]
    assert numbers.last().to_list() == [5]
    assert numbers.collect(list, list.append).to_list() == [[0, 1, 2, 3, 4, 5]]
    assert numbers.to_dict(lambda x: x % 3).to_list() == [{0: 3, 1: 4, 2: 5}]
    assert numbers.to_dict(str, lambda x: x * x).to_list() == [
        {"0": 0, "1": 1, "2": 4, "3": 9, "4": 16, "5": 25}
    ]


def test_last_of_an_empty_flow_needs_a_default() -> None:
    assert Flow.empty().last(default=7).to_list() == [7]
    with pytest.raises(LookupError, match="empty flow"):
        Flow.empty().last().to_list()


def test_element_at_requests_only_up_to_the_index_and_cancels() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    Flow.from_publisher(source).element_at(2).subscribe(recorder)
    assert source.subscription.requests == [3]
    source.next(10, 11, 12)
    recorder.wait()
    assert recorder.elements == [12]
    assert recorder.completed == 1
    assert source.subscription.cancelled == 1


def test_element_at_past_the_end() -> None:
    assert Flow.range(0, 2).element_at(5, default=-1).to_list() == [-1]
    with pytest.raises(IndexError, match="only 2 elements"):
        Flow.range(0, 2).element_at(5).to_list()


def test_all_and_any_stop_at_the_answer() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[bool] = Recorder(1)
    Flow.from_publisher(source).all(lambda x: x < 3).subscribe(recorder)
    source.next(1, 2, 5)
    recorder.wait()
    assert recorder.elements == [False]
    assert source.subscription.cancelled == 1
    assert Flow.empty().all(bool).to_list() == [True]
    assert Flow.empty().any(bool).to_list() == [False]
    assert Flow.range(0, 4).any(lambda x: x == 3).to_list() == [True]
    assert Flow.range(0, 4).any(lambda x: x == 9).to_list() == [False]


def test_the_result_waits_for_demand_and_nothing_is_read_before_it() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder()
    Flow.from_publisher(source).count().subscribe(recorder)
    assert source.subscription.requests == []
    recorder.request(1)
    assert source.subscription.requests == [MAX_DEMAND]
    source.next(1, 2)
    source.complete()
    recorder.wait()
    assert recorder.elements == [2]


def test_a_raising_function_cancels_upstream_and_fails() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[bool] = Recorder(1)
    failure = ValueError("bad predicate")

    def predicate(x: int) -> bool:
        raise failure

    Flow.from_publisher(source).any(predicate).subscribe(recorder)
    source.next(1)
    recorder.wait()
    assert recorder.errors == [failure]
    assert source.subscription.cancelled == 1


def test_collect_factory_failure_fails_the_subscriber() -> None:
    def factory() -> list[int]:
        raise RuntimeError("no container")

    with pytest.raises(RuntimeError, match="no container"):
        Flow.range(0, 3).collect(factory, list.append).to_list()


def test_take_last_keeps_a_ring_and_delivers_within_demand() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(1)
    Flow.from_publisher(source).take_last(3).subscribe(recorder)
    assert source.subscription.requests == [MAX_DEMAND]
    source.next(*range(100))
    source.complete()
    assert recorder.elements == [97]
    recorder.request(5)
    recorder.wait()
    assert recorder.elements == [97, 98, 99]
    assert Flow.range(0, 2).take_last(5).to_list() == [0, 1]
    assert Flow.range(0, 5).take_last(0).to_list() == []


@settings(max_examples=100, deadline=None)
@given(
    numbers=st.lists(st.integers(min_value=-5, max_value=5), max_size=30),
    count=st.integers(min_value=0, max_value=8),
    index=st.integers(min_value=0, max_value=10),
)
def test_folds_match_python(numbers: list[int], count: int, index: int) -> None:
    """Pushed flows: each fold equals the plain-Python answer."""
    flow = Flow.from_publisher(IterablePublisher(numbers))
    assert flow.count().to_list() == [len(numbers)]
    assert flow.last(default=99).to_list() == [numbers[-1] if numbers else 99]
    assert flow.all(lambda x: x > 0).to_list() == [all(x > 0 for x in numbers)]
    assert flow.any(lambda x: x > 3).to_list() == [any(x > 3 for x in numbers)]
    assert flow.take_last(count).to_list() == (numbers[-count:] if count else [])
    expected = numbers[index] if index < len(numbers) else -1
    assert flow.element_at(index, default=-1).to_list() == [expected]
    assert flow.to_dict(abs).to_list() == [{abs(x): x for x in numbers}]


def test_default_if_empty() -> None:
    assert Flow.empty().default_if_empty(0).to_list() == [0]
    assert Flow.range(1, 3).default_if_empty(0).to_list() == [1, 2]
    with pytest.raises(TypeError, match=r"2\.13"):
        Flow.empty().default_if_empty(None)


def test_switch_if_empty_carries_demand_over() -> None:
    source = ManualPublisher[int]()
    other = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(4)
    Flow.from_publisher(source).switch_if_empty(other).subscribe(recorder)
    source.complete()
    assert other.subscription.requests == [4]
    other.next(7)
    other.complete()
    recorder.wait()
    assert recorder.elements == [7]


def test_switch_if_empty_does_not_switch_after_an_element() -> None:
    other = ManualPublisher[int]()
    assert Flow.just(1).switch_if_empty(other).to_list() == [1]
    assert other.subscriber is None


def test_switch_if_empty_passes_an_error_on() -> None:
    with pytest.raises(KeyError):
        Flow.error(KeyError("x")).switch_if_empty(Flow.just(1)).to_list()
