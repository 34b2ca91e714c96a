"""``reactive-streams serve`` under hostile peers, before and after a change; and what
admission and the server-wide memory budget cost a token holder's throughput.

Usage, from the repository root (the "before" tree checked out beside this one)::

    git worktree add --detach /tmp/before fe9067d
    python benchmarks/bench_hostile.py --before /tmp/before/src [--rounds 5]

Part 1. For each tree and transport (TCP, WebSocket) and each attack, a fresh ``serve``
process at its default limits (the token in ``REACTIVE_STREAMS_TOKEN``) is attacked over
loopback from addresses 127.0.0.2 and up, as in ``tests/rsocket/test_hostile_serve.py``:

- ``unfinished``: 48 peers, a SETUP without the token, then a 16 MiB frame never finished;
- ``keepalive``: 8 peers, a SETUP without the token, then KEEPALIVE frames asking for an
  echo, whose echoes are never read;
- ``pre-setup``: 24 peers whose first frame (over WebSocket: first message) is 16 MiB;
- ``lifetime``: 1,024 SETUPs without the token with a keepalive and lifetime of 2**31 - 1 ms,
  from one address, held open;
- ``idle``: 300 connections from one address that send nothing;
- ``slow upgrade`` (WebSocket only): 300 upgrade requests that send 20 bytes and stop.

The server's RSS is sampled every 0.1 s while the attack writes and for 2 s after; the
table shows the peak's growth over the RSS before the attack, and whether the real reader
(token, from 127.0.0.1) was served while the attackers held their connections.

Part 2. Short-payload throughput (8-byte payloads, request-stream, as in
``bench_rsocket.py --frames``) of a token holder against a server of each tree, in child
processes, in alternating rounds; the ratio after/before (goal: within 5 %).

The tree "before" has no ``--transport``: its WebSocket runs are its ``serve`` command with
the library's ``serve`` function given ``transport="ws"``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from typing import TYPE_CHECKING  # noqa: E402

from tests.rsocket import hostile  # noqa: E402

from reactive_streams.rsocket import connect  # noqa: E402
from reactive_streams.testing import collect  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

TOKEN = "bench-token-0123456789"


def reader_served(served: hostile.Served) -> str:
    """Whether the real reader (the token, from 127.0.0.1) gets the route's description."""
    try:
        with connect(served.url, token=TOKEN, timeout=10.0) as client:
            collect(client.request_response("events.meta"), timeout=10.0)
    except Exception as exc:
        return f"refused ({str(exc)[:60]})"
    return "served"


def _attacks(transport: str) -> list[tuple[str, Callable[[hostile.Served], hostile.Attack]]]:
    attacks: list[tuple[str, Callable[[hostile.Served], hostile.Attack]]] = [
        ("unfinished 16 MiB frames x48", lambda s: hostile.unfinished_frames(s, 48)),
        ("keepalive floods x8", lambda s: hostile.keepalive_floods(s, 8)),
        ("16 MiB first frame/message x24", lambda s: hostile.pre_setup_messages(s, 24)),
        (
            "lifetime 2^31-1 SETUPs x1024, one address",
            lambda s: hostile.lifetime_setups(s, 1024, "127.0.0.2"),
        ),
        (
            "idle connections x300, one address",
            lambda s: hostile.idle_connections(s, 300, "127.0.0.2"),
        ),
    ]
    if transport == "ws":
        attacks.append(("slow upgrades x300", lambda s: hostile.slow_upgrades(s.port, 300)))
    return attacks


