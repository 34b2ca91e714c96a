"""The command's stderr holds its own lines only: no JVM warning, Spark log or Java trace.

Each test runs the command in its own process, so that the pipeline starts (and quiets)
its own JVM, as a user's run does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import BRIDGES

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.skipif(not BRIDGES, reason="needs pyspark (the spark extra)"),
]


def _pipeline(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "reactive_streams", "pipeline", *args],
        check=False, capture_output=True, text=True, env=env, timeout=360,
    )  # fmt: skip


def _csv(path: Path) -> Path:
    rows = "".join(
        f"JFK,2013-01-01T{hour % 24:02d}:00:00Z,{hour},{hour % 300}.0\n" for hour in range(500)
    )
    path.write_text("origin,time_hour,dep_time,dep_delay\n" + rows)
    return path


def test_a_quiet_run_prints_nothing_at_all(tmp_path: Path) -> None:
    data = _csv(tmp_path / "in.csv")
    done = _pipeline("--quiet", "--input", str(data), "--output", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""  # before: "WARNING: Using incubator modules: ..."
    assert done.stdout == ""


def test_a_failing_query_leaves_one_error_line_on_stderr(tmp_path: Path) -> None:
    data = _csv(tmp_path / "in.csv")
    sql = (
        "SELECT CASE WHEN dep_delay > 100 THEN raise_error('delay too long') ELSE origin END"
        " AS o FROM events"
    )
    done = _pipeline(
        "--quiet", "--input", str(data), "--output", str(tmp_path / "out"), "--sql", sql
    )
    assert done.returncode == 1, done.stderr[-3000:]
    (line,) = done.stderr.splitlines()  # before: 8-28 KB of Spark's logs and Java traces
    assert line.startswith("Error: the pipeline failed: ")
    assert "delay too long" in line
    # Spark's own output is kept, and the summary says where.
    assert "Spark's own output (logs, Java stack traces): " in done.stdout
