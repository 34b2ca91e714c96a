"""The client's side of a connection: SETUP, keepalives, odd stream IDs, no serving."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._connection import Connection, ConnectionSettings, StreamHandler
from ._frames import (
    MAX_STREAM_ID,
    ErrorCode,
    FrameType,
    encode_error,
    encode_keepalive,
    encode_setup,
)
from ._metadata import COMPOSITE

if TYPE_CHECKING:
    import asyncio

    from ._errors import RSocketConnectionError
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
        self._last_stream_id = -1  # the IDs go 1, 3, 5, ... (spec: a client's are odd)

    def open_stream(self, handler: StreamHandler) -> int:
        """Allocate the next free odd stream ID for ``handler`` and register it; 0 if closed.

        After ``2**31 - 1`` the IDs wrap to 1 and go on, skipping those still in use, as
        the spec's "Stream Identifiers" asks of a requester that reuses IDs (and as
        rsocket-java's ``StreamIdSupplier`` does). A billion concurrent streams would be
        needed to find no free ID.
        """
        with self._lock:
            if self._closed:
                return 0
            streams = self._streams
            stream_id = self._last_stream_id
            while True:
                stream_id = (stream_id + 2) & MAX_STREAM_ID
                if stream_id and stream_id not in streams:
                    break
            self._last_stream_id = stream_id
            self._register_locked(handler, stream_id)
        return stream_id

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

    def _error_code(self, error: RSocketConnectionError) -> int:
        # the setup codes are the server's to send; a client reports CONNECTION_ERROR
        code = super()._error_code(error)
        return ErrorCode.CONNECTION_ERROR if code < ErrorCode.CONNECTION_ERROR else code

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
