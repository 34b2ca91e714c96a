"""The demand core: capped demand, request validation, the emitter election, the drain loop.

Every publisher and operator in this package is built from these few pieces, so the
rules they enforce are written once:

* ``add_demand`` adds demand and caps it at ``MAX_DEMAND`` (Rule 3.17).
* ``validate_request`` turns a bad ``request(n)`` into the error to *signal* (Rule 3.9),
  so that ``request`` itself never raises (Rule 3.16).
* ``WorkGuard`` is single ownership: whoever moves it from idle to owned does the work;
  everyone who arrives while it is owned only leaves a "missed" mark, and the owner makes
  one more pass before letting go. That gives serial signalling (Rule 1.3) with no lock
  held while a subscriber runs, and it bounds ``request -> on_next -> request`` recursion
  to depth 1 (Rule 3.3): a re-entrant ``request`` finds the guard owned and returns.
* ``EmitterElection`` is a ``WorkGuard`` that also accounts demand for one subscription:
  the caller whose ``request`` finds the guard idle is elected to run the emit loop.
* ``DrainLoop`` runs a drain function under a ``WorkGuard``, on the caller's thread or on
  an executor; stages with several inputs use it to serialise everything they emit.

All shared state is guarded by a ``threading.Lock`` held only around counter updates, never
while calling user code, so the core stays correct on free-threaded CPython.
"""

from __future__ import annotations

import operator
import threading
from typing import TYPE_CHECKING, Final

from ._exceptions import (
    DemandTypeError,
    ExecutorRejectedError,
    NonPositiveDemandError,
    ProtocolViolationError,
    StreamInterruptedError,
)
from ._hooks import report_undeliverable
from ._relay import relay

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Executor

__all__ = [
    "CALLER_BUDGET",
    "MAX_DEMAND",
    "DrainLoop",
    "EmitterElection",
    "WorkGuard",
    "add_demand",
    "check_positive",
    "replenish_threshold",
    "validate_request",
]

MAX_DEMAND: Final[int] = 2**63 - 1
"""The demand cap, ``2**63 - 1`` (the JVM's ``Long.MAX_VALUE``): unbounded demand (Rule 3.17)."""


CALLER_BUDGET: Final[int] = 128
"""The most elements a drain delivers on a thread that only came to ask (Rule 3.4).

A drain started by ``request`` or ``subscribe`` (``DrainLoop.start_borrowed``) delivers
at most this many elements on its caller's thread; if more are due, the rest of the run
moves to the relay's threads and the call returns.
"""


def add_demand(current: int, n: int) -> int:
    """Return ``current + n`` capped at ``MAX_DEMAND`` (Rule 3.17).

    Args:
        current: outstanding demand, ``0 <= current <= MAX_DEMAND``.
        n: validated additional demand, ``n > 0``.
    """
    total = current + n
    return MAX_DEMAND if total >= MAX_DEMAND else total


def validate_request(n: object) -> int:
    """Check the argument of ``Subscription.request`` and return it as an ``int``.

    Integers of any type that supports ``__index__`` (``int``, NumPy integers) are accepted;
    ``bool`` is refused although it is an ``int``, because ``request(True)`` is a bug.

    Raises:
        DemandTypeError: ``n`` is not an integer, or is a ``bool`` (Rule 3.9).
        NonPositiveDemandError: ``n <= 0`` (Rule 3.9).

    The caller turns either exception into an ``on_error`` signal; ``request`` itself must
    return normally (Rule 3.16).
    """
    if type(n) is int:  # the fast path: almost every call
        if n > 0:
            return n
        raise NonPositiveDemandError(n)
    if isinstance(n, bool):
        raise DemandTypeError(n)
    try:
        value = operator.index(n)  # type: ignore[arg-type]
    except TypeError:
        raise DemandTypeError(n) from None
    if value <= 0:
        raise NonPositiveDemandError(value)
    return value


