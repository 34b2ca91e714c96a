"""to_spark_stream with Arrow record batches, prefetch, and resuming from a checkpoint."""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams.spark._from_streaming_query import MicroBatch, from_streaming_query
from reactive_streams.spark._to_spark_stream import to_spark_stream_bridge
from reactive_streams.spark._window import BatchWindow, EncodeError, RowWindow

from ._helpers import (
    Collector,
    OneShot,
    SequencePublisher,
    await_stopped,
    run_to_completion,
    wait_until,
)

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

TIMEOUT = 90.0
SCHEMA = pa.schema([("x", pa.int64()), ("s", pa.string())])


def _batches(count: int, size: int, first: int = 0) -> SequencePublisher[pa.RecordBatch]:
    """Batches of ``size`` rows (the last may be short) with ``x`` from ``first`` on."""

    def generate() -> Any:
        for low in range(first, count, size):
            xs = list(range(low, min(low + size, count)))
            yield pa.record_batch([xs, [f"r{x}" for x in xs]], schema=SCHEMA)

    return SequencePublisher(generate)


def _xs(batches: list[MicroBatch]) -> list[int]:
    return list(itertools.chain.from_iterable(b.table.column("x").to_pylist() for b in batches))


# -- the windows, without Spark ---------------------------------------------------------


def test_batch_window_slices_across_batches_and_acknowledges_inside_one() -> None:
    window = BatchWindow(base=100)
    for low in (0, 4, 8):
        window.append(pa.record_batch([list(range(low, low + 4)), ["a"] * 4], schema=SCHEMA))
    assert (window.base, window.held, window.end) == (100, 12, 112)
    taken = window.take(102, 7)  # rows 2..8: across all three batches
    xs = [x for b in window.to_batches(taken, SCHEMA) for x in b.column(0).to_pylist()]
    assert xs == [2, 3, 4, 5, 6, 7, 8]
    window.acknowledge(105)  # inside the second batch
    assert (window.base, window.held) == (105, 7)
    taken = window.take(105, 100)
    assert [x for b in taken for x in b.column(0).to_pylist()] == [5, 6, 7, 8, 9, 10, 11]


def test_batch_window_casts_by_name_and_refuses_missing_columns() -> None:
    window = BatchWindow()
    reordered = pa.record_batch(
        [pa.array(["a", "b"]), pa.array([1, 2], pa.int32())], names=["s", "x"]
    )
    window.append(reordered)
    (batch,) = window.to_batches(window.take(0, 2), SCHEMA)
    assert batch.schema.equals(SCHEMA)
    assert batch.column(0).to_pylist() == [1, 2]
    window.append(pa.record_batch([pa.array([1])], names=["x"]))
    with pytest.raises(EncodeError, match=r"no column\(s\) s"):
        window.to_batches(window.take(2, 1), SCHEMA)


def test_windows_refuse_the_other_element_type() -> None:
    with pytest.raises(TypeError, match=r"pass arrow=True"):
        RowWindow().append(pa.record_batch([[1], ["a"]], schema=SCHEMA))
    with pytest.raises(TypeError, match=r"expects pyarrow.RecordBatch elements, got dict"):
        BatchWindow().append({"x": 1})


# -- Arrow elements through Spark -------------------------------------------------------


def test_arrow_round_trip_is_exact_and_batches_respect_the_limit(spark: SparkSession) -> None:
    publisher = _batches(25_000, 3_000)
    bridge = to_spark_stream_bridge(
        publisher,
        spark,
        "x long, s string",
        max_records_per_trigger=7_000,
        read_ahead_triggers=1,
        arrow=True,
    )
    bridge.prefetch()
    # Prefetch subscribed and requested at once, before any query started: one batch at a
    # time until the first triggers are held.
    assert wait_until(lambda: bridge.statistics().delivered >= 5, TIMEOUT)
    batches: list[MicroBatch] = run_to_completion(bridge.dataframe, TIMEOUT)
    sizes = [batch.table.num_rows for batch in batches]
    assert sum(sizes) == 25_000
    assert max(sizes) <= 7_000  # a batch of 3,000 is sliced where a micro-batch ends
    assert sorted(_xs(batches)) == list(range(25_000))
    # Demand counts batches: the 9 batches, plus at most one asked for before completion.
    assert publisher.requested <= 9 + 1
    assert bridge.statistics().buffered == 0


