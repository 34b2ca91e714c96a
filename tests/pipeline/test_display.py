"""What the user reads: the summary, the top rows at any width, the words for counts."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from reactive_streams.cli._display import (
    render_progress,
    render_summary,
    render_top,
    spark_output_line,
)
from reactive_streams.pipeline import PipelineProgress, PipelineResult, RouteStats
from reactive_streams.pipeline._checkpoint import ResumePoint
from reactive_streams.pipeline._diagnostics import resumed_note


def _progress(mode: str = "update", groups: int = 40) -> PipelineProgress:
    return PipelineProgress(
        phase="done", elapsed=1.0, records_read=100, records_emitted=100,
        records_processed=100, dead_letters=0, batches=1, source_demand=0, sink_demand=1,
        groups=groups, late_rows=0, total_rows=100, output_mode=mode,
    )  # fmt: skip


def _result(mode: str = "update") -> PipelineResult:
    start = dt.datetime(2013, 5, 23, 10, tzinfo=dt.UTC)
    top: list[dict[str, object]] = [
        {
            "origin": "EWR",
            "window_start": start + dt.timedelta(days=day),
            "window_end": start + dt.timedelta(days=day, hours=1),
            "flights": 38,
            "cancelled": 0,
            "avg_dep_delay": 15.37,
            "max_dep_delay": 287.0,
        }
        for day in range(10)
    ]
    return PipelineResult(
        status="completed", progress=_progress(mode), wall_time=1.0, peak_memory=300 << 20,
        spark_peak_memory=800 << 20, output_path=Path("out/result.parquet"),
        dead_letter_path=None, result=None, top=top,
    )  # fmt: skip


def _text(renderable: object, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_the_top_rows_never_cut_a_window_time_at_80_columns() -> None:
    text = _text(render_top(_result(), width=80), 80)
    assert "…" not in text
    for day in range(23, 33):
        moment = dt.datetime(2013, 5, 23, 10) + dt.timedelta(days=day - 23)
        assert moment.strftime("%Y-%m-%d %H:%M") in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "2 more columns in the result file: avg_dep_delay, max_dep_delay" in text
    wide = _text(render_top(_result(), width=140), 140)
    assert "more column" not in wide
    assert "max_dep_delay" in wide


def test_the_summary_names_both_drivers_memory() -> None:
    text = _text(render_summary(_result()), 100)
    assert "Python driver peak memory" in text and "300 MiB" in text
    assert "Spark driver JVM peak memory" in text and "800 MiB" in text
    summary = _result().to_json()
    assert summary["python_driver_peak_memory_bytes"] == 300 << 20
    assert summary["spark_driver_jvm_peak_memory_bytes"] == 800 << 20


def test_a_resumed_runs_summary_says_which_figures_are_this_runs() -> None:
    progress = dataclasses.replace(
        _progress(), resumed=True, records_read=1_000, records_skipped=300,
        records_emitted=690, dead_letters=10, batches=3, batches_before=2,
        dead_letters_before=4,
    )  # fmt: skip
    result = dataclasses.replace(_result(), progress=progress)
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in _text(render_summary(result), 100).splitlines()
        if line.count("│") == 3
    }
    assert rows["input rows, this run"] == "1,000"
    assert rows["skipped: committed before"] == "300"
    assert rows["rows into Spark, this run"] == "690"
    assert rows["micro-batches, this run"] == "3"
    assert rows["dead letters, this run"] == "10"
    assert rows["micro-batches, all runs"] == "5"
    assert rows["dead letters, all runs"] == "14"
    summary = result.to_json()
    assert (summary["input_rows"], summary["skipped_rows"], summary["micro_batches"]) == (
        1_000, 300, 3,
    )  # fmt: skip
    assert summary["all_runs"] == {"micro_batches": 5, "dead_letters": 14}
    plain = _text(render_summary(_result()), 100)
    assert "this run" not in plain
    assert "all runs" not in plain
    assert _result().to_json()["all_runs"] is None


def test_the_summary_never_cuts_a_path_at_80_columns() -> None:
    # Before: the note naming Spark's output file ended in "spark-output-…".
    deep = Path("/tmp/reactive-streams-pipeline") / ("nested-" * 8) / "spark-output-4242.log"
    result = dataclasses.replace(
        _result(), status="failed", output_path=None, error="boom", spark_output=deep,
        dead_letter_path=deep.with_name("dead-letters-of-a-long-named-input.jsonl"),
    )  # fmt: skip
    text = _text(render_summary(result), 80)
    assert "…" not in text
    folded = "".join(line.split("│")[-2].strip() for line in text.splitlines()[-5:-1])
    assert str(result.dead_letter_path) in folded
    line = spark_output_line(result)
    assert line == f"Spark's own output (logs, Java stack traces): {deep}"
    assert spark_output_line(_result()) is None
    assert result.to_json()["spark_output"] == str(deep)


@pytest.mark.parametrize(
    ("records", "wall", "shown"),
    [(100, 1.0, "100"), (3, 13.6, "0.22"), (0, 5.0, "0"), (3_367_760, 20.0, "168,388")],
)
def test_the_summary_rate_keeps_small_rates_readable(records: int, wall: float, shown: str) -> None:
    progress = dataclasses.replace(_progress(), records_read=records)
    result = dataclasses.replace(_result(), progress=progress, wall_time=wall)
    line = next(
        line for line in _text(render_summary(result), 100).splitlines() if "rows/s" in line
    )
    assert line.split("│")[-2].strip() == shown


def test_append_mode_counts_rows_not_groups() -> None:
    result = _result("append")
    assert "output rows" in _text(render_summary(result), 100)
    assert "40 rows" in _text(render_progress(result.progress, title="t"), 120)
    assert "Top 10 rows" in _text(render_top(result, width=200), 200)
    assert result.to_json()["output_rows"] == 40
    assert "40 groups" in _text(render_progress(_progress(), title="t"), 120)


def test_one_micro_batch_is_singular() -> None:
    note = resumed_note(Path("ckpt"), ResumePoint(offset=400, committed=1, replay=None))
    assert note == (
        "resumed from the checkpoint ckpt: 1 micro-batch was committed before (400 records)"
    )
    assert "1 micro-batch " in _text(render_progress(_progress(), title="t"), 120)


def test_the_base_install_gets_the_install_hint_not_a_traceback() -> None:
    code = (
        "import sys; sys.modules['pyarrow'] = None\n"
        "from reactive_streams.cli import main\n"
        "main(['pipeline', '--quiet'])\n"
    )
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "Error: reactive-streams pipeline needs the pipeline extra (no module named 'pyarrow'): "
        "pip install 'reactive-streams-py[pipeline]'"
    ]


def test_the_executors_demand_per_split_reads_at_a_glance() -> None:
    progress = PipelineProgress(
        phase="running", elapsed=3.0, records_read=300, records_emitted=297,
        records_processed=297, dead_letters=3, batches=2, source_demand=300, sink_demand=1,
        groups=12, late_rows=0, total_rows=None, split_shares=(100, 0, 200), splits=3,
    )  # fmt: skip
    text = _text(render_progress(progress, title="run"), 140)
    assert "executors" in text
    assert "300 records" in text  # the last micro-batch's demand
    assert "last micro-batch: 2 of 3 splits read, 100-200 records each" in text
    assert "3 dead letters" in text
    assert "in flight" not in text  # the driver-side bridge is not in this run


def test_equal_shares_read_as_one_number() -> None:
    progress = PipelineProgress(
        phase="done", elapsed=3.0, records_read=400, records_emitted=400,
        records_processed=400, dead_letters=0, batches=1, source_demand=400, sink_demand=0,
        groups=12, late_rows=0, total_rows=400, split_shares=(100, 100, 100, 100), splits=4,
    )  # fmt: skip
    text = _text(render_progress(progress, title="run"), 140)
    assert "last micro-batch: 4 of 4 splits read, 100 records each" in text


def test_an_rsocket_inputs_producer_shows_its_demand_and_latency() -> None:
    assert "producer" not in _text(render_progress(_progress(), title="t"), 140)
    producer = RouteStats(
        streams=4, outstanding_batches=7, sent_batches=1_234, latency_p50=0.42, latency_p99=1.5
    )
    text = _text(
        render_progress(dataclasses.replace(_progress(), producer=producer), title="t"), 160
    )
    assert "producer" in text and "1,234 batches sent" in text and "7 batches" in text
    assert "4 streams open, arrival to commit p50 0.42 s, p99 1.50 s" in text
    files = RouteStats(streams=1, outstanding_batches=1, sent_batches=3)
    text = _text(render_progress(dataclasses.replace(_progress(), producer=files), title="t"), 160)
    assert "1 stream open" in text and "p50" not in text


def test_a_producer_that_dropped_says_so_in_the_display_and_the_summary() -> None:
    producer = RouteStats(streams=2, outstanding_batches=1, sent_batches=9)
    dropped = dataclasses.replace(_progress(), producer=producer, producer_reconnects=2)
    text = _text(render_progress(dropped, title="t"), 160)
    assert "2 streams open; dropped, reconnected 2 times" in text
    result = dataclasses.replace(_result(), progress=dropped)
    assert "producer reconnects" in _text(render_summary(result), 100)
    assert result.to_json()["producer_reconnects"] == 2
    assert "reconnect" not in _text(render_summary(_result()), 100)  # files: no producer
