"""A hostile peer cannot make the server hold more than its limits: memory, streams, time.

Each test runs our server in this process with small ``ServerLimits`` and drives it from a
raw socket (or a raw WebSocket) that does what a well-behaved client never would: send
and never read, announce huge frames, open more streams or connections than allowed. The
server's resident set is read from ``/proc/self/statm`` before and after, and a bound is
asserted (never a duration): every payload here is large enough that holding it would
cross that bound many times over.
"""

from __future__ import annotations

import contextlib
import itertools
import resource
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reactive_streams import Publisher, Subscriber, Subscription
from reactive_streams.reference import IterablePublisher
from reactive_streams.rsocket import ErrorCode, RSocketServer, ServerLimits, serve
from reactive_streams.rsocket._frames import (
    FLAG_COMPLETE,
    Frame,
    FrameType,
    encode_cancel,
    encode_keepalive,
    encode_payload,
    encode_request,
)
from reactive_streams.rsocket._metadata import ROUTING, encode_composite, encode_routing

from .conftest import TIMEOUT
from .rawpeer import RawPeer, request_stream, setup_frame

MIB = 2**20
LIMITS = ServerLimits(
    max_connections=6,
    max_streams=4,
    setup_timeout=0.5,
    max_setup_size=4096,
    connection_memory=1 * MIB,
    write_high_water=64 * 1024,
    min_keepalive=30.0,
)
ELEMENT = b"x" * (16 * 1024)
TINY = b"e"


def rss_mib() -> float:
    """This process's resident set now, in MiB."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * resource.getpagesize() / MIB


def settle(value: Callable[[], int], *, quiet: int = 6, poll: float = 0.05) -> int:
    """Wait until ``value()`` stops changing (``quiet`` polls in a row); give it."""
    last = value()
    still = 0
    deadline = time.monotonic() + TIMEOUT  # only against a hang
    while still < quiet and time.monotonic() < deadline:
        time.sleep(poll)
        now = value()
        still = still + 1 if now == last else 0
        last = now
    return last


def small_window_peer(port: int) -> RawPeer:
    """A raw connection whose kernel receive buffer is small: it reads nothing unasked."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    sock.settimeout(TIMEOUT)
    sock.connect(("127.0.0.1", port))
    return RawPeer(sock)


def send_until_blocked(peer: RawPeer, chunks: Iterator[bytes]) -> int:
    """Send ``chunks`` until they are all sent or the server stops reading; bytes sent."""
    peer.sock.settimeout(1.0)
    sent = 0
    try:
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                count = peer.sock.send(view)
                view = view[count:]
                sent += count
    except (TimeoutError, ConnectionError):
        pass  # the server stopped reading (or closed): that is the point
    finally:
        peer.sock.settimeout(TIMEOUT)
    return sent


class Produced:
    """An endless route of ``ELEMENT`` that counts what it emitted and whether it ended."""

    def __init__(self, element: bytes = ELEMENT) -> None:
        self.element = element
        self.count = 0
        self.subscribed = 0
        self.cancelled = 0
        self.count_at_cancel = 0
        self.cancelled_event = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, data: bytes) -> Publisher[bytes]:
        produced = self

        class _Counting(Publisher[bytes]):
            def subscribe(self, subscriber: Subscriber[bytes]) -> None:
                with produced._lock:
                    produced.subscribed += 1
                IterablePublisher(produced._elements()).subscribe(_Tap(subscriber, produced))

        return _Counting()

    def _elements(self) -> Iterator[bytes]:
        for _ in itertools.count():
            with self._lock:
                self.count += 1
            yield self.element


class _Tap(Subscriber[bytes]):
    def __init__(self, inner: Subscriber[bytes], produced: Produced) -> None:
        self._inner = inner
        self._produced = produced

    def on_subscribe(self, subscription: Subscription) -> None:
        produced = self._produced

        class _Cancel(Subscription):
            def request(self, n: int) -> None:
                subscription.request(n)

            def cancel(self) -> None:
                with produced._lock:
                    produced.cancelled += 1
                    produced.count_at_cancel = produced.count
                produced.cancelled_event.set()
                subscription.cancel()

        self._inner.on_subscribe(_Cancel())

    def on_next(self, element: bytes) -> None:
        self._inner.on_next(element)

    def on_error(self, error: Exception) -> None:
        self._inner.on_error(error)

    def on_complete(self) -> None:
        self._inner.on_complete()


