"""Hostile peers against a real ``reactive-streams serve`` process, and its RSS while they act.

Shared by ``test_hostile_serve.py`` (bounds at the default limits) and the benchmarks that
print the same attacks' cost before and after a change. Every attacker is a plain blocking
or non-blocking socket; every loop is bounded by a count or a deadline. Attackers connect
from loopback addresses other than 127.0.0.1 (``attacker_address``) so that the limits kept
per peer address act on them and not on the real reader, which connects from 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import psutil

from reactive_streams.rsocket._frames import FrameReader, FrameType, encode_keepalive

from .rawpeer import setup_frame

TIMEOUT = 30.0
MAX_FRAME = 0xFFFFFF
"""The largest frame (and WebSocket message) the default server accepts: 16 MiB - 1."""

SERVING = re.compile(r"^serving .* on (?:tcp|ws)://[^:]+:(?P<port>\d+)$")
_CHUNK = memoryview(bytes(1 << 20))
_WS_REQUEST = (
    b"GET /rsocket HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    b"Sec-WebSocket-Version: 13\r\n\r\n"
)

_PATCHED = """
import functools, sys
import reactive_streams.rsocket as rsocket
rsocket.serve = functools.partial(rsocket.serve, transport={transport!r})
from reactive_streams.cli import main
sys.argv[0] = "reactive-streams"
main()
"""


def attacker_address(index: int) -> str:
    """The ``index``-th attacker's source address: 127.0.0.2, 127.0.0.3, ... (Linux loopback)."""
    return f"127.0.{2 + index // 250}.{2 + index % 250}"


def rss_mib(pid: int) -> float:
    """The process's resident set size, in MiB."""
    return float(psutil.Process(pid).memory_info().rss) / 2**20


@dataclass
class Served:
    """A running ``serve`` process: its port, transport, stderr lines."""

    process: subprocess.Popen[str]
    port: int
    transport: str
    lines: queue.Queue[str] = field(default_factory=queue.Queue)

    @property
    def rss(self) -> float:
        return rss_mib(self.process.pid)

    @property
    def url(self) -> str:
        scheme = "ws" if self.transport == "ws" else "tcp"
        return f"{scheme}://127.0.0.1:{self.port}/"


