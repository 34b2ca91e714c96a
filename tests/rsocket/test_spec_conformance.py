"""What the RSocket spec asks of stream IDs, setup errors, fragments, and the lifecycle.

Each test names the spec's section (rsocket/rsocket ``Protocol.md``) or the Reactive
Streams rule it checks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from reactive_streams import Publisher, Subscriber, Subscription
from reactive_streams._core import set_undeliverable_hook
from reactive_streams.rsocket import (
    ErrorCode,
    RSocketServer,
    RSocketStreamError,
    connect,
    serve,
)
from reactive_streams.rsocket._frames import (
    MAX_STREAM_ID,
    FrameType,
    encode_cancel,
    encode_error,
    encode_payload,
    encode_request,
    encode_request_n,
)
from reactive_streams.rsocket._metadata import ROUTING, encode_composite, encode_routing
from reactive_streams.testing import RecordingSubscriber

from .conftest import TIMEOUT, TrackedPublisher, items_route
from .rawpeer import RawPeer, RawServer, request_stream, setup_frame


@pytest.fixture
def raw_server() -> Iterator[RawServer]:
    server = RawServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def peer(server: RSocketServer) -> Iterator[RawPeer]:
    """A raw client of the ``server`` fixture, its SETUP sent."""
    raw = RawPeer.connect(server.port)
    try:
        raw.send(setup_frame())
        yield raw
    finally:
        raw.close()


def _served(peer: RawPeer, stream_id: int) -> None:
    """Ask for one element of ``items`` on ``stream_id`` and check it comes, then COMPLETE."""
    peer.send(request_stream(stream_id, "items", 5, b"1"))
    item, complete = peer.frames(2)
    assert (item.stream_id, item.data) == (stream_id, b"item-0")
    assert (complete.stream_id, complete.flags & 0x40) == (stream_id, 0x40)


# -- lifecycle ----------------------------------------------------------------------------


@pytest.mark.parametrize("interrupt", [SystemExit, KeyboardInterrupt])
def test_a_factory_raising_a_base_exception_ends_its_stream_and_is_reraised(
    interrupt: type[BaseException],
) -> None:
    def factory(data: bytes) -> Publisher[bytes]:
        raise interrupt("stop")

    reported: list[BaseException] = []
    previous = set_undeliverable_hook(reported.append)
    try:
        with (
            serve({"stop": factory}) as server,
            connect(f"tcp://127.0.0.1:{server.port}") as client,
        ):
            subscriber: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=1)
            client.request_stream("stop").subscribe(subscriber)
            assert subscriber.wait_terminated(TIMEOUT), "no terminal signal for the stream"
            assert isinstance(subscriber.error, RSocketStreamError)
            assert subscriber.error.code == ErrorCode.APPLICATION_ERROR
            assert f"interrupted by {interrupt.__name__}" in str(subscriber.error)
            assert server.statistics().open_streams == 0  # the stream was forgotten
    finally:
        set_undeliverable_hook(previous)
    assert any(isinstance(error, interrupt) for error in reported)  # never swallowed


class _Blocking(Publisher[bytes]):
    """A publisher whose ``request`` blocks until the test releases it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.on_daemon_thread: bool | None = None

    def subscribe(self, subscriber: Subscriber[bytes]) -> None:
        publisher = self

        class _Stuck(Subscription):
            def request(self, n: int) -> None:
                publisher.on_daemon_thread = threading.current_thread().daemon
                publisher.entered.set()
                publisher.release.wait(TIMEOUT * 3)

            def cancel(self) -> None:
                pass

        subscriber.on_subscribe(_Stuck())


def test_close_returns_within_its_timeout_while_a_publisher_is_blocked() -> None:
    blocking = _Blocking()
    server = serve({"block": lambda data: blocking})
    client = connect(f"tcp://127.0.0.1:{server.port}")
    closer = threading.Thread(target=server.close, kwargs={"timeout": 0.5})
    try:
        subscriber: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=1)
        client.request_stream("block").subscribe(subscriber)
        assert blocking.entered.wait(TIMEOUT)
        closer.start()
        closer.join(TIMEOUT)
        assert not closer.is_alive(), "close() did not return while the publisher was blocked"
        assert not blocking.release.is_set()  # it returned before the publisher did
        assert blocking.on_daemon_thread  # the stuck worker cannot hold the process up
        assert subscriber.wait_terminated(TIMEOUT)
    finally:
        blocking.release.set()
        if closer.is_alive():
            closer.join(TIMEOUT)
        client.close()
        server.close()


