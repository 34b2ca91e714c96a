"""Spark bridges against the direct PySpark path, on the same data in the same run.

Usage::

    PYTHONPATH=src python benchmarks/bench_spark.py            # 1,000,000 rows
    PYTHONPATH=src python benchmarks/bench_spark.py --rows 200000 --skip-memory

Throughput (rows/s, best of ``--repeat``) for each bridge and its direct path:

* egress dicts: ``from_dataframe(df)`` vs ``[row.asDict() for row in df.toLocalIterator()]``
* egress Arrow: ``from_dataframe(df, arrow=True)`` vs ``df.toArrow()``
* ingress: ``to_spark_stream`` -> ``from_streaming_query`` vs
  ``createDataFrame(pa.Table.from_pylist(rows))`` (both end in the same aggregation);
  ingress Arrow: ``to_spark_stream(arrow=True)`` over record batches of 10,000 rows vs
  ``createDataFrame(pa.Table.from_batches(batches))``
* processing: ``spark_processor`` at several ``batch_rows`` vs one ``createDataFrame`` ->
  transform -> ``toArrow().to_pylist()`` over all rows

Then the driver's Python memory (peak of tracemalloc plus pyarrow's allocator) for each
bridge at ``rows / 10`` and ``rows``: flat means the bridge holds a bounded window.
"""

from __future__ import annotations

import argparse
import gc
import threading
import time
import tracemalloc
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute  # makes pa.compute available

from reactive_streams import EmitterElection, Publisher, Subscriber, Subscription
from reactive_streams.spark import (
    from_dataframe,
    from_streaming_query,
    local_session,
    spark_processor,
    to_spark_stream,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

TIMEOUT = 1800.0


class GeneratorPublisher(Publisher[Any]):
    """Emits ``make()``'s items on the requesting thread (emitter election, Rule 3.3)."""

    def __init__(self, make: Callable[[], Iterator[Any]]) -> None:
        self._make = make

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        subscription = _GeneratorSubscription(subscriber, self._make())
        subscriber.on_subscribe(subscription)


class _GeneratorSubscription(Subscription):
    def __init__(self, subscriber: Subscriber[Any], items: Iterator[Any]) -> None:
        self._subscriber = subscriber
        self._items = items
        self._election = EmitterElection()

    def request(self, n: int) -> None:
        if self._election.request(n):
            self._emit()

    def cancel(self) -> None:
        self._election.cancel()

    def _emit(self) -> None:
        election = self._election
        while True:
            demand = election.demand
            sent = 0
            for item in self._items:
                self._subscriber.on_next(item)
                sent += 1
                if sent == demand or election.cancelled:
                    break
            else:
                election.terminate()
                self._subscriber.on_complete()
                return
            election.produced(sent)
            if election.cancelled or not election.release():
                return


class Sink(Subscriber[Any]):
    """Requests ``prefetch`` at a time, replenishing at half; applies ``measure`` to each."""

    def __init__(self, measure: Callable[[Any], int], prefetch: int = 8192) -> None:
        self.measure = measure
        self.count = 0
        self.done = threading.Event()
        self.error: Exception | None = None
        self._prefetch = prefetch
        self._left = 0
        self._subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self._subscription = subscription
        self._left = self._prefetch
        subscription.request(self._prefetch)

    def on_next(self, element: Any) -> None:
        self.count += self.measure(element)
        self._left -= 1
        if self._left <= self._prefetch // 2:
            assert self._subscription is not None
            self._subscription.request(self._prefetch - self._left)
            self._left = self._prefetch

    def on_error(self, error: Exception) -> None:
        self.error = error
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()

    def wait(self) -> int:
        if not self.done.wait(TIMEOUT):
            raise TimeoutError("the bridge did not finish")
        if self.error is not None:
            raise self.error
        return self.count


def rows_of(count: int) -> Iterator[dict[str, Any]]:
    return (
        {"id": index, "amount": index * 0.5, "label": f"r{index % 97}"} for index in range(count)
    )


def batches_of(count: int, size: int = 10_000) -> Iterator[pa.RecordBatch]:
    """The rows of ``rows_of(count)`` as record batches of ``size`` rows, built column-wise."""
    for low in range(0, count, size):
        ids = pa.array(range(low, min(low + size, count)), pa.int64())
        amounts = pa.compute.multiply(ids.cast(pa.float64()), 0.5)
        labels = pa.compute.binary_join_element_wise(
            "r", pa.compute.cast(pa.compute.remainder(ids, 97), pa.string()), ""
        )
        yield pa.record_batch([ids, amounts, labels], names=["id", "amount", "label"])


def report(result: tuple[str, float, float]) -> None:
    name, bridge_rate, direct_rate = result
    print(f"  {name}: {bridge_rate:,.0f} vs {direct_rate:,.0f} rows/s", flush=True)


def timed(run: Callable[[], int], repeat: int) -> tuple[float, int]:
    best = float("inf")
    result = 0
    for _ in range(repeat):
        gc.collect()
        began = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - began)
    return best, result


