"""Every private PySpark API the package touches, in one place.

PySpark's public API has no way to do these things, so the bridges reach under it. Each
function below states the assumption it makes about PySpark's internals, and
``tests/spark/test_pyspark_internals.py`` checks each one against the installed version
(PySpark 4.3 when written), so an upgrade that moves one fails one named test instead of a
bridge at run time.

Assumptions, one per function:

* ``active_context``: ``SparkContext._active_spark_context`` holds the process's context
  (or ``None``), whichever thread created it.
* ``jvm``: ``SparkContext._jvm`` is the py4j view of the driver JVM.
* ``arrow_batch_messages``: ``DataFrame._jdf.toArrowBatchRdd()`` and
  ``PythonRDD.toLocalIteratorAndServe(rdd, prefetch)`` serve one Arrow IPC record batch
  message per element, one job per partition, read with ``_local_iterator_from_socket``.
* ``analyzed_plan``: ``DataFrame._jdf.queryExecution().analyzed()`` is the analyzed plan.
* ``plan_aggregates``: that plan is a tree of ``LogicalPlan`` nodes (``children()``), and a
  ``GROUP BY`` or a global aggregate is a node of class ``Aggregate``.
* ``file_scan_columns``: ``DataFrame._jdf.queryExecution().executedPlan()`` is a tree of
  ``SparkPlan`` nodes (``children()``, ``subqueries()``; adaptive execution wraps it in an
  ``AdaptiveSparkPlanExec`` whose ``inputPlan()`` is the plan), and a batch read of a file
  source is a ``FileSourceScanExec`` whose ``requiredSchema()`` is the columns Spark's
  column pruning kept (those the query's projections and filters reference).
* ``streaming_plan`` / ``source_names``: ``StreamingQuery._jsq.streamingQuery().logicalPlan()``
  is the query's plan, and its text names each Python data source by its registered name.
* ``parse_ddl``: ``pyspark.sql.types._parse_datatype_string`` parses a DDL string.
* ``result_arrow_schema``: ``pyspark.sql.pandas.types.to_arrow_schema(schema,
  timezone="UTC", prefers_large_types=...)`` is the schema ``DataFrame.toArrow`` gives a
  DataFrame's rows (``spark.sql.execution.arrow.useLargeVarTypes`` picks the large types).
* ``executor_count``: ``_jsc.sc().getExecutorMemoryStatus()`` has one entry per block
  manager: the driver's plus one per executor.
* ``driver_jvm_pid``: the driver JVM answers ``java.lang.ProcessHandle.current().pid()``.
* ``gateway_process``: when PySpark launched the driver JVM itself, it keeps the JVM's
  ``subprocess.Popen`` on ``SparkContext._gateway.proc``.
* ``accumulator_server``: the running context keeps its accumulator server (a
  ``socketserver.TCPServer`` in this process) on ``_accumulatorServer``.
* ``query_context_loggers``: PySpark logs every JVM error it converts whose error has a
  query context (an ``AnalysisException`` naming a column, an ANSI error at run time) with
  ``logger.exception`` on the ``PySparkLogger`` named ``SQLQueryContextLogger`` (the query
  came from SQL text) or ``DataFrameQueryContextLogger`` (from the DataFrame API); each
  was made with a ``StreamHandler`` on stderr, and does not propagate.
* ``parse_query`` / ``statement_kind`` / ``query_dataframe``: a classic session's
  ``_jsparkSession.sessionState().sqlParser()`` is the parser ``spark.sql`` uses; its
  ``parseQuery(text)`` parses the whole text as one query (the grammar's ``query`` rule,
  to the end of the text) and raises ``ParseException`` for anything else, and its
  ``parsePlan(text)`` parses any one statement, without running either; and
  ``org.apache.spark.sql.classic.Dataset.ofRows(session, plan)`` analyses a parsed plan
  into the DataFrame ``spark.sql`` would return (``spark.sql`` is ``parsePlan`` then
  ``ofRows``, which runs a command at once).
* ``watermark_grouping``: an analyzed logical plan is a tree of ``LogicalPlan`` nodes
  (``children()``) named by their class (``EventTimeWatermark``, ``Aggregate``, ``Join``,
  ``Deduplicate``...); an ``EventTimeWatermark`` has ``eventTime()`` (the attribute) and
  ``child()``, a view's rows are read under a ``SubqueryAlias`` whose ``alias()`` is the
  view's name; an ``Aggregate``'s ``groupingExpressions()`` are ``AttributeReference``
  values whose ``metadata()`` carries ``spark.watermarkDelayMs`` when they are the event
  time, and ``spark.timeWindow`` as well when they are the struct ``window(...)`` made.
* ``query_references``: a parsed plan (``parseQuery``) names what it reads as
  ``UnresolvedRelation`` nodes (``multipartIdentifier()``, a ``Seq`` of names: a path read
  as ``text.`/etc/hostname``` is the two names ``text`` and the path) and
  ``UnresolvedTableValuedFunction`` nodes (``name()``); a ``WITH`` is an ``UnresolvedWith``
  node whose ``cteRelations()`` is a ``Seq`` of ``(name, plan)`` tuples that are not among
  its ``children()``; a subquery in an expression (``ScalarSubquery``, ``Exists``,
  ``ListQuery``, ``LateralSubquery``, ``FunctionTableSubqueryArgumentExpression``) holds
  its plan in ``plan()``, not among the expression's ``children()``; and a function call
  is an ``UnresolvedFunction`` with ``nameParts()``, a column an ``UnresolvedAttribute``
  with ``nameParts()``.
* ``window_calls``: in a parsed plan (``parseQuery``), each node's ``expressions()`` are
  expression trees (``children()``), a function call is an ``UnresolvedFunction`` with
  ``nameParts()`` and ``arguments()``, a column an ``UnresolvedAttribute`` with
  ``nameParts()``, and a constant a ``Literal`` with ``value()`` and ``dataType()``; and
  ``IntervalUtils.stringToInterval`` parses an interval string as ``window`` does into a
  ``CalendarInterval`` with the fields ``months``, ``days`` and ``microseconds``.
* ``start_context``: ``pyspark.java_gateway.launch_gateway(conf, popen_kwargs)`` starts the
  driver JVM with ``spark-submit`` as ``SparkContext`` would, passing ``popen_kwargs`` on
  to ``subprocess.Popen`` (it sets ``stdin``, ``env`` and ``preexec_fn`` itself, and keeps
  the process on the gateway's ``proc``), and ``SparkContext(conf=..., gateway=...)``
  builds the context on that gateway instead of launching another JVM.
"""

