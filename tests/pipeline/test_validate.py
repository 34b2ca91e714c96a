"""Reading chunks and converting them: malformed records become dead letters, never lost."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from reactive_streams.files import open_reader
from reactive_streams.pipeline import DeadLetter, Validator, plan_inputs

if TYPE_CHECKING:
    from pathlib import Path


def _read_all(path: Path, chunk: int = 2) -> tuple[list[dict[str, object]], list[DeadLetter]]:
    plan = plan_inputs([path])
    validator = Validator(plan.schema)
    reader = open_reader(plan.files[0], plan.schema.names)
    rows: list[dict[str, object]] = []
    letters: list[DeadLetter] = []
    try:
        while (raw := reader.read(chunk)) is not None:
            converted = validator.convert(raw)
            assert converted.table.schema == plan.schema
            assert converted.table.num_rows + len(converted.rejects) == raw.count
            rows.extend(converted.table.to_pylist())
            letters.extend(converted.dead_letters)
    finally:
        reader.close()
    return rows, letters


def test_csv_malformed_records_go_to_dead_letters_with_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text(
        "id,delay,when\n"  # line 1
        "1,2.5,2013-01-01T10:00:00Z\n"  # 2
        "2,abc,2013-01-01T11:00:00Z\n"  # 3: not a number
        "3,1\n"  # 4: too few fields
        "\n"  # 5: blank (not a record)
        "4,,2013-01-01 12:00:00\n"  # 6: null delay, time without offset is UTC
        "5,7,yesterday\n"  # 7: not a timestamp
        "6,NA,2013-01-01T13:00:00+01:00\n"  # 8
        # lines 9 to 38: good records, so that inference sees that most values fit
        + "".join(f"{i},{i}.5,2013-01-02T00:00:00Z\n" for i in range(7, 37))
    )
    rows, letters = _read_all(path, chunk=4)
    utc = dt.UTC
    assert rows[:3] == [
        {"id": 1, "delay": 2.5, "when": dt.datetime(2013, 1, 1, 10, tzinfo=utc)},
        {"id": 4, "delay": None, "when": dt.datetime(2013, 1, 1, 12, tzinfo=utc)},
        {"id": 6, "delay": None, "when": dt.datetime(2013, 1, 1, 12, tzinfo=utc)},
    ]
    assert [row["id"] for row in rows[3:]] == list(range(7, 37))
    assert [(letter.position, letter.position_kind) for letter in letters] == [
        (3, "line"),
        (4, "line"),
        (7, "line"),
    ]
    assert letters[0].reason.startswith("column 'delay': cannot convert 'abc' to double")
    assert letters[0].raw == {"id": "2", "delay": "abc", "when": "2013-01-01T11:00:00Z"}
    assert letters[1].reason == "expected 3 fields, found 2"
    assert letters[1].raw == "3,1"
    assert letters[2].reason.startswith("column 'when': cannot convert 'yesterday'")
    record = json.loads(letters[0].to_json())
    assert record["source"] == str(path)
    assert record["line"] == 3


def test_jsonl_malformed_lines_and_unknown_fields(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(
        '{"a": 1, "b": "x"}\n'  # 1
        "{not json\n"  # 2
        "\n"  # 3: blank, skipped
        "[1, 2]\n"  # 4: not an object
        '{"a": "two", "b": "y"}\n'  # 5: not an integer
        '{"a": 3, "c": 1}\n'  # 6: unknown field
        '{"b": "z"}\n'  # 7: missing a is null
        '{"a": 4.0, "b": 5}\n'  # 8: integral float, number as text
        + "".join(f'{{"a": {i}, "b": "v"}}\n' for i in range(5, 25))  # 9 to 28
    )
    rows, letters = _read_all(path)
    assert rows[:3] == [{"a": 1, "b": "x"}, {"a": None, "b": "z"}, {"a": 4, "b": "5"}]
    assert len(rows) == 23
    assert [letter.position for letter in letters] == [2, 4, 5, 6]
    assert letters[0].reason.startswith("malformed JSON")
    assert letters[1].reason == "not a JSON object: list"
    assert letters[3].reason == "unexpected field(s): c"


def test_parquet_rows_are_numbered_from_zero(tmp_path: Path) -> None:
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3], "b": ["x", "y", None]}), path)
    rows, letters = _read_all(path, chunk=2)
    assert rows == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}, {"a": 3, "b": None}]
    assert letters == []


def test_a_chunk_of_good_records_takes_the_fast_path(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("a,b\n" + "".join(f"{i},{i / 2}\n" for i in range(100)))
    plan = plan_inputs([path])
    validator = Validator(plan.schema)
    reader = open_reader(plan.files[0], plan.schema.names)
    raw = reader.read(1000)
    reader.close()
    assert raw is not None
    converted = validator.convert(raw)
    assert (converted.table.num_rows, converted.rejects, validator.slow_chunks) == (100, [], 0)
    assert raw.positions == list(range(2, 102))


def test_values_out_of_range_are_dead_letters_too(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(f'{{"a": {i}}}\n' for i in range(20)) + '{"a": 99999999999999999999}\n')
    rows, letters = _read_all(path, chunk=50)
    assert [row["a"] for row in rows] == list(range(20))
    assert [(letter.position, letter.reason) for letter in letters] == [
        (21, "column 'a': cannot convert 99999999999999999999 to int64: out of the BIGINT range")
    ]


def test_nested_json_converts_and_a_bad_nested_value_is_one_dead_letter(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    lines = [
        {"id": i, "user": {"name": f"u{i}", "age": 20 + i}, "tags": ["a"] * (i % 3)}
        for i in range(20)
    ]
    lines[5]["user"] = {"name": "u5", "age": "old"}
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    rows, letters = _read_all(path, chunk=10)
    assert rows[:2] == [
        {"id": 0, "user": {"name": "u0", "age": 20}, "tags": []},
        {"id": 1, "user": {"name": "u1", "age": 21}, "tags": ["a"]},
    ]
    assert len(rows) == 19
    assert [(letter.position, letter.reason) for letter in letters] == [
        (6, "column 'user.age': cannot convert 'old' to int64: not an integer")
    ]


def test_files_whose_types_differ_convert_without_dead_letters(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("id,rating\n" + "".join(f"{i},{i % 5}\n" for i in range(20)))
    (tmp_path / "b.csv").write_text("rating,id\n" + "".join(f"{i / 2},{i}\n" for i in range(20)))
    plan = plan_inputs([tmp_path])
    validator = Validator(plan.schema)
    ratings: list[object] = []
    for item in plan.files:
        reader = open_reader(item, plan.schema.names)
        try:
            while (raw := reader.read(100)) is not None:
                converted = validator.convert(raw)
                assert converted.dead_letters == []
                ratings += converted.table.column("rating").to_pylist()
        finally:
            reader.close()
    assert ratings == [float(i % 5) for i in range(20)] + [i / 2 for i in range(20)]


def test_a_bigint_dead_letter_says_not_an_integer(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("id\n" + "".join(f"{i}\n" for i in range(20)) + "abc\n")
    rows, letters = _read_all(path, chunk=50)
    assert len(rows) == 20
    assert [(letter.position, letter.reason) for letter in letters] == [
        (22, "column 'id': cannot convert 'abc' to int64: not an integer")
    ]
