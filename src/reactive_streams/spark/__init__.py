"""Spark bridges: demand flows across the Python/Spark boundary in both directions.

* ``from_dataframe(df)``: a batch DataFrame as a ``Publisher`` of rows, pulled one
  partition (one Spark job) at a time, only as demand arrives.
* ``spark_processor(transform, spark)``: Spark as a processing stage, in batches.
* ``to_spark_stream(publisher, spark, schema)``: any ``Publisher[dict]`` as a streaming
  DataFrame; each micro-batch's size is the demand sent to the publisher.
* ``from_splits(splits, opener, spark, schema, count=...)``: a partitioned source (files,
  row groups, shards) as a streaming DataFrame read on the executors;
  ``reactive_streams.spark.splits.file_splits`` makes the splits of Parquet, CSV and JSON
  Lines files.
* ``from_rsocket(url, route, spark)``: a partitioned RSocket route (``reactive-streams
  serve``) as a streaming DataFrame read on the executors, with Spark's demand on the wire;
  ``describe_route`` asks a route for its partitions, schema and offsets.
* ``from_streaming_query(streaming_df)``: a streaming query as a ``Publisher`` of
  ``MicroBatch``es; ``foreachBatch`` waits for the subscriber's demand.
* ``reactive_streams.spark.session``: ``require_java``, ``local_session``, Spark Connect
  support checks.

This subpackage needs the ``spark`` extra (``pip install 'reactive-streams-py[spark]'``);
``import reactive_streams`` alone never imports pyspark.
"""

from __future__ import annotations

try:
    import pyarrow  # type: ignore[import-untyped,unused-ignore]  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "reactive_streams.spark needs pyspark and pyarrow: pip install 'reactive-streams-py[spark]'"
    ) from _exc

from .._core import set_public_module
from ._errors import BridgeClosedError as BridgeClosedError
from ._errors import JavaNotFoundError as JavaNotFoundError
from ._errors import JavaVersionError as JavaVersionError
from ._errors import RemoteRouteError as RemoteRouteError
from ._errors import SparkBridgeError as SparkBridgeError
from ._errors import SparkConnectUnsupportedError as SparkConnectUnsupportedError
from ._errors import SparkTransformError as SparkTransformError
from ._errors import SplitReadError as SplitReadError
from ._errors import StreamingQueryFailedError as StreamingQueryFailedError
from ._from_dataframe import DataFramePublisher as DataFramePublisher
from ._from_dataframe import from_dataframe as from_dataframe
from ._from_rsocket import RouteInfo as RouteInfo
from ._from_rsocket import RouteStats as RouteStats
from ._from_rsocket import RSocketSplit as RSocketSplit
from ._from_rsocket import commit_route as commit_route
from ._from_rsocket import describe_route as describe_route
from ._from_rsocket import from_rsocket as from_rsocket
from ._from_rsocket import route_stats as route_stats
from ._from_splits import from_splits as from_splits
from ._from_streaming_query import MicroBatch as MicroBatch
from ._from_streaming_query import StreamingQueryPublisher as StreamingQueryPublisher
from ._from_streaming_query import from_streaming_query as from_streaming_query
from ._processor import SparkProcessor as SparkProcessor
from ._processor import spark_processor as spark_processor
from ._to_spark_stream import SparkStreamBridge as SparkStreamBridge
from ._to_spark_stream import to_spark_stream as to_spark_stream
from ._to_spark_stream import to_spark_stream_bridge as to_spark_stream_bridge
from .session import local_session as local_session
from .session import require_java as require_java

__all__ = [
    "BridgeClosedError",
    "DataFramePublisher",
    "JavaNotFoundError",
    "JavaVersionError",
    "MicroBatch",
    "RSocketSplit",
    "RemoteRouteError",
    "RouteInfo",
    "RouteStats",
    "SparkBridgeError",
    "SparkConnectUnsupportedError",
    "SparkProcessor",
    "SparkStreamBridge",
    "SparkTransformError",
    "SplitReadError",
    "StreamingQueryFailedError",
    "StreamingQueryPublisher",
    "commit_route",
    "describe_route",
    "from_dataframe",
    "from_rsocket",
    "from_splits",
    "from_streaming_query",
    "local_session",
    "require_java",
    "spark_processor",
    "to_spark_stream",
    "to_spark_stream_bridge",
    "route_stats",
]

set_public_module(__name__, globals())
