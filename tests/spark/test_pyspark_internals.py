"""One test per assumption ``_pyspark_internals`` makes about PySpark's private API."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyspark
import pytest
from pyspark.sql.types import LongType, StructType

from reactive_streams.spark import _pyspark_internals as internals
from reactive_streams.spark.session import spark_is_running

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_written_for_pyspark_4() -> None:
    major, minor = (int(part) for part in pyspark.__version__.split(".")[:2])
    assert (major, minor) >= (4, 2), "from_splits needs Spark 4.2+ (admission control)"


def test_active_context_is_the_sessions_from_any_thread(spark: SparkSession) -> None:
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(internals.active_context()))
    thread.start()
    thread.join(10)
    assert seen == [spark.sparkContext]
    assert spark_is_running()  # the name the pipeline imports from session


def test_jvm_is_the_py4j_view_of_the_driver(spark: SparkSession) -> None:
    assert int(internals.jvm(spark).java.lang.Math.abs(-3)) == 3
    assert internals.jvm(spark.sparkContext) is not None


def test_arrow_batch_messages_are_arrow_ipc_record_batches(spark: SparkSession) -> None:
    df = spark.range(0, 1_000, numPartitions=3)
    schema = pa.schema([("id", pa.int64())])
    messages = internals.arrow_batch_messages(df, prefetch_partitions=False)
    batches = [pa.ipc.read_record_batch(pa.py_buffer(message), schema) for message in messages]
    assert sum(batch.num_rows for batch in batches) == 1_000
    assert sorted(pa.Table.from_batches(batches).column("id").to_pylist()) == list(range(1_000))


def test_analyzed_plan_is_text_naming_the_relation(spark: SparkSession) -> None:
    plan = internals.analyzed_plan(spark.range(5).withColumnRenamed("id", "renamed_column"))
    assert "renamed_column" in plan
    assert "Range" in plan


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT id FROM range(5)", False),
        ("SELECT 'Aggregate [x]' AS text FROM range(5)", False),
        ("SELECT count(*) FROM range(5)", True),
        ("SELECT id % 2 AS k, sum(id) FROM range(5) GROUP BY id % 2", True),
        (
            "SELECT * FROM (SELECT id % 2 AS k, max(id) AS m FROM range(5) GROUP BY 1) WHERE m > 1",
            True,
        ),
        ("SELECT id FROM range(5) WHERE id IN (SELECT max(id) FROM range(3))", False),
    ],
)
def test_plan_aggregates_finds_an_aggregate_node(
    spark: SparkSession, sql: str, expected: bool
) -> None:
    assert internals.plan_aggregates(spark.sql(sql)) is expected


def test_a_streaming_plan_names_python_sources_by_registered_name(
    spark: SparkSession, tmp_path: Path
) -> None:
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    from reactive_streams.spark.splits import file_splits

    pq.write_table(pa.table({"x": pa.array([1, 2, 3], pa.int64())}), tmp_path / "a.parquet")
    df = file_splits(tmp_path).to_dataframe(spark)
    query = df.writeStream.format("noop").trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(120)
        names = internals.source_names(query, re.compile(r"reactive_streams_\w+"))
    finally:
        query.stop()
    assert names == {"reactive_streams_splits"}


def test_parse_ddl_parses_a_struct(spark: SparkSession) -> None:
    parsed = internals.parse_ddl("id long, name string")
    assert isinstance(parsed, StructType)
    assert parsed.fields[0].dataType == LongType()


def test_result_arrow_schema_is_the_schema_of_to_arrow(spark: SparkSession) -> None:
    frame = spark.sql(
        "SELECT 'a' AS s, CAST(1 AS BIGINT) AS n, 0.5D AS d, "
        "TIMESTAMP '2013-01-01 05:00:00' AS ts, DATE '2013-01-01' AS day"
    )
    schema = internals.result_arrow_schema(frame)
    assert schema.equals(frame.toArrow().schema)
    assert schema.field("ts").type == pa.timestamp("us", tz="UTC")


def test_executor_count_is_zero_on_a_local_master(spark: SparkSession) -> None:
    assert internals.executor_count(spark) == 0


def test_driver_jvm_pid_is_a_java_process(spark: SparkSession) -> None:
    pid = internals.driver_jvm_pid(spark)
    comm = Path(f"/proc/{pid}/comm")
    if not comm.parent.exists():
        pytest.skip("no /proc on this platform")
    assert comm.read_text().strip() == "java"


def test_gateway_process_is_the_driver_jvm_pyspark_launched(spark: SparkSession) -> None:
    process = internals.gateway_process()
    assert process is not None, "PySpark launched the JVM of the test session"
    assert process.poll() is None
    assert process.pid == internals.driver_jvm_pid(spark)


def test_accumulator_server_is_a_socketserver_of_this_process(spark: SparkSession) -> None:
    import socketserver

    server = internals.accumulator_server()
    assert isinstance(server, socketserver.BaseServer)
    assert callable(server.handle_error)  # what the pipeline replaces to quiet it
    assert spark.sparkContext.accumulator(0) is not None


def test_file_scan_columns_are_what_column_pruning_keeps_per_scan(
    spark: SparkSession, tmp_path: Path
) -> None:
    frame = spark.read.schema("a long, b string, c double, d long").parquet(str(tmp_path))
    frame.createOrReplaceTempView("scanned")
    try:
        projected = internals.file_scan_columns(spark.sql("SELECT a FROM scanned WHERE c > 0"))
        # A scalar subquery is a scan of its own (found under adaptive execution too).
        nested = internals.file_scan_columns(
            spark.sql("SELECT b FROM scanned WHERE a > (SELECT max(d) FROM scanned)")
        )
        everything = internals.file_scan_columns(spark.sql("SELECT * FROM scanned"))
    finally:
        spark.catalog.dropTempView("scanned")
    assert projected is not None
    assert [sorted(scan) for scan in projected] == [["a", "c"]]
    assert nested is not None
    assert {tuple(sorted(scan)) for scan in nested} == {("a", "b"), ("d",)}
    assert everything == [["a", "b", "c", "d"]]
    assert internals.file_scan_columns(spark.range(3)) is None  # no file source


def test_query_context_loggers_get_each_converted_error_with_a_query_context(
    spark: SparkSession,
) -> None:
    from pyspark.errors import AnalysisException

    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    keep = Keep()
    loggers = internals.query_context_loggers()
    assert [logger.name for logger in loggers] == [
        "SQLQueryContextLogger",
        "DataFrameQueryContextLogger",
    ]
    for logger in loggers:
        logger.addHandler(keep)
    try:
        with pytest.raises(AnalysisException):
            spark.sql("SELECT no_such_column FROM range(1)")
    finally:
        for logger in loggers:
            logger.removeHandler(keep)
    (record,) = seen
    assert record.name == "SQLQueryContextLogger"
    assert record.levelno == logging.ERROR
    assert "no_such_column" in record.getMessage()
    assert record.exc_info is not None  # the Java stack trace comes with it


_START_CONTEXT = """
import os, sys
from pathlib import Path
from pyspark import SparkConf
from reactive_streams.spark import _pyspark_internals as internals

