"""``reactive-streams serve``: the files served on a port, read by a client, stopped by a signal."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest
from click.testing import CliRunner

import reactive_streams
from reactive_streams import Flow
from reactive_streams.cli import main
from reactive_streams.rsocket import RSocketClient, RSocketError, connect
from reactive_streams.testing import RecordingSubscriber, collect

from .files.partition_inputs import RECORDS, local_rows, write_inputs

TIMEOUT = 60.0
SOURCE = str(Path(reactive_streams.__file__).resolve().parent.parent)
SERVING = re.compile(
    r"^serving (?P<route>\S+) \((?P<partitions>\d+) partitions, (?P<records>[\d,]+) records"
    r"(?P<following>, following the input)?, schema (?P<schema>.*)\) "
    r"on (?P<transport>tcp|ws)://(?P<host>[^:]+):(?P<port>\d+)$"
)


def _lines(stream: IO[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put("")  # EOF


@contextlib.contextmanager
def _serving(
    *arguments: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], queue.Queue[str]]]:
    """``reactive-streams serve ARGUMENTS`` in a subprocess, its stderr lines in a queue.

    The code under test is imported whether installed or not. On the way out a process
    still running is killed, and its stderr closed.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "reactive_streams", "serve", *arguments],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **{
                name: value
                for name, value in os.environ.items()
                if name != "REACTIVE_STREAMS_TOKEN"
            },
            "PYTHONPATH": SOURCE,
            **(env or {}),
        },
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(process.stderr, lines), daemon=True).start()
    try:
        yield process, lines
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=TIMEOUT)
        assert process.stderr is not None
        process.stderr.close()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_its_address_serves_a_client_and_stops_cleanly_on_a_signal(
    tmp_path: Path, stop: signal.Signals
) -> None:
    files = write_inputs(tmp_path / "input")
    with _serving(
        "--input", str(tmp_path / "input"), "--port", "0", "--route", "flights",
        "--partitions", "2", "--batch-rows", "10",
        "--schema", "id BIGINT, name STRING, score DOUBLE",
        env={"REACTIVE_STREAMS_TOKEN": "s3cret"},
    ) as (process, lines):  # fmt: skip
        line = lines.get(timeout=TIMEOUT)
        found = SERVING.match(line)
        assert found is not None, line
        assert found["route"] == "flights"
        assert (found["partitions"], found["records"]) == ("2", str(RECORDS))
        assert found["schema"] == "id int64, name string, score double, _dead_letter string"
        with connect(f"tcp://127.0.0.1:{found['port']}", token="s3cret") as client:
            [data] = collect(client.request_response("flights.meta"), timeout=TIMEOUT)
            meta = json.loads(data)
            schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(meta["schema"])))
            assert schema.names == ["id", "name", "score", "_dead_letter"]
            rows = []
            for partition in range(2):
                request = json.dumps({"partition": partition, "start": 0}).encode()
                for payload in collect(client.request_stream("flights", request), timeout=TIMEOUT):
                    rows += pa.ipc.open_stream(payload).read_all().to_pylist()
        assert rows == local_rows(files)
        process.send_signal(stop)
        assert process.wait(timeout=TIMEOUT) == 0
        assert lines.get(timeout=TIMEOUT) == "stopped serving flights"


def test_transport_ws_serves_the_route_over_websocket(tmp_path: Path) -> None:
    files = write_inputs(tmp_path / "input")
    with _serving(
        "--input", str(tmp_path / "input"), "--port", "0", "--transport", "ws",
        "--partitions", "1", "--schema", "id BIGINT, name STRING, score DOUBLE",
    ) as (process, lines):  # fmt: skip
        found = SERVING.match(lines.get(timeout=TIMEOUT))
        assert found is not None
        assert found["transport"] == "ws"
        rows = []
        with connect(f"ws://127.0.0.1:{found['port']}/") as client:
            request = json.dumps({"partition": 0, "start": 0}).encode()
            for payload in collect(client.request_stream("events", request), timeout=TIMEOUT):
                rows += pa.ipc.open_stream(payload).read_all().to_pylist()
        assert rows == local_rows(files)
        with (
            pytest.raises(RSocketError),  # not a TCP server
            connect(f"tcp://127.0.0.1:{found['port']}", timeout=5.0) as client,
        ):
            collect(client.request_response("events.meta"), timeout=5.0)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=TIMEOUT) == 0


