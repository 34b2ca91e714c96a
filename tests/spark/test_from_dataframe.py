"""from_dataframe: exact round trips, one job per demanded partition, cancel, failures."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from reactive_streams.spark import SparkBridgeError
from reactive_streams.spark._from_dataframe import from_dataframe

from ._helpers import Collector, OneShot, wait_until

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

TIMEOUT = 90.0


def test_dicts_round_trip(spark: SparkSession) -> None:
    df = spark.range(0, 5_000, numPartitions=3).selectExpr("id", "id * 2 AS twice")
    collector: Collector[dict[str, Any]] = Collector(batch=64)
    from_dataframe(df).subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert collector.completed
    assert len(collector.items) == 5_000
    assert sum(row["id"] for row in collector.items) == sum(range(5_000))
    assert all(row["twice"] == 2 * row["id"] for row in collector.items)


def test_arrow_round_trip(spark: SparkSession) -> None:
    df = spark.range(0, 30_000, numPartitions=2).selectExpr("id", "CAST(id AS STRING) AS s")
    collector: Collector[Any] = Collector(batch=1)
    from_dataframe(df, arrow=True).subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert collector.completed
    assert sum(batch.num_rows for batch in collector.items) == 30_000
    total = sum(sum(batch.column("id").to_pylist()) for batch in collector.items)
    assert total == sum(range(30_000))
    assert collector.items[0].schema.names == ["id", "s"]


def _jobs(spark: SparkSession, group: str) -> list[int]:
    return list(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def _wait_jobs(spark: SparkSession, group: str, count: int) -> bool:
    # The status tracker is fed asynchronously by Spark's listener bus: poll it.
    return wait_until(lambda: len(_jobs(spark, group)) >= count, TIMEOUT)


def test_starts_no_more_jobs_than_partitions_demanded(spark: SparkSession) -> None:
    df = spark.range(0, 1_000, numPartitions=10)  # 100 rows per partition
    collector: OneShot[dict[str, Any]] = OneShot(150)
    publisher = from_dataframe(df)
    publisher.subscribe(collector)
    assert collector.wait_for(150, TIMEOUT)
    group = publisher.subscriptions[0].job_group
    assert _wait_jobs(spark, group, 2)
    # 150 rows span partitions 0 and 1: two jobs. Nothing else may start while idle.
    threading.Event().wait(1.5)  # expected to expire: a chance for an extra job to show up
    assert len(_jobs(spark, group)) == 2
    assert len(collector.items) == 150
    assert collector.subscription is not None
    collector.subscription.cancel()
    threading.Event().wait(1.0)  # expected to expire
    assert len(_jobs(spark, group)) == 2
    assert not collector.done.is_set()


def test_a_failing_job_ends_in_on_error_after_the_rows_before_it(spark: SparkSession) -> None:
    df = spark.range(0, 100, numPartitions=4).selectExpr(
        "IF(id = 60, raise_error('bad row 60'), id) AS id"
    )
    collector: Collector[dict[str, Any]] = Collector(batch=10)
    from_dataframe(df).subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert isinstance(collector.error, SparkBridgeError)
    assert "bad row 60" in str(collector.error)
    assert "after 50 elements" in str(collector.error)
    assert [row["id"] for row in collector.items] == list(range(50))


def test_the_failure_counts_every_row_delivered_within_one_demand_round(
    spark: SparkSession,
) -> None:
    # One unbounded request: the 500 rows of partition 0 are all delivered in one round,
    # which the job of partition 1 then fails: the error counts those 500, not 0.
    df = spark.range(0, 1_000, numPartitions=2).selectExpr(
        "IF(id = 700, raise_error('bad row 700'), id) AS id"
    )
    collector: Collector[dict[str, Any]] = Collector()
    publisher = from_dataframe(df)
    publisher.subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert isinstance(collector.error, SparkBridgeError)
    assert "from_dataframe failed after 500 elements" in str(collector.error)
    assert len(collector.items) == 500


def test_non_positive_request_is_rule_3_9(spark: SparkSession) -> None:
    class Bad(Collector[dict[str, Any]]):
        def on_subscribe(self, subscription: Any) -> None:
            subscription.request(-1)

    collector = Bad()
    from_dataframe(spark.range(3)).subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert isinstance(collector.error, ValueError)
    assert str(collector.error) == "Rule 3.9: non-positive subscription request (n=-1)"


def test_streaming_dataframes_are_refused(spark: SparkSession) -> None:
    streaming = spark.readStream.format("rate").load()
    with pytest.raises(ValueError, match="needs a batch DataFrame"):
        from_dataframe(streaming)


def test_nested_columns_become_nested_dicts(spark: SparkSession) -> None:
    df = spark.sql("SELECT 1 AS id, named_struct('a', 2, 'b', 'x') AS s, array(3, 4) AS xs")
    collector: Collector[dict[str, Any]] = Collector()
    from_dataframe(df).subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert collector.items == [{"id": 1, "s": {"a": 2, "b": "x"}, "xs": [3, 4]}]


def test_finished_subscriptions_are_not_kept(spark: SparkSession) -> None:
    publisher = from_dataframe(spark.range(0, 10, numPartitions=1))
    for _ in range(4):
        collector: Collector[dict[str, Any]] = Collector()
        publisher.subscribe(collector)
        assert collector.done.wait(TIMEOUT)
        assert [row["id"] for row in collector.items] == list(range(10))
    assert len(publisher.subscriptions) == 1  # ended streams leave the list
    assert publisher.subscriptions[0].finished


def test_no_row_arrives_while_on_subscribe_runs(spark: SparkSession) -> None:
    # Rule 1.3: on_subscribe requests, then stays in on_subscribe waiting for the row. The
    # row may only come after on_subscribe returned (the emit loop's election holds it
    # back), never on the subscription's thread while on_subscribe is still running.
    class Lingering(Collector[dict[str, Any]]):
        def __init__(self) -> None:
            super().__init__()
            self.in_on_subscribe = False
            self.overlapped = False
            self.arrived = threading.Event()

        def on_subscribe(self, subscription: Any) -> None:
            self.in_on_subscribe = True
            try:
                super().on_subscribe(subscription)
                self.arrived.wait(5.0)  # expected to expire: a row now would overlap
            finally:
                self.in_on_subscribe = False

        def on_next(self, element: dict[str, Any]) -> None:
            self.overlapped |= self.in_on_subscribe
            self.arrived.set()
            super().on_next(element)

    collector = Lingering()
    from_dataframe(spark.range(0, 3, numPartitions=1)).subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert [row["id"] for row in collector.items] == [0, 1, 2]
    assert not collector.overlapped
