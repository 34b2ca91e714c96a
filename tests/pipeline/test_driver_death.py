"""The Spark driver's JVM dying mid-run ends the pipeline at once, naming the cause.

``kill -9`` of the driver JVM must not leave the command waiting forever: the query
watcher must survive py4j's ``ConnectionRefusedError``, and every wait of the sink has a
liveness check.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from reactive_streams.pipeline._spark_driver import DriverProcess, describe_exit

from .conftest import BRIDGES, Recorder


class _DeadQuery:
    """A ``StreamingQuery`` whose JVM is gone: every call raises as py4j does then."""

    name = "q"
    id = "0"

    def awaitTermination(self, _timeout: float) -> bool:
        raise ConnectionRefusedError(111, "Connection refused")

    def exception(self) -> Any:
        raise ConnectionRefusedError(111, "Connection refused")


def test_the_query_watcher_signals_an_error_when_the_jvm_cannot_be_reached() -> None:
    pytest.importorskip("pyspark")
    from reactive_streams.spark import StreamingQueryFailedError
    from reactive_streams.spark._from_streaming_query import _QuerySubscription

    recorder: Recorder[Any] = Recorder()
    subscription = _QuerySubscription(recorder, None)  # type: ignore[arg-type]
    recorder.on_subscribe(subscription)
    watcher = threading.Thread(target=subscription.watch, args=(_DeadQuery(),), daemon=True)
    watcher.start()
    assert recorder.done.wait(10.0), "no terminal signal: the watcher died"
    (error,) = recorder.errors
    assert isinstance(error, StreamingQueryFailedError)
    assert str(error).startswith("the connection to the Spark driver was lost")
    assert isinstance(error.__cause__, ConnectionRefusedError)
    watcher.join(5.0)
    assert not watcher.is_alive()


def test_a_killed_process_is_described_by_its_signal() -> None:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    driver = DriverProcess(process)
    assert driver.death() is None
    process.kill()
    death = driver.death(grace=10.0)
    assert death == (
        f"the Spark driver process died (JVM pid {process.pid}, killed by SIGKILL, as the "
        "kernel's out-of-memory killer does)"
    )
    assert describe_exit(3) == "exit status 3"


def test_an_unknown_driver_is_never_reported_dead() -> None:
    assert DriverProcess(None).death(grace=1.0) is None
    assert DriverProcess(None).peak_memory() is None


def _wait_for(predicate: Any, process: subprocess.Popen[str], timeout: float, what: str) -> Any:
    tick = threading.Event()
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert process.poll() is None, f"the pipeline ended before {what}"
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        tick.wait(0.2)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.skipif(not BRIDGES, reason="needs pyspark (the spark extra)")
def test_killing_the_driver_jvm_ends_the_pipeline_with_status_1(tmp_path: Path) -> None:
    psutil = pytest.importorskip("psutil")
    data = tmp_path / "events.csv"
    rows = "".join(f"JFK,2013-01-01T{hour % 24:02d}:00:00Z,{hour},1.0\n" for hour in range(50_000))
    data.write_text("origin,time_hour,dep_time,dep_delay\n" + rows)
    out = tmp_path / "out"
    checkpoint = tmp_path / "checkpoint"
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    process = subprocess.Popen(
        [sys.executable, "-m", "reactive_streams", "pipeline", "--input", str(data),
         "--output", str(out), "--rate", "2000", "--checkpoint", str(checkpoint), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        parent = psutil.Process(process.pid)

        def driver_jvm() -> Any:
            for child in parent.children():
                try:
                    if "org.apache.spark.deploy.SparkSubmit" in child.cmdline():
                        return child
                except psutil.Error:
                    continue
            return None

        jvm = _wait_for(driver_jvm, process, 180, "the driver JVM started")
        # Spark planned micro-batch 0: the query is running.
        _wait_for(
            (checkpoint / "query" / "offsets" / "0").exists, process, 180, "the query started"
        )
        os.kill(jvm.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        stdout, stderr = process.communicate(timeout=60)
        ended_in = time.monotonic() - killed_at
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 1, (ended_in, stderr[-3000:])
    assert stderr.splitlines() == [
        f"Error: the pipeline failed: the Spark driver process died (JVM pid {jvm.pid}, "
        "killed by SIGKILL, as the kernel's out-of-memory killer does)"
    ], stderr[-3000:]
    assert "Pipeline failed" in stdout
    assert not (out / "result.parquet").exists()


def test_waiting_for_spark_to_start_is_bounded() -> None:
    from reactive_streams.pipeline import PipelineFailedError
    from reactive_streams.pipeline._session_starter import SparkSessionStarter

    release = threading.Event()

    def never_starts() -> Any:
        release.wait(30.0)
        raise RuntimeError("gave up")

    starter = SparkSessionStarter(never_starts)
    try:
        with pytest.raises(PipelineFailedError, match=r"^Spark did not start within 0 s$"):
            starter.get(timeout=0.1)
        assert starter.get_quietly(timeout=0.1) == (None, False)
    finally:
        release.set()
