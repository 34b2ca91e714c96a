"""Schema inference: nested JSON, the forms of timestamps and nulls, one schema for all files."""

from __future__ import annotations

import doctest
import json
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams.files import (
    ConversionOptions,
    InputFile,
    infer_file_schema,
    infer_files_schema,
    infer_type,
    widen_type,
)
from reactive_streams.files._infer import (
    INFERENCE_SAMPLE,
    MAP_MIN_KEYS,
    SAMPLE_MIN_RECORDS,
    SAMPLE_TOTAL_RECORDS,
    sample_records,
)

if TYPE_CHECKING:
    from pathlib import Path

UTC_TIMESTAMP = pa.timestamp("us", tz="UTC")


def _jsonl(path: Path, records: list[dict[str, object]]) -> InputFile:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return InputFile.of(path)


def _csv(path: Path, text: str) -> InputFile:
    path.write_text(text)
    return InputFile.of(path)


def test_nested_json_is_inferred_as_struct_array_and_map(tmp_path: Path) -> None:
    records: list[dict[str, object]] = [
        {
            "id": i,
            "user": {"name": f"u{i}", "age": 30 + i} if i % 2 else {"name": f"u{i}"},
            "tags": ["a"] * (i % 3),
            "by_day": {  # 59 dates in all, 20 in each record
                f"2024-{1 + (i + day) // 28:02d}-{1 + (i + day) % 28:02d}": day * 1.5
                for day in range(20)
            },
            "points": [{"x": i, "y": [1.5]}],
        }
        for i in range(40)
    ]
    schema = infer_file_schema(_jsonl(tmp_path / "n.jsonl", records))
    assert schema == pa.schema(
        [
            ("id", pa.int64()),
            ("user", pa.struct([("name", pa.string()), ("age", pa.int64())])),
            ("tags", pa.list_(pa.string())),
            ("by_day", pa.map_(pa.string(), pa.float64())),
            ("points", pa.list_(pa.struct([("x", pa.int64()), ("y", pa.list_(pa.float64()))]))),
        ]
    )


def test_an_object_is_a_struct_unless_many_keys_share_one_type() -> None:
    few = [{f"k{i}": i for i in range(MAP_MIN_KEYS)}]
    assert pa.types.is_struct(infer_type(few))
    many = [{f"k{i}": i for i in range(MAP_MIN_KEYS + 1)}]
    assert infer_type(many) == pa.map_(pa.string(), pa.int64())
    numbers = [{f"k{i}": i if i % 2 else i + 0.5 for i in range(MAP_MIN_KEYS + 1)}]
    assert infer_type(numbers) == pa.map_(pa.string(), pa.float64())
    texts = [{f"k{i}": f"v{i}" for i in range(MAP_MIN_KEYS + 1)}]
    assert infer_type(texts) == pa.map_(pa.string(), pa.string())
    mixed = [{f"k{i}": i if i % 2 else f"v{i}" for i in range(MAP_MIN_KEYS + 1)}]
    assert pa.types.is_struct(infer_type(mixed))  # many field names, of different types


def test_a_few_odd_values_do_not_change_a_nested_type() -> None:
    values: list[object] = [{"a": 1}] * 19 + ["oops"]
    assert infer_type(values) == pa.struct([("a", pa.int64())])
    assert infer_type([[1, 2]] * 9 + [{"a": 1}, "x"]) == pa.string()  # too mixed: text
    assert infer_type([None, [], []]) == pa.list_(pa.string())  # no element seen