def test_a_failing_route_is_signalled_without_any_request(server: RSocketServer) -> None:
    # Rules 1.4 and 1.9: on_error needs no demand; the stream opens at subscribe
    with connect(f"tcp://127.0.0.1:{server.port}") as client:
        missing: RecordingSubscriber[bytes] = RecordingSubscriber()  # never requests
        client.request_stream("missing").subscribe(missing)
        failing: RecordingSubscriber[bytes] = RecordingSubscriber()
        client.request_response("boom").subscribe(failing)
        for subscriber, code in ((missing, ErrorCode.REJECTED), (failing, 0x201)):
            assert subscriber.wait_terminated(TIMEOUT)
            assert isinstance(subscriber.error, RSocketStreamError)
            assert subscriber.error.code == code
            assert subscriber.elements == []


def test_the_stream_opens_at_subscribe_with_one_element_of_credit(
    raw_server: RawServer,
) -> None:
    with connect(f"tcp://127.0.0.1:{raw_server.port}") as client:
        peer = raw_server.accept()
        try:
            subscriber: RecordingSubscriber[bytes] = RecordingSubscriber()  # no demand yet
            client.request_stream("a").subscribe(subscriber)
            _, request = peer.frames(2)
            assert (request.frame_type, request.number) == (FrameType.REQUEST_STREAM, 1)
            peer.send(encode_payload(1, b"x0"))  # held: no demand yet (Rule 1.1)
            subscriber.request(3)
            [more] = peer.frames(1)
            assert (more.frame_type, more.number) == (FrameType.REQUEST_N, 2)
            peer.send(encode_payload(1, b"x1") + encode_payload(1, b"x2", complete=True))
            assert subscriber.wait_terminated(TIMEOUT)
            assert subscriber.elements == [b"x0", b"x1", b"x2"]
            assert subscriber.completed
            assert subscriber.violations == []
        finally:
            peer.close()


# -- stream IDs (Protocol.md, "Stream Identifiers"; "Handling the Unexpected") ------------


def test_the_client_wraps_its_stream_ids_and_skips_those_in_use(raw_server: RawServer) -> None:
    with connect(f"tcp://127.0.0.1:{raw_server.port}") as client:
        peer = raw_server.accept()
        try:
            client.request_stream("a").subscribe(RecordingSubscriber(initial_request=1))
            _, first = peer.frames(2)
            assert first.stream_id == 1  # still open: the wrap must skip it
            client._connection._last_stream_id = MAX_STREAM_ID - 4  # 2**31 streams later
            ids = []
            for _ in range(3):
                client.request_stream("a").subscribe(RecordingSubscriber(initial_request=1))
                [request] = peer.frames(1)
                ids.append(request.stream_id)
            assert ids == [MAX_STREAM_ID - 2, MAX_STREAM_ID, 3]
        finally:
            peer.close()


def test_the_server_serves_lower_ids_after_higher_ones(peer: RawPeer) -> None:
    _served(peer, 5)
    _served(peer, 3)  # a requester may wrap and reuse IDs: order proves nothing
    _served(peer, 5)  # the stream on 5 ended: its ID may be used again


def test_a_request_on_an_id_in_use_is_rejected_on_that_id() -> None:
    tracked = TrackedPublisher()
    with serve({"tracked": lambda data: tracked, "items": items_route}) as server:
        peer = RawPeer.connect(server.port)
        try:
            peer.send(setup_frame() + request_stream(7, "tracked", 1))
            [element] = peer.frames(1)
            assert (element.stream_id, element.data) == (7, b"item-0")
            peer.send(request_stream(7, "items", 5, b"1"))
            [error] = peer.frames(1)
            assert (error.frame_type, error.stream_id) == (FrameType.ERROR, 7)
            assert error.number == ErrorCode.REJECTED
            assert error.data.decode() == "stream ID 7 is in use"
            assert not tracked.cancelled.is_set()  # the stream already there goes on
            _served(peer, 9)
        finally:
            peer.close()


