"""One shared ``local[2]`` SparkSession for the Spark tests, started by the suite itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The session every Spark test shares: UI off, 2 shuffle partitions, quiet logs."""
    from reactive_streams.spark.session import local_session

    session = local_session("local[2]", app_name="reactive-streams-tests")
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()
        session.stop()
