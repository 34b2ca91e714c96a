"""``--read-on executors`` pieces without Spark: counting, aligned batches, dead letters."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams.pipeline._formats import open_reader
from reactive_streams.pipeline._inputs import plan_inputs
from reactive_streams.pipeline._splits import (
    DEAD_COLUMN,
    KIND_COLUMN,
    DeadLetterSplitter,
    SplitReader,
    count_dead_letter_parts,
    count_records,
    list_splits,
    merge_dead_letters,
)

if TYPE_CHECKING:
    from pathlib import Path

CASES = {
    "plain.csv": "id,x\n1,2\n3,4\n5,6\n",
    "bad.csv": "id,x\n1,2\n\n3,4\nbad\n5,6",
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
def test_the_count_is_what_a_reader_from_zero_consumes(tmp_path: Path, name: str) -> None:
    plan = plan_inputs([_file(tmp_path, name)])
    (split,) = list_splits(plan.files)
    reader = open_reader(split.item, plan.schema.names)
    consumed = 0
    while (chunk := reader.read(2)) is not None:
        consumed += chunk.consumed
    reader.close()
    assert count_records(split) == min(consumed, count_records(split))
    assert (
        count_records(split)
        == {
            "plain.csv": 3,
            "bad.csv": 5,
            "crlf.csv": 5,
            "bad.jsonl": 5,
            "plain.jsonl": 2,
            "rows.parquet": 7,
        }[name]
    )


@pytest.mark.parametrize("name", [*CASES, "rows.parquet"])
def test_batches_have_one_row_per_record_from_every_start(tmp_path: Path, name: str) -> None:
    plan = plan_inputs([_file(tmp_path, name)])
    (split,) = list_splits(plan.files)
    reader = SplitReader(tuple(plan.schema.names), plan.schema, chunk_rows=2)
    total = count_records(split)
    whole = pa.Table.from_batches(list(reader.batches(split, 0)))
    assert whole.num_rows == total
    for start in range(total + 1):
        rest = pa.Table.from_batches(list(reader.batches(split, start)), schema=whole.schema)
        assert rest.to_pylist() == whole.slice(start).to_pylist()  # deterministic from offsets


def test_dead_letters_are_aligned_with_their_records(tmp_path: Path) -> None:
    plan = plan_inputs([_file(tmp_path, "bad.csv")])
    (split,) = list_splits(plan.files)
    reader = SplitReader(tuple(plan.schema.names), plan.schema, chunk_rows=10)
    table = pa.Table.from_batches(list(reader.batches(split, 0)))
    assert table.column(KIND_COLUMN).to_pylist() == [0, 1, 0, 1, 0]
    dead = [json.loads(text) for text in table.column(DEAD_COLUMN).drop_null().to_pylist()]
    assert [(letter["line"], letter["reason"]) for letter in dead] == [
        (3, "empty record (a blank line, or every field empty)"),
        (5, "expected 2 fields, found 1"),
    ]
    good = table.filter(pa.compute.equal(table[KIND_COLUMN], 0)).select(["id", "x"])
    assert good.to_pylist() == [{"id": 1, "x": 2}, {"id": 3, "x": 4}, {"id": 5, "x": 6}]


def test_replayed_batches_give_each_dead_letter_once_in_input_order(tmp_path: Path) -> None:
    paths = [_file(tmp_path, "bad.csv"), _file(tmp_path, "bad.jsonl")]
    plan = plan_inputs([paths[0]])
    splits = list_splits(plan.files)
    parts = tmp_path / "parts"
    splitter = DeadLetterSplitter(str(parts), tuple(plan.schema.names))
    reader = SplitReader(tuple(plan.schema.names), plan.schema, chunk_rows=1)
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
        (5, "expected 2 fields, found 1"),
    ]
    assert [json.loads(line)["line"] for line in target.read_text().splitlines()] == [3, 5]


def test_a_file_that_disappears_after_planning_is_named(tmp_path: Path) -> None:
    path = _file(tmp_path, "plain.csv")
    plan = plan_inputs([path])
    (split,) = list_splits(plan.files)
    path.unlink()
    reader = SplitReader(tuple(plan.schema.names), plan.schema)
    with pytest.raises(FileNotFoundError, match=r"disappeared after the pipeline planned"):
        reader(split, 0)
    with pytest.raises(FileNotFoundError, match=str(path)):
        count_records(split)


def test_rate_needs_the_reader_in_this_process() -> None:
    from reactive_streams.pipeline import Pipeline, PipelineConfig, PipelineUsageError

    with pytest.raises(PipelineUsageError, match=r"--rate .* --read-on driver"):
        Pipeline(PipelineConfig(rate=5.0, read_on="executors"))
