"""The pipeline's stage states, its bottleneck and ``--metrics-port`` errors (no Spark)."""

from __future__ import annotations

import dataclasses
import io
import socket
import urllib.request
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner
from rich.console import Console

from reactive_streams import StreamStatistics
from reactive_streams.cli import main
from reactive_streams.cli._display import render_progress
from reactive_streams.metrics import MetricsSnapshot, StageMetrics
from reactive_streams.pipeline import PipelineProgress
from reactive_streams.pipeline._diagnostics import Bottleneck
from reactive_streams.pipeline._metrics import (
    PipelineMetrics,
    StageStreams,
    bottleneck_of,
    bridge_state,
    sink_state,
    source_state,
    spark_batch,
    spark_state,
)

if TYPE_CHECKING:
    from pathlib import Path


def _stats(
    requested: int, delivered: int, buffered: int = 0, *, done: bool = False
) -> StreamStatistics:
    return StreamStatistics(
        requested=requested, delivered=delivered, buffered=buffered, cancelled=done, terminated=done
    )


# -- each stage's state at a sample ---------------------------------------------------------


def test_the_source_is_busy_with_demand_and_backpressured_without() -> None:
    assert source_state(_stats(0, 0)) == "idle"  # not subscribed yet
    assert source_state(_stats(5, 3)) == "busy"
    assert source_state(_stats(5, 5)) == "backpressured"
    assert source_state(_stats(5, 5, done=True)) == "idle"


def test_a_full_bridge_is_backpressured_and_a_moving_one_busy() -> None:
    assert bridge_state(_stats(4, 4, buffered=2_000), moved=False) == "backpressured"
    assert bridge_state(_stats(5, 4, buffered=2_000), moved=True) == "busy"
    assert bridge_state(_stats(5, 4, buffered=0), moved=False) == "idle"
    assert bridge_state(_stats(4, 4, buffered=2_000, done=True), moved=False) == "idle"


def test_spark_waits_on_the_sink_or_runs_a_trigger() -> None:
    folding = _stats(3, 3)  # the sink has no demand: it folds a micro-batch in
    waiting = _stats(3, 2)  # the sink asked for one more
    running = {"isTriggerActive": True, "message": "Processing new data"}
    offsets = {"isTriggerActive": True, "message": "Getting offsets from PythonMicroBatchStream"}
    between = {"isTriggerActive": False, "message": "Waiting for data to arrive"}
    assert spark_state(folding, running) == "backpressured"
    assert spark_state(waiting, running) == "busy"
    assert spark_state(waiting, offsets) == "idle"  # waits for its source
    assert spark_state(waiting, between) == "idle"
    assert spark_state(_stats(3, 3, done=True), running) == "idle"
    assert sink_state(folding) == "busy"
    assert sink_state(waiting) == "idle"
    assert sink_state(_stats(0, 0)) == "idle"


# -- the bottleneck -------------------------------------------------------------------------


def _stage(name: str, upstream: str | None, *, busy: float, pressure: float) -> StageMetrics:
    return StageMetrics(
        stage=name, operator=name, elements_in=0, elements_out=0, demand_outstanding=0,
        buffered=0, high_water_mark=0, dropped=0, throughput=0.0, busy_ms_per_s=busy,
        idle_ms_per_s=1000.0 - busy - pressure, backpressured_ms_per_s=pressure,
        terminated=False, upstreams=() if upstream is None else (upstream,),
    )  # fmt: skip


def _snapshot(*figures: tuple[float, float]) -> MetricsSnapshot:
    """(busy, backpressured) ms/s of source, bridge, spark, sink."""
    names = ("source", "bridge", "spark", "sink")
    stages = tuple(
        _stage(name, names[index - 1] if index else None, busy=busy, pressure=pressure)
        for index, (name, (busy, pressure)) in enumerate(zip(names, figures, strict=True))
    )
    return MetricsSnapshot(sequence=0, time=1.0, period=1.0, stages=stages)


def test_a_slow_sink_is_named_with_the_stage_it_holds_back() -> None:
    held = bottleneck_of(_snapshot((0, 1000), (0, 1000), (0, 900), (950, 0)))
    assert held == Bottleneck("sink", 950.0, "spark", 900.0)
    assert str(held) == "sink (busy 950 ms/s while spark is backpressured 900 ms/s)"


def test_a_slow_query_is_named_when_the_bridge_is_full() -> None:
    held = bottleneck_of(_snapshot((0, 1000), (0, 800), (700, 0), (100, 0)))
    assert held is not None
    assert (held.stage, held.upstream) == ("spark", "bridge")


def test_a_slow_source_is_named_when_everything_after_it_waits() -> None:
    held = bottleneck_of(_snapshot((900, 0), (50, 0), (200, 0), (10, 0)))
    assert held == Bottleneck("source", 900.0)
    assert str(held) == "source (busy 900 ms/s; the stages after it wait)"


def test_nothing_is_named_when_no_stage_holds_the_run_back() -> None:
    assert bottleneck_of(_snapshot((100, 0), (0, 0), (300, 0), (10, 0))) is None
    assert bottleneck_of(None) is None


