"""Ctrl-C stops the pipeline cleanly: the query stops, no result file, a summary, status 130.

Runs the command in its own process (its own JVM), since SIGINT goes to a whole process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .conftest import BRIDGES

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(400),  # a fresh JVM, then up to 120 s to stop
    pytest.mark.skipif(not BRIDGES, reason="needs pyspark (the spark extra)"),
]


def _wait_for_file(path: Path, process: subprocess.Popen[str], timeout: float) -> None:
    """Wait until ``path`` exists (the source has started reading), or fail."""
    tick = threading.Event()
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, "the pipeline ended before it started reading"
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout} s"
        tick.wait(0.1)


def test_ctrl_c_stops_cleanly_with_a_summary(tmp_path: Path) -> None:
    data = tmp_path / "events.csv"
    rows = "".join(f"JFK,2013-01-01T{hour % 24:02d}:00:00Z,{hour},1.0\n" for hour in range(50_000))
    # The first record is malformed: the output then holds its dead-letter file.
    data.write_text("origin,time_hour,dep_time,dep_delay\nJFK,never,1,1\n" + rows)
    out = tmp_path / "out"
    checkpoint = tmp_path / "checkpoint"
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    env["COLUMNS"] = "120"
    process = subprocess.Popen(
        [sys.executable, "-m", "reactive_streams", "pipeline", "--input", str(data),
         "--output", str(out), "--rate", "2000", "--checkpoint", str(checkpoint)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        # Spark planned micro-batch 0: the query runs (the source reads before it starts,
        # so a dead letter alone would not say that).
        _wait_for_file(checkpoint / "query" / "offsets" / "0", process, timeout=180)
        _wait_for_file(out / "dead-letters.jsonl", process, timeout=60)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr[-2000:]
    assert "Interrupted: stopping the query..." in stdout
    assert "Pipeline interrupted" in stdout
    assert "Traceback" not in stderr
    assert sorted(path.name for path in out.iterdir()) == ["dead-letters.jsonl"]
