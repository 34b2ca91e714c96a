"""The ``reactive-streams`` command: version, help, and the backpressure demo."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from reactive_streams import __version__
from reactive_streams.cli import main


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"reactive-streams, version {__version__}\n"


def test_help_lists_the_commands() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "demo" in result.output


def test_demo_stays_within_its_demand_bound() -> None:
    result = CliRunner().invoke(
        main, ["demo", "--elements", "2000", "--delay-ms", "0", "--batch", "16", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    assert "consumed 2,000 of 2,000 elements" in result.output
    assert "within the bound of 17" in result.output


def test_demo_rejects_bad_parameters() -> None:
    result = CliRunner().invoke(main, ["demo", "--batch", "0"])
    assert result.exit_code == 2
    assert "batch must be >= 1" in result.output


def test_python_dash_m_runs_the_cli() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "reactive_streams", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0
    assert completed.stdout.startswith("reactive-streams, version ")
