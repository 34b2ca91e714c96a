"""The client's side of a connection: SETUP, keepalives, odd stream IDs, no serving."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._connection import Connection, ConnectionSettings, StreamHandler
from ._frames import ErrorCode, FrameType, encode_error, encode_keepalive, encode_setup
from ._metadata import COMPOSITE

if TYPE_CHECKING:
    import asyncio

    from ._frames import Frame

__all__ = ["ClientConnection"]

DATA_MIME = "application/octet-stream"


class ClientConnection(Connection):
    """The client's connection: sends SETUP, keeps alive, refuses server-side requests."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        settings: ConnectionSettings,
        setup_metadata: bytes | None,
    ) -> None:
        super().__init__(loop, settings)
        self._setup_metadata = setup_metadata
        self._next_stream_id = 1

    def open_stream(self, handler: StreamHandler) -> int:
        """Allocate the next odd stream ID for ``handler`` and register it; 0 if closed."""
        with self._lock:
            stream_id = self._next_stream_id
            self._next_stream_id += 2
        return stream_id if self.register(handler, stream_id) else 0

    def _opened(self) -> None:
        settings = self._settings
        self.send(
            encode_setup(
                keepalive_ms=max(1, round(settings.keepalive * 1000)),
                max_lifetime_ms=max(1, round(settings.max_lifetime * 1000)),
                metadata_mime=COMPOSITE,
                data_mime=DATA_MIME,
                metadata=self._setup_metadata,
            )
        )

    def _tick_interval(self) -> float:
        return self._settings.keepalive

    def _keepalive(self) -> None:
        self.send(encode_keepalive(respond=True))

    def _request(self, frame: Frame) -> None:
        # This client is a requester only; a server-initiated request is refused (spec:
        # REJECTED guarantees it was not processed). Fire-and-forget needs no answer.
        if frame.frame_type != FrameType.REQUEST_FNF:
            self.send(
                encode_error(
                    frame.stream_id, ErrorCode.REJECTED, "this client does not serve requests"
                )
            )
