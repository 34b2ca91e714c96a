"""The RSocket server's memory under cheap hostile load: idle connections, unread streams.

Usage::

    PYTHONPATH=src python benchmarks/bench_rsocket_hostile.py [--connections 1000] [--streams 100]

The server runs in a child process with its default limits (so its RSS is its own); this
process plays the peers over loopback TCP:

1. ``--connections`` connections that send ``SETUP`` and then nothing;
2. one connection (32 KiB receive buffer) that sends ``--streams`` ``REQUEST_STREAM``
   with ``n = 2**31 - 1`` on an endless route of 1 KiB elements, and never reads.

For each, the child's RSS is sampled every 0.1 s for ``--seconds``; the baseline, the
peak and the peak's growth are printed in MiB, with the elements the route produced.
"""

from __future__ import annotations

import argparse
import resource
import socket
import subprocess
import sys
import time

import psutil

from reactive_streams.rsocket._frames import FrameType, encode_request, encode_setup
from reactive_streams.rsocket._metadata import COMPOSITE, ROUTING, encode_composite, encode_routing

CHILD = """
import itertools, sys, threading
from reactive_streams.reference import IterablePublisher
from reactive_streams.rsocket import serve
count = [0]
def endless(data):
    def elements():
        for _ in itertools.count():
            count[0] += 1
            yield b"x" * 1024
    return IterablePublisher(elements())
with serve({"endless": endless}) as server:
    print(server.port, flush=True)
    for line in sys.stdin:
        print(count[0], flush=True)
"""


def setup() -> bytes:
    return encode_setup(
        keepalive_ms=20_000,
        max_lifetime_ms=90_000,
        metadata_mime=COMPOSITE,
        data_mime="application/octet-stream",
    )


def sample(process: psutil.Process, seconds: float) -> float:
    peak = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, process.memory_info().rss)
        time.sleep(0.1)
    return peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard)),
    )
    assert child.stdout is not None and child.stdin is not None
    port = int(child.stdout.readline())
    process = psutil.Process(child.pid)
    try:
        base = process.memory_info().rss / 2**20
        peers = []
        for _ in range(args.connections):
            peer = socket.create_connection(("127.0.0.1", port))
            peer.sendall(setup())
            peers.append(peer)
        peak = sample(process, args.seconds)
        print(
            f"{args.connections} idle connections: RSS {base:.1f} -> peak {peak:.1f} MiB "
            f"(+{peak - base:.1f})"
        )
        for peer in peers:
            peer.close()
        time.sleep(1.0)
        base = process.memory_info().rss / 2**20
        peer = socket.socket()
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
        peer.connect(("127.0.0.1", port))
        route = encode_composite([(ROUTING, encode_routing("endless"))])
        peer.sendall(
            setup()
            + b"".join(
                encode_request(FrameType.REQUEST_STREAM, 2 * i + 1, b"", route, initial_n=2**31 - 1)
                for i in range(args.streams)
            )
        )
        peak = sample(process, args.seconds)
        child.stdin.write("count\n")
        child.stdin.flush()
        produced = int(child.stdout.readline())
        print(
            f"{args.streams} streams never read: RSS {base:.1f} -> peak {peak:.1f} MiB "
            f"(+{peak - base:.1f}); {produced} elements of 1 KiB produced"
        )
        peer.close()
    finally:
        child.stdin.close()
        child.wait(30)


if __name__ == "__main__":
    main()
