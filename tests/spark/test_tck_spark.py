"""The TCK's publisher verification against from_dataframe (each element is a Spark row)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from reactive_streams.spark import from_dataframe
from reactive_streams.tck import PublisherVerification, TestEnvironment

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from reactive_streams import Publisher

pytestmark = pytest.mark.spark


class TestFromDataFrame(PublisherVerification):
    # A DataFrame is finite; each test that runs a stochastic loop would start Spark jobs
    # by the hundred, which belongs in a soak run, not the default suite.
    max_elements_from_publisher: ClassVar[int] = 4_096
    skip_stochastic_tests: ClassVar[bool] = True
    property_examples: ClassVar[int] = 3
    session: ClassVar[SparkSession | None] = None

    @pytest.fixture(autouse=True)
    def _spark_session(self, spark: SparkSession) -> None:
        type(self).session = spark

    def environment(self) -> TestEnvironment:
        """Spark jobs take tens to hundreds of milliseconds: wait for them accordingly."""
        return TestEnvironment(timeout=20.0, gc_timeout=10.0, case_timeout=90.0)

    def create_publisher(self, elements: int) -> Publisher[Any]:
        assert self.session is not None
        partitions = max(1, min(4, elements))
        return from_dataframe(self.session.range(0, elements, numPartitions=partitions))

    # No create_failed_publisher: a DataFrame fails only when a job runs, which needs
    # demand; the failed-publisher tests expect on_error without any request. A failing
    # job after demand is tested in test_from_dataframe.
