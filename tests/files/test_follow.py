"""Live FilePartitions and FileFollower: files that land later are appended and read."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams.files import FileFollower, FilePartitions, list_files, plan_splits
from reactive_streams.testing import RecordingSubscriber, collect

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = pa.schema([("id", pa.int64())])
TIMEOUT = 10.0


def write_csv(path: Path, first: int, count: int) -> None:
    path.write_text("id\n" + "".join(f"{i}\n" for i in range(first, first + count)))


def ids(batches: list[pa.RecordBatch]) -> list[int]:
    return [value for b in batches for value in b.column("id").to_pylist()]


def available(source: FilePartitions, partition: int) -> list[int]:
    """The ids a live partition has now (a reader that asks for all, then cancels)."""
    reader = RecordingSubscriber[pa.RecordBatch](initial_request=1_000)
    source.open(partition, 0).subscribe(reader)  # delivered on this thread (Rule 3.10)
    assert reader.subscription is not None
    reader.subscription.cancel()
    return ids(reader.elements)


def test_extend_keeps_every_position_and_wakes_a_waiting_reader(tmp_path: Path) -> None:
    write_csv(tmp_path / "a.csv", 0, 10)
    source = FilePartitions.plan(
        list_files(tmp_path), schema=SCHEMA, partitions=2, batch_rows=4, live=True
    )
    assert [available(source, p) for p in range(2)] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert not source.final(0) and source.live
    reader = RecordingSubscriber[pa.RecordBatch](initial_request=100)
    source.open(1, 5).subscribe(reader)  # at the end of partition 1: waits
    assert reader.elements == [] and not reader.terminated
    write_csv(tmp_path / "b.csv", 10, 6)
    assert source.extend(plan_splits(list_files(tmp_path / "b.csv"))) == 6
    assert ids(reader.elements) == [13, 14, 15]  # partition 1's share of the new file
    assert [available(source, p) for p in range(2)] == [
        [0, 1, 2, 3, 4, 10, 11, 12],
        [5, 6, 7, 8, 9, 13, 14, 15],
    ]
    assert source.high_water(0) == 8 and source.records == 16
    source.finish()
    assert reader.wait_terminated(TIMEOUT) and reader.completed  # finish ended the wait
    assert source.final(1)


def test_a_reader_without_demand_completes_when_the_source_finishes(tmp_path: Path) -> None:
    write_csv(tmp_path / "a.csv", 0, 3)
    source = FilePartitions.plan(list_files(tmp_path), schema=SCHEMA, live=True)
    reader = RecordingSubscriber[pa.RecordBatch](initial_request=1)
    source.open(0, 0).subscribe(reader)
    assert ids(reader.elements) == [0, 1, 2]
    assert not reader.terminated
    source.finish()
    assert reader.completed  # Rule 1.5: no demand needed to complete
    with pytest.raises(ValueError, match="final"):
        source.extend(())


def test_the_follower_takes_a_file_once_its_size_held_still(tmp_path: Path) -> None:
    write_csv(tmp_path / "a.csv", 0, 5)
    source = FilePartitions.plan(list_files(tmp_path), schema=SCHEMA, live=True)
    follower = FileFollower(
        source, lambda: list_files(tmp_path), known=[tmp_path / "a.csv"], interval=60
    )
    (tmp_path / "b.csv").write_text("id\n5\n6\n")  # still being written
    assert follower.poll() == 0  # seen once: not taken yet
    with (tmp_path / "b.csv").open("a") as out:
        out.write("7\n")
    assert follower.poll() == 0  # its size changed: not taken yet
    assert follower.poll() == 3  # held still for one look: taken
    assert follower.poll() == 0  # never twice
    (tmp_path / "c.parquet").write_bytes(b"not parquet")
    follower.poll()
    assert follower.poll() == 0  # a file that cannot be planned is left out, logged
    write_csv(tmp_path / "d.csv", 8, 2)
    follower.poll()
    assert follower.poll() == 2
    assert (follower.files, follower.records) == (2, 5)
    follower.stop(finish=True)
    assert ids(collect(source.open(0, 0), timeout=TIMEOUT)) == list(range(10))


def test_the_follower_thread_appends_until_stopped(tmp_path: Path) -> None:
    source = FilePartitions.plan([], schema=SCHEMA, live=True)
    follower = FileFollower(source, lambda: list_files(tmp_path), interval=0.05).start()
    reader = RecordingSubscriber[pa.RecordBatch](initial_request=100)
    source.open(0, 0).subscribe(reader)
    write_csv(tmp_path / "a.csv", 0, 4)
    assert reader.wait_for_elements(1, TIMEOUT)
    assert ids(reader.elements) == [0, 1, 2, 3]
    follower.stop(finish=True)
    assert reader.wait_terminated(TIMEOUT) and reader.completed


def test_a_follower_needs_live_partitions_and_a_positive_interval(tmp_path: Path) -> None:
    final = FilePartitions.plan([], schema=SCHEMA)
    with pytest.raises(ValueError, match="live=True"):
        FileFollower(final, list)
    live = FilePartitions.plan([], schema=SCHEMA, live=True)
    with pytest.raises(ValueError, match="interval"):
        FileFollower(live, list, interval=0)
    with pytest.raises(ValueError, match="give the schema"):
        FilePartitions.plan([], live=True)