from __future__ import annotations

import socketserver
import subprocess
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.logger import PySparkLogger
from pyspark.serializers import NoOpSerializer
from pyspark.sql import DataFrame
from pyspark.sql.types import DataType, _parse_datatype_string
from pyspark.util import _local_iterator_from_socket

if TYPE_CHECKING:
    import logging
    import re
    from collections.abc import Iterator

    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = [
    "accumulator_server",
    "active_context",
    "analyzed_plan",
    "arrow_batch_messages",
    "driver_jvm_pid",
    "executor_count",
    "result_arrow_schema",
    "file_scan_columns",
    "gateway_process",
    "jvm",
    "parse_ddl",
    "parse_query",
    "plan_aggregates",
    "query_context_loggers",
    "query_dataframe",
    "query_references",
    "source_names",
    "start_context",
    "statement_kind",
    "streaming_plan",
    "watermark_grouping",
    "window_calls",
]


def active_context() -> SparkContext | None:
    """This process's SparkContext, whichever thread created it, or ``None``."""
    return SparkContext._active_spark_context


def jvm(spark: SparkSession | SparkContext) -> Any:
    """The py4j gateway view of the driver JVM (``SparkContext._jvm``).

    Raises:
        RuntimeError: the context is stopped.
    """
    context = spark if isinstance(spark, SparkContext) else spark.sparkContext
    gateway = context._jvm
    if gateway is None:
        raise RuntimeError("the SparkContext is stopped: no JVM to talk to")
    return gateway


def arrow_batch_messages(dataframe: DataFrame, *, prefetch_partitions: bool) -> Iterator[bytes]:
    """The DataFrame's rows as Arrow IPC record batch messages, one job per partition, lazily.

    Closing the iterator tells the JVM to start no further partition job.
    """
    served = jvm(dataframe.sparkSession).PythonRDD.toLocalIteratorAndServe(
        dataframe._jdf.toArrowBatchRdd(), prefetch_partitions
    )
    messages: Iterator[bytes] = _local_iterator_from_socket(served, NoOpSerializer())
    return messages


