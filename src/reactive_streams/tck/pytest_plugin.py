"""The TCK's pytest plugin: registers the ``rule`` marker that every TCK test carries.

Installed as a ``pytest11`` entry point, so pytest loads it wherever this package is
installed: a project that runs the TCK under ``--strict-markers`` (or with warnings as
errors) needs no ``markers`` line of its own. Nothing else is changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

__all__ = ["RULE_MARKER", "pytest_configure"]

RULE_MARKER = "rule(id): the Reactive Streams rule a test checks, e.g. rule('3.9')"
"""The marker line registered: ``pytest -m rule`` selects TCK tests."""


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``rule`` marker (pytest's hook, called once per session)."""
    config.addinivalue_line("markers", RULE_MARKER)
