"""The ``rule`` marker is registered by the installed pytest plugin."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from reactive_streams.tck import pytest_plugin

_USER_TEST = """
from reactive_streams.reference import RangePublisher
from reactive_streams.tck import PublisherVerification


class TestRange(PublisherVerification):
    def create_publisher(self, elements):
        return RangePublisher(0, elements)
"""


def test_the_plugin_is_an_installed_pytest11_entry_point() -> None:
    plugins = {point.name: point.value for point in entry_points(group="pytest11")}
    assert plugins.get("reactive_streams_tck") == "reactive_streams.tck.pytest_plugin"


@pytest.mark.parametrize("options", [["--strict-markers"], ["-W", "error"]])
def test_a_user_project_runs_the_tck_strictly_without_registering_markers(
    tmp_path: Path, options: list[str]
) -> None:
    # A project of its own: no ini file, no conftest, so nothing registers the marker
    # except the plugin.
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_user_tck.py").write_text(textwrap.dedent(_USER_TEST))
    run = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            *options,
            *("-m", "rule", "-k", "spec309_request_zero"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert " passed" in run.stdout


def test_without_the_plugin_strict_markers_would_refuse_the_marker(tmp_path: Path) -> None:
    """The check above can fail: with the plugin disabled, the same run errors."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_user_tck.py").write_text(textwrap.dedent(_USER_TEST))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:reactive_streams_tck",
            "--strict-markers",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode != 0
    assert "'rule' not found in `markers` configuration option" in run.stdout + run.stderr


def test_the_registered_marker_line() -> None:
    assert pytest_plugin.RULE_MARKER.startswith("rule(id): ")
