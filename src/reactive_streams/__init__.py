"""reactive-streams: Reactive Streams for Python, with its TCK, operators and Spark bridges.

The four interfaces (``Publisher``, ``Subscriber``, ``Subscription``, ``Processor``) live
in ``reactive_streams.api`` and are re-exported here, with ``MAX_DEMAND``, the exception
hierarchy, the undeliverable-error hook and the demand core that implementations share.

``import reactive_streams`` never imports pyspark; ``reactive_streams.spark`` does, behind
the ``spark`` extra.
"""

from __future__ import annotations

from ._core import (
    MAX_DEMAND,
    Backoff,
    DemandTypeError,
    DrainLoop,
    EmitterElection,
    ExecutorRejectedError,
    MissingBackpressureError,
    NonPositiveDemandError,
    ProtocolViolationError,
    ReactiveStreamsError,
    SerializedSubscription,
    SourceCancelledError,
    StreamInterruptedError,
    StreamStatistics,
    UndeliverableHook,
    WorkGuard,
    add_demand,
    report_undeliverable,
    report_violation,
    set_public_module,
    set_undeliverable_hook,
    signal_on_complete,
    signal_on_error,
    signal_on_next,
    signal_on_subscribe,
    validate_request,
)
from .api import Processor, Publisher, Subscriber, Subscription
from .operators import Flow

__all__ = [
    "MAX_DEMAND",
    "Backoff",
    "DemandTypeError",
    "DrainLoop",
    "EmitterElection",
    "ExecutorRejectedError",
    "Flow",
    "MissingBackpressureError",
    "NonPositiveDemandError",
    "Processor",
    "ProtocolViolationError",
    "Publisher",
    "ReactiveStreamsError",
    "SerializedSubscription",
    "SourceCancelledError",
    "StreamInterruptedError",
    "StreamStatistics",
    "Subscriber",
    "Subscription",
    "UndeliverableHook",
    "WorkGuard",
    "__version__",
    "add_demand",
    "report_undeliverable",
    "report_violation",
    "set_undeliverable_hook",
    "signal_on_complete",
    "signal_on_error",
    "signal_on_next",
    "signal_on_subscribe",
    "validate_request",
]


def __getattr__(name: str) -> str:
    """Compute ``__version__`` on first use: ``importlib.metadata`` costs a third of the import."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        value = version("reactive-streams-py")
    except PackageNotFoundError:  # running from a source tree without an install
        value = "0.0.0+unknown"
    globals()["__version__"] = value
    return value


set_public_module(__name__, globals())
