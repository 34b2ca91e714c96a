"""The files people have, end to end on Spark: nested JSON, and files whose types differ.

Both run on the default read path (on the executors, through ``from_splits``): the schema
is inferred before Spark starts, the records are converted on the executors, and the
query reads nested fields and the widened columns.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from reactive_streams.pipeline import Pipeline, PipelineConfig

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
