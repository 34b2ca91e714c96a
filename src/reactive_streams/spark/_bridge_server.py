"""The loopback server of ``to_spark_stream``: sockets, the token handshake, one reader.

``BridgeServer`` binds ``127.0.0.1`` on an ephemeral port and serves each connection on its
own thread. A connection must first present the stream's random token (compared in
constant time) and the protocol version; anything else is refused, logged on the
``reactive_streams.spark`` logger and counted. One connection at a time may be the
stream's *reader* (the query's runner); a *replay* connection (``"role": "replay"``, a
Spark task) serves one request beside it. Requests are answered by a handler
(``DemandWindow.handle``); the framing is in ``_stream_source``.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import socket
import threading
from typing import TYPE_CHECKING, Any, Final

from ._stream_source import PROTOCOL_VERSION, BridgeProtocolError, recv_json, send_frame, send_json

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ._bridge_window import Reply

__all__ = ["BridgeServer", "shutdown"]

logger = logging.getLogger("reactive_streams.spark")

_HANDSHAKE_TIMEOUT: Final = 10.0


def shutdown(sock: socket.socket) -> None:
    """Shut a socket down both ways and close it, ignoring a peer that is gone."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


class BridgeServer:
    """Serves one stream's protocol on the loopback interface.

    Args:
        stream_id: the stream, for log messages and thread names.
        token: the secret every connection must present.
        handler: answers one request; must not raise.
        on_reader_gone: called (on the connection's thread) when the reader's connection
            ends, with whether the stream had finished by then.
        finished: whether the stream has ended (so a reader leaving is normal).

    Concurrency: one acceptor thread, one thread per connection; the lock guards the
    reader slot, the open connections and the refusal count.
    """

    def __init__(
        self,
        *,
        stream_id: str,
        token: str,
        handler: Callable[[Mapping[str, Any]], Reply],
        on_reader_gone: Callable[[], None],
        finished: Callable[[], bool],
    ) -> None:
        self._stream_id = stream_id
        self._token = token
        self._handler = handler
        self._on_reader_gone = on_reader_gone
        self._finished = finished
        self._lock = threading.Lock()
        self._reader_active = False
        self._refused = 0
        self._connections: set[socket.socket] = set()
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.address: tuple[str, int] = self._socket.getsockname()[:2]
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"rs-spark-bridge-{stream_id[:8]}", daemon=True
        )

    def start(self) -> None:
        """Start accepting connections."""
        self._acceptor.start()

    @property
    def refused(self) -> int:
        """How many connections were refused (wrong or missing token, bad handshake)."""
        with self._lock:
            return self._refused

    def stop_accepting(self) -> None:
        """Accept no new connection; open ones are served on (idempotent)."""
        shutdown(self._socket)

    def close(self) -> None:
        """Stop accepting and close every open connection (idempotent)."""
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            shutdown(conn)
        shutdown(self._socket)

    # ------------------------------------------------------------------- internals
    def _accept_loop(self) -> None:
        while True:
            try:
                conn, peer = self._socket.accept()
            except OSError:
                return  # closed
            threading.Thread(
                target=self._serve, args=(conn, peer), name="rs-spark-bridge-conn", daemon=True
            ).start()

    def _refuse(self, conn: socket.socket, peer: Any, reason: str) -> None:
        with self._lock:
            self._refused += 1
        logger.warning(
            "to_spark_stream bridge %s refused a connection from %s: %s",
            self._stream_id,
            peer,
            reason,
        )
        shutdown(conn)

    def _serve(self, conn: socket.socket, peer: Any) -> None:
        conn.settimeout(_HANDSHAKE_TIMEOUT)
        try:
            hello = recv_json(conn)
        except (OSError, EOFError, BridgeProtocolError) as exc:
            self._refuse(conn, peer, f"no valid handshake ({exc!r})")
            return
        except Exception as exc:  # whatever else a hostile peer provokes: refused, counted
            self._refuse(conn, peer, f"no valid handshake ({type(exc).__name__})")
            return
        token = hello.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(
            token.encode("utf-8"), self._token.encode("utf-8")
        ):
            self._refuse(conn, peer, "missing or wrong token")
            return
        if hello.get("version") != PROTOCOL_VERSION:
            self._refuse(conn, peer, f"unsupported protocol version {hello.get('version')!r}")
            return
        if hello.get("role") == "replay":
            # A replay runs in a Spark task, beside the query's reader: it does not take the
            # reader's place, and its connection serves that one request.
            conn.settimeout(None)
            try:
                self._serve_requests(conn, once=True)
            finally:
                shutdown(conn)
            return
        with self._lock:
            busy = self._reader_active
            if not busy:
                self._reader_active = True
                self._connections.add(conn)
        if busy:
            self._refuse(conn, peer, "the stream is already read by another streaming query")
            return
        conn.settimeout(None)  # reads come when Spark plans a batch: arbitrarily far apart
        try:
            self._serve_requests(conn, once=False)
        finally:
            with self._lock:
                self._connections.discard(conn)
                self._reader_active = False
            shutdown(conn)
            if not self._finished():
                # The query stopped or failed before the stream ended: nobody will read on.
                self._on_reader_gone()

    def _serve_requests(self, conn: socket.socket, *, once: bool) -> None:
        while True:
            try:
                request = recv_json(conn)
            except (OSError, EOFError, BridgeProtocolError):
                return
            reply, payload = self._handler(request)
            try:
                send_json(conn, reply)
                if payload is not None:
                    send_frame(conn, payload)
            except OSError:
                return
            if reply["status"] != "ok" or once:
                return
