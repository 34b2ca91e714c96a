"""Our TCK on a publisher whose elements come over RSocket from our server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from reactive_streams import MAX_DEMAND, Publisher
from reactive_streams.reference import IterablePublisher
from reactive_streams.rsocket import RSocketClient, connect, serve
from reactive_streams.tck import PublisherVerification

from .conftest import numbered


def _range(data: bytes) -> Publisher[bytes]:
    count = int(data)
    return IterablePublisher(_Numbered(None if count == MAX_DEMAND else count))


class _Numbered:
    def __init__(self, count: int | None) -> None:
        self._count = count

    def __iter__(self) -> Iterator[bytes]:
        return iter(numbered(self._count))


class TestRemoteStream(PublisherVerification):
    client: ClassVar[RSocketClient]
    closed_client: ClassVar[RSocketClient]

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self.client.request_stream("range", str(elements).encode())

    def create_failed_publisher(self) -> Publisher[Any] | None:
        # A remote stream can fail before any demand only when its connection is gone:
        # RSocket has no request without demand (initial request-n > 0), so a route that
        # fails on the server is found out at the first request (test_interop covers it).
        return self.closed_client.request_stream("range", b"10")


@pytest.fixture(scope="module", autouse=True)
def _remote() -> Iterator[None]:
    with (
        serve({"range": _range}) as server,
        connect(f"tcp://127.0.0.1:{server.port}") as client,
    ):
        TestRemoteStream.client = client
        with connect(f"tcp://127.0.0.1:{server.port}") as closed:
            closed.close()
            TestRemoteStream.closed_client = closed
            yield
