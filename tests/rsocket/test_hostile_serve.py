"""Hostile peers against the real ``reactive-streams serve`` command, at its default limits.

One ``serve --token-file`` process per transport (TCP, WebSocket) for the module; every
attack comes from its own loopback addresses (127.0.0.2 and up, so the limits kept per
peer address act on the attackers, not on the reader at 127.0.0.1), and every bound is
checked on the server process's RSS (``psutil``) while the attackers hold their
connections, and on the real reader, which must still be served. The figures before and
after admission are in ``benchmarks/README.md`` (``benchmarks/bench_hostile.py``).
"""

from __future__ import annotations

import contextlib
import itertools
import resource
import select
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import reactive_streams
from reactive_streams.rsocket import connect
from reactive_streams.testing import collect

from . import hostile

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="attackers bind 127.0.0.2 and up (Linux loopback)"
)

TOKEN = "the-readers-token-0123456789"
SOURCE = Path(reactive_streams.__file__).resolve().parent.parent
PENDING_BYTES = 16  # MiB: max_pending_connections (256) x max_setup_size (64 KiB)
SLACK = 16  # MiB: the interpreter's own growth under load (buffers, sockets, threads)
_ADDRESSES = itertools.count(0, 100)


@pytest.fixture(scope="module", autouse=True)
def _file_descriptors() -> None:
    """Attackers hold hundreds of sockets; so does ``serve`` (it inherits the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096 <= hard or soft < hard < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))


@pytest.fixture(scope="module", params=["tcp", "ws"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[hostile.Served]:
    directory = tmp_path_factory.mktemp(f"serve-{request.param}")
    inputs = directory / "input"
    inputs.mkdir()
    (inputs / "a.csv").write_text("id\n" + "".join(f"{i}\n" for i in range(1000)))
    token_file = directory / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    with hostile.serving(
        SOURCE,
        inputs,
        "--token-file",
        str(token_file),
        "--schema",
        "id BIGINT",
        transport=request.param,
    ) as server:
        assert _reader_served(server)  # warm: imports, the first connection
        yield server


def _reader_served(served: hostile.Served) -> bool:
    """The real reader (the token, from 127.0.0.1) gets the route's description."""
    with connect(served.url, token=TOKEN, timeout=hostile.TIMEOUT) as client:
        [data] = collect(client.request_response("events.meta"), timeout=hostile.TIMEOUT)
    return b'"partitions"' in data


def _addresses() -> int:
    """The first attacker address index of a test's own block of 100."""
    return next(_ADDRESSES)


class _Peak:
    """The server's RSS, sampled every 50 ms while the attack runs (a monitor, not a wait)."""

    def __init__(self, served: hostile.Served) -> None:
        self._served = served
        self.base = served.rss
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self._served.rss)

    def __enter__(self) -> _Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(hostile.TIMEOUT)
        self.peak = max(self.peak, self._served.rss)

    @property
    def growth(self) -> float:
        return self.peak - self.base


def _all_closed(attack: hostile.Attack, timeout: float = hostile.TIMEOUT) -> bool:
    """Whether the server closes every connection of ``attack`` within ``timeout`` s."""
    with ThreadPoolExecutor(16) as pool:
        return all(pool.map(lambda sock: hostile.closed_by_server(sock, timeout), attack.sockets))


@contextlib.contextmanager
def _held(attack: hostile.Attack) -> Iterator[hostile.Attack]:
    """``attack``'s connections, closed on the way out."""
    try:
        yield attack
    finally:
        attack.close()


def _refused_at_connect(served: hostile.Served, source: str) -> str | None:
    """The refusal a new connection from ``source`` gets before it sends anything."""
    sock = hostile.connect_raw(served.port, source, served.transport)
    try:
        return hostile.refusal(sock, served.transport)
    finally:
        sock.close()


def _readable(attack: hostile.Attack, expected: int) -> int:
    """How many of ``attack``'s sockets have something to read (a refusal), once
    ``expected`` of them do or ``hostile.TIMEOUT`` s have passed."""
    deadline = time.monotonic() + hostile.TIMEOUT
    while True:
        readable, _, _ = select.select(attack.sockets, [], [], 0.1)
        if len(readable) >= expected or time.monotonic() > deadline:
            return len(readable)


def _closed_growth(
    served: hostile.Served, start: Callable[[], hostile.Attack], count: int
) -> float:
    """Run an attack of ``count`` connections; every one must be closed by the server, and
    the reader served meanwhile. Returns the server's RSS growth (MiB) until then."""
    with _Peak(served) as peak, _held(start()) as attack:
        assert len(attack.sockets) == count
        assert _all_closed(attack)
        assert _reader_served(served)
    return peak.growth


