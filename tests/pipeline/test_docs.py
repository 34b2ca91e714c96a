"""The Python examples of docs/pipeline.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "pipeline.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_there_are_examples() -> None:
    assert BLOCKS


@pytest.mark.parametrize("block", BLOCKS)
def test_example_runs(block: str) -> None:
    pytest.importorskip("pyarrow")
    exec(compile(block, str(DOC), "exec"), {"__name__": "pipeline_doc_example"})
