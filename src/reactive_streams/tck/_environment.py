"""The TCK's environment: timeouts, debug output, and failures collected from other threads.

A check that fails on a thread the test does not control (inside ``on_next`` on a
publisher's executor, inside a ``Subscription.request`` called by the subscriber under
test) cannot raise into the test. It *flops* instead: the failure is recorded on the
environment, and the test thread re-raises the first recorded failure when it verifies
that no asynchronous errors happened. Each test runs with a fresh environment
(``TestEnvironment.fresh``), so a late flop from an abandoned thread of an earlier test
never fails the wrong test.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["TckFailure", "TckSkip", "TestEnvironment"]


class TckFailure(AssertionError):
    """A TCK check failed; the message starts with the rule at stake (``"Rule 3.9: ..."``)."""


class TckSkip(Exception):
    """A TCK test does not apply; the message says why (a knob, a missing capability)."""


_ENV_VARS: Mapping[str, str] = {
    "timeout": "RS_TCK_TIMEOUT",
    "no_signals_timeout": "RS_TCK_NO_SIGNALS_TIMEOUT",
    "poll_interval": "RS_TCK_POLL_INTERVAL",
    "gc_timeout": "RS_TCK_GC_TIMEOUT",
    "case_timeout": "RS_TCK_CASE_TIMEOUT",
    "debug": "RS_TCK_DEBUG",
}


@dataclass(kw_only=True)
class TestEnvironment:
    """Timeouts and switches for one TCK run, plus the failures collected during one test.

    All durations are ``float`` seconds. The defaults are small (the JVM TCK's 100 ms
    scaled for Python) so that a full verification runs in seconds; raise them on a slow
    machine with ``TestEnvironment.from_env()`` and the ``RS_TCK_*`` variables, without
    changing code.

    Attributes:
        timeout: how long to wait for a signal that must arrive (an element, a completion,
            an error, a request, a cancel). Env var ``RS_TCK_TIMEOUT``.
        no_signals_timeout: how long to watch for a signal that must *not* arrive; every
            ``expect_none`` waits this long, so keep it short. Env var
            ``RS_TCK_NO_SIGNALS_TIMEOUT``.
        poll_interval: the period of the few checks that have to poll (the Rule 3.13
            garbage-collection check). Env var ``RS_TCK_POLL_INTERVAL``.
        gc_timeout: how long a publisher may keep a cancelled subscriber reachable before
            the Rule 3.13 test fails (``gc.collect()`` is run every ``poll_interval``).
            Env var ``RS_TCK_GC_TIMEOUT``.
        case_timeout: the budget of one whole test; a test still running after it fails
            as hung, and the run goes on. Env var ``RS_TCK_CASE_TIMEOUT``.
        debug: print ``[TCK-DEBUG]`` lines to stderr. Env var ``RS_TCK_DEBUG`` (``1``,
            ``true``, ``yes``).

    Raises:
        ValueError: a duration is not a positive number.
    """

    __test__: ClassVar[bool] = False  # pytest: this is not a test class

    timeout: float = 0.5
    no_signals_timeout: float = 0.05
    poll_interval: float = 0.01
    gc_timeout: float = 1.0
    case_timeout: float = 10.0
    debug: bool = False
    _failures: list[BaseException] = field(default_factory=list, init=False, repr=False)
    _lock: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False
    )
    _flopped: threading.Event = field(
        default_factory=threading.Event, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for name in ("timeout", "no_signals_timeout", "poll_interval", "gc_timeout"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"TestEnvironment.{name} must be a positive number of seconds")
        if self.case_timeout <= 0:
            raise ValueError("TestEnvironment.case_timeout must be a positive number of seconds")

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> TestEnvironment:
        """Build an environment from ``RS_TCK_*`` variables; explicit ``overrides`` win.

        Args:
            environ: the variables to read, ``os.environ`` by default.
            **overrides: field values that take precedence over the variables.

        Raises:
            ValueError: a variable does not parse as a float (or a boolean for
                ``RS_TCK_DEBUG``), or a value is not positive.
        """
        source = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name, var in _ENV_VARS.items():
            raw = source.get(var)
            if raw is None or raw.strip() == "":
                continue
            if name == "debug":
                values[name] = raw.strip().lower() in {"1", "true", "yes", "on"}
                continue
            try:
                values[name] = float(raw)
            except ValueError:
                raise ValueError(f"{var}={raw!r} is not a number of seconds") from None
        values.update(overrides)
        return cls(**values)

    def fresh(self) -> TestEnvironment:
        """A copy with the same settings and no recorded failures (one per test)."""
        return dataclasses.replace(self)

    # -- failures from any thread -------------------------------------------------------

    def flop(self, failure: str | BaseException) -> BaseException:
        """Record a failure seen on any thread; the test fails when it verifies.

        Args:
            failure: a message (it becomes a ``TckFailure``) or the exception itself.

        Returns:
            The recorded exception.
        """
        error: BaseException = TckFailure(failure) if isinstance(failure, str) else failure
        with self._lock:
            self._failures.append(error)
        self._flopped.set()
        self.debug_log(f"flop: {error}")
        return error

    def flop_and_fail(self, failure: str | BaseException) -> NoReturn:
        """Record a failure and raise it on the spot (for checks on the test thread)."""
        raise self.flop(failure)

    def forget(self, error: BaseException) -> bool:
        """Remove one recorded failure that a test expected (e.g. an awaited ``on_error``)."""
        with self._lock:
            for index, recorded in enumerate(self._failures):
                if recorded is error:
                    del self._failures[index]
                    return True
        return False

    @property
    def async_errors(self) -> tuple[BaseException, ...]:
        """The failures recorded so far, oldest first."""
        with self._lock:
            return tuple(self._failures)

    def verify_no_async_errors_no_delay(self) -> None:
        """Raise the first recorded failure, if any, without waiting."""
        errors = self.async_errors
        if errors:
            raise errors[0]

    def verify_no_async_errors(self, timeout: float | None = None) -> None:
        """Give late signals ``no_signals_timeout`` to arrive, then raise the first failure.

        The wait ends early as soon as a failure is recorded.
        """
        self._flopped.wait(self.no_signals_timeout if timeout is None else timeout)
        self.verify_no_async_errors_no_delay()

    def debug_log(self, message: str) -> None:
        """Print ``[TCK-DEBUG] message`` to stderr when ``debug`` is on."""
        if self.debug:
            print(f"[TCK-DEBUG] {threading.current_thread().name}: {message}", file=sys.stderr)
