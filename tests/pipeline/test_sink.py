"""The result sink: latest row per key, replays skipped, one file written at the very end."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.csv as pa_csv  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import Subscription
from reactive_streams.pipeline import ResultSink
from reactive_streams.pipeline import _sink as sink_module
from reactive_streams.pipeline._sink import latest_per_key

if TYPE_CHECKING:
    from pathlib import Path

    from reactive_streams.pipeline._sink import OutputMode


@dataclass(frozen=True)
class Batch:
    batch_id: int
    table: pa.Table


class FakeSubscription(Subscription):
    def __init__(self) -> None:
        self.requested = 0
        self.cancelled = False

    def request(self, n: int) -> None:
        self.requested += n

    def cancel(self) -> None:
        self.cancelled = True


def _groups(*rows: tuple[str, int, int]) -> pa.Table:
    return pa.table(
        {
            "origin": [row[0] for row in rows],
            "hour": [row[1] for row in rows],
            "flights": [row[2] for row in rows],
        }
    )


def _files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def test_update_mode_keeps_the_latest_row_per_key_and_skips_replays(tmp_path: Path) -> None:
    sink = ResultSink(tmp_path, "parquet", mode="update", keys=("origin", "hour"))
    subscription = FakeSubscription()
    sink.on_subscribe(subscription)
    assert subscription.requested == 1  # one batch at a time
    sink.on_next(Batch(0, _groups(("JFK", 1, 2), ("EWR", 1, 1))))
    assert subscription.requested == 2
    sink.on_next(Batch(1, _groups(("JFK", 1, 5), ("LGA", 2, 1))))
    sink.on_next(Batch(1, _groups(("JFK", 1, 99))))  # a replay of batch 1: skipped
    assert _files(tmp_path) == []  # nothing final before completion
    sink.on_complete()
    assert sink.wait(1)
    assert sink.completed
    table = pq.read_table(tmp_path / "result.parquet")
    assert table.to_pylist() == [
        {"origin": "EWR", "hour": 1, "flights": 1},
        {"origin": "JFK", "hour": 1, "flights": 5},
        {"origin": "LGA", "hour": 2, "flights": 1},
    ]
    stats = sink.statistics()
    assert (stats.batches, stats.replayed, stats.groups, stats.last_batch_id) == (2, 1, 3, 1)
    assert _files(tmp_path) == ["result.parquet"]


_ROW = st.tuples(
    st.sampled_from(["JFK", "EWR", None]),
    st.integers(0, 3) | st.none(),
    st.integers(-(2**63), 2**63 - 1),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_ROW, max_size=12), min_size=1, max_size=5))
def test_latest_per_key_matches_a_dict_of_the_latest_rows(
    batches: list[list[tuple[str | None, int | None, int]]],
) -> None:
    schema = pa.schema([("origin", pa.string()), ("hour", pa.int64()), ("flights", pa.int64())])
    expected: dict[tuple[object, ...], tuple[object, ...]] = {}
    latest = None
    for rows in batches:
        table = pa.Table.from_pylist(
            [{"origin": o, "hour": h, "flights": f} for o, h, f in rows], schema=schema
        )
        latest = latest_per_key(latest, table, ("origin", "hour"))
        expected.update({(o, h): (o, h, f) for o, h, f in rows})  # nulls equal nulls
    assert latest is not None
    got = [(row["origin"], row["hour"], row["flights"]) for row in latest.to_pylist()]
    assert len(got) == len(expected)  # one row per key
    assert {(o, h): (o, h, f) for o, h, f in got} == expected  # the latest one


def test_latest_per_key_casts_a_later_batch_to_the_first_schema() -> None:
    first = pa.table({"origin": ["JFK"], "hour": pa.array([1], pa.int64())})
    later = pa.table({"origin": ["JFK", "EWR"], "hour": pa.array([1, 2], pa.int32())})
    merged = latest_per_key(first, later, ("origin", "hour"))
    assert merged.schema == first.schema
    assert merged.to_pylist() == [{"origin": "JFK", "hour": 1}, {"origin": "EWR", "hour": 2}]
    with pytest.raises(ValueError, match="field names"):
        latest_per_key(first, pa.table({"hour": [1], "origin": ["JFK"]}), ("origin", "hour"))


def test_latest_per_key_keeps_a_column_named_like_its_row_numbers() -> None:
    table = pa.table({"k": [1, 1, 2], "__row": [7, 8, 9]})
    assert latest_per_key(None, table, ("k",)).to_pylist() == [
        {"k": 1, "__row": 8},
        {"k": 2, "__row": 9},
    ]


def test_complete_mode_keeps_the_last_batch(tmp_path: Path) -> None:
    sink = ResultSink(tmp_path, "csv", mode="complete")
    sink.on_subscribe(FakeSubscription())
    sink.on_next(Batch(0, _groups(("JFK", 1, 2))))
    sink.on_next(Batch(1, _groups(("JFK", 1, 3), ("EWR", 1, 1))))
    sink.on_complete()
    table = pa_csv.read_csv(tmp_path / "result.csv")
    assert table.to_pylist() == [
        {"origin": "JFK", "hour": 1, "flights": 3},
        {"origin": "EWR", "hour": 1, "flights": 1},
    ]


def test_append_mode_writes_through_under_a_temporary_name(tmp_path: Path) -> None:
    sink = ResultSink(tmp_path, "jsonl", mode="append")
    sink.on_subscribe(FakeSubscription())
    sink.on_next(Batch(0, _groups(("JFK", 1, 2))))
    sink.on_next(Batch(1, _groups(("EWR", 1, 1))))
    names = _files(tmp_path)
    assert len(names) == 1
    assert names[0].startswith(".result.jsonl.")
    sink.on_complete()
    lines = (tmp_path / "result.jsonl").read_text().splitlines()
    assert [json.loads(line)["origin"] for line in lines] == ["JFK", "EWR"]
    assert _files(tmp_path) == ["result.jsonl"]


@pytest.mark.parametrize("mode", ["append", "update"])
def test_an_error_leaves_no_partial_file(tmp_path: Path, mode: str) -> None:
    sink = ResultSink(tmp_path, "parquet", mode=mode, keys=("origin", "hour"))  # type: ignore[arg-type]
    sink.on_subscribe(FakeSubscription())
    sink.on_next(Batch(0, _groups(("JFK", 1, 2))))
    failure = RuntimeError("executor lost")
    sink.on_error(failure)
    assert sink.wait(1)
    assert sink.error is failure
    assert not sink.completed
    assert _files(tmp_path) == []


def test_cancel_stops_upstream_and_writes_nothing(tmp_path: Path) -> None:
    sink = ResultSink(tmp_path, "parquet", mode="append")
    subscription = FakeSubscription()
    sink.on_subscribe(subscription)
    sink.on_next(Batch(0, _groups(("JFK", 1, 2))))
    sink.cancel()
    assert subscription.cancelled
    assert sink.cancelled
    assert sink.wait(0)
    assert _files(tmp_path) == []


def test_a_missing_key_column_fails_the_stream_without_raising(tmp_path: Path) -> None:
    sink = ResultSink(tmp_path, "parquet", mode="update", keys=("nope",))
    subscription = FakeSubscription()
    sink.on_subscribe(subscription)
    sink.on_next(Batch(0, _groups(("JFK", 1, 2))))  # Rule 2.13: must not raise
    assert subscription.cancelled
    assert isinstance(sink.error, ValueError)
    assert "no key column(s) ['nope']" in str(sink.error)


def test_journal_lets_a_rerun_resume_exactly(tmp_path: Path) -> None:
    journal = tmp_path / "checkpoint" / "sink"
    out = tmp_path / "out"
    out.mkdir()
    first = ResultSink(out, "parquet", mode="update", keys=("origin", "hour"), journal=journal)
    first.on_subscribe(FakeSubscription())
    first.on_next(Batch(0, _groups(("JFK", 1, 2), ("EWR", 1, 1))))
    first.on_next(Batch(1, _groups(("JFK", 1, 4))))
    # ...the process dies here; Spark replays batch 1 and goes on with batch 2.
    second = ResultSink(out, "parquet", mode="update", keys=("origin", "hour"), journal=journal)
    second.on_subscribe(FakeSubscription())
    second.on_next(Batch(1, _groups(("JFK", 1, 4))))
    second.on_next(Batch(2, _groups(("EWR", 1, 3))))
    second.on_complete()
    assert second.statistics().replayed == 1
    assert pq.read_table(out / "result.parquet").to_pylist() == [
        {"origin": "EWR", "hour": 1, "flights": 3},
        {"origin": "JFK", "hour": 1, "flights": 4},
    ]


def test_an_append_result_from_the_journal_is_written_a_micro_batch_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each micro-batch commit and the last write go through the journal part by part: the
    result of a long live run is never held in memory whole."""
    monkeypatch.setattr(sink_module, "monotonic", lambda: 0.0)  # rewrites take no time
    journal = tmp_path / "checkpoint" / "sink"
    out = tmp_path / "out"
    out.mkdir()
    batches = [_groups(("JFK", 1, 2), ("EWR", 1, 1)), _groups(("LGA", 2, 4))]
    batches.append(batches[1].slice(0, 0))  # a micro-batch with no rows
    sink = ResultSink(out, "parquet", mode="append", journal=journal, commit_each_batch=True)
    sink.on_subscribe(FakeSubscription())
    for batch_id, table in enumerate(batches[:2]):
        sink.on_next(Batch(batch_id, table))
        assert sink.result is None
        assert pq.read_table(out / "result.parquet").num_rows == sum(
            part.num_rows for part in batches[: batch_id + 1]
        )
    sink.on_next(Batch(2, batches[2]))
    sink.on_complete()
    assert sink.completed, sink.error
    assert sink.result is None
    assert pq.read_table(out / "result.parquet").equals(pa.concat_tables(batches))


