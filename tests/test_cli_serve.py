"""``reactive-streams serve``: the files served on a port, read by a client, stopped by a signal."""

from __future__ import annotations

import base64
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest
from click.testing import CliRunner

import reactive_streams
from reactive_streams.cli import main
from reactive_streams.rsocket import connect
from reactive_streams.testing import collect

from .files.partition_inputs import RECORDS, local_rows, write_inputs

TIMEOUT = 60.0
SOURCE = str(Path(reactive_streams.__file__).resolve().parent.parent)
SERVING = re.compile(
    r"^serving (?P<route>\S+) \((?P<partitions>\d+) partitions, (?P<records>[\d,]+) records, "
    r"schema (?P<schema>.*)\) on tcp://(?P<host>[^:]+):(?P<port>\d+)$"
)


def _lines(stream: IO[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put("")  # EOF


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_its_address_serves_a_client_and_stops_cleanly_on_a_signal(
    tmp_path: Path, stop: signal.Signals
) -> None:
    files = write_inputs(tmp_path / "input")
    process = subprocess.Popen(
        [sys.executable, "-m", "reactive_streams", "serve", "--input", str(tmp_path / "input"),
         "--port", "0", "--route", "flights", "--partitions", "2", "--batch-rows", "10",
         "--schema", "id BIGINT, name STRING, score DOUBLE", "--token", "s3cret"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SOURCE},  # the code under test, installed or not
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(process.stderr, lines), daemon=True).start()
    try:
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
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=TIMEOUT)
        for stream in (process.stdout, process.stderr):
            assert stream is not None
            stream.close()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--input", "missing.csv"], r"input not found: missing\.csv"),
        (["--schema", "id BIGINT,"], r"^Error: --schema: "),
        (["--schema", "id BIGINT, other STRING"], r"columns of .*a\.csv do not match --schema"),
        (["--timestamp-format", "%Q"], r"^Error: --timestamp-format: "),
    ],
)
def test_bad_input_or_options_are_one_line_and_exit_status_2(
    tmp_path: Path, arguments: list[str], message: str
) -> None:
    write_inputs(tmp_path / "input")
    given = ["serve", "--port", "0", *arguments]
    if "--input" not in arguments:
        given += ["--input", str(tmp_path / "input" / "a.csv")]
    result = CliRunner().invoke(main, given, catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert re.search(message, result.output, re.MULTILINE), result.output
    assert "Traceback" not in result.output


def test_help_states_the_guarantee_and_that_follow_is_not_there_yet() -> None:
    result = CliRunner().invoke(main, ["serve", "--help"])
    assert result.exit_code == 0
    assert "replayable" in result.output
    assert "--follow is not available yet" in result.output
