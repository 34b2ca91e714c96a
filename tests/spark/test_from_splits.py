"""``from_splits``: splits planned on the driver, read in executors' Python workers (local[2])."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest
from pyspark import cloudpickle
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from reactive_streams import EmitterElection, Publisher, Subscriber, Subscription
from reactive_streams.files import FileChangedError, InputFile
from reactive_streams.spark import SplitReadError, from_splits
from reactive_streams.spark._splits_source import (
    SplitGroup,
    SplitPartition,
    SplitPlan,
    SplitStreamReader,
    align,
    encode_plan,
    group_shares,
    read_partition,
    spread,
)
from reactive_streams.spark._warm_up import WorkerWarmUp, _warm
from reactive_streams.spark.splits import FileSplit, count_records, file_splits, split_boundaries

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

# The openers below run in Spark's Python workers: pickle them (and this module's
# publisher) by value, so the workers need not import the tests.
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call,unused-ignore]

TIMEOUT = 120


# ------------------------------------------------------------------------ helpers
class RangeRows(Publisher[dict[str, Any]]):
    """Rows ``{"shard": shard, "i": i}`` for ``i`` in ``start..stop - 1``; logs each request.

    ``log``: a file that gets one JSON line per ``request(n)`` (the worker's demand).
    """

    def __init__(self, shard: str, start: int, stop: int, log: str | None = None) -> None:
        self.shard = shard
        self.start = start
        self.stop = stop
        self.log = log

    def subscribe(self, subscriber: Subscriber[dict[str, Any]]) -> None:
        subscriber.on_subscribe(_RangeSubscription(self, subscriber))


class _RangeSubscription(Subscription):
    def __init__(self, source: RangeRows, subscriber: Subscriber[dict[str, Any]]) -> None:
        self._source = source
        self._subscriber = subscriber
        self._next = source.start
        self._election = EmitterElection()

    def request(self, n: int) -> None:
        if self._source.log is not None:
            entry = {"shard": self._source.shard, "at": self._next, "n": n, "pid": os.getpid()}
            with open(self._source.log, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")
        if self._election.request(n):
            self._emit()

    def cancel(self) -> None:
        self._election.cancel()

    def _emit(self) -> None:
        election = self._election
        while True:
            sent = 0
            while sent < election.demand and not election.cancelled:
                if self._next >= self._source.stop:
                    election.terminate()
                    self._subscriber.on_complete()
                    return
                self._subscriber.on_next({"shard": self._source.shard, "i": self._next})
                self._next += 1
                sent += 1
            election.produced(sent)
            if election.cancelled or not election.release():
                return


def run_available_now(df: DataFrame, checkpoint: Path | None = None) -> list[pa.Table]:
    """Run ``df`` with ``Trigger.AvailableNow``; each micro-batch's rows as a table."""
    batches: list[pa.Table] = []
    lock = threading.Lock()

    def keep(frame: DataFrame, batch_id: int) -> None:
        table = frame.toArrow()
        with lock:
            batches.append(table)

    writer = df.writeStream.foreachBatch(keep).trigger(availableNow=True)
    if checkpoint is not None:
        writer = writer.option("checkpointLocation", str(checkpoint))
    query = writer.start()
    try:
        assert query.awaitTermination(TIMEOUT)
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    return batches


def run_failing(df: DataFrame) -> str:
    """Run ``df`` and return the message of the query's failure (it must fail)."""

    def consume(frame: DataFrame, batch_id: int) -> None:
        frame.count()  # foreachBatch reads nothing unless the function runs an action

    query = df.writeStream.foreachBatch(consume).start()
    try:
        with pytest.raises(Exception) as caught:
            query.awaitTermination(TIMEOUT)
    finally:
        query.stop()
    return str(caught.value)


def assert_every_row_once(table: pa.Table, counts: dict[str, int]) -> None:
    """``table`` holds each ``(shard, i)`` of ``counts`` exactly once (in any order)."""
    got = sorted(zip(table.column("shard").to_pylist(), table.column("i").to_pylist(), strict=True))
    assert got == sorted((shard, i) for shard, rows in counts.items() for i in range(rows))


def reader_for(plan: SplitPlan) -> SplitStreamReader:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("shard", StringType()), StructField("i", LongType())])
    return SplitStreamReader({"plan": encode_plan(plan)}, schema)


