"""``buffer(size, skip)`` and ``window(count, skip=)``: overlapping lists and lists with gaps."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import MAX_DEMAND
from reactive_streams.operators import Flow
from reactive_streams.reference import IterablePublisher

from .helpers import ManualPublisher, Recorder


def _model(numbers: list[int], size: int, skip: int) -> list[list[int]]:
    """Rx's ``buffer(size, skip)``: a list opens at every ``skip``-th element."""
    return [numbers[start : start + size] for start in range(0, len(numbers), skip)]


def test_the_issues_example() -> None:
    assert Flow.range(0, 7).buffer(3, 2).to_list() == [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6]]


@settings(max_examples=150, deadline=None)
@given(
    numbers=st.lists(st.integers(), max_size=40),
    size=st.integers(min_value=1, max_value=6),
    skip=st.integers(min_value=1, max_value=6),
    pushed=st.booleans(),
)
def test_buffer_matches_the_model(numbers: list[int], size: int, skip: int, pushed: bool) -> None:
    flow = Flow.from_iterable(numbers)
    if pushed:
        flow = Flow.from_publisher(IterablePublisher(numbers))
    assert flow.buffer(size, skip).to_list() == _model(numbers, size, skip)
    windows = flow.window(size, skip=skip).to_list()
    assert [window.to_list() for window in windows] == _model(numbers, size, skip)


@settings(max_examples=100, deadline=None)
@given(
    size=st.integers(min_value=1, max_value=5),
    skip=st.integers(min_value=1, max_value=5),
    requests=st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=5),
)
def test_upstream_demand_is_what_the_requested_lists_need(
    size: int, skip: int, requests: list[int]
) -> None:
    """Lists come out within demand; upstream is asked for no more than they need."""
    source = ManualPublisher[int]()
    recorder: Recorder[list[int]] = Recorder()
    Flow.from_publisher(source).buffer(size, skip).subscribe(recorder)
    sent = 0
    for n in requests:
        recorder.request(n)
        while sent < source.subscription.total_requested:
            source.next(sent)
            sent += 1
    wanted = sum(requests)
    assert len(recorder.elements) == wanted  # no demand lost, none exceeded
    assert recorder.elements == _model(list(range(sent)), size, skip)[:wanted]
    assert sent <= (wanted - 1) * skip + max(size, skip)


def test_lists_wait_for_demand_after_completion() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[list[int]] = Recorder(1)
    Flow.from_publisher(source).buffer(2, 1).subscribe(recorder)
    source.next(0, 1)
    source.complete()
    assert recorder.elements == [[0, 1]]
    recorder.request(MAX_DEMAND)
    recorder.wait()
    assert recorder.elements == [[0, 1], [1]]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="skip"):
        Flow.just(1).buffer(2, 0)
    with pytest.raises(ValueError, match="timeout"):
        Flow.just(1).buffer(2, 1, timeout=1.0)
    with pytest.raises(ValueError, match="skip"):
        Flow.just(1).window(timespan=1.0, skip=2)
