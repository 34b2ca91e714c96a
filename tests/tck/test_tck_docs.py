"""The example in docs/tck.md runs and passes."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from reactive_streams.reference import ExecutorIterablePublisher
from reactive_streams.tck import Outcome, run_verification

DOC = Path(__file__).resolve().parents[2] / "docs" / "tck.md"


class AcmePublisher(ExecutorIterablePublisher[Any]):
    """Stands in for the third-party publisher of the example."""

    def __init__(self, iterable: Any, *, executor: Any) -> None:
        super().__init__(iterable, executor)


def test_the_fifteen_line_example_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    text = DOC.read_text(encoding="utf-8")
    example = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert example is not None
    code = example.group(1)
    assert len(code.strip().splitlines()) <= 16
    acme = types.ModuleType("acme")
    streams = types.ModuleType("acme.streams")
    streams.AcmePublisher = AcmePublisher  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "acme", acme)
    monkeypatch.setitem(sys.modules, "acme.streams", streams)
    namespace: dict[str, Any] = {"__name__": "tck_doc_example"}
    exec(compile(code, str(DOC), "exec"), namespace)
    report = run_verification(namespace["TestAcmePublisher"])
    assert report.ok, [
        (r.case.name, r.message) for r in report.results if r.outcome is Outcome.FAILED
    ]
    skipped = report["test_required_spec317_must_not_signal_on_error_when_pending_above_max_demand"]
    assert skipped.outcome is Outcome.SKIPPED
    assert "max_elements_from_publisher = 10000" in skipped.message
