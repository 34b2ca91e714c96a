"""Admission: which connections a server takes, before they may cost it anything.

A connection is *pending* from accept until a valid ``SETUP`` (with the token, when the
server has one) admits it. ``Admission`` keeps the books the server's limits need at
connect and at ``SETUP``: connections per peer address, pending connections, and failed
authentications per peer address (a growing delay before each refusal, then a block).
It lives on the server's event loop and is used from that thread only.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._limits import ServerLimits

__all__ = ["Admission", "AdmissionStatistics", "peer_address"]

_FIRST_DELAY = 0.1
_MAX_DELAY = 2.0
_MAX_TRACKED = 65_536
"""Peer addresses whose failures are remembered at most; past it, those of addresses with
no connection and no block are forgotten (many addresses cannot grow the books)."""


def peer_address(peername: object) -> str:
    """The host of a transport's ``peername`` (``("127.0.0.1", 5000)`` -> ``"127.0.0.1"``)."""
    if isinstance(peername, tuple) and peername:
        return str(peername[0])
    return "unknown" if peername is None else str(peername)


@dataclass(frozen=True, slots=True)
class AdmissionStatistics:
    """A snapshot of ``Admission``'s books.

    Attributes:
        pending: connections accepted and not yet admitted.
        addresses: peer addresses with at least one connection.
        blocked: peer addresses refused for failed authentications right now.
        refused: connections refused at connect since the server started.
        failed_authentications: ``SETUP`` frames refused for their token.
    """

    pending: int
    addresses: int
    blocked: int
    refused: int
    failed_authentications: int


class Admission:
    """The admission books of one server (loop thread only).

    Args:
        limits: the server's limits (``max_pending_connections``,
            ``max_connections_per_address``, ``max_pending_per_address``,
            ``auth_failures``, ``auth_block``).
        clock: seconds, monotonic (the loop's ``time``).
    """

    def __init__(self, limits: ServerLimits, clock: Callable[[], float]) -> None:
        self._limits = limits
        self._clock = clock
        self._per_address: Counter[str] = Counter()
        self._pending_per_address: Counter[str] = Counter()
        self._pending = 0
        self._failures: Counter[str] = Counter()
        self._blocked_until: dict[str, float] = {}
        self._refused = 0
        self._failed = 0

    def refusal(self, address: str) -> str | None:
        """Why a new connection from ``address`` is refused, or ``None`` (then it counts).

        ``None`` means the connection is now counted as pending, and the caller must call
        ``closed`` once it ends.
        """
        limits = self._limits
        until = self._blocked_until.get(address)
        if until is not None:
            left = until - self._clock()
            if left > 0:
                self._refused += 1
                return (
                    f"too many failed authentications from {address}: refused for "
                    f"{math.ceil(left)} s more"
                )
            del self._blocked_until[address]
            self._failures.pop(address, None)
        if self._pending >= limits.max_pending_connections:
            self._refused += 1
            return (
                f"the server is at its limit of {limits.max_pending_connections} connections "
                "waiting for SETUP"
            )
        if self._per_address[address] >= limits.max_connections_per_address:
            self._refused += 1
            return (
                f"the server is at its limit of {limits.max_connections_per_address} "
                f"connections from {address}"
            )
        if self._pending_per_address[address] >= limits.max_pending_per_address:
            self._refused += 1
            return (
                f"the server is at its limit of {limits.max_pending_per_address} "
                f"connections from {address} waiting for SETUP"
            )
        self._per_address[address] += 1
        self._pending_per_address[address] += 1
        self._pending += 1
        return None

    def _unpend(self, address: str) -> None:
        self._pending -= 1
        self._pending_per_address[address] -= 1
        if self._pending_per_address[address] <= 0:
            del self._pending_per_address[address]

    def admitted(self, address: str) -> None:
        """A pending connection from ``address`` sent a valid ``SETUP``."""
        self._unpend(address)
        self._failures.pop(address, None)

    def closed(self, address: str, *, pending: bool) -> None:
        """A counted connection from ``address`` ended (``pending``: never admitted)."""
        if pending:
            self._unpend(address)
        self._per_address[address] -= 1
        if self._per_address[address] <= 0:
            del self._per_address[address]

    def failed(self, address: str) -> float:
        """A ``SETUP`` from ``address`` failed authentication: seconds to wait before refusing.

        The delay doubles with each failure in a row, from 0.1 s to at most 2 s; the
        ``auth_failures``-th failure blocks the address for ``auth_block`` seconds.
        """
        self._failed += 1
        if len(self._failures) >= _MAX_TRACKED:
            self._forget_idle()
        self._failures[address] += 1
        count = self._failures[address]
        if count >= self._limits.auth_failures:
            self._blocked_until[address] = self._clock() + self._limits.auth_block
        return float(min(_MAX_DELAY, _FIRST_DELAY * 2 ** (count - 1)))

    def _forget_idle(self) -> None:
        now = self._clock()
        for blocked, until in list(self._blocked_until.items()):
            if until <= now:
                del self._blocked_until[blocked]
        for address in list(self._failures):
            if address not in self._per_address and address not in self._blocked_until:
                del self._failures[address]

    def statistics(self) -> AdmissionStatistics:
        """A snapshot of the books."""
        now = self._clock()
        return AdmissionStatistics(
            pending=self._pending,
            addresses=len(self._per_address),
            blocked=sum(1 for until in self._blocked_until.values() if until > now),
            refused=self._refused,
            failed_authentications=self._failed,
        )