def test_a_value_of_the_wider_type_widens_a_column_within_a_file() -> None:
    assert infer_type([str(i) for i in range(30)] + ["4.5"]) == pa.float64()
    assert infer_type(["2024-01-31"] * 30 + ["2024-01-31 10:00"]) == UTC_TIMESTAMP
    # out of the BIGINT range is a malformed value (a dead letter), not a wider type
    assert infer_type([str(i) for i in range(30)] + ["99999999999999999999"]) == pa.int64()
    assert infer_type([str(i) for i in range(30)] + ["oops"]) == pa.int64()


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["2024-01-31 10:00:00", "2024-02-01 00:00:00"], UTC_TIMESTAMP),
        (["2024-01-31T10:00:00.000Z", "2024-01-31T10:00:00+02:00"], UTC_TIMESTAMP),
        (["2024/01/31 10:00:00", "2024/02/01 00:00:00"], UTC_TIMESTAMP),  # seattle-temps
        (["2001/01/14 21:55", "2001/01/31 16:40"], UTC_TIMESTAMP),  # vega's flights
        (["2024/01/31", "2024/02/01"], pa.date32()),
        (["2024-01-31", "2024-02-01"], pa.date32()),
        (["31.01.2024 10:00", "01.02.2024 11:30"], pa.string()),
        (["Jan 31 2024", "Feb 1 2024"], pa.string()),
    ],
)
def test_timestamp_forms_are_inferred(values: list[str], expected: pa.DataType) -> None:
    assert infer_type(values) == expected


def test_a_timestamp_format_makes_its_text_a_timestamp() -> None:
    options = ConversionOptions(timestamp_format="%d.%m.%Y %H:%M")
    assert infer_type(["31.01.2024 10:00", "01.02.2024 11:30"], options) == UTC_TIMESTAMP
    assert infer_type(["Jan 31 2024"], ConversionOptions(timestamp_format="%b %d %Y")) == (
        UTC_TIMESTAMP
    )


def test_null_values_are_left_out_of_inference() -> None:
    values = ["1", "-", "2", "-", "3"] * 5
    assert infer_type(values) == pa.string()
    assert infer_type(values, ConversionOptions(null_values=frozenset({"-"}))) == pa.int64()
    assert infer_type(["NA", "n/a", "#N/A", "NULL", "", "7"]) == pa.int64()


def test_one_schema_for_files_whose_types_differ(tmp_path: Path) -> None:
    before = _csv(
        tmp_path / "ratings-2002.csv",
        "userId,movieId,rating,timestamp\n"
        + "".join(f"{i},{i * 7},{i % 5 + 1},2002-12-31 10:00:00\n" for i in range(50)),
    )
    rows = [f"2003/01/0{i % 9 + 1} 10:00,{(i % 10 + 1) / 2},{i * 7},{i}\n" for i in range(50)]
    after = _csv(  # the same columns in another order, and half stars
        tmp_path / "ratings-2003.csv", "timestamp,rating,movieId,userId\n" + "".join(rows)
    )
    assert infer_file_schema(before).field("rating").type == pa.int64()
    expected = pa.schema(
        [
            ("userId", pa.int64()),
            ("movieId", pa.int64()),
            ("rating", pa.float64()),
            ("timestamp", UTC_TIMESTAMP),
        ]
    )
    assert infer_files_schema([before, after]) == expected
    assert infer_files_schema([after, before]) == pa.schema(
        [expected.field(name) for name in ("timestamp", "rating", "movieId", "userId")]
    )


def test_widening_across_files_and_formats(tmp_path: Path) -> None:
    first = _jsonl(
        tmp_path / "a.jsonl",
        [{"n": 1, "t": "x", "d": "2024-01-31", "e": None, "u": {"a": 1}, "l": [1]}],
    )
    second = _jsonl(
        tmp_path / "b.jsonl",
        [{"n": 2.5, "t": 3, "d": "2024-01-31T10:00:00Z", "e": 4, "u": {"b": "y"}, "l": ["z"]}],
    )
    third = tmp_path / "c.parquet"
    pq.write_table(
        pa.table({"n": pa.array([1], pa.int32()), "e": pa.array([1], pa.int16())}), third
    )
    schema = infer_files_schema([first, second, InputFile.of(third)])
    assert schema == pa.schema(
        [
            ("n", pa.float64()),
            ("t", pa.string()),  # text and a number: text, the last resort
            ("d", UTC_TIMESTAMP),
            ("e", pa.int64()),  # no value in the first file: the others decide
            ("u", pa.struct([("a", pa.int64()), ("b", pa.string())])),
            ("l", pa.list_(pa.string())),
        ]
    )


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (pa.int32(), pa.int64(), pa.int64()),
        (pa.int64(), pa.float32(), pa.float64()),
        (pa.decimal128(10, 2), pa.int64(), pa.float64()),
        (pa.date32(), pa.timestamp("ns"), UTC_TIMESTAMP),
        (pa.null(), pa.bool_(), pa.bool_()),
        (pa.bool_(), pa.int64(), pa.string()),
        (pa.large_string(), pa.string(), pa.string()),
        (pa.dictionary(pa.int32(), pa.string()), pa.string(), pa.string()),
        (pa.list_(pa.int64()), pa.large_list(pa.float64()), pa.list_(pa.float64())),
        (pa.list_(pa.int64()), pa.int64(), pa.string()),
        (
            pa.map_(pa.string(), pa.int64()),
            pa.struct([("a", pa.float64())]),
            pa.map_(pa.string(), pa.float64()),
        ),
        (pa.struct([("a", pa.int64())]), pa.string(), pa.string()),
    ],
)
def test_widen_type(first: pa.DataType, second: pa.DataType, expected: pa.DataType) -> None:
    assert widen_type(first, second) == expected
    assert widen_type(second, first) == expected


