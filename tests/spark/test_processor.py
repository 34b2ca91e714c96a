"""spark_processor: exact results, bounded upstream demand, flush, failures."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from reactive_streams.spark import SparkTransformError
from reactive_streams.spark._processor import spark_processor

from ._helpers import Collector, ManualPublisher, OneShot, SequencePublisher, wait_until

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

TIMEOUT = 120.0


def _double(df: DataFrame) -> DataFrame:
    return df.selectExpr("x", "x * 2 AS y")


def test_round_trip_is_exact(spark: SparkSession) -> None:
    publisher = SequencePublisher(lambda: ({"x": index} for index in range(12_345)))
    processor = spark_processor(_double, spark, batch_rows=5_000, schema="x long")
    publisher.subscribe(processor)
    collector: Collector[dict[str, Any]] = Collector(batch=1000)
    processor.subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert collector.error is None
    assert collector.completed
    assert len(collector.items) == 12_345
    assert sum(row["x"] for row in collector.items) == sum(range(12_345))
    assert all(row["y"] == 2 * row["x"] for row in collector.items)
    assert processor.statistics().delivered == 12_345


def test_upstream_demand_never_exceeds_the_budget(spark: SparkSession) -> None:
    publisher = SequencePublisher(lambda: ({"x": index} for index in range(1_000_000)))
    processor = spark_processor(_double, spark, batch_rows=100, max_in_flight=2)
    publisher.subscribe(processor)
    collector: OneShot[dict[str, Any]] = OneShot(10)  # a subscriber that stalls
    processor.subscribe(collector)
    assert collector.wait_for(10, TIMEOUT)
    threading.Event().wait(1.5)  # expected to expire: a chance to over-request
    assert publisher.requested == 200  # two batches, never re-requested while unemitted
    assert len(collector.items) == 10
    assert collector.subscription is not None
    collector.subscription.request(190)  # finish the first batch's 100 output rows + 90
    assert collector.wait_for(200, TIMEOUT)
    # Both batches fully emitted: exactly their 200 rows were requested again.
    assert wait_until(lambda: publisher.requested >= 400, TIMEOUT)
    threading.Event().wait(0.5)  # expected to expire
    assert publisher.requested <= 400
    collector.subscription.cancel()
    assert publisher.cancelled.wait(TIMEOUT)


def test_partial_batch_is_flushed_after_the_interval(spark: SparkSession) -> None:
    publisher: ManualPublisher[dict[str, Any]] = ManualPublisher()
    processor = spark_processor(_double, spark, batch_rows=10_000, flush_interval=0.2)
    publisher.subscribe(processor)
    collector: Collector[dict[str, Any]] = Collector()
    processor.subscribe(collector)
    for index in range(5):
        processor.on_next({"x": index})
    assert collector.wait_for(5, TIMEOUT)  # no completion needed: the interval flushed it
    assert [row["y"] for row in collector.items] == [0, 2, 4, 6, 8]
    assert not collector.done.is_set()
    processor.on_complete()
    assert collector.done.wait(TIMEOUT)
    assert collector.completed


def test_a_transform_that_raises_cancels_upstream_and_names_the_cause(
    spark: SparkSession,
) -> None:
    def broken(df: DataFrame) -> DataFrame:
        raise KeyError("no column 'amount'")

    publisher = SequencePublisher(lambda: ({"x": index} for index in range(1_000_000)))
    processor = spark_processor(broken, spark, batch_rows=100)
    publisher.subscribe(processor)
    collector: Collector[dict[str, Any]] = Collector()
    processor.subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert isinstance(collector.error, SparkTransformError)
    assert str(collector.error) == (
        "spark_processor batch 0 (100 rows) failed: KeyError: \"no column 'amount'\""
    )
    assert publisher.cancelled.is_set()


def test_a_failing_spark_job_ends_in_on_error(spark: SparkSession) -> None:
    publisher = SequencePublisher(lambda: ({"x": index} for index in range(250)))
    processor = spark_processor(
        lambda df: df.selectExpr("IF(x = 170, raise_error('bad x 170'), x) AS x"),
        spark,
        batch_rows=100,
    )
    publisher.subscribe(processor)
    collector: Collector[dict[str, Any]] = Collector()
    processor.subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert isinstance(collector.error, SparkTransformError)
    assert "batch 1 (100 rows)" in str(collector.error)
    assert "bad x 170" in str(collector.error)


def test_upstream_error_is_passed_on(spark: SparkSession) -> None:
    publisher = SequencePublisher(
        lambda: ({"x": index} for index in range(10)), fail_with=OSError("disk gone")
    )
    processor = spark_processor(_double, spark, batch_rows=100)
    publisher.subscribe(processor)
    collector: Collector[dict[str, Any]] = Collector()
    processor.subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert isinstance(collector.error, OSError)
    assert str(collector.error) == "disk gone"


def test_bad_arguments_are_refused(spark: SparkSession) -> None:
    with pytest.raises(ValueError, match="batch_rows and max_in_flight must be >= 1"):
        spark_processor(_double, spark, batch_rows=0)
