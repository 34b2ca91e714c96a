"""``to_spark_stream``: any ``Publisher[dict]`` as a streaming DataFrame.

The publisher lives in this process; Spark's data source methods do not (they run in a
runner process the driver JVM starts per query). So this process serves a loopback bridge.
``SparkStreamBridge`` puts three parts together, one concept each:

* the demand window (``_bridge_window.DemandWindow``, which the bridge is): the subscriber,
  the rows held, and what each read or replay gets;
* the server (``_bridge_server.BridgeServer``): a TCP server bound to ``127.0.0.1`` on an
  ephemeral port that accepts only connections presenting the stream's random token, and
  one reader at a time;
* the query control (``_bridge_queries``): the data source's registered name (pooled, so
  closed streams leave no registration behind) and stopping the queries that drained.

The data source is a driver-side ``SimpleDataSourceStreamReader`` (see ``_stream_source``),
so executors never connect here and the bridge works unchanged on a cluster.

Demand: each micro-batch's ``read(start)`` asks for at most ``max_records_per_trigger``
elements; the bridge requests from the publisher only what is missing for that, so the
elements held here plus the outstanding demand never exceed ``max_records_per_trigger``.
``start`` acknowledges every element below it: Spark plans a batch from ``start`` only after
the batches below it were processed (it calls ``commit`` later still, while planning).
"""

from __future__ import annotations

import secrets
import sys
import threading
import uuid
from typing import TYPE_CHECKING, Any

from pyspark import cloudpickle
from pyspark.sql.types import StructType

from . import _bridge_queries, _stream_source
from ._bridge_server import BridgeServer
from ._bridge_window import DemandWindow, Element
from ._pyspark_internals import parse_ddl
from .session import require_classic

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    from pyspark.sql import DataFrame, SparkSession

    from ..api import Publisher

__all__ = ["Element", "SparkStreamBridge", "as_struct", "to_spark_stream", "to_spark_stream_bridge"]

# Spark's runner unpickles the data source; pickling its module by value means the runner
# (and, on a cluster, the driver host's Python) needs pyspark and pyarrow, not this package.
cloudpickle.register_pickle_by_value(sys.modules[_stream_source.__name__])  # type: ignore[no-untyped-call,unused-ignore]


