"""The input columns a query reads, so ``--read-on executors`` sends Spark only those.

Spark ingests a Python data source's Arrow batches at a cost per row that grows with the
columns (``benchmarks/SPARK.md``), and a Python data source cannot be pruned by Spark's
optimizer the way its own Parquet source is. So before the stream starts, the query is
planned on the driver over an empty Parquet directory with the input's full schema
registered as ``events``, and the columns that Spark's column pruning keeps for that scan
(``file_scan_columns``) are the ones the executors send. Validation is unchanged: every
column of every record is still converted on the executor, so a bad value in a column the
query does not read still makes the record a dead letter.

The default query's columns are known (``DEFAULT_REQUIRED_COLUMNS``): it is not analysed,
which saves the analysis's cost (one to three seconds on a JVM that just started, a good
part of the gain at ten times the flights). Any failure of this analysis (a query that
does not parse, a streaming-only construct, a type the Parquet source refuses, an
unexpected plan) keeps every column: the optimisation never fails a run (the query itself
reports its own errors when it starts).

The query goes through ``query_dataframe`` (``spark.sql`` for a query only): a statement
of another kind is refused by the parser, never run (``spark.sql`` runs an ``INSERT`` or a
``CREATE TABLE ... AS SELECT`` at once, whatever the caller does with its result).
"""

from __future__ import annotations

import logging
import tempfile
from typing import TYPE_CHECKING

from ._errors import first_line
from ._query import DEFAULT_REQUIRED_COLUMNS, EVENTS_VIEW
from ._schema import spark_schema

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    from pyspark.sql import SparkSession

__all__ = ["query_columns", "stream_columns"]

logger = logging.getLogger("reactive_streams.pipeline")


def query_columns(spark: SparkSession, sql: str, schema: pa.Schema) -> tuple[str, ...]:
    """The columns of ``schema`` that ``sql`` (over the view ``events``) reads, in order.

    Planned over an empty Parquet directory (no job runs, no record is read); the view
    ``events`` is dropped afterwards. A query that reads no column (``count(*)``) keeps
    the first one, so the stream still has a column. ``sql`` is parsed as a query
    (``query_dataframe``): any other statement fails the analysis and is never run.

    Returns:
        A subset of ``schema.names`` in schema order: the columns the scan reads after
        pruning, and every column the query's text names (the stream's query is analysed
        before pruning, so a column a ``WITH`` clause names but nothing uses must exist);
        all of them when the query reads every column (``SELECT *``) or when the analysis
        failed for any reason (logged).
    """
    from reactive_streams.spark.plans import (  # noqa: PLC0415
        file_scan_columns,
        query_dataframe,
        query_references,
    )

    names = tuple(schema.names)
    try:
        with tempfile.TemporaryDirectory(prefix="reactive-streams-columns-") as empty:
            frame = spark.read.schema(spark_schema(schema)).parquet(empty)
            frame.createOrReplaceTempView(EVENTS_VIEW)
            try:
                scans = file_scan_columns(query_dataframe(spark, sql))
                named = query_references(spark, sql).columns
            finally:
                spark.catalog.dropTempView(EVENTS_VIEW)
    except Exception as exc:  # any failure: keep every column, never fail the run
        logger.info("the query's columns could not be found, all are sent: %s", first_line(exc))
        return names
    if scans is None:
        logger.info("the query's plan has no file scan: all columns are sent")
        return names
    # A column the text names must exist even where the optimizer prunes it (a WITH
    # clause's column the outer query does not use): the query is analysed again over
    # the stream, before any pruning.
    read = {name for scan in scans for name in scan}
    kept = tuple(name for name in names if name in read or name.lower() in named)
    logger.debug("the query reads %d of %d columns: %s", len(kept), len(names), kept)
    return kept or names[:1]


def stream_columns(spark: SparkSession, sql: str | None, schema: pa.Schema) -> tuple[str, ...]:
    """The columns of ``schema`` to send Spark for ``sql`` (``None``: the default query).

    The default query's are ``DEFAULT_REQUIRED_COLUMNS`` (``choose_mode`` checked that the
    input has them); any other query's come from ``query_columns``.
    """
    if sql is None:
        return tuple(name for name in schema.names if name in DEFAULT_REQUIRED_COLUMNS)
    return query_columns(spark, sql, schema)