def test_a_growing_append_result_is_rewritten_at_spaced_micro_batches_and_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rewrite that took 1 s (the clock moves 1 s per reading) is not repeated until
    ``APPEND_REWRITE_SPACING`` seconds later; the end writes everything."""
    clock = itertools.count()
    monkeypatch.setattr(sink_module, "monotonic", lambda: float(next(clock)))
    out = tmp_path / "out"
    out.mkdir()
    sink = ResultSink(
        out, "parquet", mode="append", journal=tmp_path / "journal", commit_each_batch=True
    )
    sink.on_subscribe(FakeSubscription())
    rows_in_file = []
    for batch_id in range(12):
        sink.on_next(Batch(batch_id, _groups(("JFK", batch_id, 1))))
        rows_in_file.append(pq.read_table(out / "result.parquet").num_rows)
    # written after batch 0 (it took 1 s), then 10 s later: after batch 10
    assert sink_module.APPEND_REWRITE_SPACING == 10.0
    assert rows_in_file == [1] * 10 + [11, 11]
    sink.on_complete()
    assert pq.read_table(out / "result.parquet").num_rows == 12


# -- --partition-by: a Hive-style Parquet dataset -------------------------------------


def _read_dataset(directory: Path, partition_by: tuple[str, ...], schema: pa.Schema) -> pa.Table:
    """A partitioned result read back with ``pyarrow.dataset``, in ``schema``'s column order."""
    import pyarrow.dataset as pa_ds  # type: ignore[import-untyped,unused-ignore]

    partitioning = pa_ds.partitioning(
        pa.schema([schema.field(name) for name in partition_by]), flavor="hive"
    )
    table = pa_ds.dataset(directory, format="parquet", partitioning=partitioning).to_table()
    return table.select(schema.names)


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([(name, "ascending") for name in table.schema.names])


