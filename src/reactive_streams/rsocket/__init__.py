"""Reactive Streams over the network: an RSocket transport with demand on the wire.

RSocket frames carry the Reactive Streams signals, so a stream keeps its backpressure when
it crosses a network (and a language) boundary:

=================================  =============================================
our side                           on the wire
=================================  =============================================
``subscribe``                      ``REQUEST_STREAM``, initial request-n: the
                                   demand from ``on_subscribe``, or 1 (held)
``request(n)``                     ``REQUEST_N`` (31-bit; topped up as consumed)
``cancel()``                       ``CANCEL``
``on_next``                        ``PAYLOAD`` with NEXT
``on_complete``                    ``PAYLOAD`` with COMPLETE
``on_error``                       ``ERROR``, or the connection failing
=================================  =============================================

* ``serve(routes, host, port, *, token=None, ssl_context=None) -> RSocketServer`` serves
  route factories ``(data: bytes) -> Publisher[bytes]`` from a background loop thread;
  ``await serve_async(...)`` does the same on the running loop. ``limits=ServerLimits(...)``
  bounds what one peer may make it hold (connections, streams, memory, deadlines).
* ``connect("tcp://host:port", *, token=None, ssl_context=None) -> RSocketClient`` opens
  a connection; ``client.request_stream(route, data)`` is a ``Publisher[bytes]``.
  ``ws://`` URLs and ``serve(..., transport="ws")`` carry RSocket over WebSocket (with the
  ``aiohttp`` package: the ``rsocket-ws`` extra). ``connect(..., reconnect=Backoff(...))``
  dials again when the connection drops, within the policy's bound; requests made
  meanwhile wait for it.

* ``partitioned_routes(name, source)`` serves a ``PartitionedSource`` (partitions of Arrow
  record batches, readable from any position: ``reactive_streams.files.FilePartitions``)
  as a partitioned route: ``name.meta``, ``name.offsets``, the stream ``name`` and
  ``name.commit`` (see ``docs/rsocket.md``, "Partitioned routes"). ``LivePartitions``
  serves a live ``Publisher`` of record batches that way, with bounded retention.

Routing and bearer authentication use composite metadata
(``message/x.rsocket.routing.v0``, ``message/x.rsocket.authentication.v0``), as Spring and
rsocket-py do. The frame codec is our own (see ``docs/rsocket.md`` for why).
"""

from __future__ import annotations

from .._core import set_public_module
from ._client import RSocketClient, connect
from ._errors import FrameError, RSocketConnectionError, RSocketError, RSocketStreamError
from ._frames import MAX_FRAME_SIZE, MAX_REQUEST_N, ErrorCode
from ._limits import ServerLimits
from ._live import LivePartitions, ReleasedOffsetError
from ._partitioned import (
    MAX_ROUTE_NAME_BYTES,
    PARTITIONED_VERSION,
    PartitionedSource,
    check_route_name,
    encode_batch,
    partitioned_routes,
)
from ._payload import Payload
from ._server import AsyncRSocketServer, RSocketServer, serve, serve_async
from ._statistics import TransportStatistics

__all__ = [
    "MAX_FRAME_SIZE",
    "MAX_REQUEST_N",
    "MAX_ROUTE_NAME_BYTES",
    "PARTITIONED_VERSION",
    "AsyncRSocketServer",
    "ErrorCode",
    "FrameError",
    "PartitionedSource",
    "ReleasedOffsetError",
    "Payload",
    "RSocketClient",
    "RSocketConnectionError",
    "RSocketError",
    "RSocketServer",
    "RSocketStreamError",
    "ServerLimits",
    "TransportStatistics",
    "check_route_name",
    "connect",
    "encode_batch",
    "partitioned_routes",
    "serve",
    "serve_async",
    "LivePartitions",
]

set_public_module(__name__, globals())
