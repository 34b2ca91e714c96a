"""Helpers for the pipeline tests: a recording subscriber, small input files, Spark."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Generic, TypeVar

import pytest

from reactive_streams import Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from pyspark.sql import SparkSession

    from reactive_streams.pipeline import Pipeline

T = TypeVar("T")


def _bridges_available() -> bool:
    try:
        from reactive_streams.spark import from_streaming_query, to_spark_stream
    except ImportError:  # pyspark is missing (the spark extra is not installed)
        return False
    return callable(from_streaming_query) and callable(to_spark_stream)


BRIDGES = _bridges_available()
"""Whether pyspark (the spark extra) is installed, so the Spark bridges can run."""

SPARK_MARKS = [
    pytest.mark.spark,
    pytest.mark.timeout(300),  # a whole streaming query on a shared, possibly busy machine
    pytest.mark.skipif(not BRIDGES, reason="needs pyspark (the spark extra)"),
]
"""``pytestmark`` of the modules that run a whole pipeline on Spark."""


class Recorder(Subscriber[T], Generic[T]):
    """Records every signal; requests only when the test says so."""

    def __init__(self) -> None:
        self.elements: list[T] = []
        self.errors: list[Exception] = []
        self.completed = False
        self.subscription: Subscription | None = None
        self.done = threading.Event()
        self.changed = threading.Condition()

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription

    def on_next(self, element: T) -> None:
        with self.changed:
            self.elements.append(element)
            self.changed.notify_all()

    def on_error(self, error: Exception) -> None:
        self.errors.append(error)
        self.done.set()
        with self.changed:
            self.changed.notify_all()

    def on_complete(self) -> None:
        self.completed = True
        self.done.set()
        with self.changed:
            self.changed.notify_all()

    def request(self, n: int) -> None:
        assert self.subscription is not None
        self.subscription.request(n)

    def wait_for(self, count: int, timeout: float = 10.0) -> None:
        """Wait until ``count`` elements arrived or the stream ended."""
        with self.changed:
            ok = self.changed.wait_for(
                lambda: len(self.elements) >= count or self.done.is_set(), timeout
            )
        assert ok, f"timed out with {len(self.elements)} of {count} elements"


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The one local[2] session of the test process (shared through getOrCreate)."""
    pytest.importorskip("pyspark")
    from reactive_streams.spark.session import local_session

    session = local_session(
        "local[2]",
        app_name="reactive-streams-tests",
        conf={"spark.sql.session.timeZone": "UTC"},
    )
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()
        session.stop()


PIPELINE_TIMEOUT = 240.0
"""Seconds a test pipeline may take (Spark on a loaded 2-core machine)."""


def run_to_end(pipe: Pipeline, spark: SparkSession) -> None:
    """Prepare and start ``pipe`` on ``spark`` and wait for its end; stop it on a failure."""
    pipe.prepare()
    try:
        pipe.start(spark)
        assert pipe.wait(PIPELINE_TIMEOUT), "the pipeline did not finish in time"
    except BaseException:
        pipe.stop()
        raise


def sql_on_both_paths(
    tmp_path: Path, inputs: Sequence[Path], sql: str, *options: str
) -> dict[str, dict[str, object]]:
    """``sql`` (one result row) over ``inputs`` on each read path, through the command.

    Returns:
        For ``"executors"`` and ``"driver"``: the result row and the ``--summary-json``
        figures, in one dict.
    """
    import json

    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from reactive_streams.cli import main

    found = {}
    for read_on in ("executors", "driver"):
        out = tmp_path / f"out-{read_on}"
        summary = tmp_path / f"summary-{read_on}.json"
        result = CliRunner().invoke(
            main,
            ["pipeline", "--quiet", *(f"--input={path}" for path in inputs), "--sql", sql,
             "--output", str(out), "--read-on", read_on, "--summary-json", str(summary),
             *options],
        )  # fmt: skip
        assert result.exit_code == 0, (result.stdout, result.stderr)
        (row,) = pq.read_table(out / "result.parquet").to_pylist()
        found[read_on] = {**row, **json.loads(summary.read_text())}
    return found
