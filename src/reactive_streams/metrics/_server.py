"""``serve_metrics``: a bounded HTTP endpoint for a ``prometheus_client`` registry.

``prometheus_client.start_http_server`` starts one thread per connection, listens with a
backlog of 5 and never times a connection out: a burst of scrapes overflows the backlog,
and idle connections each keep a thread forever. This server answers with a fixed pool
of worker threads, listens with a larger backlog, and closes a connection that sends
nothing for ``read_timeout`` seconds. A connection gets ``request_timeout`` seconds in all
(a client that trickles a byte just inside the read timeout is still cut), and one client
address holds at most ``max_connections_per_client`` workers, so a few slow clients cannot
make every scrape wait. It serves ``prometheus_client``'s own WSGI app, so what a scrape
returns is exactly what ``generate_latest`` renders.
"""

from __future__ import annotations

import contextlib
import importlib
import socket
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from .._core import check_positive, report_undeliverable

if TYPE_CHECKING:
    from types import TracebackType

    from prometheus_client.registry import CollectorRegistry

__all__ = ["MetricsServer", "serve_metrics"]

_INSTALL_HINT = (
    "reactive_streams.metrics.serve_metrics needs prometheus_client: "
    "pip install 'reactive-streams-py[metrics]'"
)

_SLOT_POLL = 0.2
"""Seconds between the accept loop's checks for ``close`` (idle, or waiting for a worker)."""


class _QuietHandler(WSGIRequestHandler):
    """A request handler that logs nothing (a scrape every few seconds is not news)."""

    def log_message(self, format: str, *args: Any) -> None:
        """Drop the access log line."""


class _PooledServer(WSGIServer):
    """A WSGI server whose requests run on a bounded pool, one slot per worker.

    The accept loop takes a free slot before it accepts the next connection's work: with
    every worker busy, new connections wait in the listen backlog, not in new threads.
    """

    def __init__(
        self,
        address: tuple[Any, ...],
        family: socket.AddressFamily,
        *,
        workers: int,
        backlog: int,
        read_timeout: float,
        request_timeout: float,
        max_connections_per_client: int,
    ) -> None:
        self.address_family = family
        self.request_queue_size = backlog  # listen() reads it in server_activate
        self._request_timeout = request_timeout
        self._per_client_limit = max_connections_per_client
        self._per_client: Counter[str] = Counter()
        self._slots = threading.Semaphore(workers)
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="reactive-streams-metrics")
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        handler = type("_TimedHandler", (_QuietHandler,), {"timeout": read_timeout})
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Hand the connection to a worker, waiting for a free one (or for ``close``).

        A client address already served on ``max_connections_per_client`` connections is
        closed at once, before it can wait for a worker.
        """
        client = _client(client_address)
        with self._lock:
            if self._per_client[client] >= self._per_client_limit:
                refused = True
            else:
                refused = False
                self._per_client[client] += 1
        if refused:
            self.shutdown_request(request)
            return
        while not self._slots.acquire(timeout=_SLOT_POLL):
            if self._closing.is_set():
                self._release_client(client)
                self.shutdown_request(request)
                return
        with self._lock:
            self._open.add(request)
        try:
            self._pool.submit(self._serve_one, request, client_address)
        except RuntimeError:  # the pool was shut down by close()
            self._done(request, client)

    def _serve_one(self, request: Any, client_address: Any) -> None:
        # The whole request, read and answer, within request_timeout: past it the socket is
        # shut down, which ends the worker's read or write at once.
        deadline = threading.Timer(self._request_timeout, _cut, args=(request,))
        deadline.daemon = True
        deadline.start()
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            deadline.cancel()
            self._done(request, _client(client_address))

    def _release_client(self, client: str) -> None:
        with self._lock:
            self._per_client[client] -= 1
            if self._per_client[client] <= 0:
                del self._per_client[client]

    def _done(self, request: Any, client: str) -> None:
        with self._lock:
            self._open.discard(request)
        self._release_client(client)
        self.shutdown_request(request)
        self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went quiet or away is routine; anything else is reported."""
        error = sys.exc_info()[1]
        if isinstance(error, OSError):  # read timeout, reset, broken pipe
            return
        if isinstance(error, Exception):
            report_undeliverable(error)

    def close(self) -> None:
        """Stop accepting, cut the connections being served, and join the workers."""
        self._closing.set()
        self.shutdown()  # returns once serve_forever has
        self.server_close()
        with self._lock:
            connections = list(self._open)
        for connection in connections:  # wake workers blocked reading an idle client
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._pool.shutdown(wait=True, cancel_futures=True)


