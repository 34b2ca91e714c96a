"""``docs/writing-operators.md``: its operator passes our TCK when a user runs pytest on it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "writing-operators.md"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_tutorial_module_passes_under_pytest_with_the_tck_plugin(tmp_path: Path) -> None:
    (block,) = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    module = tmp_path / "test_batch_by_weight.py"
    module.write_text(block, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    # --strict-markers: the rule marker must come from the package's plugin, not from us
    command = [sys.executable, "-m", "pytest", "-q", "--strict-markers", "-W", "error"]
    command += ["-p", "no:cacheprovider", module.name]
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=540, check=False
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed is not None, summary
    assert int(passed.group(1)) >= 40, summary  # the TCK's tests and the two of the page
    assert "failed" not in summary, summary
