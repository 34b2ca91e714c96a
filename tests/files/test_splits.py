"""Files as splits: planned once, read from any offset, every record exactly once.

The property test is the contract of the whole file layer: for generated CSV and JSON
Lines files (quoted line breaks, lone CRs, CRLF, a BOM, blank lines, long values, invalid
lines) and any plan of micro-batches over them, reading the pieces on "executors"
(``SplitReader`` from each offset) gives exactly the records of one read from the start
(the driver's reader), each record once, as a row or as a dead letter.
"""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactive_streams.files import (
    DEAD_LETTER_COLUMN,
    FileChangedError,
    FileSplit,
    InputFile,
    RefusedRecordError,
    SplitReader,
    Validator,
    count_records,
    open_reader,
    parquet_columns,
    plan_splits,
    split_boundaries,
)

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = pa.schema([("id", pa.int64()), ("text", pa.string())])


def read_split(reader: SplitReader, split: FileSplit, start: int, end: int) -> pa.Table:
    """Records ``start .. end - 1`` of ``split``, as a from_splits task reads its share."""
    batches, position = [], start
    for batch in reader.batches(split, start):
        if position >= end:
            break
        batches.append(batch.slice(0, end - position))
        position += batch.num_rows
    return pa.Table.from_batches(batches, schema=reader.output_schema)


def driver_read(item: InputFile, schema: pa.Schema) -> tuple[list[dict[str, object]], list[str]]:
    """What the driver's reader (``--read-on driver``) makes of a file: rows, dead letters."""
    reader = open_reader(item, list(schema.names))
    validator = Validator(schema)
    rows: list[dict[str, object]] = []
    dead: list[str] = []
    try:
        while (chunk := reader.read(7)) is not None:
            converted = validator.convert(chunk)
            rows.extend(converted.table.to_pylist())
            dead.extend(letter.to_json() for letter in converted.dead_letters)
    finally:
        reader.close()
    return rows, dead


def split_rows(table: pa.Table) -> tuple[list[dict[str, object]], list[str]]:
    good = table.filter(pc.is_null(table.column(DEAD_LETTER_COLUMN)))
    rows = good.drop_columns([DEAD_LETTER_COLUMN]).to_pylist()
    dead = table.column(DEAD_LETTER_COLUMN).drop_null().to_pylist()
    return rows, dead


# -- the property test -------------------------------------------------------------------

# A value starts with a letter: a stray quote on an earlier line then never closes where a
# quoted value opens (a quote followed by a delimiter or line end would close it, taking
# the lines between into one record, as RFC 4180 reads them).
csv_record = st.one_of(
    st.builds(
        lambda first, rest: ("ok", first + rest),
        st.sampled_from("ab"),
        st.text("ab ,;'\"\r\n\t", max_size=12),
    ),
    st.just(("blank", "")),
    st.just(("unbalanced", 'x,"never closed')),
    st.just(("ragged", "1,2,3")),
    st.builds(lambda n: ("long", "L" * n), st.integers(min_value=200, max_value=3_000)),
)


def _csv_value(text: str) -> str:
    """``text`` as a CSV field: quoted when it must be (pandas and Excel do the same)."""
    if any(char in text for char in ',"\r\n') or text != text.strip() or text == "":
        return '"' + text.replace('"', '""') + '"'
    return text


