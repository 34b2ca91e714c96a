"""The thin pytest layer, seen from pytest itself: outcomes, skip reasons, the rule marker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MODULE = """
from reactive_streams.tck import PublisherVerification
from tests.tck.broken.tck_broken_publishers import IgnoresDemandPublisher, RangePublisher


class TestGood(PublisherVerification):
    def create_publisher(self, elements):
        return RangePublisher(elements)


class TestIgnoresDemand(PublisherVerification):
    def create_publisher(self, elements):
        return IgnoresDemandPublisher(elements)
"""


def run_pytest(tmp_path: Path, *args: str) -> str:
    module = tmp_path / "test_user_tck.py"
    module.write_text(MODULE, encoding="utf-8")
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(module),
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(tmp_path),
            "-q",
            "-p",
            "no:randomly",
            *args,
        ],
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    return completed.stdout + completed.stderr


def test_pytest_reports_each_rule_with_the_tck_outcome(tmp_path: Path) -> None:
    output = run_pytest(tmp_path, "-m", "rule", "-k", "spec101_subscription or spec106 or spec104")
    assert "TestIgnoresDemand::test_required_spec101_" in output
    assert "Rule 1.1: request(1) must produce exactly one element; got on_next(1)" in output
    assert "Rule 1.6: not testable without more control over the publisher" in output
    assert "create_failed_publisher() returned None" in output
    assert "1 failed, 1 passed, 4 skipped" in output
