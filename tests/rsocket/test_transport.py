"""TLS, the asyncio server, request-response, fire-and-forget, fragmentation with rsocket-py."""

from __future__ import annotations

import asyncio
import ssl
import threading

import pytest
import trustme
from rsocket.extensions.helpers import composite, route
from rsocket.payload import Payload as Payload_
from rsocket.rsocket_client import RSocketClient as PeerClient
from rsocket.transports.tcp import TransportTCP

from reactive_streams import Publisher
from reactive_streams.reference import IterablePublisher
from reactive_streams.rsocket import (
    Payload,
    RSocketConnectionError,
    connect,
    serve,
    serve_async,
)
from reactive_streams.testing import RecordingSubscriber, collect

from .conftest import TIMEOUT, items_route, numbered, single_transport
from .test_interop import COMPOSITE, OCTET_STREAM, _QueueSubscriber


def test_tls_with_a_self_signed_certificate() -> None:
    authority = trustme.CA()
    certificate = authority.issue_cert("127.0.0.1", "localhost")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    certificate.configure_cert(server_context)
    client_context = ssl.create_default_context()
    authority.configure_trust(client_context)
    with serve({"items": items_route}, ssl_context=server_context) as server:
        url = f"tcp://127.0.0.1:{server.port}"
        with connect(url, ssl_context=client_context) as client:
            assert collect(client.request_stream("items", b"4"), timeout=TIMEOUT) == list(
                numbered(4)
            )
        untrusting = ssl.create_default_context()  # does not know the test's CA
        with pytest.raises(RSocketConnectionError, match=r"^could not connect to tcp://"):
            connect(url, ssl_context=untrusting)


def test_serve_async_keeps_route_work_off_the_loop() -> None:
    threads: list[str] = []

    def route_factory(data: bytes) -> Publisher[bytes]:
        threads.append(threading.current_thread().name)
        return IterablePublisher(list(numbered(int(data))))

    async def main() -> list[bytes]:
        async with await serve_async({"items": route_factory}) as server:
            loop_thread = threading.current_thread().name

            def consume() -> list[bytes]:
                with connect(f"tcp://127.0.0.1:{server.port}") as client:
                    return collect(client.request_stream("items", b"100"), timeout=TIMEOUT)

            elements = await asyncio.to_thread(consume)
            assert threads and loop_thread not in threads
            return elements

    assert asyncio.run(main()) == list(numbered(100))


def test_request_response_and_fire_and_forget() -> None:
    received: list[bytes] = []
    done = threading.Event()

    def sink(data: bytes) -> Publisher[bytes]:
        received.append(data)
        done.set()
        empty: list[bytes] = []
        return IterablePublisher(empty)

    with (
        serve({"items": items_route, "sink": sink}) as local,
        connect(f"tcp://127.0.0.1:{local.port}") as client,
    ):
        assert collect(client.request_response("items", b"5"), timeout=TIMEOUT) == [b"item-0"]
        assert collect(client.request_response("sink", b"x"), timeout=TIMEOUT) == []
        done.clear()
        client.fire_and_forget("sink", b"hello")
        assert done.wait(TIMEOUT)
        assert received == [b"x", b"hello"]
        rejected: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=1)
        client.request_response("nowhere").subscribe(rejected)
        assert rejected.wait_terminated(TIMEOUT)
        assert "no route 'nowhere'" in str(rejected.error)
    client.close()  # idempotent
    with pytest.raises(RSocketConnectionError):
        client.fire_and_forget("sink", b"late")


def test_rsocket_py_reassembles_our_fragments() -> None:
    big = bytes(range(256)) * 64  # 16 KiB payloads, 1 KiB frames

    def bigs(data: bytes) -> Publisher[bytes]:
        return IterablePublisher([big, big[::-1]])

    async def scenario(port: int) -> list[tuple[str, object]]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        async with PeerClient(
            single_transport(TransportTCP(reader, writer)),
            metadata_encoding=COMPOSITE,
            data_encoding=OCTET_STREAM,
        ) as client:
            subscriber = _QueueSubscriber()
            client.request_stream(Payload_(b"", composite(route("big")))).subscribe(subscriber)
            return await subscriber.take(3)

    with serve({"big": bigs}, max_frame_size=1024) as server:
        signals = asyncio.run(scenario(server.port))
    assert signals == [("next", big), ("next", big[::-1]), ("complete", None)]


def test_statistics_count_connections_streams_frames_and_bytes() -> None:
    with serve({"items": items_route}) as server:
        with connect(f"tcp://127.0.0.1:{server.port}") as client:
            assert collect(client.request_stream("items", b"5"), timeout=TIMEOUT) == list(
                numbered(5)
            )
            ours = client.statistics()
            assert (ours.connections, ours.open_streams) == (1, 0)
            assert ours.frames_received == 6  # 5 elements, then the COMPLETE
            assert ours.frames_sent >= 2  # SETUP and REQUEST_STREAM (and KEEPALIVEs)
            theirs = server.statistics()
            assert theirs.connections == 1
            assert theirs.frames_sent == ours.frames_received
            assert theirs.bytes_received == ours.bytes_sent
        assert client.statistics().connections == 0


def test_payloads_carry_metadata_both_ways() -> None:
    def tagged(data: bytes) -> Publisher[bytes | Payload]:
        return IterablePublisher([Payload(b"one", b"meta-1"), b"two", Payload(b"three")])

    async def peer_reads(port: int) -> list[tuple[bytes, bytes | None]]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        async with PeerClient(
            single_transport(TransportTCP(reader, writer)),
            metadata_encoding=COMPOSITE,
            data_encoding=OCTET_STREAM,
        ) as client:
            subscriber = _QueueSubscriber()
            client.request_stream(Payload_(b"", composite(route("tagged")))).subscribe(subscriber)
            signals = await subscriber.take(4)
            assert signals[-1] == ("complete", None)
            return [
                (data, metadata)
                for (_, data), metadata in zip(signals[:-1], subscriber.metadata, strict=True)
            ]

    with (
        serve({"tagged": tagged}) as server,
        connect(f"tcp://127.0.0.1:{server.port}") as client,
    ):
        elements = collect(client.request_stream("tagged", payloads=True), timeout=TIMEOUT)
        assert elements == [Payload(b"one", b"meta-1"), Payload(b"two"), Payload(b"three")]
        assert collect(client.request_stream("tagged"), timeout=TIMEOUT) == [
            b"one",
            b"two",
            b"three",
        ]
        seen = asyncio.run(peer_reads(server.port))
    assert [data for data, _ in seen] == [b"one", b"two", b"three"]
    assert seen[0][1] == b"meta-1"
