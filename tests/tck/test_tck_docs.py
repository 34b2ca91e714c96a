"""The example in docs/tck.md runs and passes the TCK (tests/test_docs.py runs every block)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from reactive_streams.tck import Outcome, run_verification

DOC = Path(__file__).resolve().parents[2] / "docs" / "tck.md"


def test_the_fifteen_line_example_passes() -> None:
    text = DOC.read_text(encoding="utf-8")
    example = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert example is not None
    code = example.group(1)
    assert len(code.strip().splitlines()) <= 16
    namespace: dict[str, Any] = {"__name__": "tck_doc_example"}
    exec(compile(code, str(DOC), "exec"), namespace)
    report = run_verification(namespace["TestAcmePublisher"])
    assert report.ok, [
        (r.case.name, r.message) for r in report.results if r.outcome is Outcome.FAILED
    ]
    skipped = report["test_required_spec317_must_not_signal_on_error_when_pending_above_max_demand"]
    assert skipped.outcome is Outcome.SKIPPED
    assert "max_elements_from_publisher = 10000" in skipped.message
