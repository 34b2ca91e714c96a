"""The exceptions of the RSocket transport.

Hierarchy::

    ReactiveStreamsError
    └── RSocketError                 anything the transport signals; ``.code`` is the RSocket
        │                            error code (``ErrorCode``) when one applies
        ├── RSocketStreamError       the peer ended one stream with an ERROR frame
        │                            (APPLICATION_ERROR, REJECTED, CANCELED, INVALID)
        └── RSocketConnectionError   the connection is gone: closed, dropped, keepalive timeout,
            │                        an ERROR on stream 0, or a setup the server refused
            └── FrameError           a malformed frame, or a length beyond the maximum

Every stream on a connection that fails gets exactly one ``on_error`` with the
``RSocketConnectionError`` that ended it.
"""

from __future__ import annotations

from .._core import ReactiveStreamsError

__all__ = ["FrameError", "RSocketConnectionError", "RSocketError", "RSocketStreamError"]

_CODE_NAMES = {
    0x001: "INVALID_SETUP",
    0x002: "UNSUPPORTED_SETUP",
    0x003: "REJECTED_SETUP",
    0x004: "REJECTED_RESUME",
    0x101: "CONNECTION_ERROR",
    0x102: "CONNECTION_CLOSE",
    0x201: "APPLICATION_ERROR",
    0x202: "REJECTED",
    0x203: "CANCELED",
    0x204: "INVALID",
}


def code_name(code: int) -> str:
    """The spec's name for an error code (``"REJECTED_SETUP"``), or its hex value."""
    return _CODE_NAMES.get(code, f"{code:#x}")


class RSocketError(ReactiveStreamsError):
    """Base of the transport's errors.

    Attributes:
        code: the RSocket error code at stake (``ErrorCode``), or ``None``.
    """

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class RSocketStreamError(RSocketError):
    """The peer ended a stream with an ``ERROR`` frame; the message is the peer's text."""


class RSocketConnectionError(RSocketError):
    """The connection ended; every stream still open on it fails with this error."""


class FrameError(RSocketConnectionError):
    """A frame could not be decoded or broke the protocol; the connection closes.

    ``code`` is ``CONNECTION_ERROR`` (0x101), except for a ``SETUP`` frame a server cannot
    read: ``INVALID_SETUP`` (0x001, e.g. truncated) or ``UNSUPPORTED_SETUP`` (0x002, e.g.
    a MIME type that is not US-ASCII), the codes the spec gives for refusing a setup.
    """

    def __init__(self, message: str, *, code: int = 0x101) -> None:
        super().__init__(message, code=code)
