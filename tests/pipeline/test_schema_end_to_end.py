"""The files people have, end to end on Spark: nested JSON, files whose types differ, and
a schema, null text and a timestamp format given on the command line.

All run on the default read path (on the executors, through ``from_splits``): the schema
is inferred (or read from ``--schema``) before Spark starts, the records are converted on
the executors, and the query reads nested fields and the widened columns.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from reactive_streams.cli import main
from reactive_streams.pipeline import Pipeline, PipelineConfig
from reactive_streams.pipeline._schema import schema_from_ddl, spark_schema

from .conftest import SPARK_MARKS, run_to_end

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

pytestmark = SPARK_MARKS


def _run(spark: SparkSession, config: PipelineConfig) -> tuple[list[dict[str, object]], list[str]]:
    """The result rows and the dead letters' reasons of a run that must complete."""
    pipe = Pipeline(config)
    run_to_end(pipe, spark)
    result = pipe.finish()
    pipe.close()
    assert result.status == "completed", result.error
    assert pipe.config.reads_on == "executors"
    rows = [json.loads(line) for line in (config.output / "result.jsonl").read_text().splitlines()]
    dead = config.dead_letter_path
    letters = dead.read_text().splitlines() if dead.exists() else []
    return rows, [json.loads(letter)["reason"] for letter in letters]


def test_select_user_name_from_nested_json(spark: SparkSession, tmp_path: Path) -> None:
    records: list[dict[str, object]] = [
        {
            "id": i,
            "user": {"name": f"u{i}", "address": {"city": "Oslo" if i % 2 else "Lima"}},
            "tags": ["a", "b"][: i % 3],
        }
        for i in range(12)
    ]
    records[7]["user"] = {"name": 7}  # a number where text is expected: text
    records[9]["tags"] = "not an array"  # one dead letter
    data = tmp_path / "events.jsonl"
    data.write_text("".join(json.dumps(record) + "\n" for record in records))
    sql = "SELECT id, user.name AS name, user.address.city AS city, size(tags) AS tags FROM events"
    config = PipelineConfig(inputs=(data,), sql=sql, output=tmp_path / "out", fmt="jsonl")
    rows, reasons = _run(spark, config)
    expected = [
        {
            "id": i,
            "name": "7" if i == 7 else f"u{i}",
            "city": None if i == 7 else ("Oslo" if i % 2 else "Lima"),
            "tags": i % 3,
        }
        for i in range(12)
        if i != 9
    ]
    assert sorted(rows, key=lambda row: int(str(row["id"]))) == expected
    assert reasons == [
        "column 'tags': cannot convert 'not an array' to list<item: string>: a str is not an array"
    ]


def test_two_files_whose_types_differ(spark: SparkSession, tmp_path: Path) -> None:
    # A ratings export split in two at 2003, when half stars began: the first file has
    # whole stars only, the second has its columns in another order and half stars.
    before = [(user, 10 + user % 3, 1 + user % 5) for user in range(40)]
    after = [(user, 10 + user % 3, (1 + user % 10) / 2) for user in range(40)]
    (tmp_path / "ratings-2002.csv").write_text(
        "userId,movieId,rating\n" + "".join(f"{u},{m},{r}\n" for u, m, r in before)
    )
    (tmp_path / "ratings-2003.csv").write_text(
        "rating,userId,movieId\n" + "".join(f"{r},{u},{m}\n" for u, m, r in after)
    )
    sql = "SELECT movieId, count(*) AS n, sum(rating) AS total FROM events GROUP BY movieId"
    config = PipelineConfig(inputs=(tmp_path,), sql=sql, output=tmp_path / "out", fmt="jsonl")
    rows, reasons = _run(spark, config)
    assert reasons == []
    expected: dict[int, tuple[int, float]] = {}
    for _, movie, rating in before + after:
        count, total = expected.get(movie, (0, 0.0))
        expected[movie] = (count + 1, total + rating)
    assert {int(str(row["movieId"])): (row["n"], row["total"]) for row in rows} == expected


def test_schema_null_values_and_timestamp_format_given(spark: SparkSession, tmp_path: Path) -> None:
    data = tmp_path / "readings.csv"
    data.write_text(
        "sensor,at,value\n"
        "a,31.01.2024 10:00,1\n"  # line 2
        "b,31.01.2024 10:05,-\n"  # 3: "-" is null (--null-value)
        "a,01.02.2024 09:30,2.5\n"  # 4: a half, though --schema would be inferred BIGINT
        "b,yesterday,3\n"  # 5: not a timestamp in any form
        "b,2024-02-01T08:00:00Z,4\n"  # 6: ISO 8601 is still read
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        ["pipeline", "--input", str(data), "--output", str(out), "--format", "jsonl",
         "--schema", "sensor STRING, at TIMESTAMP, value DOUBLE",
         "--null-value", "-,n.a.", "--timestamp-format", "%d.%m.%Y %H:%M",
         "--sql", "SELECT sensor, count(*) AS n, count(value) AS v, sum(value) AS total, "
                  "CAST(max(at) AS STRING) AS last FROM events GROUP BY sensor"],
    )  # fmt: skip
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert f"Input schema of {data} (--schema):" in " ".join(result.stdout.split())
    rows = [json.loads(line) for line in (out / "result.jsonl").read_text().splitlines()]
    assert sorted(rows, key=lambda row: str(row["sensor"])) == [
        {"sensor": "a", "n": 2, "v": 2, "total": 3.5, "last": "2024-02-01 09:30:00"},
        {"sensor": "b", "n": 2, "v": 1, "total": 4.0, "last": "2024-02-01 08:00:00"},
    ]
    letters = [json.loads(line) for line in (out / "dead-letters.jsonl").read_text().splitlines()]
    assert [(letter["line"], letter["reason"].split(":")[0]) for letter in letters] == [
        (5, "column 'at'")
    ]


@pytest.mark.parametrize(
    "ddl",
    [
        "id BIGINT, rating DOUBLE, ts TIMESTAMP, d DATE, ok BOOLEAN, name STRING",
        "`user id` BIGINT, user STRUCT<name: STRING, `the age`: BIGINT>",
        "tags ARRAY<STRING>, scores MAP<STRING, ARRAY<DOUBLE>>, "
        "deep ARRAY<STRUCT<x: BIGINT, y: MAP<BIGINT, STRING>>>",
    ],
)
def test_the_ddl_reader_agrees_with_sparks_parser(spark: SparkSession, ddl: str) -> None:
    from reactive_streams.spark._pyspark_internals import parse_ddl

    assert spark_schema(schema_from_ddl(ddl)) == parse_ddl(ddl)
