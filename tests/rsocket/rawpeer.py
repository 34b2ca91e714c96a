"""A scripted RSocket peer on a plain blocking socket, for fault tests (every read times out)."""

from __future__ import annotations

import socket

from reactive_streams.rsocket._frames import Frame, FrameReader, FrameType, encode_request
from reactive_streams.rsocket._frames import encode_setup as _encode_setup
from reactive_streams.rsocket._metadata import (
    AUTHENTICATION,
    COMPOSITE,
    ROUTING,
    encode_bearer,
    encode_composite,
    encode_routing,
)

TIMEOUT = 10.0


class RawPeer:
    """One TCP connection driven by the test: send bytes, read frames, see EOF."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.settimeout(TIMEOUT)
        self._reader = FrameReader()
        self._frames: list[Frame] = []

    @classmethod
    def connect(cls, port: int, source: str | None = None) -> RawPeer:
        """Connect to 127.0.0.1:``port``, from the loopback address ``source`` if given."""
        address = None if source is None else (source, 0)
        return cls(
            socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT, source_address=address)
        )

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frames(self, count: int) -> list[Frame]:
        """Read until ``count`` frames arrived (raises on EOF or timeout first)."""
        while len(self._frames) < count:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError(f"EOF after {len(self._frames)} frames, {count} expected")
            self._frames += self._reader.feed(data)
        taken, self._frames = self._frames[:count], self._frames[count:]
        return taken

    def rest_until_eof(self) -> list[Frame]:
        """Every frame until the peer closes the connection."""
        while True:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                data = b""
            if not data:
                taken, self._frames = self._frames, []
                return taken
            self._frames += self._reader.feed(data)

    def close(self) -> None:
        self.sock.close()


def setup_frame(
    keepalive_ms: int = 20_000, max_lifetime_ms: int = 90_000, token: str | None = None
) -> bytes:
    """A SETUP frame; with ``token``, its composite metadata carries it as a bearer token."""
    metadata = None
    if token is not None:
        metadata = encode_composite([(AUTHENTICATION, encode_bearer(token))])
    return _encode_setup(
        keepalive_ms=keepalive_ms,
        max_lifetime_ms=max_lifetime_ms,
        metadata_mime=COMPOSITE,
        data_mime="application/octet-stream",
        metadata=metadata,
    )


def request_stream(stream_id: int, route: str, n: int, data: bytes = b"") -> bytes:
    metadata = encode_composite([(ROUTING, encode_routing(route))])
    return encode_request(FrameType.REQUEST_STREAM, stream_id, data, metadata, initial_n=n)


class RawServer:
    """A listening socket; ``accept`` gives the ``RawPeer`` of the next client."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(TIMEOUT)
        self.port: int = self.sock.getsockname()[1]

    def accept(self) -> RawPeer:
        connection, _ = self.sock.accept()
        return RawPeer(connection)

    def close(self) -> None:
        self.sock.close()