def analyzed_plan(dataframe: DataFrame) -> str:
    """The text of the DataFrame's analyzed logical plan."""
    return str(dataframe._jdf.queryExecution().analyzed().toString())


def plan_aggregates(dataframe: DataFrame) -> bool:
    """Whether the DataFrame's analyzed plan aggregates: an ``Aggregate`` node in its tree.

    A ``GROUP BY`` (windowed or not) or a global aggregate (``SELECT count(*)``) is one;
    an aggregate inside a subquery expression is not looked at. Nothing runs.
    """
    pending = [dataframe._jdf.queryExecution().analyzed()]
    while pending:
        node = pending.pop()
        if node.getClass().getSimpleName() == "Aggregate":
            return True
        children = node.children()
        pending.extend(children.apply(index) for index in range(children.size()))
    return False


def _nodes(plan: Any) -> Iterator[Any]:
    """Every node of a physical plan, its subqueries' and adaptive execution's included."""
    pending = [plan]
    while pending:
        node = pending.pop()
        yield node
        if node.getClass().getSimpleName() == "AdaptiveSparkPlanExec":
            pending.append(node.inputPlan())
        for group in (node.children(), node.subqueries()):
            pending.extend(group.apply(index) for index in range(group.size()))


def file_scan_columns(dataframe: DataFrame) -> list[list[str]] | None:
    """The columns each file source scan of a batch DataFrame's physical plan reads.

    One list per ``FileSourceScanExec`` (its ``requiredSchema``: what column pruning
    kept), in no particular order (a subquery's scan may be listed twice); ``None`` when
    the plan has no such scan (a source of another kind, such as a DataSource V2 one).
    Plans the query (no job runs).

    Raises:
        Exception: the query does not analyze or plan (py4j's or PySpark's error).
    """
    plan = dataframe._jdf.queryExecution().executedPlan()
    scans = [
        [str(name) for name in node.requiredSchema().fieldNames()]
        for node in _nodes(plan)
        if node.getClass().getSimpleName() == "FileSourceScanExec"
    ]
    return scans or None


def streaming_plan(query: StreamingQuery) -> str:
    """The text of a running streaming query's logical plan."""
    return str(query._jsq.streamingQuery().logicalPlan().toString())


def source_names(query: StreamingQuery, pattern: re.Pattern[str]) -> set[str]:
    """The registered data source names matching ``pattern`` that the query's plan reads."""
    return set(pattern.findall(streaming_plan(query)))


def _sql_parser(spark: SparkSession) -> Any:
    return spark._jsparkSession.sessionState().sqlParser()


def parse_query(spark: SparkSession, sql: str) -> str:
    """Parse ``sql`` as one query (``SELECT``, ``WITH``, ``VALUES``, ``TABLE``...).

    The session's own parser, the one ``spark.sql`` uses, with the session's settings;
    no table is looked up and nothing runs.

    Returns:
        The class of the query plan's top node (``"Project"``, ``"Aggregate"``...).

    Raises:
        pyspark.errors.ParseException: ``sql`` is not one query: a syntax error, more
            than one statement, or a statement of another kind (``INSERT``,
            ``CREATE TABLE ... AS SELECT``, ``SET``...; see ``statement_kind``).
    """
    return str(_sql_parser(spark).parseQuery(sql).getClass().getSimpleName())


def statement_kind(spark: SparkSession, sql: str) -> str:
    """The kind of statement ``sql`` is, as the class of the plan Spark's parser makes.

    E.g. ``"InsertIntoDir"``, ``"CreateTableAsSelect"``, ``"SetCommand"``; a query gives
    its top node (``"Project"``, ``"Aggregate"``...). Parsed only, never run.

    Raises:
        pyspark.errors.ParseException: ``sql`` is not one statement Spark can parse.
    """
    return str(_sql_parser(spark).parsePlan(sql).getClass().getSimpleName())


def query_dataframe(spark: SparkSession, sql: str) -> DataFrame:
    """``spark.sql(sql)`` for a query only: parsed as one (``parse_query``), then analysed.

    ``spark.sql`` runs any other statement at once (an ``INSERT OVERWRITE DIRECTORY``
    replaces the directory's files) before the caller can look at its result; this never
    does. For a query, no job runs (the DataFrame is lazy). Each call parses the text
    anew: Spark marks a parsed plan whose analysis failed, and will not analyse it again.

    Raises:
        pyspark.errors.ParseException: ``sql`` is not one query (see ``parse_query``).
        pyspark.errors.AnalysisException: the query does not resolve (an unknown table,
            view, column or function).
    """
    plan = _sql_parser(spark).parseQuery(sql)
    datasets = jvm(spark).org.apache.spark.sql.classic.Dataset
    return DataFrame(datasets.ofRows(spark._jsparkSession, plan), spark)


