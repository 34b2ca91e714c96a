"""``combine_latest`` and ``with_latest_from``: latest values, bounded demand, hot sides."""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import MissingBackpressureError
from reactive_streams.operators import Flow, NoneResultError

from .helpers import ManualPublisher, Recorder


def _combined(
    width: int = 2, prefetch: int = 4, **kwargs: Any
) -> tuple[list[ManualPublisher[Any]], Recorder[Any]]:
    sources = [ManualPublisher[Any]() for _ in range(width)]
    recorder: Recorder[Any] = Recorder()
    Flow.combine_latest(*sources, prefetch=prefetch, **kwargs).subscribe(recorder)
    return sources, recorder


def test_combine_latest_marble() -> None:
    (a, b), recorder = _combined()
    recorder.request(10)
    a.next(1)
    assert recorder.elements == []
    b.next("x")
    a.next(2)
    b.next("y")
    assert recorder.elements == [(1, "x"), (2, "x"), (2, "y")]
    a.complete()
    assert recorder.completed == 0
    b.complete()
    assert recorder.completed == 1


def test_combine_latest_requests_in_bounded_batches() -> None:
    (a, b), recorder = _combined(prefetch=4)
    assert a.subscription.requests == [4]
    assert b.subscription.requests == [4]
    b.next("x")
    a.next(1, 2, 3, 4)  # no demand yet: they wait, and a is not asked for more
    assert recorder.elements == []
    assert a.subscription.requests == [4]
    recorder.request(3)
    assert recorder.elements == [(1, "x"), (2, "x"), (3, "x")]
    assert a.subscription.requests == [4, 3]  # refilled once 75% was taken


def test_a_hot_source_beyond_its_requests_is_missing_backpressure() -> None:
    (a, b), recorder = _combined(prefetch=2)
    b.next("x")
    a.next(1, 2, 3)  # no demand: 1 and 2 wait, 3 was never requested
    assert isinstance(recorder.errors[0], MissingBackpressureError)
    assert "source 0 sent more than it was requested" in str(recorder.errors[0])
    assert a.subscription.cancelled == 1
    assert b.subscription.cancelled == 1


def test_a_source_that_completes_empty_completes_at_once() -> None:
    (a, b), recorder = _combined()
    recorder.request(1)
    a.next(1)
    b.complete()
    assert recorder.completed == 1
    assert a.subscription.cancelled == 1


def test_an_error_cancels_the_other_sources() -> None:
    (a, b), recorder = _combined()
    a.error(KeyError("a"))
    assert isinstance(recorder.errors[0], KeyError)
    assert b.subscription.cancelled == 1


def test_a_raising_or_none_combiner_fails_the_flow() -> None:
    (a, b), recorder = _combined(combiner=lambda values: values[0] / values[1])
    recorder.request(5)
    a.next(1)
    b.next(2, 0)
    assert recorder.elements == [0.5]
    assert isinstance(recorder.errors[0], ZeroDivisionError)
    assert a.subscription.cancelled == 1
    (a, b), recorder = _combined(combiner=lambda values: None)
    recorder.request(5)
    a.next(1)
    b.next(2)
    assert isinstance(recorder.errors[0], NoneResultError)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", "request"]), st.integers(1, 3)),
        max_size=40,
    ),
    st.integers(1, 5),
)
def test_combine_latest_matches_a_model(steps: list[tuple[str, int]], prefetch: int) -> None:
    """Arrival order decides every combination; demand decides how many were delivered."""
    sources, recorder = _combined(width=3, prefetch=prefetch)
    names = {"a": 0, "b": 1, "c": 2}
    sent = [0, 0, 0]
    arrivals: list[tuple[int, int]] = []
    demand = 0
    for step, amount in steps:
        if step == "request":
            recorder.request(amount)
            demand += amount
        else:
            index = names[step]
            owed = sources[index].subscription.total_requested - sent[index]
            for _ in range(min(amount, owed)):  # a well-behaved source
                sent[index] += 1
                arrivals.append((index, sent[index]))
                sources[index].next(sent[index])
        latest: list[int | None] = [None, None, None]
        combinations: list[tuple[int | None, ...]] = []
        taken = [0, 0, 0]  # per source: elements the stage took off its queue
        for index, value in arrivals:
            latest[index] = value
            if None not in latest:
                if len(combinations) == demand:
                    break  # this one waits for demand, and everything after it
                combinations.append(tuple(latest))
            taken[index] += 1
        assert recorder.elements == combinations
        for index, source in enumerate(sources):  # at most prefetch beyond what was taken
            assert source.subscription.total_requested <= taken[index] + prefetch
    assert recorder.errors == []


def test_with_latest_from_marble_drops_and_rerequests() -> None:
    source = ManualPublisher[int]()
    other = ManualPublisher[str]()
    recorder: Recorder[Any] = Recorder()
    Flow.from_publisher(source).with_latest_from(other).subscribe(recorder)
    recorder.request(3)
    assert source.subscription.requests == [3]
    source.next(1)  # other has nothing yet: dropped, one more requested
    assert source.subscription.requests == [3, 1]
    other.next("a")
    source.next(2, 3)
    other.next("b")
    other.complete()  # changes nothing
    source.next(4)
    assert recorder.elements == [(2, "a"), (3, "a"), (4, "b")]
    source.complete()
    assert recorder.completed == 1
    assert other.subscription.cancelled == 1


def test_with_latest_from_requests_other_in_batches_and_keeps_only_the_latest() -> None:
    source = ManualPublisher[int]()
    other = ManualPublisher[int]()
    recorder: Recorder[Any] = Recorder()
    Flow.from_publisher(source).with_latest_from(other, prefetch=4).subscribe(recorder)
    assert other.subscription.requests == [4]
    other.next(1, 2)
    assert other.subscription.requests == [4]
    other.next(3)
    assert other.subscription.requests == [4, 3]  # refilled at 75% of what arrived
    other.next(4, 5, 6, 7)
    recorder.request(1)
    source.next(100)
    assert recorder.elements == [(100, 7)]
    assert recorder.errors == []


def test_with_latest_from_errors_cancel_the_other_side() -> None:
    source = ManualPublisher[int]()
    other = ManualPublisher[int]()
    recorder: Recorder[Any] = Recorder()
    Flow.from_publisher(source).with_latest_from(other).subscribe(recorder)
    other.error(KeyError("other"))
    assert isinstance(recorder.errors[0], KeyError)
    assert source.subscription.cancelled == 1
    source = ManualPublisher[int]()
    other = ManualPublisher[int]()
    recorder = Recorder()
    Flow.from_publisher(source).with_latest_from(other, lambda p: p[0] + p[1]).subscribe(recorder)
    recorder.request(2)
    other.next(10)
    source.next(1)
    source.error(KeyError("source"))
    assert recorder.elements == [11]
    assert isinstance(recorder.errors[0], KeyError)
    assert other.subscription.cancelled == 1


def test_sources_on_other_threads() -> None:
    with ThreadPoolExecutor(2) as pool:
        a = Flow.range(0, 500).subscribe_on(pool)
        b = Flow.range(0, 500).subscribe_on(pool)
        result = Flow.combine_latest(a, b, prefetch=8).to_list(timeout=60)
    assert result[-1] == (499, 499)
    for before, after in itertools.pairwise(result):
        assert before[0] <= after[0] and before[1] <= after[1]
        assert (after[0] - before[0]) + (after[1] - before[1]) == 1  # one source moved