class WorkGuard:
    """Single ownership of a piece of work, with a "missed" mark for late arrivals.

    ``acquire()`` returns ``True`` to exactly one caller at a time: the owner. A caller that
    finds the guard owned returns ``False`` at once after marking that work was missed; the
    owner sees the mark in ``release()`` and makes another pass. No call ever waits for the
    owner, and the owner never holds the lock while it works.

    Args:
        lock: the lock that guards the guard's three flags; by default a new one. A stage
            passes its own state lock, so that recording new work and claiming the loop
            cost one critical section (``acquire_locked`` with that lock held).

    An owner that expects more work soon may ``park`` instead of releasing: it keeps
    ownership and sleeps until a caller's ``acquire`` (or ``claim_locked``, or ``retire``)
    wakes it, or until a timeout, after which it gives ownership up as ``release`` does.
    A caller that finds the owner parked wakes it instead of marking work missed: the
    owner's next pass sees what the caller recorded, without a new task or thread.

    Concurrency: every method may be called from any thread; the ``*_locked`` methods only
    with ``lock`` held.
    """

    __slots__ = ("_lock", "_missed", "_owned", "_parked", "_retired")

    def __init__(self, lock: threading.Lock | None = None) -> None:
        self._lock = threading.Lock() if lock is None else lock
        self._owned = False
        self._missed = False
        self._retired = False
        self._parked: threading.Lock | None = None  # held while the owner sleeps in park()

    def acquire(self) -> bool:
        """Try to become the owner; ``True`` means the caller must now do the work."""
        with self._lock:
            return self._acquire_locked()

    def acquire_locked(self) -> bool:
        """``acquire`` for a caller that already holds the guard's lock."""
        if self._owned:
            if self._parked is None:
                self._missed = True
            else:
                self._unpark_locked()
            return False
        self._owned = True
        return True

    _acquire_locked = acquire_locked

    def claim_locked(self) -> bool:
        """``acquire_locked`` without the "missed" mark, for a per-element hot path.

        Valid only where the owner gives ownership up (``release_locked``) in a critical
        section of this same lock in which it found no work: then whatever the caller
        recorded under the lock before this call is seen by the owner's next look, and
        the mark (one more pass) would be wasted. ``True``: the caller is now the owner.
        """
        if self._owned:
            if self._parked is not None:
                self._unpark_locked()
            return False
        self._owned = True
        return True

    def release(self) -> bool:
        """Called by the owner after a pass: ``True`` means work was missed, pass again.

        A retired guard stays owned: ``release`` returns ``False`` and nobody can acquire it.
        """
        with self._lock:
            return self.release_locked()

    def release_locked(self) -> bool:
        """``release`` for an owner that already holds the guard's lock.

        A pass that shares its stage's lock gives ownership up in the very critical section
        in which it found nothing to do: one lock round trip fewer per pass.
        """
        if self._retired:
            return False
        if self._missed:
            self._missed = False
            return True
        self._owned = False
        return False

    def park(self, timeout: float) -> bool:
        """Owner only, after a pass that found nothing to do: wait for work, still owning.

        Instead of ``release``, for an owner on a thread of its own (an executor's task)
        that expects work again soon: the caller that brings it then only wakes this
        thread, with no new task to submit and no ownership to hand over.

        Args:
            timeout: seconds to wait at most (``> 0``).

        Returns:
            ``True``: work was missed or arrived, make another pass (still the owner).
            ``False``: nothing came within ``timeout``, and ownership was given up as
            ``release`` gives it up (a retired guard stays owned).
        """
        wake = threading.Lock()
        with self._lock:
            if self._retired:
                return False
            if self._missed:
                self._missed = False
                return True
            wake.acquire()
            self._parked = wake
        wake.acquire(timeout=timeout)
        with self._lock:
            if self._parked is not wake:  # a caller woke us (maybe just after the timeout)
                return not self._retired
            # Nobody came: a caller, ``retire`` included, would have cleared ``_parked``.
            self._parked = None
            self._owned = False
            return False

    def _unpark_locked(self) -> None:
        parked, self._parked = self._parked, None
        if parked is not None:
            parked.release()

    def retire(self) -> None:
        """Owner only: keep ownership for good, so no pass ever runs again.

        Used once a stream reached its terminal state (Rule 1.7) or was cancelled: later
        callers find the guard owned and return at once, which makes them no-ops.
        """
        with self._lock:
            self.retire_locked()

    def retire_locked(self) -> None:
        """``retire`` for a caller that already holds the guard's lock.

        Also valid for a caller that does not own the guard: it takes ownership for good,
        so a pass that is running stops at its next ``release``.
        """
        self._owned = True
        self._retired = True
        self._unpark_locked()

    @property
    def owned(self) -> bool:
        """Whether some caller currently owns the work (a snapshot, for statistics)."""
        return self._owned

    @property
    def retired(self) -> bool:
        """Whether the work is over for good (a terminal signal was sent, or is owed)."""
        return self._retired


