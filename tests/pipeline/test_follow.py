"""``pipeline --input DIR --follow``: local files that land later, read until stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest
from click.testing import CliRunner

from reactive_streams.cli import main

from .conftest import SPARK_MARKS
from .test_read_on_executors import _inputs
from .test_read_remote import SOURCE, land_later_then_stop

SQL = "SELECT origin, count(*) AS flights FROM events GROUP BY origin"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--input", "rsocket://h:1/r"], "--follow is for --input files"),
        ([], "--follow needs --input files or directories"),
        (["--input", "IN", "--rate", "100"], "--rate: not with --follow"),
        (["--input", "IN", "--master", "spark://h:7077"], "loopback"),
    ],
)
def test_follow_refuses_what_it_cannot_do_in_one_line(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("id\n1\n", encoding="utf-8")
    args = [str(tmp_path / "in") if part == "IN" else part for part in extra]
    result = CliRunner().invoke(
        main, ["pipeline", "--follow", "--output", str(tmp_path / "out"), "--quiet", *args]
    )
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "out" / "result.parquet").exists()


def test_an_empty_followed_directory_needs_a_schema(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    result = CliRunner().invoke(
        main,
        ["pipeline", "--follow", "--input", str(tmp_path / "in"), "--quiet",
         "--output", str(tmp_path / "out")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "needs --schema" in result.output


@pytest.mark.slow
@pytest.mark.timeout(600)
@SPARK_MARKS[0]
@pytest.mark.parametrize("housekeeping", [False, True], ids=["kept", "moved-to-done"])
def test_files_that_land_later_are_read_until_sigterm_and_the_result_is_exact(
    tmp_path: Path, housekeeping: bool
) -> None:
    """The pipeline follows a directory: the first file is read, a second one lands
    mid-run and is read too, the result is rewritten after each micro-batch, and SIGTERM
    ends the run as completed (exit 0) with the result of both files. With housekeeping,
    the first file is moved into done/ once read: it is never read again."""
    _inputs(tmp_path / "staged")
    incoming = tmp_path / "in"
    incoming.mkdir()
    (tmp_path / "staged" / "a.csv").rename(incoming / "a.csv")
    result = tmp_path / "out" / "result.parquet"
    pipeline = subprocess.Popen(
        [sys.executable, "-m", "reactive_streams", "pipeline", "--input", str(incoming),
         "--follow", "--poll-interval", "0.1", "--sql", SQL,
         "--output", str(tmp_path / "out"), "--max-records-per-trigger", "500",
         "--summary-json", str(tmp_path / "summary.json"), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SOURCE},
    )  # fmt: skip
    try:
        land_later_then_stop(
            pipeline,
            result,
            tmp_path / "staged" / "b.jsonl",
            incoming,
            300,
            done=incoming / "done" / "a.csv" if housekeeping else None,
        )
    finally:
        if pipeline.poll() is None:
            pipeline.kill()
            pipeline.wait(timeout=60)
    local = CliRunner().invoke(
        main,
        ["pipeline", "--input", str(incoming), "--sql", SQL, "--output", str(tmp_path / "local"),
         "--summary-json", str(tmp_path / "local.json"), "--quiet"],
    )  # fmt: skip
    assert local.exit_code == 0, (local.stdout, local.stderr)
    ours = pq.read_table(result).sort_by("origin")
    theirs = pq.read_table(tmp_path / "local" / "result.parquet").sort_by("origin")
    assert ours.column("flights").to_pylist() == theirs.column("flights").to_pylist()
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert summary["status"] == "completed" and summary["live_input"] is True
    assert "stopped by SIGTERM" in " ".join(summary["notes"])
    assert summary["signal"] == "SIGTERM"  # the stop that ended the live run, named
    expected = json.loads((tmp_path / "local.json").read_text(encoding="utf-8"))
    for figure in ("input_rows", "rows_into_spark", "dead_letters"):
        assert summary[figure] == expected[figure], figure
