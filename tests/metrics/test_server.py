"""serve_metrics: many scrapes at once, a bounded pool of threads, idle connections closed."""

from __future__ import annotations

import selectors
import socket
import threading

import pytest
from prometheus_client import CollectorRegistry, Counter

from reactive_streams.metrics import MetricsServer, serve_metrics

TIMEOUT = 30.0
_REQUEST = b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n"


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("scraped_things", "A counter to find in the scrape.", registry=registry).inc(3)
    return registry


def _scrape(server: MetricsServer) -> bytes:
    with socket.create_connection((server.host, server.port), timeout=TIMEOUT) as connection:
        connection.sendall(_REQUEST)
        return _read_all(connection)


def _read_all(connection: socket.socket) -> bytes:
    chunks = []
    while chunk := connection.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _metrics_threads() -> int:
    return sum(t.name.startswith("reactive-streams-metrics") for t in threading.enumerate())


def test_a_scrape_returns_the_registry() -> None:
    with serve_metrics(0, registry=_registry()) as server:
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        response = _scrape(server)
    assert response.startswith(b"HTTP/1.0 200")
    assert b"scraped_things_total 3.0" in response


def test_many_concurrent_scrapes_all_succeed() -> None:
    # 300 scrapes sent before any answer is read: all of them must be answered.
    count = 300
    with serve_metrics(
        0, registry=_registry(), workers=4, max_connections_per_client=count
    ) as server:
        responses: dict[socket.socket, bytearray] = {}
        with selectors.DefaultSelector() as selector:
            for _ in range(count):
                connection = socket.create_connection((server.host, server.port), TIMEOUT)
                connection.sendall(_REQUEST)
                connection.setblocking(False)
                responses[connection] = bytearray()
                selector.register(connection, selectors.EVENT_READ)
            open_count = count
            while open_count:
                events = selector.select(TIMEOUT)
                assert events, f"{open_count} scrapes still unanswered"
                for key, _mask in events:
                    ready = key.fileobj
                    assert isinstance(ready, socket.socket)
                    chunk = ready.recv(65536)
                    if chunk:
                        responses[ready] += chunk
                    else:
                        selector.unregister(ready)
                        ready.close()
                        open_count -= 1
    answered = [r for r in responses.values() if r.startswith(b"HTTP/1.0 200")]
    assert len(answered) == count
    assert all(b"scraped_things_total 3.0" in r for r in answered)


def test_idle_connections_do_not_start_threads_beyond_the_pool() -> None:
    workers = 3
    before = _metrics_threads()
    with serve_metrics(
        0, registry=_registry(), workers=workers, read_timeout=0.2, max_connections_per_client=30
    ) as server:
        idle = [
            socket.create_connection((server.host, server.port), timeout=TIMEOUT) for _ in range(20)
        ]
        try:
            # Served after every idle connection before it was taken up (FIFO backlog).
            assert b"scraped_things_total 3.0" in _scrape(server)
            assert _metrics_threads() - before <= workers + 1  # the pool and the accept loop
        finally:
            for connection in idle:
                connection.close()
    assert _metrics_threads() == before


def test_an_idle_connection_is_closed_after_the_read_timeout() -> None:
    with serve_metrics(0, registry=_registry(), read_timeout=0.1) as server:
        with socket.create_connection((server.host, server.port), timeout=TIMEOUT) as idle:
            assert idle.recv(1) == b""  # closed by the server, not by our timeout
        assert b"scraped_things_total 3.0" in _scrape(server)


def test_close_ends_connections_in_progress() -> None:
    server = serve_metrics(0, registry=_registry(), read_timeout=60.0)
    idle = socket.create_connection((server.host, server.port), timeout=TIMEOUT)
    try:
        assert b"200" in _scrape(server)  # the idle connection was taken up by then
        server.close()
        server.close()  # idempotent
        assert idle.recv(1) == b""
        assert "closed" in repr(server)
    finally:
        idle.close()


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match=r"^workers must be positive, got 0$"):
        serve_metrics(0, workers=0)
    with pytest.raises(TypeError, match=r"^backlog must be an int, got float$"):
        serve_metrics(0, backlog=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^read_timeout must be positive seconds, got 0$"):
        serve_metrics(0, read_timeout=0)
    with pytest.raises(TypeError, match=r"^read_timeout must be a number, got str$"):
        serve_metrics(0, read_timeout="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^request_timeout must be positive seconds, got -1$"):
        serve_metrics(0, request_timeout=-1)
    with pytest.raises(ValueError, match=r"^max_connections_per_client must be positive, got 0$"):
        serve_metrics(0, max_connections_per_client=0)


def test_a_port_in_use_raises_os_error() -> None:
    with serve_metrics(0) as server, pytest.raises(OSError):
        serve_metrics(server.port)


def test_a_client_that_trickles_its_request_is_cut_at_the_request_deadline() -> None:
    # Each byte comes within the read timeout: only a whole-request deadline ends it.
    with serve_metrics(0, registry=_registry(), read_timeout=5.0, request_timeout=0.5) as server:
        with socket.create_connection((server.host, server.port), timeout=TIMEOUT) as slow:
            cut = threading.Event()
            sent = 0
            for byte in _REQUEST[:-2]:
                try:
                    slow.sendall(bytes([byte]))
                except OSError:
                    cut.set()
                    break
                sent += 1
                slow.settimeout(0.1)
                try:
                    if slow.recv(1) == b"":
                        cut.set()
                        break
                except TimeoutError:
                    pass
            # Before: served (or waiting) until its last byte, about 4 s later.
            assert cut.is_set(), f"still open after {sent} bytes"
        assert b"scraped_things_total 3.0" in _scrape(server)


def test_one_client_address_holds_at_most_its_share_of_the_workers() -> None:
    with serve_metrics(
        0, registry=_registry(), workers=4, read_timeout=60.0, max_connections_per_client=2
    ) as server:
        address = (server.host, server.port)
        held = [
            socket.create_connection(address, TIMEOUT, source_address=("127.0.0.2", 0))
            for _ in range(2)
        ]
        try:
            third = socket.create_connection(address, TIMEOUT, source_address=("127.0.0.2", 0))
            with third:
                assert third.recv(1) == b""  # closed at once: the address holds 2 already
            # Another client is served at once though 127.0.0.2 holds two idle connections.
            assert b"scraped_things_total 3.0" in _scrape(server)
        finally:
            for connection in held:
                connection.close()
