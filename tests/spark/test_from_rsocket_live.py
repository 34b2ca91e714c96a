"""A live route (``LivePartitions``) read by ``from_rsocket``: retention bounds the producer,
commits release it, and a query restarted from its checkpoint resumes exactly."""

from __future__ import annotations

import itertools
import sys
import threading
import time
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest
from pyspark import cloudpickle

from reactive_streams import Flow
from reactive_streams.rsocket import LivePartitions, partitioned_routes, serve
from reactive_streams.spark import describe_route, from_rsocket

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from pyspark.sql import DataFrame, SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.timeout(400)]

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call,unused-ignore]

TIMEOUT = 180.0
ROWS_PER_BATCH = 10
TOTAL = 600
RETENTION = 100
SCHEMA = pa.schema([("id", pa.int64())])


class Producer:
    """A fast producer: an iterable of batches of ids 0..TOTAL-1 that counts what it made."""

    def __init__(self) -> None:
        self.produced = 0

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for first in range(0, TOTAL, ROWS_PER_BATCH):
            self.produced += ROWS_PER_BATCH
            yield pa.RecordBatch.from_arrays(
                [pa.array(range(first, first + ROWS_PER_BATCH), pa.int64())], ["id"]
            )


class Batches:
    """foreachBatch's target: each micro-batch's ids by batch id (a replay overwrites)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_id: dict[int, list[int]] = {}

    def keep(self, frame: DataFrame, batch_id: int) -> None:
        values = [row["id"] for row in frame.toArrow().to_pylist()]
        with self.lock:
            self.by_id[batch_id] = values

    def rows(self) -> list[int]:
        with self.lock:
            return list(itertools.chain.from_iterable(self.by_id.values()))


def run_until(df: DataFrame, into: Batches, checkpoint: Path, done: Callable[[], bool]) -> None:
    """Run ``df`` (default trigger) until ``done()``, then stop it."""
    query = (
        df.writeStream.foreachBatch(into.keep).option("checkpointLocation", str(checkpoint)).start()
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        while not done():
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, f"only {len(into.rows())} rows in {TIMEOUT} s"
            time.sleep(0.2)
    finally:
        query.stop()


def test_a_live_route_is_bounded_by_retention_and_exact_across_a_restart(
    spark: SparkSession, tmp_path: Path
) -> None:
    producer = Producer()
    live = LivePartitions(
        Flow.from_iterable(producer),
        SCHEMA,
        partitions=2,
        batch_rows=ROWS_PER_BATCH,
        retention_rows=RETENTION,
        request_batches=2,
    )
    assert producer.produced <= RETENTION + 2 * ROWS_PER_BATCH  # nobody committed yet
    with serve(partitioned_routes("live", live)) as server:
        url = f"tcp://127.0.0.1:{server.port}"
        assert describe_route(url, "live").live
        first, second = Batches(), Batches()
        df = from_rsocket(url, "live", spark, max_records_per_trigger=40, read_timeout=60)
        run_until(df, first, tmp_path / "checkpoint", lambda: len(first.rows()) >= 200)
        # The producer ran ahead of the commits by at most the retention (and one request).
        assert live.high_retained_rows <= RETENTION + 2 * ROWS_PER_BATCH

        def rows() -> list[int]:
            # A micro-batch the first run did not finish is replayed under the same id.
            replayed = set(first.by_id)
            with second.lock:
                later = [v for i, vs in second.by_id.items() if i not in replayed for v in vs]
            return first.rows() + later

        df = from_rsocket(url, "live", spark, max_records_per_trigger=40, read_timeout=60)
        run_until(df, second, tmp_path / "checkpoint", lambda: len(rows()) >= TOTAL)
        assert sorted(rows()) == list(range(TOTAL))  # exact: every id once, across the restart
        assert live.high_retained_rows <= RETENTION + 2 * ROWS_PER_BATCH
