"""``ServerLimits``: what one peer may make an RSocket server hold, and for how long."""

from __future__ import annotations

from dataclasses import dataclass

from ._memory import default_total_memory

__all__ = ["ServerLimits"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerLimits:
    """The bounds an RSocket server keeps against every peer, hostile or not.

    Each default is named after the server whose default it follows.

    Attributes:
        max_connections: connections served at once; one more gets
            ``ERROR[REJECTED_SETUP]`` and is closed at once. Default 1024, the
            ``worker_connections`` of the ``nginx.conf`` nginx ships (its built-in default
            is 512).
        max_streams: streams open at once on one connection; a request beyond it gets
            ``ERROR[REJECTED]`` on its own stream (fire-and-forget: dropped) and the
            connection goes on. Default 128, nginx's ``http2_max_concurrent_streams``.
        setup_timeout: seconds from accept to a valid ``SETUP``; a connection without one
            by then (idle, or trickling bytes) is closed with ``ERROR[CONNECTION_ERROR]``.
            Default 60, nginx's ``client_header_timeout``.
        max_setup_size: the largest ``SETUP`` frame accepted, in bytes, length prefix
            excluded; a longer one is refused with ``ERROR[REJECTED_SETUP]`` as soon as its
            length prefix is read, so a peer without ``SETUP`` holds at most this much.
            Default 64 KiB, Netty's ``maxFramePayloadLength`` for WebSocket frames.
        connection_memory: the memory budget of one connection, in bytes (at least
            ``max_frame_size`` plus 3, or the largest frames are refused). Reading: the
            frame being read (counted at its declared length as soon as its prefix
            arrives) plus every fragment chain being reassembled; beyond the budget the
            connection is closed with ``ERROR[CONNECTION_ERROR]``. Writing: frames queued
            and not yet taken by the socket (keepalive echoes included); beyond the
            budget the server stops reading from the peer until they drain, so a peer that
            never reads cannot make it hold more. Default 64 MiB: four frames of
            rsocket-java's largest (``FRAME_LENGTH_MASK``, 16 MiB), and the size of the
            largest reassembled payload (``max_payload_size``).
        write_high_water: the socket's write buffer, in bytes, above which route
            publishers are asked for nothing more until it drains below a quarter of it
            (the outbox the loop has not flushed yet stops them at four times it). Each
            stream also has at most this many bytes requested and not yet produced,
            judged by its largest element so far, so a peer that never reads makes the
            server hold about ``max_streams`` times this. Default 64 KiB, the high mark of
            Netty's ``WriteBufferWaterMark``.
        min_keepalive: the shortest keepalive interval and max lifetime, in seconds, the
            server accepts from a client's ``SETUP``; shorter ones are raised to it (the
            server checks for a silent peer every ``keepalive`` seconds, so a client
            asking for 1 ms would cost a timer per millisecond). Default 1.0, a twentieth
            of rsocket-java's default client interval of 20 s.
        max_keepalive: the longest keepalive interval and max lifetime, in seconds, the
            server accepts from a client's ``SETUP``; longer ones are lowered to it, so a
            silent peer that asked for a lifetime of ``2**31 - 1`` ms is still closed
            within this. Default 300, five minutes (rsocket-java's default max lifetime is
            90 s).
        max_pending_connections: connections accepted and not yet admitted (no valid
            ``SETUP`` yet) at once; one more gets ``ERROR[REJECTED_SETUP]`` and is closed
            at once. They count against ``max_connections`` too, each holds at most
            ``max_setup_size`` bytes and gets no keepalive echo, and each is closed at
            ``setup_timeout``. Default 256, a quarter of ``max_connections``, so peers that
            never finish their ``SETUP`` cannot take the slots of admitted readers.
        max_connections_per_address: connections from one peer address at once, admitted
            or not; one more is refused as above. Default 256, a quarter of
            ``max_connections`` (nginx's ``limit_conn`` per ``$binary_remote_addr``).
        max_pending_per_address: connections from one peer address not yet admitted, at
            once; one more is refused as above. Default 64, a quarter of
            ``max_pending_connections``, so one address that opens connections and never
            sends a ``SETUP`` cannot take every pending slot (it takes at least four).
        auth_failures: failed authentications (a ``SETUP`` without the token, or with a
            wrong one) from one peer address before it is refused for ``auth_block``
            seconds; each failure is answered after a delay that doubles from 0.1 s up to
            2 s, so one peer cannot try more than a few tokens a second. Default 10.
        auth_block: seconds a peer address with ``auth_failures`` failed authentications
            in a row is refused at connect (``ERROR[REJECTED_SETUP]``, naming the wait).
            Default 60. A success clears the address's count.
        total_memory: the memory budget of all connections together, in bytes: what
            each holds for its peer (the frame being read, fragment chains, frames queued
            and in the socket's write buffer) added up. Over it, the server stops reading
            from the connections that hold the most (one more at each read or write while
            it stays over) and refuses new connections (``ERROR[REJECTED_SETUP]``); below
            nine tenths of it, every stopped connection is read again. ``None`` (the
            default): an eighth of the machine's physical memory, and at least four times
            ``connection_memory``.

    Raises:
        ValueError: a count or size below 1, or a duration not above 0.
    """

    max_connections: int = 1024
    max_streams: int = 128
    setup_timeout: float = 60.0
    max_setup_size: int = 64 * 1024
    connection_memory: int = 64 * 2**20
    write_high_water: int = 64 * 1024
    min_keepalive: float = 1.0
    max_keepalive: float = 300.0
    max_pending_connections: int = 256
    max_connections_per_address: int = 256
    auth_failures: int = 10
    auth_block: float = 60.0
    total_memory: int | None = None
    max_pending_per_address: int = 64

    def __post_init__(self) -> None:
        for name in (
            "max_connections",
            "max_streams",
            "max_setup_size",
            "connection_memory",
            "write_high_water",
            "max_pending_connections",
            "max_connections_per_address",
            "max_pending_per_address",
            "auth_failures",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("setup_timeout", "min_keepalive", "max_keepalive", "auth_block"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be above 0 seconds, got {getattr(self, name)}")
        if self.total_memory is None:
            object.__setattr__(self, "total_memory", default_total_memory(self.connection_memory))
        elif self.total_memory < 1:
            raise ValueError(f"total_memory must be at least 1, got {self.total_memory}")
        if self.max_keepalive < self.min_keepalive:
            raise ValueError(
                f"max_keepalive ({self.max_keepalive}) must be at least min_keepalive "
                f"({self.min_keepalive})"
            )
