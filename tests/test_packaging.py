"""A base install: a light ``import reactive_streams``, and a command that explains itself."""

from __future__ import annotations

import subprocess
import sys

import reactive_streams
from reactive_streams._cli_entry import INSTALL_HINT

HEAVY = ("click", "rich", "pyspark", "pyarrow", "pandas", "importlib.metadata")


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_import_reactive_streams_loads_no_command_line_or_spark_module() -> None:
    completed = _python(
        f"import sys, reactive_streams\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == ""


def test_version_is_computed_on_first_use() -> None:
    assert isinstance(reactive_streams.__version__, str)
    assert reactive_streams.__version__


def test_command_without_the_cli_extra_prints_the_install_hint() -> None:
    # ``sys.modules[name] = None`` makes ``import name`` fail as if it were not installed.
    completed = _python(
        "import sys\n"
        "sys.modules['click'] = None\n"
        "sys.argv = ['reactive-streams', '--help']\n"
        "from reactive_streams._cli_entry import run\n"
        "run()\n"
    )
    assert completed.returncode == 2
    assert completed.stderr.strip() == f"Error: {INSTALL_HINT} (missing module: click)"
    assert "Traceback" not in completed.stderr
