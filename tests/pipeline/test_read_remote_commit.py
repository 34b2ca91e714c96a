"""A live route's last micro-batch is committed to the producer when the run stops.

Spark commits a micro-batch to its source only when the next one starts, so without this
the producer of a live route would keep the last micro-batch's records for a replay that
the checkpoint no longer needs.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams.pipeline import PipelineConfig, RemoteInput
from reactive_streams.pipeline._diagnostics import QueryProgress
from reactive_streams.pipeline._inputs import InputPlan
from reactive_streams.pipeline._read_remote import RemoteRead
from reactive_streams.rsocket import LivePartitions, partitioned_routes, serve
from tests.rsocket.test_live_partitions import SCHEMA, Manual, batch, first
from tests.spark.rsocket_producer import PartitionedRoute, numbered_partitions

pytest.importorskip("pyspark")  # RemoteRead's commit goes through reactive_streams.spark


def _progress(batch_id: int, start: list[int], end: list[int]) -> SimpleNamespace:
    return SimpleNamespace(
        batchId=batch_id,
        numInputRows=sum(end) - sum(start),
        stateOperators=[],
        eventTime={},
        sources=[
            SimpleNamespace(
                startOffset=json.dumps({"rows": start}), endOffset=json.dumps({"rows": end})
            )
        ],
    )


def _read(
    port: int, finite: bool, progress: QueryProgress, checkpoint: Path | None = None
) -> RemoteRead:
    url = f"rsocket://127.0.0.1:{port}/numbers"
    remote = RemoteInput.parse(url)
    assert remote is not None
    return RemoteRead(
        PipelineConfig(input_url=url, token="s3cret", checkpoint=checkpoint),
        InputPlan(files=(), schema=pa.schema([("i", pa.int64())]), description=url),
        remote=remote,
        info=SimpleNamespace(partitions=2, finite=finite),
        progress=progress,
        notes=[],
    )


@pytest.mark.parametrize("finite", [False, True])
def test_the_last_micro_batch_of_a_stopped_live_run_is_committed(finite: bool) -> None:
    partitions, schema = numbered_partitions([10, 10], batch_rows=5)
    route = PartitionedRoute("numbers", partitions, schema, batch_rows=5)
    progress = QueryProgress()
    query = SimpleNamespace(
        recentProgress=[_progress(0, [0, 0], [3, 4]), _progress(1, [3, 4], [6, 9])]
    )
    progress.poll(query)
    with serve(route.routes(), token="s3cret") as server:
        read = _read(server.port, finite, progress)
        assert read.finish() == []
        assert read.finish() == []  # once
        if not finite:
            assert route.wait_committed(15, timeout=30)
    if finite:  # a route of files has nothing kept to release: nothing is sent
        assert route.commits == []
    else:
        assert route.commits == [(0, 6), (1, 9)]


def test_the_final_commit_is_the_checkpoints_consumer_group_and_releases_only_its_reads(
    tmp_path: Path,
) -> None:
    manual = Manual()
    live = LivePartitions(manual, SCHEMA, partitions=2, batch_rows=5)
    for index in range(4):  # 10 rows in each partition, batches of 5
        manual.push(batch(index * 5, 5))
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "sink-id").write_text("run-7\n")  # the run's stream identity
    for partition in range(2):  # what the run's executors read, as its group
        first(live.open_for("run-7", partition, 0), 2)
    live.commit_for("", 0, 10)  # another token holder, in the default group: clamped to 0
    assert live.retained_rows == 20
    progress = QueryProgress()
    progress.poll(SimpleNamespace(recentProgress=[_progress(0, [0, 0], [5, 10])]))
    with serve(partitioned_routes("numbers", live), token="s3cret") as server:
        read = _read(server.port, False, progress, checkpoint)
        assert read.group == "run-7"
        assert read.finish() == []
    # Acknowledged: applied when finish returned, for "run-7": released below 5 and 10.
    assert live.retained_rows == 5