def range_opener(stop: dict[str, int], log: str | None = None) -> Callable[[str, int], RangeRows]:
    return lambda shard, start: RangeRows(shard, start, stop[shard], log)


def write_parquet(path: Path, start: int, stop: int, row_group: int) -> None:
    table = pa.table(
        {
            "id": pa.array(range(start, stop), pa.int64()),
            "name": [f"n{i}" for i in range(start, stop)],
        }
    )
    pq.write_table(table, path, row_group_size=row_group)


# ------------------------------------------------------- planning (no Spark needed)
def test_spread_shares_the_budget_over_splits_with_rows() -> None:
    assert spread([10, 0, 3, 10], 12) == [5, 0, 3, 4]
    assert spread([100, 100, 100], 30) == [10, 10, 10]
    assert spread([1, 1, 1], 2) == [1, 1, 0]
    assert spread([5, 7], None) == [5, 7]
    assert spread([0, 0], 10) == [0, 0]
    assert sum(spread([3, 50, 8, 2], 40)) == 40


def test_align_ends_a_share_at_a_boundary_without_starving_the_split() -> None:
    edges = [50, 100, 150]
    assert align(0, 70, 200, edges) == 50  # down to the row group's start
    assert align(0, 100, 200, edges) == 100  # already at one
    assert align(100, 120, 200, edges) == 150  # nothing below: up to the next one
    assert align(150, 180, 200, edges) == 200  # the last row group: to the end
    assert align(10, 10, 200, edges) == 10  # no share
    assert align(0, 70, 200, []) == 70  # no boundaries: as spread


def test_latest_offset_rounds_shares_to_the_boundaries() -> None:
    counts = {"a": 100, "b": 100}
    plan = SplitPlan(
        splits=("a", "b"),
        names=("a", "b"),
        opener=range_opener(counts),
        count=counts.__getitem__,
        boundaries=lambda split: [25, 50, 75] if split == "a" else [],
    )
    reader = reader_for(plan)
    first = reader.latestOffset(reader.initialOffset(), ReadMaxRows(60))
    assert first == {"rows": [25, 30]}  # a: 30 rounded down to 25; b: no boundaries
    second = reader.latestOffset(first, ReadMaxRows(20))
    assert second == {"rows": [50, 40]}  # a: 35 rounded up to 50, never an empty share
    assert reader.latestOffset(second, ReadMaxRows(1_000)) == {"rows": [100, 100]}


def test_file_splits_give_parquet_row_group_starts(tmp_path: Path) -> None:
    write_parquet(tmp_path / "a.parquet", 0, 2_500, row_group=1_000)
    (tmp_path / "b.csv").write_text("id\n1\n")
    files = file_splits(tmp_path)
    assert [split_boundaries(split) for split in files.splits] == [(1_000, 2_000), ()]
    by_group = file_splits(tmp_path / "a.parquet", by_row_group=True)
    assert {split_boundaries(split) for split in by_group.splits} == {()}


def live_counter(path: Path) -> Callable[[str], int]:
    """A live split's counter: the counts are in a file (the plan is pickled)."""
    return lambda shard: int(json.loads(path.read_text())[shard])


