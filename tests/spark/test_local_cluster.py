"""The bridges on ``local-cluster[2,1,1024]``: separate executor JVMs, as on a cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_every_bridge_works_on_local_cluster() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    completed = subprocess.run(
        [sys.executable, "-m", "tests.spark.cluster_checks"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    results = json.loads(completed.stdout.strip().splitlines()[-1])
    assert results["executors"] == 2
    assert results["from_dataframe"] == [20_000, sum(range(20_000))]
    assert results["from_dataframe_arrow"] == [20_000, sum(range(20_000))]
    assert results["spark_processor"] == [30_000, sum(range(1, 30_001)), True]
    count, total, largest, completed_ok, error = results["streams"]
    assert error is None
    assert completed_ok
    assert count == 25_000
    assert total == sum(range(25_000))
    assert largest <= 6_000