def _lines(stream: IO[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put("")


@contextlib.contextmanager
def serving(
    source: str | Path,
    inputs: Path,
    *arguments: str,
    transport: str = "tcp",
    token: str | None = None,
    patch_transport: bool = False,
) -> Iterator[Served]:
    """``python -m reactive_streams serve --input INPUTS --port 0 ARGUMENTS`` from ``source``.

    ``source``: the ``src`` directory whose code runs. ``transport``: passed as
    ``--transport`` unless it is ``"tcp"`` (older trees have no such option). ``token``:
    given in ``REACTIVE_STREAMS_TOKEN`` (every tree reads it). ``patch_transport``: for a
    tree whose ``serve`` command has no ``--transport``, run the command with the library's
    ``serve`` function given ``transport`` instead. The process is killed on the way out
    if still running.
    """
    env = {name: value for name, value in os.environ.items() if name != "REACTIVE_STREAMS_TOKEN"}
    env["PYTHONPATH"] = str(source)
    if token is not None:
        env["REACTIVE_STREAMS_TOKEN"] = token
    command = [sys.executable, "-m", "reactive_streams", "serve", "--input", str(inputs)]
    command += ["--port", "0", *arguments]
    if patch_transport:
        command[1:4] = ["-c", _PATCHED.format(transport=transport), "serve"]
    elif transport != "tcp":
        command += ["--transport", transport]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stderr is not None
    threading.Thread(target=_lines, args=(process.stderr, lines), daemon=True).start()
    try:
        first = lines.get(timeout=TIMEOUT)
        while first.startswith("Warning"):
            first = lines.get(timeout=TIMEOUT)
        found = SERVING.match(first)
        assert found is not None, first
        yield Served(process, int(found["port"]), transport, lines)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=TIMEOUT)
        process.stderr.close()


def connect_raw(port: int, source: str, transport: str) -> socket.socket:
    """A connection from ``source``; over ``ws`` its upgrade done (raises if refused)."""
    sock = socket.create_connection(
        ("127.0.0.1", port), timeout=TIMEOUT, source_address=(source, 0)
    )
    if transport == "ws":
        sock.sendall(_WS_REQUEST)
        answer = b""
        while not answer.endswith(b"\r\n\r\n"):  # a byte at a time: what follows is the peer's
            data = sock.recv(1)
            if not data:
                raise ConnectionError(f"the upgrade got no answer: {answer!r}")
            answer += data
        if not answer.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(f"the upgrade was refused: {answer[:80]!r}")
    return sock


def ws_header(length: int) -> bytes:
    """A client's binary WebSocket frame header for ``length`` bytes (mask key 0)."""
    if length < 126:
        sized = bytes([0x80 | length])
    elif length < 1 << 16:
        sized = bytes([0x80 | 126]) + length.to_bytes(2, "big")
    else:
        sized = bytes([0x80 | 127]) + length.to_bytes(8, "big")
    return b"\x82" + sized + b"\0\0\0\0"


def message(frame: bytes, transport: str) -> bytes:
    """An RSocket frame (with its 3-byte length prefix) as the transport carries it."""
    if transport == "ws":
        return ws_header(len(frame) - 3) + frame[3:]
    return frame


def push(sockets: list[socket.socket], total: int, seconds: float, unit: bytes = b"") -> int:
    """Write up to ``total`` bytes on each socket (``unit`` repeated, or zeros) for ``seconds``.

    Stops on a socket when it is written, refused (reset, closed) or still full at the
    deadline; returns the bytes written on all of them together.
    """
    chunk = memoryview(unit * max(1, (1 << 20) // len(unit))) if unit else _CHUNK
    left = dict.fromkeys(sockets, total)
    written = 0
    for sock in sockets:
        sock.setblocking(False)
    deadline = time.monotonic() + seconds
    while left and time.monotonic() < deadline:
        _, ready, _ = select.select([], list(left), [], 0.1)
        for sock in ready:
            try:
                sent = sock.send(chunk[: min(len(chunk), left[sock])])
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:  # refused: reset or closed by the server
                del left[sock]
                continue
            written += sent
            left[sock] -= sent
            if left[sock] <= 0:
                del left[sock]
    for sock in sockets:
        sock.setblocking(True)
        sock.settimeout(TIMEOUT)
    return written


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes ``sock`` within ``timeout`` s (what it sends is dropped)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    finally:
        sock.settimeout(TIMEOUT)
    return False


def refusal(sock: socket.socket, transport: str, timeout: float = TIMEOUT) -> str | None:
    """The reason of the ``ERROR[REJECTED_SETUP]`` the server sends first (``None``: other)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if (
                transport == "tcp"
                and len(data) >= 3
                and len(data) >= 3 + int.from_bytes(data[:3], "big")
            ):
                break
            if transport == "ws" and len(data) >= 2 and len(data) >= 2 + (data[1] & 0x7F):
                break
    except (ConnectionResetError, TimeoutError):
        pass
    finally:
        sock.settimeout(TIMEOUT)
    if transport == "ws":  # one unmasked binary message: strip its header, add the prefix
        if len(data) < 2 or data[0] != 0x82 or (data[1] & 0x7F) >= 126:
            return None
        data = (data[1] & 0x7F).to_bytes(3, "big") + data[2:]
    frames = FrameReader().feed(data) if data else []
    if not frames or frames[0].frame_type != FrameType.ERROR or frames[0].stream_id != 0:
        return None
    return frames[0].data.decode()


@dataclass
class Attack:
    """Sockets an attack holds open (closed by ``close``) and what it wrote."""

    sockets: list[socket.socket] = field(default_factory=list)
    written: int = 0
    refused: int = 0

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()


def unfinished_frames(served: Served, count: int, seconds: float = 4.0, first: int = 0) -> Attack:
    """``count`` peers, each from its own address: a SETUP without the token, then a
    16 MiB frame whose body is written for ``seconds`` and never finished."""
    attack = Attack()
    for index in range(count):
        with contextlib.suppress(OSError):
            sock = connect_raw(served.port, attacker_address(first + index), served.transport)
            header = MAX_FRAME.to_bytes(3, "big")  # the frame's length prefix, its body to come
            if served.transport == "ws":
                header = ws_header(MAX_FRAME)
            sock.sendall(message(setup_frame(), served.transport) + header)
            attack.sockets.append(sock)
    attack.written = push(attack.sockets, MAX_FRAME - 1, seconds)
    return attack


def keepalive_floods(served: Served, count: int, seconds: float = 4.0, first: int = 100) -> Attack:
    """``count`` peers, each from its own address: a SETUP without the token, then KEEPALIVE
    frames asking for an echo, written for ``seconds``; the echoes are never read."""
    attack = Attack()
    keepalive = message(encode_keepalive(respond=True, data=bytes(1024)), served.transport)
    for index in range(count):
        with contextlib.suppress(OSError):
            sock = connect_raw(served.port, attacker_address(first + index), served.transport)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(message(setup_frame(), served.transport))
            attack.sockets.append(sock)
    attack.written = push(attack.sockets, 64 << 20, seconds, unit=keepalive)
    return attack


def pre_setup_messages(
    served: Served, count: int, seconds: float = 4.0, first: int = 200
) -> Attack:
    """``count`` peers, each from its own address: a frame of 16 MiB - 1 as the first thing
    sent (over WebSocket: a message of that size), its body written for ``seconds``."""
    attack = Attack()
    for index in range(count):
        with contextlib.suppress(OSError):
            sock = connect_raw(served.port, attacker_address(first + index), served.transport)
            header = MAX_FRAME.to_bytes(3, "big")
            if served.transport == "ws":
                header = ws_header(MAX_FRAME)
            sock.sendall(header)
            attack.sockets.append(sock)
    attack.written = push(attack.sockets, MAX_FRAME, seconds)
    return attack


def lifetime_setups(served: Served, count: int, source: str) -> Attack:
    """``count`` connections from ``source``, each a SETUP without the token asking for a
    keepalive and lifetime of 2**31 - 1 ms, held open; ``refused`` counts the connections
    the server closed (after its refusal, or at connect)."""
    attack = Attack()
    setup = message(
        setup_frame(keepalive_ms=2**31 - 1, max_lifetime_ms=2**31 - 1), served.transport
    )
    for _ in range(count):
        try:
            sock = connect_raw(served.port, source, served.transport)
            sock.sendall(setup)
        except OSError:
            attack.refused += 1
            continue
        attack.sockets.append(sock)
    return attack


def idle_connections(served: Served, count: int, source: str) -> Attack:
    """``count`` connections from ``source`` that send nothing after connecting (over
    WebSocket: after the upgrade)."""
    attack = Attack()
    for _ in range(count):
        try:
            attack.sockets.append(connect_raw(served.port, source, served.transport))
        except OSError:
            attack.refused += 1
    return attack


def slow_upgrades(port: int, count: int, sent: int = 20, first: int = 0) -> Attack:
    """``count`` plain connections (from their own addresses) that start a WebSocket
    upgrade request with its first ``sent`` bytes; the caller trickles the rest
    (``trickle``) or leaves them hanging."""
    attack = Attack()
    for index in range(count):
        with contextlib.suppress(OSError):
            sock = socket.create_connection(
                ("127.0.0.1", port),
                timeout=TIMEOUT,
                source_address=(attacker_address(first + index), 0),
            )
            sock.sendall(_WS_REQUEST[:sent])
            attack.sockets.append(sock)
    return attack


def trickle(attack: Attack, position: int) -> int:
    """Send each socket of a ``slow_upgrades`` attack its request's byte at ``position``;
    returns how many sockets the server has already closed."""
    closed = 0
    for sock in attack.sockets:
        try:
            sock.sendall(_WS_REQUEST[position : position + 1])
            readable, _, _ = select.select([sock], [], [], 0)
            if readable and not sock.recv(65536):
                closed += 1
        except OSError:
            closed += 1
    return closed


def guesses(served: Served, count: int, source: str) -> list[str | None]:
    """``count`` wrong tokens in a row, one connection each, from ``source``: the refusal
    each got (``None``: closed without one, e.g. refused at connect)."""
    reasons: list[str | None] = []
    for index in range(count):
        try:
            sock = connect_raw(served.port, source, served.transport)
        except OSError:
            reasons.append(None)
            continue
        try:
            sock.sendall(message(setup_frame(token=f"guess-{index}"), served.transport))
            reasons.append(refusal(sock, served.transport))
        except OSError:
            reasons.append(None)
        finally:
            sock.close()
    return reasons


def peak_rss(served: Served, seconds: float, step: float = 0.1) -> float:
    """The largest RSS (MiB) sampled every ``step`` s for ``seconds``."""
    peak = served.rss
    waiter = threading.Event()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        waiter.wait(step)
        peak = max(peak, served.rss)
    return peak