def _fold(sink: ResultSink, batches: list[pa.Table]) -> None:
    sink.on_subscribe(FakeSubscription())
    for batch_id, table in enumerate(batches):
        sink.on_next(Batch(batch_id, table))
    sink.on_complete()
    assert sink.wait(1)
    assert sink.completed, sink.error


@pytest.mark.parametrize(
    ("mode", "journal"),
    [("update", False), ("complete", False), ("append", False), ("append", True)],
)
@pytest.mark.parametrize("partition_by", [("origin",), ("origin", "hour")])
def test_a_partitioned_result_equals_the_unpartitioned_one(
    tmp_path: Path, mode: OutputMode, journal: bool, partition_by: tuple[str, ...]
) -> None:
    batches = [
        _groups(("JFK", 1, 2), ("EWR", 1, 1), ("JFK", 2, 7)),
        _groups(("JFK", 1, 5), ("LGA", 2, 1)),
        _groups(("EWR", 3, 4)),
    ]
    keys = ("origin", "hour") if mode == "update" else ()
    plain, partitioned = tmp_path / "plain", tmp_path / "partitioned"
    plain.mkdir()
    partitioned.mkdir()
    _fold(
        ResultSink(
            plain, "parquet", mode=mode, keys=keys, journal=tmp_path / "j1" if journal else None
        ),
        batches,
    )
    sink = ResultSink(
        partitioned,
        "parquet",
        mode=mode,
        keys=keys,
        journal=tmp_path / "j2" if journal else None,
        partition_by=partition_by,
    )
    _fold(sink, batches)
    assert sink.result_path == partitioned / "result"
    assert _files(partitioned) == ["result"]  # no temporary directory left
    expected = pq.read_table(plain / "result.parquet")
    assert expected.num_rows > 0
    assert _files(partitioned / "result") == sorted(
        {f"origin={origin}" for origin in expected["origin"].to_pylist()}
    )
    actual = _read_dataset(partitioned / "result", partition_by, expected.schema)
    assert _sorted(actual).equals(_sorted(expected))