def attack_table(trees: dict[str, Path], inputs: Path) -> None:
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for transport in ("tcp", "ws"):
        for name, attack in _attacks(transport):
            for label, source in trees.items():
                with hostile.serving(
                    source,
                    inputs,
                    "--schema",
                    "id BIGINT",
                    transport=transport,
                    token=TOKEN,
                    patch_transport=label == "before" and transport != "tcp",
                ) as served:
                    reader_served(served)  # warm: imports, first connection
                    base = served.rss
                    started = time.monotonic()
                    held = attack(served)
                    peak = hostile.peak_rss(served, 2.0)
                    reader = reader_served(served)
                    held.close()
                    rows.setdefault((transport, name), {})[label] = (
                        f"+{peak - base:,.0f} MiB, reader {reader}"
                    )
                    print(
                        f"{label:6} {transport:3} {name}: RSS {base:.0f} -> {peak:.0f} MiB "
                        f"(+{peak - base:.0f}), {held.written / 2**20:,.0f} MiB written, "
                        f"{time.monotonic() - started:.1f} s; reader {reader}",
                        flush=True,
                    )
    print(f"\n| transport | attack | {' | '.join(trees)} |")
    print(f"| --- | --- | {' | '.join('---' for _ in trees)} |")
    for (transport, name), cells in rows.items():
        print(f"| {transport} | {name} | {' | '.join(cells.get(t, '') for t in trees)} |")


CHILD = """
import sys
from reactive_streams.reference import IterablePublisher
from reactive_streams.rsocket import serve
payloads = [b"%08d" % index for index in range(int(sys.argv[1]))]
with serve({"items": lambda data: IterablePublisher(payloads)}, token=sys.argv[2]) as server:
    print(server.port, flush=True)
    sys.stdin.read()
"""


@contextlib.contextmanager
def _server(source: Path, count: int) -> Iterator[int]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(count), TOKEN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(source)},
    )
    try:
        assert child.stdout is not None
        yield int(child.stdout.readline())
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(30)


def _rate(port: int, count: int) -> float:
    """Elements per second of one request-stream of ``count`` 8-byte payloads (256 a request)."""
    from benchmarks.bench_rsocket import _Counter

    with connect(f"tcp://127.0.0.1:{port}", token=TOKEN) as client:
        counter = _Counter(batch=256)
        started = time.perf_counter()
        client.request_stream("items").subscribe(counter)
        if not counter.done.wait(120) or counter.error is not None:
            raise RuntimeError(f"the stream failed: {counter.error!r}")
        elapsed = time.perf_counter() - started
    assert counter.count == count, counter.count
    return count / elapsed


def throughput(trees: dict[str, Path], count: int, rounds: int) -> None:
    with contextlib.ExitStack() as stack:
        ports = {
            label: stack.enter_context(_server(source, count)) for label, source in trees.items()
        }
        for port in ports.values():
            _rate(port, count)  # warm
        rates: dict[str, list[float]] = {label: [] for label in trees}
        for _ in range(rounds):
            for label, port in ports.items():
                rates[label].append(_rate(port, count))
    print(
        f"\nshort payloads (8 bytes), request-stream with the token, loopback TCP, server in a "
        f"child process; {count:,} elements, {rounds} alternating rounds "
        f"(load average {os.getloadavg()[0]:.1f})"
    )
    for label, values in rates.items():
        print(
            f"  {label:<7} best {max(values):>10,.0f} el/s, "
            f"median {statistics.median(values):>10,.0f} el/s"
        )
    median = statistics.median(rates["after"]) / statistics.median(rates["before"])
    best = max(rates["after"]) / max(rates["before"])
    print(f"  after / before: median {median:.3f}, best {best:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--before", type=Path, required=True, help="the before tree's src")
    parser.add_argument("--after", type=Path, default=ROOT / "src", help="the after tree's src")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--elements", type=int, default=200_000)
    parser.add_argument("--skip-attacks", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False)
    print(f"uptime: {uptime.stdout.strip()}")
    if not args.skip_attacks:
        with tempfile.TemporaryDirectory() as directory:
            inputs = Path(directory)
            (inputs / "a.csv").write_text("id\n" + "".join(f"{i}\n" for i in range(1000)))
            attack_table(trees, inputs)
    if not args.skip_throughput:
        throughput(trees, args.elements, args.rounds)


if __name__ == "__main__":
    main()
