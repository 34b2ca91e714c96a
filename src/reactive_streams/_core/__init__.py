"""The kit: everything needed to write a publisher, a subscription or a stage.

Every other package (``operators``, ``reference``, ``adapters``, ``hubs``, ``metrics``,
``rsocket``, ``spark``, ``pipeline``) builds on these pieces and imports them from here,
``from .._core import EmitterElection``, never from a private module of another package.
The kit itself imports nothing of the package but ``reactive_streams.api``.

* ``Backoff`` (``_backoff``): exponential backoff with jitter, bounded by attempts or
  a deadline, for whatever tries again (public as ``reactive_streams.Backoff``).
* The demand core (``_demand``): ``MAX_DEMAND``, ``CALLER_BUDGET``, ``add_demand``,
  ``validate_request``, ``WorkGuard``, ``EmitterElection``, ``DrainLoop``,
  ``replenish_threshold``, ``check_positive``; the relay (``_relay``) that takes a
  drain over from a caller's thread (Rule 3.4).
* Signals (``_signals``): calling a subscriber safely (Rule 2.13), a run of ``on_next``
  that stops at a cancel (``signal_each``), the one terminal signal (``signal_terminal``),
  ``cancel_quietly``, and the ``on_subscribe`` prologue of Rules 2.13 and 2.5
  (``accept_subscription``).
* ``SerializedSubscription`` (``_serialized``), the undeliverable-error hook
  (``_hooks``), the exception hierarchy (``_exceptions``), ``StreamStatistics``
  (``_statistics``), the schedulers (``_schedulers``, public as
  ``reactive_streams.schedulers``), ``LoopThread`` (``_loop_thread``: a private event
  loop on a daemon thread), ``DaemonThreadPool`` (``_executors``: worker threads
  whose shutdown has a timeout), ``LoopExecutor`` (``_executors``: an event loop as an
  executor, each call one callback), and ``set_public_module`` (``_public``), which
  every public ``__init__`` calls so that reprs show public names.
* Fusion capabilities (``_capabilities``): ``ExecutorSubscribable`` (a source that
  emits on a given executor) and ``RunSubscriber``/``run_receiver`` (a subscriber that
  takes a run of elements in one call): what a stage tests for instead of a class.
* The single-emitter skeleton (``_emit_loop``): ``EmitLoopSubscription``, one
  subscription whose signals all come from one elected emit loop; and its sibling for
  a stage that serves several subscribers from one drain loop (``_member``):
  ``MemberSubscription`` (a group, a multicast subscriber, a hub's consumer).
* The operator side (``_operator``): ``Operator``, ``StageOperator``,
  ``StageStatistics``, ``NoneResultError``, the subscriber checks
  (``check_subscriber``, ``signal_error_only``) and ``walk``.
* The stage side (``_stage``): ``DownstreamStage``, ``UpstreamStage``,
  ``BufferedStage``, ``InnerSubscriber``, ``PassThroughStage``; and the overflow stage
  built on ``BufferedStage`` (``_backpressure``: ``OnBackpressureOperator``).

``docs/architecture.md`` says which package may import which, and where a new stage,
bridge or adapter goes.
"""

from __future__ import annotations

from ._backoff import Backoff
from ._backpressure import Admission, OnBackpressureOperator, Overflow, admit
from ._capabilities import ExecutorSubscribable, RunSubscriber, run_receiver
from ._demand import (
    CALLER_BUDGET,
    MAX_DEMAND,
    DrainLoop,
    EmitterElection,
    WorkGuard,
    add_demand,
    check_positive,
    replenish_threshold,
    validate_request,
)
from ._emit_loop import EmitLoopSubscription
from ._exceptions import (
    DemandTypeError,
    ExecutorRejectedError,
    MissingBackpressureError,
    NonPositiveDemandError,
    ProtocolViolationError,
    ReactiveStreamsError,
    SourceCancelledError,
    StreamInterruptedError,
)
from ._executors import DaemonThreadPool, LoopExecutor
from ._hooks import UndeliverableHook, report_undeliverable, set_undeliverable_hook
from ._loop_thread import LoopThread
from ._member import MemberSubscription, SharedDrainOwner
from ._operator import (
    EmptySubscription,
    HasStatistics,
    NoneResultError,
    Operator,
    SingleUpstreamOperator,
    StageOperator,
    StageStatistics,
    check_subscriber,
    signal_error_only,
    walk,
)
from ._public import set_public_module
from ._schedulers import (
    AsyncioScheduler,
    Cancellable,
    PeriodicTask,
    ScheduledTask,
    Scheduler,
    TaskQueue,
    ThreadTimerScheduler,
    default_scheduler,
)
from ._serialized import SerializedSubscription
from ._signals import (
    accept_subscription,
    cancel_quietly,
    report_violation,
    signal_each,
    signal_on_complete,
    signal_on_error,
    signal_on_next,
    signal_on_subscribe,
    signal_terminal,
)
from ._stage import (
    BufferedStage,
    DownstreamStage,
    InnerSubscriber,
    PassThroughStage,
    TerminalLatch,
    UpstreamStage,
    latch_terminal_locked,
)
from ._statistics import LatencyWindow, StreamStatistics

__all__ = [
    "Admission",
    "Backoff",
    "CALLER_BUDGET",
    "MAX_DEMAND",
    "AsyncioScheduler",
    "BufferedStage",
    "Cancellable",
    "DaemonThreadPool",
    "DemandTypeError",
    "DownstreamStage",
    "DrainLoop",
    "EmitLoopSubscription",
    "EmitterElection",
    "EmptySubscription",
    "ExecutorRejectedError",
    "ExecutorSubscribable",
    "HasStatistics",
    "InnerSubscriber",
    "LoopExecutor",
    "LoopThread",
    "MemberSubscription",
    "MissingBackpressureError",
    "NonPositiveDemandError",
    "NoneResultError",
    "OnBackpressureOperator",
    "Operator",
    "Overflow",
    "PassThroughStage",
    "PeriodicTask",
    "ProtocolViolationError",
    "ReactiveStreamsError",
    "RunSubscriber",
    "ScheduledTask",
    "Scheduler",
    "SerializedSubscription",
    "SharedDrainOwner",
    "SingleUpstreamOperator",
    "SourceCancelledError",
    "StageOperator",
    "StageStatistics",
    "StreamInterruptedError",
    "StreamStatistics",
    "TerminalLatch",
    "TaskQueue",
    "ThreadTimerScheduler",
    "UndeliverableHook",
    "UpstreamStage",
    "WorkGuard",
    "accept_subscription",
    "add_demand",
    "admit",
    "cancel_quietly",
    "check_positive",
    "check_subscriber",
    "default_scheduler",
    "replenish_threshold",
    "report_undeliverable",
    "report_violation",
    "run_receiver",
    "set_public_module",
    "set_undeliverable_hook",
    "signal_each",
    "signal_error_only",
    "signal_on_complete",
    "signal_on_error",
    "signal_on_next",
    "signal_on_subscribe",
    "signal_terminal",
    "validate_request",
    "walk",
    "latch_terminal_locked",
    "LatencyWindow",
]
