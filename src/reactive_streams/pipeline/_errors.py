"""The pipeline's exceptions and the exit status each one maps to.

Hierarchy::

    ReactiveStreamsError
    └── PipelineError                  base of everything the pipeline raises
        ├── PipelineUsageError         bad input, bad query, unwritable output, no Java:
        │                              the command prints one line and exits with status 2
        └── PipelineFailedError        the run started and then failed (inside Spark, or
                                       in the sink): exit status 1, with a summary
"""

from __future__ import annotations

from .._core import ReactiveStreamsError

__all__ = ["PipelineError", "PipelineFailedError", "PipelineUsageError"]


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
