"""reactive-streams: Reactive Streams for Python, with its TCK, operators and Spark bridges.

The four interfaces (``Publisher``, ``Subscriber``, ``Subscription``, ``Processor``) live
in ``reactive_streams.api`` and are re-exported here, with ``MAX_DEMAND``, the exception
hierarchy, the undeliverable-error hook and the demand core that implementations share.

``import reactive_streams`` never imports pyspark; ``reactive_streams.spark`` does, behind
the ``spark`` extra.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from ._demand import (
    MAX_DEMAND as MAX_DEMAND,
)
from ._demand import (
    DrainLoop as DrainLoop,
)
from ._demand import (
    EmitterElection as EmitterElection,
)
from ._demand import (
    WorkGuard as WorkGuard,
)
from ._demand import (
    add_demand as add_demand,
)
from ._demand import (
    validate_request as validate_request,
)
from ._exceptions import (
    DemandTypeError as DemandTypeError,
)
from ._exceptions import (
    ExecutorRejectedError as ExecutorRejectedError,
)
from ._exceptions import (
    MissingBackpressureError as MissingBackpressureError,
)
from ._exceptions import (
    NonPositiveDemandError as NonPositiveDemandError,
)
from ._exceptions import (
    ProtocolViolationError as ProtocolViolationError,
)
from ._exceptions import (
    ReactiveStreamsError as ReactiveStreamsError,
)
from ._exceptions import (
    SourceCancelledError as SourceCancelledError,
)
from ._hooks import (
    UndeliverableHook as UndeliverableHook,
)
from ._hooks import (
    report_undeliverable as report_undeliverable,
)
from ._hooks import (
    set_undeliverable_hook as set_undeliverable_hook,
)
from ._signals import (
    report_violation as report_violation,
)
from ._signals import (
    signal_on_complete as signal_on_complete,
)
from ._signals import (
    signal_on_error as signal_on_error,
)
from ._signals import (
    signal_on_next as signal_on_next,
)
from ._signals import (
    signal_on_subscribe as signal_on_subscribe,
)
from ._statistics import StreamStatistics as StreamStatistics
from .api import Processor as Processor
from .api import Publisher as Publisher
from .api import Subscriber as Subscriber
from .api import Subscription as Subscription
from .operators import Flow as Flow

try:
    __version__ = version("reactive-streams-py")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

# Tracebacks and reprs show the public name, not the private module (as trio does).
for _obj in (
    DrainLoop,
    EmitterElection,
    WorkGuard,
    add_demand,
    validate_request,
    DemandTypeError,
    ExecutorRejectedError,
    MissingBackpressureError,
    NonPositiveDemandError,
    ProtocolViolationError,
    ReactiveStreamsError,
    SourceCancelledError,
    report_undeliverable,
    set_undeliverable_hook,
    report_violation,
    signal_on_complete,
    signal_on_error,
    signal_on_next,
    signal_on_subscribe,
    StreamStatistics,
):
    _obj.__module__ = __name__
del _obj
