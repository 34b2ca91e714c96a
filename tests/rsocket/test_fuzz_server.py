"""Fuzzing a live server: generated frame streams, and byte-level mutations of valid ones.

Whatever a peer sends, the server must not crash, must end every stream it opened (the
route's subscription ends exactly once: completed, failed or cancelled; ``open_streams``
back to 0 once the peer has gone), must answer each stream with at most one terminal
frame, must run no more than ``max_streams`` route subscriptions for one connection, and
must stay within its memory budget.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reactive_streams import Publisher, Subscriber, Subscription
from reactive_streams.reference import IterablePublisher
from reactive_streams.rsocket import RSocketServer, ServerLimits, serve
from reactive_streams.rsocket._frames import (
    FLAG_COMPLETE,
    Frame,
    FrameReader,
    FrameType,
    encode_cancel,
    encode_error,
    encode_keepalive,
    encode_payload,
    encode_request,
    encode_request_n,
)
from reactive_streams.rsocket._metadata import ROUTING, encode_composite, encode_routing

from .rawpeer import setup_frame
from .test_hostile_peers import rss_mib

LIMITS = ServerLimits(
    max_connections=8,
    max_streams=4,
    setup_timeout=2.0,
    max_setup_size=4096,
    connection_memory=256 * 1024,
    write_high_water=16 * 1024,
    min_keepalive=30.0,
)
ROUTES = ("finite", "one", "empty", "failing", "endless", "missing")


class Ledger:
    """Every subscription a route gave out, and how many times each one ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ends: list[int] = []
        self.peak = 0  # the most subscriptions open at once

    def publisher(self, elements: Callable[[], Iterator[bytes]], fail: bool) -> Publisher[bytes]:
        ledger = self

        class _Ledgered(Publisher[bytes]):
            def subscribe(self, subscriber: Subscriber[bytes]) -> None:
                with ledger._lock:
                    index = len(ledger.ends)
                    ledger.ends.append(0)
                    ledger.peak = max(ledger.peak, sum(1 for n in ledger.ends if n == 0))

                def end() -> None:
                    with ledger._lock:
                        ledger.ends[index] += 1

                source: Publisher[bytes] = IterablePublisher(_failing() if fail else elements())
                source.subscribe(_Ending(subscriber, end))

        return _Ledgered()

    def open(self) -> int:
        with self._lock:
            return sum(1 for count in self.ends if count == 0)


def _failing() -> Iterator[bytes]:
    yield b"before"
    raise RuntimeError("the route failed on purpose")


class _Ending(Subscriber[bytes]):
    """Passes signals on; calls ``end`` on the terminal signal or on cancel (first only)."""

    def __init__(self, inner: Subscriber[bytes], end: Callable[[], None]) -> None:
        self._inner = inner
        self._end = end
        self._ended = False
        self._lock = threading.Lock()

    def _finish(self) -> None:
        with self._lock:
            first = not self._ended
            self._ended = True
        if first:
            self._end()

    def on_subscribe(self, subscription: Subscription) -> None:
        ending = self

        class _Cancelling(Subscription):
            def request(self, n: int) -> None:
                subscription.request(n)

            def cancel(self) -> None:
                ending._finish()
                subscription.cancel()

        self._inner.on_subscribe(_Cancelling())

    def on_next(self, element: bytes) -> None:
        self._inner.on_next(element)

    def on_error(self, error: Exception) -> None:
        self._finish()
        self._inner.on_error(error)

    def on_complete(self) -> None:
        self._finish()
        self._inner.on_complete()


@pytest.fixture(scope="module")
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture(scope="module")
def fuzz_server(ledger: Ledger) -> Iterator[RSocketServer]:
    routes: dict[str, Callable[[bytes], Publisher[bytes]]] = {
        "finite": lambda data: ledger.publisher(lambda: iter([b"a", b"b", b"c"]), False),
        "one": lambda data: ledger.publisher(lambda: iter([b"one"]), False),
        "empty": lambda data: ledger.publisher(lambda: iter([]), False),
        "failing": lambda data: ledger.publisher(lambda: iter([]), True),
        "endless": lambda data: ledger.publisher(lambda: itertools.repeat(b"e" * 100), False),
    }
    with serve(routes, limits=LIMITS, max_frame_size=4096) as server:
        yield server


stream_ids = st.integers(min_value=1, max_value=15).map(lambda n: 2 * n - 1)
routes = st.sampled_from(ROUTES)
metadata = routes.map(lambda route: encode_composite([(ROUTING, encode_routing(route))]))
small_data = st.binary(max_size=64)


BURST = setup_frame() + b"".join(
    encode_request(
        FrameType.REQUEST_STREAM,
        stream_id,
        b"",
        encode_composite([(ROUTING, encode_routing("endless"))]),
        initial_n=2**31 - 1,
    )
    for stream_id in range(1, 16, 2)
)
"""Eight endless streams at once: twice the stream limit."""


