"""Bad input and faults: every stream ends once, the server goes on, nothing hangs."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from reactive_streams import ProtocolViolationError, Publisher, Subscriber, Subscription
from reactive_streams.reference import IterablePublisher
from reactive_streams.rsocket import (
    ErrorCode,
    RSocketConnectionError,
    RSocketServer,
    ServerLimits,
    connect,
    serve,
)
from reactive_streams.rsocket._frames import FrameType, encode_payload
from reactive_streams.testing import RecordingSubscriber, collect

from .conftest import TIMEOUT, TrackedPublisher, items_route, numbered
from .rawpeer import RawPeer, RawServer, request_stream, setup_frame

MALFORMED = b"\x00\x00\x06\x00\x00\x00\x01\x28\x00"  # PAYLOAD with neither NEXT nor COMPLETE
TOO_LONG = (5000).to_bytes(3, "big") + b"\x00" * 10
MID_FRAME = b"\x00\x00\x20\x00\x00\x00"  # a 32-byte frame announced, 3 bytes sent, then EOF

FAULTS = {
    "malformed": (MALFORMED, "neither the NEXT nor the COMPLETE"),
    "too-long": (TOO_LONG, "beyond the maximum of 1024"),
    "mid-frame": (MID_FRAME, "in the middle of a frame"),
}


@pytest.fixture
def raw_server() -> Iterator[RawServer]:
    server = RawServer()
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize("fault", list(FAULTS))
def test_client_fails_every_stream_once_on_a_faulty_server(
    raw_server: RawServer, fault: str
) -> None:
    wire, message = FAULTS[fault]
    with connect(f"tcp://127.0.0.1:{raw_server.port}", max_frame_size=1024) as client:
        peer = raw_server.accept()
        try:
            first: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=5)
            second: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=5)
            client.request_stream("a").subscribe(first)
            client.request_stream("b").subscribe(second)
            setup, one, three = peer.frames(3)
            assert setup.frame_type == FrameType.SETUP
            assert (one.stream_id, three.stream_id) == (1, 3)
            peer.send(encode_payload(1, b"before"))
            assert first.wait_for_elements(1, TIMEOUT)
            peer.send(wire)
            if fault == "mid-frame":
                peer.close()
            for subscriber in (first, second):
                assert subscriber.wait_terminated(TIMEOUT)
                assert isinstance(subscriber.error, RSocketConnectionError)
                assert message in str(subscriber.error)
                assert not subscriber.completed
                assert subscriber.violations == []
            assert first.elements == [b"before"]
            if fault != "mid-frame":
                [error] = peer.rest_until_eof()
                assert (error.frame_type, error.stream_id) == (FrameType.ERROR, 0)
                assert error.number == ErrorCode.CONNECTION_ERROR
                assert message in error.data.decode()
        finally:
            peer.close()
    assert client.closed


@pytest.mark.parametrize("fault", list(FAULTS))
def test_server_closes_a_faulty_connection_and_goes_on(fault: str) -> None:
    wire, message = FAULTS[fault]
    tracked = TrackedPublisher()
    routes = {"tracked": lambda data: tracked, "items": items_route}
    with serve(routes, max_frame_size=1024) as server:
        peer = RawPeer.connect(server.port)
        try:
            peer.send(setup_frame() + request_stream(1, "tracked", 1))
            [payload] = peer.frames(1)
            assert (payload.frame_type, payload.data) == (FrameType.PAYLOAD, b"item-0")
            peer.send(wire)
            if fault == "mid-frame":
                peer.close()
            else:
                [error] = peer.rest_until_eof()
                assert (error.frame_type, error.number) == (
                    FrameType.ERROR,
                    ErrorCode.CONNECTION_ERROR,
                )
                assert message in error.data.decode()
            assert tracked.cancelled.wait(TIMEOUT), "the stream's publisher was not cancelled"
        finally:
            peer.close()
        _still_serves(server)


def _still_serves(server: RSocketServer) -> None:
    with connect(f"tcp://127.0.0.1:{server.port}") as client:
        assert collect(client.request_stream("items", b"3"), timeout=TIMEOUT) == list(numbered(3))


def test_server_refuses_a_first_frame_that_is_not_setup() -> None:
    with serve({"items": items_route}) as server:
        peer = RawPeer.connect(server.port)
        try:
            peer.send(request_stream(1, "items", 1))
            [error] = peer.rest_until_eof()
            assert error.number == ErrorCode.INVALID_SETUP
        finally:
            peer.close()
        _still_serves(server)


def test_peer_sending_more_than_requested_is_an_error_naming_it(raw_server: RawServer) -> None:
    with connect(f"tcp://127.0.0.1:{raw_server.port}") as client:
        peer = raw_server.accept()
        try:
            subscriber: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=2)
            client.request_stream("a").subscribe(subscriber)
            _, request = peer.frames(2)
            assert request.number == 2
            peer.send(b"".join(encode_payload(1, b"x%d" % index) for index in range(3)))
            assert subscriber.wait_terminated(TIMEOUT)
            assert isinstance(subscriber.error, ProtocolViolationError)
            assert subscriber.error.rule == "1.1"
            assert "more PAYLOAD frames than were requested" in str(subscriber.error)
            assert subscriber.elements == [b"x0", b"x1"]
            [cancel] = peer.frames(1)
            assert (cancel.frame_type, cancel.stream_id) == (FrameType.CANCEL, 1)
        finally:
            peer.close()


def test_client_keepalive_timeout_fails_the_streams(raw_server: RawServer) -> None:
    url = f"tcp://127.0.0.1:{raw_server.port}"
    with connect(url, keepalive=0.05, max_lifetime=0.3) as client:
        peer = raw_server.accept()  # accepts, reads nothing, answers nothing
        try:
            subscriber: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=1)
            client.request_stream("a").subscribe(subscriber)
            assert subscriber.wait_terminated(TIMEOUT)
            assert isinstance(subscriber.error, RSocketConnectionError)
            assert "keepalive timeout" in str(subscriber.error)
        finally:
            peer.close()


def test_server_closes_a_silent_client_after_its_max_lifetime() -> None:
    with serve({"items": items_route}) as server:
        peer = RawPeer.connect(server.port)
        try:
            peer.send(setup_frame(keepalive_ms=50, max_lifetime_ms=300))
            frames = peer.rest_until_eof()
            assert frames[-1].frame_type == FrameType.ERROR
            assert "keepalive timeout" in frames[-1].data.decode()
        finally:
            peer.close()


def test_hundreds_of_idle_connections_use_no_threads() -> None:
    # All 300 connect before any SETUP is read: each is pending for a while.
    limits = ServerLimits(
        max_pending_connections=400, max_connections_per_address=400, max_pending_per_address=400
    )
    with serve({"items": items_route}, limits=limits) as server:
        _still_serves(server)  # start the worker threads the server will use anyway
        before = threading.active_count()
        peers = [RawPeer.connect(server.port) for _ in range(300)]
        try:
            for peer in peers:
                peer.send(setup_frame())
            _still_serves(server)
            assert server.connection_count >= 300
            assert threading.active_count() - before <= 4  # the test's own client only
        finally:
            for peer in peers:
                peer.close()


def test_a_slow_stream_does_not_stall_the_others(server: RSocketServer) -> None:
    with connect(f"tcp://127.0.0.1:{server.port}") as client:
        stalled: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=1)
        client.request_stream("tracked").subscribe(stalled)
        assert stalled.wait_for_elements(1, TIMEOUT)
        fast = collect(client.request_stream("items", b"3000"), timeout=TIMEOUT)
        assert fast == list(numbered(3000))
        assert stalled.elements == [b"item-0"]
        stalled.cancel()


def test_unbounded_demand_is_topped_up_as_consumed(server: RSocketServer) -> None:
    with connect(f"tcp://127.0.0.1:{server.port}") as client:
        elements = collect(client.request_stream("items", b"5000", window=64), timeout=TIMEOUT)
        assert elements == list(numbered(5000))


def test_a_failing_factory_leaves_the_server_serving(server: RSocketServer) -> None:
    with connect(f"tcp://127.0.0.1:{server.port}") as client:
        for _ in range(2):
            with pytest.raises(Exception, match=r"route 'boom' failed: RuntimeError"):
                collect(client.request_stream("boom"), timeout=TIMEOUT)
        assert collect(client.request_stream("items", b"2"), timeout=TIMEOUT) == list(numbered(2))


def test_large_payloads_are_fragmented_and_reassembled() -> None:
    big = bytes(range(256)) * 40  # 10 KiB against a 256-byte frame limit

    def echo_big(data: bytes) -> Publisher[bytes]:
        return IterablePublisher([data, big])

    with (
        serve({"big": echo_big}, max_frame_size=256) as server,
        connect(f"tcp://127.0.0.1:{server.port}", max_frame_size=256) as client,
    ):
        assert collect(client.request_stream("big", big[::-1]), timeout=TIMEOUT) == [big[::-1], big]


def test_complete_flag_alone_completes(raw_server: RawServer) -> None:
    with connect(f"tcp://127.0.0.1:{raw_server.port}") as client:
        peer = raw_server.accept()
        try:
            subscriber: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=3)
            client.request_stream("a").subscribe(subscriber)
            peer.frames(2)
            peer.send(encode_payload(1, b"only", complete=True))
            assert subscriber.wait_terminated(TIMEOUT)
            assert (subscriber.elements, subscriber.completed) == ([b"only"], True)
        finally:
            peer.close()


def test_a_stream_without_demand_learns_that_its_connection_died(raw_server: RawServer) -> None:
    with connect(f"tcp://127.0.0.1:{raw_server.port}") as client:
        peer = raw_server.accept()
        idle: RecordingSubscriber[bytes] = RecordingSubscriber()  # subscribes, never requests
        client.request_stream("a").subscribe(idle)
        peer.close()
        assert idle.wait_terminated(TIMEOUT)
        assert isinstance(idle.error, RSocketConnectionError)
        assert idle.elements == []


def test_frames_the_spec_says_to_ignore_are_ignored() -> None:
    metadata_push = b"\x00\x00\x08\x00\x00\x00\x05\x30\x00mm"  # METADATA_PUSH, stream 5
    with serve({"items": items_route}) as server:
        peer = RawPeer.connect(server.port)
        try:
            peer.send(setup_frame() + metadata_push + encode_payload(0, b"stray"))
            peer.send(request_stream(1, "items", 5, b"2"))
            first, second, complete = peer.frames(3)
            assert (first.data, second.data) == (b"item-0", b"item-1")
            assert complete.frame_type == FrameType.PAYLOAD and complete.data == b""
        finally:
            peer.close()


@pytest.mark.parametrize("closing", ["server", "client"])
def test_closing_either_side_mid_stream_ends_it_once_and_cancels_upstream(closing: str) -> None:
    tracked = TrackedPublisher()
    with serve({"tracked": lambda data: tracked}) as server:
        client = connect(f"tcp://127.0.0.1:{server.port}")
        try:
            subscriber: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=2)
            client.request_stream("tracked").subscribe(subscriber)
            assert subscriber.wait_for_elements(2, TIMEOUT)
            if closing == "server":
                server.close()
            else:
                client.close()
            assert subscriber.wait_terminated(TIMEOUT)
            assert isinstance(subscriber.error, RSocketConnectionError)
            assert subscriber.violations == []
            assert tracked.cancelled.wait(TIMEOUT)
        finally:
            client.close()


class _Overflowing(Publisher[bytes]):
    """A broken publisher: every request(n) gets n + 2 elements (it breaks Rule 1.1)."""

    def subscribe(self, subscriber: Subscriber[bytes]) -> None:
        class _Subscription(Subscription):
            def request(self, n: int) -> None:
                for index in range(n + 2):
                    subscriber.on_next(b"x%d" % index)

            def cancel(self) -> None:
                pass

        subscriber.on_subscribe(_Subscription())


def test_server_never_sends_more_than_requested_even_if_its_publisher_does() -> None:
    with serve({"overflow": lambda data: _Overflowing()}) as server:
        peer = RawPeer.connect(server.port)
        try:
            peer.send(setup_frame() + request_stream(1, "overflow", 3))
            frames = peer.frames(4)
            assert [frame.data for frame in frames[:3]] == [b"x0", b"x1", b"x2"]
            error = frames[3]
            assert (error.frame_type, error.number) == (
                FrameType.ERROR,
                ErrorCode.APPLICATION_ERROR,
            )
            assert error.data.decode() == (
                "Rule 1.1: route 'overflow' emitted more elements than were requested"
            )
        finally:
            peer.close()


def test_a_fire_and_forget_sent_just_before_close_is_carried_out_every_time() -> None:
    received: list[bytes] = []
    lock = threading.Lock()
    all_in = threading.Event()
    trials = 100

    def record(data: bytes) -> Publisher[bytes]:
        def work() -> Iterator[bytes]:  # runs when the stream is requested, not before
            with lock:
                received.append(data)
                if len(received) == trials:
                    all_in.set()
            yield from ()

        return IterablePublisher(work())

    with serve({"commit": record}) as server:
        for trial in range(trials):
            with connect(f"tcp://127.0.0.1:{server.port}") as client:
                client.fire_and_forget("commit", str(trial).encode())
        # Before: 4 to 7 of 8 were cancelled by the close before their work started.
        assert all_in.wait(TIMEOUT), f"{len(received)} of {trials} carried out"
    assert sorted(received, key=int) == [str(trial).encode() for trial in range(trials)]
