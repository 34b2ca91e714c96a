"""``reactive-streams tck``: the per-rule table, the closing line, the JSON, the exit status."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from reactive_streams.cli import main

FACTORIES = "tests.tck.tck_cli_factories"
FAST = ["--timeout", "0.3", "--case-timeout", "5"]
CLOSING = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) skipped in [0-9.]+ s$", re.MULTILINE)


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["tck", *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_a_correct_publisher_passes_and_the_json_report_is_written(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    code, output = run(
        "publisher",
        f"{FACTORIES}:range_publisher",
        "--failed",
        f"{FACTORIES}:failed_publisher",
        "--json",
        str(report_path),
        *FAST,
    )
    assert code == 0, output
    closing = CLOSING.search(output)
    assert closing is not None, output
    passed, failed, skipped = (int(group) for group in closing.groups())
    assert failed == 0
    assert passed >= 36
    report = json.loads(report_path.read_text())
    assert report["summary"]["passed"] == passed
    assert report["summary"]["failed"] == 0
    assert report["summary"]["skipped"] == skipped
    assert report["summary"]["required_failed"] == 0
    entry = next(
        item
        for item in report["results"]
        if item["test"] == "test_required_spec309_request_zero_must_signal_value_error"
    )
    assert entry == {
        "test": "test_required_spec309_request_zero_must_signal_value_error",
        "rule": "3.9",
        "kind": "required",
        "outcome": "passed",
        "message": "",
    }
    kinds = {item["kind"] for item in report["results"]}
    assert kinds == {"required", "optional", "stochastic", "untested"}
    assert "rule" in output
    assert "required_spec309_request_zero_must_signal_value_error" in output


def test_a_broken_publisher_fails_with_exit_status_1(tmp_path: Path) -> None:
    report_path = tmp_path / "broken.json"
    code, output = run(
        "publisher",
        f"{FACTORIES}:ignores_demand",
        "--max-elements",
        "10",
        "--json",
        str(report_path),
        *FAST,
    )
    assert code == 1, output
    closing = CLOSING.search(output)
    assert closing is not None
    assert int(closing.group(2)) >= 1
    results = {item["test"]: item for item in json.loads(report_path.read_text())["results"]}
    spec101 = results[
        "test_required_spec101_subscription_request_must_result_in_the_correct_number_of_produced_elements"
    ]
    assert spec101["outcome"] == "failed"
    assert spec101["message"].startswith("Rule 1.1: ")
    needs_more = results[
        "test_required_spec317_must_not_signal_on_error_when_pending_above_max_demand"
    ]
    assert needs_more["outcome"] == "skipped"
    assert needs_more["message"] == (
        "needs a publisher of 2147483647 elements, but max_elements_from_publisher = 10"
    )


def test_subscriber_and_processor_commands() -> None:
    code, output = run("subscriber", f"{FACTORIES}:batch_subscriber", *FAST)
    assert code == 0, output
    assert CLOSING.search(output)
    code, output = run(
        "processor", f"{FACTORIES}:pass_through", "--max-subscribers", "1", "-k", "spec3", *FAST
    )
    assert code == 0, output
    assert CLOSING.search(output)


def test_bad_factories_are_usage_errors() -> None:
    for spec, message in [
        ("no_colon", "is not of the form MODULE:FACTORY"),
        ("no.such.module:f", "cannot import 'no.such.module'"),
        (f"{FACTORIES}:missing", f"'{FACTORIES}' has no attribute 'missing'"),
        (f"{FACTORIES}:NOT_CALLABLE", "is not callable"),
    ]:
        result = CliRunner().invoke(main, ["tck", "publisher", spec])
        assert result.exit_code == 2
        assert message in result.output


def test_the_command_runs_as_a_program() -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "reactive_streams",
            "tck",
            "publisher",
            f"{FACTORIES}:range_publisher",
            "-k",
            "spec309",
            *FAST,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert re.search(r"^4 passed, 0 failed, 0 skipped in", completed.stdout, re.MULTILINE)