@st.composite
def csv_files(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """A CSV file and the ids of its well-formed records, in order."""
    records = draw(st.lists(csv_record, max_size=40))
    end = draw(st.sampled_from(["\n", "\r\n"]))
    bom = draw(st.booleans())
    parts = ["id,text"]
    ids = []
    for number, (kind, text) in enumerate(records):
        if kind == "ok":
            parts.append(f"{number},{_csv_value(text)}")
            ids.append(number)
        elif kind == "long":
            parts.append(f"{number},{text}")
            ids.append(number)
        elif kind == "blank":
            parts.append("")
        else:
            parts.append(text)
    data = end.join(parts) + (end if draw(st.booleans()) else "")
    return (b"\xef\xbb\xbf" if bom else b"") + data.encode(), ids


@st.composite
def jsonl_files(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    records = draw(st.lists(st.sampled_from(["ok", "blank", "bad", "array", "crlf"]), max_size=40))
    lines, ids = [], []
    for number, kind in enumerate(records):
        if kind in ("ok", "crlf"):
            text = json.dumps({"id": number, "text": f"t\n{number}\r"})
            lines.append(text + ("\r" if kind == "crlf" else ""))
            ids.append(number)
        elif kind == "blank":
            lines.append("  ")
        elif kind == "bad":
            lines.append('{"id": ')
        else:
            lines.append("[1, 2]")
    return ("\n".join(lines) + "\n").encode(), ids


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.one_of(
        csv_files().map(lambda made: ("csv", *made)),
        jsonl_files().map(lambda made: ("jsonl", *made)),
    ),
    st.integers(min_value=16, max_value=400),
    st.lists(st.integers(min_value=0, max_value=100), max_size=6),
)
def test_any_split_plan_reads_every_record_once_and_agrees_with_the_driver(
    tmp_path_factory: pytest.TempPathFactory,
    made: tuple[str, bytes, list[int]],
    every: int,
    cuts: list[int],
) -> None:
    kind, data, ids = made
    path = tmp_path_factory.mktemp("split") / f"in.{kind}"
    path.write_bytes(data)
    item = InputFile.of(path)
    (split,) = plan_splits([item], every=every)
    records = count_records(split)
    assert all(0 < edge < records for edge in split_boundaries(split))
    reader = SplitReader(SCHEMA, chunk_rows=5)
    # A plan of micro-batches: cut anywhere (a boundary or not), read piece by piece.
    points = sorted({0, records, *(cut % (records + 1) for cut in cuts)})
    pieces = [read_split(reader, split, low, high) for low, high in itertools.pairwise(points)]
    whole = read_split(reader, split, 0, records)
    assert whole.num_rows == records  # one row per record
    if pieces:
        assert pa.concat_tables(pieces).equals(whole)  # the pieces are the whole, once
    rows, dead = split_rows(whole)
    assert [row["id"] for row in rows] == ids  # each well-formed record once, in order
    assert len(rows) + len(dead) == records  # the others are dead letters, once each
    assert driver_read(item, SCHEMA) == (rows, dead)  # the driver reads the same


# -- examples ------------------------------------------------------------------------------


def test_a_lone_cr_in_a_quoted_value_at_a_split_boundary_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "cr.csv"
    with path.open("w", newline="") as handle:
        handle.write("id,text\n")
        for i in range(20_000):
            handle.write(f"{i}," + ('"a\rb"' if i == 5 else f"t{i}") + "\n")
    (split,) = plan_splits([InputFile.of(path)], every=64 << 10)
    assert count_records(split) == 20_000
    reader = SplitReader(SCHEMA)
    boundaries = split_boundaries(split)
    assert len(boundaries) > 2
    points = [0, *boundaries, 20_000]
    ids: list[object] = []
    for low, high in itertools.pairwise(points):
        rows, dead = split_rows(read_split(reader, split, low, high))
        assert dead == []
        ids.extend(row["id"] for row in rows)
    assert ids == list(range(20_000))


def test_quoted_line_breaks_are_part_of_the_record(tmp_path: Path) -> None:
    path = tmp_path / "tweets.csv"
    path.write_text('id,text\n1,"first line\nsecond line"\n2,plain\n3,"a ""quote""\r\nthere"\n')
    (split,) = plan_splits([InputFile.of(path)])
    assert count_records(split) == 3
    rows, dead = split_rows(read_split(SplitReader(SCHEMA), split, 0, 3))
    assert rows == [
        {"id": 1, "text": "first line\nsecond line"},
        {"id": 2, "text": "plain"},
        {"id": 3, "text": 'a "quote"\r\nthere'},
    ]
    assert dead == []


def test_columns_are_matched_by_name(tmp_path: Path) -> None:
    path = tmp_path / "swapped.csv"
    path.write_text("text,id\nx,1\ny,2\n")
    (split,) = plan_splits([InputFile.of(path)])
    rows, _ = split_rows(read_split(SplitReader(SCHEMA), split, 0, 2))
    assert rows == [{"id": 1, "text": "x"}, {"id": 2, "text": "y"}]


def test_tsv_and_other_dialects(tmp_path: Path) -> None:
    path = tmp_path / "data.tsv"
    path.write_text('id\ttext\n1\t"a\tb"\n2\tc,d\n')
    item = InputFile.of(path)
    assert item.dialect.delimiter == "\t"
    (split,) = plan_splits([item])
    rows, _ = split_rows(read_split(SplitReader(SCHEMA), split, 0, 2))
    assert rows == [{"id": 1, "text": "a\tb"}, {"id": 2, "text": "c,d"}]


def test_a_refused_record_fails_without_dead_letters(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("id,text\n1,a\nzz,b\n")
    (split,) = plan_splits([InputFile.of(path)])
    reader = SplitReader(SCHEMA, dead_letters=False)
    with pytest.raises(RefusedRecordError, match=r"bad\.csv line 3: column 'id': cannot convert"):
        list(reader.batches(split, 0))


def test_a_file_that_changes_or_disappears_after_planning_is_named(tmp_path: Path) -> None:
    path = tmp_path / "plain.csv"
    path.write_text("id,text\n1,a\n")
    (split,) = plan_splits([InputFile.of(path)])
    path.write_text("id,text\n1,a\n2,b\n")
    with pytest.raises(FileChangedError, match=r"changed after it was planned"):
        count_records(split)
    path.unlink()
    with pytest.raises(FileNotFoundError, match=r"disappeared after it was planned"):
        list(SplitReader(SCHEMA).batches(split, 0))


def _rows_file(path: Path, rows: int, row_group: int, start: int = 0) -> Path:
    table = pa.table({"id": list(range(start, start + rows)), "x": [1.0] * rows})
    pq.write_table(table, path, row_group_size=row_group)
    return path


def test_parquet_splits_end_chunks_at_row_groups(tmp_path: Path) -> None:
    path = _rows_file(tmp_path / "a.parquet", 1_000, 100)
    (split,) = plan_splits([InputFile.of(path)])
    assert split_boundaries(split) == tuple(range(100, 1_000, 100))
    groups = plan_splits([InputFile.of(path)], by_row_group=True)
    assert [(s.row_group, s.first, s.records) for s in groups[:2]] == [(0, 0, 100), (1, 100, 100)]
    schema = pa.schema([("id", pa.int64()), ("x", pa.float64())])
    reader = SplitReader(schema, chunk_rows=70)
    position = 250
    for batch in reader.batches(split, 250):
        end = position + batch.num_rows
        assert not any(position < edge < end for edge in split.boundaries)  # never across
        position = end
    assert position == 1_000
    rest = pa.Table.from_batches(list(reader.batches(groups[3], 20)))
    assert rest.column("id").to_pylist() == list(range(320, 400))


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
    reader = open_reader(
        InputFile.of(path), list(schema.names), start=2, parquet_columns=("id", "small")
    )
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
    (split,) = plan_splits([InputFile.of(path)])
    reader = SplitReader(schema, chunk_rows=3, keep=keep)
    table = pa.Table.from_batches(list(reader.batches(split, 0)))
    assert table.schema == reader.output_schema
    dead_column = table.column(DEAD_LETTER_COLUMN).to_pylist()
    assert [text is not None for text in dead_column] == [False] * 6 + [True] + [False] * 3
    (dead,) = [json.loads(text) for text in dead_column if text is not None]
    assert dead["row"] == 6
    assert "stamp" in dead["reason"]
    # the record as stored, every column, although "note" was not read for the batch
    assert dead["raw"] == {"id": 6, "stamp": "not a time", "note": "n6", "small": 6}
    assert table.column("id").drop_null().to_pylist() == [0, 1, 2, 3, 4, 5, 7, 8, 9]
    for start in (0, 5, 6, 7):  # from any start, the same rows as the whole read
        part = pa.Table.from_batches(list(reader.batches(split, start)))
        assert part.equals(table.slice(start))


def test_kept_columns_only_are_carried_and_every_column_is_converted(tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    path.write_text("id,x,note\n1,2,a\n3,oops,b\n5,6,c\n")  # line 3: x is not a number
    schema = pa.schema([("id", pa.int64()), ("x", pa.int64()), ("note", pa.string())])
    (split,) = plan_splits([InputFile.of(path)])
    reader = SplitReader(schema, chunk_rows=10, keep=("id",))
    table = pa.Table.from_batches(list(reader.batches(split, 0)))
    assert table.schema.names == ["id", DEAD_LETTER_COLUMN]
    assert table.schema == reader.output_schema
    (dead,) = [
        json.loads(text) for text in table.column(DEAD_LETTER_COLUMN).drop_null().to_pylist()
    ]
    assert dead["line"] == 3  # x is converted, not carried
    assert table.column("id").to_pylist() == [1, None, 5]


def test_links_out_of_an_input_directory_are_left_out_unless_followed(tmp_path: Path) -> None:
    from reactive_streams.files import list_files

    (tmp_path / "in" / "sub").mkdir(parents=True)
    (tmp_path / "secret.csv").write_text("root:$6$hash,x\n1,2\n")
    (tmp_path / "in" / "a.csv").write_text("id,text\n1,a\n")
    (tmp_path / "in" / "planted.csv").symlink_to(tmp_path / "secret.csv")
    (tmp_path / "in" / "sub" / "inside.csv").symlink_to(tmp_path / "in" / "a.csv")
    (tmp_path / "in" / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
    left_out: list[Path] = []
    names = [item.path.name for item in list_files([tmp_path / "in"], left_out=left_out)]
    assert names == ["a.csv", "inside.csv"]  # a link inside the directory is read
    assert left_out == [tmp_path / "in" / "planted.csv"]
    followed = list_files([tmp_path / "in"], follow_symlinks=True)
    assert [item.path.name for item in followed] == ["a.csv", "planted.csv", "inside.csv"]
    # A link given itself is what the user named: it is read.
    (item,) = list_files([tmp_path / "in" / "planted.csv"])
    assert item.path.name == "planted.csv"


def test_messages_quote_a_bounded_escaped_prefix_of_file_content(tmp_path: Path) -> None:
    secret = "root:$6$" + "s" * 80 + "\x1b[2J"
    path = tmp_path / "odd.csv"
    path.write_text(f"{secret},x\n1,2\n")
    item = InputFile.of(path)
    with pytest.raises(Exception, match=r"the header names \['root:\$6\$s+…', 'x'\]") as raised:
        open_reader(item, ["id", "text"])
    assert "s" * 50 not in str(raised.value)