def test_a_request_on_an_even_id_is_refused_as_invalid(peer: RawPeer) -> None:
    peer.send(request_stream(2, "items", 5, b"1"))
    [error] = peer.frames(1)
    assert (error.frame_type, error.stream_id) == (FrameType.ERROR, 2)
    assert error.number == ErrorCode.INVALID
    assert error.data.decode() == "stream ID 2 is even: a client's stream IDs are odd"
    _served(peer, 1)


def test_the_server_ignores_frames_on_unknown_stream_ids(peer: RawPeer) -> None:
    peer.send(
        encode_request_n(99, 5)
        + encode_cancel(97)
        + encode_payload(95, b"stray")
        + encode_error(93, ErrorCode.APPLICATION_ERROR, "stray")
    )
    _served(peer, 1)


def test_the_client_ignores_frames_on_unknown_stream_ids(raw_server: RawServer) -> None:
    with connect(f"tcp://127.0.0.1:{raw_server.port}") as client:
        peer = raw_server.accept()
        try:
            subscriber: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=2)
            client.request_stream("a").subscribe(subscriber)
            peer.frames(2)
            peer.send(
                encode_payload(99, b"stray")
                + encode_error(97, ErrorCode.APPLICATION_ERROR, "stray")
                + encode_request_n(95, 3)
                + encode_cancel(93)
                + encode_payload(1, b"x", complete=True)
            )
            assert subscriber.wait_terminated(TIMEOUT)
            assert (subscriber.elements, subscriber.completed) == ([b"x"], True)
        finally:
            peer.close()


# -- fragments, metadata and setup --------------------------------------------------------


def test_a_cancel_in_the_middle_of_a_fragmented_request_drops_it() -> None:
    calls: list[bytes] = []

    def counted(data: bytes) -> Publisher[bytes]:
        calls.append(data)
        return items_route(data)

    with serve({"items": counted}) as server:
        peer = RawPeer.connect(server.port)
        try:
            metadata = encode_composite([(ROUTING, encode_routing("items"))])
            head = encode_request(
                FrameType.REQUEST_STREAM, 1, b"", metadata, initial_n=5, follows=True
            )
            in_flight = encode_payload(1, b"9")  # the rest of the chain, crossing the CANCEL
            peer.send(setup_frame() + head + encode_cancel(1) + in_flight)
            _served(peer, 3)
            assert calls == [b"1"]  # the cancelled request never reached its route
        finally:
            peer.close()


@pytest.mark.parametrize(
    "metadata",
    [b"\x05ab", encode_composite([(ROUTING, b"\x09items")])],
    ids=["composite", "routing"],
)
def test_malformed_request_metadata_fails_that_stream_only(peer: RawPeer, metadata: bytes) -> None:
    peer.send(encode_request(FrameType.REQUEST_STREAM, 1, b"", metadata, initial_n=5))
    [error] = peer.frames(1)
    assert (error.frame_type, error.stream_id) == (FrameType.ERROR, 1)
    assert error.number == ErrorCode.INVALID
    assert "overruns" in error.data.decode()
    _served(peer, 3)


def _setup_with_length(body: bytes) -> bytes:
    return len(body).to_bytes(3, "big") + body


@pytest.mark.parametrize(
    ("wire", "code", "message"),
    [
        (
            _setup_with_length(setup_frame()[3:13]),  # header and versions only
            ErrorCode.INVALID_SETUP,
            "SETUP frame of 10 bytes is too short",
        ),
        (
            setup_frame().replace(b"octet", b"oc\xc3\xa9t"),
            ErrorCode.UNSUPPORTED_SETUP,
            "SETUP frame with a MIME type that is not US-ASCII",
        ),
    ],
    ids=["truncated", "non-ascii-mime"],
)
def test_a_setup_the_server_cannot_read_is_refused_with_a_setup_code(
    wire: bytes, code: ErrorCode, message: str
) -> None:
    with serve({"items": items_route}) as server:
        peer = RawPeer.connect(server.port)
        try:
            peer.send(wire)
            [error] = peer.rest_until_eof()
            assert (error.frame_type, error.stream_id, error.number) == (
                FrameType.ERROR,
                0,
                code,
            )
            assert message in error.data.decode()
        finally:
            peer.close()
