"""The subscription side shared by the operator stages (the downstream skeleton).

``_base.StageOperator`` is the publisher side of an operator; the classes here are the
other half, the stage object a subscriber gets as its ``Subscription``. Several stages
(``on_backpressure_*``, ``buffer``, ``flat_map``, ``zip``) keep elements until downstream
asks for them and deliver them from a drain loop. They share:

- ``DownstreamStage``: downstream demand (Rule 3.9 validation, capped addition with
  ``add_demand``), cancel once (Rule 3.7), the drain loop (the package's one ``DrainLoop``,
  whose ``WorkGuard`` shares the stage's lock, entered with ``_schedule``), the delivery of
  a run of elements within demand (Rule 2.13 on a raising ``on_next``), the
  first-error-wins ``fail``, ``request_upstream`` (an upstream whose ``request`` raises,
  breaking Rule 3.16, fails the stage; a request downstream makes from inside its own
  ``on_subscribe``/``on_next`` waits until the loop is given up, a trampoline, Rule 3.3)
  and the ``statistics()`` snapshot.
- ``UpstreamStage``: a ``DownstreamStage`` that is also the ``Subscriber`` of one upstream,
  with the ``on_subscribe`` prologue (Rules 2.5 and 2.13).
- ``BufferedStage``: an ``UpstreamStage`` with a ready queue and the one buffered drain
  pass that delivers it (``on_backpressure_*``, ``rebatch``, ``buffer``, the time
  operators): its upstream terminal signal waits behind the queue (``_done``/``_error``),
  its own errors are "urgent" (signalled at once, with upstream cancelled), and its timers
  are cancelled when it ends (``_stop_locked``).
- ``InnerSubscriber``: one inner source of a coordinating ``DownstreamStage`` (``flat_map``,
  ``zip``): its bounded queue, completion flag and refill count; its error fails the owner;
  an ended inner is marked before the owner hears of it, so the owner's cancel-all
  (``live_subscriptions``) leaves it out (Rule 2.3).
- ``PassThroughStage``: a stage without a buffer (the fused push chain, ``subscribe_on``):
  the terminal signal forwarded once.

Each stage keeps its own logic (what it buffers, what it requests upstream) in its own
module; a ``BufferedStage`` reuses the drain pass written here, the coordinating stages
(``flat_map``, ``zip``) implement their own ``_drain``.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections import deque
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from ..api import Subscriber, Subscription
from ._demand import MAX_DEMAND, DrainLoop, WorkGuard, add_demand, validate_request
from ._exceptions import ProtocolViolationError
from ._hooks import report_undeliverable
from ._operator import StageStatistics
from ._signals import (
    accept_subscription,
    cancel_quietly,
    signal_each,
    signal_on_complete,
    signal_on_error,
    signal_on_subscribe,
    signal_terminal,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from concurrent.futures import Executor

    from ._schedulers import Cancellable

__all__ = [
    "BufferedStage",
    "DownstreamStage",
    "InnerSubscriber",
    "PassThroughStage",
    "Latching",
    "TerminalLatch",
    "UpstreamStage",
    "latch_terminal_locked",
]

T = TypeVar("T")
OwnerT = TypeVar("OwnerT", bound="DownstreamStage")


class Latching(Protocol):
    """What ``latch_terminal_locked`` needs of a stage: its lock, ``_done`` and ``_error``."""

    _lock: threading.Lock
    _done: bool
    _error: Exception | None


def latch_terminal_locked(stage: Latching, error: Exception | None) -> bool:
    """Record the first terminal event of ``stage``'s upstream (``stage._lock`` held).

    Sets ``_done`` (and ``_error`` for an error) and returns ``True`` the first time;
    returns ``False`` and changes nothing once an event was recorded (Rule 1.7). The
    caller then runs its drain loop, which sends the signal downstream.
    """
    if stage._done:
        return False
    stage._done = True
    if error is not None:
        stage._error = error
    return True


class TerminalLatch:
    """The upstream half of a stage whose one drain loop sends the terminal signal.

    ``on_error`` and ``on_complete`` only record the first terminal event (``_done``, and
    ``_error`` for an error) under ``_lock`` and run the drain loop (``_schedule``); the
    drain decides when the signal goes downstream (after the buffer, or at once), so the
    stage's signals stay serial (Rule 1.3) and a second terminal event is ignored (Rule
    1.7). Subclasses provide ``_lock``, ``_done``, ``_error`` and ``_schedule``, and may
    extend ``_latched_locked``, which runs under the lock for the first event only.

    Raises:
        TypeError: ``on_error(None)`` (Rule 2.13).
    """

    __slots__ = ()

    _lock: threading.Lock
    _done: bool
    _error: Exception | None
    # The stage's own: run the drain loop, or mark it for the pass that owns it. Only
    # annotated, so a base that comes later in the MRO provides it.
    _schedule: Callable[[], None]

    def on_error(self, error: Exception) -> None:
        """Record the upstream's error (the first terminal event wins) and drain."""
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        self._latch(error)

    def on_complete(self) -> None:
        """Record the upstream's completion (the first terminal event wins) and drain."""
        self._latch(None)

    def _latch(self, error: Exception | None) -> None:
        with self._lock:
            if not latch_terminal_locked(self, error):
                return
            self._latched_locked(error)
        self._schedule()

    def _latched_locked(self, error: Exception | None) -> None:
        """Hook: the first terminal event was recorded (``_lock`` held)."""


