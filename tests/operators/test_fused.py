"""Fused synchronous operators: results, demand, errors and the rules, pull and push paths.

Marbles read left to right; ``(n)`` in the request lane is a ``request(n)``.
"""

from __future__ import annotations

import operator
import threading
import time
from typing import Any

import pytest

from reactive_streams import MAX_DEMAND, ProtocolViolationError
from reactive_streams.operators import Flow, NoneResultError
from reactive_streams.operators._fusion import FusedOp, none_check
from reactive_streams.operators._pull import PullPublisher

from .helpers import ManualPublisher, Recorder


def via_push(build: Any, items: list[Any], request: int = MAX_DEMAND) -> Recorder[Any]:
    source: ManualPublisher[Any] = ManualPublisher()
    flow = build(Flow.from_publisher(source))
    recorder: Recorder[Any] = Recorder(request)
    flow.subscribe(recorder)
    for item in items:
        if source.subscription.cancelled:
            break
        source.next(item)
    if not source.subscription.cancelled:
        source.complete()
    return recorder


CASES: list[tuple[str, Any, list[Any], list[Any]]] = [
    ("map", lambda f: f.map(lambda x: x * 10), [1, 2, 3], [10, 20, 30]),
    ("filter", lambda f: f.filter(lambda x: x % 2 == 0), [1, 2, 3, 4], [2, 4]),
    ("scan", lambda f: f.scan(operator.add), [1, 2, 3], [1, 3, 6]),
    ("scan_seed", lambda f: f.scan(operator.add, 10), [1, 2, 3], [11, 13, 16]),
    ("take", lambda f: f.take(2), [1, 2, 3, 4], [1, 2]),
    ("take0", lambda f: f.take(0), [1, 2], []),
    ("skip", lambda f: f.skip(2), [1, 2, 3, 4], [3, 4]),
    ("take_while", lambda f: f.take_while(lambda x: x < 3), [1, 2, 5, 1], [1, 2]),
    ("distinct", lambda f: f.distinct_until_changed(), [1, 1, 2, 2, 1], [1, 2, 1]),
    (
        "distinct_key",
        lambda f: f.distinct_until_changed(key=abs),
        [1, -1, 2, -2, 1],
        [1, 2, 1],
    ),
    ("reduce", lambda f: f.reduce(operator.add, 0), [1, 2, 3], [6]),
    ("reduce_empty_seed", lambda f: f.reduce(operator.add, 0), [], [0]),
    ("reduce_empty", lambda f: f.reduce(operator.add), [], []),
    (
        "chain",
        lambda f: f.map(lambda x: x * 2).filter(lambda x: x % 3 == 0).skip(1).take(2),
        list(range(20)),
        [6, 12],
    ),
    (
        "take_then_map",
        lambda f: f.take(3).map(lambda x: -x).filter(lambda x: x != -1),
        [0, 1, 2, 3],
        [0, -2],
    ),
]


