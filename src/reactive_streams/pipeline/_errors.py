"""The pipeline's exceptions and the exit status each one maps to.

Hierarchy::

    ReactiveStreamsError
    └── PipelineError                  base of everything the pipeline raises
        ├── PipelineUsageError         bad input, bad query, unwritable output, no Java:
        │                              the command prints one line and exits with status 2
        ├── PipelineFailedError        the run started and then failed (inside Spark, or
        │                              in the sink): exit status 1, with a summary
        └── PipelineInterruptedError   asked to stop (Ctrl-C, SIGTERM) before the stream
                                       ran: exit status 128 + the signal's number
"""

from __future__ import annotations

import signal

from .._core import ReactiveStreamsError

__all__ = [
    "PipelineError",
    "PipelineFailedError",
    "PipelineInterruptedError",
    "PipelineUsageError",
    "first_line",
    "signal_exit_code",
    "signal_name",
]


def first_line(error: BaseException) -> str:
    """The first non-blank line of ``str(error)``, stripped; the type's name if none."""
    for line in str(error).strip().splitlines():
        if line.strip():
            return line.strip()
    return type(error).__name__


def signal_name(signum: int) -> str:
    """``"SIGTERM"`` for 15; ``"signal N"`` for a number the platform does not name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def signal_exit_code(signum: int) -> int:
    """The exit status of a command that stopped in order on a signal: ``128 + signum``.

    The Unix shells' convention for a process ended by a signal (130 for Ctrl-C's
    SIGINT, 143 for SIGTERM), kept after a clean stop so scripts see the same status.
    """
    return 128 + signum


class PipelineError(ReactiveStreamsError):
    """Base class of the pipeline's errors."""

    exit_code = 1


class PipelineUsageError(PipelineError):
    """The user's input, query, output directory or environment cannot work (exit status 2).

    The message is one line that names the problem and, where possible, what to do.
    """

    exit_code = 2


class PipelineFailedError(PipelineError):
    """The pipeline started and failed while running (exit status 1)."""

    exit_code = 1


class PipelineInterruptedError(PipelineError):
    """The run was asked to stop (``Pipeline.interrupt``) before its stream ran.

    Args:
        signum: the signal that asked (``signal.SIGINT`` for Ctrl-C, ``SIGTERM``...).

    Attributes:
        signum: as given.
        exit_code: ``128 + signum`` (``signal_exit_code``).
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal_name(signum)} before the stream started")
        self.signum = signum
        self.exit_code = signal_exit_code(signum)
