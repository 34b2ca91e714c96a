"""One bad record never takes the rest of the file with it.

Each reader turns what it cannot parse into a dead letter (file, line, reason) and goes on
with the next record; readers are deterministic from a start record, and validation is a
pure, picklable step (what reading on Spark's executors needs).
"""

from __future__ import annotations

import json
import pickle
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest
from click.testing import CliRunner

from reactive_streams.cli import main
from reactive_streams.files import (
    DEAD_LETTER_COLUMN,
    MAX_RECORD_BYTES,
    RawChunk,
    open_reader,
    validate,
)
from reactive_streams.pipeline import DeadLetter, PipelineUsageError, Validator, plan_inputs

if TYPE_CHECKING:
    from pathlib import Path


def _read_all(
    path: Path, *, chunk: int = 1_000, encoding: str = "utf-8", start: int = 0
) -> tuple[list[dict[str, object]], list[int], list[DeadLetter]]:
    plan = plan_inputs([path], encoding=encoding)
    validator = Validator(plan.schema)
    reader = open_reader(plan.files[0], plan.schema.names, start=start)
    rows: list[dict[str, object]] = []
    positions: list[int] = []
    letters: list[DeadLetter] = []
    try:
        while (raw := reader.read(chunk)) is not None:
            converted = validator.convert(raw)
            assert converted.table.num_rows + len(converted.rejects) == raw.count
            rows.extend(converted.table.to_pylist())
            letters.extend(converted.dead_letters)
            where = dict(zip(raw.parsed_slots, raw.positions, strict=True))
            slots = converted.slots if converted.slots is not None else range(raw.count)
            positions.extend(where[slot] for slot in slots)
    finally:
        reader.close()
    return rows, positions, letters


def _flights(count: int) -> list[str]:
    return [f"JFK,2013-01-01T0{i % 10}:00:00Z,{i}" for i in range(count)]


def test_an_unbalanced_quote_costs_one_line_not_the_rest_of_the_file(tmp_path: Path) -> None:
    lines = ["origin,time_hour,x", *_flights(3_000)]
    lines.insert(5, 'JFK,"2013-01-01T00:00:00Z,5')  # line 6: the quote never closes
    path = tmp_path / "quote.csv"
    path.write_text("\n".join(lines) + "\n")
    rows, positions, letters = _read_all(path)
    assert len(rows) == 3_000  # before: 4 rows, and the 2,996 others in one dead letter
    assert [x["x"] for x in rows] == list(range(3_000))
    assert positions == [*range(2, 6), *range(7, 3_003)]
    (letter,) = letters
    assert (letter.position, letter.position_kind) == (6, "line")
    assert letter.reason == "unbalanced quote: a quoted value is not closed within 1,000 lines"
    assert letter.raw == 'JFK,"2013-01-01T00:00:00Z,5'


