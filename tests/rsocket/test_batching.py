"""Frames travel in batches: runs of payloads, one send per pass, credit mid-batch.

The per-frame work of a stream is taken out of the hot path without changing what goes
over the wire: each test checks a batch boundary, and that frames and order are intact.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest
from aiohttp import WSMsgType
from aiohttp.http import WebSocketWriter

from reactive_streams import Publisher, Subscriber, Subscription
from reactive_streams._core import run_receiver
from reactive_streams.reference import IterablePublisher
from reactive_streams.rsocket import Payload, connect
from reactive_streams.rsocket._connection import Connection, ConnectionSettings
from reactive_streams.rsocket._frames import (
    FLAG_COMPLETE,
    FLAG_NEXT,
    Frame,
    FrameReader,
    FrameType,
    PayloadRun,
    encode_payload,
    encode_request_n,
)
from reactive_streams.rsocket._responder import ResponderStream
from reactive_streams.rsocket._websocket import WebSocketTransport

from .conftest import TIMEOUT
from .rawpeer import RawServer

if TYPE_CHECKING:
    from collections.abc import Iterator

# -- reading: runs of payloads ------------------------------------------------------------


def test_consecutive_payloads_of_a_stream_come_back_as_one_run() -> None:
    wire = (
        encode_payload(1, b"a")
        + encode_payload(1, b"b")
        + encode_payload(3, b"c")
        + encode_payload(1, b"d")
        + encode_payload(1, b"e", complete=True)
        + encode_payload(1, b"x", b"meta")  # metadata: a Frame of its own
        + encode_request_n(5, 7)
    )
    reader = FrameReader()
    items = reader.feed_runs(wire)
    assert reader.count == 7
    runs = [item for item in items if isinstance(item, PayloadRun)]
    assert [(run.stream_id, run.data, run.complete) for run in runs] == [
        (1, [b"a", b"b"], False),
        (3, [b"c"], False),
        (1, [b"d", b"e"], True),
    ]
    assert items.index(runs[-1]) == 2
    frames = [item for item in items if isinstance(item, Frame)]
    assert [(frame.frame_type, frame.metadata) for frame in frames] == [
        (FrameType.PAYLOAD, b"meta"),
        (FrameType.REQUEST_N, None),
    ]
    # spelled out, a run is exactly its frames
    assert [(f.stream_id, f.flags, f.data) for f in FrameReader().feed(wire)[3:5]] == [
        (1, FLAG_NEXT, b"d"),
        (1, FLAG_NEXT | FLAG_COMPLETE, b"e"),
    ]


def test_connections_read_into_one_64_kib_buffer_per_loop_thread() -> None:
    loop = asyncio.new_event_loop()
    try:
        connection = Connection(loop, ConnectionSettings())
        assert isinstance(connection, asyncio.BufferedProtocol)
        first = connection.get_buffer(-1)
        assert len(first) == 64 * 1024
        connection.buffer_updated(0)
        assert connection.get_buffer(1 << 20).obj is first.obj  # the same buffer every read
        # ... and for every connection of the thread: idle ones hold no buffer of their own
        assert Connection(loop, ConnectionSettings()).get_buffer(-1).obj is first.obj
    finally:
        loop.close()


# -- writing: the frames of one request call in one send ----------------------------------


class _Outbox:
    """What a responder needs of a connection; records each send."""

    def __init__(self) -> None:
        self.settings = ConnectionSettings()
        self.writable = True
        self.calls: list[list[bytes]] = []
        self.ended = threading.Event()

    def send(self, frame: bytes) -> bool:
        return self.send_all([frame])

    def send_all(self, frames: list[bytes]) -> bool:
        self.calls.append(list(frames))
        if FrameReader().feed(frames[-1])[-1].flags & FLAG_COMPLETE:
            self.ended.set()
        return True

    def unregister(self, stream_id: int) -> None:
        pass


def _responder(
    outbox: _Outbox, executor: ThreadPoolExecutor, publisher: Publisher[Any], initial_n: int
) -> ResponderStream:
    """A request-stream (id 1) on route ``r`` serving ``publisher`` into ``outbox``."""
    stream = ResponderStream(
        outbox,  # type: ignore[arg-type]  # the part of a Connection it uses
        kind=FrameType.REQUEST_STREAM,
        route="r",
        factory=lambda data: publisher,
        data=b"",
        initial_n=initial_n,
        executor=executor,
    )
    stream.stream_id = 1
    return stream


def test_the_frames_a_publisher_emits_inside_one_request_go_out_in_one_send() -> None:
    elements = [b"e%d" % index for index in range(100)]
    outbox = _Outbox()
    with ThreadPoolExecutor(1) as executor:
        stream = _responder(outbox, executor, IterablePublisher(elements), 100)
        stream.start()
        assert outbox.ended.wait(TIMEOUT)
    frames = FrameReader().feed(b"".join(frame for call in outbox.calls for frame in call))
    assert [frame.data for frame in frames[:-1]] == elements  # all of them, in order
    assert frames[-1].flags & FLAG_COMPLETE
    # 16 before the size of one is known, then the rest: a send per request call, not
    # one per element
    assert len(outbox.calls) <= 4, [len(call) for call in outbox.calls]


class _RunPublisher(Publisher[bytes]):
    """Hands each ``request(n)`` a run of the next ``n`` elements; then some more (Rule 1.1)."""

    def __init__(self, elements: list[bytes], excess: int) -> None:
        self._elements = elements
        self._excess = excess

    def subscribe(self, subscriber: Subscriber[bytes]) -> None:
        run = run_receiver(subscriber)
        elements = list(self._elements)
        excess = self._excess

        class _Runs(Subscription):
            def request(self, n: int) -> None:
                if run is None:  # the capability is what the test is about
                    subscriber.on_error(AssertionError("the subscriber takes no runs"))
                    return
                batch = elements[:n]
                del elements[:n]
                if not elements:
                    batch += [b"extra"] * excess
                run(iter(batch))

            def cancel(self) -> None:
                pass

        subscriber.on_subscribe(_Runs())


@pytest.mark.rule("1.1")
def test_a_run_beyond_the_demand_sends_what_was_requested_and_then_the_error() -> None:
    elements = [b"e%02d" % index for index in range(40)]
    outbox = _Outbox()
    ended = threading.Event()
    send_all = outbox.send_all

    def record(frames: list[bytes]) -> bool:
        send_all(frames)
        if FrameReader().feed(frames[-1])[-1].frame_type == FrameType.ERROR:
            ended.set()
        return True

    outbox.send_all = record  # type: ignore[method-assign]
    with ThreadPoolExecutor(1) as executor:
        stream = _responder(outbox, executor, _RunPublisher(elements, excess=3), len(elements))
        stream.start()
        assert ended.wait(TIMEOUT)
    frames = FrameReader().feed(b"".join(frame for call in outbox.calls for frame in call))
    assert [frame.data for frame in frames[:-1]] == elements  # never one more
    assert frames[-1].frame_type == FrameType.ERROR
    assert frames[-1].data.startswith(b"Rule 1.1: route 'r' emitted more elements")


def test_a_run_of_payloads_and_changing_sizes_goes_out_in_order() -> None:
    elements: list[Any] = [b"a" * 3] * 20 + [b"b" * 5] * 10 + [Payload(b"p", b"m")]
    elements += [b"c" * 5] * 9
    outbox = _Outbox()
    with ThreadPoolExecutor(1) as executor:
        stream = _responder(outbox, executor, IterablePublisher(elements), len(elements))
        assert run_receiver(stream) is not None  # IterablePublisher hands it runs
        stream.start()
        assert outbox.ended.wait(TIMEOUT)
    frames = FrameReader().feed(b"".join(frame for call in outbox.calls for frame in call))
    assert [
        Payload(frame.data, frame.metadata) if frame.metadata else frame.data
        for frame in frames[:-1]
    ] == elements
    assert frames[-1].flags & FLAG_COMPLETE


def test_frames_sent_from_another_thread_go_to_a_tcp_socket_at_once_and_in_order() -> None:
    loop = asyncio.new_event_loop()
    looping = threading.Thread(target=loop.run_forever, daemon=True)
    looping.start()
    ours, theirs = socket.socketpair()
    theirs.settimeout(TIMEOUT)
    held = threading.Event()
    release = threading.Event()

    def hold_the_loop() -> None:
        held.set()
        release.wait(TIMEOUT)

    async def open_connection() -> Connection:
        _, protocol = await loop.create_connection(
            lambda: Connection(loop, ConnectionSettings()), sock=ours
        )
        assert isinstance(protocol, Connection)
        return protocol

    try:
        connection = asyncio.run_coroutine_threadsafe(open_connection(), loop).result(TIMEOUT)
        first = [encode_payload(1, b"%06d" % index) for index in range(3)]
        loop.call_soon_threadsafe(hold_the_loop)
        assert held.wait(TIMEOUT)
        # The loop is busy: the frames are in the peer's socket as soon as the calls
        # return only if this thread wrote them there itself.
        assert connection.send(first[0])
        assert connection.send_all(first[1:])
        expected = b"".join(first)
        theirs.setblocking(False)  # raises BlockingIOError if nothing is there yet
        assert theirs.recv(len(expected) + 1) == expected
        theirs.settimeout(TIMEOUT)
        # More than the socket takes while the peer does not read: what is left waits
        # in the outbox, and what comes after it queues behind it.
        release.set()
        large = [encode_payload(1, bytes([index]) * 60_000) for index in range(40)]
        for frame in large:
            assert connection.send(frame)
        expected = b"".join(large)
        received = bytearray()
        while len(received) < len(expected):
            chunk = theirs.recv(1 << 20)
            assert chunk
            received += chunk
        assert bytes(received) == expected
        assert (connection.frames_sent, connection.bytes_sent) == (
            43,
            sum(map(len, first + large)),
        )

        async def close() -> None:
            connection.close()
            await connection.closed

        asyncio.run_coroutine_threadsafe(close(), loop).result(TIMEOUT)
    finally:
        release.set()
        loop.call_soon_threadsafe(loop.stop)
        looping.join(TIMEOUT)
        loop.close()
        ours.close()  # closed with the transport already, unless the test failed before
        theirs.close()


# -- the requester grants credit while it delivers ---------------------------------------


class _Halves(Subscriber[bytes]):
    """Requests 256, then 128 for every 128 consumed; stops in ``on_next`` at ``stop_at``."""

    def __init__(self, stop_at: int) -> None:
        self.count = 0
        self.stop_at = stop_at
        self.stopped = threading.Event()
        self.go_on = threading.Event()
        self._subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self._subscription = subscription
        subscription.request(256)

    def on_next(self, element: bytes) -> None:
        self.count += 1
        if self.count % 128 == 0:
            assert self._subscription is not None
            self._subscription.request(128)
        if self.count == self.stop_at:
            self.stopped.set()
            self.go_on.wait(TIMEOUT)

    def on_error(self, error: Exception) -> None:
        pass

    def on_complete(self) -> None:
        pass


def test_the_requester_grants_credit_before_it_has_delivered_the_whole_batch() -> None:
    raw_server = RawServer()
    subscriber = _Halves(stop_at=200)
    try:
        with connect(f"tcp://127.0.0.1:{raw_server.port}") as client:
            peer = raw_server.accept()
            try:
                client.request_stream("a").subscribe(subscriber)
                _, request = peer.frames(2)
                assert request.number == 256
                peer.send(b"".join(encode_payload(1, b"x%d" % i) for i in range(256)))
                assert subscriber.stopped.wait(TIMEOUT)  # inside on_next of element 200
                [grant] = peer.frames(1)  # the grant for the first 128 is out already
                assert (grant.frame_type, grant.number) == (FrameType.REQUEST_N, 128)
            finally:
                subscriber.go_on.set()
                peer.close()
    finally:
        raw_server.close()


class _Runs(Subscriber[bytes]):
    """Declares the kit's ``RunSubscriber`` capability; records each run's elements."""

    def __init__(self) -> None:
        self.runs: list[list[bytes]] = []
        self.done = threading.Event()

    def on_subscribe(self, subscription: Subscription) -> None:
        subscription.request(10)

    def on_next(self, element: bytes) -> None:
        self.runs.append([element])

    def on_next_run(self, elements: Iterator[bytes]) -> None:
        self.runs.append(list(elements))

    def on_error(self, error: Exception) -> None:
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


def test_a_subscriber_that_takes_runs_gets_the_elements_of_a_read_in_one_call() -> None:
    raw_server = RawServer()
    subscriber = _Runs()
    try:
        with connect(f"tcp://127.0.0.1:{raw_server.port}") as client:
            peer = raw_server.accept()
            try:
                client.request_stream("a").subscribe(subscriber)
                peer.frames(2)
                elements = [b"x%d" % index for index in range(10)]
                peer.send(
                    b"".join(encode_payload(1, element) for element in elements)
                    + encode_payload(1, b"", next_=False, complete=True)
                )
                assert subscriber.done.wait(TIMEOUT)
            finally:
                peer.close()
    finally:
        raw_server.close()
    assert [element for run in subscriber.runs for element in run] == elements
    assert max(len(run) for run in subscriber.runs) > 1  # runs, not an on_next each


# -- WebSocket: one message per frame, but batches to and from the connection ------------


class _Recorder:
    """The connection's side of a ``WebSocketTransport``: records what reaches it."""

    def __init__(self, to_write: bytes = b"") -> None:
        self.received: list[bytes] = []
        self.lost = False
        self._to_write = to_write

    def connection_made(self, transport: Any) -> None:
        if self._to_write:
            transport.write(self._to_write)

    def data_received(self, data: bytes) -> None:
        self.received.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True

    def pause_writing(self) -> None:
        pass

    def resume_writing(self) -> None:
        pass


