"""What every verification class shares: the environment, cleanups, skip helpers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from ._environment import TckSkip, TestEnvironment

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._cases import TckCase

__all__ = ["VerificationBase"]


class VerificationBase:
    """Common machinery of the verification classes (not collected by pytest).

    Subclasses are used by subclassing again in a test module, e.g.
    ``class TestMyPublisher(PublisherVerification)``; pytest creates one instance per test
    and every inherited ``test_*`` method runs. Verification classes must not define
    ``__init__`` (pytest does not collect classes that do).
    """

    env: TestEnvironment
    """The environment of the test that is running (a fresh one per test)."""

    current_case: TckCase | None = None
    """The test that is running."""

    @property
    def current_rule(self) -> str | None:
        """The rule of the running test, or ``None`` for setup and configuration tests."""
        case = self.current_case
        if case is None or not case.rule[:1].isdigit():
            return None
        return case.rule

    def environment(self) -> TestEnvironment:
        """The settings to run with; override to change timeouts in code.

        The default reads the ``RS_TCK_*`` environment variables
        (``TestEnvironment.from_env()``).
        """
        return TestEnvironment.from_env()

    def case_skip_reason(self, case: TckCase) -> str | None:
        """A reason to skip ``case`` before it runs, or ``None`` to run it."""
        return None

    def add_cleanup(self, cleanup: Callable[[], Any]) -> None:
        """Run ``cleanup`` after the current test (latest first), even if it failed."""
        cleanups: list[Callable[[], Any]] = self.__dict__.setdefault("_tck_cleanups", [])
        cleanups.append(cleanup)

    def tear_down(self) -> None:
        """Run the cleanups registered during the current test."""
        cleanups: list[Callable[[], Any]] = self.__dict__.pop("_tck_cleanups", [])
        for cleanup in reversed(cleanups):
            try:
                cleanup()
            except Exception as exc:  # one failing cleanup must not skip the others
                self.env.debug_log(f"cleanup {cleanup!r} raised {exc!r}")

    @staticmethod
    def skip(reason: str) -> NoReturn:
        """Skip the running test with ``reason``."""
        raise TckSkip(reason)