class EmitterElection(WorkGuard):
    """Demand accounting for one subscription, plus the election of its single emitter.

    The subscription's ``request(n)`` calls ``request`` here: demand is added (capped,
    Rule 3.17), or a bad ``n`` is parked as the error to signal (Rule 3.9), and the caller
    learns whether it was elected to run the emit loop. The emit loop, run only by the
    elected owner::

        while True:
            error = election.take_error()          # Rule 3.9: signal it and stop
            ...emit up to election.demand elements...
            election.produced(count)               # Rule 1.1: demand goes down
            if done: election.terminate(); signal on_complete; return   # keep ownership
            if not election.release(): return      # nothing was missed

    A terminated or cancelled election keeps its owner forever, so later ``request`` and
    ``cancel`` calls are no-ops (Rules 3.6, 3.7) and nothing follows a terminal signal
    (Rule 1.7).

    Concurrency: ``request`` and ``cancel`` may come from any thread; the other methods are
    for the owner.
    """

    __slots__ = ("_cancelled", "_delivered", "_demand", "_error", "_requested", "_terminated")

    def __init__(self) -> None:
        super().__init__()
        self._demand = 0
        self._requested = 0
        self._delivered = 0
        self._cancelled = False
        self._terminated = False
        self._error: ProtocolViolationError | None = None

    def request(self, n: object) -> bool:
        """Register ``request(n)``; return ``True`` if the caller must run the emit loop.

        Never raises: a bad ``n`` is kept for ``take_error`` (Rules 3.9, 3.16). After
        cancellation or termination it does nothing and returns ``False`` (Rule 3.6).
        """
        try:
            count = validate_request(n)
        except ProtocolViolationError as error:
            with self._lock:
                if self._cancelled:
                    return False
                if self._error is None:
                    self._error = error
                return self._acquire_locked()
        with self._lock:
            if self._cancelled:
                return False
            self._demand = add_demand(self._demand, count)
            self._requested = add_demand(self._requested, count)
            return self._acquire_locked()

    def cancel(self) -> bool:
        """Mark the subscription cancelled; ``True`` if the caller must run one last pass.

        Idempotent (Rules 3.5, 3.7): only the first call can return ``True``, and only when
        no emitter is running; a running emitter sees ``cancelled`` and stops by itself.
        """
        with self._lock:
            if self._cancelled:
                return False
            self._cancelled = True
            return self._acquire_locked()

    def take_error(self) -> ProtocolViolationError | None:
        """Owner only: the parked Rule 3.9 error, if any, removed from the election."""
        with self._lock:
            error, self._error = self._error, None
            return error

    def produced(self, count: int) -> int:
        """Owner only: account ``count`` delivered elements; return the demand left.

        Unbounded demand (``MAX_DEMAND``) is not decremented (Rule 3.17).
        """
        with self._lock:
            self._delivered += count
            if self._demand != MAX_DEMAND:
                self._demand -= count
            return self._demand

    def produced_and_release(self, count: int) -> int | None:
        """Owner only: ``produced(count)`` and ``release()`` in one critical section.

        Returns the demand left, with ownership given up; or ``None`` when work was missed
        meanwhile (a ``request``, a ``cancel``): the caller still owns the loop and must
        run a pass.
        """
        with self._lock:
            self._delivered += count
            if self._demand != MAX_DEMAND:
                self._demand -= count
            if self.release_locked():
                return None
            return self._demand

    def seize(self) -> bool:
        """Take the election for good from an owner that can never run again.

        For a subscription whose executor is gone for good (its event loop was closed):
        an owner, if any, is a pass that will never run, so the caller takes over. Returns
        ``True`` if the stream was live: the caller must then send the terminal signal
        (the subscription counts as terminated from now on, Rules 1.6, 1.7). ``False``:
        it was already cancelled or terminated. Never call it while a pass may still run.
        """
        with self._lock:
            live = not self._cancelled
            self._cancelled = True
            self._terminated = self._terminated or live
            self._owned = self._retired = True
            return live

    def terminate(self) -> None:
        """Owner only: mark that a terminal signal is about to be sent.

        The subscription counts as cancelled from now on (Rule 1.6) and the owner never
        releases, so nothing can follow the terminal signal (Rule 1.7).
        """
        with self._lock:
            self._cancelled = True
            self._terminated = True
            self._retired = True

    @property
    def demand(self) -> int:
        """Outstanding demand: requested and not yet delivered, at most ``MAX_DEMAND``."""
        with self._lock:
            return self._demand

    @property
    def error_parked(self) -> bool:
        """Whether a Rule 3.9 error waits for ``take_error`` (an unlocked peek).

        A ``False`` that is stale cannot lose the error: the ``request`` that parks it
        marks the guard missed, so the owner makes one more pass and sees it then.
        """
        return self._error is not None

    @property
    def cancelled(self) -> bool:
        """Whether the subscription was cancelled or terminated (Rule 1.6)."""
        return self._cancelled

    @property
    def terminated(self) -> bool:
        """Whether a terminal signal was sent."""
        return self._terminated

    @property
    def requested(self) -> int:
        """Total demand ever requested, capped at ``MAX_DEMAND``."""
        return self._requested

    @property
    def delivered(self) -> int:
        """Total elements delivered with ``on_next``."""
        return self._delivered


