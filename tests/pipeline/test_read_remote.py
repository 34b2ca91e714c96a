"""``--input rsocket://host:port/route``: the pipeline over a partitioned RSocket route."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest
from click.testing import CliRunner

import reactive_streams
from reactive_streams.cli import main
from reactive_streams.files import SplitReader, plan_splits
from reactive_streams.pipeline import Pipeline, PipelineConfig, PipelineUsageError, RemoteInput
from reactive_streams.rsocket import serve
from tests.spark.rsocket_producer import PartitionedRoute

from .conftest import SPARK_MARKS, run_to_end
from .test_read_on_executors import _dead_letters, _inputs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = SPARK_MARKS

BATCH_ROWS = 64
SOURCE = str(Path(reactive_streams.__file__).resolve().parent.parent)


def _producer(directory: Path, partitions: int) -> PartitionedRoute:
    """The files of ``directory`` as a partitioned route, as the wire protocol describes.

    The records converted by the files layer (``SplitReader``: the dead-letter column
    included), cut into ``partitions`` contiguous ranges, in batches of ``BATCH_ROWS``.
    """
    plan = Pipeline(PipelineConfig(inputs=(directory,))).prepare()
    reader = SplitReader(plan.schema, BATCH_ROWS)
    splits = plan_splits(list(plan.files))
    table = pa.Table.from_batches(
        [batch for split in splits for batch in reader.batches(split)], reader.output_schema
    )
    each = -(-table.num_rows // partitions)
    parts = [
        table.slice(index * each, each).to_batches(max_chunksize=BATCH_ROWS)
        for index in range(partitions)
    ]
    return PartitionedRoute("flights", parts, reader.output_schema, batch_rows=BATCH_ROWS)


def test_a_route_gives_the_same_result_and_dead_letters_as_the_files_read_locally(
    spark: SparkSession, tmp_path: Path
) -> None:
    _inputs(tmp_path / "in")
    route = _producer(tmp_path / "in", 2)
    local = Pipeline(
        PipelineConfig(
            inputs=(tmp_path / "in",), output=tmp_path / "local", max_records_per_trigger=500
        )
    )
    run_to_end(local, spark)
    local_result = local.finish()
    local.close()
    assert local_result.status == "completed", local_result.error
    with serve(route.routes(), token="s3cret") as server:
        remote = Pipeline(
            PipelineConfig(
                input_url=f"rsocket://127.0.0.1:{server.port}/flights",
                token="s3cret",
                output=tmp_path / "remote",
                max_records_per_trigger=500,
            )
        )
        run_to_end(remote, spark)
        result = remote.finish()
        remote.close()
    assert result.status == "completed", result.error
    ours = pq.read_table(tmp_path / "remote" / "result.parquet")
    theirs = pq.read_table(tmp_path / "local" / "result.parquet")
    keys = [(name, "ascending") for name in theirs.column_names]
    assert ours.sort_by(keys).equals(theirs.sort_by(keys))
    assert _dead_letters(tmp_path / "remote" / "dead-letters.jsonl") == _dead_letters(
        tmp_path / "local" / "dead-letters.jsonl"
    )
    progress = result.progress
    assert progress.records_emitted == 2_400
    assert progress.dead_letters == 3
    assert progress.records_read == 2_403
    assert progress.splits == 2
    assert progress.batches >= 5  # 2,403 records at 500 per micro-batch
    assert route.streams > 0


def test_a_wrong_token_or_route_fails_before_spark_in_one_line(tmp_path: Path) -> None:
    _inputs(tmp_path / "in")
    route = _producer(tmp_path / "in", 2)
    with serve(route.routes(), token="s3cret") as server:
        url = f"rsocket://127.0.0.1:{server.port}"
        cases = [
            ("flights", "wrong", r"route 'flights\.meta': the server refused the connection"),
            ("nowhere", "s3cret", r"route 'nowhere\.meta': .*no route 'nowhere\.meta'"),
        ]
        for name, token, message in cases:
            config = PipelineConfig(input_url=f"{url}/{name}", token=token, output=tmp_path / "out")
            with pytest.raises(PipelineUsageError, match=message) as caught:
                Pipeline(config).prepare()
            assert "\n" not in str(caught.value)


def test_route_urls() -> None:
    assert RemoteInput.parse("rsocket://h:7000/flights") == RemoteInput(
        "rsocket://h:7000/flights", "tcp://h:7000", "flights"
    )
    assert RemoteInput.parse("rsocket+ws://h:80/rs/flights") == RemoteInput(
        "rsocket+ws://h:80/rs/flights", "ws://h:80/rs", "flights"
    )
    assert RemoteInput.parse("data/flights.csv") is None
    with pytest.raises(PipelineUsageError, match="expected rsocket://HOST:PORT/ROUTE"):
        RemoteInput.parse("rsocket://h/flights")


def _serve(directory: Path, token: str, *extra: str) -> tuple[subprocess.Popen[str], int]:
    """``reactive-streams serve`` on a free port in a subprocess; its process and port."""
    process = subprocess.Popen(
        [sys.executable, "-m", "reactive_streams", "serve", "--input", str(directory),
         "--port", "0", "--route", "flights", "--partitions", "3", "--batch-rows", "100",
         "--token", token, *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SOURCE},  # the code under test, installed or not
    )  # fmt: skip
    assert process.stderr is not None
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    while True:
        line = lines.get(timeout=120)  # planning the files; a hang fails here
        found = re.search(r"on tcp://[^:]+:(\d+)$", line.strip())
        if found is not None:
            return process, int(found.group(1))


def test_serve_in_another_process_and_the_pipeline_reading_it_match_the_local_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The whole path on loopback: ``serve`` in a subprocess, the command reading it."""
    _inputs(tmp_path / "in")
    sql = "SELECT origin, count(*) AS flights, sum(dep_delay) AS delay FROM events GROUP BY origin"
    local = CliRunner().invoke(
        main,
        ["pipeline", "--input", str(tmp_path / "in"), "--sql", sql, "--output",
         str(tmp_path / "local"), "--max-records-per-trigger", "700",
         "--summary-json", str(tmp_path / "local.json"), "--quiet"],
    )  # fmt: skip
    assert local.exit_code == 0, (local.stdout, local.stderr)
    process, port = _serve(tmp_path / "in", "s3cret")
    try:
        summary_file = tmp_path / "summary.json"
        remote = CliRunner().invoke(
            main,
            ["pipeline", "--input", f"rsocket://127.0.0.1:{port}/flights", "--token", "s3cret",
             "--sql", sql, "--output", str(tmp_path / "remote"),
             "--max-records-per-trigger", "700", "--summary-json", str(summary_file),
             "--quiet"],
        )  # fmt: skip
        assert remote.exit_code == 0, (remote.stdout, remote.stderr)
    finally:
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=60)
        if process.stderr is not None:
            process.stderr.close()
    assert status == 0
    ours = pq.read_table(tmp_path / "remote" / "result.parquet")
    theirs = pq.read_table(tmp_path / "local" / "result.parquet")
    keys = [(name, "ascending") for name in theirs.column_names]
    assert ours.sort_by(keys).equals(theirs.sort_by(keys))
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    expected = json.loads((tmp_path / "local.json").read_text(encoding="utf-8"))
    # A --sql query reads time_hour as the files give it (text: "not a time" fits), so
    # 2 dead letters of the 2,403 records, on both sides.
    assert (summary["input_rows"], summary["dead_letters"]) == (2_403, 2)
    for figure in ("input_rows", "rows_into_spark", "dead_letters", "output_groups"):
        assert summary[figure] == expected[figure], figure
    assert summary["micro_batches"] >= 4  # 2,403 records at 700 per micro-batch


