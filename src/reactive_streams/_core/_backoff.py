"""``Backoff``: exponential backoff with jitter, bounded by attempts or a deadline.

One policy object for everything that tries again: ``Flow.retry_backoff``,
``Flow.restart`` and the reconnecting RSocket client. It only computes; the caller waits
on its scheduler (or event loop) and keeps its own count of attempts.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Backoff"]


_JITTER = random.Random()
"""The jitter's own generator (thread-safe draws), apart from the global ``random`` state."""


def _seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__qualname__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Backoff:
    """When to try again after a failure: ``min_backoff * factor ** attempt``, jittered.

    The delay before retry ``attempt`` (0 for the first retry) is ``base = min(max_backoff,
    min_backoff * factor ** attempt)`` moved by a uniformly random amount within ``+-
    jitter * base``, then kept within ``[min_backoff, max_backoff]`` (Reactor's
    ``Retry.backoff``; Akka's ``RestartSettings``). Frozen and validated: one object can
    be shared by many streams.

    >>> policy = Backoff(min_backoff=0.1, max_backoff=1.0, jitter=0.0)
    >>> [policy.delay(attempt) for attempt in range(5)]
    [0.1, 0.2, 0.4, 0.8, 1.0]
    >>> Backoff(0.25, 2.0, jitter=0.5).bounds(1)  # 0.5 s, +- 50%
    (0.25, 0.75)

    Attributes:
        min_backoff: seconds before the first retry (``> 0``).
        max_backoff: the longest delay, in seconds (``>= min_backoff``).
        jitter: the random spread, a fraction of the delay in ``[0, 1]``; ``0`` for
            none. Jitter keeps many clients that failed together from retrying together.
        max_attempts: retries at most after a failure (``None``: no limit; ``0``: none).
        deadline: seconds after the first failure of a series past which no retry
            starts: a retry whose delay would end later is not made (``None``: none).
        factor: the growth per attempt (``>= 1``).
        reset_on_success: a success (an element, a connection) ends the series of
            failures: the next failure starts again at attempt 0 with a new deadline
            (Reactor's ``transientErrors(true)``). ``False``: attempts add up for the
            stream's whole life.

    Raises:
        TypeError: a field of the wrong type.
        ValueError: a field out of range.
    """

    min_backoff: float = 0.1
    max_backoff: float = 10.0
    jitter: float = 0.5
    max_attempts: int | None = None
    deadline: float | None = None
    factor: float = 2.0
    reset_on_success: bool = True

    def __post_init__(self) -> None:
        minimum = _seconds("min_backoff", self.min_backoff)
        maximum = _seconds("max_backoff", self.max_backoff)
        if maximum < minimum:
            raise ValueError(f"max_backoff must be >= min_backoff, got {maximum!r} < {minimum!r}")
        jitter = self.jitter
        if isinstance(jitter, bool) or not isinstance(jitter, int | float):
            raise TypeError(f"jitter must be a number, got {type(jitter).__qualname__}")
        if not 0 <= jitter <= 1:
            raise ValueError(f"jitter must be within [0, 1], got {jitter!r}")
        attempts = self.max_attempts
        if attempts is not None:
            if isinstance(attempts, bool) or not isinstance(attempts, int):
                raise TypeError(
                    f"max_attempts must be an int or None, got {type(attempts).__qualname__}"
                )
            if attempts < 0:
                raise ValueError(f"max_attempts must be >= 0, got {attempts}")
        if self.deadline is not None:
            _seconds("deadline", self.deadline)
        factor = self.factor
        if isinstance(factor, bool) or not isinstance(factor, int | float):
            raise TypeError(f"factor must be a number, got {type(factor).__qualname__}")
        if not math.isfinite(factor) or factor < 1:
            raise ValueError(f"factor must be a finite number >= 1, got {factor!r}")
        if not isinstance(self.reset_on_success, bool):
            raise TypeError("reset_on_success must be a bool")
        object.__setattr__(self, "min_backoff", minimum)  # frozen: store the floats
        object.__setattr__(self, "max_backoff", maximum)

    def base(self, attempt: int) -> float:
        """The delay before retry ``attempt`` (0-based) without jitter, in seconds."""
        if attempt < 0:
            raise ValueError(f"attempt must be >= 0, got {attempt}")
        try:
            grown = self.min_backoff * self.factor**attempt
        except OverflowError:
            return self.max_backoff
        return min(self.max_backoff, grown)

    def bounds(self, attempt: int) -> tuple[float, float]:
        """The shortest and longest delay before retry ``attempt``, in seconds."""
        base = self.base(attempt)
        spread = self.jitter * base
        low = max(self.min_backoff, base - spread)
        high = min(self.max_backoff, base + spread)
        return low, high

    def delay(self, attempt: int, rand: Callable[[], float] | None = None) -> float:
        """The delay before retry ``attempt`` (0-based), in seconds, within ``bounds``.

        Args:
            attempt: how many retries were made since the series began.
            rand: a uniform draw from ``[0, 1)``; by default the module's own
                ``random.Random`` (never the global one: a reconnecting client's thread
                must not move the state other code seeded or watches).
        """
        base = self.base(attempt)
        if not self.jitter:
            return base
        spread = self.jitter * base
        draw = _JITTER.random() if rand is None else rand()
        jittered = base - spread + 2 * spread * draw
        return min(self.max_backoff, max(self.min_backoff, jittered))

    def allows(self, attempt: int, elapsed: float, delay: float) -> bool:
        """Whether retry ``attempt`` may be made: within ``max_attempts`` and ``deadline``.

        Args:
            attempt: retries already made in this series (0 for the first).
            elapsed: seconds since the series' first failure.
            delay: the wait before this retry, in seconds.
        """
        if self.max_attempts is not None and attempt >= self.max_attempts:
            return False
        return self.deadline is None or elapsed + delay <= self.deadline

    def describe(self) -> str:
        """The bounds in words, for error messages: ``"5 attempts"``, ``"a 30s deadline"``."""
        parts = []
        if self.max_attempts is not None:
            parts.append(f"{self.max_attempts} attempts")
        if self.deadline is not None:
            parts.append(f"a {self.deadline:g}s deadline")
        return " and ".join(parts) if parts else "no bound"
