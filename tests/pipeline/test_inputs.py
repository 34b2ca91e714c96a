"""Finding and checking inputs before anything starts: one clear error per problem."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams.pipeline import PipelineUsageError, default_input, plan_inputs
from reactive_streams.pipeline._schema import describe_schema

if TYPE_CHECKING:
    from pathlib import Path


def _csv(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_schema_is_inferred_and_normalised(tmp_path: Path) -> None:
    path = _csv(
        tmp_path / "a.csv",
        "origin,dep_delay,flights,time_hour,ok\nEWR,1.5,3,2013-01-01 10:00:00,true\n",
    )
    plan = plan_inputs([path])
    assert plan.schema == pa.schema(
        [
            ("origin", pa.string()),
            ("dep_delay", pa.float64()),
            ("flights", pa.int64()),
            ("time_hour", pa.timestamp("us", tz="UTC")),
            ("ok", pa.bool_()),
        ]
    )
    assert [item.path for item in plan.files] == [path]


def test_directory_is_read_in_sorted_order_skipping_hidden_files(tmp_path: Path) -> None:
    for name in ("b.csv", "a.csv", ".hidden.csv", "_SUCCESS.csv", "notes.txt"):
        _csv(tmp_path / name, "x,y\n1,2\n")
    plan = plan_inputs([tmp_path])
    assert [item.path.name for item in plan.files] == ["a.csv", "b.csv"]


def test_jsonl_and_parquet(tmp_path: Path) -> None:
    lines = [{"a": 1, "b": "x"}, {"b": "y", "a": 2}]
    (tmp_path / "one.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    pq.write_table(pa.table({"a": [3], "b": ["z"]}), tmp_path / "two.parquet")
    plan = plan_inputs([tmp_path / "one.jsonl", tmp_path / "two.parquet"])
    assert plan.schema == pa.schema([("a", pa.int64()), ("b", pa.string())])


def test_default_input_is_the_flights_table() -> None:
    plan = default_input()
    assert plan.total_rows == 336_776
    assert plan.schema.field("time_hour").type == pa.timestamp("us", tz="UTC")
    assert plan.schema.field("origin").type == pa.string()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.csv", r"^input not found: .*missing\.csv$"),
        (lambda d: _csv(d / "data.txt", "a\n1\n"), r"^unsupported input format: .*data\.txt"),
        (lambda d: (d / "empty").mkdir() or d / "empty", r"^no CSV, JSON Lines or Parquet files"),
        (lambda d: _csv(d / "h.csv", "a,b\n"), r"^the input is empty: no records in "),
        (lambda d: _csv(d / "z.csv", ""), r"^the input is empty"),
        (lambda d: _csv(d / "bad.parquet", "not parquet"), r"^cannot read .*bad\.parquet: "),
    ],
)
def test_bad_inputs_give_one_line_errors(tmp_path: Path, make: object, message: str) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(PipelineUsageError, match=message) as info:
        plan_inputs([path])
    assert "\n" not in str(info.value)


def test_files_with_other_columns_are_widened_by_name(tmp_path: Path) -> None:
    first = _csv(tmp_path / "a.csv", "x,y\n1,2\n")
    second = _csv(tmp_path / "b.csv", "x,z\n1,2\n")
    plan = plan_inputs([first, second])
    assert plan.schema.names == ["x", "y", "z"]
    assert [change.describe() for change in plan.column_changes] == [
        f"{first}: no column(s) ['z'] (read as null)",
        f"{second}: added column(s) ['z']; no column(s) ['y'] (read as null)",
    ]


def test_an_empty_file_among_others_is_fine(tmp_path: Path) -> None:
    _csv(tmp_path / "a.csv", "")
    _csv(tmp_path / "b.csv", "x\n1\n")
    plan = plan_inputs([tmp_path])
    assert plan.schema.names == ["x"]


def test_integral_floats_make_a_double_column(tmp_path: Path) -> None:
    path = _csv(tmp_path / "a.csv", "x,y\n1.0,1\n2.0,2\n")
    assert plan_inputs([path]).schema == pa.schema([("x", pa.float64()), ("y", pa.int64())])


def test_a_few_bad_values_do_not_make_a_column_text(tmp_path: Path) -> None:
    rows = "".join(f"{i},{i}.5\n" for i in range(30))
    path = _csv(tmp_path / "a.csv", "x,y\n" + rows + "oops,nope\n")
    assert plan_inputs([path]).schema == pa.schema([("x", pa.int64()), ("y", pa.float64())])


def test_the_schema_is_inferred_from_every_file_and_widened(tmp_path: Path) -> None:
    # A ratings export split in two at 2003, when half stars began; the second file has
    # its columns in another order and slashes in its dates.
    _csv(
        tmp_path / "ratings-2002.csv",
        "userId,movieId,rating,timestamp\n"
        + "".join(f"{i},{i * 7},{i % 5 + 1},2002-12-31 10:00:00\n" for i in range(30)),
    )
    rows = [f"2003/01/02 10:00,{i},{(i % 10 + 1) / 2},{i * 7}\n" for i in range(30)]
    _csv(tmp_path / "ratings-2003.csv", "timestamp,userId,rating,movieId\n" + "".join(rows))
    plan = plan_inputs([tmp_path])
    assert plan.schema == pa.schema(
        [
            ("userId", pa.int64()),
            ("movieId", pa.int64()),
            ("rating", pa.float64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
        ]
    )


def test_nested_json_gives_nested_columns(tmp_path: Path) -> None:
    lines = [
        {"id": i, "user": {"name": f"u{i}", "age": 20 + i}, "tags": ["a"] * (i % 3)}
        for i in range(10)
    ]
    (tmp_path / "n.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    plan = plan_inputs([tmp_path / "n.jsonl"])
    assert plan.schema == pa.schema(
        [
            ("id", pa.int64()),
            ("user", pa.struct([("name", pa.string()), ("age", pa.int64())])),
            ("tags", pa.list_(pa.string())),
        ]
    )
    assert describe_schema(plan.schema) == [
        ("id", "BIGINT"),
        ("user", "STRUCT<name: STRING, age: BIGINT>"),
        ("tags", "ARRAY<STRING>"),
    ]


def test_parquet_with_nested_columns_is_normalised(tmp_path: Path) -> None:
    stored = pa.schema(
        [
            ("id", pa.int32()),
            ("s", pa.struct([pa.field("a", pa.int16(), nullable=False), ("b", pa.large_string())])),
            ("l", pa.large_list(pa.float32())),
            ("m", pa.map_(pa.string(), pa.timestamp("ms"))),
        ]
    )
    row = {"id": 1, "s": {"a": 2, "b": "x"}, "l": [1.5], "m": [("k", None)]}
    pq.write_table(pa.Table.from_pylist([row], schema=stored), tmp_path / "n.parquet")
    plan = plan_inputs([tmp_path / "n.parquet"])
    assert describe_schema(plan.schema) == [
        ("id", "BIGINT"),
        ("s", "STRUCT<a: BIGINT, b: STRING>"),
        ("l", "ARRAY<DOUBLE>"),
        ("m", "MAP<STRING, TIMESTAMP>"),
    ]


def test_a_given_schema_is_used_and_checked_against_each_file(tmp_path: Path) -> None:
    data = _csv(tmp_path / "a.csv", "rating,id\n4,1\n5,2\n")
    schema = pa.schema([("id", pa.int64()), ("rating", pa.float64())])
    plan = plan_inputs([data], schema=schema)
    assert (plan.schema, plan.schema_given) == (schema, True)
    nested = pa.schema([("id", pa.int64()), ("rating", pa.list_(pa.float64()))])
    with pytest.raises(PipelineUsageError, match=r"^--schema: CSV values are text, so the "):
        plan_inputs([data], schema=nested)
    pq.write_table(pa.table({"id": [1]}), tmp_path / "b.parquet")
    with pytest.raises(
        PipelineUsageError,
        match=r"^.*b\.parquet has no column\(s\) \['rating'\] of --schema \(it has \['id'\]\)$",
    ):
        plan_inputs([tmp_path / "b.parquet"], schema=schema)
    (tmp_path / "c.jsonl").write_text('{"id": 1, "note": "x"}\n')
    with pytest.raises(
        PipelineUsageError,
        match=r"^the first record of .*c\.jsonl has field\(s\) \['note'\] that --schema does not "
        r"name",
    ):
        plan_inputs([tmp_path / "c.jsonl"], schema=schema)


def test_common_timestamp_forms_are_inferred_without_a_format(tmp_path: Path) -> None:
    path = _csv(
        tmp_path / "a.csv",
        "iso,spaced,slashes,minutes,day\n"
        "2024-01-31T10:00:00.000Z,2024-01-31 10:00:00,2024/01/31 10:00:00,2001/01/14 21:55,"
        "2024/01/31\n",
    )
    utc = pa.timestamp("us", tz="UTC")
    assert plan_inputs([path]).schema == pa.schema(
        [("iso", utc), ("spaced", utc), ("slashes", utc), ("minutes", utc), ("day", pa.date32())]
    )


def test_tsv_files_and_bad_dialect_options(tmp_path: Path) -> None:
    from reactive_streams.pipeline import PipelineUsageError, plan_inputs

    tsv = tmp_path / "in.tsv"
    tsv.write_text("id\ttext\n1\ta,b\n", encoding="utf-8")
    plan = plan_inputs([tsv])
    assert plan.schema.names == ["id", "text"]
    assert plan.files[0].dialect.delimiter == "\t"
    unquoted = plan_inputs([tsv], quote=None)
    assert unquoted.files[0].dialect.quote is None
    with pytest.raises(PipelineUsageError, match=r"^--delimiter 'ab': expected one ASCII"):
        plan_inputs([tsv], delimiter="ab")
    with pytest.raises(PipelineUsageError, match=r"^--delimiter and --quote are the same"):
        plan_inputs([tsv], delimiter="'", quote="'")
    from click.testing import CliRunner

    from reactive_streams.cli import main

    result = CliRunner().invoke(main, ["pipeline", "--input", str(tsv), "--delimiter", "ab"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["Error: --delimiter 'ab': expected one ASCII character"]


def test_a_link_planted_in_an_input_directory_is_left_out_and_never_quoted(
    tmp_path: Path,
) -> None:
    from reactive_streams.pipeline import Pipeline, PipelineConfig, plan_inputs

    secret = tmp_path / "shadow"
    secret.write_text("root:$6$" + "h" * 90 + ":19000:0:99999:7:::\nbin:*:19000\n")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("id,text\n1,a\n")
    (tmp_path / "in" / "b.csv").symlink_to(secret)
    plan = plan_inputs([tmp_path / "in"])
    assert [item.path.name for item in plan.files] == ["a.csv"]
    assert plan.skipped == (tmp_path / "in" / "b.csv",)
    config = PipelineConfig(
        inputs=(tmp_path / "in",), output=tmp_path / "out", sql="SELECT id FROM events"
    )
    pipe = Pipeline(config)
    pipe.prepare()
    assert any("left out 1 symbolic link(s)" in note for note in pipe.notes)
    # Followed on request, its first line is a column (files are widened by name): its
    # content shows in the summary only as a short escaped prefix.
    followed = plan_inputs([tmp_path / "in"], follow_symlinks=True)
    lines = [change.describe() for change in followed.column_changes]
    assert len(lines) == 2
    assert re.search(r"no column\(s\) \['root:\$6\$h+…'\]", lines[0])
    assert re.search(r"added column\(s\) \['root:\$6\$h+…'\]", lines[1])
    assert not any("h" * 60 in line for line in lines)
