"""``from_splits`` on ``local-cluster[2,1,1024]`` (two executor JVMs), for test_from_splits_cluster.

A JVM hosts one SparkContext, so this runs in its own process and prints one JSON line of
results for the test to check. The transform tags every row with the process that read it
(its pid, and the pid of the Java process above it: the executor JVM).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from reactive_streams.spark import local_session
from reactive_streams.spark._pyspark_internals import driver_jvm_pid, executor_count
from reactive_streams.spark.splits import file_splits

TIMEOUT = 240
FILES = 4
ROWS_PER_FILE = 6_000


def java_ancestor() -> int:
    """The pid of the nearest ``java`` process above this one (-1 if none, or no /proc)."""
    pid = os.getpid()
    for _ in range(10):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return -1
        if comm == "java":
            return pid
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state: ppid
    return -1


def tag(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Add the reading process (runs in the executor's Python worker)."""
    rows = batch.num_rows
    batch = batch.append_column("pid", pa.array([os.getpid()] * rows, pa.int64()))
    return batch.append_column("jvm", pa.array([java_ancestor()] * rows, pa.int64()))


def main() -> None:
    spark = local_session("local-cluster[2,1,1024]", app_name="reactive-streams-splits-cluster")
    results: dict[str, Any] = {"driver_pid": os.getpid()}
    try:
        deadline = time.monotonic() + 120
        pause = threading.Event()
        while executor_count(spark) < 2 and time.monotonic() < deadline:
            pause.wait(0.2)  # executors register asynchronously
        results["executors"] = executor_count(spark)
        results["driver_jvm"] = driver_jvm_pid(spark)
        with tempfile.TemporaryDirectory() as directory:
            for index in range(FILES):
                first = index * ROWS_PER_FILE
                ids = pa.array(range(first, first + ROWS_PER_FILE), pa.int64())
                pq.write_table(
                    pa.table({"id": ids}),
                    Path(directory) / f"part-{index}.parquet",
                    row_group_size=2_000,
                )
            files = file_splits(directory, by_row_group=True, batch_rows=1_000)
            schema = "id long, pid long, jvm long"
            df = files.to_dataframe(
                spark, schema=schema, transform=tag, max_records_per_trigger=6_000, chunk_rows=500
            )
            tables: list[pa.Table] = []
            query = (
                df.writeStream.foreachBatch(lambda frame, _: tables.append(frame.toArrow()))
                .trigger(availableNow=True)
                .start()
            )
            finished = query.awaitTermination(TIMEOUT)
            error = query.exception()
            query.stop()
        table = pa.concat_tables(tables) if tables else None
        results["finished"] = bool(finished)
        results["error"] = None if error is None else str(error)[:2000]
        results["batches"] = [t.num_rows for t in tables]
        if table is not None:
            ids = table.column("id").to_pylist()
            results["count"] = len(ids)
            results["distinct"] = len(set(ids))
            results["sum"] = sum(ids)
            results["pids"] = sorted(set(table.column("pid").to_pylist()))
            results["jvms"] = sorted(set(table.column("jvm").to_pylist()))
    finally:
        spark.stop()
    json.dump(results, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
