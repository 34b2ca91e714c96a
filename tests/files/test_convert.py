"""Conversion to a schema: nested values, null text and timestamp forms, one reason each.

Every record is a row or a dead letter; a chunk whose records all fit takes the vectorised
path (``Validator.slow_chunks`` stays 0), and the slow path says what did not fit and
where, down to the nested value.
"""

from __future__ import annotations

import datetime as dt
import json
import pickle
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams.files import ConversionOptions, RawChunk, Validator

if TYPE_CHECKING:
    from reactive_streams.files import Converted

UTC = dt.UTC


def _records(records: list[dict[str, object]]) -> RawChunk:
    """A JSON Lines chunk: record ``i`` on line ``i + 1``."""
    return RawChunk(
        source="in.jsonl",
        position_kind="line",
        first=0,
        count=len(records),
        positions=list(range(1, len(records) + 1)),
        records=records,
    )


def _text(columns: dict[str, list[str]]) -> RawChunk:
    """A CSV chunk: every value text; record ``i`` on line ``i + 2``."""
    table = pa.table({name: pa.array(values, pa.string()) for name, values in columns.items()})
    return RawChunk(
        source="in.csv",
        position_kind="line",
        first=0,
        count=table.num_rows,
        positions=list(range(2, table.num_rows + 2)),
        table=table,
    )


def _reasons(converted: Converted) -> list[tuple[int, str]]:
    return [(letter.position, letter.reason) for letter in converted.dead_letters]


USER = pa.struct([("name", pa.string()), ("age", pa.int64())])
NESTED = pa.schema(
    [
        ("id", pa.int64()),
        ("user", USER),
        ("tags", pa.list_(pa.string())),
        ("scores", pa.map_(pa.string(), pa.float64())),
        ("points", pa.list_(pa.struct([("x", pa.int64()), ("y", pa.int64())]))),
    ]
)


def test_an_int64_dead_letter_says_the_value_is_not_an_integer() -> None:
    schema = pa.schema([("id", pa.int64())])
    converted = Validator(schema).convert(_text({"id": ["1", "abc", "2.5", "1e3"]}))
    assert converted.table.column("id").to_pylist() == [1, 1000]
    assert _reasons(converted) == [
        (3, "column 'id': cannot convert 'abc' to int64: not an integer"),
        (4, "column 'id': cannot convert '2.5' to int64: not an integral number"),
    ]
    assert all("float" not in reason for _, reason in _reasons(converted))


def test_nested_json_values_that_fit_take_the_vectorised_path() -> None:
    records: list[dict[str, object]] = [
        {
            "id": 1,
            "user": {"name": "u", "age": 31},
            "tags": ["a", "b"],
            "scores": {"math": 1, "art": 2.5},
            "points": [{"x": 1, "y": 2}],
        },
        {"id": 2, "user": {"age": 2.0, "name": "v"}, "tags": [], "scores": {}, "points": None},
        {"id": 3, "user": None, "tags": None, "scores": None, "points": [{"x": 3}, None]},
        {"id": 4},
    ]
    validator = Validator(NESTED)
    converted = validator.convert(_records(records))
    assert (converted.dead_letters, validator.slow_chunks) == ([], 0)
    assert converted.table.schema == NESTED
    assert converted.table.to_pylist() == [
        {
            "id": 1,
            "user": {"name": "u", "age": 31},
            "tags": ["a", "b"],
            "scores": [("math", 1.0), ("art", 2.5)],
            "points": [{"x": 1, "y": 2}],
        },
        {"id": 2, "user": {"name": "v", "age": 2}, "tags": [], "scores": [], "points": None},
        {
            "id": 3,
            "user": None,
            "tags": None,
            "scores": None,
            "points": [{"x": 3, "y": None}, None],
        },
        {"id": 4, "user": None, "tags": None, "scores": None, "points": None},
    ]


