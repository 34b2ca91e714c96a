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

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self.client.request_stream("range", str(elements).encode())

    def create_failed_publisher(self) -> Publisher[Any] | None:
        # The stream opens at subscribe, demand or not, so a route the server refuses
        # ends it with on_error without any request (Rules 1.4, 1.9).
        return self.client.request_stream("missing")


@pytest.fixture(scope="module", autouse=True)
def _remote() -> Iterator[None]:
    with (
        serve({"range": _range}) as server,
        connect(f"tcp://127.0.0.1:{server.port}") as client,
    ):
        TestRemoteStream.client = client
        yield
