"""Admission before work: the token at SETUP, pending and per-address limits, failed tokens.

Each test starts its own server with small limits and drives raw peers against it, so
every refusal is the frame the server sends (``ERROR[REJECTED_SETUP]`` on stream 0).
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

import pytest

from reactive_streams.reference import IterablePublisher
from reactive_streams.rsocket import ErrorCode, ServerLimits, serve
from reactive_streams.rsocket._admission import Admission
from reactive_streams.rsocket._memory import MemoryPool, MemoryStatistics

from .rawpeer import RawPeer, request_stream, setup_frame

if TYPE_CHECKING:
    from collections.abc import Iterator

    from reactive_streams.rsocket import RSocketServer

TIMEOUT = 10.0
ROUTES = {"one": lambda data: IterablePublisher([b"one"])}


@contextlib.contextmanager
def _peers() -> Iterator[list[RawPeer]]:
    opened: list[RawPeer] = []
    try:
        yield opened
    finally:
        for peer in opened:
            peer.close()


def _refusal(peer: RawPeer) -> str:
    """The REJECTED_SETUP the server sent this peer before it closed the connection."""
    [frame] = peer.frames(1)
    assert (frame.stream_id, frame.number) == (0, ErrorCode.REJECTED_SETUP), frame
    assert peer.rest_until_eof() == []
    return frame.data.decode()


def _served(peer: RawPeer, stream_id: int = 1) -> bool:
    peer.send(request_stream(stream_id, "one", 1))
    element, _ = peer.frames(2)
    return element.data == b"one"


def _wait_for(condition: object, timeout: float = TIMEOUT) -> None:
    assert callable(condition)
    event = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if condition():
            return
        event.wait(0.01)
    raise AssertionError("the condition did not hold in time")


def _pending(server: RSocketServer) -> int:
    return server._core.admission.statistics().pending


def test_the_setup_must_carry_the_token_and_a_request_cannot_bring_it_later() -> None:
    with serve(ROUTES, token="s3cret") as server, _peers() as peers:
        for setup in (setup_frame(), setup_frame(token="wrong")):
            peer = RawPeer.connect(server.port)
            peers.append(peer)
            peer.send(setup)
            peer.send(request_stream(1, "one", 1))  # never read: refused at its SETUP
            reason = _refusal(peer)
            assert reason in (
                "authentication required: the SETUP carries no bearer token",
                "invalid bearer token",
            )
        good = RawPeer.connect(server.port)
        peers.append(good)
        good.send(setup_frame(token="s3cret"))
        assert _served(good)


def test_connections_waiting_for_setup_have_their_own_limit() -> None:
    limits = ServerLimits(max_pending_connections=3, max_connections_per_address=100)
    with serve(ROUTES, limits=limits) as server, _peers() as peers:
        peers += [RawPeer.connect(server.port) for _ in range(3)]
        _wait_for(lambda: _pending(server) == 3)
        refused = RawPeer.connect(server.port)
        peers.append(refused)
        assert _refusal(refused) == (
            "the server is at its limit of 3 connections waiting for SETUP"
        )
        peers[0].send(setup_frame())  # admitted: its slot is free for another
        assert _served(peers[0])
        _wait_for(lambda: _pending(server) == 2)
        admitted = RawPeer.connect(server.port)
        peers.append(admitted)
        admitted.send(setup_frame())
        assert _served(admitted)


def test_one_address_holds_only_its_share_of_the_slots_waiting_for_setup() -> None:
    limits = ServerLimits(max_pending_per_address=2)
    with serve(ROUTES, limits=limits) as server, _peers() as peers:
        peers += [RawPeer.connect(server.port, source="127.0.0.2") for _ in range(2)]
        _wait_for(lambda: _pending(server) == 2)
        third = RawPeer.connect(server.port, source="127.0.0.2")
        peers.append(third)
        assert _refusal(third) == (
            "the server is at its limit of 2 connections from 127.0.0.2 waiting for SETUP"
        )
        other = RawPeer.connect(server.port, source="127.0.0.3")
        peers.append(other)
        other.send(setup_frame())
        assert _served(other)
        peers[0].send(setup_frame())  # admitted: the address may wait with one more
        assert _served(peers[0])
        _wait_for(lambda: _pending(server) == 1)
        again = RawPeer.connect(server.port, source="127.0.0.2")
        peers.append(again)
        again.send(setup_frame())
        assert _served(again)


def test_connections_from_one_address_are_limited_and_another_address_is_not() -> None:
    limits = ServerLimits(max_connections_per_address=2)
    with serve(ROUTES, limits=limits) as server, _peers() as peers:
        for _ in range(2):
            peer = RawPeer.connect(server.port, source="127.0.0.2")
            peers.append(peer)
            peer.send(setup_frame())
            assert _served(peer)
        third = RawPeer.connect(server.port, source="127.0.0.2")
        peers.append(third)
        assert _refusal(third) == ("the server is at its limit of 2 connections from 127.0.0.2")
        other = RawPeer.connect(server.port, source="127.0.0.3")
        peers.append(other)
        other.send(setup_frame())
        assert _served(other)


def test_failed_tokens_block_their_address_for_a_while_and_not_others() -> None:
    limits = ServerLimits(auth_failures=3, auth_block=600.0)
    with serve(ROUTES, token="s3cret", limits=limits) as server, _peers() as peers:
        for guess in ("a", "b", "c"):
            peer = RawPeer.connect(server.port, source="127.0.0.4")
            peers.append(peer)
            peer.send(setup_frame(token=guess))
            assert _refusal(peer) == "invalid bearer token"
        # Blocked: even the right token is refused at connect now, without a look at it.
        blocked = RawPeer.connect(server.port, source="127.0.0.4")
        peers.append(blocked)
        reason = _refusal(blocked)
        assert reason.startswith("too many failed authentications from 127.0.0.4: refused for ")
        assert server._core.admission.statistics().blocked == 1
        other = RawPeer.connect(server.port, source="127.0.0.5")
        peers.append(other)
        other.send(setup_frame(token="s3cret"))
        assert _served(other)


def test_each_failure_in_a_row_doubles_the_wait_and_a_success_clears_it() -> None:
    now = [0.0]
    admission = Admission(ServerLimits(auth_failures=4, auth_block=30.0), lambda: now[0])
    assert admission.refusal("10.0.0.1") is None
    assert [admission.failed("10.0.0.1") for _ in range(3)] == [0.1, 0.2, 0.4]
    admission.admitted("10.0.0.1")  # a success: the count starts again
    assert admission.failed("10.0.0.1") == 0.1
    for _ in range(3):
        admission.failed("10.0.0.1")
    refusal = admission.refusal("10.0.0.1")
    assert refusal == "too many failed authentications from 10.0.0.1: refused for 30 s more"
    now[0] = 30.5
    assert admission.refusal("10.0.0.1") is None  # the block is over
    assert admission.failed("10.0.0.1") == 0.1
    waits = [admission.failed("10.0.0.2") for _ in range(8)]
    assert waits[-1] == 2.0  # the wait is capped


@pytest.mark.parametrize(("asked_ms", "kept"), [(2**31 - 1, 300.0), (5_000, 5.0)])
def test_a_client_keepalive_above_the_ceiling_is_lowered_to_it(asked_ms: int, kept: float) -> None:
    with serve(ROUTES) as server, _peers() as peers:
        peer = RawPeer.connect(server.port)
        peers.append(peer)
        # Before: a lifetime of 2**31 - 1 ms kept a silent peer's slot for 24 days.
        peer.send(setup_frame(keepalive_ms=asked_ms, max_lifetime_ms=asked_ms))
        assert _served(peer)
        [connection] = server._core.connections
        assert connection.settings.keepalive == kept
        assert connection.settings.max_lifetime == kept


class _Holder:
    def __init__(self, held: int) -> None:
        self.held_bytes = held
        self.holds: set[str] = set()

    def hold_reading(self, reason: str) -> None:
        self.holds.add(reason)

    def release_reading(self, reason: str) -> None:
        self.holds.discard(reason)


def test_the_pool_stops_the_largest_holders_while_over_and_resumes_below_nine_tenths() -> None:
    pool = MemoryPool(1_000)
    small, large, middle = _Holder(100), _Holder(700), _Holder(400)
    for holder in (small, large):
        pool.report(holder)
    assert pool.statistics().held == 800 and large.holds == set()
    pool.report(middle)  # 1,200 > 1,000: the one that holds the most stops
    assert (large.holds, middle.holds, small.holds) == ({"budget"}, set(), set())
    assert pool.spent
    middle.held_bytes = 450
    pool.report(middle)  # still over: the largest of those still read stops too
    assert middle.holds == {"budget"}
    pool.forget(large)  # 550: below nine tenths, every stopped connection reads again
    small.held_bytes = 100
    pool.report(small)
    assert middle.holds == set()
    assert pool.statistics().held == 550
    assert pool.statistics() == MemoryStatistics(
        budget=1_000, held=550, stopped=0, high_water=1_250
    )


def test_connections_over_the_servers_budget_stop_being_read_and_new_ones_are_refused() -> None:
    limits = ServerLimits(total_memory=300_000)
    with serve(ROUTES, limits=limits) as server, _peers() as peers:
        for _ in range(2):  # each announces a 200 kB frame and sends its first bytes
            peer = RawPeer.connect(server.port)
            peers.append(peer)
            peer.send(setup_frame())
            assert _served(peer)
            peer.send((200_000).to_bytes(3, "big") + b"\x00" * 100)
        memory = server._core.memory
        _wait_for(lambda: memory.statistics().stopped == 1)
        refused = RawPeer.connect(server.port)
        peers.append(refused)
        # Before: accepted; each connection kept only its own 64 MiB budget.
        assert _refusal(refused) == (
            "the server holds its whole memory budget (300000 bytes) for other peers"
        )
        # Both leave: the one still read is forgotten at once, which frees enough for the
        # stopped one to be read again (and its end seen).
        peers[0].close()
        peers[1].close()
        _wait_for(lambda: (memory.statistics().held, memory.statistics().stopped) == (0, 0))
        assert memory.statistics().high_water > 400_000
        admitted = RawPeer.connect(server.port)
        peers.append(admitted)
        admitted.send(setup_frame())
        assert _served(admitted)


def test_the_default_budget_is_a_stated_share_of_the_machine() -> None:
    import os

    machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limits = ServerLimits()
    assert limits.total_memory == max(4 * limits.connection_memory, machine // 8)
