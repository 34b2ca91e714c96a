"""The Python streaming data source behind ``to_spark_stream``, and its wire protocol.

This module runs in two places: in the user's process (the bridge server imports the
framing helpers) and in Spark's Python data source runner, a process the driver JVM starts
for each streaming query. It is pickled *by value* (``cloudpickle.register_pickle_by_value``)
so the runner does not need ``reactive_streams`` installed; keep it self-contained: only the
standard library, pyarrow and pyspark.

Why a driver-side ``SimpleDataSourceStreamReader``: its ``read`` runs in the runner, on the
driver host, and the rows it returns travel to the executors through Spark itself. So
executors never connect to the user's process, and the loopback bridge works on a cluster.

The protocol (all frames are a 4-byte big-endian length, then the payload):

1. client -> server: JSON ``{"token": ..., "stream": ..., "version": 1}`` (plus
   ``"role": "replay"`` for a replay connection, which serves one request); a wrong or
   missing token closes the connection (the server logs the refusal).
2. client -> server: JSON ``{"op": "read", "start": s, "max": n}``; ``start`` acknowledges
   every element below it (Spark only plans from ``start`` once the batches below it were
   processed).
   Or, on a replay connection, ``{"op": "replay", "start": s, "end": e}``: exactly the rows
   ``s..e - 1`` (Spark replays a micro-batch that was planned but not committed when a
   query restarts from its checkpoint; this runs in a Spark task).
3. server -> client: JSON ``{"status": "ok", "count": k, "end": s + k, "done": bool}`` and, if
   ``k > 0``, one frame with an Arrow IPC stream of those ``k`` rows; or JSON
   ``{"status": "error", "message": ...}``, and the runner raises it, failing the query.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import TYPE_CHECKING, Any, ClassVar, Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql.types import StructType

__all__ = [
    "PROTOCOL_VERSION",
    "BridgeDataSource",
    "BridgeProtocolError",
    "BridgeStreamReader",
    "recv_frame",
    "recv_json",
    "send_frame",
    "send_json",
]

PROTOCOL_VERSION: Final = 1
_HEADER_FORMAT: Final = ">I"  # a format string: a struct.Struct would not pickle by value
_HEADER_SIZE: Final = 4
MAX_CONTROL_FRAME: Final = 64 * 1024
"""Largest JSON frame accepted (bytes), so a stray client cannot make us allocate much."""


class BridgeProtocolError(Exception):
    """The bridge refused a request, failed, or its publisher failed.

    Raised in Spark's runner process, so it cannot derive from the package's base class
    (the runner need not have ``reactive_streams`` installed); the user's process signals
    ``reactive_streams.spark.BridgeClosedError`` for the same events.
    """


def send_frame(sock: socket.socket, payload: bytes) -> None:
    """Send one length-prefixed frame."""
    sock.sendall(struct.pack(_HEADER_FORMAT, len(payload)) + payload)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(min(size - len(chunks), 1 << 20))
        if not chunk:
            raise EOFError(f"connection closed after {len(chunks)} of {size} bytes")
        chunks += chunk
    return bytes(chunks)


def recv_frame(sock: socket.socket, *, limit: int | None = None) -> bytes:
    """Receive one frame; ``limit`` caps its size in bytes.

    Raises:
        EOFError: the peer closed the connection.
        BridgeProtocolError: the frame is larger than ``limit``.
    """
    (size,) = struct.unpack(_HEADER_FORMAT, _recv_exactly(sock, _HEADER_SIZE))
    if limit is not None and size > limit:
        raise BridgeProtocolError(f"frame of {size} bytes exceeds the limit of {limit}")
    return _recv_exactly(sock, size)


def send_json(sock: socket.socket, message: dict[str, Any]) -> None:
    """Send one JSON control frame."""
    send_frame(sock, json.dumps(message).encode("utf-8"))


def recv_json(sock: socket.socket) -> dict[str, Any]:
    """Receive one JSON control frame (at most ``MAX_CONTROL_FRAME`` bytes).

    Raises:
        EOFError: the peer closed the connection.
        BridgeProtocolError: the frame is too large, nested too deeply, or not a JSON
            object.
    """
    raw = recv_frame(sock, limit=MAX_CONTROL_FRAME)
    try:
        message = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BridgeProtocolError(f"malformed control frame: {exc}") from None
    except RecursionError:  # a frame nested deeper than the parser recurses
        raise BridgeProtocolError("malformed control frame: nested too deeply") from None
    if not isinstance(message, dict):
        raise BridgeProtocolError("malformed control frame: not a JSON object")
    return message


class BridgeStreamReader(SimpleDataSourceStreamReader):
    """Reads a live publisher through the loopback bridge, on the driver (runner process).

    Offsets are ``{"seq": n}``: element sequence numbers, ``n`` elements read before. Each
    ``read(start)`` asks the bridge for at most ``max_records_per_trigger`` elements: that
    request is the demand the bridge sends to the publisher, and ``start`` acknowledges
    everything below it.
    """

    def __init__(self, options: dict[str, str]) -> None:
        # Spark lower-cases option keys on the way in; read them case-insensitively anyway.
        lowered = {key.lower(): value for key, value in options.items()}
        self._host = lowered["host"]
        self._port = int(lowered["port"])
        self._token = lowered["token"]
        self._stream = lowered["stream"]
        self._max_records = int(lowered["max_records_per_trigger"])
        self._timeout = float(lowered.get("timeout", "300"))
        self._start_offset = int(lowered.get("start_offset", "0"))
        self._sock: socket.socket | None = None

    def _open(self, **hello: Any) -> socket.socket:
        try:
            sock = socket.create_connection((self._host, self._port), timeout=self._timeout)
        except OSError as exc:
            raise BridgeProtocolError(
                f"cannot reach the to_spark_stream bridge {self._stream} at "
                f"{self._host}:{self._port} ({exc}); it only serves readers on the driver "
                "host of the process that created the stream, which must still be running"
            ) from None
        send_json(sock, {"token": self._token, "stream": self._stream, "version": 1, **hello})
        return sock

    def _connect(self) -> socket.socket:
        if self._sock is None:
            self._sock = self._open()
        return self._sock

    def initialOffset(self) -> dict[str, int]:
        """The stream's first sequence number: ``start_offset`` (0 unless resuming)."""
        return {"seq": self._start_offset}

    def read(self, start: dict[str, int]) -> tuple[Iterator[Any], dict[str, int]]:
        """Ask the bridge for up to ``max_records_per_trigger`` elements from ``start``.

        Returns:
            An iterator of ``pyarrow.RecordBatch`` (the rows) and the next offset.

        Raises:
            BridgeProtocolError: the bridge is gone, refused, or the publisher failed; the
                streaming query fails with this message.
        """
        sock = self._connect()
        seq = int(start["seq"])
        try:
            send_json(sock, {"op": "read", "start": seq, "max": self._max_records})
            reply = recv_json(sock)
            if reply.get("status") != "ok":
                raise BridgeProtocolError(str(reply.get("message", "the bridge refused the read")))
            count = int(reply["count"])
            if count == 0:
                return iter(()), start
            with pa.ipc.open_stream(recv_frame(sock)) as stream:
                batches = list(stream)
        except (OSError, EOFError) as exc:
            self._sock = None
            raise BridgeProtocolError(
                f"lost the to_spark_stream bridge {self._stream} while reading from offset "
                f"{seq}: {exc!r}"
            ) from None
        return iter(batches), {"seq": seq + count}

    def readBetweenOffsets(self, start: dict[str, int], end: dict[str, int]) -> Iterator[Any]:
        """Replay rows ``start..end - 1`` (a restart from a checkpoint; runs in a Spark task).

        The bridge serves it only if it was created at ``start_offset <= start`` over a
        publisher positioned at ``start_offset`` (rows acknowledged before are gone).

        Raises:
            BridgeProtocolError: the bridge cannot serve those rows, or is unreachable (a
                task on an executor of another host cannot reach the driver's loopback).
        """
        first, last = int(start["seq"]), int(end["seq"])
        if last <= first:
            return iter(())
        sock = self._open(role="replay")
        try:
            send_json(sock, {"op": "replay", "start": first, "end": last})
            reply = recv_json(sock)
            if reply.get("status") != "ok":
                raise BridgeProtocolError(
                    str(reply.get("message", "the bridge refused the replay"))
                )
            with pa.ipc.open_stream(recv_frame(sock)) as stream:
                batches = list(stream)
        except (OSError, EOFError) as exc:
            raise BridgeProtocolError(
                f"lost the to_spark_stream bridge {self._stream} while replaying rows "
                f"{first}..{last - 1}: {exc!r}"
            ) from None
        finally:
            sock.close()
        return iter(batches)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: the next ``read(start)`` already acknowledges below ``start``."""


class BridgeDataSource(DataSource):
    """The streaming data source registered for each ``to_spark_stream`` (per-stream name)."""

    format_name: ClassVar[str] = "reactive_streams_bridge"
    """The format name; each stream registers a subclass with its own ``format_name``."""

    @classmethod
    def name(cls) -> str:
        """The format name Spark registers this source under (``format_name``)."""
        return cls.format_name

    def schema(self) -> str:
        """The schema is always given by ``to_spark_stream``; this is never used."""
        raise BridgeProtocolError("to_spark_stream always passes the schema explicitly")

    def simpleStreamReader(self, schema: StructType) -> BridgeStreamReader:
        """The driver-side reader (no executor ever connects to the bridge)."""
        return BridgeStreamReader(dict(self.options))
