"""``from_splits`` on ``local-cluster[2,1,1024]``: the splits are read in executor processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Two executor JVMs take ~10 s to start on an idle machine; more on a loaded one.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


def test_splits_are_read_in_two_executor_jvms_with_exact_results() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    completed = subprocess.run(
        [sys.executable, "-m", "tests.spark.splits_cluster_checks"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    results = json.loads(completed.stdout.strip().splitlines()[-1])
    assert results["error"] is None
    assert results["finished"]
    total = 4 * 6_000
    assert results["count"] == total
    assert results["distinct"] == total
    assert results["sum"] == sum(range(total))
    assert max(results["batches"]) <= 6_000
    assert results["executors"] == 2
    # Read in Python workers of the executors: not in the driver's Python, nor its JVM.
    assert results["driver_pid"] not in results["pids"]
    assert -1 not in results["jvms"]
    assert results["driver_jvm"] not in results["jvms"]
    assert len(results["jvms"]) == 2
