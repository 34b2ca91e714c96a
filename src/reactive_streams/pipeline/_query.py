"""The default query, and how a query's output mode and result keys are chosen.

The default query runs over the view ``events`` (the input stream): per ``origin`` airport
and per one-hour window of ``time_hour`` (UTC), the number of flights, the cancelled ones
(no ``dep_time``), and the mean and maximum departure delay. It has no watermark, so no
row is ever dropped as late, and it runs in update mode: each micro-batch carries the
groups it changed and the sink keeps the latest row per ``(origin, window_start,
window_end)``.

A query given with ``--sql`` runs in ``complete`` mode if it aggregates (each micro-batch
carries the whole result; the sink keeps the last) and in ``append`` mode otherwise (rows
are written through), unless ``--output-mode`` says otherwise; ``update`` needs ``--key``.

``--sql`` must be a query: ``check_query`` parses it with the session's own SQL parser
before anything reads, runs or is created, and refuses any other statement (``spark.sql``
would run an ``INSERT`` or a ``CREATE TABLE ... AS SELECT`` at once). The query may read
only ``events``, the ``--table`` views and its own ``WITH`` names, and may not call the
JVM: a query can come from hands less trusted than the process's, which may read any
file the process can and end its JVM (``java_method('java.lang.System', 'exit', 3)``).
``--allow-unsafe-sql`` lifts that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..spark.plans import plan_aggregates
from ._errors import PipelineUsageError, first_line

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame, SparkSession

    from ..spark.plans import QueryReferences
    from ._target import OutputMode

__all__ = [
    "DEFAULT_COLUMNS",
    "DEFAULT_KEYS",
    "DEFAULT_SQL",
    "EVENTS_VIEW",
    "OutputModeChoice",
    "SAFE_TABLE_FUNCTIONS",
    "UNSAFE_FUNCTIONS",
    "QueryPlan",
    "aggregates",
    "check_query",
    "choose_mode",
]

EVENTS_VIEW = "events"
"""The name of the input stream in SQL."""

DEFAULT_SQL = """\
SELECT origin,
       window.start AS window_start,
       window.end AS window_end,
       count(*) AS flights,
       count_if(dep_time IS NULL) AS cancelled,
       avg(dep_delay) AS avg_dep_delay,
       max(dep_delay) AS max_dep_delay
FROM events
GROUP BY origin, window(time_hour, '1 hour')"""
"""Per origin and hour of scheduled departure: flights, cancelled, mean and max delay."""

DEFAULT_KEYS = ("origin", "window_start", "window_end")
"""The columns that identify a group of the default query's result."""

DEFAULT_COLUMNS = (*DEFAULT_KEYS, "flights", "cancelled", "avg_dep_delay", "max_dep_delay")
"""The columns of the default query's result, in order."""

DEFAULT_REQUIRED_COLUMNS = ("origin", "time_hour", "dep_time", "dep_delay")
"""Columns the default query reads; an input without them needs ``--sql``."""

OutputModeChoice = Literal["auto", "append", "update", "complete"]


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryPlan:
    """The query to run and how its result is folded.

    Attributes:
        sql: the SQL text, over the view ``events``.
        mode: the streaming output mode.
        keys: the result's key columns (update mode), else empty.
        default: whether this is the default query.
    """

    sql: str
    mode: OutputMode
    keys: tuple[str, ...]
    default: bool


def choose_mode(
    sql: str | None,
    *,
    requested: OutputModeChoice,
    keys: Sequence[str],
    aggregates: bool | None,
    columns: Sequence[str],
) -> QueryPlan:
    """Decide the output mode and keys of a query.

    Args:
        sql: the user's query, or ``None`` for the default one.
        requested: ``--output-mode``; ``"auto"`` decides from the query.
        keys: ``--key`` columns.
        aggregates: whether the query aggregates (``None``: unknown, treated as no).
        columns: the input's columns (the default query needs some of them).

    Raises:
        PipelineUsageError: the default query on an input without its columns, update
            mode without keys, or keys given for another mode.
    """
    if sql is None:
        missing = [name for name in DEFAULT_REQUIRED_COLUMNS if name not in columns]
        if missing:
            raise PipelineUsageError(
                f"the default query needs the column(s) {', '.join(missing)} in the input; "
                "pass --sql with a query over the view `events`"
            )
        mode: OutputMode = "update" if requested == "auto" else requested
        chosen_keys = tuple(keys) or (DEFAULT_KEYS if mode == "update" else ())
        return QueryPlan(sql=DEFAULT_SQL, mode=mode, keys=chosen_keys, default=True)
    if requested == "auto":
        mode = "update" if keys else ("complete" if aggregates else "append")
    else:
        mode = requested
    if mode == "update" and not keys:
        raise PipelineUsageError(
            "--output-mode update needs the result's key columns: pass --key COLUMN (repeatable)"
        )
    if mode != "update" and keys:
        raise PipelineUsageError(f"--key only applies to --output-mode update, not {mode}")
    return QueryPlan(sql=sql, mode=mode, keys=tuple(keys), default=False)


