"""``group_by``: merge gives back the input, reopened keys, limits, the stall caveat, TCK."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import MAX_DEMAND, Publisher
from reactive_streams.operators import Flow, GroupedFlow, TooManyGroupsError
from reactive_streams.tck import PublisherVerification
from reactive_streams.testing import RecordingSubscriber, VirtualTimeScheduler


def _tagged(group: GroupedFlow[int, int]) -> Flow[tuple[int, int]]:
    return group.map(lambda x: (group.key, x))


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.integers(0, 30), max_size=200),
    st.integers(1, 6),
    st.integers(1, 16),
)
def test_group_by_then_merge_gives_the_input_with_each_keys_order(
    values: list[int], modulus: int, prefetch: int
) -> None:
    out = (
        Flow.from_iterable(values)
        .group_by(lambda x: x % modulus, prefetch=prefetch)
        .flat_map(_tagged, concurrency=modulus, prefetch=4)
        .to_list(timeout=10)
    )
    assert sorted(x for _, x in out) == sorted(values)
    for key in range(modulus):
        assert [x for k, x in out if k == key] == [x for x in values if x % modulus == key]
        assert all(x % modulus == k for k, x in out)


def test_a_cancelled_group_reopens_when_its_key_returns() -> None:
    keys: list[int] = []

    def first_of(group: GroupedFlow[int, int]) -> Flow[int]:
        keys.append(group.key)
        return group.take(1)

    out = Flow.range(0, 6).group_by(lambda x: x % 2).concat_map(first_of).to_list(timeout=5)
    assert out == [0, 1, 2, 3, 4, 5]
    assert keys == [0, 1, 0, 1, 0, 1]


def test_more_than_max_groups_is_an_error_naming_the_limit() -> None:
    recorder = RecordingSubscriber[Any](initial_request=100)
    Flow.range(0, 10).group_by(lambda x: x, max_groups=3).flat_map(
        lambda g: g, concurrency=16
    ).subscribe(recorder)
    assert isinstance(recorder.error, TooManyGroupsError)
    assert str(recorder.error) == (
        "group_by: a new key 3 arrived while max_groups=3 groups are live; raise "
        "max_groups, or consume (or cancel) groups so they can close"
    )


def test_key_error_reaches_the_main_subscriber_and_the_groups() -> None:
    main = RecordingSubscriber[GroupedFlow[int, int]](initial_request=10)
    Flow.range(0, 5).group_by(lambda x: 1 // (2 - x)).subscribe(main)
    assert isinstance(main.error, ZeroDivisionError)
    group = RecordingSubscriber[int](initial_request=10)
    main.elements[0].subscribe(group)
    assert isinstance(group.error, ZeroDivisionError)


def test_upstream_demand_is_bounded_by_the_groups() -> None:
    pulled: list[int] = []

    def source() -> Any:
        for value in range(1000):
            pulled.append(value)
            yield value

    main = RecordingSubscriber[GroupedFlow[int, int]](initial_request=10)
    Flow.from_iterable(source()).group_by(lambda x: x % 2, prefetch=8).subscribe(main)
    assert len(pulled) == 8  # nobody consumed a group yet
    odd = RecordingSubscriber[int](initial_request=3)
    main.elements[1].subscribe(odd)
    assert odd.elements == [1, 3, 5]
    assert len(pulled) <= 8 + 6  # refilled at 75%, by what was consumed
    main.cancel()
    odd.cancel()


def test_an_unconsumed_group_stalls_every_group_and_timeout_reports_it() -> None:
    """Reactor's caveat: the even group is never subscribed, so the odd one stalls too."""
    clock = VirtualTimeScheduler()
    main = RecordingSubscriber[GroupedFlow[int, int]](initial_request=2)
    Flow.range(0, 1000).group_by(lambda x: x % 2, prefetch=16).subscribe(main)
    odd_group = main.elements[1]
    odd = RecordingSubscriber[int](initial_request=1000)
    odd_group.timeout(5, scheduler=clock).subscribe(odd)
    assert len(odd.elements) < 20  # the even group's 8+ elements hold the prefetch
    clock.advance(5)
    assert isinstance(odd.error, TimeoutError)
    assert str(odd.error) == "timeout: no element within 5 seconds"