def test_the_sample_budget_is_per_file_and_in_total(tmp_path: Path) -> None:
    assert sample_records(1) == INFERENCE_SAMPLE
    assert sample_records(20) == SAMPLE_TOTAL_RECORDS // 20
    assert sample_records(100_000) == SAMPLE_MIN_RECORDS
    # A file's values past its share are not looked at: here, the text after 100 records.
    rows = "".join(f"{i}\n" for i in range(150)) + "".join("x\n" for _ in range(150))
    files = [_csv(tmp_path / f"{i:04d}.csv", "n\n" + rows) for i in range(1_001)]
    assert sample_records(len(files)) == SAMPLE_MIN_RECORDS
    assert infer_files_schema(files) == pa.schema([("n", pa.int64())])
    assert infer_files_schema(files[:1]) == pa.schema([("n", pa.string())])


def test_files_without_records_are_passed_over(tmp_path: Path) -> None:
    empty = _csv(tmp_path / "a.jsonl", "")
    header_only = _csv(tmp_path / "b.csv", "n,s\n")
    data = _csv(tmp_path / "c.csv", "n,s\n1,x\n")
    assert infer_files_schema([empty]) == pa.schema([])
    assert infer_files_schema([header_only, data]) == pa.schema(
        [("n", pa.int64()), ("s", pa.string())]
    )


def test_the_docstring_examples_run() -> None:
    from reactive_streams.files import _infer

    # The public package names these functions as its own (set_public_module), so the
    # examples are found on each object, not by the module they were written in.
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for name, obj in sorted(vars(_infer).items()):
        defined_here = callable(obj) and getattr(obj, "__code__", None) is not None
        if defined_here and obj.__code__.co_filename == _infer.__file__:
            for test in finder.find(obj, name, module=False, globs=vars(_infer)):
                runner.run(test)
    result = runner.summarize(verbose=False)
    assert (result.attempted > 0, result.failed) == (True, 0)


def test_a_json_string_stays_text_however_it_looks(tmp_path: Path) -> None:
    # Leading zeros (postcodes, phone numbers) would be lost as BIGINT; Spark keeps them.
    records: list[dict[str, object]] = [
        {"code": f"{i:05d}", "phone": f"06{i:08d}", "flag": "true", "n": i, "ok": i % 2 == 0}
        for i in range(40)
    ]
    schema = infer_file_schema(_jsonl(tmp_path / "codes.jsonl", records))
    assert schema == pa.schema(
        [
            ("code", pa.string()),
            ("phone", pa.string()),
            ("flag", pa.string()),
            ("n", pa.int64()),
            ("ok", pa.bool_()),
        ]
    )
    nested = infer_type([{"zip": "00037", "at": "2024-01-31"}] * 3, json_values=True)
    assert nested == pa.struct([("zip", pa.string()), ("at", pa.date32())])
    # The same text in a CSV is a number, as Spark's CSV reader infers it.
    assert infer_file_schema(_csv(tmp_path / "codes.csv", "code\n00037\n")) == pa.schema(
        [("code", pa.int64())]
    )
