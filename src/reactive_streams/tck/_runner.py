"""Running a verification class outside pytest, and the report the CLI prints."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._cases import CaseResult, Kind, Outcome, iter_cases, run_case

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._base import VerificationBase
    from ._environment import TestEnvironment

__all__ = ["Report", "run_verification"]


@dataclass(frozen=True, slots=True)
class Report:
    """The results of one verification run.

    Attributes:
        results: one entry per test, in definition order.
        duration: wall time of the whole run, in seconds.
    """

    results: tuple[CaseResult, ...]
    duration: float = 0.0
    _by_name: dict[str, CaseResult] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_name.update({result.case.name: result for result in self.results})

    def __getitem__(self, name: str) -> CaseResult:
        """The result of the test called ``name``."""
        return self._by_name[name]

    def count(self, outcome: Outcome) -> int:
        """How many tests ended with ``outcome``."""
        return sum(1 for result in self.results if result.outcome is outcome)

    @property
    def required_failures(self) -> tuple[CaseResult, ...]:
        """Failed tests that the verification requires (they make the CLI exit with 1)."""
        return tuple(
            result
            for result in self.results
            if result.outcome is Outcome.FAILED and result.case.kind is Kind.REQUIRED
        )

    @property
    def ok(self) -> bool:
        """No required test failed."""
        return not self.required_failures

    @property
    def summary_line(self) -> str:
        """``"N passed, N failed, N skipped"``."""
        return (
            f"{self.count(Outcome.PASSED)} passed, {self.count(Outcome.FAILED)} failed, "
            f"{self.count(Outcome.SKIPPED)} skipped"
        )

    def to_json(self) -> dict[str, Any]:
        """The report as the CLI's ``--json`` document."""
        return {
            "results": [result.to_json() for result in self.results],
            "summary": {
                "passed": self.count(Outcome.PASSED),
                "failed": self.count(Outcome.FAILED),
                "skipped": self.count(Outcome.SKIPPED),
                "required_failed": len(self.required_failures),
                "total": len(self.results),
                "duration": round(self.duration, 3),
            },
        }


def _same(env: TestEnvironment) -> TestEnvironment:
    return env


def run_verification(
    verification: type[VerificationBase],
    *,
    env: TestEnvironment | None = None,
    select: Callable[[str], bool] | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
) -> Report:
    """Run every TCK test of ``verification`` (a concrete subclass) without pytest.

    Each test gets a fresh instance, as under pytest. A hanging or crashing test fails
    with its reason and the run goes on.

    Args:
        verification: the class to run, e.g. a ``PublisherVerification`` subclass.
        env: the settings; by default each instance's ``environment()``.
        select: keep only the tests whose name it accepts.
        on_result: called with each result as soon as it is known (progress output).

    Returns:
        The report, results in definition order.
    """
    started = time.monotonic()
    results: list[CaseResult] = []
    for case in iter_cases(verification):
        if select is not None and not select(case.name):
            continue
        instance = verification()
        if env is not None:
            instance.environment = functools.partial(_same, env)  # type: ignore[method-assign]
        result = run_case(instance, case)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return Report(tuple(results), time.monotonic() - started)