class SparkStreamBridge(DemandWindow):
    """The loopback bridge of one ``to_spark_stream``: a subscriber here, a server for Spark.

    Create it with ``to_spark_stream_bridge``; ``dataframe`` is the streaming DataFrame.
    The publisher is subscribed when the first streaming query reads the stream (or when
    ``prefetch`` is called), not before, so a DataFrame that is never started consumes
    nothing.

    Backpressure: the bridge requests from the publisher only what the current micro-batch
    lacks, plus ``read_ahead_triggers`` whole triggers once a batch is handed to Spark.
    Rows: rows held plus outstanding demand never exceed
    ``max_records_per_trigger * (1 + read_ahead_triggers)``. Arrow (``arrow=True``): one
    batch is requested at a time, only while fewer rows than that are held, so at most one
    publisher batch more is held.

    Concurrency: publisher signals may come from any thread; Spark's reads arrive on one
    connection thread; the state is guarded by one condition, never held while the
    publisher or Spark is called.
    """

    def __init__(
        self,
        publisher: Publisher[Any],
        spark: SparkSession,
        schema: StructType,
        *,
        max_records_per_trigger: int,
        read_ahead_triggers: int = 0,
        arrow: bool = False,
        start_offset: int = 0,
    ) -> None:
        super().__init__(
            publisher,
            schema,
            stream_id=uuid.uuid4().hex,
            max_records_per_trigger=max_records_per_trigger,
            read_ahead_triggers=read_ahead_triggers,
            arrow=arrow,
            start_offset=start_offset,
        )
        self._spark = spark
        self._token = secrets.token_urlsafe(32)
        self._name_lock = threading.Lock()
        self._name_released = False
        self.format_name = _bridge_queries.take_format_name()
        server: BridgeServer | None = None
        try:
            server = BridgeServer(
                stream_id=self.stream_id,
                token=self._token,
                handler=self.handle,
                on_reader_gone=self.close,
                finished=lambda: self.finished,
            )
            self._server = server
            self.address: tuple[str, int] = server.address
            server.start()
            _bridge_queries.register(spark, self.format_name, self)
            self.dataframe: DataFrame = (
                spark.readStream.format(self.format_name)
                .schema(schema)
                .option("host", self.address[0])
                .option("port", str(self.address[1]))
                .option("token", self._token)
                .option("stream", self.stream_id)
                .option("max_records_per_trigger", str(max_records_per_trigger))
                .option("start_offset", str(start_offset))
                .load()
            )
        except BaseException:
            # Release what was acquired: the socket and its thread, the name (whose
            # registration, if made, the next stream replaces).
            if server is not None:
                server.close()
            self.release_name()
            raise

    # ----------------------------------------------------------------- statistics, close
    @property
    def refused_connections(self) -> int:
        """How many connections were refused (wrong or missing token, bad handshake)."""
        return self._server.refused

    def close(self) -> None:
        """Cancel the publisher (if not finished), stop serving, close every connection.

        The stream's data source name goes back to the pool, so the registration is
        reused by the next ``to_spark_stream`` instead of piling up in the session.
        """
        if not self.cancel_upstream():
            return
        self._server.close()
        self.release_name()

    def release_name(self) -> None:
        """Give the format name back (once): no query will read this stream again."""
        with self._name_lock:
            if self._name_released:
                return
            self._name_released = True
        _bridge_queries.release_format_name(self.format_name)

    def _on_drained(self) -> None:
        """Stop each active query whose bridge sources have all drained (completion)."""
        _bridge_queries.finish_queries(self._spark, self.format_name)
        with self._cond:
            self._closed = True
        # The reader's connection stays open: a query that also reads a stream that has
        # not drained yet goes on asking this one, which answers "done".
        self._server.stop_accepting()


def as_struct(spark: SparkSession, schema: StructType | str) -> StructType:
    """``schema`` as a ``StructType`` (a DDL string is parsed).

    Raises:
        TypeError: ``schema`` does not describe a struct.
    """
    if isinstance(schema, StructType):
        return schema
    parsed = parse_ddl(schema)
    if not isinstance(parsed, StructType):
        raise TypeError(f"schema must describe a struct (columns), got {schema!r}")
    return parsed


def to_spark_stream_bridge(
    publisher: Publisher[Mapping[str, Any]] | Publisher[pa.RecordBatch],
    spark: SparkSession,
    schema: StructType | str,
    *,
    max_records_per_trigger: int = 10_000,
    read_ahead_triggers: int = 0,
    arrow: bool = False,
    start_offset: int = 0,
) -> SparkStreamBridge:
    """Like ``to_spark_stream``, but return the bridge (``prefetch``, statistics, ``close``).

    Raises:
        SparkConnectUnsupportedError: ``spark`` is a Spark Connect session.
        ValueError: ``max_records_per_trigger < 1``, ``read_ahead_triggers < 0`` or
            ``start_offset < 0``.
        TypeError: ``schema`` is not a struct.
    """
    require_classic(spark, "to_spark_stream")
    if isinstance(max_records_per_trigger, bool) or max_records_per_trigger < 1:
        raise ValueError(f"max_records_per_trigger must be >= 1, got {max_records_per_trigger}")
    if type(read_ahead_triggers) is not int or read_ahead_triggers < 0:
        raise ValueError(f"read_ahead_triggers must be an int >= 0, got {read_ahead_triggers!r}")
    if type(start_offset) is not int or start_offset < 0:
        raise ValueError(f"start_offset must be an int >= 0, got {start_offset!r}")
    return SparkStreamBridge(
        publisher,
        spark,
        as_struct(spark, schema),
        max_records_per_trigger=max_records_per_trigger,
        read_ahead_triggers=read_ahead_triggers,
        arrow=bool(arrow),
        start_offset=start_offset,
    )