def _client(client_address: Any) -> str:
    """The host of a client's address (``("127.0.0.1", 5000)`` -> ``"127.0.0.1"``)."""
    if isinstance(client_address, tuple) and client_address:
        return str(client_address[0])
    return str(client_address)


def _cut(connection: socket.socket) -> None:
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)


class MetricsServer:
    """A running metrics endpoint; built by ``serve_metrics``.

    Attributes:
        url: ``http://host:port/metrics`` with the bound port (IPv6 hosts in brackets).
        host, port: the address it listens on.

    Use it as a context manager, or call ``close()``; both are idempotent.
    """

    def __init__(self, server: _PooledServer) -> None:
        self._server: _PooledServer | None = server
        host, port = server.server_address[:2]
        self.host: str = str(host)
        self.port: int = int(port)
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url: str = f"http://{shown}:{self.port}/metrics"
        self._thread = threading.Thread(
            target=server.serve_forever,
            args=(_SLOT_POLL,),  # how soon close() is noticed between connections
            name="reactive-streams-metrics-accept",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        """Stop serving: close the listening socket and every open connection. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            self._thread.join()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._server is None else "serving"
        return f"<MetricsServer {self.url} {state}>"


def serve_metrics(
    port: int = 0,
    host: str = "127.0.0.1",
    *,
    registry: CollectorRegistry | None = None,
    workers: int = 4,
    backlog: int = 1024,
    read_timeout: float = 10.0,
    request_timeout: float = 10.0,
    max_connections_per_client: int = 2,
) -> MetricsServer:
    """Serve ``registry`` for Prometheus scrapes on ``host:port``, on a bounded pool.

    Every path answers with the registry's text exposition (``prometheus_client``'s WSGI
    app: ``Accept`` and ``?name[]=`` filters, gzip, as its own server does).

    Args:
        port: the TCP port; ``0`` lets the OS pick a free one (read it from ``.port``).
        host: the address to bind; the default keeps the endpoint on this machine.
        registry: a ``prometheus_client.CollectorRegistry``; ``None`` for the default one.
        workers: threads that answer requests, ``>= 1``: the most connections served at
            once, and the most threads the server ever starts besides its accept loop.
        backlog: connections the kernel queues while every worker is busy (``listen``;
            the kernel caps it at ``net.core.somaxconn``).
        read_timeout: seconds a connection may stay silent, or stall a response, before
            it is closed, ``> 0``.
        request_timeout: seconds a connection is served in all, from the moment a worker
            takes it (reading the request and writing the answer), ``> 0``; then it is cut.
        max_connections_per_client: connections one client address may have taken by
            workers or waiting for one, ``>= 1``; one more is closed at once (so a client
            that holds connections open takes at most this many of the ``workers``).

    Returns:
        A running ``MetricsServer``; ``close()`` it when done.

    Raises:
        ImportError: prometheus_client is not installed.
        TypeError, ValueError: ``workers``, ``backlog`` or ``max_connections_per_client``
            is not a positive ``int``, or ``read_timeout`` or ``request_timeout`` is not a
            positive number.
        OSError: the address cannot be bound (in use, not allowed).
    """
    try:
        prometheus = importlib.import_module("prometheus_client")
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    check_positive("workers", workers)
    check_positive("backlog", backlog)
    for name, value in (("read_timeout", read_timeout), ("request_timeout", request_timeout)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{name} must be a number, got {type(value).__qualname__}")
        if not value > 0:
            raise ValueError(f"{name} must be positive seconds, got {value!r}")
    check_positive("max_connections_per_client", max_connections_per_client)
    family, _type, _proto, _name, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    server = _PooledServer(
        address,
        family,
        workers=workers,
        backlog=backlog,
        read_timeout=float(read_timeout),
        request_timeout=float(request_timeout),
        max_connections_per_client=max_connections_per_client,
    )
    server.set_app(prometheus.make_wsgi_app(prometheus.REGISTRY if registry is None else registry))
    return MetricsServer(server)
