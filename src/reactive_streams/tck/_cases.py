"""TCK test cases: their metadata, and how one case is run and judged.

A TCK test is a plain method of a verification class, decorated with ``tck_test(rule,
kind)``. The body only talks to ``self.env`` and the implementation; it knows nothing about
pytest. ``run_case`` runs a body on a worker thread with a time budget, collects the
failures recorded on other threads, and applies the classification:

* ``required``: any failure is a failure.
* ``optional``: a failure becomes a skip saying that the OPTIONAL behaviour is not
  implemented (unless the case says otherwise, as the failed-publisher tests do).
* ``stochastic``: like required, skipped when the ``skip_stochastic_tests`` knob is set.
* ``untested``: always skipped, with the reason.

The pytest layer is the decorator's wrapper: pytest calls the method, the wrapper calls
``run_case`` and turns the result into a pass, ``pytest.skip`` or a raised failure. The
command-line runner calls ``run_case`` directly. Both see the same outcome.
"""

from __future__ import annotations

import enum
import functools
import os
import re
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from ._environment import TckFailure, TckSkip, TestEnvironment

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = [
    "CaseResult",
    "Kind",
    "Outcome",
    "TckCase",
    "Verification",
    "iter_cases",
    "run_case",
    "tck_test",
]

F = TypeVar("F", bound="Callable[..., None]")


class Kind(enum.StrEnum):
    """The classification of a TCK test, as in the reference TCK."""

    REQUIRED = "required"
    OPTIONAL = "optional"
    STOCHASTIC = "stochastic"
    UNTESTED = "untested"


