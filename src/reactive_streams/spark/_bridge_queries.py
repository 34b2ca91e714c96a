"""Query control for ``to_spark_stream``: the data source's name, and stopping drained queries.

Each live stream registers the data source under its own format name
(``reactive_streams_bridge_<32 hex>``), because completion needs to know which running
queries read which streams, and a query's plan names its Python sources by their
registered names. PySpark has no way to unregister a data source, and registering a name
again replaces it (a query resolves its source when it starts). So names are pooled: a
closed stream gives its name back, and the next stream registers under it, replacing the
old entry. The session then holds as many registrations as streams were ever live at
once, not one per stream ever created.
"""

from __future__ import annotations

import re
import threading
import uuid
import weakref
from typing import TYPE_CHECKING, Final, Protocol

from .._core import report_undeliverable
from ._pyspark_internals import source_names
from ._stream_source import BridgeDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "FORMAT_PREFIX",
    "FORMAT_RE",
    "finish_queries",
    "register",
    "release_format_name",
    "take_format_name",
]

FORMAT_PREFIX: Final = "reactive_streams_bridge_"
FORMAT_RE: Final = re.compile(FORMAT_PREFIX + r"[0-9a-f]{32}")


class _Drainable(Protocol):
    @property
    def drained(self) -> bool: ...

    def release_name(self) -> None: ...


# format name -> stream, to decide when a query reading several streams has drained them all.
_STREAMS: weakref.WeakValueDictionary[str, _Drainable] = weakref.WeakValueDictionary()
_FREE_NAMES: list[str] = []
_LOCK = threading.Lock()


def take_format_name() -> str:
    """A format name no live stream uses: a released one if any, else a new one."""
    with _LOCK:
        if _FREE_NAMES:
            return _FREE_NAMES.pop()
    return FORMAT_PREFIX + uuid.uuid4().hex


def release_format_name(name: str) -> None:
    """Give ``name`` back once no query reads its stream (once per ``take_format_name``)."""
    with _LOCK:
        _STREAMS.pop(name, None)
        if name not in _FREE_NAMES:
            _FREE_NAMES.append(name)


def register(spark: SparkSession, name: str, stream: _Drainable) -> None:
    """Register the bridge data source under ``name`` (replacing an earlier stream's)."""
    source = type(
        f"BridgeDataSource_{name[len(FORMAT_PREFIX) :]}",
        (BridgeDataSource,),
        {"format_name": name, "__module__": BridgeDataSource.__module__},
    )
    spark.dataSource.register(source)
    with _LOCK:
        _STREAMS[name] = stream


def finish_queries(spark: SparkSession, name: str) -> None:
    """Stop each active query that reads ``name`` and whose bridge streams all drained.

    The names of the streams of a stopped query are released (each stream once).
    """
    for query in list(spark.streams.active):
        try:
            names = source_names(query, FORMAT_RE)
        except Exception as exc:  # py4j internals moved: say so, do not hang silently
            report_undeliverable(exc)
            continue
        if name not in names:
            continue
        with _LOCK:
            streams = [_STREAMS.get(other) for other in names]
        if all(stream is not None and stream.drained for stream in streams):
            try:
                query.stop()
            except Exception as exc:
                report_undeliverable(exc)
            for stream in streams:
                if stream is not None:
                    stream.release_name()
