"""Files as partitions: P contiguous ranges, every record once, from any offset, on demand."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams import Publisher
from reactive_streams.files import (
    DEAD_LETTER_COLUMN,
    FilePartitions,
    InputFile,
    SplitReader,
    cut_partitions,
    list_files,
    plan_splits,
)
from reactive_streams.tck import PublisherVerification
from reactive_streams.testing import RecordingSubscriber, collect

from .partition_inputs import RECORDS, SCHEMA, local_rows, write_inputs

TIMEOUT = 10.0


@pytest.fixture
def files(tmp_path: Path) -> list[InputFile]:
    return write_inputs(tmp_path / "input")


def rows_of(batches: list[pa.RecordBatch]) -> list[dict[str, object]]:
    return [row for batch in batches for row in batch.to_pylist()]


@pytest.mark.parametrize("partitions", [1, 2, 3, 7, 80])
def test_partitions_are_contiguous_nearly_equal_and_cover_every_record_once(
    files: list[InputFile], partitions: int
) -> None:
    source = FilePartitions.plan(files, schema=SCHEMA, partitions=partitions, batch_rows=4)
    sizes = [source.size(partition) for partition in range(partitions)]
    assert sum(sizes) == RECORDS == source.records
    assert max(sizes) - min(sizes) <= 1
    read = [rows_of(collect(source.open(p, 0), timeout=TIMEOUT)) for p in range(partitions)]
    assert [len(rows) for rows in read] == sizes
    assert [row for rows in read for row in rows] == local_rows(files)


def test_cut_partitions_follows_the_input_order_across_files(files: list[InputFile]) -> None:
    splits = plan_splits(files)
    cut = cut_partitions(splits, 2)  # 75 records: 37 and 38
    assert [[(p.split.path.name, p.start, p.stop) for p in part] for part in cut] == [
        [("a.csv", 0, 30), ("b.jsonl", 0, 7)],
        [("b.jsonl", 7, 20), ("c.parquet", 0, 25)],
    ]
    with pytest.raises(ValueError, match=r"partitions"):
        cut_partitions(splits, 0)


def test_a_stream_from_any_offset_gives_the_records_of_the_local_read_from_there(
    files: list[InputFile],
) -> None:
    source = FilePartitions.plan(files, schema=SCHEMA, partitions=3, batch_rows=4)
    expected = local_rows(files)
    begin = 0
    for partition in range(3):
        size = source.size(partition)
        for start in range(size + 1):
            batches = collect(source.open(partition, start), timeout=TIMEOUT)
            assert all(1 <= batch.num_rows <= 4 for batch in batches)
            assert all(batch.schema == source.schema for batch in batches)
            assert rows_of(batches) == expected[begin + start : begin + size]
        begin += size


def test_the_schema_is_the_split_readers_with_the_dead_letter_column(
    files: list[InputFile],
) -> None:
    source = FilePartitions.plan(files, schema=SCHEMA, partitions=2)
    assert source.schema == SplitReader(SCHEMA).output_schema
    assert source.schema.names[-1] == DEAD_LETTER_COLUMN
    assert source.batch_rows == 4096
    assert source.live is False
    assert [source.final(p) for p in range(2)] == [True, True]
    assert [source.high_water(p) for p in range(2)] == [37, 38]
    dead = [row for row in local_rows(files) if row[DEAD_LETTER_COLUMN] is not None]
    assert len(dead) == 2  # the CSV's bad score, the JSON Lines' bad line


def test_the_schema_is_inferred_when_not_given(files: list[InputFile]) -> None:
    source = FilePartitions.plan(files, partitions=1)
    assert source.schema.field("id").type == pa.int64()
    assert source.schema.field("score").type == pa.float64()


def test_the_same_files_give_the_same_batches(files: list[InputFile]) -> None:
    first = FilePartitions.plan(files, schema=SCHEMA, partitions=3, batch_rows=3)
    second = FilePartitions.plan(list_files(files[0].path.parent), schema=SCHEMA,
                                 partitions=3, batch_rows=3)  # fmt: skip
    for partition in range(3):
        for start in (0, 5, 11):
            one = collect(first.open(partition, start), timeout=TIMEOUT)
            two = collect(second.open(partition, start), timeout=TIMEOUT)
            assert [batch.to_pylist() for batch in one] == [batch.to_pylist() for batch in two]


def test_a_batch_is_read_only_when_requested(files: list[InputFile]) -> None:
    source = FilePartitions.plan(files, schema=SCHEMA, partitions=1, batch_rows=100)
    subscriber: RecordingSubscriber[pa.RecordBatch] = RecordingSubscriber(initial_request=1)
    source.open(0, 0).subscribe(subscriber)
    assert subscriber.wait_for_elements(1, TIMEOUT)
    assert [batch.num_rows for batch in subscriber.elements] == [30]  # a.csv only
    assert not subscriber.terminated
    # c.parquet goes away: nothing has read it yet, so only the batch that needs it fails.
    (files[0].path.parent / "c.parquet").unlink()
    subscriber.request(1)
    assert subscriber.wait_for_elements(2, TIMEOUT)
    assert [batch.num_rows for batch in subscriber.elements] == [30, 20]
    assert not subscriber.terminated
    subscriber.request(1)
    assert subscriber.wait_terminated(TIMEOUT)
    assert len(subscriber.elements) == 2
    assert isinstance(subscriber.error, FileNotFoundError)
    assert "c.parquet" in str(subscriber.error)
    # The offsets do not look at files: one gone file fails only the readers of its records.
    assert source.high_water(0) == source.size(0)


def test_bad_partitions_and_starts_are_refused(files: list[InputFile]) -> None:
    source = FilePartitions.plan(files, schema=SCHEMA, partitions=2)
    with pytest.raises(ValueError, match=r"^no partition 2: there are 2 \(0 to 1\)$"):
        source.open(2, 0)
    with pytest.raises(ValueError, match=r"^start 38 is beyond partition 0's 37 records$"):
        source.open(0, 38)
    with pytest.raises(ValueError, match=r"^start must be an integer >= 0, got -1$"):
        source.open(0, -1)
    assert collect(source.open(0, 37), timeout=TIMEOUT) == []  # the end: completes at once
    with pytest.raises(ValueError, match=r"batch_rows"):
        FilePartitions.plan(files, schema=SCHEMA, batch_rows=0)


class TestFilePartitionTck(PublisherVerification):
    """One partition of one file, a record per batch: ``elements`` batches."""

    max_elements_from_publisher: ClassVar[int] = 300
    directory: ClassVar[Path]

    def create_publisher(self, elements: int) -> Publisher[Any]:
        if elements == 0:
            return _partitions_of(self.directory, 1).open(0, 1)  # from its partition's end
        return _partitions_of(self.directory, elements).open(0, 0)


@pytest.fixture(scope="module", autouse=True)
def _tck_directory(tmp_path_factory: pytest.TempPathFactory) -> None:
    TestFilePartitionTck.directory = tmp_path_factory.mktemp("tck")


@functools.cache
def _partitions_of(directory: Path, records: int) -> FilePartitions:
    path = directory / f"{records}.jsonl"
    path.write_text("".join(f'{{"id": {number}}}\n' for number in range(records)))
    schema = pa.schema([("id", pa.int64())])
    return FilePartitions.plan(list_files(path), schema=schema, partitions=1, batch_rows=1)