@pytest.mark.parametrize("how", ["file", "environment", "argv"])
def test_the_token_from_a_file_or_the_environment_stays_out_of_argv(
    tmp_path: Path, how: str
) -> None:
    write_inputs(tmp_path / "input")
    token_file = tmp_path / "token"
    token_file.write_text("from-a-file\n")
    token_file.chmod(0o600)
    token = {"file": "from-a-file", "environment": "from-the-env", "argv": "in-argv"}[how]
    given = {
        "file": ["--token-file", str(token_file)],
        "environment": [],
        "argv": ["--token", token],
    }[how]
    environment = {"REACTIVE_STREAMS_TOKEN": "from-the-env"} if how == "environment" else {}
    with _serving(
        "--input", str(tmp_path / "input"), "--port", "0", "--route", "flights",
        "--schema", "id BIGINT, name STRING, score DOUBLE", *given, env=environment,
    ) as (process, lines):  # fmt: skip
        first = lines.get(timeout=TIMEOUT)
        if how == "argv":
            assert first == (
                "Warning: --token is visible to every local user (ps); use --token-file or "
                "REACTIVE_STREAMS_TOKEN instead"
            )
            first = lines.get(timeout=TIMEOUT)
        found = SERVING.match(first)
        assert found is not None, first
        with open(f"/proc/{process.pid}/cmdline", "rb") as cmdline:
            assert (token.encode() in cmdline.read()) == (how == "argv")
        address = f"tcp://127.0.0.1:{found['port']}"
        with connect(address, token=token) as client:
            assert _answer(client, "flights.meta")["partitions"] == 4
        with connect(address, token="wrong") as client, pytest.raises(RSocketError):
            _answer(client, "flights.meta")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=TIMEOUT) == 0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--input", "missing.csv"], r"input not found: missing\.csv"),
        (["--schema", "id BIGINT,"], r"^Error: --schema: "),
        (["--schema", "id BIGINT, other STRING"], r"columns of .*a\.csv do not match --schema"),
        (["--timestamp-format", "%Q"], r"^Error: --timestamp-format: "),
        (["--input", "{empty}", "--follow"], r"^Error: --follow on directories .* --schema"),
        (["--route", ""], r"^Error: --route: a partitioned route needs a name"),
        (["--route", "r" * 248], r"^Error: --route: the route name is 248 UTF-8 bytes long, "),
        (["--token", "a", "--token-file", "{token}"], r"^Error: give the token once: --token or"),
        (["--token-file", "{empty}/none"], r"^Error: --token-file .*none: cannot read it"),
        (["--token-file", "{blank}"], r"^Error: --token-file .*blank: the file holds no token"),
    ],
)
def test_bad_input_or_options_are_one_line_and_exit_status_2(
    tmp_path: Path, arguments: list[str], message: str
) -> None:
    write_inputs(tmp_path / "input")
    (tmp_path / "empty").mkdir()
    (tmp_path / "token").write_text("s3cret\n")
    (tmp_path / "blank").write_text("\n")
    arguments = [
        argument.format(
            empty=tmp_path / "empty", token=tmp_path / "token", blank=tmp_path / "blank"
        )
        for argument in arguments
    ]
    given = ["serve", "--port", "0", *arguments]
    if "--input" not in arguments:
        given += ["--input", str(tmp_path / "input" / "a.csv")]
    result = CliRunner().invoke(main, given, catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert re.search(message, result.output, re.MULTILINE), result.output
    assert "Traceback" not in result.output


def test_help_states_the_guarantees() -> None:
    result = CliRunner().invoke(main, ["serve", "--help"])
    assert result.exit_code == 0
    assert "replayable" in result.output
    assert "--follow" in result.output and "files that land later" in result.output


def _answer(client: RSocketClient, route: str) -> dict[str, object]:
    [data] = collect(client.request_response(route), timeout=TIMEOUT)
    answer: dict[str, object] = json.loads(data)
    return answer


def test_follow_serves_files_that_land_later_as_a_live_route(tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    with _serving(
        "--input", str(incoming), "--port", "0", "--route", "events", "--partitions", "2",
        "--schema", "id BIGINT", "--follow", "--poll-interval", "0.05",
    ) as (process, lines):  # fmt: skip
        found = SERVING.match(lines.get(timeout=TIMEOUT))
        assert found is not None
        assert found["records"] == "0" and found["following"]
        with connect(f"tcp://127.0.0.1:{found['port']}") as client:
            assert _answer(client, "events.meta")["live"] is True
            assert _answer(client, "events.offsets") == {
                "high_water": [0, 0],
                "final": [False, False],
            }
            staged = tmp_path / "batch-1.csv"
            staged.write_text("id\n" + "".join(f"{i}\n" for i in range(10)))
            staged.rename(incoming / "batch-1.csv")  # lands whole
            deadline = time.monotonic() + TIMEOUT
            while _answer(client, "events.offsets")["high_water"] != [5, 5]:
                assert time.monotonic() < deadline, "the new file was never appended"
                time.sleep(0.05)
            request = json.dumps({"partition": 1, "start": 0}).encode()
            stream = Flow.from_publisher(client.request_stream("events", request)).take(1)
            [payload] = stream.to_list(timeout=TIMEOUT)
            assert pa.ipc.open_stream(payload).read_all().column("id").to_pylist() == [
                5,
                6,
                7,
                8,
                9,
            ]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=TIMEOUT) == 0


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_slow_reader_keeps_the_producers_memory_flat(tmp_path: Path) -> None:
    """The producer reads its files only as fast as a reader asks: a reader that takes one
    batch at a time, slowly, through a 600,000-record input (15 MiB of CSV) leaves its RSS flat."""
    directory = tmp_path / "input"
    directory.mkdir()
    with (directory / "big.csv").open("w") as out:
        out.write("id,name,score\n")
        for number in range(600_000):
            out.write(f"{number},name-{number},{number}.5\n")
    with _serving(
        "--input", str(directory), "--port", "0", "--partitions", "1", "--batch-rows", "1000"
    ) as (process, lines):  # fmt: skip
        found = SERVING.match(lines.get(timeout=TIMEOUT))
        assert found is not None
        with connect(f"tcp://127.0.0.1:{found['port']}") as client:
            reader = RecordingSubscriber[bytes](initial_request=1)
            client.request_stream("events", b'{"partition":0,"start":0}').subscribe(reader)
            assert reader.wait_for_elements(1, TIMEOUT)
            assert reader.subscription is not None
            for _ in range(10):  # warm-up: the first batches, buffers, imports
                count = len(reader.elements)
                reader.subscription.request(1)
                assert reader.wait_for_elements(count + 1, TIMEOUT)
            before = _rss_mib(process.pid)
            for _ in range(60):  # a slow reader: one batch, then a pause
                count = len(reader.elements)
                reader.subscription.request(1)
                assert reader.wait_for_elements(count + 1, TIMEOUT)
                time.sleep(0.02)
            grown = _rss_mib(process.pid) - before
            reader.subscription.cancel()
        assert len(reader.elements) == 71  # never more than requested
        assert grown < 10, f"the producer's RSS grew by {grown:.1f} MiB"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=TIMEOUT) == 0