def to_spark_stream(
    publisher: Publisher[Mapping[str, Any]] | Publisher[pa.RecordBatch],
    spark: SparkSession,
    schema: StructType | str,
    *,
    max_records_per_trigger: int = 10_000,
    read_ahead_triggers: int = 0,
    arrow: bool = False,
    start_offset: int = 0,
) -> DataFrame:
    """A streaming DataFrame fed by ``publisher``, with Spark's batches as its demand.

    Each element is one row: a mapping from column name to value (missing keys are null);
    with ``arrow=True``, each element is a ``pyarrow.RecordBatch`` of rows (columns matched
    by name, cast to the schema's types), which skips the per-row Python conversion.
    Offsets are row sequence numbers. Each micro-batch asks the bridge for at most
    ``max_records_per_trigger`` elements, and that request is the demand sent to the
    publisher; a micro-batch takes what arrived (waiting at most 50 ms once some
    elements are there, 1 s when none are), so it is never larger than the limit.

    Completion: when the publisher completes and Spark has processed every element it
    sent, every active query that reads this stream (and only drained bridge streams) is
    stopped, so it finishes normally (a ``from_streaming_query`` subscriber downstream gets
    ``on_complete``). An ``on_error`` from the publisher fails the query, after the
    elements received before it, with a message naming the error.

    Security: the bridge binds ``127.0.0.1`` on an ephemeral port and every connection
    must present a random per-stream token (a Spark option, redacted in Spark's plans and
    UI); other connections are refused and logged on the ``reactive_streams.spark``
    logger.

    Cluster: Spark reads through a driver-side ``SimpleDataSourceStreamReader``: the rows
    travel from the driver to the executors inside Spark, and executors never connect to
    this process. The driver must run on this host (client deploy mode).

    Args:
        publisher: the source; subscribed when the first query starts reading.
        spark: a classic SparkSession.
        schema: the rows' schema, a ``StructType`` or a DDL string (``"id long, name string"``).
        max_records_per_trigger: the most elements per micro-batch (and outstanding demand).
        read_ahead_triggers: whole triggers of demand to send ahead of Spark, ``>= 0``.
            With 0 (the default) each micro-batch's request is the demand; with 1, the next
            trigger's elements are requested as soon as a batch is handed to Spark, so they
            are waiting when Spark asks and micro-batches come out full. Memory held grows
            to ``max_records_per_trigger * (1 + read_ahead_triggers)`` elements.
        arrow: elements are ``pyarrow.RecordBatch`` (demand then counts batches: one is
            requested at a time while fewer rows than the bound are held; a batch is sliced
            where a micro-batch ends inside it).
        start_offset: the sequence number of the publisher's first row, ``>= 0``. To resume
            a query from its checkpoint, pass the offset of its last committed micro-batch
            and a publisher positioned there (the same input, minus that many rows): Spark
            then replays its uncommitted micro-batch (``readBetweenOffsets``, served in a
            Spark task, so it needs executors on this host, as with ``local[*]``) and goes on.

    Returns:
        A streaming DataFrame; it can be read by one query, once (a live publisher cannot
        be replayed below ``start_offset``: a query restarted from a checkpoint needs a new
        ``to_spark_stream`` at the right ``start_offset``, else it fails with a clear error).

    Backpressure:
        Demand is what the current micro-batch lacks (plus ``read_ahead_triggers`` whole
        triggers): at most ``max_records_per_trigger * (1 + read_ahead_triggers)`` rows
        are held or requested at any time (with ``arrow=True``, plus the rows of one
        batch). A slow query asks less often.

    Concurrency:
        Publisher signals may come from any thread; no lock is held while calling it.

    Raises:
        SparkConnectUnsupportedError: ``spark`` is a Spark Connect session.
        ValueError: ``max_records_per_trigger < 1``.
    """
    return to_spark_stream_bridge(
        publisher,
        spark,
        schema,
        max_records_per_trigger=max_records_per_trigger,
        read_ahead_triggers=read_ahead_triggers,
        arrow=arrow,
        start_offset=start_offset,
    ).dataframe
