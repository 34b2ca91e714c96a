"""Stage operators: flat_map/merge/concat/zip, buffer, errors, hot-source strategies."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from reactive_streams import MAX_DEMAND, MissingBackpressureError
from reactive_streams.operators import Flow
from reactive_streams.testing import RecordingSubscriber, VirtualTimeScheduler

from .helpers import ManualPublisher, Recorder


def test_merge_interleaves_and_completes_after_all() -> None:
    assert sorted(Flow.merge(Flow.range(0, 5), Flow.range(10, 13)).to_list(timeout=10)) == [
        0, 1, 2, 3, 4, 10, 11, 12,
    ]  # fmt: skip


def test_merge_demand_is_exact() -> None:
    """a: -1-2-3-  b: -x-y-  request (2): exactly two elements, then nothing."""
    a: ManualPublisher[int] = ManualPublisher()
    b: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[int] = Recorder(2)
    Flow.merge(a, b).subscribe(recorder)
    a.next(1, 2)
    b.next(3)
    assert recorder.elements == [1, 2]
    recorder.request(1)
    assert recorder.elements == [1, 2, 3]
    a.complete()
    assert recorder.completed == 0
    b.complete()
    assert recorder.completed == 1


def test_merge_across_threads() -> None:
    with ThreadPoolExecutor(2) as pool:
        flows = [Flow.range(i * 1000, (i + 1) * 1000).subscribe_on(pool) for i in range(4)]
        result = Flow.merge(*flows).to_list(timeout=30)
    assert sorted(result) == list(range(4000))


def test_concat_keeps_order_and_carries_demand() -> None:
    recorder: Recorder[int] = Recorder(3)
    Flow.concat(Flow.just(1, 2), Flow.just(3, 4)).subscribe(recorder)
    assert recorder.elements == [1, 2, 3]
    recorder.request(5)
    assert recorder.elements == [1, 2, 3, 4]
    assert recorder.completed == 1


def test_flat_map_bounded_concurrency() -> None:
    sources: list[ManualPublisher[int]] = []

    def inner(x: int) -> ManualPublisher[int]:
        source: ManualPublisher[int] = ManualPublisher()
        sources.append(source)
        return source

    outer: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    Flow.from_publisher(outer).flat_map(inner, concurrency=2).subscribe(recorder)
    assert outer.subscription.requests == [2]
    outer.next(1, 2)
    assert len(sources) == 2
    sources[0].next(10)
    sources[0].complete()
    assert outer.subscription.requests == [2, 1]  # one finished inner -> one more outer
    sources[1].next(20)
    assert recorder.elements == [10, 20]


def test_flat_map_error_cancels_everything() -> None:
    inner: ManualPublisher[int] = ManualPublisher()
    outer: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    Flow.from_publisher(outer).flat_map(lambda _: inner).subscribe(recorder)
    outer.next(1)
    boom = RuntimeError("inner failed")
    inner.error(boom)
    assert recorder.errors == [boom]
    assert outer.subscription.cancelled == 1


@pytest.mark.rule("2.13")
def test_flat_map_none_result_is_type_error() -> None:
    with pytest.raises(TypeError, match=r"^Rule 2\.13: the function given to flat_map\(\)"):
        Flow.range(0, 3).flat_map(lambda _: None).to_list(timeout=10)  # type: ignore[arg-type, return-value]


def test_zip_ends_with_shortest_and_cancels_others() -> None:
    longer: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[tuple[Any, ...]] = Recorder(MAX_DEMAND)
    Flow.zip(Flow.just("a", "b"), longer).subscribe(recorder)
    longer.next(1, 2, 3)
    assert recorder.elements == [("a", 1), ("b", 2)]
    assert recorder.completed == 1
    assert longer.subscription.cancelled == 1


def test_buffer_sizes_and_demand() -> None:
    """source: -1-2-3-4-5-|  buffer(2): -[1,2]-[3,4]-[5]|, request(1) asks upstream for 2."""
    source: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[list[int]] = Recorder(1)
    Flow.from_publisher(source).buffer(2).subscribe(recorder)
    assert source.subscription.requests == [2]
    source.next(1, 2)
    assert recorder.elements == [[1, 2]]
    recorder.request(2)
    source.next(3, 4, 5)
    source.complete()
    assert recorder.elements == [[1, 2], [3, 4], [5]]
    assert recorder.completed == 1


def test_buffer_timeout_flushes_partial_list() -> None:
    source: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[list[int]] = Recorder(MAX_DEMAND)
    Flow.from_publisher(source).buffer(100, timeout=0.05).subscribe(recorder)
    source.next(1, 2)
    recorder.wait_for_count(1)  # flushed by the timer, not by size
    assert recorder.elements == [[1, 2]]
    source.complete()
    assert recorder.completed == 1


def test_on_error_resume_switches_and_carries_demand() -> None:
    """source: -1-X  fallback: -7-8-|  request (3): -1-7-8|"""
    source: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[int] = Recorder(3)
    Flow.from_publisher(source).on_error_resume(lambda e: Flow.just(7, 8, 9)).subscribe(recorder)
    source.next(1)
    source.error(RuntimeError("down"))
    assert recorder.elements == [1, 7, 8]
    recorder.request(5)
    assert recorder.elements == [1, 7, 8, 9]
    assert recorder.completed == 1


def test_retry_resubscribes_then_gives_up() -> None:
    attempts: list[int] = []

    def failing() -> Flow[int]:
        attempts.append(1)
        return Flow.just(1).concat_with(Flow.error(RuntimeError(f"attempt {len(attempts)}")))

    with pytest.raises(RuntimeError, match=r"^attempt 3$"):
        Flow.defer(failing).retry(2).to_list(timeout=10)
    assert len(attempts) == 3


def test_on_backpressure_drop_counts_and_reports_drops() -> None:
    source: ManualPublisher[int] = ManualPublisher()
    dropped: list[int] = []
    recorder: Recorder[int] = Recorder(2)
    flow = Flow.from_publisher(source).on_backpressure_drop(dropped.append)
    flow.subscribe(recorder)
    assert source.subscription.requests == [MAX_DEMAND]
    source.next(1, 2, 3, 4)
    assert recorder.elements == [1, 2]
    assert dropped == [3, 4]
    assert flow.metrics()["1:on_backpressure_drop"].dropped == 2


def test_on_backpressure_latest_keeps_the_newest() -> None:
    source: ManualPublisher[int] = ManualPublisher()
    dropped: list[int] = []
    recorder: Recorder[int] = Recorder(1)
    Flow.from_publisher(source).on_backpressure_latest(dropped.append).subscribe(recorder)
    source.next(1, 2, 3, 4)
    recorder.request(1)
    assert recorder.elements == [1, 4]
    assert dropped == [2, 3]


@pytest.mark.parametrize(
    ("overflow", "expected", "dropped"),
    [("drop_oldest", [1, 3, 4], [2]), ("drop_latest", [1, 2, 3], [4])],
)
def test_on_backpressure_buffer_strategies(
    overflow: Any, expected: list[int], dropped: list[int]
) -> None:
    source: ManualPublisher[int] = ManualPublisher()
    seen: list[int] = []
    recorder: Recorder[int] = Recorder(1)
    Flow.from_publisher(source).on_backpressure_buffer(
        2, overflow=overflow, on_drop=seen.append
    ).subscribe(recorder)
    source.next(1, 2, 3, 4)
    recorder.request(10)
    assert recorder.elements == expected
    assert seen == dropped


def test_on_backpressure_buffer_error() -> None:
    source: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[int] = Recorder(0)
    Flow.from_publisher(source).on_backpressure_buffer(1).subscribe(recorder)
    source.next(1, 2)
    assert isinstance(recorder.errors[0], MissingBackpressureError)
    assert source.subscription.cancelled == 1


def test_interval_without_demand_fails() -> None:
    recorder: Recorder[int] = Recorder(2)
    Flow.interval(0.005).subscribe(recorder)
    recorder.wait()
    assert recorder.elements == [0, 1]
    assert isinstance(recorder.errors[0], MissingBackpressureError)


def test_interval_cancel_stops_the_thread() -> None:
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    before = threading.active_count()
    Flow.interval(0.005).subscribe(recorder)
    recorder.wait_for_count(2)
    recorder.cancel()
    for thread in threading.enumerate():
        if thread.name == "reactive-streams-interval":
            thread.join(5)
    assert threading.active_count() <= before


def test_via_processor_factory() -> None:
    from reactive_streams.operators._publish_on import PublishOn

    with ThreadPoolExecutor(1) as pool:
        flow = Flow.range(0, 100).via(lambda: PublishOn(pool, prefetch=8))
        assert flow.to_list(timeout=10) == list(range(100))
        assert flow.metrics()["1:via"].high_water_mark <= 8


@pytest.mark.parametrize("virtual", [False, True])
def test_interval_request_after_cancel_adds_no_demand(virtual: bool) -> None:
    scheduler = VirtualTimeScheduler() if virtual else None
    flow = Flow.interval(3600.0, scheduler=scheduler)
    recorder: RecordingSubscriber[int] = RecordingSubscriber(initial_request=1)
    flow.subscribe(recorder)
    assert recorder.subscription is not None
    recorder.subscription.cancel()
    recorder.subscription.request(5)  # Rule 3.6: a no-op
    recorder.subscription.request(0)  # no Rule 3.9 error after cancel either
    statistics = flow.metrics()["0:interval"]
    assert (statistics.requested, statistics.delivered, statistics.cancelled) == (1, 0, True)
    assert recorder.elements == [] and recorder.error is None and not recorder.completed