class DownstreamStage(Subscription):
    """A stage's ``Subscription``: demand, cancel once, the drain loop's entry, delivery.

    State, all guarded by ``_lock``: ``_demand`` (outstanding downstream demand, capped at
    ``MAX_DEMAND``), ``_requested`` and ``_delivered`` (totals for ``statistics()``),
    ``_error`` (the error to signal), ``_cancelled``, ``_terminated`` (the stage has sent
    or given up its terminal signal and dropped ``_downstream``, Rule 3.13), ``_guard``
    (the drain loop's ``WorkGuard``, on the same lock: recording work and claiming the
    loop is one critical section) and ``_high_water`` (the most elements ever buffered).

    Subclasses implement ``_drain`` (the single owner's pass: in the critical section in
    which it finds nothing to do it calls ``self._guard.release_locked()``, passes again
    if that returns ``True`` (work arrived meanwhile) and returns otherwise; every other
    return follows ``_terminate_locked``, which retires the guard), ``_buffered_now``
    (called with ``_lock`` held) and, when they hold more subscriptions than
    ``_upstream``, ``_abandon_locked``. A pass that raises
    (an upstream that broke Rule 3.16, a bug of ours) ends the stage through
    ``_terminate_due_to``: every upstream cancelled, one ``on_error`` downstream.

    Args:
        downstream: the subscriber served; ``None`` for a stage that is subscribed to
            later (a ``Processor`` such as ``publish_on``), which sets ``_downstream``
            under the lock then.
        executor: run the drain loop's passes there (``publish_on``'s executor) instead
            of on the signalling thread; a task the executor refuses ends the stage like
            a pass that raised (``_terminate_due_to``).

    Concurrency:
        ``request`` and ``cancel`` may be called from any thread (Rule 2.7 is the
        subscriber's); they only update counters under the lock and then run or nudge
        the drain loop, which calls downstream without the lock held.
    """

    __slots__ = (
        "_cancelled",
        "_deferred",
        "_delivered",
        "_demand",
        "_downstream",
        "_error",
        "_guard",
        "_high_water",
        "_lock",
        "_loop",
        "_owner",
        "_requested",
        "_terminated",
    )

    def __init__(
        self, downstream: Subscriber[Any] | None, *, executor: Executor | None = None
    ) -> None:
        self._downstream: Subscriber[Any] | None = downstream
        self._lock = threading.Lock()
        self._demand = 0
        self._requested = 0
        self._delivered = 0
        self._high_water = 0
        self._error: Exception | None = None
        self._cancelled = False
        self._terminated = False
        self._guard = WorkGuard(self._lock)
        # The thread that is inside downstream's on_subscribe or on_next, called by the
        # loop's owner, and the upstream requests downstream made meanwhile; they go out
        # once the loop is given up (request_upstream, _owned_pass).
        self._owner: int | None = None
        self._deferred: list[tuple[Subscription, int]] = []
        self._loop = DrainLoop(
            self._owned_pass,
            executor=executor,
            on_rejected=None if executor is None else self._terminate_due_to,
            guard=self._guard,
            on_failure=self._terminate_due_to,
            self_releasing=True,
        )

    def statistics(self) -> StageStatistics:
        """Return a frozen snapshot of the stage's counters."""
        with self._lock:
            buffered = self._buffered_now()
            return StageStatistics(
                requested=self._requested,
                delivered=self._delivered,
                buffered=buffered,
                cancelled=self._cancelled,
                terminated=self._terminated,
                high_water_mark=max(self._high_water, buffered),
                dropped=self._dropped_now(),
            )

    @abstractmethod
    def _buffered_now(self) -> int:
        """Elements held right now (``_lock`` is held)."""

    def _dropped_now(self) -> int:
        """Elements dropped on purpose so far (``_lock`` is held); none by default."""
        return 0

    # ---------------------------------------------------------------- downstream calls
    def request(self, n: int) -> None:
        """Add ``n`` to the downstream demand and drain (Rule 3.9 errors are signalled).

        Args:
            n: a positive int; larger totals are capped at ``MAX_DEMAND`` (Rule 3.17).
                ``n <= 0`` or a non-int is never raised: ``_reject_request`` records the
                ``ProtocolViolationError`` and the drain loop signals it (Rule 3.9).
        """
        try:
            count = validate_request(n)
        except ProtocolViolationError as error:
            self._reject_request(error)
            self._schedule()
            return
        with self._lock:
            if self._cancelled or self._terminated:
                return  # Rule 3.6: a no-op once cancelled or ended
            self._demand = add_demand(self._demand, count)
            self._requested = add_demand(self._requested, count)
        self._demand_added(count)
        if self._guard.acquire():
            self._loop.start_borrowed()  # Rule 3.4: a bounded run on the caller's thread

    def cancel(self) -> None:
        """Cancel once (Rule 3.7); the drain loop cancels upstream and drops downstream."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            self._cancelled_locked()
        self._schedule()

    def _cancelled_locked(self) -> None:
        """Hook: the first ``cancel`` was recorded (``_lock`` held)."""

    def _reject_request(self, error: ProtocolViolationError) -> None:
        """Record the Rule 3.9 error of a bad ``request``; by default the first error wins."""
        self._keep_error(error)

    def _demand_added(self, count: int) -> None:
        """Hook: ``count`` was added to the demand (runs without the lock, before a drain)."""

    # ---------------------------------------------------------------- errors
    def fail(self, error: Exception) -> None:
        """Keep ``error`` if it is the first (later ones go to the undeliverable hook); drain."""
        self._keep_error(error)
        self._schedule()

    def _keep_error(self, error: Exception) -> None:
        with self._lock:
            first = self._keep_error_locked(error)
        if not first:
            report_undeliverable(error)  # never under the lock

    def _keep_error_locked(self, error: Exception) -> bool:
        """Keep ``error`` if it is the first (``_lock`` held); ``False`` if it came too late."""
        first = self._error is None and not self._terminated
        if first:
            self._error = error
        return first

    def _upstream_failed(self, error: Exception) -> None:
        """An upstream ``request`` raised (Rule 3.16 broken): fail the stage with it."""
        self._keep_error(error)

    def request_upstream(self, subscription: Subscription, n: int) -> None:
        """Call ``subscription.request(n)``; if it raises, the stage fails with the error.

        The error is signalled by the drain loop (after every upstream is cancelled), so
        it never escapes into our caller: not our own ``request`` (Rule 3.16), not the
        ``on_subscribe`` or ``on_next`` of an upstream (Rule 2.13).

        A request made from inside downstream's ``on_subscribe`` or ``on_next`` (the
        stage forwarding the demand downstream just added) is deferred until the thread
        that owns the drain loop has given it up (``_owned_pass``, ``_accept_upstream``):
        a synchronous upstream answers a request on the caller's thread, into a stage
        whose loop that very thread holds higher up its stack, so every element would only
        be queued and an endless source under ``request(MAX_DEMAND)`` would never return.
        Deferred, the request is a trampoline (Rule 3.3's bounded recursion): the source
        answers it after the loop is free, through a pass of its own, which delivers each
        element as it comes. A refill the pass itself makes goes out at once (it is
        bounded by a prefetch, and Rule 3.4's caller budget counts on it).
        """
        if self._owner == threading.get_ident():
            with self._lock:
                if self._owner == threading.get_ident():
                    self._deferred.append((subscription, n))
                    return
        self._request_now(subscription, n)

    def _request_now(self, subscription: Subscription, n: int) -> None:
        try:
            subscription.request(n)
        except Exception as exc:  # the upstream broke Rule 3.16
            self._upstream_failed(exc)
            self._schedule()

    # ---------------------------------------------------------------- the drain
    def _take_deferred_locked(self) -> list[tuple[Subscription, int]]:
        """The upstream requests deferred while downstream ran (``_lock`` held)."""
        deferred, self._deferred = self._deferred, []
        return deferred

    def _send_deferred(self, deferred: list[tuple[Subscription, int]]) -> None:
        """Send deferred upstream requests in order (no lock held, the loop given up).

        Each may be answered at once on this thread, now through a drain pass of its own,
        whose downstream requests are deferred in turn: a trampoline (Rule 3.3).
        """
        for subscription, n in deferred:
            self._request_now(subscription, n)

    def _owned_pass(self) -> bool | None:
        """One ``_drain`` pass; once it gave the loop up, the deferred requests go upstream."""
        more = False
        try:
            more = bool(self._drain())
        finally:
            if not more:  # the pass gave the loop up (or retired it, or raised)
                with self._lock:
                    deferred = self._take_deferred_locked()
                if deferred:
                    self._send_deferred(deferred)
        return more

    def _schedule(self) -> None:
        """Run the drain loop unless a pass already owns it (that pass sees our change)."""
        if self._guard.acquire():
            self._loop.start_owned()

    @abstractmethod
    def _drain(self) -> bool | None:
        """The single owner's passes: deliver everything it can, give ownership up, return.

        A pass that asks ``self._loop.allow`` and gets fewer elements than are due returns
        ``True`` without giving ownership up: the loop moves the rest to the relay.
        """

    def _terminate_locked(self) -> Subscriber[Any] | None:
        """Mark the stage terminated, retire the loop, return the downstream (lock held)."""
        self._terminated = True
        self._guard.retire_locked()
        downstream, self._downstream = self._downstream, None
        return downstream

    def _abandon_locked(self) -> list[Subscription]:
        """Drop everything buffered; return the subscriptions to cancel (lock held)."""
        return []

    def _terminate_due_to(self, error: Exception) -> None:
        """The drain raised: cancel every upstream and signal ``error`` once (Reactor's rule)."""
        with self._lock:
            downstream = None if self._terminated else self._terminate_locked()
            self._cancelled = True
            subscriptions = self._abandon_locked()
        for subscription in subscriptions:
            cancel_quietly(subscription)
        if downstream is None:
            report_undeliverable(error)
        else:
            signal_on_error(downstream, error)

    def _deliver(self, downstream: Subscriber[Any], batch: Iterable[Any]) -> None:
        """Signal ``on_next`` for each element of ``batch`` in order, counting deliveries.

        A cancel, even one from inside ``on_next``, stops the run before the next element
        (Rule 3.12; the next drain pass cancels upstream). A downstream ``on_next`` that
        raises breaks Rule 2.13: the violation is reported, the rest of the batch is not
        sent and the stage is cancelled. The element whose ``on_next`` raised is not
        counted as delivered.
        """
        self._owner = threading.get_ident()  # only the loop's owner delivers
        try:
            sent, ok = signal_each(downstream, batch, self._cancelled_now)
        finally:
            self._owner = None
        with self._lock:
            self._delivered += sent
            if not ok:
                self._cancelled = True

    def _cancelled_now(self) -> bool:
        # An unlocked read of a flag that only goes False -> True: a cancel from inside
        # on_next is seen at once (same thread), one from elsewhere soon (Rule 3.12).
        return self._cancelled


class UpstreamStage(DownstreamStage, Subscriber[Any]):
    """A ``DownstreamStage`` that is also the ``Subscriber`` of one upstream publisher."""

    __slots__ = ("_upstream",)

    def __init__(self, downstream: Subscriber[Any]) -> None:
        super().__init__(downstream)
        self._upstream: Subscription | None = None

    def _abandon_locked(self) -> list[Subscription]:
        return [] if self._upstream is None else [self._upstream]

    def _accept_upstream(self, subscription: Subscription) -> bool:
        """The ``on_subscribe`` prologue: keep the first subscription, hand ourselves on.

        Raises ``TypeError`` for ``on_subscribe(None)`` (Rule 2.13), cancels a second
        subscription (Rule 2.5), and cancels the stage when downstream is gone or its
        ``on_subscribe`` raised. Returns True when the stage may go on (request upstream).

        Downstream's ``on_subscribe`` runs while this call owns the stage's drain loop, so
        nothing it triggers (a ``request`` that a timer or another thread answers at once)
        can reach downstream's ``on_next`` before ``on_subscribe`` returned (Rule 1.3):
        such work only marks the loop, and the pass runs here once it has returned.
        What downstream requests during ``on_subscribe`` goes upstream after it returned
        (``request_upstream`` defers it), so a synchronous upstream that answers on this
        thread delivers through the loop instead of filling the queue for ever.
        """
        if not accept_subscription(subscription, self._upstream is None):
            return False
        self._upstream = subscription
        downstream = self._downstream
        held = self._guard.acquire()  # only fails if upstream already signalled (Rule 1.9)
        if held:
            self._owner = threading.get_ident()
        accepted = downstream is not None and signal_on_subscribe(downstream, self)
        if not accepted:
            with self._lock:
                self._cancelled = True
        if held:
            self._owner = None
            if self._guard.release():
                self._loop.start_borrowed()  # work arrived during on_subscribe: deliver it
        # The demand downstream asked for in on_subscribe goes upstream now, once
        # on_subscribe has returned and the loop is free: a synchronous upstream that
        # answers here is delivered through the loop, not queued (Rules 1.3, 3.3).
        with self._lock:
            deferred = self._take_deferred_locked()
        self._send_deferred(deferred)
        if not accepted:
            self._schedule()
        return accepted


class InnerSubscriber(Subscriber[Any], Generic[OwnerT]):
    """One inner source of a coordinating stage, which drains every inner queue.

    Attributes, guarded by the owner's lock: ``queue`` (elements received, at most the
    owner's prefetch), ``done`` (the source ended: completed or failed), ``subscription``
    (None until ``on_subscribe``) and ``consumed`` (elements taken since the last refill
    request). Subclasses implement ``on_subscribe``, ``on_next`` and ``on_complete`` (which
    sets ``done`` under the owner's lock before it wakes the owner); an error from the
    source fails the owner (the first error wins).

    Rule 2.3: the owner's drain may run inside this source's ``on_complete``/``on_error``
    (same thread) and cancel every subscription it holds; an ended source is marked
    ``done`` *before* the owner hears of it, and ``live_subscriptions`` leaves it out, so
    nothing calls ``cancel`` or ``request`` on the subscription whose terminal signal is
    still running (RxJava's inner subscribers do the same).
    """

    __slots__ = ("consumed", "done", "owner", "queue", "subscription")

    def __init__(self, owner: OwnerT) -> None:
        self.owner = owner
        self.queue: deque[Any] = deque()
        self.done = False
        self.subscription: Subscription | None = None
        self.consumed = 0

    def on_error(self, error: Exception) -> None:
        """Mark the source ended, then fail the owner with its error (Rule 2.3)."""
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        owner = self.owner
        with owner._lock:
            self.done = True  # in the same critical section as the error: never "completed"
            first = owner._keep_error_locked(error)
        if not first:
            report_undeliverable(error)
        owner._schedule()

    @staticmethod
    def live_subscriptions(inners: Iterable[InnerSubscriber[Any]]) -> list[Subscription]:
        """The subscriptions of ``inners`` whose source has not ended: the ones to cancel.

        Called with the owner's lock held, by the owner's ``_abandon_locked`` (Rule 2.3).
        """
        return [
            inner.subscription
            for inner in inners
            if inner.subscription is not None and not inner.done
        ]

    def request(self, n: int) -> None:
        """Request ``n`` from the inner source; a raise fails the owner (Rule 3.16)."""
        subscription = self.subscription
        if subscription is not None:
            self.owner.request_upstream(subscription, n)


class BufferedStage(TerminalLatch, UpstreamStage):
    """An ``UpstreamStage`` that delivers a ready queue, its terminal signal behind it.

    ``_ready`` holds the elements due downstream, in order; the stage's one drain pass
    (``_drain``, written here once) delivers them within demand (Rule 1.1) and sends the
    terminal signal once (Rule 1.7). ``_done`` is set by the first terminal event (upstream
    ``on_error``/``on_complete``, or an error of the stage's own); ``_urgent`` marks the
    stage's own errors (a Rule 3.9 request, an overflow), which are signalled without
    waiting for ``_ready`` to drain, with upstream cancelled because it is still running.
    An upstream error waits behind ``_ready`` unless ``_errors_wait`` is ``False``.

    Subclasses fill ``_ready`` under ``_lock`` and then run the loop (``_schedule``, or
    ``self._guard.acquire_locked()`` in the same critical section and
    ``self._loop.start_owned()`` after it), and may override ``_stop_locked`` (drop what
    else they hold, return their timers) and ``_after_delivery``.
    """

    __slots__ = ("_done", "_ready", "_urgent")

    _errors_wait: ClassVar[bool] = True
    """Whether an upstream error waits behind ``_ready`` (``True``) or overtakes it."""

    _forwards_demand: ClassVar[bool] = False
    """Whether downstream's demand goes upstream as it comes (a stage that emits at most
    one element per element it receives, and holds back none): ``request(n)`` downstream
    is ``request(n)`` upstream until upstream ended."""

    def __init__(self, downstream: Subscriber[Any]) -> None:
        super().__init__(downstream)
        self._ready: deque[Any] = deque()
        self._done = False
        self._urgent = False

    def _latched_locked(self, error: Exception | None) -> None:
        if error is None:
            self._upstream_completed()

    def _upstream_completed(self) -> None:
        """Hook run under the lock by the first ``on_complete`` (e.g. flush a partial)."""

    def _demand_added(self, count: int) -> None:
        """With ``_forwards_demand``: pass ``count`` on upstream, unless upstream ended."""
        if self._forwards_demand and self._upstream is not None and not self._done:
            self.request_upstream(self._upstream, count)

    def on_next(self, element: Any) -> None:
        """Queue ``element`` for downstream and drain; by default the stage passes it on.

        Dropped once the stage ended or was cancelled (Rule 2.8). A stage that transforms
        or holds elements overrides this, queueing with ``_push_locked``; one that only
        keeps books per element extends ``_queued_locked``.

        Raises:
            TypeError: ``on_next(None)`` (Rule 2.13).
        """
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        with self._lock:
            if self._done or self._cancelled:
                return
            self._push_locked(element)
            more = self._queued_locked()
        self._schedule()
        if more and self._upstream is not None:
            self.request_upstream(self._upstream, more)

    def _push_locked(self, element: Any) -> None:
        """Queue ``element`` behind ``_ready`` (``_lock`` held), keeping the high-water mark."""
        ready = self._ready
        ready.append(element)
        self._high_water = max(self._high_water, len(ready))

    def _queued_locked(self) -> int:
        """Hook: ``on_next`` queued an element (``_lock`` held); how many to request now.

        The request goes upstream after the drain; 0 by default (the stage requests
        elsewhere).
        """
        return 0

    def _reject_request(self, error: ProtocolViolationError) -> None:
        self._fail_urgently(error)

    def _upstream_failed(self, error: Exception) -> None:
        self._fail_urgently(error)

    def _fail_urgently(self, error: Exception) -> None:
        """Our own error: signalled before the buffer, with upstream cancelled."""
        with self._lock:
            self._fail_urgently_locked(error)

    def _fail_urgently_locked(self, error: Exception) -> None:
        """``_fail_urgently`` for a caller that holds ``_lock``."""
        if not self._terminated:  # even after upstream completed (Rule 3.9)
            self._error = error
            self._done = True
            self._urgent = True

    def _buffered_now(self) -> int:
        """Elements held right now (``_lock`` is held); by default ``len(_ready)``."""
        return len(self._ready)

    def _stop_locked(self) -> Sequence[Cancellable]:
        """The stage ends: drop what it holds; return the timers to cancel (lock held).

        Called once, by the terminating drain pass (or by ``_abandon_locked`` when a pass
        raised). The timers are cancelled after the lock is released. By default: clear
        ``_ready``, no timers.
        """
        self._ready.clear()
        return ()

    def _abandon_locked(self) -> list[Subscription]:
        for timer in self._stop_locked():
            timer.cancel()  # lock-free flags, or the timer's own lock
        return super()._abandon_locked()

    def _after_delivery(self, count: int) -> None:
        """Hook: ``count`` elements went downstream (no lock held, inside the drain)."""

    def _drain(self) -> bool | None:
        """Deliver ``_ready`` within demand; end the stage once finished or cancelled.

        The one buffered pass: each turn takes a batch under the lock, or finds nothing to
        do and gives the loop up in that same critical section (``release_locked``), or
        terminates (``_terminate_locked`` retires the loop, ``_stop_locked`` hands back the
        timers); the batch, the timers' cancellation and the signals happen without the lock.
        """
        while True:
            with self._lock:
                if self._terminated:
                    return None
                downstream = self._downstream
                upstream = self._upstream
                if self._cancelled or downstream is None:
                    self._terminate_locked()
                    timers = self._stop_locked()
                    cancel_only = True
                else:
                    cancel_only = False
                    ready = self._ready
                    due = min(len(ready), self._demand)
                    count = self._loop.allow(due) if due else 0
                    batch = [ready.popleft() for _ in range(count)]
                    if count and self._demand != MAX_DEMAND:
                        self._demand -= count
                    error = self._error
                    urgent = self._urgent
                    finished = self._done and (
                        not ready or urgent or (error is not None and not self._errors_wait)
                    )
                    if finished:
                        self._terminate_locked()
                        timers = self._stop_locked()
                    elif not count:
                        if due:
                            return True  # Rule 3.4: the caller's share is spent; relay
                        if self._guard.release_locked():
                            continue  # work arrived while this pass ran
                        return None
            if cancel_only or finished:
                for timer in timers:
                    timer.cancel()
            if cancel_only:
                if upstream is not None:
                    cancel_quietly(upstream)
                return None
            assert downstream is not None
            self._deliver(downstream, batch)
            if finished:
                if self._cancelled:  # from inside on_next: no terminal signal (Rule 1.8)
                    if urgent and upstream is not None:
                        cancel_quietly(upstream)  # our own error: upstream still runs
                    return None
                self._signal_terminal(downstream, upstream, error, urgent)
                return None
            self._after_delivery(count)

    def _signal_terminal(
        self,
        downstream: Subscriber[Any],
        upstream: Subscription | None,
        error: Exception | None,
        urgent: bool,
    ) -> None:
        """Send the terminal signal; cancel upstream first for an urgent error."""
        if error is not None and urgent and upstream is not None:
            cancel_quietly(upstream)  # our own error: upstream is still running
        signal_terminal(downstream, error)


class PassThroughStage(Subscriber[T], Subscription):
    """A stage that holds no elements: signals go straight down, demand straight up.

    ``_done`` is set once, by the first terminal signal from upstream or by the stage's
    own end (``_end``); after it nothing more reaches downstream (Rules 1.7, 2.4), and the
    downstream reference is dropped (Rule 3.13). ``_requested`` and ``_delivered`` are the
    stage's counters for ``statistics()``; each stage keeps its own ``on_subscribe``,
    ``on_next``, ``request`` and ``cancel``.
    """

    __slots__ = ("_delivered", "_done", "_downstream", "_lock", "_requested", "_upstream")

    def __init__(self, downstream: Subscriber[T]) -> None:
        self._downstream: Subscriber[T] | None = downstream
        self._lock = threading.Lock()
        self._upstream: Subscription | None = None
        self._done = False
        self._requested = 0
        self._delivered = 0

    def on_error(self, error: Exception) -> None:
        """Forward an upstream error unless this stage already ended."""
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        downstream = self._end()
        if downstream is not None:
            signal_on_error(downstream, error)

    def on_complete(self) -> None:
        """Forward completion unless this stage already ended."""
        downstream = self._end()
        if downstream is not None:
            signal_on_complete(downstream)

    def _end(self) -> Subscriber[T] | None:
        """Mark the stage done once; return the downstream to signal, or None if ended."""
        with self._lock:
            if self._done:
                return None
            self._done = True
        downstream, self._downstream = self._downstream, None
        return downstream
