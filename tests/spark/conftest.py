"""One shared ``local[2]`` SparkSession for the Spark tests, started by the suite itself."""

from __future__ import annotations

import importlib.util
import os
import shutil
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession


# Without the spark extra (or without Java) these tests cannot run: skip the directory
# instead of failing at import time.
if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None:
    collect_ignore_glob = ["*.py"]
elif shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    # test_session.py checks the "no Java" errors themselves and needs no JVM.
    collect_ignore_glob = [
        "test_from_dataframe.py",
        "test_from_splits.py",
        "test_from_splits_cluster.py",
        "test_local_cluster.py",
        "test_processor.py",
        "test_pyspark_internals.py",
        "test_streams.py",
        "test_streams_arrow_resume.py",
        "test_tck_spark.py",
    ]


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
