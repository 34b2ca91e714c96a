"""Soak: ``reactive-streams serve --follow`` for minutes, files landing, a reader, hostile peers.

Usage, from the repository root::

    python benchmarks/bench_soak_serve.py [--minutes 10] [--transport tcp|ws]

A ``serve --follow --token-file`` process (default limits, 2 partitions, poll interval
0.5 s) follows a directory into which a writer lands a CSV file of ``--rows`` records every
``--interval`` seconds (written beside it, then renamed in: the records' ids run 0, 1, 2,
... across the files). The reader (the token, from 127.0.0.1) reads both partitions as
live streams from the start for the whole run. Meanwhile hostile peers, from loopback
addresses 127.0.0.2 and up (a fresh block each round), attack in rounds: unfinished 16 MiB
frames, KEEPALIVE floods, 16 MiB first frames, SETUPs without the token with huge
lifetimes, idle connections and wrong tokens (``tests/rsocket/hostile.py``).

The server's RSS is printed every ``--every`` seconds. At the end the writer stops, the
reader reads to the last record, and the result is checked: every id exactly once. The
RSS after warm-up (the first fifth of the run, at least one minute when the run allows)
is compared with its largest value later (goal: within +10 MiB).

The followed directory's housekeeping (moving read files away) is not part of the run:
the producer does not support it yet, so files only land.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
from tests.rsocket import hostile  # noqa: E402

from reactive_streams.rsocket import connect  # noqa: E402
from reactive_streams.testing import RecordingSubscriber  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable

TOKEN = "soak-token-0123456789abcdef"
PARTITIONS = 2


def writer(incoming: Path, staging: Path, rows: int, interval: float, stop: threading.Event) -> int:
    """Land a file of ``rows`` records every ``interval`` s until ``stop``; returns the records."""
    written = 0
    for number in itertools.count():
        if stop.is_set():
            return written
        staged = staging / f"batch-{number:06d}.csv"
        staged.write_text("id,batch\n" + "".join(f"{written + i},{number}\n" for i in range(rows)))
        staged.rename(incoming / staged.name)
        written += rows
        stop.wait(interval)
    return written


def _round(served: hostile.Served, first: int) -> list[tuple[str, Callable[[], hostile.Attack]]]:
    """One round of attacks, from the block of addresses that starts at index ``first``."""
    lifetime, idle = hostile.attacker_address(first + 30), hostile.attacker_address(first + 31)
    return [
        ("unfinished", lambda: hostile.unfinished_frames(served, 8, 1.0, first)),
        ("keepalive", lambda: hostile.keepalive_floods(served, 4, 1.0, first + 10)),
        ("pre-setup", lambda: hostile.pre_setup_messages(served, 4, 1.0, first + 20)),
        ("lifetime", lambda: hostile.lifetime_setups(served, 50, lifetime)),
        ("idle", lambda: hostile.idle_connections(served, 80, idle)),
    ]


def attacker(served: hostile.Served, stop: threading.Event, counts: dict[str, int]) -> None:
    """Rounds of every attack, each from a fresh block of addresses, until ``stop``."""
    blocks = itertools.count(0, 100)
    while not stop.is_set():
        first = next(blocks) % 60_000
        attacks = _round(served, first)
        for name, attack in attacks:
            if stop.is_set():
                return
            try:
                held = attack()
            except OSError:
                counts["failed"] = counts.get("failed", 0) + 1
                continue
            stop.wait(1.0)
            held.close()
            counts[name] = counts.get(name, 0) + 1
        hostile.guesses(served, 3, hostile.attacker_address(first + 32))
        counts["guesses"] = counts.get("guesses", 0) + 3


def ids_of(readers: list[RecordingSubscriber[bytes]]) -> list[int]:
    ids: list[int] = []
    for reader in readers:
        for payload in list(reader.elements):
            ids += pa.ipc.open_stream(payload).read_all().column("id").to_pylist()
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--transport", choices=["tcp", "ws"], default="tcp")
    parser.add_argument(
        "--rows",
        type=int,
        default=200,
        help="records per file (files of 2,000 end a live route's readers with a Rule 3.9 "
        "error after about 8 batches: see benchmarks/README.md)",
    )
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between files")
    parser.add_argument("--every", type=float, default=15.0, help="seconds between RSS lines")
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False)
    print(f"uptime: {uptime.stdout.strip()}", flush=True)
    seconds = args.minutes * 60
    warm_up = min(max(60.0, seconds / 5), seconds / 2)
    with tempfile.TemporaryDirectory() as directory:
        base = Path(directory)
        incoming, staging = base / "incoming", base / "staging"
        incoming.mkdir()
        staging.mkdir()
        token_file = base / "token"
        token_file.write_text(TOKEN + "\n")
        token_file.chmod(0o600)
        with hostile.serving(
            ROOT / "src",
            incoming,
            "--token-file", str(token_file), "--schema", "id BIGINT, batch BIGINT",
            "--partitions", str(PARTITIONS), "--follow", "--poll-interval", "0.5",
            transport=args.transport,
        ) as served:  # fmt: skip
            stop = threading.Event()
            written: list[int] = []
            write = threading.Thread(
                target=lambda: written.append(
                    writer(incoming, staging, args.rows, args.interval, stop)
                ),
                daemon=True,
            )
            counts: dict[str, int] = {}
            attack = threading.Thread(target=attacker, args=(served, stop, counts), daemon=True)
            client = connect(served.url, token=TOKEN, timeout=30.0)
            readers = []
            for partition in range(PARTITIONS):
                reader = RecordingSubscriber[bytes](initial_request=16, request_on_next=1)
                request = json.dumps({"partition": partition, "start": 0}).encode()
                client.request_stream("events", request).subscribe(reader)
                readers.append(reader)
            started = time.monotonic()
            write.start()
            attack.start()
            samples: list[tuple[float, float]] = []
            next_line = 0.0
            waiter = threading.Event()
            while (elapsed := time.monotonic() - started) < seconds:
                samples.append((elapsed, served.rss))
                if elapsed >= next_line:
                    received = sum(len(reader.elements) for reader in readers)
                    print(
                        f"  {elapsed / 60:5.1f} min  RSS {samples[-1][1]:6.1f} MiB  "
                        f"batches read {received:,}  attacks {sum(counts.values()):,}",
                        flush=True,
                    )
                    next_line += args.every
                waiter.wait(1.0)
            stop.set()
            write.join(60)
            attack.join(120)
            total = written[0]
            deadline = time.monotonic() + 120
            while len(ids := ids_of(readers)) < total and time.monotonic() < deadline:
                waiter.wait(1.0)
            errors = [reader.error for reader in readers if reader.error is not None]
            client.close()
            final_rss = served.rss
    exact = sorted(ids) == list(range(total))
    warm = [rss for elapsed, rss in samples if elapsed <= warm_up]
    later = [rss for elapsed, rss in samples if elapsed > warm_up]
    after_warm_up = warm[-1]
    print(
        f"\nsoak: {args.minutes:g} min over {args.transport}, {total:,} records in "
        f"{total // args.rows:,} files; attacks: {counts}"
    )
    print(
        f"  reader: {len(ids):,} ids read, {'exact' if exact else 'NOT EXACT'} "
        f"(duplicates {len(ids) - len(set(ids)):,}, missing {total - len(set(ids)):,}); "
        f"errors {errors or 'none'}"
    )
    print(
        f"  RSS: start {samples[0][1]:.1f} MiB, after warm-up ({warm_up / 60:.1f} min) "
        f"{after_warm_up:.1f} MiB, largest later {max(later, default=after_warm_up):.1f} MiB "
        f"(+{max(later, default=after_warm_up) - after_warm_up:.1f}), "
        f"at the end {final_rss:.1f} MiB"
    )
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False)
    print(f"  uptime: {uptime.stdout.strip()}")
    if not exact or errors:
        sys.exit(1)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
