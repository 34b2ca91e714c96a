"""RSocket over WebSocket: ours against ours, and our client against rsocket-py's server."""

from __future__ import annotations

import asyncio
from typing import Any

from rsocket.routing.routing_request_handler import RoutingRequestHandler
from rsocket.rsocket_server import RSocketServer as PeerServer
from rsocket.transports.websockets_transport import WebsocketsTransport
from websockets.asyncio.server import ServerConnection
from websockets.asyncio.server import serve as websocket_serve

from reactive_streams import Publisher
from reactive_streams.reference import IterablePublisher
from reactive_streams.rsocket import RSocketStreamError, connect, serve
from reactive_streams.testing import RecordingSubscriber, collect

from .conftest import TIMEOUT, PeerThread, items_route, numbered
from .test_interop import _peer_router


def test_ours_over_websocket_with_demand_and_fragments() -> None:
    big = bytes(range(256)) * 16

    def routes_big(data: bytes) -> Publisher[bytes]:
        return IterablePublisher([big, big])

    routes = {"items": items_route, "big": routes_big}
    with (
        serve(routes, transport="ws", max_frame_size=1024) as server,
        connect(f"ws://127.0.0.1:{server.port}/rsocket", max_frame_size=1024) as client,
    ):
        subscriber: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=3)
        client.request_stream("items", b"8").subscribe(subscriber)
        assert subscriber.wait_for_elements(3, TIMEOUT)
        assert subscriber.elements == list(numbered(3))
        subscriber.request(10)
        assert subscriber.wait_terminated(TIMEOUT)
        assert (subscriber.elements, subscriber.completed) == (list(numbered(8)), True)
        assert collect(client.request_stream("big"), timeout=TIMEOUT) == [big, big]
        failed: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=1)
        client.request_stream("nowhere").subscribe(failed)
        assert failed.wait_terminated(TIMEOUT)
        assert isinstance(failed.error, RSocketStreamError)


def test_our_client_against_peer_websocket_server(peer_thread: PeerThread) -> None:
    router = _peer_router(10)

    async def start() -> Any:
        async def handler(websocket: ServerConnection) -> None:
            transport = WebsocketsTransport()
            PeerServer(transport, handler_factory=lambda: RoutingRequestHandler(router))
            await transport.handler(websocket)

        return await websocket_serve(handler, "127.0.0.1", 0)

    server = peer_thread.run(start())
    try:
        port = next(iter(server.sockets)).getsockname()[1]
        with connect(f"ws://127.0.0.1:{port}") as client:
            subscriber: RecordingSubscriber[bytes] = RecordingSubscriber(initial_request=3)
            client.request_stream("numbers").subscribe(subscriber)
            assert subscriber.wait_for_elements(3, TIMEOUT)
            assert subscriber.elements == list(numbered(3))
            subscriber.request(100)
            assert subscriber.wait_terminated(TIMEOUT)
            assert (subscriber.elements, subscriber.completed) == (list(numbered(10)), True)
            assert subscriber.violations == []
    finally:

        async def stop() -> None:
            server.close()
            await asyncio.wait_for(server.wait_closed(), TIMEOUT)

        peer_thread.run(stop())