def _plan_nodes(plan: Any) -> Iterator[Any]:
    """Every node of a logical plan (``children()``), the root first."""
    pending = [plan]
    while pending:
        node = pending.pop()
        yield node
        children = node.children()
        pending.extend(children.apply(index) for index in range(children.size()))


def _expression_nodes(expression: Any) -> Iterator[Any]:
    """Every node of an expression tree (``children()``), the root first."""
    return _plan_nodes(expression)


def _seq(values: Any) -> list[Any]:
    return [values.apply(index) for index in range(values.size())]


_STATEFUL_OTHERS = frozenset(
    {
        "Deduplicate",
        "DeduplicateWithinWatermark",
        "FlatMapGroupsWithState",
        "FlatMapGroupsInPandasWithState",
        "Join",
        "TransformWithState",
        "TransformWithStateInPySpark",
        "Union",
    }
)


def watermark_grouping(dataframe: DataFrame, view: str) -> tuple[str, str] | None:
    """How a streaming query over ``view`` drops late rows, when that is simple to tell.

    Simple means: one watermark, set on a column of ``view`` as it is read (not on a
    column computed from it), and one aggregation grouped by that event time, either the
    column itself or a ``window(...)`` over it; nothing else stateful (no join, no
    deduplication, no session window, no union). Spark then drops a row as late when its
    group's event time (the column, or the window's end) is at or before the watermark.

    Returns:
        ``(column, "time")`` or ``(column, "window")``; ``None`` for any other plan.
    """
    plan = dataframe._jdf.queryExecution().analyzed()
    watermarks, aggregates = [], []
    for node in _plan_nodes(plan):
        kind = str(node.getClass().getSimpleName())
        if kind in _STATEFUL_OTHERS:
            return None
        if kind == "EventTimeWatermark":
            watermarks.append(node)
        elif kind == "Aggregate":
            aggregates.append(node)
    if len(watermarks) != 1 or len(aggregates) != 1:
        return None
    watermark = watermarks[0]
    child = watermark.child()
    if str(child.getClass().getSimpleName()) != "SubqueryAlias" or str(child.alias()) != view:
        return None
    event_time = watermark.eventTime()
    keys = []
    for expression in _seq(aggregates[0].groupingExpressions()):
        if str(expression.getClass().getSimpleName()) != "AttributeReference":
            continue
        metadata = expression.metadata()
        if not metadata.contains("spark.watermarkDelayMs"):
            continue
        if expression.exprId().id() == event_time.exprId().id():
            keys.append("time")
        elif metadata.contains("spark.timeWindow") and str(expression.name()) == "window":
            keys.append("window")
        else:  # a session window, or an event time computed from another column
            return None
    if len(keys) != 1:
        return None
    return str(event_time.name()), keys[0]


def _interval_micros(spark: SparkSession, literal: Any) -> int | None:
    """A ``window`` argument in microseconds, as ``window`` reads it; ``None``: not a literal."""
    if str(literal.getClass().getSimpleName()) != "Literal":
        return None
    kind = str(literal.dataType().typeName())
    value = literal.value()
    if kind in ("integer", "long"):
        return int(value)
    if kind != "string":
        return None
    from py4j.java_gateway import get_field  # noqa: PLC0415

    machine = jvm(spark)
    text = machine.org.apache.spark.unsafe.types.UTF8String.fromString(str(value))
    interval = machine.org.apache.spark.sql.catalyst.util.IntervalUtils.stringToInterval(text)
    if int(get_field(interval, "months")) != 0:
        return None  # months have no fixed length: window refuses them
    return int(get_field(interval, "days")) * 86_400_000_000 + int(
        get_field(interval, "microseconds")
    )


_SUBQUERY_EXPRESSIONS = frozenset(
    {
        "Exists",
        "FunctionTableSubqueryArgumentExpression",
        "LateralSubquery",
        "ListQuery",
        "ScalarSubquery",
    }
)