def test_latest_offset_follows_the_read_limit_and_split_growth(tmp_path: Path) -> None:
    counts = {"a": 10, "b": 4}
    state = tmp_path / "counts.json"
    state.write_text(json.dumps(counts))
    plan = SplitPlan(
        splits=("a", "b"),
        names=("a", "b"),
        opener=range_opener(counts),
        count=live_counter(state),
        max_records_per_trigger=6,
    )
    reader = reader_for(plan)
    start = reader.initialOffset()
    assert start == {"rows": [0, 0]}
    assert reader.getDefaultReadLimit() == ReadMaxRows(6)
    first = reader.latestOffset(start, ReadMaxRows(6))
    assert first == {"rows": [3, 3]}
    parts = reader.partitions(start, first)
    shares = [p for p in parts if isinstance(p, SplitPartition)]  # no max_partitions: no group
    assert [(p.name, p.start, p.end) for p in shares] == [("a", 0, 3), ("b", 0, 3)]
    assert len(shares) == len(parts)
    assert reader.latestOffset(first, ReadAllAvailable()) == {"rows": [10, 4]}
    assert reader.latestOffset(first, ReadMinRows(100)) == first  # not enough rows yet
    state.write_text(json.dumps({"a": 10, "b": 9}))  # a live split grows: later batches
    assert reader.latestOffset({"rows": [10, 4]}, ReadMaxRows(100)) == {"rows": [10, 9]}
    state.write_text(json.dumps({"a": 10, "b": 2}))  # ... but never shrinks
    with pytest.raises(SplitReadError, match=r"split b has 2 elements now, but 4 were"):
        reader.latestOffset({"rows": [10, 4]}, ReadMaxRows(100))


def test_available_now_stops_at_the_rows_present_when_it_started(tmp_path: Path) -> None:
    state = tmp_path / "counts.json"
    state.write_text(json.dumps({"a": 5}))
    plan = SplitPlan(
        splits=("a",), names=("a",), opener=range_opener({"a": 50}), count=live_counter(state)
    )
    reader = reader_for(plan)
    reader.prepareForTriggerAvailableNow()
    state.write_text(json.dumps({"a": 50}))
    assert reader.latestOffset({"rows": [0]}, ReadAllAvailable()) == {"rows": [5]}