@st.composite
def frames(draw: st.DrawFn) -> bytes:
    kind = draw(
        st.sampled_from(
            ["stream", "response", "fnf", "request_n", "cancel", "keepalive", "payload", "error"]
        )
    )
    stream_id = draw(stream_ids)
    if kind == "stream":
        return encode_request(
            FrameType.REQUEST_STREAM,
            stream_id,
            draw(small_data),
            draw(metadata),
            initial_n=draw(st.integers(1, 2**31 - 1)),
            follows=draw(st.booleans()),
        )
    if kind in ("response", "fnf"):
        frame_type = FrameType.REQUEST_RESPONSE if kind == "response" else FrameType.REQUEST_FNF
        return encode_request(
            frame_type,
            stream_id,
            draw(small_data),
            draw(metadata),
            follows=draw(st.booleans()),
        )
    if kind == "request_n":
        return encode_request_n(stream_id, draw(st.integers(1, 2**31 - 1)))
    if kind == "cancel":
        return encode_cancel(stream_id)
    if kind == "keepalive":
        return encode_keepalive(respond=draw(st.booleans()), data=draw(st.binary(max_size=2048)))
    if kind == "payload":
        follows = draw(st.booleans())
        return encode_payload(
            stream_id, draw(st.binary(max_size=2048)), follows=follows, complete=not follows
        )
    return encode_error(stream_id, draw(st.integers(0x201, 0x205)), "fuzz")


@st.composite
def frame_streams(draw: st.DrawFn) -> bytes:
    body = b"".join(draw(st.lists(frames(), max_size=12)))
    return (setup_frame() if draw(st.booleans()) or not body else b"") + body


@st.composite
def mutated_streams(draw: st.DrawFn) -> bytes:
    wire = bytearray(setup_frame() + b"".join(draw(st.lists(frames(), min_size=1, max_size=8))))
    for _ in range(draw(st.integers(1, 4))):
        operation = draw(st.sampled_from(["flip", "truncate", "insert", "delete"]))
        position = draw(st.integers(0, max(0, len(wire) - 1)))
        if operation == "flip" and wire:
            wire[position] ^= draw(st.integers(1, 255))
        elif operation == "truncate":
            del wire[position:]
        elif operation == "insert":
            wire[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif wire:
            del wire[position : position + draw(st.integers(1, 8))]
    return bytes(wire)


def exchange(port: int, wire: bytes) -> list[Frame]:
    """Send ``wire``, read what comes back (bounded), close; the frames read."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10.0)
    reader = FrameReader()
    received: list[Frame] = []
    try:
        sock.settimeout(2.0)
        with contextlib.suppress(TimeoutError, ConnectionError):
            sock.sendall(wire)
        sock.settimeout(0.1)
        read = 0
        while read < 256 * 1024:  # endless routes: read a little, then hang up
            try:
                data = sock.recv(65536)
            except (TimeoutError, ConnectionError):
                break
            if not data:
                break
            read += len(data)
            received += reader.feed(data)  # the server never writes a frame it refuses
    finally:
        sock.close()
    return received


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


_REQUESTS = frozenset(
    {
        FrameType.REQUEST_RESPONSE,
        FrameType.REQUEST_FNF,
        FrameType.REQUEST_STREAM,
        FrameType.REQUEST_CHANNEL,
    }
)


def requests_per_id(wire: bytes) -> dict[int, int]:
    """How many requests the wire sends on each stream ID (as far as it decodes)."""
    counts: dict[int, int] = {}
    with contextlib.suppress(Exception):  # a mutated wire decodes up to its damage
        for frame in FrameReader().feed(wire):
            if frame.frame_type in _REQUESTS:
                counts[frame.stream_id] = counts.get(frame.stream_id, 0) + 1
    return counts


def check(server: RSocketServer, ledger: Ledger, wire: bytes, baseline: float) -> None:
    received = exchange(server.port, wire)
    # An ID may be used again once its stream ended: each request on it is one life.
    lives = requests_per_id(wire)
    ended: dict[int, int] = {}
    for frame in received:
        if frame.stream_id == 0:
            continue
        used = ended.get(frame.stream_id, 0)
        assert used < max(1, lives.get(frame.stream_id, 0)), f"a frame after the end of {frame}"
        if frame.frame_type == FrameType.ERROR or (
            frame.frame_type == FrameType.PAYLOAD and frame.flags & FLAG_COMPLETE
        ):
            ended[frame.stream_id] = used + 1
    assert wait_for(lambda: server.connection_count == 0), "a connection was left open"
    assert wait_for(lambda: server.statistics().open_streams == 0), "a stream leaked"
    assert wait_for(lambda: ledger.open() == 0), "a route's subscription never ended"
    assert all(count == 1 for count in ledger.ends), ledger.ends
    assert ledger.peak <= LIMITS.max_streams  # one connection at a time
    assert rss_mib() - baseline < 64


@pytest.fixture(scope="module")
def baseline(fuzz_server: RSocketServer) -> float:
    return rss_mib()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(wire=frame_streams())
@example(wire=BURST)
def test_generated_frame_streams(
    fuzz_server: RSocketServer, ledger: Ledger, baseline: float, wire: bytes
) -> None:
    check(fuzz_server, ledger, wire, baseline)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(wire=mutated_streams())
@example(wire=BURST[:-3] + b"\xff" + BURST[-2:])  # the last request's data cut short
def test_mutated_valid_frame_streams(
    fuzz_server: RSocketServer, ledger: Ledger, baseline: float, wire: bytes
) -> None:
    check(fuzz_server, ledger, wire, baseline)