def test_tokenless_peers_are_refused_at_setup_and_cost_no_memory(
    served: hostile.Served,
) -> None:
    """48 unfinished 16 MiB frames and 8 KEEPALIVE floods after a SETUP without the token
    (before admission: +770 MiB and +486 MiB over TCP): each is refused at its SETUP, and
    the server holds at most the pending slots' ``max_setup_size`` each."""
    first = _addresses()
    frames = _closed_growth(
        served, lambda: hostile.unfinished_frames(served, 48, seconds=2.0, first=first), 48
    )
    floods = _closed_growth(
        served, lambda: hostile.keepalive_floods(served, 8, seconds=2.0, first=first + 50), 8
    )
    assert frames < PENDING_BYTES + SLACK, f"unfinished frames: +{frames:.0f} MiB"
    assert floods < PENDING_BYTES + SLACK, f"keepalive floods: +{floods:.0f} MiB"


def test_a_huge_first_frame_or_message_is_refused_before_its_body_is_read(
    served: hostile.Served,
) -> None:
    """24 peers whose first frame (over WebSocket: first message) announces 16 MiB: refused
    at its header, before the body is buffered (over WebSocket, without the screen ahead of
    aiohttp's parser: +998 MiB)."""
    first = _addresses()
    growth = _closed_growth(
        served, lambda: hostile.pre_setup_messages(served, 24, seconds=2.0, first=first), 24
    )
    assert growth < PENDING_BYTES + SLACK, f"+{growth:.0f} MiB"


def test_setups_without_the_token_with_huge_lifetimes_do_not_lock_the_reader_out(
    served: hostile.Served,
) -> None:
    """1,024 SETUPs without the token asking for a lifetime of 2**31 - 1 ms, from one
    address, held open (before admission they locked the reader out): the address is
    blocked after its failures, and the reader is admitted."""
    source = hostile.attacker_address(_addresses())
    with _Peak(served) as peak, _held(hostile.lifetime_setups(served, 1024, source)):
        assert _reader_served(served)
        blocked = _refused_at_connect(served, source)
        assert blocked is not None
        assert blocked.startswith(f"too many failed authentications from {source}")
    assert peak.growth < PENDING_BYTES + SLACK, f"+{peak.growth:.0f} MiB"


def test_idle_connections_from_one_address_take_only_its_share_of_pending_slots(
    served: hostile.Served,
) -> None:
    """300 connections from one address that never send a SETUP: 64 wait (the address's
    share of the 256 pending slots), the rest are refused, and the reader is admitted."""
    source = hostile.attacker_address(_addresses())
    with _Peak(served) as peak, _held(hostile.idle_connections(served, 300, source)) as attack:
        assert len(attack.sockets) == 300
        assert _readable(attack, 300 - 64) == 300 - 64
        assert _reader_served(served)
    assert peak.growth < PENDING_BYTES + SLACK, f"+{peak.growth:.0f} MiB"


def test_token_guessing_is_slowed_and_then_the_address_is_blocked(
    served: hostile.Served,
) -> None:
    """Ten wrong tokens at once from one address (before admission: 8,000 a second on one
    connection): each is refused, and the eleventh connection is refused at connect."""
    source = hostile.attacker_address(_addresses())
    with ThreadPoolExecutor(10) as pool:
        reasons = list(pool.map(lambda _: hostile.guesses(served, 1, source)[0], range(10)))
    assert reasons == ["invalid bearer token"] * 10
    blocked = _refused_at_connect(served, source)
    assert blocked is not None
    assert blocked.startswith(f"too many failed authentications from {source}: refused for")
    assert _reader_served(served)


def test_slow_upgrade_requests_cost_little_and_do_not_lock_the_reader_out(
    served: hostile.Served,
) -> None:
    """300 WebSocket upgrade requests that stop after 20 bytes (aiohttp's part: see the
    benchmark for how long they stay open): the server's RSS stays small and the reader
    is admitted."""
    if served.transport != "ws":
        pytest.skip("an upgrade request is WebSocket's")
    first = _addresses()
    with _Peak(served) as peak, _held(hostile.slow_upgrades(served.port, 300, first=first)):
        assert _reader_served(served)
    assert peak.growth < PENDING_BYTES + SLACK, f"+{peak.growth:.0f} MiB"