@pytest.mark.parametrize(
    ("build", "items", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_pull_and_push_paths_agree(build: Any, items: list[Any], expected: list[Any]) -> None:
    """Every fused chain gives the same result over an iterable and over a publisher."""
    assert build(Flow.from_iterable(items)).to_list(timeout=10) == expected
    recorder = via_push(build, items)
    assert recorder.elements == expected
    assert recorder.completed == 1
    assert recorder.errors == []


def test_fusion_makes_one_stage() -> None:
    """Adjacent synchronous operators appear as ONE stage in the metrics."""
    flow = Flow.range(0, 100).map(lambda x: x + 1).filter(lambda x: x % 2 == 0).take(10)
    assert flow.to_list(timeout=10) == list(range(2, 21, 2))
    metrics = flow.metrics()
    assert list(metrics) == ["0:range|map|filter|take"]
    stats = metrics["0:range|map|filter|take"]
    assert stats.delivered == 10
    assert stats.terminated


@pytest.mark.rule("1.1")
def test_demand_is_never_exceeded_pull() -> None:
    """source: -0-1-2-3-4-... request: (2)...(3) result: -0-1-...-2-3-4-."""
    recorder: Recorder[int] = Recorder(2)
    Flow.range(0, 100).map(lambda x: x).subscribe(recorder)
    assert recorder.elements == [0, 1]
    recorder.request(3)
    assert recorder.elements == [0, 1, 2, 3, 4]
    assert recorder.completed == 0
    recorder.cancel()
    recorder.request(5)  # Rule 3.6: a no-op after cancel
    assert recorder.elements == [0, 1, 2, 3, 4]


@pytest.mark.rule("1.1")
def test_filter_replenishes_upstream_on_push_path() -> None:
    """Dropped elements are re-requested one for one; demand seen downstream is exact."""
    source: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[int] = Recorder(2)
    Flow.from_publisher(source).filter(lambda x: x % 2 == 0).subscribe(recorder)
    assert source.subscription.requests == [2]
    source.next(1, 2, 3, 4)
    assert recorder.elements == [2, 4]
    assert source.subscription.requests == [2, 1, 1]


@pytest.mark.rule("3.3")
def test_recursion_depth_is_one() -> None:
    """A subscriber requesting from on_next never nests on_next inside on_next."""
    recorder: Recorder[int] = Recorder(1, request_in_on_next=True)
    Flow.range(0, 1000).map(lambda x: x).filter(lambda x: True).subscribe(recorder)
    assert len(recorder.elements) == 1000
    assert recorder.completed == 1
    assert recorder.max_depth == 1


@pytest.mark.rule("2.13")
def test_none_from_map_is_a_type_error_naming_the_position() -> None:
    """source: -0-1-2-3-  map(None at 2) result: -0-1-X(TypeError, Rule 2.13)."""
    flow: Flow[int] = Flow.range(0, 10).map(lambda x: None if x == 2 else x)  # type: ignore[arg-type, return-value]
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    flow.subscribe(recorder)
    assert recorder.elements == [0, 1]
    assert len(recorder.errors) == 1
    error = recorder.errors[0]
    assert isinstance(error, TypeError)
    assert isinstance(error, NoneResultError)
    assert error.rule == "2.13"
    assert error.position == 2
    assert str(error) == (
        "Rule 2.13: the function given to map() returned None for the element at position 2 "
        "(0-based) of its input; None is never a valid element"
    )


@pytest.mark.rule("2.13")
def test_none_from_map_on_push_path() -> None:
    recorder = via_push(lambda f: f.map(lambda x: None if x == 6 else x), [5, 6, 7])
    assert recorder.elements == [5]
    assert isinstance(recorder.errors[0], NoneResultError)
    assert recorder.errors[0].position == 1


def test_exception_in_user_function_cancels_upstream_and_signals_error() -> None:
    source: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[int] = Recorder(10)
    boom = RuntimeError("boom")

    def explode(x: int) -> int:
        if x == 3:
            raise boom
        return x

    Flow.from_publisher(source).map(explode).subscribe(recorder)
    source.next(1, 2, 3)
    assert source.subscription.cancelled == 1
    assert recorder.elements == [1, 2]
    assert recorder.errors == [boom]
    source.next(4)  # Rule 2.8: late elements after cancel are ignored
    source.complete()
    assert recorder.signals_after_terminal == 0


def test_exception_in_user_function_closes_generator_source() -> None:
    closed: list[bool] = []

    def numbers() -> Any:
        try:
            yield from range(100)
        finally:
            closed.append(True)

    def explode(x: int) -> int:
        if x == 5:
            raise ValueError("five")
        return x

    with pytest.raises(ValueError, match=r"^five$"):
        Flow.from_iterable(numbers()).map(explode).to_list(timeout=10)
    assert closed == [True]


@pytest.mark.rule("3.9")
@pytest.mark.parametrize("n", [0, -1])
@pytest.mark.parametrize("path", ["pull", "push"])
def test_non_positive_request_signals_value_error(n: int, path: str) -> None:
    recorder: Recorder[int] = Recorder()
    if path == "pull":
        Flow.range(0, 10).map(lambda x: x).subscribe(recorder)
    else:
        from reactive_streams.operators._pull import PullPublisher

        publisher = PullPublisher(lambda: range(10))
        Flow(publisher).map(lambda x: x).subscribe(recorder)
    recorder.request(n)
    assert len(recorder.errors) == 1
    error = recorder.errors[0]
    assert isinstance(error, ValueError)
    assert isinstance(error, ProtocolViolationError)
    assert "Rule 3.9" in str(error)


@pytest.mark.rule("3.9")
def test_non_int_request_signals_type_error() -> None:
    recorder: Recorder[int] = Recorder()
    Flow.range(0, 10).filter(lambda x: True).subscribe(recorder)
    recorder.request("3")
    assert isinstance(recorder.errors[0], TypeError)


@pytest.mark.rule("3.7")
def test_cancel_propagates_upstream_once() -> None:
    source: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[int] = Recorder(5)
    Flow.from_publisher(source).map(lambda x: x).take(3).subscribe(recorder)
    recorder.cancel()
    recorder.cancel()
    assert source.subscription.cancelled == 1


def test_take_cancels_upstream_and_completes_push() -> None:
    """source: -1-2-3-...  take(2): -1-2|  and upstream sees cancel."""
    source: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[int] = Recorder(10)
    Flow.from_publisher(source).take(2).subscribe(recorder)
    source.next(1, 2)
    assert recorder.elements == [1, 2]
    assert recorder.completed == 1
    assert source.subscription.cancelled == 1


def test_take_does_not_read_past_its_last_element() -> None:
    pulled: list[int] = []

    def numbers() -> Any:
        for x in range(100):
            pulled.append(x)
            yield x

    assert Flow.from_iterable(numbers()).map(lambda x: x).take(3).to_list(timeout=10) == [0, 1, 2]
    assert pulled == [0, 1, 2]


def test_error_source_signals_without_demand() -> None:
    boom = KeyError("k")
    recorder: Recorder[int] = Recorder()
    Flow.error(boom).subscribe(recorder)
    assert recorder.errors == [boom]


def test_defer_calls_factory_per_subscriber() -> None:
    calls: list[int] = []

    def factory() -> Flow[int]:
        calls.append(1)
        return Flow.just(len(calls))

    flow = Flow.defer(factory)
    assert flow.to_list(timeout=10) == [1]
    assert flow.to_list(timeout=10) == [2]


def test_sinks() -> None:
    flow = Flow.range(0, 5)
    assert flow.first() == 0
    assert Flow.empty().first(default=7) == 7
    with pytest.raises(LookupError):
        Flow.empty().first()
    seen: list[int] = []
    flow.for_each(seen.append, timeout=10)
    assert seen == [0, 1, 2, 3, 4]
    assert list(flow) == [0, 1, 2, 3, 4]
    completed: list[bool] = []
    flow.subscribe(on_next=seen.append, on_complete=lambda: completed.append(True))
    assert completed == [True]
    with pytest.raises(TypeError, match=r"^Rule 1\.9"):
        flow.subscribe(None)


def test_blocking_iteration_is_bounded() -> None:
    iterator = Flow.range(0, 10_000).iterate(prefetch=16, timeout=10)
    assert sum(iterator) == sum(range(10_000))
    assert iterator.high_water_mark <= 16


def test_blocking_iteration_close_cancels() -> None:
    source: ManualPublisher[int] = ManualPublisher()
    with Flow.from_publisher(source).iterate(prefetch=4, timeout=10) as iterator:
        source.next(1)
        assert next(iterator) == 1
    assert source.subscription.cancelled == 1


def test_leaving_a_for_loop_early_cancels_the_subscription() -> None:
    source: ManualPublisher[int] = ManualPublisher()
    flow = Flow.from_publisher(source).map(lambda x: x * 10)

    def emit_once_subscribed() -> None:
        while source.subscriber is None:
            time.sleep(0.001)
        source.next(1, 2, 3)

    threading.Thread(target=emit_once_subscribed, daemon=True).start()
    seen = []
    for value in flow:
        seen.append(value)
        if len(seen) == 2:
            break
    # No close() call and no with block: leaving the loop is enough.
    assert source.subscription.cancelled == 1
    assert seen == [10, 20]


def test_blocking_iteration_raises_stream_error() -> None:
    with pytest.raises(ZeroDivisionError):
        list(Flow.range(0, 5).map(lambda x: 1 // (x - 3)))


def test_subscribe_none_raises() -> None:
    with pytest.raises(TypeError, match=r"^Rule 1\.9"):
        Flow.range(0, 3).map(lambda x: x).subscribe(None)
    with pytest.raises(TypeError, match=r"^Rule 1\.9"):
        Flow.from_publisher(ManualPublisher[int]()).map(lambda x: x).subscribe(None)


def test_unicast_runs_independently() -> None:
    flow = Flow.range(0, 3).map(lambda x: x * 2)
    assert flow.to_list(timeout=10) == [0, 2, 4]
    assert flow.to_list(timeout=10) == [0, 2, 4]


class _Numbered(FusedOp):
    """A fused operator of its own whose template has ``_pos)`` in another sense."""

    name = "numbered"

    def env(self, index: int) -> dict[str, Any]:
        return {f"f{index}": lambda x, n: (x, n)}

    def state(self, index: int) -> dict[str, str]:
        return {"seen_pos": "0"}

    def code(self, index: int, skip: str, position: str) -> list[str]:
        return ["seen_pos += 1", f"x = f{index}(x, seen_pos)", *none_check(index, position)]


@pytest.mark.parametrize(
    "source", [lambda: range(3), lambda: iter([0, 1, 2])], ids=["sized", "iterator"]
)
def test_templates_are_filled_in_not_patched(source: Any) -> None:
    # Pull mode with a sized source reads the position through a call; a template whose
    # own text contains "_pos)" must compile as written.
    flow: Flow[Any] = Flow(PullPublisher(source, (_Numbered(),), "source"))
    assert flow.to_list() == [(0, 1), (1, 2), (2, 3)]


def test_reduce_after_a_push_chain_is_a_stage_of_its_own() -> None:
    """``reduce`` cannot end a push chain: it follows it as its own stage, at subscribe."""
    from reactive_streams.reference import IterablePublisher

    flow = Flow.from_publisher(IterablePublisher(list(range(10)))).map(lambda x: x * 2)
    assert flow.filter(lambda x: x % 3 == 0).reduce(operator.add, 0).to_list() == [36]
