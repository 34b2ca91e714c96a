"""``switch_map``: the newest inner publisher wins; demand carries over to it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import MAX_DEMAND
from reactive_streams.operators import Flow

from .helpers import ManualPublisher, Recorder


def _wired() -> tuple[ManualPublisher[str], dict[str, ManualPublisher[int]], Recorder[int]]:
    outer = ManualPublisher[str]()
    inners: dict[str, ManualPublisher[int]] = {}

    def inner(key: str) -> ManualPublisher[int]:
        inners[key] = ManualPublisher[int]()
        return inners[key]

    recorder: Recorder[int] = Recorder()
    Flow.from_publisher(outer).switch_map(inner).subscribe(recorder)
    return outer, inners, recorder


def test_the_newest_inner_wins_and_the_previous_is_cancelled() -> None:
    outer, inners, recorder = _wired()
    recorder.request(10)
    assert outer.subscription.requests == [MAX_DEMAND]
    outer.next("a")
    inners["a"].next(1, 2)
    outer.next("b")
    assert inners["a"].subscription.cancelled == 1
    inners["b"].next(3)
    assert recorder.elements == [1, 2, 3]
    outer.complete()
    assert recorder.completed == 0  # the current inner still runs
    inners["b"].complete()
    assert recorder.completed == 1


def test_outstanding_demand_is_carried_to_the_new_inner() -> None:
    outer, inners, recorder = _wired()
    recorder.request(5)
    outer.next("a")
    assert inners["a"].subscription.requests == [5]
    inners["a"].next(1, 2)
    outer.next("b")
    assert inners["b"].subscription.requests == [3]  # 5 requested, 2 delivered
    recorder.request(4)
    assert inners["b"].subscription.requests == [3, 4]
    assert inners["a"].subscription.requests == [5]  # the replaced inner gets nothing more


def test_waiting_elements_of_a_replaced_inner_are_dropped() -> None:
    outer, inners, recorder = _wired()
    recorder.request(1)
    outer.next("a")
    inners["a"].next(1)
    assert recorder.elements == [1]
    outer.next("b")
    inners["a"].next(99)  # already on its way when it was cancelled
    recorder.request(2)
    inners["b"].next(2)
    assert recorder.elements == [1, 2]


def test_an_inner_error_cancels_the_source() -> None:
    outer, inners, recorder = _wired()
    recorder.request(1)
    outer.next("a")
    inners["a"].error(KeyError("inner"))
    assert isinstance(recorder.errors[0], KeyError)
    assert outer.subscription.cancelled == 1


def test_a_source_error_cancels_the_current_inner() -> None:
    outer, inners, recorder = _wired()
    outer.next("a")
    outer.error(KeyError("outer"))
    assert isinstance(recorder.errors[0], KeyError)
    assert inners["a"].subscription.cancelled == 1


def test_a_raising_function_fails_the_flow() -> None:
    def boom(x: int) -> Flow[int]:
        raise ValueError(f"bad {x}")

    recorder: Recorder[int] = Recorder(5)
    Flow.just(1).switch_map(boom).subscribe(recorder)
    assert [str(e) for e in recorder.errors] == ["bad 1"]


def test_cancel_cancels_source_and_inner() -> None:
    outer, inners, recorder = _wired()
    outer.next("a")
    recorder.cancel()
    assert outer.subscription.cancelled == 1
    assert inners["a"].subscription.cancelled == 1


_Step = tuple[str, int]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("outer"), st.just(0)),
            st.tuples(st.just("emit"), st.integers(1, 3)),
            st.tuples(st.just("request"), st.integers(1, 4)),
            st.tuples(st.just("inner_complete"), st.just(0)),
        ),
        max_size=30,
    )
)
def test_switch_map_matches_a_model(steps: list[_Step]) -> None:
    """Only the current inner's elements pass; each inner is asked exactly what is owed."""
    outer = ManualPublisher[int]()
    inners: list[ManualPublisher[int]] = []

    def inner(_: int) -> ManualPublisher[int]:
        inners.append(ManualPublisher[int]())
        return inners[-1]

    recorder: Recorder[int] = Recorder()
    Flow.from_publisher(outer).switch_map(inner).subscribe(recorder)
    demand = 0  # requested downstream, not yet delivered
    expected: list[int] = []
    asked: list[int] = []  # per inner: what the model says it was requested
    sent = 0  # elements the current inner sent
    done = False
    counter = 0
    for step, amount in steps:
        if step == "outer":
            outer.next(0)
            done, sent = False, 0
            asked.append(demand)  # the whole outstanding demand goes to the new inner
        elif step == "request":
            recorder.request(amount)
            demand += amount
            if inners and not done:
                asked[-1] += amount
        elif step == "emit" and inners and not done:
            count = min(amount, asked[-1] - sent)  # a well-behaved inner
            batch = list(range(counter + 1, counter + 1 + count))
            inners[-1].next(*batch)
            expected.extend(batch)
            counter, sent, demand = counter + count, sent + count, demand - count
        elif step == "inner_complete" and inners and not done:
            inners[-1].complete()
            done = True
        assert recorder.elements == expected
        assert [p.subscription.total_requested for p in inners] == asked
    for index, publisher in enumerate(inners[:-1]):
        assert publisher.subscription.cancelled == 1, index
    outer.complete()
    assert recorder.completed == (1 if done or not inners else 0)
    assert recorder.errors == []


def test_inners_on_other_threads_end_with_the_whole_last_inner() -> None:
    with ThreadPoolExecutor(4) as pool:
        flow = Flow.range(0, 100).switch_map(
            lambda k: Flow.range(0, 30).map(lambda i: (k, i)).subscribe_on(pool)
        )
        result = flow.to_list(timeout=60)
    assert result[-30:] == [(99, i) for i in range(30)]  # the last inner is never replaced
    keys = [k for k, _ in result]
    assert keys == sorted(keys)  # a replaced inner never speaks again
    for key in set(keys):
        run = [i for k, i in result if k == key]
        assert run == list(range(len(run)))  # each inner's elements in order, from 0
