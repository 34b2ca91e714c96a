"""``--input rsocket://host:port/route``: the pipeline over a partitioned RSocket route."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams.files import SplitReader, plan_splits
from reactive_streams.pipeline import Pipeline, PipelineConfig, PipelineUsageError, RemoteInput
from reactive_streams.rsocket import serve
from tests.spark.rsocket_producer import PartitionedRoute

from .conftest import SPARK_MARKS, run_to_end
from .test_read_on_executors import _dead_letters, _inputs

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

pytestmark = SPARK_MARKS

BATCH_ROWS = 64


def _producer(directory: Path, partitions: int) -> PartitionedRoute:
    """The files of ``directory`` as a partitioned route, as the wire protocol describes.

    The records converted by the files layer (``SplitReader``: the dead-letter column
    included), cut into ``partitions`` contiguous ranges, in batches of ``BATCH_ROWS``.
    """
    plan = Pipeline(PipelineConfig(inputs=(directory,))).prepare()
    reader = SplitReader(plan.schema, BATCH_ROWS)
    splits = plan_splits(list(plan.files))
    table = pa.Table.from_batches(
        [batch for split in splits for batch in reader.batches(split)], reader.output_schema
    )
    each = -(-table.num_rows // partitions)
    parts = [
        table.slice(index * each, each).to_batches(max_chunksize=BATCH_ROWS)
        for index in range(partitions)
    ]
    return PartitionedRoute("flights", parts, reader.output_schema, batch_rows=BATCH_ROWS)


def test_a_route_gives_the_same_result_and_dead_letters_as_the_files_read_locally(
    spark: SparkSession, tmp_path: Path
) -> None:
    _inputs(tmp_path / "in")
    route = _producer(tmp_path / "in", 2)
    local = Pipeline(
        PipelineConfig(
            inputs=(tmp_path / "in",), output=tmp_path / "local", max_records_per_trigger=500
        )
    )
    run_to_end(local, spark)
    local_result = local.finish()
    local.close()
    assert local_result.status == "completed", local_result.error
    with serve(route.routes(), token="s3cret") as server:
        remote = Pipeline(
            PipelineConfig(
                input_url=f"rsocket://127.0.0.1:{server.port}/flights",
                token="s3cret",
                output=tmp_path / "remote",
                max_records_per_trigger=500,
            )
        )
        run_to_end(remote, spark)
        result = remote.finish()
        remote.close()
    assert result.status == "completed", result.error
    ours = pq.read_table(tmp_path / "remote" / "result.parquet")
    theirs = pq.read_table(tmp_path / "local" / "result.parquet")
    keys = [(name, "ascending") for name in theirs.column_names]
    assert ours.sort_by(keys).equals(theirs.sort_by(keys))
    assert _dead_letters(tmp_path / "remote" / "dead-letters.jsonl") == _dead_letters(
        tmp_path / "local" / "dead-letters.jsonl"
    )
    progress = result.progress
    assert progress.records_emitted == 2_400
    assert progress.dead_letters == 3
    assert progress.records_read == 2_403
    assert progress.splits == 2
    assert progress.batches >= 5  # 2,403 records at 500 per micro-batch
    assert route.streams > 0


def test_a_wrong_token_or_route_fails_before_spark_in_one_line(tmp_path: Path) -> None:
    _inputs(tmp_path / "in")
    route = _producer(tmp_path / "in", 2)
    with serve(route.routes(), token="s3cret") as server:
        url = f"rsocket://127.0.0.1:{server.port}"
        cases = [
            ("flights", "wrong", r"route 'flights\.meta': the server refused the connection"),
            ("nowhere", "s3cret", r"route 'nowhere\.meta': .*no route 'nowhere\.meta'"),
        ]
        for name, token, message in cases:
            config = PipelineConfig(input_url=f"{url}/{name}", token=token, output=tmp_path / "out")
            with pytest.raises(PipelineUsageError, match=message) as caught:
                Pipeline(config).prepare()
            assert "\n" not in str(caught.value)


def test_route_urls() -> None:
    assert RemoteInput.parse("rsocket://h:7000/flights") == RemoteInput(
        "rsocket://h:7000/flights", "tcp://h:7000", "flights"
    )
    assert RemoteInput.parse("rsocket+ws://h:80/rs/flights") == RemoteInput(
        "rsocket+ws://h:80/rs/flights", "ws://h:80/rs", "flights"
    )
    assert RemoteInput.parse("data/flights.csv") is None
    with pytest.raises(PipelineUsageError, match="expected rsocket://HOST:PORT/ROUTE"):
        RemoteInput.parse("rsocket://h/flights")