def aggregates(frame: DataFrame) -> bool | None:
    """Whether a (classic) DataFrame's plan aggregates; ``None`` if it cannot be told."""
    try:
        return plan_aggregates(frame)
    except Exception:  # a Spark Connect frame has no JVM plan to read
        return None


UNSAFE_FUNCTIONS = frozenset({"java_method", "reflect", "try_reflect"})
"""SQL functions that call any Java method in the JVM (refused without
``--allow-unsafe-sql``)."""

SAFE_TABLE_FUNCTIONS = frozenset(
    {
        "explode",
        "explode_outer",
        "inline",
        "inline_outer",
        "json_tuple",
        "posexplode",
        "posexplode_outer",
        "range",
        "stack",
        "variant_explode",
        "variant_explode_outer",
    }
)
"""Table-valued functions that read nothing but their arguments (``read_files`` and any
other one is refused without ``--allow-unsafe-sql``)."""


def check_query(
    spark: SparkSession, sql: str, *, views: Sequence[str] = (), allow_unsafe: bool = False
) -> None:
    """Refuse ``sql`` unless Spark's own parser reads it as one safe query; nothing runs.

    Parsed with the session's parser (the one ``spark.sql`` uses, with its settings), so
    what passes is exactly what Spark accepts as a query; no table is looked up (the
    view ``events`` need not exist yet). Unless ``allow_unsafe``, the query may read only
    ``events``, ``views`` and its own ``WITH`` names (not a path such as
    ``text.`/etc/hostname``` or a catalog table), call no table function but generators
    and ``range``, and call none of ``UNSAFE_FUNCTIONS``.

    Args:
        spark: a classic session.
        sql: the query text.
        views: the other views the query may read (``--table`` names).
        allow_unsafe: ``--allow-unsafe-sql``: skip the checks on what the query reads
            and calls.

    Raises:
        PipelineUsageError: ``sql`` does not parse (with Spark's message), is a
            statement of another kind (``INSERT``, ``CREATE TABLE ... AS SELECT``,
            ``SET``...), named as Spark's parser names it, or reads or calls what is
            refused (named, with the option that allows it).
    """
    from pyspark.errors import ParseException  # noqa: PLC0415

    from reactive_streams.spark.plans import (  # noqa: PLC0415
        parse_query,
        query_references,
        statement_kind,
    )

    try:
        parse_query(spark, sql)
    except ParseException:
        pass
    else:
        if not allow_unsafe:
            _check_references(query_references(spark, sql), views)
        return
    try:
        kind = statement_kind(spark, sql)
    except ParseException as exc:
        raise PipelineUsageError(f"the query does not parse: {first_line(exc)}") from None
    raise PipelineUsageError(
        f"--sql must be a query over the view `{EVENTS_VIEW}` (SELECT ... FROM "
        f"{EVENTS_VIEW}), not another kind of statement: Spark parses it as {kind}, which "
        "spark.sql would run at once; nothing was run"
    )


def _check_references(references: QueryReferences, views: Sequence[str]) -> None:
    allowed = {EVENTS_VIEW, *(view.lower() for view in views), *references.ctes}
    refused = sorted(
        {
            ".".join(f"`{part}`" for part in parts)
            for parts in references.relations
            if len(parts) != 1 or parts[0].lower() not in allowed
        }
    )
    if refused:
        raise PipelineUsageError(
            f"--sql reads {', '.join(refused)}: a query may read only `{EVENTS_VIEW}`, the "
            "--table views and its own WITH names (a path or a catalog table reads with "
            "this process's rights); pass --allow-unsafe-sql to allow it"
        )
    calls = sorted(
        {name for name in references.table_functions if name not in SAFE_TABLE_FUNCTIONS}
        | {name for name in references.functions if name in UNSAFE_FUNCTIONS}
    )
    if calls:
        raise PipelineUsageError(
            f"--sql calls {', '.join(calls)}, which can read files or call the JVM with this "
            "process's rights; pass --allow-unsafe-sql to allow it"
        )
