"""The package's exceptions.

Hierarchy::

    Exception
    └── ReactiveStreamsError                 base of everything this package raises or signals
        ├── ProtocolViolationError           a rule was broken; ``.rule`` names it ("2.13")
        │   ├── NonPositiveDemandError       n <= 0 in request(n) (Rule 3.9); a ValueError too
        │   └── DemandTypeError              a non-int n in request(n) (Rule 3.9); a TypeError too
        ├── MissingBackpressureError         a source produced more than was requested and the
        │                                    chosen overflow strategy is "error"
        ├── ExecutorRejectedError            the executor refused a task; the stream ends with it
        └── SourceCancelledError             the task or thread feeding a stream was cancelled
                                             by someone other than the subscriber

Messages start with the rule at stake when there is one:
``"Rule 3.9: non-positive subscription request (n=0)"``.
"""

from __future__ import annotations

__all__ = [
    "DemandTypeError",
    "ExecutorRejectedError",
    "MissingBackpressureError",
    "NonPositiveDemandError",
    "ProtocolViolationError",
    "ReactiveStreamsError",
    "SourceCancelledError",
    "StreamInterruptedError",
]


class ReactiveStreamsError(Exception):
    """Base class of every exception this package raises or signals through ``on_error``."""


class ProtocolViolationError(ReactiveStreamsError):
    """A rule of the specification was broken.

    Attributes:
        rule: the rule's ID as a string, e.g. ``"2.13"``.
    """

    def __init__(self, message: str, *, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


class NonPositiveDemandError(ProtocolViolationError, ValueError):
    """``request(n)`` was called with ``n <= 0`` (Rule 3.9). Signalled, never raised."""

    def __init__(self, n: int) -> None:
        super().__init__(f"Rule 3.9: non-positive subscription request (n={n})", rule="3.9")
        self.n = n


class DemandTypeError(ProtocolViolationError, TypeError):
    """``request(n)`` was called with an ``n`` that is not an ``int`` (Rule 3.9)."""

    def __init__(self, n: object) -> None:
        super().__init__(
            "Rule 3.9: subscription request must be a positive int, "
            f"got {type(n).__name__} ({n!r})",
            rule="3.9",
        )
        self.n = n


class MissingBackpressureError(ReactiveStreamsError):
    """A source emitted beyond its subscriber's demand and the overflow strategy is "error"."""


class ExecutorRejectedError(ReactiveStreamsError):
    """The executor driving a stream refused a task (shut down, or full); the stream ends."""


class SourceCancelledError(ReactiveStreamsError):
    """The task or thread that fed a stream was cancelled by someone other than its subscriber."""


class StreamInterruptedError(SourceCancelledError):
    """A ``KeyboardInterrupt`` or ``SystemExit`` stopped the task that ran the stream.

    The subscriber gets this error (its ``__cause__`` is the interrupting exception) so the
    stream ends; the interrupting exception itself is re-raised on the task's thread and
    reported through the undeliverable hook, never swallowed.
    """