def _flights_in(result: Path) -> int:
    """The ``flights`` column's sum in a result file, or -1 while there is none."""
    try:
        return int(pa.compute.sum(pq.read_table(result).column("flights")).as_py() or 0)
    except (FileNotFoundError, pa.ArrowInvalid):
        return -1


def test_a_followed_route_runs_until_stopped_committing_its_result_each_micro_batch(
    tmp_path: Path,
) -> None:
    """``serve --follow`` in one process, the pipeline in another: files that land later
    are read, the result is rewritten atomically after each micro-batch, and SIGTERM ends
    the run as completed (exit 0) with the result of everything read."""
    _inputs(tmp_path / "staged")
    incoming = tmp_path / "in"
    incoming.mkdir()
    (tmp_path / "staged" / "a.csv").rename(incoming / "a.csv")
    sql = "SELECT origin, count(*) AS flights FROM events GROUP BY origin"
    server, port = _serve(incoming, "s3cret", "--follow", "--poll-interval", "0.1")
    result = tmp_path / "out" / "result.parquet"
    pipeline = subprocess.Popen(
        [sys.executable, "-m", "reactive_streams", "pipeline",
         "--input", f"rsocket://127.0.0.1:{port}/flights", "--token", "s3cret", "--sql", sql,
         "--output", str(tmp_path / "out"), "--max-records-per-trigger", "500",
         "--summary-json", str(tmp_path / "summary.json"), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SOURCE},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while _flights_in(result) < 900:  # a.csv's 902 records, one of them a dead letter
            assert pipeline.poll() is None, pipeline.communicate()[1]
            assert time.monotonic() < deadline, "the first file was never read"
            time.sleep(0.2)
        first = _flights_in(result)
        (tmp_path / "staged" / "b.jsonl").rename(incoming / "b.jsonl")  # lands later
        while _flights_in(result) <= first + 600:
            assert pipeline.poll() is None, pipeline.communicate()[1]
            assert time.monotonic() < deadline, "the file that landed later was never read"
            time.sleep(0.2)
        pipeline.send_signal(signal.SIGTERM)
        _, errors = pipeline.communicate(timeout=120)
        assert pipeline.returncode == 0, errors
    finally:
        for process in (pipeline, server):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=60)
        if server.stderr is not None:
            server.stderr.close()
    local = CliRunner().invoke(
        main,
        ["pipeline", "--input", str(incoming), "--sql", sql, "--output", str(tmp_path / "local"),
         "--quiet"],
    )  # fmt: skip
    assert local.exit_code == 0, (local.stdout, local.stderr)
    ours = pq.read_table(result).sort_by("origin")
    theirs = pq.read_table(tmp_path / "local" / "result.parquet").sort_by("origin")
    assert ours.column("flights").to_pylist() == theirs.column("flights").to_pylist()
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert summary["status"] == "completed" and summary["live_input"] is True
    assert "stopped by SIGTERM" in " ".join(summary["notes"])
