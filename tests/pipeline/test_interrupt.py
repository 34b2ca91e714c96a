"""Ctrl-C and SIGTERM stop the pipeline cleanly: the query stops, no result file, a summary,
the JSON summary, Spark's output file removed, and exit status 128 + the signal's number.

Runs the command in its own process (its own JVM), since a signal goes to a whole process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .conftest import BRIDGES

if TYPE_CHECKING:
    from collections.abc import Callable

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(400),  # a fresh JVM, then up to 120 s to stop
    pytest.mark.skipif(not BRIDGES, reason="needs pyspark (the spark extra)"),
]


def _wait_until(
    ready: Callable[[], bool], process: subprocess.Popen[str], timeout: float, what: str
) -> None:
    """Wait until ``ready()`` is true while the pipeline runs, or fail."""
    tick = threading.Event()
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, f"the pipeline ended before {what}"
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        tick.wait(0.1)


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    env["COLUMNS"] = "120"
    # A session of its own, as a container's or a service's: signals go to its group.
    return subprocess.Popen(
        [sys.executable, "-m", "reactive_streams", "pipeline", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip


def _spark_output(process: subprocess.Popen[str]) -> Path:
    """Where the command keeps Spark's own output while it runs (cli._pipeline)."""
    directory = Path(tempfile.gettempdir()) / "reactive-streams-pipeline"
    return directory / f"spark-output-{process.pid}.log"


def _finish(process: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.mark.parametrize(
    ("signum", "group", "code", "announced"),
    [
        # Ctrl-C in a terminal: SIGINT to the process (the JVM ignores it anyway).
        (signal.SIGINT, False, 130, "Interrupted: stopping the query..."),
        # docker stop, Kubernetes, an init that forwards to the group: SIGTERM, here to the
        # whole process group (the JVM, in a group of its own, keeps running until the
        # pipeline stops the query). Before: the command died at once, exit status 143,
        # no summary, no JSON summary, Spark's output file left behind.
        (signal.SIGTERM, True, 143, "Stopped by SIGTERM: stopping the query..."),
    ],
    ids=["sigint", "sigterm"],
)
def test_a_stop_signal_stops_cleanly_with_a_summary(
    tmp_path: Path, signum: int, group: bool, code: int, announced: str
) -> None:
    data = tmp_path / "events.csv"
    rows = "".join(f"JFK,2013-01-01T{hour % 24:02d}:00:00Z,{hour},1.0\n" for hour in range(50_000))
    # The first record is malformed: the output then holds its dead-letter file.
    data.write_text("origin,time_hour,dep_time,dep_delay\nJFK,never,1,1\n" + rows)
    out = tmp_path / "out"
    checkpoint = tmp_path / "checkpoint"
    summary = tmp_path / "summary.json"
    process = _start(
        tmp_path, "--input", str(data), "--output", str(out), "--rate", "2000",
        "--checkpoint", str(checkpoint), "--summary-json", str(summary),
    )  # fmt: skip
    try:
        # Spark planned micro-batch 0: the query runs (the source reads before it starts,
        # so a dead letter alone would not say that).
        offsets = checkpoint / "query" / "offsets" / "0"
        _wait_until(offsets.exists, process, 180, "micro-batch 0 was planned")
        letters = out / "dead-letters.jsonl"
        _wait_until(letters.exists, process, 60, "the dead letter was written")
        assert _spark_output(process).exists()
        if group:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
    finally:
        stdout, stderr = _finish(process)
    assert process.returncode == code, stderr[-2000:]
    assert announced in stdout
    assert "Pipeline interrupted" in stdout
    assert "Traceback" not in stderr
    assert sorted(path.name for path in out.iterdir()) == ["dead-letters.jsonl"]
    written = json.loads(summary.read_text())
    assert written["status"] == "interrupted"
    assert written["exit_code"] == code
    assert written["signal"] == signal.Signals(signum).name
    assert written["spark_output"] is None
    assert not _spark_output(process).exists()  # a temporary log, removed


def test_sigterm_while_spark_starts_stops_before_the_stream(tmp_path: Path) -> None:
    import psutil

    data = tmp_path / "events.csv"
    data.write_text("origin,time_hour,dep_time,dep_delay\nJFK,2013-01-01T00:00:00Z,1,1.0\n")
    summary = tmp_path / "summary.json"
    process = _start(
        tmp_path, "--quiet", "--input", str(data), "--output", str(tmp_path / "out"),
        "--summary-json", str(summary),
    )  # fmt: skip
    try:

        def spark_starting() -> bool:  # the driver JVM, not `java -version`
            children = psutil.Process(process.pid).children(recursive=True)
            return any("SparkSubmit" in " ".join(child.cmdline()) for child in children)

        _wait_until(spark_starting, process, 120, "the driver JVM started")
        os.killpg(process.pid, signal.SIGTERM)
    finally:
        stdout, stderr = _finish(process)
    assert process.returncode == 143, stderr[-2000:]
    assert stderr == "Stopped by SIGTERM before the stream started.\n"
    assert stdout == ""
    assert json.loads(summary.read_text()) == {
        "status": "interrupted",
        "exit_code": 143,
        "error": None,
        "signal": "SIGTERM",
    }
    assert not _spark_output(process).exists()
    assert not (tmp_path / "out" / "result.parquet").exists()