def test_cancelling_main_drops_unemitted_groups_and_cancels_upstream() -> None:
    closed: list[bool] = []

    def source() -> Iterator[int]:
        try:
            yield from range(100)
        finally:
            closed.append(True)  # from_iterable closes the generator on cancel

    main = RecordingSubscriber[GroupedFlow[int, int]](initial_request=1)
    flow = Flow.from_iterable(source()).group_by(lambda x: x % 3, prefetch=8)
    flow.subscribe(main)
    first = RecordingSubscriber[int](initial_request=100)
    main.elements[0].subscribe(first)
    main.cancel()  # groups 1 and 2 were never emitted: dropped, counted
    first.cancel()
    assert closed == [True]
    stats = flow.metrics()["1:group_by"]
    assert stats.dropped > 0


def test_group_accepts_one_subscriber() -> None:
    main = RecordingSubscriber[GroupedFlow[int, int]](initial_request=1)
    Flow.range(0, 3).group_by(lambda x: 0).subscribe(main)
    group = main.elements[0]
    assert group.key == 0
    assert repr(group) == "GroupedFlow(key=0)"
    first = RecordingSubscriber[int](initial_request=10)
    second = RecordingSubscriber[int](initial_request=10)
    group.subscribe(first)
    group.subscribe(second)
    assert first.elements == [0, 1, 2]
    assert first.completed
    assert isinstance(second.error, RuntimeError)
    assert str(second.error) == "group 0 already has a subscriber"


def test_a_group_cancelled_from_inside_on_next_gets_no_further_element() -> None:
    main = RecordingSubscriber[GroupedFlow[int, int]](initial_request=2)
    Flow.range(0, 12).group_by(lambda x: x % 2).subscribe(main)
    even = _CancelOnFirst()
    main.elements[0].subscribe(even)
    even.request(6)  # six elements are queued: the first on_next cancels
    assert even.elements == [0]
    assert not even.terminated
    assert even.violations == []


def test_main_cancelled_from_inside_on_next_gets_no_further_group() -> None:
    main = _CancelOnFirst()
    Flow.range(0, 12).group_by(lambda x: x % 3).subscribe(main)
    main.request(3)
    assert [group.key for group in main.elements] == [0]


class _CancelOnFirst(RecordingSubscriber[Any]):
    """Cancels from inside its first ``on_next``."""

    def on_next(self, element: Any) -> None:
        super().on_next(element)
        self.cancel()


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^max_groups must be positive, got 0$"):
        Flow.range(1).group_by(lambda x: x, max_groups=0)


def _first_group(flow: Flow[GroupedFlow[int, int]]) -> Publisher[int]:
    main = RecordingSubscriber[GroupedFlow[int, int]](initial_request=1)
    flow.subscribe(main)
    assert main.wait_for_elements(1, 5)
    return main.elements[0]


class TestGroupByGroup(PublisherVerification):
    """A group of ``group_by`` (one key for every element) is a publisher on its own."""

    def create_publisher(self, elements: int) -> Publisher[Any]:
        if elements == 0:
            return Flow.empty()  # no element, no group: the empty case is the main flow's
        if elements == MAX_DEMAND:
            source: Flow[int] = Flow.from_iterable(itertools.count())
        else:
            source = Flow.range(0, elements)
        return _first_group(source.group_by(lambda x: 0, prefetch=16))

    def create_failed_publisher(self) -> Publisher[Any] | None:
        failing = Flow.just(1).concat_with(Flow.error(RuntimeError("TCK: failed publisher")))
        return _first_group(failing.group_by(lambda x: 0, prefetch=1))