@pytest.fixture
def produced() -> Produced:
    return Produced()


@pytest.fixture
def hostile_server(produced: Produced) -> Iterator[RSocketServer]:
    routes: dict[str, Callable[[bytes], Publisher[bytes]]] = {
        "endless": produced,
        "one": lambda data: IterablePublisher([b"one"]),
        "sink": lambda data: IterablePublisher([]),
    }
    with serve(routes, limits=LIMITS, token=None) as server:
        yield server


def routed(route: str) -> bytes:
    return encode_composite([(ROUTING, encode_routing(route))])


def connection_error(peer: RawPeer) -> Frame:
    """The last frame before EOF: the server's ERROR on stream 0."""
    frames = peer.rest_until_eof()
    assert frames, "the server closed without an ERROR frame"
    error = frames[-1]
    assert (error.frame_type, error.stream_id) == (FrameType.ERROR, 0), frames[-1]
    return error


# -- 1. keepalive echoes a peer never reads ------------------------------------------------


def test_keepalive_echoes_never_read_stay_within_the_budget(
    hostile_server: RSocketServer,
) -> None:
    peer = small_window_peer(hostile_server.port)
    try:
        peer.send(setup_frame())
        before = rss_mib()
        echo = encode_keepalive(respond=True, data=b"k" * (512 * 1024))
        sent = send_until_blocked(peer, itertools.repeat(echo, 96))
        held = settle(lambda: hostile_server.statistics().bytes_received)
        grown = rss_mib() - before
        # 48 MiB of echoes asked for; the server stops reading once it holds ~1 MiB of them
        assert sent < 40 * MIB, sent
        assert held < 24 * MIB, held
        assert grown < 24, f"the server's RSS grew by {grown:.0f} MiB"
        assert hostile_server.connection_count == 1  # paused, not closed: it may still read
    finally:
        peer.close()


# -- 2. fragment reassembly: the sum over stream IDs, and refusal on the first fragment ----


def test_fragment_chains_over_the_budget_close_the_connection(
    hostile_server: RSocketServer,
) -> None:
    peer = RawPeer.connect(hostile_server.port)
    try:
        peer.send(setup_frame())
        before = rss_mib()
        chunk = b"f" * (512 * 1024)

        def chains() -> Iterator[bytes]:
            for stream_id in range(1, 2 * 48, 2):  # 48 chains of 2 x 512 KiB
                yield encode_request(
                    FrameType.REQUEST_FNF, stream_id, chunk, routed("sink"), follows=True
                )
                yield encode_payload(stream_id, chunk, follows=True)

        send_until_blocked(peer, chains())
        grown = rss_mib() - before
        error = connection_error(peer)
        assert error.number == ErrorCode.CONNECTION_ERROR
        assert "memory budget" in error.data.decode()
        assert grown < 24, f"the server's RSS grew by {grown:.0f} MiB"
    finally:
        peer.close()


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (routed("nowhere"), "no route 'nowhere'"),
        (None, "route (and token) in its first fragment"),
    ],
)
def test_a_fragmented_request_is_refused_on_its_first_fragment(
    hostile_server: RSocketServer, metadata: bytes | None, message: str
) -> None:
    peer = RawPeer.connect(hostile_server.port)
    try:
        peer.send(setup_frame())
        peer.send(
            encode_request(
                FrameType.REQUEST_STREAM, 1, b"a" * 1000, metadata, initial_n=1, follows=True
            )
        )
        [refusal] = peer.frames(1)  # before the rest of the chain was sent
        assert (refusal.frame_type, refusal.stream_id) == (FrameType.ERROR, 1)
        assert refusal.number == ErrorCode.REJECTED
        assert message in refusal.data.decode()
        # the rest of the chain is ignored; the connection goes on
        peer.send(encode_payload(1, b"b" * 1000, follows=True))
        peer.send(encode_payload(1, b"c" * 1000))
        peer.send(request_stream(3, "one", 1))
        [element, complete] = peer.frames(2)
        assert (element.stream_id, element.data) == (3, b"one")
        assert complete.flags & FLAG_COMPLETE
    finally:
        peer.close()