def test_arrow_elements_of_the_wrong_type_fail_the_query(spark: SparkSession) -> None:
    publisher = SequencePublisher(lambda: iter([{"x": 1, "s": "a"}]))
    bridge = to_spark_stream_bridge(publisher, spark, "x long, s string", arrow=True)
    collector: Collector[MicroBatch] = Collector()
    from_streaming_query(bridge.dataframe).subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert collector.error is not None
    assert "expects pyarrow.RecordBatch elements, got dict" in str(collector.error)
    assert publisher.cancelled.is_set()


def test_start_offset_must_be_a_non_negative_int(spark: SparkSession) -> None:
    with pytest.raises(ValueError, match=r"start_offset must be an int >= 0, got -1"):
        to_spark_stream_bridge(_batches(1, 1), spark, "x long, s string", start_offset=-1)


def test_a_resumed_stream_replays_the_uncommitted_batch_and_goes_on_exactly(
    spark: SparkSession, tmp_path: Path
) -> None:
    total, per_trigger = 1_000, 100
    checkpoint = tmp_path / "checkpoint"

    def start(first: int, subscriber: Collector[MicroBatch]) -> Any:
        publisher = _batches(total, 30, first=first)
        bridge = to_spark_stream_bridge(
            publisher,
            spark,
            "x long, s string",
            max_records_per_trigger=per_trigger,
            read_ahead_triggers=1,
            arrow=True,
            start_offset=first,
        )
        source = from_streaming_query(bridge.dataframe, checkpoint_location=str(checkpoint))
        source.subscribe(subscriber)
        return source

    # First run: take batches 0 and 1; batch 2 is planned, then the subscriber cancels while
    # it waits for demand, so it stays uncommitted (a crash at that point looks the same).
    first: OneShot[MicroBatch] = OneShot(2)
    _stop_with_batch_planned(start(0, first), first, checkpoint, 2)
    assert (checkpoint / "commits" / "1").exists()
    assert not (checkpoint / "commits" / "2").exists()
    committed_end = _offset(checkpoint, 1)
    planned_end = _offset(checkpoint, 2)
    assert committed_end == 200
    assert planned_end == 300

    # Second run: a publisher positioned at the committed offset; Spark replays batch 2
    # (the same rows, the same id) through the bridge, then reads on.
    second: Collector[MicroBatch] = Collector()
    start(committed_end, second)
    assert second.done.wait(TIMEOUT)
    assert second.error is None, second.error
    assert second.completed
    assert second.items[0].batch_id == 2
    assert second.items[0].table.column("x").to_pylist() == list(range(200, 300))
    seen = _xs(first.items) + _xs(second.items)
    assert seen == list(range(total))  # nothing lost, nothing twice


def test_a_replay_the_publisher_cannot_serve_fails_the_query_clearly(
    spark: SparkSession, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "checkpoint"
    first: OneShot[MicroBatch] = OneShot(1)
    bridge = to_spark_stream_bridge(
        _batches(1_000, 50), spark, "x long, s string", max_records_per_trigger=100, arrow=True
    )
    source = from_streaming_query(bridge.dataframe, checkpoint_location=str(checkpoint))
    source.subscribe(first)
    _stop_with_batch_planned(source, first, checkpoint, 1)
    # The resumed publisher holds only 20 rows past the committed offset: not enough for
    # the uncommitted batch 1 (rows 100..199).
    short = _batches(120, 50, first=100)
    again = to_spark_stream_bridge(
        short,
        spark,
        "x long, s string",
        max_records_per_trigger=100,
        arrow=True,
        start_offset=100,
    )
    collector: Collector[MicroBatch] = Collector()
    from_streaming_query(again.dataframe, checkpoint_location=str(checkpoint)).subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert collector.error is not None
    assert "cannot replay rows 100..199" in str(collector.error)
    assert "completed after row 119" in str(collector.error)


def _stop_with_batch_planned(
    source: Any, subscriber: OneShot[MicroBatch], checkpoint: Path, batch_id: int
) -> None:
    """Once ``subscriber`` took its batches and ``batch_id`` is planned, cancel and wait.

    The planned micro-batch waits in ``foreachBatch`` for demand, so cancelling leaves it
    uncommitted: the checkpoint looks like that of a crash at that point.
    """
    assert subscriber.wait_for(batch_id, TIMEOUT)
    assert wait_until((checkpoint / "offsets" / str(batch_id)).exists, TIMEOUT)
    assert subscriber.subscription is not None
    subscriber.subscription.cancel()
    query = source.subscriptions[0].query
    assert query is not None
    await_stopped(query, TIMEOUT)


def _offset(checkpoint: Path, batch_id: int) -> int:
    """The bridge's end offset recorded for ``batch_id`` in Spark's offset log."""
    lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    return int(json.loads(lines[-1])["seq"])
