"""Interoperability with rsocket-py 0.4.20, a peer no one here wrote, over 127.0.0.1."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from reactivestreams.subscriber import Subscriber as PeerSubscriber
from reactivestreams.subscription import Subscription as PeerSubscription
from rsocket.extensions.helpers import authenticate_bearer, composite, route
from rsocket.extensions.mimetypes import WellKnownMimeTypes
from rsocket.payload import Payload
from rsocket.routing.request_router import RequestRouter
from rsocket.routing.routing_request_handler import RoutingRequestHandler
from rsocket.rsocket_client import RSocketClient as PeerClient
from rsocket.rsocket_server import RSocketServer as PeerServer
from rsocket.streams.stream_from_generator import StreamFromGenerator
from rsocket.transports.tcp import TransportTCP

from reactive_streams.rsocket import (
    ErrorCode,
    RSocketConnectionError,
    RSocketServer,
    RSocketStreamError,
    connect,
    serve,
)
from reactive_streams.testing import RecordingSubscriber

from .conftest import TIMEOUT, PeerThread, TrackedPublisher, items_route, numbered, single_transport

COMPOSITE = WellKnownMimeTypes.MESSAGE_RSOCKET_COMPOSITE_METADATA
OCTET_STREAM = WellKnownMimeTypes.APPLICATION_OCTET_STREAM


class _QueueSubscriber(PeerSubscriber):  # type: ignore[misc]
    """rsocket-py's subscriber interface (``on_next(value, is_complete)``), into a queue."""

    def __init__(self) -> None:
        self.signals: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.subscription: PeerSubscription | None = None
        self.metadata: list[bytes | None] = []

    def on_subscribe(self, subscription: PeerSubscription) -> None:
        self.subscription = subscription

    def on_next(self, value: Payload, is_complete: bool = False) -> None:
        self.signals.put_nowait(("next", value.data))
        self.metadata.append(value.metadata)
        if is_complete:
            self.signals.put_nowait(("complete", None))

    def on_error(self, exception: Exception) -> None:
        self.signals.put_nowait(("error", exception))

    def on_complete(self) -> None:
        self.signals.put_nowait(("complete", None))

    async def take(self, count: int) -> list[tuple[str, Any]]:
        return [await asyncio.wait_for(self.signals.get(), TIMEOUT) for _ in range(count)]


async def _with_peer_client(port: int, scenario: Any, setup: Payload | None = None) -> Any:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    async with PeerClient(
        single_transport(TransportTCP(reader, writer)),
        metadata_encoding=COMPOSITE,
        data_encoding=OCTET_STREAM,
        setup_payload=setup,
    ) as client:
        return await scenario(client)


def test_peer_client_gets_exactly_its_initial_request_n_then_the_rest(
    server: RSocketServer,
) -> None:
    async def scenario(client: PeerClient) -> None:
        subscriber = _QueueSubscriber()
        request = Payload(b"12", composite(route("items")))
        client.request_stream(request).initial_request_n(5).subscribe(subscriber)
        first = await subscriber.take(5)
        assert first == [("next", element) for element in numbered(5)]
        assert subscriber.signals.empty()
        assert subscriber.subscription is not None
        subscriber.subscription.request(100)
        rest = await subscriber.take(8)
        assert rest == [("next", element) for element in list(numbered(12))[5:]] + [
            ("complete", None)
        ]

    asyncio.run(_with_peer_client(server.port, scenario))


def test_peer_demand_reaches_the_route_publisher_exactly_and_cancel_reaches_it(
    server: RSocketServer, tracked: TrackedPublisher
) -> None:
    async def scenario(client: PeerClient) -> None:
        subscriber = _QueueSubscriber()
        client.request_stream(Payload(b"", composite(route("tracked")))).initial_request_n(
            5
        ).subscribe(subscriber)
        assert await subscriber.take(5) == [("next", element) for element in numbered(5)]
        assert tracked.requested == [5]  # the server asked upstream for exactly 5
        assert subscriber.subscription is not None
        subscriber.subscription.request(3)
        more = await subscriber.take(3)
        assert more == [("next", element) for element in list(numbered(8))[5:]]
        assert tracked.requested == [5, 3]
        subscriber.subscription.cancel()
        cancelled = await asyncio.to_thread(tracked.cancelled.wait, TIMEOUT)
        assert cancelled, "CANCEL from rsocket-py did not reach the route's publisher"

    asyncio.run(_with_peer_client(server.port, scenario))


def test_peer_client_sees_the_error_for_an_unknown_route_and_a_failing_factory(
    server: RSocketServer,
) -> None:
    async def scenario(client: PeerClient) -> None:
        for name, expected in (("nowhere", "no route 'nowhere'"), ("boom", "failed on purpose")):
            subscriber = _QueueSubscriber()
            client.request_stream(Payload(b"", composite(route(name)))).subscribe(subscriber)
            [(kind, error)] = await subscriber.take(1)
            assert kind == "error"
            assert expected in str(error)

    asyncio.run(_with_peer_client(server.port, scenario))