def test_a_partitioned_result_replaces_an_earlier_one_whole(tmp_path: Path) -> None:
    earlier = tmp_path / "result" / "origin=SFO"
    earlier.mkdir(parents=True)
    (earlier / "part-0.parquet").write_bytes(b"stale")
    sink = ResultSink(tmp_path, "parquet", mode="complete", partition_by=("origin",))
    _fold(sink, [_groups(("JFK", 1, 2))])
    assert _files(tmp_path) == ["result"]
    assert _files(tmp_path / "result") == ["origin=JFK"]


def test_a_failed_partitioned_run_leaves_no_directory(tmp_path: Path) -> None:
    sink = ResultSink(tmp_path, "parquet", mode="append", partition_by=("origin",))
    sink.on_subscribe(FakeSubscription())
    sink.on_next(Batch(0, _groups(("JFK", 1, 2))))  # written through, to a temporary dir
    assert [name.startswith(".result.dir.") for name in _files(tmp_path)] == [True]
    sink.on_error(RuntimeError("boom"))
    assert sink.wait(1)
    assert _files(tmp_path) == []


def test_an_empty_partitioned_result_is_an_empty_directory(tmp_path: Path) -> None:
    sink = ResultSink(tmp_path, "parquet", mode="complete", partition_by=("origin",))
    _fold(sink, [])
    assert _files(tmp_path) == ["result"]
    assert _files(tmp_path / "result") == []


