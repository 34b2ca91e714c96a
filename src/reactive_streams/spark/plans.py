"""Spark SQL read without running it: parse, classify, analyse, and read off a plan.

``spark.sql`` runs any statement that is not a query at once (an ``INSERT OVERWRITE
DIRECTORY`` replaces files before the caller can look at the result); these functions
parse first and never run anything. They need a classic (not Spark Connect) session: they
read the JVM's parser and plans through ``_pyspark_internals``, where each private access
has its contract test.

* ``parse_query`` / ``statement_kind``: is the text one query, and if not, what is it;
* ``query_dataframe``: ``spark.sql`` for a query only, analysed, lazy;
* ``file_scan_columns``: the columns each file scan of a batch plan reads;
* ``query_references``: the relations, ``WITH`` names and functions a query names (the
  main job's ``--sql`` check refuses paths and JVM calls with it);
* ``plan_aggregates``: whether a query aggregates (the main job's default output mode);
* ``result_arrow_schema``: the Arrow schema of a query's rows (a ``--sink`` table's columns);
* ``watermark_grouping`` / ``window_calls``: how a streaming aggregation judges rows late
  (the main job counts its late rows as input rows with them).

Example (needs a running session)::

    from reactive_streams.spark.plans import parse_query, statement_kind

    parse_query(spark, "SELECT 1")  # "Project"
    statement_kind(spark, "INSERT OVERWRITE DIRECTORY '/tmp/x' SELECT 1")  # "InsertIntoDir"
"""

from __future__ import annotations

from .._core import set_public_module
from ._pyspark_internals import (
    QueryReferences,
    file_scan_columns,
    parse_query,
    plan_aggregates,
    query_dataframe,
    query_references,
    result_arrow_schema,
    statement_kind,
    watermark_grouping,
    window_calls,
)

__all__ = [
    "QueryReferences",
    "file_scan_columns",
    "parse_query",
    "plan_aggregates",
    "query_dataframe",
    "query_references",
    "result_arrow_schema",
    "statement_kind",
    "watermark_grouping",
    "window_calls",
]

set_public_module(__name__, globals())
