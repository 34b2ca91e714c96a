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


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with this checkout's ``src`` first on the path."""
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, *args], check=False, capture_output=True, text=True, env=env,
        timeout=360,
    )  # fmt: skip


def _pipeline(*args: str) -> subprocess.CompletedProcess[str]:
    return _python("-m", "reactive_streams", "pipeline", *args)


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


_WRITE_WHILE_SPARK_STARTS = """
import sys, threading, time
from pathlib import Path
import psutil
from reactive_streams.pipeline import Pipeline, PipelineConfig

data, out, log = (Path(arg) for arg in sys.argv[1:4])
pipe = Pipeline(PipelineConfig(inputs=(data,), output=out, spark_output=log,
                               spark_log_level="OFF"))
pipe.prepare(start_spark=True)  # Spark starts on a thread of its own
tick, deadline = threading.Event(), time.monotonic() + 240
while not any(child.name() == "java" for child in psutil.Process().children(recursive=True)):
    assert time.monotonic() < deadline, "no JVM started"
    tick.wait(0.05)
print("written while the JVM starts", file=sys.stderr, flush=True)
pipe.close()  # waits for the session, then stops it
"""


def test_this_process_keeps_its_stderr_while_spark_starts(tmp_path: Path) -> None:
    # What the command prints while the JVM starts (--metrics-port's URL, an error) reaches
    # the terminal; only the JVM's own output goes to the file.
    data = _csv(tmp_path / "in.csv")
    log = tmp_path / "spark.log"
    done = _python("-c", _WRITE_WHILE_SPARK_STARTS, str(data), str(tmp_path / "out"), str(log))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == "written while the JVM starts\n"  # before: in the file
    assert "Using incubator modules" in log.read_text()  # the JVM's first line


@pytest.mark.parametrize(
    ("sql", "code", "cause"),
    [
        pytest.param(
            "SELECT CASE WHEN dep_delay > 100 THEN raise_error('delay too long') "
            "ELSE origin END AS o FROM events", 1, "delay too long", id="raise_error",
        ),
        # An error with a query context: PySpark logged it with its Java stack trace, on
        # stderr (about 28 KB: twice 13 KB), as it converted it.
        pytest.param(
            "SELECT CAST(origin AS INT) AS o FROM events", 1, "CAST_INVALID_INPUT", id="ansi"
        ),
        # The same for a column that does not resolve (16.5 KB before).
        pytest.param("SELECT nope FROM events", 2, "UNRESOLVED_COLUMN", id="unresolved"),
    ],
)  # fmt: skip
def test_a_failing_query_leaves_one_error_line_on_stderr(
    tmp_path: Path, sql: str, code: int, cause: str
) -> None:
    data = _csv(tmp_path / "in.csv")
    done = _pipeline(
        "--quiet", "--input", str(data), "--output", str(tmp_path / "out"), "--sql", sql
    )
    assert done.returncode == code, done.stderr[-3000:]
    (line,) = done.stderr.splitlines()  # before: 8-28 KB of Spark's logs and Java traces
    assert line.startswith(
        "Error: the pipeline failed: " if code == 1 else "Error: the query does not "
    )
    assert cause in line
    if code == 1:  # Spark's own output is kept, and the summary says where, in full
        prefix = "Spark's own output (logs, Java stack traces): "
        (named,) = [line for line in done.stdout.splitlines() if line.startswith(prefix)]
        kept = Path(named.removeprefix(prefix))  # before: cut at 80 columns ("...spark-o…")
        assert kept.name.startswith("spark-output-")
        assert "WARNING: Using incubator modules" in kept.read_text()
        kept.unlink()
