"""Every bridge on ``local-cluster[2,1,1024]`` (two executor JVMs); run by test_local_cluster.

A JVM hosts one SparkContext, so this runs in its own process and prints one JSON line of
results for the test to check.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from reactive_streams.spark import (
    from_dataframe,
    from_streaming_query,
    local_session,
    spark_processor,
    to_spark_stream,
)
from reactive_streams.spark._pyspark_internals import executor_count

from ._helpers import Collector, SequencePublisher

TIMEOUT = 240.0


def main() -> None:
    spark = local_session("local-cluster[2,1,1024]", app_name="reactive-streams-cluster")
    results: dict[str, Any] = {}
    try:
        rows: Collector[dict[str, Any]] = Collector(batch=500)
        df = spark.range(0, 20_000, numPartitions=4).selectExpr("id", "id % 7 AS m")
        from_dataframe(df).subscribe(rows)
        rows.done.wait(TIMEOUT)
        results["from_dataframe"] = [len(rows.items), sum(row["id"] for row in rows.items)]

        batches: Collector[Any] = Collector(batch=1)
        from_dataframe(df, arrow=True).subscribe(batches)
        batches.done.wait(TIMEOUT)
        results["from_dataframe_arrow"] = [
            sum(batch.num_rows for batch in batches.items),
            sum(sum(batch.column("id").to_pylist()) for batch in batches.items),
        ]

        source = SequencePublisher(lambda: ({"x": index} for index in range(30_000)))
        processor = spark_processor(
            lambda frame: frame.repartition(3).selectExpr("x", "x + 1 AS y"),
            spark,
            batch_rows=10_000,
            schema="x long",
        )
        source.subscribe(processor)
        processed: Collector[dict[str, Any]] = Collector()
        processor.subscribe(processed)
        processed.done.wait(TIMEOUT)
        results["spark_processor"] = [
            len(processed.items),
            sum(row["y"] for row in processed.items),
            processed.error is None and processed.completed,
        ]

        events = SequencePublisher(lambda: ({"x": index} for index in range(25_000)))
        stream = to_spark_stream(events, spark, "x long", max_records_per_trigger=6_000)
        # A shuffle makes the executors do the work on rows that came through the bridge.
        grouped = stream.repartition(2).selectExpr("x", "x % 2 AS parity")
        micro: Collector[Any] = Collector()
        from_streaming_query(grouped).subscribe(micro)
        micro.done.wait(TIMEOUT)
        results["streams"] = [
            sum(batch.table.num_rows for batch in micro.items),
            sum(sum(batch.table.column("x").to_pylist()) for batch in micro.items),
            max(batch.table.num_rows for batch in micro.items),
            micro.completed,
            None if micro.error is None else str(micro.error),
        ]
        # Counted last: executors register asynchronously while the first jobs run.
        results["executors"] = executor_count(spark)
    finally:
        spark.stop()
    json.dump(results, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