def test_a_partition_reads_the_same_rows_every_time_in_bounded_chunks(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    counts = {"s": 1_000}
    plan = SplitPlan(
        splits=("s",),
        names=("s",),
        opener=range_opener(counts, str(log)),
        count=counts.__getitem__,
        chunk_rows=64,
    )
    schema = pa.schema([("shard", pa.string()), ("i", pa.int64())])
    partition = SplitPartition(0, "s", "s", 100, 350)
    first = list(read_partition(plan, partition, schema))
    again = list(read_partition(plan, partition, schema))
    assert pa.Table.from_batches(first).equals(pa.Table.from_batches(again))
    assert pa.Table.from_batches(first).column("i").to_pylist() == list(range(100, 350))
    assert max(batch.num_rows for batch in first) == 64
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(entry["n"] <= 64 for entry in requests)
    assert sum(entry["n"] for entry in requests) == 2 * 250  # exactly the share, twice


def test_an_early_end_and_a_failure_name_the_split() -> None:
    counts = {"short": 10}
    plan = SplitPlan(
        splits=("short",), names=("short",), opener=range_opener(counts), count=counts.__getitem__
    )
    schema = pa.schema([("shard", pa.string()), ("i", pa.int64())])
    with pytest.raises(
        SplitReadError, match=r"split short \(element 10\): the publisher completed"
    ):
        list(read_partition(plan, SplitPartition(0, "short", "short", 0, 20), schema))

    def broken(shard: str, start: int) -> RangeRows:
        raise OSError("disk on fire")

    failing = SplitPlan(splits=("x",), names=("x",), opener=broken, count=counts.__getitem__)
    with pytest.raises(SplitReadError, match=r"split x \(element 3\): the opener raised OSError"):
        list(read_partition(failing, SplitPartition(0, "x", "x", 3, 5), schema))


class LateSubscribe(Publisher[dict[str, Any]]):
    """Calls ``on_subscribe`` from another thread, a little later (allowed by the spec)."""

    def subscribe(self, subscriber: Subscriber[dict[str, Any]]) -> None:
        source = RangeRows("late", 0, 30)
        timer = threading.Timer(0.2, source.subscribe, args=(subscriber,))
        timer.start()


class RaisingRequest(Publisher[dict[str, Any]]):
    def subscribe(self, subscriber: Subscriber[dict[str, Any]]) -> None:
        class Broken(Subscription):
            def request(self, n: int) -> None:
                raise RuntimeError("request exploded")

            def cancel(self) -> None:
                pass

        subscriber.on_subscribe(Broken())


def test_an_asynchronous_on_subscribe_and_a_raising_request() -> None:
    schema = pa.schema([("shard", pa.string()), ("i", pa.int64())])
    late = SplitPlan(
        splits=("late",), names=("late",), opener=lambda _, __: LateSubscribe(), count=len
    )
    batches = list(read_partition(late, SplitPartition(0, "late", "late", 0, 30), schema))
    assert pa.Table.from_batches(batches).column("i").to_pylist() == list(range(30))
    broken = SplitPlan(
        splits=("b",), names=("b",), opener=lambda _, __: RaisingRequest(), count=len
    )
    with pytest.raises(
        SplitReadError, match=r"split b \(element 0\): request\(10000\) raised RuntimeError"
    ):
        list(read_partition(broken, SplitPartition(0, "b", "b", 0, 30_000), schema))


def test_file_counts_and_a_missing_file(tmp_path: Path) -> None:
    write_parquet(tmp_path / "a.parquet", 0, 250, row_group=100)
    (tmp_path / "b.csv").write_text('id,name\n1,"two\nlines"\n2,x\n\n3,y\n')
    (tmp_path / "c.jsonl").write_text('{"id": 1, "name": "a"}\n\n{"id": 2, "name": "b"}')
    files = file_splits(tmp_path, by_row_group=True)
    assert [(Path(s.path).name, s.row_group) for s in files.splits] == [
        ("a.parquet", 0),
        ("a.parquet", 1),
        ("a.parquet", 2),
        ("b.csv", None),
        ("c.jsonl", None),
    ]
    # b.csv: the quoted line break is part of record 1; the blank line is no record.
    assert [count_records(split) for split in files.splits] == [100, 100, 50, 3, 2]
    (tmp_path / "b.csv").write_text("id,name\n1,x\n")
    with pytest.raises(FileChangedError, match=r"b\.csv changed after it was planned"):
        count_records(files.splits[-2])
    (tmp_path / "c.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match=r"c\.jsonl disappeared after it was planned"):
        files.opener(files.splits[-1], 0)
    with pytest.raises(FileNotFoundError, match=r"disappeared"):
        count_records(files.splits[-1])


def test_splits_and_openers_must_pickle(spark: SparkSession) -> None:
    lock = threading.Lock()
    with pytest.raises(TypeError, match=r"^from_splits: the splits, opener, count, transform"):
        from_splits([lock], lambda _, __: RangeRows("", 0, 0), spark, "i long", count=lambda _: 0)


# ------------------------------------------------------------ queries on local[2]
def test_parquet_row_groups_exact_in_bounded_micro_batches(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_parquet(tmp_path / "part-0.parquet", 0, 3_000, row_group=1_000)
    write_parquet(tmp_path / "part-1.parquet", 3_000, 5_000, row_group=700)
    files = file_splits(tmp_path, by_row_group=True, batch_rows=500)
    df = files.to_dataframe(spark, max_records_per_trigger=1_200)
    batches = run_available_now(df)
    table = pa.concat_tables(batches)
    assert sorted(table.column("id").to_pylist()) == list(range(5_000))
    assert table.column("name").to_pylist()[:1] != []
    assert max(batch.num_rows for batch in batches) <= 1_200
    assert len(batches) == 5  # ceil(5000 / 1200)


def test_file_split_micro_batches_end_at_row_groups(spark: SparkSession, tmp_path: Path) -> None:
    write_parquet(tmp_path / "part-0.parquet", 0, 3_500, row_group=1_000)
    files = file_splits(tmp_path, batch_rows=300)
    batches = run_available_now(files.to_dataframe(spark, max_records_per_trigger=1_500))
    # 1,500 rounded down to the next row group's start (twice), then the last 1,500 rows.
    assert [batch.num_rows for batch in batches] == [1_000, 1_000, 1_500]
    ids = [batch.column("id").to_pylist() for batch in batches]
    assert [min(part) for part in ids] == [0, 1_000, 2_000]
    assert sorted(value for part in ids for value in part) == list(range(3_500))


def test_csv_and_json_lines_exact(spark: SparkSession, tmp_path: Path) -> None:
    lines = ["id,name"] + [f"{i},row {i}" for i in range(1_500)]
    (tmp_path / "a.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "b.jsonl").write_text(
        "".join(json.dumps({"id": i, "name": f"row {i}"}) + "\n" for i in range(1_500, 2_600))
    )
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    files = file_splits(tmp_path, schema=schema, batch_rows=300, row_column="row")
    batches = run_available_now(files.to_dataframe(spark, max_records_per_trigger=700))
    table = pa.concat_tables(batches)
    rows = sorted(
        zip(table.column("id").to_pylist(), table.column("name").to_pylist(), strict=True)
    )
    assert rows == [(i, f"row {i}") for i in range(2_600)]
    # the row column is each row's index in its file
    positions = dict(
        zip(table.column("id").to_pylist(), table.column("row").to_pylist(), strict=True)
    )
    assert positions[0] == 0
    assert positions[1_499] == 1_499
    assert positions[1_500] == 0
    assert positions[2_599] == 1_099
    assert max(batch.num_rows for batch in batches) <= 700


def test_custom_opener_transform_and_chunked_demand(spark: SparkSession, tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    counts = {"north": 900, "south": 400, "east": 50}

    def double(batch: pa.RecordBatch) -> pa.RecordBatch:
        return batch.append_column("twice", pa.compute.multiply(batch.column("i"), 2))

    df = from_splits(
        list(counts),
        range_opener(counts, str(log)),
        spark,
        "shard string, i long, twice long",
        count=counts.__getitem__,
        transform=double,
        max_records_per_trigger=300,
        chunk_rows=40,
    )
    batches = run_available_now(df)
    table = pa.concat_tables(batches)
    assert_every_row_once(table, counts)
    assert table.column("twice").to_pylist() == [2 * i for i in table.column("i").to_pylist()]
    assert max(batch.num_rows for batch in batches) <= 300
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    assert max(entry["n"] for entry in requests) == 40  # never more than one chunk
    assert sum(entry["n"] for entry in requests) == sum(counts.values())  # nothing beyond shares
    assert os.getpid() not in {entry["pid"] for entry in requests}  # read in Spark's workers


def test_a_replayed_micro_batch_reads_exactly_the_same_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    counts = {"a": 500, "b": 300}
    checkpoint = tmp_path / "checkpoint"
    seen: dict[int, list[tuple[str, int]]] = {}

    def make() -> DataFrame:
        return from_splits(
            ["a", "b"],
            range_opener(counts),
            spark,
            "shard string, i long",
            count=counts.__getitem__,
            max_records_per_trigger=200,
        )

    def keep_then_fail(frame: DataFrame, batch_id: int) -> None:
        rows = sorted((row["shard"], row["i"]) for row in frame.collect())
        if batch_id in seen:
            assert seen[batch_id] == rows, f"batch {batch_id} replayed other rows"
        seen[batch_id] = rows
        if batch_id == 1 and not (tmp_path / "failed-once").exists():
            (tmp_path / "failed-once").touch()
            raise RuntimeError("fail batch 1 once")

    first = (
        make()
        .writeStream.foreachBatch(keep_then_fail)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="fail batch 1 once"):
        first.awaitTermination(TIMEOUT)
    first.stop()
    failed = list(seen[1])
    second = (
        make()
        .writeStream.foreachBatch(keep_then_fail)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert second.awaitTermination(TIMEOUT)
    assert second.exception() is None
    assert seen[1] == failed  # the replay read the same rows from the same offsets
    everything = sorted(row for rows in seen.values() for row in rows)
    assert everything == sorted((s, i) for s, n in counts.items() for i in range(n))


def test_an_opener_that_raises_fails_the_query_naming_the_split(spark: SparkSession) -> None:
    def opener(shard: str, start: int) -> RangeRows:
        if shard == "shard-7":
            raise ConnectionError("broker unreachable")
        return RangeRows(shard, start, 100)

    df = from_splits(
        ["shard-1", "shard-7"], opener, spark, "shard string, i long", count=lambda _: 100
    )
    message = run_failing(df)
    assert "split shard-7 (element 0): the opener raised ConnectionError: broker unreachable" in (
        message
    )


def test_a_file_that_disappears_fails_the_query_naming_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_parquet(tmp_path / "a.parquet", 0, 100, row_group=100)
    write_parquet(tmp_path / "b.parquet", 100, 200, row_group=100)
    files = file_splits(tmp_path)
    (tmp_path / "b.parquet").unlink()
    message = run_failing(files.to_dataframe(spark))
    assert f"input file {tmp_path / 'b.parquet'} disappeared after it was planned" in message


def test_split_names_in_errors_are_the_file_and_row_group(tmp_path: Path) -> None:
    item = InputFile.of(tmp_path / "x.parquet")
    split = FileSplit(item, size=0, mtime_ns=0, records=0, row_group=3)
    assert str(split) == f"{tmp_path / 'x.parquet'} (row group 3)"


# ----------------------------------------------------------- warming the workers up
class LoggedShard(str):
    """A shard name that appends the unpickling process's pid to ``log`` (a plan decode)."""

    log: str

    def __new__(cls, name: str, log: str) -> LoggedShard:
        shard = super().__new__(cls, name)
        shard.log = log
        return shard

    def __reduce__(self) -> tuple[Any, ...]:
        return (_logged_shard, (str(self), self.log))


def _logged_shard(name: str, log: str) -> LoggedShard:
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()}\n")
    return LoggedShard(name, log)


def _pids(path: Path) -> set[int]:
    return {int(line) for line in path.read_text().split()} if path.exists() else set()


def test_warm_workers_start_the_reading_workers_before_the_query(
    spark: SparkSession, tmp_path: Path
) -> None:
    decoded, requests = tmp_path / "decoded.txt", tmp_path / "requests.jsonl"
    counts = {"north": 300, "south": 200}
    shards = [LoggedShard(name, str(decoded)) for name in counts]
    df = from_splits(
        shards,
        range_opener(counts, str(requests)),
        spark,
        "shard string, i long",
        count=lambda shard: counts[str(shard)],
        max_records_per_trigger=200,
        warm_workers=True,
    )
    deadline = time.monotonic() + TIMEOUT
    while len(_pids(decoded)) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    warmed = _pids(decoded)
    assert warmed, "the warm-up decoded no plan before the query started"
    assert os.getpid() not in warmed  # decoded in Spark's Python workers

    table = pa.concat_tables(run_available_now(df))
    assert_every_row_once(table, counts)
    readers = {json.loads(line)["pid"] for line in requests.read_text().splitlines()}
    assert readers & warmed  # the reads ran in a worker the warm-up started


def test_a_warm_up_whose_plan_does_not_decode_changes_nothing(spark: SparkSession) -> None:
    assert list(_warm("not a plan")(iter([]))) == []  # never raises in the worker
    warm_up = WorkerWarmUp(spark, "not a plan", tasks=2)
    assert warm_up.wait(TIMEOUT)
    assert warm_up.error is None


# ------------------------------------------------- grouping shares into fewer tasks
def _shares(rows: list[int]) -> list[SplitPartition]:
    return [SplitPartition(i, f"s{i}", f"s{i}", 10, 10 + n) for i, n in enumerate(rows)]


@pytest.mark.parametrize(
    ("rows", "limit"),
    [([100] * 8, 2), ([100, 100, 100, 100, 50], 2), ([5, 300, 7, 40, 40, 1], 3), ([9, 9], 5)],
)
def test_group_shares_covers_every_share_once_in_balanced_groups(
    rows: list[int], limit: int
) -> None:
    shares = _shares(rows)
    groups = group_shares(shares, limit)
    assert len(groups) == min(limit, len(shares))
    placed = [part.index for group in groups for part in group.parts]
    assert sorted(placed) == list(range(len(shares)))  # each share exactly once
    for group in groups:  # each group reads its splits in order
        indices = [part.index for part in group.parts]
        assert indices == sorted(indices)
    assert [group.parts[0].index for group in groups] == sorted(g.parts[0].index for g in groups)
    loads = [group.rows for group in groups]
    assert max(loads) - min(loads) <= max(rows)  # greedy balance: within one share
    again = group_shares(list(reversed(shares)), limit)  # the same shares, the same groups
    assert [[p.index for p in g.parts] for g in again] == [
        [p.index for p in g.parts] for g in groups
    ]


def test_partitions_are_grouped_beyond_max_partitions_and_read_in_turn() -> None:
    counts = {"a": 30, "b": 30, "c": 30}
    plan = SplitPlan(
        splits=tuple(counts),
        names=tuple(counts),
        opener=range_opener(counts),
        count=counts.__getitem__,
        max_partitions=2,
        chunk_rows=7,
    )
    reader = reader_for(plan)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    parts = reader.partitions(start, end)
    assert len(parts) == 2
    assert all(isinstance(part, SplitGroup) for part in parts)
    table = pa.Table.from_batches([batch for part in parts for batch in reader.read(part)])
    assert_every_row_once(table, counts)
    one = reader_for(dataclasses.replace(plan, max_partitions=3)).partitions(start, end)
    assert [type(part) for part in one] == [SplitPartition] * 3  # no more shares than that


def test_max_partitions_gives_the_exact_rows_in_fewer_tasks(spark: SparkSession) -> None:
    counts = {"north": 250, "south": 120, "east": 90, "west": 40}
    with pytest.raises(ValueError, match="max_partitions"):
        from_splits(list(counts), range_opener(counts), spark, "shard string, i long",
                    count=counts.__getitem__, max_partitions=0)  # fmt: skip
    df = from_splits(
        list(counts),
        range_opener(counts),
        spark,
        "shard string, i long",
        count=counts.__getitem__,
        max_records_per_trigger=200,
        max_partitions=1,
    )
    batches = run_available_now(df)
    table = pa.concat_tables(batches)
    assert_every_row_once(table, counts)
    assert max(batch.num_rows for batch in batches) <= 200


def test_commit_tells_on_commit_each_split_and_its_offset_and_names_a_failure(
    tmp_path: Path,
) -> None:
    stop = {"a": 10, "b": 5}
    log = tmp_path / "commits.jsonl"

    def note(split: str, offset: int) -> None:  # runs on a copy of the plan: log to a file
        with log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps([split, offset]) + "\n")

    plan = SplitPlan(
        splits=("a", "b"),
        names=("a", "b"),
        opener=range_opener(stop),
        count=stop.__getitem__,
        on_commit=note,
    )
    reader_for(plan).commit({"rows": [7, 5]})
    assert [json.loads(line) for line in log.read_text().splitlines()] == [["a", 7], ["b", 5]]
    reader_for(dataclasses.replace(plan, on_commit=None)).commit({"rows": [7, 5]})  # no hook

    def refuse(split: str, offset: int) -> None:
        raise OSError(f"{split} is gone")

    with pytest.raises(
        SplitReadError, match=r"^from_splits: committing split a at element 7 failed: OSError"
    ):
        reader_for(dataclasses.replace(plan, on_commit=refuse)).commit({"rows": [7, 5]})