class Peak:
    """Peak driver Python memory: tracemalloc's peak plus pyarrow's allocator, sampled."""

    def __enter__(self) -> Peak:
        gc.collect()
        tracemalloc.start()
        self._arrow_base = pa.total_allocated_bytes()
        self._arrow_peak = 0
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self._arrow_peak = max(self._arrow_peak, pa.total_allocated_bytes() - self._arrow_base)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sampler.join(5)
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        self.mib = (peak + self._arrow_peak) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--batch-sizes", default="10000,50000,100000,200000")
    args = parser.parse_args()
    rows: int = args.rows
    # 1M rows through createDataFrame ship the data inside tasks: the default 1g heap OOMs.
    spark = local_session(app_name="bench-spark", conf={"spark.driver.memory": args.driver_memory})
    results: list[tuple[str, float, float]] = []  # name, bridge rows/s, direct rows/s

    source = spark.range(0, rows, numPartitions=8).selectExpr(
        "id", "id * 0.5 AS amount", "CONCAT('r', CAST(id % 97 AS STRING)) AS label"
    )
    source = source.cache()
    source.count()

    # --- egress: dicts
    def direct_dicts() -> int:
        return sum(1 for row in source.toLocalIterator() if row.asDict() is not None)

    direct_s, direct_n = timed(direct_dicts, args.repeat)
    for prefetch in (False, True):

        def bridge_dicts(prefetch: bool = prefetch) -> int:
            sink = Sink(lambda row: 1)
            from_dataframe(source, prefetch_partitions=prefetch).subscribe(sink)
            return sink.wait()

        bridge_s, bridge_n = timed(bridge_dicts, args.repeat)
        assert direct_n == bridge_n == rows
        name = f"from_dataframe (dicts, prefetch={prefetch}) vs toLocalIterator"
        results.append((name, rows / bridge_s, rows / direct_s))
        report(results[-1])

    # --- egress: Arrow
    def direct_arrow() -> int:
        return int(source.toArrow().num_rows)

    direct_s, direct_n = timed(direct_arrow, args.repeat)
    for prefetch in (False, True):

        def bridge_arrow(prefetch: bool = prefetch) -> int:
            sink = Sink(lambda batch: batch.num_rows, prefetch=16)
            from_dataframe(source, arrow=True, prefetch_partitions=prefetch).subscribe(sink)
            return sink.wait()

        bridge_s, bridge_n = timed(bridge_arrow, args.repeat)
        assert direct_n == bridge_n == rows
        name = f"from_dataframe (arrow, prefetch={prefetch}) vs toArrow"
        results.append((name, rows / bridge_s, rows / direct_s))
        report(results[-1])

    # --- ingress (a warm-up query first: the first Python streaming query in a JVM is slow)
    warm = Sink(lambda batch: batch.table.num_rows, prefetch=4)
    from_streaming_query(
        to_spark_stream(GeneratorPublisher(lambda: rows_of(10)), spark, "id long")
    ).subscribe(warm)
    warm.wait()

    # Dict rows, and the same rows as Arrow record batches (each against createDataFrame of
    # one Arrow table built from the same elements).
    ingress_cases = (
        (False, ((10_000, 0), (100_000, 0), (100_000, 1))),
        (True, ((10_000, 0), (100_000, 1))),
    )
    for arrow, settings in ingress_cases:

        def elements(arrow: bool = arrow) -> Iterator[Any]:
            return batches_of(rows) if arrow else rows_of(rows)

        def direct_ingress(arrow: bool = arrow) -> int:
            items = list(elements(arrow))
            table = pa.Table.from_batches(items) if arrow else pa.Table.from_pylist(items)
            frame = spark.createDataFrame(table)
            return int(frame.selectExpr("count(*) AS n").collect()[0]["n"])

        direct_s, direct_n = timed(direct_ingress, args.repeat)
        for trigger, ahead in settings:

            def bridge_ingress(
                trigger: int = trigger, ahead: int = ahead, arrow: bool = arrow
            ) -> int:
                stream = to_spark_stream(
                    GeneratorPublisher(lambda: elements(arrow)),
                    spark,
                    "id long, amount double, label string",
                    max_records_per_trigger=trigger,
                    read_ahead_triggers=ahead,
                    arrow=arrow,
                )
                sink = Sink(lambda batch: batch.table.num_rows, prefetch=4)
                from_streaming_query(stream.selectExpr("id")).subscribe(sink)
                return sink.wait()

            bridge_s, bridge_n = timed(bridge_ingress, 1)
            assert bridge_n == rows == direct_n
            kind = "arrow, " if arrow else ""
            results.append(
                (
                    f"to_spark_stream ({kind}{trigger:,}/trigger, read-ahead {ahead}) vs "
                    "createDataFrame(Arrow)",
                    rows / bridge_s,
                    rows / direct_s,
                )
            )
            report(results[-1])

    # --- processing
    def transform(df: Any) -> Any:
        return df.where("amount >= 0").selectExpr("id", "amount * 2 AS doubled", "label")

    def direct_processing() -> int:
        table = pa.Table.from_pylist(list(rows_of(rows)))
        return len(transform(spark.createDataFrame(table)).toArrow().to_pylist())

    direct_s, direct_n = timed(direct_processing, args.repeat)
    for batch_rows in (int(size) for size in args.batch_sizes.split(",")):

        def bridge_processing(batch_rows: int = batch_rows) -> int:
            processor = spark_processor(
                transform,
                spark,
                batch_rows=batch_rows,
                schema="id long, amount double, label string",
            )
            GeneratorPublisher(lambda: rows_of(rows)).subscribe(processor)
            sink = Sink(lambda row: 1)
            processor.subscribe(sink)
            return sink.wait()

        bridge_s, bridge_n = timed(bridge_processing, 1)
        assert bridge_n == rows == direct_n
        results.append(
            (
                f"spark_processor (batch_rows={batch_rows:,}) vs one createDataFrame",
                rows / bridge_s,
                rows / direct_s,
            )
        )
        report(results[-1])

    print(
        f"\nrows: {rows:,}; rows/s, best of {args.repeat} (bridges with several settings: 1 run)\n"
    )
    print(f"| {'bridge vs direct path':<62} | {'bridge':>11} | {'direct':>11} | ratio |")
    print(f"|{'-' * 64}|{'-' * 13}|{'-' * 13}|-------|")
    for name, bridge_rate, direct_rate in results:
        ratio = bridge_rate / direct_rate
        print(f"| {name:<62} | {bridge_rate:>11,.0f} | {direct_rate:>11,.0f} | {ratio:5.2f} |")

    if not args.skip_memory:
        print("\ndriver Python memory (MiB, peak tracemalloc + pyarrow allocator)\n")
        print(f"| {'bridge':<40} | {rows // 10:>10,} rows | {rows:>10,} rows |")
        print(f"|{'-' * 42}|{'-' * 17}|{'-' * 17}|")
        for name, run in memory_runs(spark).items():
            peaks = []
            for size in (rows // 10, rows):
                with Peak() as peak:
                    run(size)
                peaks.append(peak.mib)
            print(f"| {name:<40} | {peaks[0]:>15.1f} | {peaks[1]:>15.1f} |")
    spark.stop()


def memory_runs(spark: Any) -> dict[str, Callable[[int], int]]:
    def egress(size: int) -> int:
        sink = Sink(lambda row: 1)
        from_dataframe(spark.range(0, size, numPartitions=max(1, size // 50_000))).subscribe(sink)
        return sink.wait()

    def egress_arrow(size: int) -> int:
        sink = Sink(lambda batch: batch.num_rows, prefetch=16)
        df = spark.range(0, size, numPartitions=max(1, size // 50_000))
        from_dataframe(df, arrow=True).subscribe(sink)
        return sink.wait()

    def ingress(size: int) -> int:
        stream = to_spark_stream(
            GeneratorPublisher(lambda: rows_of(size)),
            spark,
            "id long, amount double, label string",
            max_records_per_trigger=100_000,
        )
        sink = Sink(lambda batch: batch.table.num_rows, prefetch=4)
        from_streaming_query(stream.selectExpr("id")).subscribe(sink)
        return sink.wait()

    def processing(size: int) -> int:
        processor = spark_processor(
            lambda df: df.selectExpr("id", "amount * 2 AS doubled"),
            spark,
            schema="id long, amount double, label string",
        )
        GeneratorPublisher(lambda: rows_of(size)).subscribe(processor)
        sink = Sink(lambda row: 1)
        processor.subscribe(sink)
        return sink.wait()

    return {
        "from_dataframe (dicts)": egress,
        "from_dataframe (arrow)": egress_arrow,
        "to_spark_stream -> from_streaming_query": ingress,
        "spark_processor (batch_rows=50,000)": processing,
    }


if __name__ == "__main__":
    main()