def test_a_nested_value_that_does_not_fit_is_one_dead_letter_naming_its_path() -> None:
    good: dict[str, object] = {"id": 0, "user": {"name": "ok", "age": 1}, "tags": ["t"]}
    records: list[dict[str, object]] = [
        good,
        {"id": 1, "user": {"name": "u", "age": "old"}},
        {"id": 2, "tags": ["a", ["b"], "c"]},
        {"id": 3, "scores": {"math": 1, "art": "good"}},
        {"id": 4, "points": [{"x": 1}, {"x": 2, "y": 2.5}]},
        {"id": 5, "user": "nobody"},
        {"id": 6, "user": {"name": "w", "nick": "x"}},
        {"id": 7, "user": {"name": "z", "nick": None}},  # a null extra field holds nothing
        {"id": 8, "tags": "a"},
        {"id": 9, "user": {"name": "n", "age": "NA"}, "tags": ["NA"]},  # null text
    ]
    validator = Validator(NESTED)
    converted = validator.convert(_records(records))
    assert validator.slow_chunks == 1
    assert [row["id"] for row in converted.table.to_pylist()] == [0, 2, 7, 9]
    assert converted.table.to_pylist()[1]["tags"] == ["a", '["b"]', "c"]  # as JSON text
    assert converted.table.to_pylist()[3]["user"] == {"name": "n", "age": None}
    assert converted.table.to_pylist()[3]["tags"] == ["NA"]  # text stays text
    assert _reasons(converted) == [
        (2, "column 'user.age': cannot convert 'old' to int64: not an integer"),
        (4, "column \"scores['art']\": cannot convert 'good' to double: "
            "could not convert string to float: 'good'"),
        (5, "column 'points[1].y': cannot convert 2.5 to int64: not an integral number"),
        (6, "column 'user': cannot convert 'nobody' to struct<name: string, age: int64>: "
            "a str is not an object"),
        (7, "column 'user': cannot convert {'name': 'w', 'nick': 'x'} to struct<name: string, "
            "age: int64>: unexpected field(s): nick"),
        (9, "column 'tags': cannot convert 'a' to list<item: string>: a str is not an array"),
    ]  # fmt: skip
    assert converted.dead_letters[0].raw == records[1]


def test_objects_and_arrays_in_a_text_column_are_their_json_text() -> None:
    schema = pa.schema([("v", pa.string())])
    records: list[dict[str, object]] = [
        {"v": {"a": [1, "é"]}},
        {"v": [True, None]},
        {"v": True},
        {"v": 1.5},
        {"v": "x"},
    ]
    converted = Validator(schema).convert(_records(records))
    assert converted.table.column("v").to_pylist() == [
        json.dumps({"a": [1, "é"]}, ensure_ascii=False),
        "[true, null]",
        "true",
        "1.5",
        "x",
    ]


def test_booleans_and_numbers_do_not_cross_on_the_fast_path() -> None:
    schema = pa.schema([("n", pa.int64()), ("b", pa.bool_())])
    records: list[dict[str, object]] = [{"n": 1, "b": True}, {"n": True, "b": 2}]
    converted = Validator(schema).convert(_records(records))
    assert converted.table.to_pylist() == [{"n": 1, "b": True}]
    assert _reasons(converted) == [
        (2, "column 'n': cannot convert True to int64: a boolean is not an integer")
    ]


def test_parquet_nested_columns_are_cast_to_the_stream_types() -> None:
    stored = pa.schema(
        [
            (
                "s",
                pa.struct(
                    [pa.field("b", pa.large_list(pa.float32())), pa.field("a", pa.int32(), False)]
                ),
            ),
            ("m", pa.map_(pa.string(), pa.int16())),
            ("l", pa.list_(pa.field("element", pa.int8()))),
        ]
    )
    table = pa.Table.from_pylist(
        [
            {"s": {"a": 1, "b": [1.5, None]}, "m": [("k", 1)], "l": [1, 2]},
            {"s": None, "m": None, "l": None},
            {"s": {"a": 3, "b": []}, "m": [("x", 2), ("y", None)], "l": []},
        ],
        schema=stored,
    ).slice(1)  # a slice: the children start at an offset
    target = pa.schema(
        [
            ("s", pa.struct([("a", pa.int64()), ("b", pa.list_(pa.float64()))])),
            ("m", pa.map_(pa.string(), pa.int64())),
            ("l", pa.list_(pa.int64())),
        ]
    )
    chunk = RawChunk(
        source="in.parquet",
        position_kind="row",
        first=1,
        count=2,
        positions=[1, 2],
        table=table,
    )
    validator = Validator(target)
    converted = validator.convert(chunk)
    assert (converted.dead_letters, validator.slow_chunks) == ([], 0)
    assert converted.table.schema == target
    assert converted.table.to_pylist() == [
        {"s": None, "m": None, "l": None},
        {"s": {"a": 3, "b": []}, "m": [("x", 2), ("y", None)], "l": []},
    ]