def test_spark_batch_reads_the_query_progress() -> None:
    batch = spark_batch(
        {"batchId": 4, "numInputRows": 300, "inputRowsPerSecond": 150.5,
         "processedRowsPerSecond": 600.0, "durationMs": {"triggerExecution": 500}}
    )  # fmt: skip
    assert batch is not None
    assert (batch.batch_id, batch.input_rows, batch.duration) == (4, 300, 0.5)
    assert (batch.input_rows_per_second, batch.processed_rows_per_second) == (150.5, 600.0)
    assert spark_batch(None) is None
    assert spark_batch({"numInputRows": 1}) is None  # no batch id: not a progress


# -- the display ----------------------------------------------------------------------------


def _progress(phase: str, bottleneck: Bottleneck | None, **extra: object) -> PipelineProgress:
    return PipelineProgress(
        phase=phase, elapsed=2.0, records_read=100, records_emitted=100,
        records_processed=50, dead_letters=0, batches=1, source_demand=0, sink_demand=0,
        groups=4, late_rows=0, total_rows=None, bottleneck=bottleneck, **extra,  # type: ignore[arg-type]
    )  # fmt: skip


def _text(progress: PipelineProgress) -> str:
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(render_progress(progress, title="run"))
    return console.export_text()


def test_the_display_names_the_stage_that_holds_the_run_back() -> None:
    text = _text(_progress("running", Bottleneck("sink", 950.0, "spark", 900.0)))
    assert "bottleneck: sink (busy 950 ms/s while spark is backpressured 900 ms/s)" in text


def test_the_display_names_a_slow_source_on_both_read_paths() -> None:
    source = Bottleneck("source", 900.0)
    assert "bottleneck: source (busy 900 ms/s" in _text(_progress("running", source))
    executors = _progress("running", source, split_shares=(10, 20), splits=2)
    text = _text(executors)
    assert "executors" in text
    assert "bottleneck: source (busy 900 ms/s" in text


def test_the_display_names_no_bottleneck_when_none_or_when_done() -> None:
    assert "bottleneck" not in _text(_progress("running", None))
    assert "bottleneck" not in _text(_progress("done", Bottleneck("sink", 950.0, "spark", 900.0)))


# -- a busy port ----------------------------------------------------------------------------