def test_partitions_are_parquet_only(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^a partitioned result is written as Parquet, not csv$"):
        ResultSink(tmp_path, "csv", mode="complete", partition_by=("origin",))


def test_a_veto_before_the_commit_writes_nothing(tmp_path: Path) -> None:
    def veto() -> None:
        raise RuntimeError("too many dead letters")

    sink = ResultSink(tmp_path, "parquet", mode="append", before_commit=veto)
    sink.on_subscribe(FakeSubscription())
    sink.on_next(Batch(0, _groups(("JFK", 1, 2))))
    sink.on_complete()
    assert sink.wait(1)
    assert not sink.completed
    assert str(sink.error) == "too many dead letters"
    assert _files(tmp_path) == []  # the rows written through were dropped


def test_commit_each_batch_rewrites_the_result_atomically_and_finish_keeps_it(
    tmp_path: Path,
) -> None:
    sink = ResultSink(
        tmp_path, "parquet", mode="update", keys=("origin", "hour"), commit_each_batch=True
    )
    subscription = FakeSubscription()
    sink.on_subscribe(subscription)
    sink.on_next(Batch(0, _groups(("JFK", 1, 3))))
    assert pq.read_table(tmp_path / "result.parquet").to_pylist() == [
        {"origin": "JFK", "hour": 1, "flights": 3}
    ]
    sink.on_next(Batch(1, _groups(("JFK", 1, 5), ("LGA", 1, 2))))
    assert pq.read_table(tmp_path / "result.parquet").column("flights").to_pylist() == [5, 2]
    assert _files(tmp_path) == ["result.parquet"]  # no temporary file left beside it
    sink.finish()  # a live input's end: upstream cancelled, the result kept
    assert subscription.cancelled and sink.completed and sink.wait(0)
    sink.on_next(Batch(2, _groups(("EWR", 1, 9))))  # arrives after the stop: not folded
    assert pq.read_table(tmp_path / "result.parquet").column("origin").to_pylist() == [
        "JFK",
        "LGA",
    ]
    assert sink.result_path == tmp_path / "result.parquet"


def test_finish_writes_a_streamed_append_result_once(tmp_path: Path) -> None:
    sink = ResultSink(tmp_path, "parquet", mode="append", commit_each_batch=True)
    sink.on_subscribe(FakeSubscription())
    sink.on_next(Batch(0, _groups(("JFK", 1, 3))))
    assert not (tmp_path / "result.parquet").exists()  # streamed: written at the end
    sink.on_next(Batch(1, _groups(("LGA", 2, 4))))
    sink.finish()
    assert pq.read_table(tmp_path / "result.parquet").num_rows == 2


class RecordingTarget:
    """A ``SinkTarget`` in memory: it keeps what it committed, and refuses replays."""

    def __init__(self, committed: int = -1, fail_at: int | None = None) -> None:
        self.committed = committed
        self.written: list[tuple[int, list[dict[str, object]]]] = []
        self.closed = False
        self.fail_at = fail_at

    @property
    def description(self) -> str:
        return "memory:"

    @property
    def retries(self) -> int:
        return 0

    def check(self, *, mode: OutputMode, keys: object, columns: object) -> None:
        pass

    def prepare(self, schema: pa.Schema, *, mode: OutputMode, keys: object) -> None:
        pass

    def write(self, batch_id: int, table: pa.Table) -> bool:
        if batch_id == self.fail_at:
            raise OSError("the target went away")
        if batch_id <= self.committed:
            return False
        self.written.append((batch_id, table.to_pylist()))
        self.committed = batch_id
        return True

    def close(self) -> None:
        self.closed = True


def test_a_target_gets_each_micro_batch_once_and_no_file_is_written(tmp_path: Path) -> None:
    target = RecordingTarget(committed=0)  # micro-batch 0 was committed by an earlier run
    sink = ResultSink(tmp_path, "parquet", mode="update", keys=("origin", "hour"), target=target)
    subscription = FakeSubscription()
    sink.on_subscribe(subscription)
    sink.on_next(Batch(0, _groups(("JFK", 1, 2))))  # Spark's replay after the restart
    sink.on_next(Batch(1, _groups(("JFK", 1, 5), ("LGA", 2, 1))))
    sink.on_next(Batch(1, _groups(("JFK", 1, 99))))  # a replay within the run
    assert subscription.requested == 4  # each one folded (or skipped), then the next asked
    sink.on_complete()
    assert sink.wait(1)
    assert sink.completed
    assert target.written == [
        (
            1,
            [
                {"origin": "JFK", "hour": 1, "flights": 5},
                {"origin": "LGA", "hour": 2, "flights": 1},
            ],
        )
    ]
    assert _files(tmp_path) == []  # the target holds the result
    assert sink.result_path is None
    stats = sink.statistics()
    assert (stats.batches, stats.replayed, stats.last_batch_id) == (2, 2, 1)


def test_a_target_that_fails_fails_the_stream_and_is_closed(tmp_path: Path) -> None:
    target = RecordingTarget(fail_at=1)
    sink = ResultSink(tmp_path, "parquet", mode="append", target=target)
    subscription = FakeSubscription()
    sink.on_subscribe(subscription)
    sink.on_next(Batch(0, _groups(("JFK", 1, 2))))
    sink.on_next(Batch(1, _groups(("JFK", 1, 3))))  # Rule 2.13: must not raise
    assert sink.wait(1)
    assert isinstance(sink.error, OSError)
    assert subscription.cancelled
    assert target.closed
    assert _files(tmp_path) == []


def test_a_target_keeps_its_own_record_so_no_journal_is_taken(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no journal, no partitions"):
        ResultSink(
            tmp_path, "parquet", mode="append", journal=tmp_path / "j", target=RecordingTarget()
        )
