"""``limit_rate``: upstream is never owed more than ``high_tide``; refills at ``low_tide``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import MAX_DEMAND
from reactive_streams.operators import Flow

from .helpers import ManualPublisher, Recorder


def test_unbounded_demand_becomes_batches_refilled_at_75_percent() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    Flow.from_publisher(source).limit_rate(8).subscribe(recorder)
    assert source.subscription.requests == [8]
    source.next(*range(5))
    assert source.subscription.requests == [8]  # 3 still owed, above 8 - 6
    source.next(5)
    assert source.subscription.requests == [8, 6]  # 6 arrived: refill to 8
    source.complete()
    recorder.wait()
    assert recorder.elements == list(range(6))


def test_low_tide_equal_to_high_tide_refills_only_when_all_arrived() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    Flow.from_publisher(source).limit_rate(3, low_tide=3).subscribe(recorder)
    source.next(0, 1)
    assert source.subscription.requests == [3]
    source.next(2)
    assert source.subscription.requests == [3, 3]


def test_never_more_than_downstream_asked() -> None:
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder(2)
    Flow.from_publisher(source).limit_rate(10).subscribe(recorder)
    assert source.subscription.requests == [2]
    source.next(0, 1)
    assert source.subscription.requests == [2]
    recorder.request(30)
    assert source.subscription.requests == [2, 10]


@pytest.mark.parametrize(("high", "low"), [(0, None), (4, 0), (4, 5)])
def test_bad_tides_are_refused(high: int, low: int | None) -> None:
    with pytest.raises(ValueError, match="tide"):
        Flow.just(1).limit_rate(high, low)


@settings(max_examples=150, deadline=None)
@given(
    high=st.integers(min_value=1, max_value=10),
    low_fraction=st.floats(min_value=0.0, max_value=1.0),
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("request"), st.integers(min_value=1, max_value=15)),
            st.tuples(st.just("emit"), st.integers(min_value=1, max_value=15)),
        ),
        max_size=20,
    ),
)
def test_model_owed_never_exceeds_high_tide_and_no_demand_is_lost(
    high: int, low_fraction: float, steps: list[tuple[str, int]]
) -> None:
    low = max(1, round(high * low_fraction))
    source = ManualPublisher[int]()
    recorder: Recorder[int] = Recorder()
    Flow.from_publisher(source).limit_rate(high, low).subscribe(recorder)
    wanted = sent = 0
    for kind, count in steps:
        if kind == "request":
            recorder.request(count)
            wanted += count
        else:
            for _ in range(count):
                if sent >= source.subscription.total_requested:
                    break
                source.next(sent)
                sent += 1
        owed = source.subscription.total_requested - sent
        assert 0 <= owed <= high
        requests = [n for n in source.subscription.requests if isinstance(n, int)]
        assert all(n <= high for n in requests)
        assert source.subscription.total_requested <= wanted
        # Demand is not lost: while downstream wants more, something is owed upstream.
        assert owed > 0 or sent == wanted
    assert recorder.elements == list(range(sent))
