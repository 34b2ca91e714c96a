"""The README's Python examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{index}" for index in range(len(BLOCKS))])
def test_readme_example_runs(block: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(block, str(README), "exec"), {"__name__": "readme_example"})
    capsys.readouterr()