def test_quotes_that_are_fine_stay_fine(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text('name,size\n"a, b",1\n5" pipe,2\n"say ""hi""",3\n')
    rows, positions, letters = _read_all(path)
    assert rows == [
        {"name": "a, b", "size": 1},
        {"name": '5" pipe', "size": 2},
        {"name": 'say "hi"', "size": 3},
    ]
    assert positions == [2, 3, 4]
    assert letters == []


def test_a_record_over_one_mib_goes_through_and_a_garbage_one_is_a_dead_letter(
    tmp_path: Path,
) -> None:
    long_value = "v" * (3 << 20)
    garbage = "g" * (2 << 20)  # one field where three are expected
    path = tmp_path / "long.csv"
    path.write_text(f"a,b,c\n1,{long_value},x\n{garbage}\n3,y,z\n")
    rows, positions, letters = _read_all(path)
    assert [(row["a"], len(str(row["b"]))) for row in rows] == [(1, 3 << 20), (3, 1)]
    assert positions == [2, 4]
    (letter,) = letters
    assert (letter.position, letter.reason) == (3, "expected 3 fields, found 1")
    assert len(str(letter.raw)) < 70_000  # the dead letter keeps a bounded excerpt


def test_a_line_over_the_record_bound_is_refused_without_holding_it(tmp_path: Path) -> None:
    path = tmp_path / "huge.csv"
    with path.open("w") as handle:
        handle.write("a,b\n1,2\n")
        handle.write("x" * (MAX_RECORD_BYTES + (1 << 20)) + "\n")
        handle.write("3,4\n")
    rows, positions, letters = _read_all(path)
    assert rows == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    assert positions == [2, 4]
    (letter,) = letters
    assert letter.position == 3
    assert letter.reason == "record too long: 17,825,793 bytes (at most 16,777,216)"


@pytest.mark.parametrize("where", [10, 60_000])  # in the schema's sample, and well after it
def test_invalid_utf8_is_one_dead_letter_naming_the_encoding(tmp_path: Path, where: int) -> None:
    lines = [b"origin,time_hour,x", *(line.encode() for line in _flights(80_000))]
    lines[where] = b"JFK,2013-01-01T00:00:00Z,\xff\xfe"
    path = tmp_path / "bad.csv"
    path.write_bytes(b"\n".join(lines) + b"\n")
    rows, _, letters = _read_all(path, chunk=10_000)
    assert len(rows) == 79_999
    (letter,) = letters
    assert letter.position == where + 1
    assert letter.reason == (
        "not valid utf-8 text (byte 0xff at offset 25 of the record); pass --encoding if the "
        "file is not UTF-8"
    )


def test_encoding_reads_other_text(tmp_path: Path) -> None:
    path = tmp_path / "latin.csv"
    path.write_bytes("city,n\nZürich,1\nMünchen,2\n".encode("latin-1"))
    rows, _, letters = _read_all(path, encoding="latin-1")
    assert rows == [{"city": "Zürich", "n": 1}, {"city": "München", "n": 2}]
    assert letters == []
    with pytest.raises(PipelineUsageError, match=r"^--encoding klingon: unknown text encoding$"):
        plan_inputs([path], encoding="klingon")
    with pytest.raises(PipelineUsageError, match=r"^--encoding utf-16: not supported"):
        plan_inputs([path], encoding="utf-16")


def test_json_lines_with_invalid_utf8_and_an_overlong_line(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    with path.open("wb") as handle:
        handle.write(b'{"a": 1}\n{"a": "\xff"}\n')
        handle.write(b'{"a": "' + b"x" * (MAX_RECORD_BYTES + 10) + b'"}\n')
        handle.write(b'{"a": 4}\n')
    rows, positions, letters = _read_all(path)
    assert rows == [{"a": 1}, {"a": 4}]
    assert positions == [1, 4]
    assert [(letter.position, letter.reason.split(" (")[0]) for letter in letters] == [
        (2, "not valid utf-8 text"),
        (3, "record too long: 16,777,236 bytes"),
    ]


def test_binary_input_is_refused_in_one_clean_line(tmp_path: Path) -> None:
    path = tmp_path / "image.csv"
    path.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(PipelineUsageError, match=r"^.*image\.csv does not look like a CSV file"):
        plan_inputs([path])
    result = CliRunner().invoke(main, ["pipeline", "--quiet", "--input", str(path)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"Error: {path} does not look like a CSV file: it holds binary data"
    ]
    gzip = tmp_path / "gz.csv"
    gzip.write_bytes(b"\x1f\x8b\x08\x00\xff\xfe\n" + bytes(range(256)))
    result = CliRunner().invoke(main, ["pipeline", "--quiet", "--input", str(gzip)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"Error: {gzip} does not look like a CSV file: its header is not utf-8 text (pass "
        "--encoding if it is text in another encoding)"
    ]


def test_a_json_array_gets_a_hint_that_json_lines_is_expected(tmp_path: Path) -> None:
    path = tmp_path / "array.json"
    path.write_text(json.dumps([{"a": 1}, {"a": 2}], indent=2))
    with pytest.raises(
        PipelineUsageError,
        match=r"^no JSON object in .*array\.json to infer the schema from \(it looks like one "
        r"JSON document, e\.g\. a pretty-printed array; the pipeline reads JSON Lines: one "
        r"object per line, e\.g\. convert it with jq -c '\.\[\]'\)$",
    ):
        plan_inputs([path])


def _parquet(path: Path, rows: int) -> Path:
    table = pa.table({"a": list(range(rows)), "b": [f"r{i}" for i in range(rows)]})
    pq.write_table(table, path, row_group_size=7)
    return path


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
@pytest.mark.parametrize("start", [0, 1, 6, 7, 13, 40, 99])
def test_a_reader_opened_at_a_start_reads_exactly_what_follows(
    tmp_path: Path, fmt: str, start: int
) -> None:
    if fmt == "parquet":
        path = _parquet(tmp_path / "in.parquet", 40)
    elif fmt == "csv":
        path = tmp_path / "in.csv"
        path.write_text("a,b\n" + "".join(f"{i},r{i}\n" if i != 9 else "bad\n" for i in range(40)))
    else:
        path = tmp_path / "in.jsonl"
        path.write_text("".join(f'{{"a": {i}, "b": "r{i}"}}\n' for i in range(40)))
    all_rows, all_positions, all_letters = _read_all(path, chunk=3)
    rows, positions, letters = _read_all(path, chunk=5, start=start)
    first = start + (2 if fmt == "csv" else 1 if fmt == "jsonl" else 0)
    assert positions == [p for p in all_positions if p >= first]
    assert rows == all_rows[len(all_positions) - len(positions) :]
    assert letters == [letter for letter in all_letters if letter.position >= first]


def test_validation_is_a_pure_picklable_step(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("id,delay\n1,2.5\n2,soon\n" + "".join(f"{i},{i}.5\n" for i in range(3, 30)))
    plan = plan_inputs([path])
    reader = open_reader(plan.files[0], plan.schema.names)
    try:
        chunk = reader.read(10)
    finally:
        reader.close()
    assert chunk is not None
    validator = pickle.loads(pickle.dumps(Validator(plan.schema)))
    copy: RawChunk = pickle.loads(pickle.dumps(chunk))
    converted = validator.convert(copy)
    table, letters = converted.table, converted.dead_letters
    assert table.to_pylist()[:2] == [{"id": 1, "delay": 2.5}, {"id": 3, "delay": 3.5}]
    assert [(letter.source, letter.position) for letter in letters] == [(str(path), 3)]
    assert Validator(plan.schema).convert(chunk).table.equals(table)  # the same, every time
    batch = pickle.loads(pickle.dumps(validate(copy, plan.schema)))
    assert isinstance(batch, pa.RecordBatch)
    assert batch.schema == plan.schema.append(pa.field(DEAD_LETTER_COLUMN, pa.string()))
    assert batch.num_rows == chunk.count  # one row per record, the refused one included
    dead = batch.column(DEAD_LETTER_COLUMN).to_pylist()
    assert [DeadLetter.from_json(text) for text in dead if text is not None] == letters
    assert (
        pa.Table.from_batches([batch])
        .filter(pa.compute.is_null(batch.column(DEAD_LETTER_COLUMN)))
        .select(["id", "delay"])
        .equals(table)
    )
    empty = RawChunk(source="x", position_kind="row", first=0, count=0, positions=[])
    assert validate(empty, plan.schema).num_rows == 0


def test_line_ends_crlf_blank_lines_and_lone_carriage_returns(tmp_path: Path) -> None:
    crlf = tmp_path / "crlf.csv"
    crlf.write_bytes(b'a,b\r\n1,2\r\n\r\n"x,9\r\n3,4\r\n5,6\r7,8\r\n,\r\n')
    rows, positions, letters = _read_all(crlf)
    # A blank line is not a record (as in pandas and Spark); a record whose fields are all
    # empty is a dead letter; a lone CR is data (as Spark's multiLine reader reads it), so
    # "5,6\r7,8" is one record of three fields.
    assert rows == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    assert positions == [2, 5]
    assert [(letter.position, letter.reason) for letter in letters] == [
        (4, "unbalanced quote: a quoted value is not closed within 1,000 lines"),
        (6, "expected 2 fields, found 3"),
        (7, "empty record (a blank line, or every field empty)"),
    ]
    assert letters[1].raw == "5,6\r7,8"
    old_mac = tmp_path / "mac.csv"
    old_mac.write_bytes(b"a,b\r1,2\r")
    with pytest.raises(PipelineUsageError, match=r"carriage return alone"):
        plan_inputs([old_mac])