def _partition_ids(client: RSocketClient, route: str, partition: int, start: int) -> list[int]:
    """The ids of one batch of ``partition`` from ``start`` (raises what the stream ends in)."""
    request = json.dumps({"partition": partition, "start": start}).encode()
    stream = Flow.from_publisher(client.request_stream(route, request)).take(1)
    [payload] = stream.to_list(timeout=TIMEOUT)
    ids: list[int] = pa.ipc.open_stream(payload).read_all().column("id").to_pylist()
    return ids


def test_follow_survives_housekeeping_and_never_reads_a_planted_link(tmp_path: Path) -> None:
    """A read file moved into done/ is not read again and the offsets keep answering; a
    decoy swapped for a link to a 0600 file outside, with the same size and mtime, is
    refused for its own partition with a one-line error naming it."""
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    (incoming / "a.csv").write_text("id\n" + "".join(f"{i}\n" for i in range(10, 20)))
    decoy = incoming / "decoy.csv"
    decoy.write_text("id\n" + "".join(f"{i}\n" for i in range(20, 30)))
    secret = tmp_path / "secret.csv"
    secret.write_text("id\n" + "".join(f"{i}\n" for i in range(90, 100)))
    secret.chmod(0o600)
    with _serving(
        "--input", str(incoming), "--port", "0", "--route", "events", "--partitions", "2",
        "--follow", "--poll-interval", "0.05",
    ) as (process, lines):  # fmt: skip
        found = SERVING.match(lines.get(timeout=TIMEOUT))
        assert found is not None
        with connect(f"tcp://127.0.0.1:{found['port']}") as client:
            assert _partition_ids(client, "events", 0, 0) == list(range(10, 20))
            for partition in range(2):
                commit = json.dumps({"partition": partition, "offset": 10}).encode()
                collect(client.request_response("events.commit", commit), timeout=TIMEOUT)
            (incoming / "done").mkdir()
            (incoming / "a.csv").rename(incoming / "done" / "a.csv")
            planned = decoy.stat()
            decoy.unlink()
            decoy.symlink_to(secret)
            os.utime(secret, ns=(planned.st_atime_ns, planned.st_mtime_ns))
            staged = tmp_path / "b.csv"
            staged.write_text("id\n" + "".join(f"{i}\n" for i in range(30, 40)))
            staged.rename(incoming / "b.csv")
            deadline = time.monotonic() + TIMEOUT
            while _answer(client, "events.offsets")["high_water"] != [15, 15]:
                assert time.monotonic() < deadline, "b.csv was never appended"
                time.sleep(0.05)
            assert _partition_ids(client, "events", 0, 10) == [30, 31, 32, 33, 34]
            assert _partition_ids(client, "events", 1, 10) == [35, 36, 37, 38, 39]
            with pytest.raises(Exception, match=r"decoy\.csv is a symbolic link now") as caught:
                _partition_ids(client, "events", 1, 0)
            assert "\n" not in str(caught.value)
            # done/a.csv is known by identity: never appended again.
            assert _answer(client, "events.offsets")["high_water"] == [15, 15]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=TIMEOUT) == 0
