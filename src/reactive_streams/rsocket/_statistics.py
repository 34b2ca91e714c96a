"""``TransportStatistics``: a snapshot of a client's or a server's counters."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TransportStatistics"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TransportStatistics:
    """A point-in-time snapshot of an ``RSocketClient`` or ``RSocketServer``.

    Attributes:
        connections: connections open right now (0 or 1 for a client).
        open_streams: streams open right now over all those connections.
        frames_received: frames decoded since start (fragments count one each).
        frames_sent: frames written since start.
        bytes_received: bytes read from the sockets (or WebSocket messages) since start.
        bytes_sent: bytes written since start.
    """

    connections: int
    open_streams: int
    frames_received: int
    frames_sent: int
    bytes_received: int
    bytes_sent: int