TIMESTAMPS = pa.schema([("t", pa.timestamp("us", tz="UTC"))])


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        (["2024-01-31T10:00:00Z", "2024-01-31T12:00:00+02:00"], [(10, 0), (10, 0)]),
        (["2024-01-31 10:00:00", "2024-01-31T10:30"], [(10, 0), (10, 30)]),
        (["2024-01-31T10:00:00.000Z"], [(10, 0)]),
        (["2024/01/31 10:00:00", "2024/01/31 10:30:00"], [(10, 0), (10, 30)]),
        (["2024/01/31 10:00", "2024/01/31 10:30"], [(10, 0), (10, 30)]),
        (["2024/01/31", ""], [(0, 0), None]),
    ],
)
def test_timestamp_forms_are_read_vectorised(
    texts: list[str], expected: list[tuple[int, int] | None]
) -> None:
    validator = Validator(TIMESTAMPS)
    converted = validator.convert(_text({"t": texts}))
    assert (converted.dead_letters, validator.slow_chunks) == ([], 0)
    assert converted.table.column("t").to_pylist() == [
        None if pair is None else dt.datetime(2024, 1, 31, *pair, tzinfo=UTC) for pair in expected
    ]


def test_a_timestamp_format_is_tried_first_and_the_usual_forms_still_read() -> None:
    options = ConversionOptions(timestamp_format="%d.%m.%Y %H:%M")
    validator = Validator(TIMESTAMPS, options)
    converted = validator.convert(_text({"t": ["31.01.2024 10:00", "01.02.2024 11:30"]}))
    assert (converted.dead_letters, validator.slow_chunks) == ([], 0)
    assert converted.table.column("t").to_pylist() == [
        dt.datetime(2024, 1, 31, 10, 0, tzinfo=UTC),
        dt.datetime(2024, 2, 1, 11, 30, tzinfo=UTC),
    ]
    mixed = validator.convert(_text({"t": ["31.01.2024 10:00", "2024-01-31T10:00:00Z", "soon"]}))
    assert mixed.table.column("t").to_pylist() == [dt.datetime(2024, 1, 31, 10, tzinfo=UTC)] * 2
    assert _reasons(mixed) == [
        (4, "column 't': cannot convert 'soon' to timestamp[us, tz=UTC]: not an ISO 8601 "
            "timestamp nor '%d.%m.%Y %H:%M', '%Y/%m/%d %H:%M:%S', '%Y/%m/%d %H:%M', '%Y/%m/%d'"),
    ]  # fmt: skip
    offsets = Validator(TIMESTAMPS, ConversionOptions(timestamp_format="%d/%m/%Y %H:%M %z"))
    converted = offsets.convert(_text({"t": ["31/01/2024 12:00 +0200"]}))
    assert converted.table.column("t").to_pylist() == [dt.datetime(2024, 1, 31, 10, tzinfo=UTC)]


def test_dates_in_iso_and_slash_forms() -> None:
    validator = Validator(pa.schema([("d", pa.date32())]))
    converted = validator.convert(_text({"d": ["2024/01/31", "2024/02/01"]}))
    assert converted.table.column("d").to_pylist() == [dt.date(2024, 1, 31), dt.date(2024, 2, 1)]
    assert validator.slow_chunks == 0
    mixed = validator.convert(_text({"d": ["2024-01-31", "2024/01/31", "31/01/2024"]}))
    assert mixed.table.column("d").to_pylist() == [dt.date(2024, 1, 31)] * 2
    assert _reasons(mixed) == [
        (4, "column 'd': cannot convert '31/01/2024' to date32[day]: not an ISO 8601 date nor "
            "YYYY/MM/DD")
    ]  # fmt: skip