@dataclass(frozen=True, slots=True)
class QueryReferences:
    """What a query names, read off its parsed plan, nothing resolved or run.

    Attributes:
        relations: each table, view or path it reads, as its name parts
            (``("events",)``, ``("text", "/etc/hostname")``), in no particular order.
        ctes: the names its ``WITH`` clauses define (they are read as relations too).
        table_functions: each table-valued function it calls (``range``, ``read_files``),
            lower case.
        functions: each function it calls, by its last name part, lower case.
        columns: every part of every column name it names, lower case (``e.origin``:
            ``e`` and ``origin``; a struct field's name is among them too).
    """

    relations: tuple[tuple[str, ...], ...]
    ctes: frozenset[str]
    table_functions: tuple[str, ...]
    functions: tuple[str, ...]
    columns: frozenset[str]


def query_references(spark: SparkSession, sql: str) -> QueryReferences:
    """The relations, ``WITH`` names and functions ``sql`` names, subqueries included.

    Raises:
        pyspark.errors.ParseException: ``sql`` is not one query.
    """
    relations: list[tuple[str, ...]] = []
    ctes: set[str] = set()
    table_functions: list[str] = []
    functions: list[str] = []
    columns: set[str] = set()
    pending = [_sql_parser(spark).parseQuery(sql)]
    while pending:
        for node in _plan_nodes(pending.pop()):
            kind = str(node.getClass().getSimpleName())
            if kind == "UnresolvedRelation":
                relations.append(tuple(str(part) for part in _seq(node.multipartIdentifier())))
            elif kind == "UnresolvedTableValuedFunction":
                table_functions.append(str(_seq(node.name())[-1]).lower())
            elif kind == "UnresolvedWith":
                for relation in _seq(node.cteRelations()):
                    ctes.add(str(relation._1()).lower())
                    pending.append(relation._2())
            for root in _seq(node.expressions()):
                for expression in _expression_nodes(root):
                    name = str(expression.getClass().getSimpleName())
                    if name == "UnresolvedFunction":
                        functions.append(str(_seq(expression.nameParts())[-1]).lower())
                    elif name == "UnresolvedAttribute":
                        columns.update(str(part).lower() for part in _seq(expression.nameParts()))
                    elif name in _SUBQUERY_EXPRESSIONS:
                        pending.append(expression.plan())
    return QueryReferences(
        relations=tuple(relations),
        ctes=frozenset(ctes),
        table_functions=tuple(table_functions),
        functions=tuple(functions),
        columns=frozenset(columns),
    )


def window_calls(spark: SparkSession, sql: str) -> list[tuple[str, int, int, int] | None]:
    """Each ``window(column, duration[, slide[, start]])`` call in ``sql``, parsed only.

    Returns:
        Per call, in no particular order: ``(column, duration, slide, start)`` with the
        times in microseconds (``slide`` is ``duration`` when not given, ``start`` 0), or
        ``None`` for a call whose arguments are not a column and literals.

    Raises:
        pyspark.errors.ParseException: ``sql`` is not one query.
    """
    calls: list[tuple[str, int, int, int] | None] = []
    for node in _plan_nodes(_sql_parser(spark).parseQuery(sql)):
        for root in _seq(node.expressions()):
            for expression in _expression_nodes(root):
                if str(expression.getClass().getSimpleName()) != "UnresolvedFunction":
                    continue
                names = [str(part).lower() for part in _seq(expression.nameParts())]
                if names[-1:] != ["window"]:
                    continue
                arguments = _seq(expression.arguments())
                if not 2 <= len(arguments) <= 4:
                    calls.append(None)
                    continue
                column = arguments[0]
                if str(column.getClass().getSimpleName()) != "UnresolvedAttribute":
                    calls.append(None)
                    continue
                times = [_interval_micros(spark, argument) for argument in arguments[1:]]
                known = [value for value in times if value is not None]
                if len(known) != len(times):
                    calls.append(None)
                    continue
                duration = known[0]
                slide = known[1] if len(known) > 1 else duration
                start = known[2] if len(known) > 2 else 0
                name = str(_seq(column.nameParts())[-1])
                calls.append((name, duration, slide, start))
    return calls


def parse_ddl(schema: str) -> DataType:
    """Parse a DDL type string (``"id long, name string"``) as Spark does.

    Needs a running SparkContext (the parser is the JVM's).
    """
    return _parse_datatype_string(schema)