def test_a_busy_metrics_port_is_exit_2_with_one_line(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    data = tmp_path / "in.csv"
    data.write_text("a,b\n1,2\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            main,
            ["pipeline", "--quiet", "--input", str(data), "--output", str(tmp_path / "out"),
             "--metrics-port", str(port)],
        )  # fmt: skip
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.splitlines() == [
        f"Error: --metrics-port {port}: cannot serve metrics on 127.0.0.1:{port} "
        "(Address already in use); choose another port, or 0 for a free one"
    ]
    assert "Traceback" not in result.stdout


# -- sampling a pipeline (a fake one: no Spark, a fake clock) -------------------------------


class _FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        self.now += 0.125  # exact in binary: the splits come out exact
        return self.now


class _FakePipeline:
    """A ``MeteredRun``: what ``PipelineMetrics`` reads, in a held-sink state."""

    reads_on_executors = False

    def __init__(self, **sizes: int | None) -> None:
        self.sink_stream = _stats(3, 3)  # folding a micro-batch: no demand
        self.done = False
        self.sizes = sizes  # the input's size figures (PipelineProgress's)

    def stage_streams(self, *, last_progress: bool = False) -> StageStreams:
        return StageStreams(
            source=_stats(9, 9),
            bridge=_stats(9, 9, buffered=4_000),
            sink=self.sink_stream,
            sink_rows=120,
            sink_done=self.done,
            query_status={"isTriggerActive": True, "message": "Processing new data"},
            last_progress={"batchId": 2, "numInputRows": 300, "inputRowsPerSecond": 10.0,
                           "processedRowsPerSecond": 20.0,
                           "durationMs": {"triggerExecution": 1500}} if last_progress else None,
        )  # fmt: skip

    def progress(self) -> PipelineProgress:
        return PipelineProgress(
            phase="running", elapsed=5.0, records_read=1_000, records_emitted=990,
            records_processed=600, dead_letters=10, batches=2, source_demand=0, sink_demand=0,
            groups=40, late_rows=0, bridge_held=390, bridge_bound=4_000, reading=4.0,
            **{"total_rows": None, **self.sizes},  # type: ignore[arg-type]
        )  # fmt: skip


def _sampled(pipe: _FakePipeline) -> PipelineMetrics:
    clock = _FakeClock()
    metrics = PipelineMetrics(pipe, samples_per_period=4, clock=clock.monotonic)
    metrics._last_sample = metrics._period_start = clock.now
    return metrics


def test_a_held_sink_is_sampled_as_the_bottleneck() -> None:
    pipe = _FakePipeline()
    metrics = _sampled(pipe)
    ends = [metrics._tick(index) for index in range(4)]
    assert ends == [False, False, False, True]
    snapshot = metrics._snapshot()
    split = {
        stage.stage: (stage.busy_ms_per_s, stage.idle_ms_per_s, stage.backpressured_ms_per_s)
        for stage in snapshot.stages
    }
    assert split == {
        "source": (0.0, 0.0, 1000.0),
        "bridge": (0.0, 0.0, 1000.0),
        "spark": (0.0, 0.0, 1000.0),
        "sink": (1000.0, 0.0, 0.0),
    }
    assert [stage.upstreams for stage in snapshot.stages] == [
        (),
        ("source",),
        ("bridge",),
        ("spark",),
    ]
    assert snapshot.stage("source").elements_in == 1_000
    assert snapshot.stage("bridge").buffered == 390
    assert metrics.bottleneck() == Bottleneck("sink", 1000.0, "spark", 1000.0)
    figures = metrics.figures()
    assert figures is not None and figures.batch is not None
    assert (figures.batch.batch_id, figures.batch.duration) == (2, 1.5)


def test_sampling_ends_with_a_final_snapshot_once_the_sink_ended() -> None:
    pipe = _FakePipeline()
    metrics = _sampled(pipe)
    assert metrics._tick(0) is False
    pipe.done = True
    pipe.sink_stream = _stats(3, 3, done=True)
    assert metrics._tick(1) is True  # the period is cut short: the final counts now
    final = metrics._snapshot()
    assert all(stage.terminated for stage in final.stages)
    assert metrics.bottleneck() is None
    assert metrics._ended  # the stream's take_while stops at the next tick


def test_the_registry_renders_the_pipeline_figures_by_stage() -> None:
    from prometheus_client import generate_latest

    pipe = _FakePipeline()
    metrics = _sampled(pipe)
    url = metrics.serve(0)
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
        for index in range(4):
            metrics._tick(index)
        metrics._snapshot()
        text = generate_latest(metrics.registry).decode()
        with urllib.request.urlopen(url, timeout=30) as response:  # the served endpoint
            assert b"reactive_streams_pipeline_bottleneck" in response.read()
    finally:
        metrics.close()
    assert 'reactive_streams_pipeline_dead_letters_total{stage="source"} 10.0' in text
    assert 'reactive_streams_pipeline_bridge_rows_bound{stage="bridge"} 4000.0' in text
    assert 'reactive_streams_pipeline_spark_batch_duration_seconds{stage="spark"} 1.5' in text
    assert 'reactive_streams_pipeline_sink_result_rows{stage="sink"} 40.0' in text
    assert 'reactive_streams_pipeline_bottleneck{stage="sink"} 1.0' in text
    assert 'reactive_streams_pipeline_bottleneck{stage="spark"} 0.0' in text


def _scraped(pipe: _FakePipeline) -> str:
    """The registry's text after one sampled period of ``pipe``."""
    from prometheus_client import generate_latest

    metrics = _sampled(pipe)
    metrics.serve(0)
    try:
        for index in range(4):
            metrics._tick(index)
        metrics._snapshot()
        return generate_latest(metrics.registry).decode()
    finally:
        metrics.close()


def test_the_registry_renders_the_inputs_expected_size_and_time_left() -> None:
    text = _scraped(_FakePipeline(total_rows=4_000, bytes_read=250_000, total_bytes=1_000_000))
    prefix = "reactive_streams_pipeline"
    assert f'{prefix}_records_read_total{{stage="source"}} 1000.0' in text
    assert f'{prefix}_input_records_expected{{stage="source"}} 4000.0' in text
    assert f'{prefix}_input_bytes_expected{{stage="source"}} 1e+06' in text
    assert f'{prefix}_input_bytes_read_total{{stage="source"}} 250000.0' in text
    # 750,000 bytes left at 62,500 bytes/s (250,000 in 4 s of reading)
    assert f'{prefix}_input_seconds_left{{stage="source"}} 12.0' in text
    plain = _scraped(_FakePipeline())  # a size not known: no such gauge
    assert "input_records_expected" not in plain and "input_seconds_left" not in plain


def test_the_display_says_spark_is_starting_until_its_first_micro_batch() -> None:
    starting = dataclasses.replace(
        _progress("running", Bottleneck("source", 900.0)), batches=0, records_processed=0
    )
    text = _text(starting)
    assert "bottleneck: starting Spark" in text and "busy" not in text


def test_the_display_shows_bytes_read_with_rate_and_time_left() -> None:
    progress = _progress(
        "running", None, reading=10.0, bytes_read=12_345_678, total_bytes=45_000_000
    )
    text = _text(progress)
    assert "27% 12.3 MB / 45.0 MB 1.2 MB/s eta 0:00:26" in " ".join(text.split())
    records = dataclasses.replace(_progress("running", None, reading=10.0), total_rows=400)
    assert "25% 100 / 400 records 10 rec/s eta 0:00:30" in " ".join(_text(records).split())
    assert "eta " not in _text(_progress("running", None))  # size unknown: no bar