def test_a_setup_without_the_token_is_refused_before_any_request_is_read() -> None:
    with serve({"sink": lambda data: IterablePublisher([])}, token="s3cret") as server:
        peer = RawPeer.connect(server.port)
        try:
            peer.send(setup_frame())
            first = encode_request(
                FrameType.REQUEST_STREAM, 1, b"a" * 1000, routed("sink"), initial_n=1, follows=True
            )
            peer.send(first)
            [refusal] = peer.frames(1)
            # Before: admitted, and refused per request (ERROR[REJECTED] on stream 1).
            assert (refusal.stream_id, refusal.number) == (0, ErrorCode.REJECTED_SETUP)
            assert refusal.data.decode() == (
                "authentication required: the SETUP carries no bearer token"
            )
        finally:
            peer.close()


# -- 3. WebSocket: the message size ----------------------------------------------------------


def _websocket_close_code(port: int, message: bytes) -> int:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect as ws_connect

    """Send ``message``; the close code the server gave (-1: none within the timeout)."""
    with ws_connect(f"ws://127.0.0.1:{port}/", max_size=None, open_timeout=TIMEOUT) as ws:
        try:
            ws.send(message)
            ws.recv(timeout=TIMEOUT)  # the server sends nothing back but a close
        except ConnectionClosed as closed:
            return -2 if closed.rcvd is None else closed.rcvd.code
        except TimeoutError:
            pass
        return -1


def test_websocket_message_over_the_frame_limit_is_refused_before_it_is_buffered() -> None:
    pytest.importorskip("websockets")
    message = b"\x00" * (48 * MIB)  # made before the baseline: the test's own bytes
    with serve({}, transport="ws", max_frame_size=64 * 1024, limits=LIMITS) as server:
        before = rss_mib()
        code = _websocket_close_code(server.port, message)
        grown = rss_mib() - before
        assert code == 1009  # message too big
        # the client's masked copy of the 48 MiB message is in this process too: the
        # server adds no copy of its own
        assert grown < 48 + 24, f"RSS grew by {grown:.0f} MiB"


def test_websocket_message_over_2_24_bytes_gets_a_clean_close() -> None:
    pytest.importorskip("websockets")
    with serve({}, transport="ws") as server:
        assert _websocket_close_code(server.port, b"\x00" * (2**24 + 1)) == 1009


# -- 4. streams that are never read, and the stream limit ---------------------------------


def test_streams_never_read_stop_at_a_bounded_number_of_elements(
    hostile_server: RSocketServer, produced: Produced
) -> None:
    peer = small_window_peer(hostile_server.port)
    try:
        peer.send(setup_frame())
        before = rss_mib()
        streams = 2 * LIMITS.max_streams
        peer.send(b"".join(request_stream(2 * i + 1, "endless", 2**31 - 1) for i in range(streams)))
        count = settle(lambda: produced.count)
        grown = rss_mib() - before
        # each stream: one write high-water mark in flight; the kernel's socket buffers
        # (a few MiB on loopback) hold the rest. One CHUNK (1024) per stream is 16 MiB.
        assert count < 600, count
        assert grown < 24, f"the server's RSS grew by {grown:.0f} MiB"
        assert produced.subscribed == LIMITS.max_streams
        refused: set[int] = set()
        for _ in range(100_000):  # the refusals are among the first frames; this is a cap
            [frame] = peer.frames(1)
            if frame.frame_type == FrameType.ERROR:
                assert frame.number == ErrorCode.REJECTED
                assert "too many streams open (the limit is 4)" in frame.data.decode()
                refused.add(frame.stream_id)
            if len(refused) == streams - LIMITS.max_streams:
                break
        assert refused == {2 * i + 1 for i in range(LIMITS.max_streams, streams)}
    finally:
        peer.close()


# -- 5. connections: the limit, the SETUP deadline and size -------------------------------


def test_connections_beyond_the_limit_are_refused(hostile_server: RSocketServer) -> None:
    peers = [RawPeer.connect(hostile_server.port) for _ in range(LIMITS.max_connections)]
    try:
        for peer in peers:
            peer.send(setup_frame())
        settle(lambda: hostile_server.connection_count, quiet=3)
        assert hostile_server.connection_count == LIMITS.max_connections
        extra = RawPeer.connect(hostile_server.port)
        try:
            error = connection_error(extra)
            assert error.number == ErrorCode.REJECTED_SETUP
            assert "limit of 6 connections" in error.data.decode()
        finally:
            extra.close()
        assert hostile_server.connection_count == LIMITS.max_connections
    finally:
        for peer in peers:
            peer.close()


