"""``--input rsocket://host:port/route``: the pipeline over a partitioned RSocket route."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
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
from reactive_streams.spark import RemoteRouteError, route_stats
from tests.spark.rsocket_producer import PartitionedRoute

from .conftest import SPARK_MARKS, run_to_end
from .test_read_on_executors import _dead_letters, _inputs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = SPARK_MARKS

BATCH_ROWS = 64
SOURCE = str(Path(reactive_streams.__file__).resolve().parent.parent)


def _producer(directory: Path, partitions: int, sql: str | None = None) -> PartitionedRoute:
    """The files of ``directory`` as a partitioned route, as the wire protocol describes.

    The records converted by the files layer (``SplitReader``: the dead-letter column
    included), cut into ``partitions`` contiguous ranges, in batches of ``BATCH_ROWS``
    (planned for ``sql``: ``None``, the default query).
    """
    plan = Pipeline(PipelineConfig(inputs=(directory,), sql=sql)).prepare()
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
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
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
        with pytest.raises(RemoteRouteError) as refusal:
            route_stats(f"tcp://127.0.0.1:{server.port}", "flights", token="s3cret")
    assert result.status == "completed", result.error
    # This producer has no R.stats: asked once by the run (the answer is final), refused
    assert refusal.value.refused
    asked = [record for record in caplog.records if "'flights.stats'" in record.getMessage()]
    assert len(asked) == 2, [record.getMessage() for record in asked]
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


def _serve(
    directory: Path, token: str, *extra: str, port: int = 0
) -> tuple[subprocess.Popen[str], int]:
    """``reactive-streams serve`` in a subprocess (``port`` 0: a free one); process, port."""
    process = subprocess.Popen(
        [sys.executable, "-m", "reactive_streams", "serve", "--input", str(directory),
         "--port", str(port), "--route", "flights", "--partitions", "3", "--batch-rows", "100",
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


def land_later_then_stop(
    pipeline: subprocess.Popen[str],
    result: Path,
    later: Path,
    incoming: Path,
    within: float,
    *,
    done: Path | None = None,
) -> None:
    """Wait for ``a.csv``'s records in ``result``, land ``later`` in ``incoming``, wait for
    its records too, then SIGTERM: the live run must end with exit status 0.

    With ``done``, ``a.csv`` is moved there (housekeeping) once its records are in, before
    ``later`` lands. Fails if ``pipeline`` exits meanwhile, or after ``within`` seconds in
    all.
    """
    deadline = time.monotonic() + within
    while _flights_in(result) < 900:  # a.csv's 902 records, one of them a dead letter
        assert pipeline.poll() is None, pipeline.communicate()[1]
        assert time.monotonic() < deadline, "the first file was never read"
        time.sleep(0.2)
    first = _flights_in(result)
    if done is not None:
        done.parent.mkdir(parents=True, exist_ok=True)
        (incoming / "a.csv").rename(done)
    later.rename(incoming / later.name)  # lands later
    while _flights_in(result) <= first + 600:
        assert pipeline.poll() is None, pipeline.communicate()[1]
        assert time.monotonic() < deadline, "the file that landed later was never read"
        time.sleep(0.2)
    pipeline.send_signal(signal.SIGTERM)
    _, errors = pipeline.communicate(timeout=120)
    assert pipeline.returncode == 0, errors


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
        land_later_then_stop(pipeline, result, tmp_path / "staged" / "b.jsonl", incoming, 240)
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
    assert summary["signal"] == "SIGTERM"  # the stop that ended the live run, named


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _pipeline_process(tmp_path: Path, port: int, *extra: str) -> subprocess.Popen[str]:
    """The command over the route at ``port``, 100 records per micro-batch, checkpointed."""
    return subprocess.Popen(
        [sys.executable, "-m", "reactive_streams", "pipeline",
         "--input", f"rsocket://127.0.0.1:{port}/flights", "--token", "s3cret",
         "--sql", "SELECT origin, count(*) AS flights FROM events GROUP BY origin",
         "--output", str(tmp_path / "out"), "--max-records-per-trigger", "100",
         "--checkpoint", str(tmp_path / "checkpoint"), "--quiet", *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SOURCE},
    )  # fmt: skip


def _after_micro_batches(tmp_path: Path, pipeline: subprocess.Popen[str], count: int) -> None:
    offsets = tmp_path / "checkpoint" / "query" / "offsets"
    deadline = time.monotonic() + 240
    while not (offsets / str(count)).exists():
        assert pipeline.poll() is None, pipeline.communicate()[1]
        assert time.monotonic() < deadline, "no micro-batch ran"
        time.sleep(0.1)


def _stop(*processes: subprocess.Popen[str]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=60)
        if process.stderr is not None:
            process.stderr.close()


def test_a_producer_killed_and_served_again_on_its_port_is_resumed_exactly(
    tmp_path: Path,
) -> None:
    _inputs(tmp_path / "in")
    port = _free_port()
    server, _ = _serve(tmp_path / "in", "s3cret", port=port)
    pipeline = _pipeline_process(tmp_path, port, "--summary-json", str(tmp_path / "s.json"))
    again = None
    try:
        _after_micro_batches(tmp_path, pipeline, 2)
        server.kill()  # SIGKILL, mid-stream: 2,403 records at 100 per micro-batch
        server.wait(timeout=60)
        assert pipeline.poll() is None  # the run is still going: it met the drop
        time.sleep(1.0)
        again, _ = _serve(tmp_path / "in", "s3cret", port=port)
        _, errors = pipeline.communicate(timeout=300)
        assert pipeline.returncode == 0, errors
    finally:
        _stop(pipeline, server, *([again] if again is not None else []))
    local = CliRunner().invoke(
        main,
        ["pipeline", "--input", str(tmp_path / "in"), "--sql",
         "SELECT origin, count(*) AS flights FROM events GROUP BY origin",
         "--output", str(tmp_path / "local"), "--quiet"],
    )  # fmt: skip
    assert local.exit_code == 0, (local.stdout, local.stderr)
    ours = pq.read_table(tmp_path / "out" / "result.parquet").sort_by("origin")
    theirs = pq.read_table(tmp_path / "local" / "result.parquet").sort_by("origin")
    assert ours.equals(theirs)  # exact: nothing lost, nothing twice
    summary = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert summary["producer_reconnects"] == 1  # the drop is said, not only outlived


def test_a_producer_that_stays_away_past_the_bound_fails_the_run_in_one_line(
    tmp_path: Path,
) -> None:
    _inputs(tmp_path / "in")
    port = _free_port()
    server, _ = _serve(tmp_path / "in", "s3cret", port=port)
    pipeline = _pipeline_process(tmp_path, port, "--reconnect-for", "3")
    try:
        _after_micro_batches(tmp_path, pipeline, 1)
        server.kill()
        _, errors = pipeline.communicate(timeout=300)
    finally:
        _stop(pipeline, server)
    assert pipeline.returncode == 1, errors
    [line] = [text for text in errors.splitlines() if text.startswith("Error:")]
    assert f"127.0.0.1:{port}" in line, errors


def test_the_pipeline_killed_and_run_again_on_its_checkpoint_is_exact(tmp_path: Path) -> None:
    _inputs(tmp_path / "in")
    server, port = _serve(tmp_path / "in", "s3cret")
    try:
        first = _pipeline_process(tmp_path, port)
        try:
            _after_micro_batches(tmp_path, first, 3)
            first.kill()  # SIGKILL: no summary, no clean stop, mid-stream
            first.wait(timeout=60)
        finally:
            _stop(first)
        assert not (tmp_path / "out" / "result.parquet").exists()
        second = _pipeline_process(tmp_path, port)
        try:
            _, errors = second.communicate(timeout=300)
        finally:
            _stop(second)
        assert second.returncode == 0, errors
    finally:
        _stop(server)
    local = CliRunner().invoke(
        main,
        ["pipeline", "--input", str(tmp_path / "in"), "--sql",
         "SELECT origin, count(*) AS flights FROM events GROUP BY origin",
         "--output", str(tmp_path / "local"), "--quiet"],
    )  # fmt: skip
    assert local.exit_code == 0, (local.stdout, local.stderr)
    ours = pq.read_table(tmp_path / "out" / "result.parquet").sort_by("origin")
    theirs = pq.read_table(tmp_path / "local" / "result.parquet").sort_by("origin")
    assert ours.equals(theirs)  # exact across the kill: nothing lost, nothing twice


def _executor_jvms(process: subprocess.Popen[str]) -> set[int]:
    """Pids of the executor JVMs below ``process`` (``local-cluster``'s workers start them)."""
    import psutil

    found = set()
    for child in psutil.Process(process.pid).children(recursive=True):
        try:
            if any("CoarseGrainedExecutorBackend" in part for part in child.cmdline()):
                found.add(child.pid)
        except psutil.Error:  # gone meanwhile
            continue
    return found


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_executors_killed_mid_task_are_replaced_and_the_micro_batch_retried_exactly(
    tmp_path: Path,
) -> None:
    """``local-cluster[2,1,1024]``, one core per executor JVM. Every partition's stream
    stalls at its 300th record, so a micro-batch gets stuck with a task blocked on an
    executor; both executor JVMs get SIGKILL then. Spark loses the running task and runs
    it again on the executors the worker starts in their place, which ask the producer for
    the same offsets again."""
    _inputs(tmp_path / "in")
    route = _producer(tmp_path / "in", 3)
    route.stall_at = (None, 300)  # about a third into each of the 3 partitions
    offsets = tmp_path / "checkpoint" / "query" / "offsets"
    with serve(route.routes(), token="s3cret") as server:
        pipeline = _pipeline_process(
            tmp_path, server.port, "--master", "local-cluster[2,1,1024]", "--debug"
        )
        try:
            deadline = time.monotonic() + 300
            stuck = False
            while not stuck:  # a stall reached, and no micro-batch started for 2 s since
                assert pipeline.poll() is None, pipeline.communicate()[1][-4000:]
                assert time.monotonic() < deadline, "the micro-batches never got stuck"
                started = len(list(offsets.glob("[0-9]*")))
                time.sleep(2.0)
                stuck = route.stalls > 0 and len(list(offsets.glob("[0-9]*"))) == started
            before = _executor_jvms(pipeline)
            assert len(before) == 2, before
            for pid in before:  # the stuck task is on one of them
                os.kill(pid, signal.SIGKILL)
            while not (_executor_jvms(pipeline) - before):  # the worker starts others
                assert pipeline.poll() is None, pipeline.communicate()[1][-4000:]
                assert time.monotonic() < deadline, "the lost executors were never replaced"
                time.sleep(0.2)
            route.release.set()
            _, errors = pipeline.communicate(timeout=300)
        finally:
            route.release.set()
            _stop(pipeline)
    assert pipeline.returncode == 0, errors[-4000:]
    assert "ExecutorLostFailure" in errors, errors[-4000:]  # a running task was lost
    # What the route holds (the producer converted the records: 3 dead letters)
    table = pa.Table.from_batches(
        [batch for batches in route.partitions for batch in batches], route.schema
    )
    good = table.filter(pa.compute.is_null(table.column("_dead_letter")))
    counts = good.group_by("origin").aggregate([("origin", "count")])
    expected = dict(
        zip(counts["origin"].to_pylist(), counts["origin_count"].to_pylist(), strict=True)
    )
    ours = pq.read_table(tmp_path / "out" / "result.parquet")
    got = dict(zip(ours["origin"].to_pylist(), ours["flights"].to_pylist(), strict=True))
    assert got == expected  # exact across the lost executors and the task run again