class DrainLoop:
    """Runs ``drain`` serially: one pass at a time, one more pass for every missed call.

    This is the package's one serialisation primitive (Reactor's work-in-progress loop):
    every stage that delivers from more than one thread, or from a buffer, runs its
    deliveries here.

    ``schedule()`` may be called from any thread whenever there is new work (an element
    arrived on one of several inputs, demand arrived, a cancel). Only the caller that finds
    the loop idle runs ``drain``, on its own thread or, with an ``executor``, as one task;
    everyone else marks the work missed and returns at once. ``drain`` must process all the
    work it can see. It returns ``True`` to say it stopped early with work left (a task
    that yields the executor after a batch); the loop then calls it again, resubmitting
    the task when an executor is used.

    Every exit path is accounted for: a pass that finds nothing to do gives ownership up
    (``release``), a pass that yields resubmits while keeping it, and a pass that raises
    retires the guard (no pass runs again) and hands the exception to ``on_failure``, which
    cancels upstream and signals ``on_error`` once: Reactor's rule, and the JVM examples'
    ``terminateDueTo``.

    Args:
        drain: the pass.
        executor: run passes there instead of on the caller's thread.
        on_rejected: called on the scheduling thread with an ``ExecutorRejectedError`` when
            the executor refuses a task; the loop stays owned, so no pass runs again and
            the callback is free to send the stream's terminal signal.
        guard: the ``WorkGuard`` to use, for a loop that shares ownership with an
            ``EmitterElection`` or a stage's lock; a new one by default.
        self_releasing: ``drain`` gives ownership up itself: a pass that returns a false
            value has already called ``guard.release_locked()`` (and got ``False``) or
            retired the guard, in its last critical section, so the loop just returns.
        on_failure: called once, without any lock held, with the ``Exception`` a pass
            raised (an upstream that broke Rule 3.16, a bug of ours), after the guard was
            retired: it must cancel upstream and signal ``on_error`` downstream. A
            ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``,
            ``SystemExit``) is passed as a ``StreamInterruptedError`` whose ``__cause__``
            it is, reported through the undeliverable hook, and then re-raised: it is
            never swallowed. Without ``on_failure`` the error goes to the undeliverable
            hook.
        linger: with an ``executor``, seconds a task that finished a pass waits for the
            next ``schedule()`` before it gives the loop up (``WorkGuard.park``); ``0``, the
            default, gives it up at once. For a stream whose work comes back quickly (a
            consumer's next request): each ``schedule()`` within the window then costs one
            thread wake-up instead of a new task, and the executor's thread stays with the
            stream meanwhile. Not with ``self_releasing``, whose passes give ownership up
            themselves.

    A caller that only came to ask (``request``, ``subscribe``) starts the loop with
    ``start_borrowed``: the run may deliver ``CALLER_BUDGET`` elements on that thread.
    ``drain`` asks ``allow(count)`` before it takes elements to deliver; once that returns
    fewer than it wanted, it stops, still owning the loop, and returns ``True``. The rest
    of the run then moves to the relay (``reactive_streams._core._relay``), whose threads
    run it in passes of the same bound, and the caller gets its thread back (Rule 3.4).
    Ownership never lapses on the way, so signals stay serial (Rule 1.3). A run started
    by a producer (``start_owned``: an upstream signal, a timer) is not bounded: that
    thread is the stream's own.

    Concurrency: ``schedule`` is thread-safe; ``drain`` runs serially with a happens-before
    edge between passes (the guard's lock), which is what Rules 1.3 and 2.7 require.

    Raises:
        ValueError: ``linger`` is negative or NaN.
    """

    __slots__ = (
        "_budget",
        "_drain",
        "_executor",
        "_guard",
        "_linger",
        "_on_failure",
        "_on_rejected",
        "_self_releasing",
    )

    def __init__(
        self,
        drain: Callable[[], bool | None],
        *,
        executor: Executor | None = None,
        on_rejected: Callable[[ExecutorRejectedError], None] | None = None,
        guard: WorkGuard | None = None,
        on_failure: Callable[[Exception], None] | None = None,
        self_releasing: bool = False,
        linger: float = 0.0,
    ) -> None:
        if not linger >= 0:  # also refuses NaN
            raise ValueError(f"linger must be >= 0 seconds, got {linger!r}")
        self._drain = drain
        self._linger = linger if executor is not None else 0.0
        self._self_releasing = self_releasing
        self._executor = executor
        self._on_rejected = on_rejected
        self._on_failure = on_failure
        self._guard = WorkGuard() if guard is None else guard
        self._budget: int | None = None  # owner only: elements this run may still deliver

    @property
    def guard(self) -> WorkGuard:
        """The guard that decides who owns the loop."""
        return self._guard

    def schedule(self) -> None:
        """Make sure a pass runs after this call: run it now, submit it, or mark it missed."""
        if self._guard.acquire():
            self.start_owned()

    def start_owned(self) -> None:
        """Start passes for a caller that already owns the guard (e.g. elected by a request)."""
        if self._executor is None:
            self._budget = None
            self._run()
            return
        try:
            self._executor.submit(self._run)
        except Exception as exc:  # shut down, or a bounded executor that is full
            rejected = ExecutorRejectedError(f"the executor refused the stream's task: {exc!r}")
            rejected.__cause__ = exc
            if self._on_rejected is None:
                self.fail(rejected)
            else:
                self._on_rejected(rejected)

    def start_here(self) -> None:
        """``start_owned`` on this thread even with an executor: no hop.

        For an owner that already runs where the passes belong (a task on the event loop
        that is the executor): the passes run now, on this thread, serially as ever.
        """
        self._budget = None
        self._run()

    def start_borrowed(self) -> None:
        """``start_owned`` for a caller that came to ask (``request``, ``subscribe``).

        The run delivers at most ``CALLER_BUDGET`` elements on this thread (for a drain
        that asks ``allow``); the rest goes to the relay and this call returns (Rule 3.4).
        """
        if self._executor is None:
            self._budget = CALLER_BUDGET
            self._run()
            return
        self.start_owned()

    def allow(self, count: int) -> int:
        """Owner only: how many of ``count`` elements this pass may deliver on this thread.

        Spends them from the run's budget: ``count`` itself for an unbounded run, fewer
        (down to 0) once a borrowed run used up ``CALLER_BUDGET``. A pass that gets fewer
        than it wanted delivers those, then returns ``True`` still owning the loop.
        """
        budget = self._budget
        if budget is None:
            return count
        allowed = count if count <= budget else budget
        self._budget = budget - allowed
        return allowed

    def _hand_to_relay(self) -> bool:
        try:
            relay().submit(self._relay_run)
        except Exception:  # no thread can start (interpreter shutdown): go on here
            self._budget = None
            return False
        return True

    def _relay_run(self) -> None:
        self._budget = CALLER_BUDGET
        self._run()

    def fail(self, error: Exception) -> None:
        """Owner only: retire the guard and end the stream with ``error`` (``on_failure``)."""
        self._guard.retire()
        on_failure = self._on_failure
        if on_failure is None:
            report_undeliverable(error)
            return
        try:
            on_failure(error)
        except Exception as exc:  # the failure path itself broke: never lose it
            exc.__context__ = error
            report_undeliverable(exc)

    def _run(self) -> None:
        drain = self._drain
        guard = self._guard
        try:
            while True:
                if drain():
                    if self._executor is not None:
                        self.start_owned()  # yield the executor, keep ownership
                        return
                    if self._budget == 0 and self._hand_to_relay():
                        return  # Rule 3.4: the rest of the run goes on on the relay
                    continue
                if self._self_releasing:
                    return
                if self._linger:
                    if not guard.park(self._linger):
                        return
                elif not guard.release():
                    return
        except Exception as exc:  # upstream broke Rule 3.16, or a bug of ours
            self.fail(exc)
        except BaseException as exc:  # KeyboardInterrupt, SystemExit: signal, then re-raise
            interrupted = StreamInterruptedError(
                f"the stream's task was interrupted by {type(exc).__name__}"
            )
            interrupted.__cause__ = exc
            report_undeliverable(exc)
            self.fail(interrupted)
            raise


def replenish_threshold(prefetch: int) -> int:
    """Elements consumed after which to request more: 75% of ``prefetch``, at least 1.

    Requesting again at three quarters (Reactor's ``limitRate``) keeps a quarter of the
    batch in flight while the refill travels upstream, and sends one ``request`` per
    three quarters of a batch instead of one per element.
    """
    return max(1, prefetch - (prefetch >> 2))


def check_positive(what: str, value: object) -> int:
    """Check a size argument (``prefetch``, ``batch_size``, ``max_*``) and return it.

    Args:
        what: the argument's name, for the message.
        value: the argument; an ``int`` (not a ``bool``) ``>= 1``.

    Raises:
        TypeError: ``value`` is not an ``int``, or is a ``bool``.
        ValueError: ``value <= 0``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {type(value).__qualname__}")
    if value <= 0:
        raise ValueError(f"{what} must be positive, got {value}")
    return value
