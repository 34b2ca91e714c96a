"""``connect(url, reconnect=Backoff(...))``: a client that dials again when its server goes."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from reactive_streams import Backoff
from reactive_streams.operators import Flow
from reactive_streams.rsocket import (
    RSocketClient,
    RSocketConnectionError,
    RSocketServer,
    connect,
    serve,
)
from reactive_streams.testing import RecordingSubscriber

from .conftest import TIMEOUT, items_route, numbered

QUICK = Backoff(min_backoff=0.02, max_backoff=0.1, max_attempts=200)
"""Bounded generously (about 20 s): only to turn a hang into a failure."""


def _serve(port: int = 0, token: str | None = None) -> RSocketServer:
    return serve({"items": items_route}, port=port, token=token)


@pytest.fixture
def server() -> Iterator[RSocketServer]:
    server = _serve()
    try:
        yield server
    finally:
        server.close()


def _drop(client: RSocketClient, server: RSocketServer) -> RecordingSubscriber[bytes]:
    """Close ``server`` under a live stream of ``client``; return that stream, failed."""
    live: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=1)
    client.request_stream("items", b"1000000").subscribe(live)
    assert live.wait_for_elements(1, TIMEOUT)
    server.close()
    assert live.wait_terminated(TIMEOUT)
    return live


def test_requests_wait_for_the_reconnection_and_go_out_on_the_new_connection(
    server: RSocketServer,
) -> None:
    port = server.port
    with connect(f"tcp://127.0.0.1:{port}", reconnect=QUICK) as client:
        assert Flow(client.request_stream("items", b"2")).to_list(timeout=TIMEOUT) == list(
            numbered(2)
        )
        live = _drop(client, server)
        assert isinstance(live.error, RSocketConnectionError)  # in flight: fails, clearly
        waiting: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=10)
        client.request_stream("items", b"3").subscribe(waiting)
        assert not waiting.terminated
        assert not client.closed  # reconnecting is not closed
        restarted = _serve(port)
        try:
            assert waiting.wait_terminated(TIMEOUT)
            assert waiting.completed
            assert waiting.elements == list(numbered(3))
            assert client.reconnects == 1
            assert Flow(client.request_response("items", b"1")).to_list(timeout=TIMEOUT) == [
                b"item-0"
            ]
        finally:
            restarted.close()


def test_after_the_bound_every_request_fails_with_one_error_naming_url_and_attempts(
    server: RSocketServer,
) -> None:
    url = f"tcp://127.0.0.1:{server.port}"
    policy = Backoff(min_backoff=0.01, max_backoff=0.02, max_attempts=3)
    with connect(url, reconnect=policy) as client:
        _drop(client, server)
        waiting: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=1)
        client.request_stream("items").subscribe(waiting)
        assert waiting.wait_terminated(TIMEOUT)
        error = waiting.error
        assert isinstance(error, RSocketConnectionError)
        assert str(error).startswith(f"could not reconnect to {url}: gave up after 3 attempts in ")
        assert "(bound: 3 attempts); the last failure: " in str(error)
        assert client.closed
        later: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=1)
        client.request_stream("items").subscribe(later)
        assert later.wait_terminated(TIMEOUT)
        assert later.error is error


def test_the_first_connection_is_retried_within_the_bound() -> None:
    placeholder = _serve()
    port = placeholder.port
    placeholder.close()
    url = f"tcp://127.0.0.1:{port}"
    with pytest.raises(RSocketConnectionError) as failed:
        connect(url, reconnect=Backoff(0.01, 0.02, max_attempts=2))
    assert str(failed.value).startswith(f"could not connect to {url}: gave up after 3 attempts")
    late: list[RSocketServer] = []
    starter = threading.Timer(0.2, lambda: late.append(_serve(port)))  # comes up later
    starter.start()
    try:
        with connect(url, reconnect=QUICK) as client:
            assert Flow(client.request_stream("items", b"1")).to_list(timeout=TIMEOUT) == [
                b"item-0"
            ]
    finally:
        starter.join(TIMEOUT)
        for started in late:
            started.close()


def test_close_fails_the_requests_waiting_for_a_reconnection(server: RSocketServer) -> None:
    client = connect(f"tcp://127.0.0.1:{server.port}", reconnect=QUICK)
    _drop(client, server)
    waiting: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=1)
    client.request_stream("items").subscribe(waiting)
    client.close()
    assert waiting.wait_terminated(TIMEOUT)
    assert isinstance(waiting.error, RSocketConnectionError)
    assert str(waiting.error) == "the client closed the connection"
    assert client.closed


def test_a_refused_setup_is_not_dialled_again() -> None:
    guarded = _serve(token="right")
    try:
        url = f"tcp://127.0.0.1:{guarded.port}"
        with connect(url, token="wrong", reconnect=QUICK) as client:
            first: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=1)
            client.request_stream("items").subscribe(first)
            assert first.wait_terminated(TIMEOUT)
            second: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=1)
            client.request_stream("items").subscribe(second)
            assert second.wait_terminated(TIMEOUT)
            assert isinstance(second.error, RSocketConnectionError)
            assert str(second.error).startswith(f"{url} refused the connection")
            assert client.closed
            assert client.reconnects == 0
    finally:
        guarded.close()


def test_reconnect_needs_a_bounded_backoff() -> None:
    with pytest.raises(ValueError, match=r"^reconnect needs a bounded Backoff"):
        connect("tcp://127.0.0.1:1", reconnect=Backoff())
    with pytest.raises(TypeError, match=r"^reconnect must be a Backoff, got int$"):
        connect("tcp://127.0.0.1:1", reconnect=3)  # type: ignore[arg-type]