def _peer_router(count: int) -> RequestRouter:
    router = RequestRouter()

    @router.stream("numbers")  # type: ignore[untyped-decorator]
    async def numbers() -> StreamFromGenerator:
        def generate() -> Any:
            for index, element in enumerate(numbered(count)):
                yield Payload(element), index == count - 1

        return StreamFromGenerator(generate)

    @router.response("echo")  # type: ignore[untyped-decorator]
    async def echo(payload: Payload) -> Any:
        future: asyncio.Future[Payload] = asyncio.get_running_loop().create_future()
        future.set_result(Payload(b"echo:" + (payload.data or b"")))
        return future

    return router


class _PeerServerRunning:
    def __init__(self, peer_thread: PeerThread, router: RequestRouter) -> None:
        self._peer_thread = peer_thread
        self._sessions: list[PeerServer] = []

        async def start() -> asyncio.Server:
            async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                self._sessions.append(
                    PeerServer(
                        TransportTCP(reader, writer),
                        handler_factory=lambda: RoutingRequestHandler(router),
                    )
                )

            return await asyncio.start_server(session, "127.0.0.1", 0)

        self._server: asyncio.Server = peer_thread.run(start())
        self.port: int = self._server.sockets[0].getsockname()[1]

    def close(self) -> None:
        async def stop() -> None:
            for session in self._sessions:
                await session.close()
            self._server.close()
            await self._server.wait_closed()

        self._peer_thread.run(stop())


def test_our_client_against_peer_server_request_3_then_the_rest(peer_thread: PeerThread) -> None:
    peer = _PeerServerRunning(peer_thread, _peer_router(10))
    try:
        with connect(f"tcp://127.0.0.1:{peer.port}") as client:
            subscriber: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=3)
            client.request_stream("numbers").subscribe(subscriber)
            assert subscriber.wait_for_elements(3, TIMEOUT)
            assert subscriber.elements == list(numbered(3))
            assert not subscriber.terminated
            subscriber.request(100)
            assert subscriber.wait_terminated(TIMEOUT)
            assert subscriber.error is None
            assert subscriber.completed
            assert subscriber.elements == list(numbered(10))
            assert subscriber.violations == []

            response: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=1)
            client.request_response("echo", b"hi").subscribe(response)
            assert response.wait_terminated(TIMEOUT)
            assert (response.elements, response.completed) == ([b"echo:hi"], True)
    finally:
        peer.close()


def test_token_refuses_a_peer_without_it_and_accepts_one_with_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with serve({"items": items_route}, token="s3cret") as server:

        async def refused(client: PeerClient) -> None:
            subscriber = _QueueSubscriber()
            client.request_stream(Payload(b"3", composite(route("items")))).subscribe(subscriber)
            [(kind, _)] = await subscriber.take(1)
            assert kind == "error"  # the connection was refused at its SETUP

        async def accepted(client: PeerClient) -> None:
            subscriber = _QueueSubscriber()
            client.request_stream(Payload(b"3", composite(route("items")))).subscribe(subscriber)
            signals = await subscriber.take(4)
            assert signals == [("next", element) for element in numbered(3)] + [("complete", None)]

        with caplog.at_level(logging.WARNING, logger="reactive_streams.rsocket"):
            asyncio.run(_with_peer_client(server.port, refused))
        assert any(
            "refused a SETUP from 127.0.0.1: authentication required" in record.message
            for record in caplog.records
        )
        good = Payload(metadata=composite(authenticate_bearer("s3cret")))
        asyncio.run(_with_peer_client(server.port, accepted, setup=good))

        # our own client: a wrong token in SETUP is REJECTED_SETUP, the right one works
        with connect(f"tcp://127.0.0.1:{server.port}", token="wrong") as client:
            subscriber: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=5)
            client.request_stream("items", b"3").subscribe(subscriber)
            assert subscriber.wait_terminated(TIMEOUT)
            assert subscriber.error is not None
            assert isinstance(subscriber.error, RSocketConnectionError)
            assert subscriber.error.code == ErrorCode.REJECTED_SETUP
            assert str(subscriber.error) == (
                "the peer closed the connection with REJECTED_SETUP: invalid bearer token"
            )
        with connect(f"tcp://127.0.0.1:{server.port}", token="s3cret") as client:
            subscriber = RecordingSubscriber(initial_request=5)
            client.request_stream("items", b"3").subscribe(subscriber)
            assert subscriber.wait_terminated(TIMEOUT)
            assert (subscriber.elements, subscriber.completed) == (list(numbered(3)), True)


def test_unknown_route_is_an_error_naming_it(server: RSocketServer) -> None:
    with connect(f"tcp://127.0.0.1:{server.port}") as client:
        subscriber: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=1)
        client.request_stream("nowhere").subscribe(subscriber)
        assert subscriber.wait_terminated(TIMEOUT)
        assert isinstance(subscriber.error, RSocketStreamError)
        assert str(subscriber.error) == "REJECTED: no route 'nowhere'"
