"""The source publisher: reads only on demand, emits only what was asked, never loses a record."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import pytest

from reactive_streams import NonPositiveDemandError
from reactive_streams.pipeline import DeadLetterWriter, FileSource, default_input, plan_inputs

from .conftest import Recorder

if TYPE_CHECKING:
    from pathlib import Path

    from reactive_streams.pipeline._source import Record


def _csv(tmp_path: Path, rows: int, bad_every: int = 0) -> Path:
    lines = ["id,value"]
    for index in range(rows):
        value = "oops" if bad_every and index % bad_every == bad_every - 1 else str(index * 2)
        lines.append(f"{index},{value}")
    path = tmp_path / "in.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _source(path: Path, tmp_path: Path, **kwargs: object) -> tuple[FileSource, DeadLetterWriter]:
    dead = DeadLetterWriter(tmp_path / "dead.jsonl")
    return FileSource(plan_inputs([path]), dead_letters=dead, **kwargs), dead  # type: ignore[arg-type]


def test_emits_exactly_what_was_requested_and_reads_no_further(tmp_path: Path) -> None:
    source, _ = _source(_csv(tmp_path, 100), tmp_path, chunk_rows=4)
    recorder: Recorder[Record] = Recorder()
    source.subscribe(recorder)
    assert source.statistics().records_read == 0  # nothing read before demand
    recorder.request(5)
    recorder.wait_for(5)
    stats = source.statistics()
    assert stats.stream.delivered == 5
    assert stats.records_read == 5  # chunks of min(4, demand): 4 then 1
    recorder.request(3)
    recorder.wait_for(8)
    assert [row["id"] for row in recorder.elements] == list(range(8))
    assert source.statistics().records_read == 8
    assert not recorder.completed
    source.stop()  # closes the file


def test_completes_after_the_last_record_and_counts_dead_letters(tmp_path: Path) -> None:
    source, dead = _source(_csv(tmp_path, 50, bad_every=10), tmp_path, chunk_rows=7)
    recorder: Recorder[Record] = Recorder()
    source.subscribe(recorder)
    recorder.request(1_000)
    assert recorder.done.wait(10)
    assert recorder.completed
    assert not recorder.errors
    assert len(recorder.elements) == 45
    assert dead.count == 5
    stats = source.statistics()
    assert stats.records_read == 50
    assert stats.stream.terminated
    dead.close()
    lines = (tmp_path / "dead.jsonl").read_text().splitlines()
    assert len(lines) == 5
    assert '"line": 11' in lines[0]  # record 9 is on line 11 (header is line 1)


def test_unbounded_demand_streams_everything(tmp_path: Path) -> None:
    source, _ = _source(_csv(tmp_path, 30), tmp_path, chunk_rows=8)
    recorder: Recorder[Record] = Recorder()
    source.subscribe(recorder)
    recorder.request(2**63 - 1)
    assert recorder.done.wait(10)
    assert [row["value"] for row in recorder.elements] == [index * 2 for index in range(30)]


@pytest.mark.rule("3.9")
def test_non_positive_request_signals_on_error(tmp_path: Path) -> None:
    source, _ = _source(_csv(tmp_path, 3), tmp_path)
    recorder: Recorder[Record] = Recorder()
    source.subscribe(recorder)
    recorder.request(0)
    assert recorder.done.wait(10)
    assert len(recorder.errors) == 1
    assert isinstance(recorder.errors[0], NonPositiveDemandError)
    assert str(recorder.errors[0]) == "Rule 3.9: non-positive subscription request (n=0)"


def test_cancel_stops_the_stream_without_a_terminal_signal(tmp_path: Path) -> None:
    source, _ = _source(_csv(tmp_path, 100), tmp_path, chunk_rows=5)
    recorder: Recorder[Record] = Recorder()
    source.subscribe(recorder)
    recorder.request(3)
    recorder.wait_for(3)
    assert recorder.subscription is not None
    recorder.subscription.cancel()
    recorder.request(10)  # a no-op after cancel (Rule 3.6)
    assert source.statistics().stream.cancelled
    assert len(recorder.elements) == 3
    assert not recorder.completed
    assert not recorder.errors


def test_rate_limited_stream_still_delivers_everything(tmp_path: Path) -> None:
    source, _ = _source(_csv(tmp_path, 20), tmp_path, rate=2_000.0)
    recorder: Recorder[Record] = Recorder()
    source.subscribe(recorder)
    recorder.request(100)
    assert recorder.done.wait(10)
    assert len(recorder.elements) == 20


def test_subscribe_none_is_a_type_error(tmp_path: Path) -> None:
    source, _ = _source(_csv(tmp_path, 1), tmp_path)
    with pytest.raises(TypeError, match=r"^Rule 1\.9"):
        source.subscribe(None)  # type: ignore[arg-type]


def test_default_input_rows_are_typed_dicts(tmp_path: Path) -> None:
    dead = DeadLetterWriter(None)
    source = FileSource(default_input(), dead_letters=dead, chunk_rows=2)
    recorder: Recorder[Record] = Recorder()
    source.subscribe(recorder)
    recorder.request(3)
    recorder.wait_for(3)
    first = recorder.elements[0]
    assert first["origin"] == "EWR"
    assert first["dep_time"] == 517.0
    assert first["time_hour"] == dt.datetime(2013, 1, 1, 10, tzinfo=dt.UTC)
    assert source.statistics().records_read == 3
    source.stop()


def test_arrow_mode_emits_record_batches_one_chunk_per_unit_of_demand(tmp_path: Path) -> None:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    source, dead = _source(_csv(tmp_path, 50, bad_every=10), tmp_path, chunk_rows=20, arrow=True)
    recorder: Recorder[pa.RecordBatch] = Recorder()
    source.subscribe(recorder)
    recorder.request(1)
    recorder.wait_for(1)
    first = recorder.elements[0]
    assert isinstance(first, pa.RecordBatch)
    assert first.num_rows == 18  # 20 records read, 2 refused
    assert source.statistics().records_read == 20  # one chunk, nothing further
    assert source.statistics().records_emitted == 18
    recorder.request(10)
    assert recorder.done.wait(10)
    assert recorder.completed
    ids = [x for batch in recorder.elements for x in batch.column("id").to_pylist()]
    assert ids == [index for index in range(50) if index % 10 != 9]
    assert dead.count == 5
    assert source.statistics().records_emitted == 45
    dead.close()


def test_skip_reads_and_validates_the_first_records_but_does_not_emit_them(
    tmp_path: Path,
) -> None:
    source, dead = _source(_csv(tmp_path, 50, bad_every=10), tmp_path, chunk_rows=7, skip=12)
    recorder: Recorder[Record] = Recorder()
    source.subscribe(recorder)
    recorder.request(1_000)
    assert recorder.done.wait(10)
    # The 12 valid records skipped are ids 0..12 without 9 (refused): emitting resumes at 13.
    assert [row["id"] for row in recorder.elements] == [
        index for index in range(13, 50) if index % 10 != 9
    ]
    assert dead.count == 5  # the refused records of the skipped part are dead letters again
    stats = source.statistics()
    assert stats.records_skipped == 12
    assert stats.records_read == 50
    dead.close()


def test_skip_must_not_be_negative(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"skip must be >= 0, got -1"):
        _source(_csv(tmp_path, 1), tmp_path, skip=-1)


def test_the_bytes_read_count_up_to_the_files_sizes(tmp_path: Path) -> None:
    first = _csv(tmp_path, 40)
    second = first.with_name("more.csv")
    second.write_text(first.read_text())
    dead = DeadLetterWriter(tmp_path / "dead.jsonl")
    source = FileSource(plan_inputs([first, second]), dead_letters=dead, chunk_rows=8)
    recorder: Recorder[Record] = Recorder()
    source.subscribe(recorder)
    recorder.request(8)
    recorder.wait_for(8)
    partway = source.statistics().bytes_read
    assert 0 < partway < first.stat().st_size  # the header and 8 records
    recorder.request(1_000)
    assert recorder.done.wait(10)
    assert source.statistics().bytes_read == first.stat().st_size + second.stat().st_size
    dead.close()