log = Path(sys.argv[1])
conf = SparkConf().setMaster("local[1]").setAppName("start-context")
conf.set("spark.ui.enabled", "false")
with log.open("ab") as stderr:
    context = internals.start_context(conf, stderr=stderr, own_process_group=True)
process = internals.gateway_process()
assert process is not None
assert process.pid == internals.jvm(context).java.lang.ProcessHandle.current().pid()
assert os.getpgid(process.pid) == process.pid != os.getpgid(0)  # a group of its own
internals.jvm(context).java.lang.System.err.println("marker from the JVM")
assert context.parallelize(range(10)).sum() == 45
context.stop()
print("done")
"""


@pytest.mark.timeout(300)
def test_start_context_launches_the_jvm_with_its_stderr_and_process_group(
    tmp_path: Path,
) -> None:
    # A fresh process: this one's JVM was launched already.
    log = tmp_path / "jvm.log"
    done = subprocess.run(
        [sys.executable, "-c", _START_CONTEXT, str(log)],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "done\n"
    assert "marker from the JVM" in log.read_text()
    assert "marker from the JVM" not in done.stderr


QUERIES = [
    "SELECT id FROM range(3)",
    "WITH t AS (SELECT 1 AS x) SELECT x FROM t",
    "TABLE parsed_only",
    "VALUES (1), (2)",
    "FROM range(3) SELECT id",
    "(SELECT 1) UNION (SELECT 2)",
    "SELECT id FROM range(3) ORDER BY id LIMIT 2",
    "SELECT * FROM range(3) |> WHERE id > 1",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_parse_query_parses_a_query_without_looking_anything_up(
    spark: SparkSession, sql: str
) -> None:
    assert internals.parse_query(spark, sql) == internals.statement_kind(spark, sql)


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("INSERT OVERWRITE DIRECTORY '{dir}' USING csv SELECT 'x' AS x", "InsertIntoDir"),
        ("CREATE TABLE parsed_only USING parquet LOCATION '{dir}' AS SELECT 1 AS x",
         "CreateTableAsSelect"),
        ("CACHE TABLE parsed_only AS SELECT 1", "CacheTableAsSelect"),
        ("SET spark.sql.ansi.enabled = false", "SetCommand"),
        ("EXPLAIN SELECT 1", "ExplainCommand"),
        ("BEGIN SELECT 1; END", "CompoundBody"),
    ],
)  # fmt: skip
def test_parse_query_refuses_every_other_statement_and_runs_none(
    spark: SparkSession, tmp_path: Path, sql: str, kind: str
) -> None:
    from pyspark.errors import ParseException

    kept = tmp_path / "kept.txt"
    kept.write_text("still here")
    text = sql.format(dir=tmp_path)
    with pytest.raises(ParseException):
        internals.parse_query(spark, text)
    with pytest.raises(ParseException):
        internals.query_dataframe(spark, text)
    assert internals.statement_kind(spark, text) == kind
    assert [path.name for path in tmp_path.iterdir()] == ["kept.txt"]  # nothing ran
    assert not spark.catalog.tableExists("parsed_only")


@pytest.mark.parametrize(
    "sql", ["SELEC 1", "SELECT 1 FROM range(1) )", "SELECT 1; SELECT 2", "SELECT 1 x y"]
)
def test_parse_query_and_statement_kind_refuse_what_does_not_parse(
    spark: SparkSession, sql: str
) -> None:
    from pyspark.errors import ParseException

    with pytest.raises(ParseException):
        internals.parse_query(spark, sql)
    with pytest.raises(ParseException):
        internals.statement_kind(spark, sql)


def test_query_dataframe_is_spark_sql_for_a_query(spark: SparkSession) -> None:
    from pyspark.errors import AnalysisException

    sql = "SELECT id * 2 AS twice FROM parsed_view"
    with pytest.raises(AnalysisException):
        internals.query_dataframe(spark, sql)  # no such view yet
    spark.range(3).createOrReplaceTempView("parsed_view")
    try:
        frame = internals.query_dataframe(spark, sql)
        assert frame.columns == ["twice"]
        assert not frame.isStreaming
        assert [row.twice for row in frame.collect()] == [0, 2, 4]
        ids = re.compile(r"#\d+")  # expression ids differ from one analysis to the next
        assert ids.sub("#", internals.analyzed_plan(frame)) == ids.sub(
            "#", internals.analyzed_plan(spark.sql(sql))
        )
    finally:
        spark.catalog.dropTempView("parsed_view")


def _streaming_events(spark: SparkSession, directory: Path) -> None:
    frame = spark.readStream.schema("sensor string, event_time timestamp, value double")
    frame.parquet(str(directory)).createOrReplaceTempView("late_events")


@pytest.mark.parametrize(
    ("group_by", "expected"),
    [
        ("sensor, window(event_time, '5 minutes')", ("event_time", "window")),
        ("window(event_time, '10 minutes', '5 minutes'), sensor", ("event_time", "window")),
        ("event_time", ("event_time", "time")),
        ("sensor, session_window(event_time, '5 minutes')", None),  # not followed
        ("sensor", None),  # no group by the event time: Spark drops nothing as late
    ],
)
def test_watermark_grouping_reads_the_watermark_and_the_aggregations_event_time(
    spark: SparkSession, tmp_path: Path, group_by: str, expected: tuple[str, str] | None
) -> None:
    _streaming_events(spark, tmp_path)
    sql = (
        "SELECT count(*) AS n FROM late_events WATERMARK event_time DELAY OF INTERVAL "
        f"10 MINUTES GROUP BY {group_by}"
    )
    try:
        frame = internals.query_dataframe(spark, sql)
        assert internals.watermark_grouping(frame, "late_events") == expected
        joined = internals.query_dataframe(
            spark,
            "SELECT count(*) FROM late_events WATERMARK event_time DELAY OF INTERVAL 10 MINUTES "
            "JOIN late_events AS other USING (sensor) GROUP BY window(late_events.event_time, "
            "'5 minutes')",
        )
        assert internals.watermark_grouping(joined, "late_events") is None  # a join
    finally:
        spark.catalog.dropTempView("late_events")


def test_window_calls_read_windows_literal_arguments_as_microseconds(
    spark: SparkSession,
) -> None:
    minute = 60_000_000
    sql = (
        "SELECT 1 FROM a GROUP BY window(t, '1 hour') UNION ALL "
        "SELECT 1 FROM b GROUP BY window(b.t, '10 minutes', '5 minutes', 60000000) UNION ALL "
        "SELECT 1 FROM c GROUP BY window(t, concat('1', ' hour'))"
    )
    calls = internals.window_calls(spark, sql)
    assert sorted(calls, key=str) == sorted(
        [("t", 60 * minute, 60 * minute, 0), ("t", 10 * minute, 5 * minute, minute), None],
        key=str,
    )
    assert internals.window_calls(spark, "SELECT 1 FROM a GROUP BY window(t, '1 day')") == [
        ("t", 1_440 * minute, 1_440 * minute, 0)
    ]


def test_query_references_reads_relations_ctes_and_calls_subqueries_included(
    spark: SparkSession,
) -> None:
    sql = (
        "WITH early AS (SELECT * FROM events WHERE dep_delay < 0), "
        "lookup AS (SELECT * FROM parquet.`/data/x`) "
        "SELECT reflect('java.lang.Thread', 'currentThread'), "
        "(SELECT max(a) FROM csv.`/in/sub`) AS m "
        "FROM early JOIN range(3) "
        "WHERE EXISTS (SELECT 1 FROM airlines WHERE upper(code) = 'AA') "
        "AND id IN (SELECT id FROM read_files('/etc'))"
    )
    found = internals.query_references(spark, sql)
    assert sorted(found.relations) == [
        ("airlines",), ("csv", "/in/sub"), ("early",), ("events",), ("parquet", "/data/x")
    ]  # fmt: skip
    assert found.ctes == frozenset({"early", "lookup"})
    assert sorted(found.table_functions) == ["range", "read_files"]
    assert {"reflect", "max", "upper"} <= set(found.functions)
