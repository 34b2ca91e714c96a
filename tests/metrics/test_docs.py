"""The Python examples in docs/interop.md and docs/metrics.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCKS = [
    pytest.param(block, id=f"{name}-{index}")
    for name in ("interop.md", "metrics.md")
    for index, block in enumerate(
        re.findall(r"```python\n(.*?)```", (DOCS / name).read_text(encoding="utf-8"), re.DOTALL)
    )
]


def test_the_docs_have_examples() -> None:
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("block", BLOCKS)
def test_doc_example_runs(block: str) -> None:
    exec(compile(block, "docs", "exec"), {"__name__": "doc_example"})
