"""Property tests: random fused chains and random demand, on the pull and the push path.

For every chain of synchronous operators, every source and every sequence of requests:
the result equals plain Python's, no more elements arrive than were requested (Rule 1.1),
exactly one terminal signal arrives and nothing follows it (Rule 1.7).
"""

from __future__ import annotations

import itertools
import operator
from functools import partial
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import MAX_DEMAND
from reactive_streams.operators import Flow
from reactive_streams.reference import IterablePublisher

from .helpers import Recorder

OPS = st.one_of(
    st.tuples(st.just("map"), st.integers(-3, 3)),
    st.tuples(st.just("filter"), st.integers(2, 4)),
    st.tuples(st.just("take"), st.integers(0, 12)),
    st.tuples(st.just("skip"), st.integers(0, 5)),
    st.tuples(st.just("scan"), st.just(0)),
    st.tuples(st.just("take_while"), st.integers(-5, 30)),
    st.tuples(st.just("distinct"), st.just(0)),
)


def not_multiple(divisor: int, x: int) -> bool:
    return x % divisor != 0


def below(limit: int, x: int) -> bool:
    return x < limit


def apply_flow(flow: Flow[Any], ops: list[tuple[str, int]]) -> Flow[Any]:
    for name, arg in ops:
        if name == "map":
            flow = flow.map(partial(operator.add, arg))
        elif name == "filter":
            flow = flow.filter(partial(not_multiple, arg))
        elif name == "take":
            flow = flow.take(arg)
        elif name == "skip":
            flow = flow.skip(arg)
        elif name == "scan":
            flow = flow.scan(lambda acc, x: acc + x)
        elif name == "take_while":
            flow = flow.take_while(partial(below, arg))
        else:
            flow = flow.distinct_until_changed()
    return flow


def apply_python(items: list[int], ops: list[tuple[str, int]]) -> list[int]:
    values: list[int] = list(items)
    for name, arg in ops:
        if name == "map":
            values = [x + arg for x in values]
        elif name == "filter":
            values = [x for x in values if x % arg != 0]
        elif name == "take":
            values = values[:arg]
        elif name == "skip":
            values = values[arg:]
        elif name == "scan":
            values = list(itertools.accumulate(values))
        elif name == "take_while":
            values = list(itertools.takewhile(partial(below, arg), values))
        else:
            values = [x for index, x in enumerate(values) if index == 0 or values[index - 1] != x]
    return values


@settings(max_examples=150, deadline=None)
@given(
    items=st.lists(st.integers(-20, 20), max_size=25),
    ops=st.lists(OPS, max_size=5),
    requests=st.lists(st.integers(1, 6), max_size=6),
    push=st.booleans(),
)
def test_fused_chains_match_python_and_respect_demand(
    items: list[int], ops: list[tuple[str, int]], requests: list[int], push: bool
) -> None:
    source: Flow[int] = (
        Flow.from_publisher(IterablePublisher(items)) if push else Flow.from_iterable(items)
    )
    recorder: Recorder[int] = Recorder()
    apply_flow(source, ops).subscribe(recorder)
    requested = 0
    for n in requests:
        recorder.request(n)
        requested += n
        assert len(recorder.elements) <= requested  # Rule 1.1
    recorder.request(MAX_DEMAND)
    assert recorder.elements == apply_python(items, ops)
    assert recorder.errors == []
    assert recorder.completed == 1
    assert recorder.signals_after_terminal == 0  # Rule 1.7
