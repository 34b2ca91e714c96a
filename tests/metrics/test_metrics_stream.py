"""reactive_streams.metrics: snapshots on a fake clock, SLA events, Prometheus export."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from reactivex.subject import Subject

from reactive_streams import MAX_DEMAND, Publisher, Subscriber
from reactive_streams._core import Operator, StageStatistics
from reactive_streams.adapters.reactivex import from_observable
from reactive_streams.metrics import (
    SLA,
    MetricsSnapshot,
    PrometheusExporter,
    StageMetrics,
    metrics_stream,
)
from reactive_streams.operators import Flow
from reactive_streams.tck import PublisherVerification
from reactive_streams.testing import RecordingSubscriber, VirtualTimeScheduler

TIMEOUT = 10.0


def advance(clock: VirtualTimeScheduler, seconds: float) -> None:
    """Advance ``seconds`` and a nanosecond more, as a wall clock would run on.

    Samples are due at ``k * interval`` (computed, not summed), and a sum of decimal steps
    in floats may stop a hair short of that (``0.1`` added seven times is ``0.7``, seven
    samples of ``0.1`` are due at ``0.7000000000000001``).
    """
    clock.advance(seconds + 1e-9)


def _hot_flow() -> tuple[Subject[int], Flow[int], RecordingSubscriber[int]]:
    subject: Subject[int] = Subject()
    flow = Flow.from_publisher(from_observable(subject, buffer_size=50, overflow="drop_latest"))
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=5)
    flow.subscribe(subscriber)
    return subject, flow, subscriber


def test_snapshots_split_each_period_like_flink() -> None:
    clock = VirtualTimeScheduler()
    subject, flow, _subscriber = _hot_flow()
    snapshots: RecordingSubscriber[MetricsSnapshot] = RecordingSubscriber(
        initial_request=MAX_DEMAND
    )
    metrics_stream(flow, 1.0, scheduler=clock).subscribe(snapshots)

    # period 1: one element per sample for four samples of demand, then no demand left
    for value in range(10):
        if value < 5:
            subject.on_next(value)
        advance(clock, 0.1)
    # period 2: 20 elements arrive without demand: buffered, all backpressured
    for value in range(5, 25):
        subject.on_next(value)
    advance(clock, 1.0)

    first, second = snapshots.elements
    assert (first.sequence, second.sequence) == (0, 1)
    assert first.period == pytest.approx(1.0)
    stage = first.stage("from_observable")
    assert stage.elements_out == 5
    assert stage.elements_in == 5
    assert stage.throughput == pytest.approx(5.0)
    assert stage.busy_ms_per_s == pytest.approx(400)
    assert stage.backpressured_ms_per_s == pytest.approx(600)
    assert stage.idle_ms_per_s == pytest.approx(0)
    assert stage.demand_outstanding == 0

    stage = second.stage("from_observable")
    assert stage.elements_in == 25  # what the observable source delivered
    assert stage.elements_out == 5
    assert stage.buffered == 20
    assert stage.throughput == 0
    assert stage.backpressured_ms_per_s == pytest.approx(1000)
    source = second.stage("observable")
    assert source.elements_out == 25
    assert source.demand_outstanding == MAX_DEMAND
    # unbounded demand: busy for the sample that saw the 20 new elements, then idle
    assert source.busy_ms_per_s == pytest.approx(100)
    assert source.idle_ms_per_s == pytest.approx(900)


def test_sla_breaches_are_events_on_the_stream() -> None:
    clock = VirtualTimeScheduler()
    subject, flow, _subscriber = _hot_flow()
    rules = [
        SLA(stage="from_observable", max_buffered=10, max_backpressured_ms_per_s=700),
        SLA(stage="from_observable", min_throughput=3.0),
    ]
    snapshots: RecordingSubscriber[MetricsSnapshot] = RecordingSubscriber(
        initial_request=MAX_DEMAND
    )
    metrics_stream(flow, 1.0, scheduler=clock, sla=rules).subscribe(snapshots)
    for value in range(10):
        if value < 5:
            subject.on_next(value)
        advance(clock, 0.1)
    for value in range(5, 25):
        subject.on_next(value)
    advance(clock, 1.0)

    first, second = snapshots.elements
    assert first.breaches == ()  # 5 elements/s, 600 ms/s backpressured, nothing buffered
    found = {b.rule: (b.stage, b.limit, round(b.observed, 6)) for b in second.breaches}
    assert found == {
        "max_buffered": ("1:from_observable", 10, 20),
        "max_backpressured_ms_per_s": ("1:from_observable", 700, 1000),
        "min_throughput": ("1:from_observable", 3.0, 0.0),
    }
    assert all(b.time == pytest.approx(2.0) for b in second.breaches)
    assert any(
        str(b) == "1:from_observable: max_buffered breached (limit 10, observed 20)"
        for b in second.breaches
    )


def test_a_slow_metrics_subscriber_gets_conflated_snapshots_and_every_breach() -> None:
    clock = VirtualTimeScheduler()
    subject, flow, _subscriber = _hot_flow()
    snapshots: RecordingSubscriber[MetricsSnapshot] = RecordingSubscriber()
    stream = metrics_stream(
        flow, 1.0, scheduler=clock, sla=[SLA(stage="from_observable", max_buffered=0)]
    )
    stream.subscribe(snapshots)
    for value in range(10):  # 5 delivered, 5 buffered: a breach in each period
        subject.on_next(value)
    advance(clock, 3.0)  # three periods, no demand: one snapshot waits, two were replaced
    assert snapshots.elements == []
    snapshots.request(1)
    (snapshot,) = snapshots.elements
    assert snapshot.sequence == 2
    assert snapshot.skipped == 2
    assert [b.time for b in snapshot.breaches] == pytest.approx([1.0, 2.0, 3.0])


def test_the_stream_completes_when_the_flow_is_done_and_cancel_stops_the_timer() -> None:
    clock = VirtualTimeScheduler()
    subject, flow, subscriber = _hot_flow()
    snapshots: RecordingSubscriber[MetricsSnapshot] = RecordingSubscriber(
        initial_request=MAX_DEMAND
    )
    metrics_stream(flow, 0.5, scheduler=clock).subscribe(snapshots)
    subject.on_next(1)
    subject.on_completed()
    advance(clock, 0.5)
    assert snapshots.completed
    assert snapshots.elements[-1].stages[-1].terminated
    assert clock.pending == 0

    endless: RecordingSubscriber[MetricsSnapshot] = RecordingSubscriber(initial_request=10)
    metrics_stream(flow, 0.5, scheduler=clock, until_done=False).subscribe(endless)
    advance(clock, 1.0)
    assert len(endless.elements) == 2
    assert endless.subscription is not None
    endless.subscription.cancel()
    assert clock.pending == 0
    advance(clock, 1.0)
    assert len(endless.elements) == 2
    assert subscriber.completed


def test_a_breaking_stage_statistics_ends_the_stream_with_its_error() -> None:
    class Broken(Operator[int]):
        @property
        def name(self) -> str:
            return "broken"

        def subscribe(self, subscriber: Subscriber[int]) -> None:
            raise NotImplementedError

        def last_statistics(self) -> StageStatistics | None:
            raise RuntimeError("statistics broke")

    clock = VirtualTimeScheduler()
    snapshots: RecordingSubscriber[MetricsSnapshot] = RecordingSubscriber(initial_request=5)
    metrics_stream(Broken(), 1.0, scheduler=clock).subscribe(snapshots)
    advance(clock, 1.0)
    assert isinstance(snapshots.error, RuntimeError)
    assert str(snapshots.error) == "statistics broke"
    assert clock.pending == 0


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match=r"^period must be positive and finite, got 0$"):
        metrics_stream(Flow.empty(), 0)
    with pytest.raises(ValueError, match=r"^samples_per_period must be positive, got 0$"):
        metrics_stream(Flow.empty(), 1.0, samples_per_period=0)
    with pytest.raises(ValueError, match=r"^an SLA needs at least one limit$"):
        SLA(stage="x")


def test_prometheus_export_has_per_stage_samples() -> None:
    clock = VirtualTimeScheduler()
    subject, flow, _subscriber = _hot_flow()
    registry = CollectorRegistry()
    exporter = PrometheusExporter(registry)
    metrics_stream(
        flow, 1.0, scheduler=clock, sla=[SLA(stage="from_observable", max_buffered=1)]
    ).subscribe(exporter)
    for value in range(8):
        subject.on_next(value)
    advance(clock, 2.0)

    text = generate_latest(registry).decode()
    labels = {"stage": "1:from_observable", "operator": "from_observable"}
    assert registry.get_sample_value("reactive_streams_stage_elements_out_total", labels) == 5
    assert registry.get_sample_value("reactive_streams_stage_elements_in_total", labels) == 8
    assert registry.get_sample_value("reactive_streams_stage_buffered", labels) == 3
    assert registry.get_sample_value(
        "reactive_streams_stage_backpressured_ms_per_second", labels
    ) == pytest.approx(1000)
    source = {"stage": "0:observable", "operator": "observable"}
    assert registry.get_sample_value("reactive_streams_stage_elements_out_total", source) == 8
    breaches = {"stage": "1:from_observable", "rule": "max_buffered"}
    assert registry.get_sample_value("reactive_streams_sla_breaches_total", breaches) == 2
    assert "# TYPE reactive_streams_stage_idle_ms_per_second gauge" in text
    exporter.close()
    assert clock.pending == 0
    assert "reactive_streams_stage" not in generate_latest(registry).decode()


def test_default_scheduler_runs_a_real_flow_to_the_end() -> None:
    flow = Flow.range(0, 50_000).map(lambda x: x * 2)
    snapshots: RecordingSubscriber[MetricsSnapshot] = RecordingSubscriber(
        initial_request=MAX_DEMAND
    )
    done: RecordingSubscriber[int] = RecordingSubscriber(initial_request=MAX_DEMAND)
    flow.subscribe(done)
    metrics_stream(flow, 0.02).subscribe(snapshots)
    assert snapshots.wait_terminated(TIMEOUT)
    assert snapshots.completed
    last = snapshots.elements[-1].stages[0]
    assert last.elements_out == 50_000
    assert last.terminated


def test_the_bottleneck_is_busy_while_its_upstream_is_backpressured() -> None:
    clock = VirtualTimeScheduler()
    subject, flow, _subscriber = _hot_flow()
    snapshots: RecordingSubscriber[MetricsSnapshot] = RecordingSubscriber(
        initial_request=MAX_DEMAND
    )
    metrics_stream(flow, 1.0, scheduler=clock).subscribe(snapshots)
    advance(clock, 1.0)  # nothing pushed: the source is idle, nobody is a bottleneck
    for value in range(10):  # the stage delivers with demand open: busy, source keeps up
        subject.on_next(value)
        advance(clock, 0.1)
    first, second = snapshots.elements
    assert first.bottleneck() is None
    assert second.stage("from_observable").upstreams == ("0:observable",)
    assert second.stage("observable").upstreams == ()
    assert second.bottleneck() is None  # the source is never backpressured (unbounded)


def test_bottleneck_picks_the_busy_stage_under_a_backpressured_upstream() -> None:
    def stage(key: str, busy: float, backpressured: float, *upstreams: str) -> StageMetrics:
        return StageMetrics(
            stage=key,
            operator=key.split(":")[1],
            elements_in=0,
            elements_out=0,
            demand_outstanding=0,
            buffered=0,
            high_water_mark=0,
            dropped=0,
            throughput=0.0,
            busy_ms_per_s=busy,
            idle_ms_per_s=1000 - busy - backpressured,
            backpressured_ms_per_s=backpressured,
            terminated=False,
            upstreams=upstreams,
        )

    snapshot = MetricsSnapshot(
        sequence=0,
        time=1.0,
        period=1.0,
        stages=(
            stage("0:range", 100, 900),
            stage("1:map", 800, 150, "0:range"),
            stage("2:publish_on", 950, 0, "1:map"),
        ),
    )
    bottleneck = snapshot.bottleneck()
    assert bottleneck is not None
    assert bottleneck.stage == "1:map"  # min(800, 900) beats min(950, 150)


def test_without_prometheus_client_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(ImportError, match=r"pip install 'reactive-streams-py\[metrics\]'$"):
        PrometheusExporter(CollectorRegistry())


def test_the_old_scheduler_protocol_and_names_are_gone() -> None:
    from reactive_streams import metrics

    class OldClock:  # now() and call_later(): not a Scheduler
        def now(self) -> float:
            return 0.0

        def call_later(self, delay: float, action: Callable[[], None]) -> object:
            return object()

    with pytest.raises(TypeError, match=r"^metrics_stream\(scheduler=\) takes a "):
        metrics_stream(Flow.empty(), 1.0, scheduler=OldClock())  # type: ignore[arg-type]
    for name in ("Scheduler", "ThreadScheduler", "Cancellable"):
        assert not hasattr(metrics, name)


def test_a_scheduler_of_another_kind_is_a_type_error() -> None:
    with pytest.raises(
        TypeError,
        match=r"^metrics_stream\(scheduler=\) takes a reactive_streams\.schedulers\.Scheduler, "
        r"got object$",
    ):
        metrics_stream(Flow.empty(), 1.0, scheduler=object())  # type: ignore[arg-type]


def test_stage_clock_splits_a_period_in_ms_per_second() -> None:
    from reactive_streams.metrics import StageClock

    clock = StageClock()
    assert clock.per_second() == (0.0, 0.0, 0.0)
    clock.charge("busy", 0.25)
    clock.charge("backpressured", 0.5)
    clock.charge("idle", 0.25)
    assert clock.per_second() == (250.0, 250.0, 500.0)
    clock.reset()
    assert clock.total == 0.0


def test_outstanding_demand_stays_unbounded_once_asked_for() -> None:
    from reactive_streams._core import MAX_DEMAND
    from reactive_streams.metrics import outstanding_demand

    assert outstanding_demand(10, 4) == 6
    assert outstanding_demand(4, 10) == 0
    assert outstanding_demand(MAX_DEMAND, 1_000) == MAX_DEMAND


class TestMetricsStreamTck(PublisherVerification):
    """The snapshot stream of a flow that never ends: it never completes either."""

    max_elements_from_publisher = MAX_DEMAND

    def create_publisher(self, elements: int) -> Publisher[Any]:
        flow = Flow.interval(0.001)
        recorder = RecordingSubscriber[int](initial_request=MAX_DEMAND)
        flow.subscribe(recorder)
        subscription = recorder.subscription
        assert subscription is not None
        self.add_cleanup(subscription.cancel)
        return metrics_stream(flow, 0.005, samples_per_period=1)