def test_a_connection_without_setup_is_closed_at_the_deadline(
    hostile_server: RSocketServer,
) -> None:
    peer = RawPeer.connect(hostile_server.port)
    try:
        peer.send(b"\x00")  # a slowloris: one byte, then nothing
        error = connection_error(peer)
        assert error.number == ErrorCode.CONNECTION_ERROR
        assert "no SETUP within 0.5 s" in error.data.decode()
    finally:
        peer.close()


def test_a_huge_frame_before_setup_is_refused_at_its_length_prefix(
    hostile_server: RSocketServer,
) -> None:
    body = b"\x00" * (8 * MIB)  # the client's own 8 MiB, allocated before measuring
    before = rss_mib()
    peers = [RawPeer.connect(hostile_server.port) for _ in range(4)]
    try:
        for peer in peers:
            send_until_blocked(peer, iter([(2**24 - 1).to_bytes(3, "big"), body]))
        grown = rss_mib() - before
        for peer in peers:
            error = connection_error(peer)
            assert error.number == ErrorCode.REJECTED_SETUP
            assert "before SETUP: the limit is 4096 bytes" in error.data.decode()
        assert grown < 16, f"the server's RSS grew by {grown:.0f} MiB"
    finally:
        for peer in peers:
            peer.close()


# -- 6. the keepalive interval a client asks for ------------------------------------------


def test_a_client_keepalive_below_the_floor_is_raised_to_it(
    hostile_server: RSocketServer,
) -> None:
    peer = RawPeer.connect(hostile_server.port)
    try:
        peer.send(setup_frame(keepalive_ms=1, max_lifetime_ms=1))
        peer.send(request_stream(1, "one", 1))
        [element, _] = peer.frames(2)
        assert element.data == b"one"
        # silence far beyond the 1 ms max lifetime asked for: the server's floor is 30 s
        threading.Event().wait(0.3)
        peer.send(request_stream(3, "one", 1))
        [element, _] = peer.frames(2)
        assert (element.stream_id, element.data) == (3, b"one")
        [connection] = hostile_server._core.connections
        assert connection.settings.keepalive == LIMITS.min_keepalive
        assert connection.settings.max_lifetime == LIMITS.min_keepalive
    finally:
        peer.close()


# -- 9. over WebSocket, reading does not starve behind writing ----------------------------


def test_websocket_cancel_is_read_while_the_server_writes() -> None:
    pytest.importorskip("websockets")
    produced = Produced(TINY)
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect as ws_connect

    received = 0
    enough = threading.Event()

    def read(ws: Any) -> None:  # a fast reader: everything the server writes, at once
        nonlocal received
        with contextlib.suppress(ConnectionClosed, TimeoutError):
            while True:
                ws.recv(timeout=TIMEOUT)
                received += 1
                if received == 2000:
                    enough.set()

    with (
        serve({"endless": produced}, transport="ws") as server,
        ws_connect(f"ws://127.0.0.1:{server.port}/", open_timeout=TIMEOUT) as ws,
    ):
        reader = threading.Thread(target=read, args=(ws,), daemon=True)
        reader.start()
        ws.send(setup_frame()[3:])
        ws.send(request_stream(1, "endless", 2**31 - 1)[3:])
        assert enough.wait(TIMEOUT)
        sent_at = produced.count
        ws.send(encode_cancel(1)[3:])
        assert produced.cancelled_event.wait(TIMEOUT)
        # elements the route produced between the CANCEL leaving the client and reaching
        # it: the frames in flight. Reading behind writing made it hundreds of thousands.
        late = produced.count_at_cancel - sent_at
        ws.close()
        reader.join(TIMEOUT)
    # The server keeps writing while the CANCEL travels and waits for its read: about one
    # write window (64 KiB, some 7,300 frames of one byte) on each side of the CANCEL, and
    # more while the machine is loaded (frames go out in batches of up to 256). The defect
    # this guards against, a CANCEL read only behind the writing, let 379,929 through.
    assert late < 32 * 1024, late