class Outcome(enum.StrEnum):
    """The result of one TCK test."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class TckCase:
    """The metadata of one TCK test.

    Attributes:
        name: the method name, e.g. ``test_required_spec309_request_zero_must_signal_value_error``.
        rule: the rule ID (``"3.9"``), or ``"setup"``/``"config"`` for sanity checks.
        kind: the classification.
        body: the plain test function, taking the verification instance.
        reason: for ``untested`` cases, why the rule is not verified.
        failure_is_skip: for ``optional`` cases, whether a failure means "not supported".
    """

    name: str
    rule: str
    kind: Kind
    body: Callable[[Any], None]
    reason: str = ""
    failure_is_skip: bool = True

    @property
    def summary(self) -> str:
        """The first line of the test's docstring."""
        doc = (self.body.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The outcome of one TCK test.

    Attributes:
        case: what ran.
        outcome: passed, failed or skipped.
        message: the failure or skip reason; empty for a pass.
        duration: wall time in seconds.
        error: the exception that failed the test, if any (with its traceback).
    """

    case: TckCase
    outcome: Outcome
    message: str
    duration: float
    error: BaseException | None = None

    def to_json(self) -> dict[str, str]:
        """The result as one entry of the ``--json`` report."""
        return {
            "test": self.case.name,
            "rule": self.case.rule,
            "kind": str(self.case.kind),
            "outcome": str(self.outcome),
            "message": self.message,
        }


class Verification(Protocol):
    """What ``run_case`` needs from a verification instance."""

    env: TestEnvironment
    current_case: TckCase | None

    def environment(self) -> TestEnvironment:
        """The settings to run with."""
        ...

    def case_skip_reason(self, case: TckCase) -> str | None:
        """A reason to skip ``case`` before it runs (a knob), or ``None``."""
        ...

    def tear_down(self) -> None:
        """Release what one case created (executors, subscriptions)."""
        ...


_UNTESTED_DEFAULT: Final = "Not verified by this TCK"


def tck_test(
    rule: str,
    kind: Kind | str,
    *,
    reason: str = "",
    failure_is_skip: bool = True,
) -> Callable[[F], F]:
    """Declare a TCK test method.

    Args:
        rule: the rule ID it checks, e.g. ``"3.9"``.
        kind: ``required``, ``optional``, ``stochastic`` or ``untested``.
        reason: why an ``untested`` rule is not verified (shown as the skip reason).
        failure_is_skip: for ``optional`` tests, whether a failure becomes a skip.

    The decorated method becomes the pytest entry point: it runs the case through
    ``run_case`` and reports the outcome to pytest. Under pytest it also carries the
    ``pytest.mark.rule(rule)`` marker.
    """
    case_kind = Kind(kind)

    def decorate(func: F) -> F:
        case = TckCase(
            name=func.__name__,
            rule=rule,
            kind=case_kind,
            body=func,
            reason=reason or (_UNTESTED_DEFAULT if case_kind is Kind.UNTESTED else ""),
            failure_is_skip=failure_is_skip,
        )

        @functools.wraps(func)
        def entry_point(self: Verification) -> None:
            result = run_case(self, case)
            _report_to_caller(result)

        entry_point.__tck_case__ = case  # type: ignore[attr-defined]
        pytest = sys.modules.get("pytest")
        if pytest is not None:
            entry_point = pytest.mark.rule(rule)(entry_point)
        return entry_point  # type: ignore[return-value]

    return decorate


def _report_to_caller(result: CaseResult) -> None:
    if result.outcome is Outcome.PASSED:
        return
    if result.outcome is Outcome.SKIPPED:
        pytest = sys.modules.get("pytest")
        if pytest is not None:
            pytest.skip(result.message)
        raise TckSkip(result.message)
    error = result.error
    if isinstance(error, AssertionError) and str(error) == result.message:
        raise error
    raise TckFailure(result.message) from error


def iter_cases(cls: type) -> Iterator[TckCase]:
    """The TCK cases of a verification class, in definition order (base classes first).

    A subclass that overrides a test method with a plain method removes that case.
    """
    seen: dict[str, TckCase | None] = {}
    for klass in reversed(cls.__mro__):
        for name, attr in vars(klass).items():
            if not name.startswith("test_"):
                continue
            seen[name] = getattr(attr, "__tck_case__", None)
    for case in seen.values():
        if case is not None:
            yield case


def _where(thread: threading.Thread) -> str:
    """Where a hung thread is stuck: the innermost frames, for the failure message."""
    frames = sys._current_frames()
    frame = frames.get(thread.ident) if thread.ident is not None else None
    if frame is None:
        return "unknown"
    stack = traceback.extract_stack(frame)[-3:]
    return " <- ".join(
        f"{os.path.basename(entry.filename)}:{entry.lineno} in {entry.name}"
        for entry in reversed(stack)
    )


def _message(error: BaseException) -> str:
    if isinstance(error, TckFailure):
        return str(error)
    if isinstance(error, AssertionError) and str(error):
        return str(error)
    return f"{type(error).__name__}: {error}"


_RULE = re.compile(r"^Rule (\d+\.\d+):")


def _first_rule_broken(earlier: list[BaseException], error: BaseException) -> BaseException | None:
    """The rule violation recorded before ``error``, when it names another rule.

    A test fails on the symptom it checks (an element where the completion should be, a
    wrong count), but the cause may have been recorded earlier on another thread: a signal
    before ``on_subscribe`` (Rule 1.9), an element beyond demand (Rule 1.1). The report
    leads with the first violation in time, so that users fix the cause, not the symptom.
    When that violation cites the same rule as ``error``, ``error`` (the more specific
    message) is kept and ``None`` returned.
    """
    for candidate in earlier:
        if candidate is error:
            return None  # the error is itself the first violation recorded
        found = _RULE.match(_message(candidate))
        if found is None:
            continue  # an unexpected on_error, say: a symptom, not a rule of its own
        own = _RULE.match(_message(error))
        if own is not None and own.group(1) == found.group(1):
            return None
        return candidate
    return None


def run_case(verification: Verification, case: TckCase) -> CaseResult:
    """Run one TCK case on ``verification`` and judge it.

    The body runs on a daemon worker thread with a fresh environment. If it is still
    running after ``env.case_timeout`` it is abandoned and the case fails as hung (naming
    where it is stuck); any exception, including ``RecursionError`` or an exception out of
    the implementation, fails the case with its reason. Failures recorded on other threads
    fail the case too, after the body's own failure.

    Returns:
        The outcome; never raises for a failing implementation.
    """
    started = time.monotonic()
    base = verification.environment()
    env = base.fresh()
    verification.env = env
    verification.current_case = case

    def done(outcome: Outcome, message: str, error: BaseException | None = None) -> CaseResult:
        return CaseResult(case, outcome, message, time.monotonic() - started, error)

    if case.kind is Kind.UNTESTED:
        return done(Outcome.SKIPPED, f"Rule {case.rule}: {case.reason}")
    skip = verification.case_skip_reason(case)
    if skip is not None:
        return done(Outcome.SKIPPED, skip)

    box: list[BaseException] = []
    earlier: list[BaseException] = []  # failures recorded before the body's own failure

    def target() -> None:
        try:
            case.body(verification)
            env.verify_no_async_errors_no_delay()
        except BaseException as exc:  # report everything, including RecursionError
            earlier.extend(env.async_errors)
            box.append(exc)

    worker = threading.Thread(target=target, name=f"tck:{case.name}", daemon=True)
    worker.start()
    worker.join(env.case_timeout)
    try:
        if worker.is_alive():
            where = _where(worker)
            return done(
                Outcome.FAILED,
                f"the test did not finish within case_timeout = {env.case_timeout:g} s "
                f"(hung at {where}); an implementation method probably blocks",
                TckFailure("hung"),
            )
    finally:
        if not worker.is_alive():
            try:
                verification.tear_down()
            except Exception as exc:  # teardown must not hide the result
                env.debug_log(f"tear_down raised {exc!r}")
    error = box[0] if box else None
    if isinstance(error, TckSkip):
        return done(Outcome.SKIPPED, str(error))
    if error is None:
        return done(Outcome.PASSED, "")
    message = _message(error)
    cause = _first_rule_broken(earlier, error)
    if cause is not None:
        message = f"{_message(cause)} (the first rule broken; then: {message})"
    others = [other for other in env.async_errors if other is not error and other is not cause]
    if others:
        message += f" (and {len(others)} more: {_message(others[0])})"
    if case.kind is Kind.OPTIONAL and case.failure_is_skip:
        return done(
            Outcome.SKIPPED,
            f"skipped because the implementation does not support this OPTIONAL "
            f"behaviour: {message}",
            error,
        )
    return done(Outcome.FAILED, message, error)