def result_arrow_schema(dataframe: DataFrame) -> Any:
    """The Arrow schema of ``dataframe.toArrow()`` (a micro-batch's), without running it.

    Timestamps come with the time zone ``"UTC"``, as ``toArrow`` gives them.
    """
    from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415

    large = dataframe.sparkSession.conf.get("spark.sql.execution.arrow.useLargeVarTypes")
    return to_arrow_schema(
        dataframe.schema,
        error_on_duplicated_field_names_in_struct=True,
        timezone="UTC",
        prefers_large_types=str(large).lower() == "true",
    )


def executor_count(spark: SparkSession) -> int:
    """Executors registered with the driver now (0 with a ``local[*]`` master)."""
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
    return int(status.size()) - 1  # minus the driver's own block manager


def driver_jvm_pid(spark: SparkSession) -> int:
    """The process id of the driver JVM."""
    return int(jvm(spark).java.lang.ProcessHandle.current().pid())


def gateway_process() -> subprocess.Popen[bytes] | None:
    """The driver JVM's process, if PySpark launched it (``SparkContext._gateway.proc``).

    ``None`` when no context ever started, or the JVM was started some other way
    (``PYSPARK_GATEWAY_PORT``): PySpark then has no process to keep.
    """
    gateway: Any = getattr(SparkContext, "_gateway", None)
    process = getattr(gateway, "proc", None)
    return process if isinstance(process, subprocess.Popen) else None


def accumulator_server() -> socketserver.BaseServer | None:
    """The running context's accumulator server (``_accumulatorServer``), or ``None``."""
    server = getattr(SparkContext._active_spark_context, "_accumulatorServer", None)
    return server if isinstance(server, socketserver.BaseServer) else None


_QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def query_context_loggers() -> tuple[logging.Logger, ...]:
    """The loggers PySpark logs converted JVM errors with a query context on.

    Each such error is logged (a JSON line on stderr by default, its message and the whole
    Java stack trace, often 10 KB or more) when PySpark builds the Python exception, before
    any caller can catch it. The loggers are made here if PySpark has not made them yet,
    as PySpark makes them (``PySparkLogger``, whose ``exception`` takes keyword context).
    """
    return tuple(PySparkLogger.getLogger(name) for name in _QUERY_CONTEXT_LOGGERS)


def start_context(
    conf: SparkConf, *, stderr: IO[bytes] | None = None, own_process_group: bool = False
) -> SparkContext:
    """Build the process's ``SparkContext``, launching its JVM with these settings.

    PySpark launches the driver JVM (``spark-submit``, which execs ``java``) when the
    first ``SparkContext`` is built, sharing this process's stderr and process group, and
    keeps that JVM for later contexts after a ``stop``. This launches it the same way with
    the two settings below, then builds the context on it; a ``SparkSession.builder``
    then finds the context and uses it. When the JVM is up already (a stopped context's,
    or ``PYSPARK_GATEWAY_PORT``), the context is built on it and the settings do not apply.

    Args:
        conf: the context's configuration, master and application name included (passed
            to ``spark-submit`` as PySpark does).
        stderr: an open binary file for the JVM's standard error, for good (its log lines,
            Java stack traces, its own warnings, and the output of the Python workers it
            starts, which inherit it); ``None``: this process's stderr.
        own_process_group: start the JVM in a session and process group of its own
            (``setsid``), so that signals sent to this process's group (Ctrl-C in a
            terminal, ``kill -TERM -PGID``, an init that forwards signals to the group)
            reach this process only. The JVM still ends with this process (it exits when
            its standard input, a pipe from this process, closes).

    Returns:
        The new ``SparkContext``.

    Raises:
        ValueError: a context is running already.
        PySparkRuntimeError: the JVM exited before it answered (``JAVA_GATEWAY_EXITED``).
    """
    if SparkContext._active_spark_context is not None:
        raise ValueError("a SparkContext is running already")
    gateway = None
    if SparkContext._gateway is None:
        popen_kwargs: dict[str, Any] = {}
        if stderr is not None:
            popen_kwargs["stderr"] = stderr
        if own_process_group:
            popen_kwargs["start_new_session"] = True
        gateway = launch_gateway(conf, popen_kwargs=popen_kwargs)  # type: ignore[no-untyped-call,unused-ignore]
    return SparkContext(conf=conf, gateway=gateway)