class _Socket:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return False


class _SocketProtocol:
    _paused = False  # the socket's buffer is below its high-water mark


class _Message:
    def __init__(self, kind: WSMsgType, data: Any) -> None:
        self.type = kind
        self.data = data


class _WebSocket:
    """Enough of an ``aiohttp`` WebSocket: messages to read, a socket to write to."""

    def __init__(self, messages: list[bytes]) -> None:
        self._messages = [_Message(WSMsgType.BINARY, message) for message in messages]
        self._messages.append(_Message(WSMsgType.CLOSE, 1000))
        self.socket = _Socket()
        self._writer = WebSocketWriter(_SocketProtocol(), self.socket)  # type: ignore[arg-type]
        self.closed = False
        self.close_code = 1000

    async def receive(self) -> _Message:
        return self._messages.pop(0)

    async def close(self) -> None:
        self.closed = True


def test_websocket_messages_read_together_reach_the_connection_in_one_piece() -> None:
    frames = [encode_payload(1, b"m%d" % index)[3:] for index in range(10)]  # no prefix
    recorder = _Recorder()
    asyncio.run(WebSocketTransport(_WebSocket(frames), recorder).run())  # type: ignore[arg-type]
    assert len(recorder.received) == 1
    assert [frame.data for frame in FrameReader().feed(recorder.received[0])] == [
        b"m%d" % index for index in range(10)
    ]
    assert recorder.lost


def test_websocket_frames_written_together_go_out_as_messages_in_one_write() -> None:
    wire = [encode_payload(1, b"m%d" % index) for index in range(10)]
    websocket = _WebSocket([])
    recorder = _Recorder(to_write=b"".join(wire))
    asyncio.run(WebSocketTransport(websocket, recorder).run())  # type: ignore[arg-type]
    # one binary message per frame (FIN, opcode 2, unmasked: a server's), in one write
    assert websocket.socket.writes == [
        b"".join(bytes([0x82, len(frame) - 3]) + frame[3:] for frame in wire)
    ]