@pytest.mark.parametrize("text", ["YYYY-MM-DD", "%Y-%m-%d %Q"])
def test_a_format_strptime_cannot_use_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=rf"^timestamp format '{text}' "):
        ConversionOptions(timestamp_format=text)


def test_null_values_are_null_in_every_column_and_the_defaults_only_in_others() -> None:
    schema = pa.schema([("n", pa.int64()), ("s", pa.string()), ("t", pa.timestamp("us", "UTC"))])
    chunk = _text(
        {
            "n": ["NA", "-", " 3 ", "#N/A"],
            "s": ["NA", "-", "x", ""],
            "t": ["", "-", "2024-01-31T00:00:00Z", "null"],
        }
    )
    plain = Validator(schema).convert(chunk)
    assert plain.table.column("n").to_pylist() == [None, 3, None]
    assert plain.table.column("s").to_pylist() == ["NA", "x", ""]  # the defaults keep text
    assert _reasons(plain) == [(3, "column 'n': cannot convert '-' to int64: not an integer")]
    options = ConversionOptions(null_values=frozenset({"-", ""}))
    validator = Validator(schema, options)
    converted = validator.convert(chunk)
    assert (converted.dead_letters, validator.slow_chunks) == ([], 0)
    assert converted.table.to_pylist() == [
        {"n": None, "s": "NA", "t": None},
        {"n": None, "s": None, "t": None},
        {"n": 3, "s": "x", "t": dt.datetime(2024, 1, 31, tzinfo=UTC)},
        {"n": None, "s": None, "t": None},
    ]
    json_chunk = _records([{"n": "-", "s": "-"}, {"n": 1, "s": " - "}])
    assert Validator(schema, options).convert(json_chunk).table.to_pylist() == [
        {"n": None, "s": None, "t": None},
        {"n": 1, "s": None, "t": None},  # null text is compared trimmed
    ]


def test_a_validator_pickles_with_its_options() -> None:
    options = ConversionOptions(frozenset({"-"}), "%d.%m.%Y")
    validator = pickle.loads(pickle.dumps(Validator(NESTED, options)))
    assert (validator.schema, validator.options) == (NESTED, options)
    converted = validator.convert(_records([{"id": 1, "user": {"name": "-", "age": "-"}}]))
    assert converted.table.column("user").to_pylist() == [{"name": None, "age": None}]


def test_a_json_string_is_refused_by_a_number_or_boolean_column_not_converted() -> None:
    # Spark's JSON reader keeps "00037" a string; turning it into 37 loses the zeros.
    schema = pa.schema([("code", pa.int64()), ("rate", pa.float64()), ("ok", pa.bool_())])
    records: list[dict[str, object]] = [
        {"code": 37, "rate": 1.5, "ok": True},
        {"code": "00037", "rate": 2.0, "ok": False},
        {"code": 1, "rate": "2.5", "ok": None},
        {"code": "NA", "rate": None, "ok": "true"},
    ]
    converted = Validator(schema).convert(_records(records))
    refused = "a JSON string stays text (the column would need STRING)"
    assert _reasons(converted) == [
        (2, f"column 'code': cannot convert '00037' to int64: {refused}"),
        (3, f"column 'rate': cannot convert '2.5' to double: {refused}"),
        (4, f"column 'ok': cannot convert 'true' to bool: {refused}"),
    ]
    assert converted.table.to_pylist() == [{"code": 37, "rate": 1.5, "ok": True}]
    only_strings = Validator(schema).convert(_records([{"code": "12"}, {"code": "n/a"}]))
    assert [position for position, _ in _reasons(only_strings)] == [1]  # null text is null
    assert only_strings.table.column("code").to_pylist() == [None]
    # CSV values are all text: there "00037" is the number a BIGINT column asks for.
    codes = Validator(pa.schema([("code", pa.int64())])).convert(_text({"code": ["00037"]}))
    assert codes.table.column("code").to_pylist() == [37]
