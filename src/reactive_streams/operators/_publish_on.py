"""``publish_on``: move downstream signals onto an executor, through a bounded buffer."""

from __future__ import annotations

from _thread import get_ident
from collections import deque
from itertools import islice
from operator import length_hint
from typing import TYPE_CHECKING, TypeVar

from .._core import (
    MAX_DEMAND,
    DownstreamStage,
    ExecutorSubscribable,
    MissingBackpressureError,
    ProtocolViolationError,
    SingleUpstreamOperator,
    StageStatistics,
    TerminalLatch,
    accept_subscription,
    cancel_quietly,
    check_positive,
    check_subscriber,
    replenish_threshold,
    report_violation,
    run_receiver,
    signal_error_only,
    signal_on_complete,
    signal_on_error,
    signal_on_subscribe,
)
from ..api import Processor, Publisher, Subscriber, Subscription
from ._executors import as_executor

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Iterator
    from concurrent.futures import Executor

__all__ = ["PublishOn", "PublishOnOperator"]

T = TypeVar("T")

_PASS_LIMIT = 4096
"""Elements delivered per executor task before yielding the executor to other work."""


class PublishOnOperator(SingleUpstreamOperator[T]):
    """The ``Flow.publish_on`` node: a fresh ``PublishOn`` stage for every subscriber."""

    __slots__ = ("_executor", "_prefetch")

    def __init__(
        self,
        upstream: Publisher[T],
        executor: Executor | asyncio.AbstractEventLoop,
        prefetch: int,
    ) -> None:
        super().__init__(upstream)
        self._executor = as_executor(executor)
        self._prefetch = _check_prefetch(prefetch)

    @property
    def name(self) -> str:
        return "publish_on"

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Subscribe ``subscriber`` through a new stage (Rule 1.9)."""
        check_subscriber(subscriber)
        upstream = self._upstream
        if isinstance(upstream, ExecutorSubscribable):
            # SYNC fusion: a source that emits on a given executor (an iterable one)
            # needs no buffer; its emitter moves to the executor and reads there, only on
            # demand.
            upstream.subscribe_on_executor(subscriber, self._executor)
            stats = upstream.last_statistics
            self._track(_Delegate(stats))
            return
        stage: PublishOn[T] = PublishOn(self._executor, prefetch=self._prefetch)
        self._track(stage)
        stage.subscribe(subscriber)
        self._upstream.subscribe(stage)


class _Delegate:  # also used by subscribe_on
    """Statistics of a fused ``publish_on``: those of the source it runs."""

    __slots__ = ("_source",)

    def __init__(self, source: Callable[[], StageStatistics | None]) -> None:
        self._source = source

    def statistics(self) -> StageStatistics:
        stats = self._source()
        if stats is None:
            return StageStatistics(
                requested=0, delivered=0, buffered=0, cancelled=False, terminated=False
            )
        return stats


def _check_prefetch(prefetch: int) -> int:
    return check_positive("prefetch", prefetch)


class PublishOn(TerminalLatch, DownstreamStage, Processor[T, T]):
    """An identity processor whose downstream signals all run on ``executor``.

    Marble (``|`` marks the thread hop)::

        upstream (thread A):   -1-2-3-|
        request upstream:      (prefetch)  (75% consumed) ...
        downstream (executor): --|1-2-3-|

    Args:
        executor: where ``on_next``/``on_error``/``on_complete`` run; a
            ``concurrent.futures.Executor`` or an asyncio event loop.
        prefetch: the buffer bound, in elements, and the first demand sent upstream.

    Backpressure:
        Requests ``prefetch`` upstream, then requests again each time 75% of it has been
        handed downstream, so the buffer never holds more than ``prefetch`` elements. An
        upstream that sends more than requested breaks Rule 1.1: the stage cancels it and
        signals ``MissingBackpressureError``.

    Concurrency:
        The stage is the kit's ``DownstreamStage`` (demand, Rule 3.9 errors, cancel, the end of a
        failed pass) with its drain loop on the executor, and its upstream half is the kit's
        ``TerminalLatch``. The drain is the package's ``DrainLoop``; its ``WorkGuard`` shares the
        stage's lock, which guards the buffer and the counters too, so an upstream ``on_next`` costs
        one lock round trip: append, and submit a drain task only if none is running. The drain task
        (one at a time, so downstream signals are serial, Rule 1.3) takes the whole buffer in one
        critical section (or splits it there with two C-level copies when demand is smaller) and
        hands it downstream without the lock; work that arrives meanwhile marks the guard, so the
        loop passes again before it gives ownership up and no wake-up is lost. Calls to the upstream
        subscription after the first request come only from the drain (Rule 2.7). An upstream whose
        ``request`` raises (Rule 3.16 broken) is cancelled and the error is signalled at once; so is
        a ``KeyboardInterrupt``/``SystemExit`` raised on the executor (as
        ``StreamInterruptedError``), which is then re-raised there.

        A synchronous upstream emits inside the drain's refill ``request`` (Rule 3.10),
        on the drain's thread, while the drain is blocked in that call: such an
        ``on_next`` (recognised by the drain's thread identity, which only that thread
        can match) appends without the lock and starts no drain, because the drain owns
        the buffer until the call returns and then loops over what was appended. An
        ``on_next`` from any other thread takes the lock, so this holds without the GIL.

        When the subscriber declares the kit's ``RunSubscriber`` capability (the plain
        callback sink of ``Flow.subscribe(on_next=...)`` does), the drain hands it each
        batch in one call, ``on_next_run``, which calls the user's callable per element
        and keeps the same demand, cancellation and error handling. When the upstream
        declares ``ExecutorSubscribable`` (an iterable source), ``Flow.publish_on`` builds
        no stage at all: the source emits on the executor. One subscriber per stage: a
        second one gets ``on_error``.
    """

    __slots__ = (
        "__weakref__",
        "_buffer",
        "_closed",
        "_consumed",
        "_done",
        "_executor",
        "_inline_thread",
        "_limit",
        "_overflowed",
        "_pending_error",
        "_prefetch",
        "_ready",
        "_run",
        "_started",
        "_upstream",
    )

    def __init__(
        self, executor: Executor | asyncio.AbstractEventLoop, *, prefetch: int = 256
    ) -> None:
        self._prefetch = _check_prefetch(prefetch)
        self._limit = replenish_threshold(prefetch)
        self._executor = as_executor(executor)
        super().__init__(None, executor=self._executor)
        self._buffer: deque[T] = deque()
        self._upstream: Subscription | None = None
        self._downstream: Subscriber[T] | None = None
        self._run: Callable[[Iterator[T]], None] | None = None  # the downstream's on_next_run
        self._started = False
        self._ready = False
        self._done = False
        self._pending_error: Exception | None = None  # signalled at once, upstream cancelled
        self._consumed = 0
        self._closed = False  # _done or _cancelled: one flag for the hot on_next path
        self._overflowed = False  # the upstream broke Rule 1.1: cancel it at the end
        # The drain's thread while it is inside ``upstream.request``, else 0. Only that
        # thread writes it, and only that thread can read back its own identity.
        self._inline_thread = 0

    def _buffered_now(self) -> int:
        return len(self._buffer)

    # ------------------------------------------------------------ Publisher side
    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Attach the single downstream subscriber (Rule 1.9)."""
        check_subscriber(subscriber)
        with self._lock:
            taken = self._downstream is not None or self._started
            if not taken:
                self._downstream = subscriber
                self._run = run_receiver(subscriber)
        if taken:
            signal_error_only(
                subscriber,
                ProtocolViolationError(
                    "Rule 1.11: a publish_on stage serves one subscriber; use Flow.publish_on "
                    "to get a stage per subscriber",
                    rule="1.11",
                ),
            )
            return
        self._maybe_start()

    # ------------------------------------------------------------ Subscriber side
    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep the upstream subscription and request ``prefetch`` (Rule 2.1)."""
        if not accept_subscription(subscription, self._claim_upstream):
            return
        self._maybe_start()

    def _claim_upstream(self, subscription: Subscription) -> bool:
        with self._lock:
            if self._upstream is not None:
                return False
            self._upstream = subscription
            return True

    def _maybe_start(self) -> None:
        with self._lock:
            if self._started or self._upstream is None or self._downstream is None:
                return
            self._started = True
            upstream, downstream = self._upstream, self._downstream
        try:
            upstream.request(self._prefetch)
        except Exception as exc:  # the upstream broke Rule 3.16: end with its error
            with self._lock:
                if self._pending_error is None:
                    self._pending_error = exc
        if not signal_on_subscribe(downstream, self):
            with self._lock:
                self._cancelled = self._closed = True
        with self._lock:
            self._ready = True
            start = self._guard.acquire_locked()
        if start:
            self._loop.start_owned()

    def on_next(self, element: T) -> None:
        """Buffer ``element``; submit a drain task if none is running."""
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        if self._inline_thread == get_ident():
            # Emitted synchronously inside the drain's own ``upstream.request``, on the
            # drain's thread: the drain is blocked in that call and owns the buffer and the
            # work-in-progress flag, so no lock, and no drain to start (it loops next).
            if self._closed:
                return
            buffer = self._buffer
            buffer.append(element)
            if len(buffer) > self._prefetch:
                with self._lock:
                    self._overflow(buffer)
            return
        lock = self._lock
        lock.acquire()  # not ``with``: half the cost on this per-element path
        try:
            if self._closed:
                return
            buffer = self._buffer
            buffer.append(element)
            if len(buffer) > self._prefetch:
                self._overflow(buffer)
            # No "missed" mark is needed: the drain gives ownership up only in a critical
            # section of this same lock in which it found the buffer idle.
            if not self._guard.claim_locked():
                return
        finally:
            lock.release()
        self._loop.start_owned()

    def _overflow(self, buffer: deque[T]) -> None:
        """Rule 1.1 broken: drop the extra element and end with an error (lock held)."""
        buffer.pop()
        self._done = self._closed = self._overflowed = True
        self._error = MissingBackpressureError(
            f"Rule 1.1: upstream sent more than the {self._prefetch} elements publish_on requested"
        )

    # ------------------------------------------------------------ the kit's hooks
    def _latched_locked(self, error: Exception | None) -> None:
        self._closed = True  # upstream ended: on_next drops what a broken upstream sends

    def _cancelled_locked(self) -> None:
        self._closed = True

    def _reject_request(self, error: ProtocolViolationError) -> None:
        """A bad ``request``: signalled at once, before the buffer (Rule 3.9)."""
        with self._lock:
            if not self._cancelled and self._pending_error is None:
                self._pending_error = error

    def _terminate_locked(self) -> Subscriber[T] | None:
        self._run = None
        return super()._terminate_locked()

    def _abandon_locked(self) -> list[Subscription]:
        """A pass raised or the executor refused a task: drop the buffer, cancel upstream."""
        self._closed = True
        self._buffer.clear()
        return [] if self._upstream is None else [self._upstream]

    # ------------------------------------------------------------ the drain
    def _drain(self) -> bool:
        """Serial passes: hand batches downstream while there is demand and data.

        Each pass takes a batch under the lock (``_take_locked``), or ends the stream if
        it was cancelled or failed (``_stop_locked``, then ``_signal_stop``), or gives
        ownership up when there is nothing to do; then, without the lock, it delivers
        (``_hand_down``), completes (``_complete``) or refills upstream (``_refill``).

        Returns ``True`` after ``_PASS_LIMIT`` elements, to be resubmitted so a long
        stream does not hog the executor; ``False`` once ownership was given up (or the
        stream ended, which keeps ownership forever).
        """
        passed = 0
        while True:
            with self._lock:
                if self._terminated:
                    return False
                if not self._ready:
                    if self._guard.release_locked():
                        continue  # work arrived meanwhile
                    return False
                if self._cancelled or self._pending_error is not None or self._downstream is None:
                    stop = self._stop_locked()
                    taken = None
                else:
                    taken = self._take_locked()
                    if taken is None:  # nothing to do, seen under the lock
                        if self._guard.release_locked():
                            continue  # work arrived meanwhile
                        return False
            if taken is None:
                self._signal_stop(*stop)
                return False
            batch, count, finished, downstream, upstream = taken
            self._hand_down(downstream, batch, count)
            if self._cancelled:
                continue  # the next pass cancels upstream and drops references
            if finished:
                self._complete(downstream, upstream)
                return False
            self._refill(upstream, count)
            passed += count
            if passed >= _PASS_LIMIT:
                return True

    def _stop_locked(
        self,
    ) -> tuple[Subscription | None, Subscriber[T] | None, Exception | None, bool]:
        """End for good: cancelled, a bad request, or no subscriber (lock held, Rule 3.13).

        Returns ``(upstream, downstream, pending_error, cancelled)`` for ``_signal_stop``.
        """
        cancelled = self._cancelled
        self._cancelled = self._closed = True
        self._buffer.clear()
        downstream = self._terminate_locked()
        return self._upstream, downstream, self._pending_error, cancelled

    def _signal_stop(
        self,
        upstream: Subscription | None,
        downstream: Subscriber[T] | None,
        pending: Exception | None,
        cancelled: bool,
    ) -> None:
        """Cancel upstream (Rules 3.12, 3.13); signal a Rule 3.9 error unless cancelled."""
        if upstream is not None:
            cancel_quietly(upstream)
        if pending is not None and not cancelled and downstream is not None:
            signal_on_error(downstream, pending)

    def _take_locked(
        self,
    ) -> tuple[deque[T] | list[T], int, bool, Subscriber[T], Subscription | None] | None:
        """The next batch within demand (lock held); ``None`` if there is nothing to do.

        Returns ``(batch, count, finished, downstream, upstream)``: ``finished`` when the
        upstream ended and the batch empties the buffer, so the terminal signal follows it.
        The whole buffer is taken at once when demand covers it; otherwise it is split
        with two copies in C, not a ``popleft`` per element.
        """
        buffer = self._buffer
        demand = self._demand
        size = len(buffer)
        self._high_water = max(self._high_water, size)  # the buffer only shrinks here: exact
        batch: deque[T] | list[T]
        if demand >= size:
            batch = buffer
            self._buffer = deque()
        else:
            batch = list(islice(buffer, demand))
            self._buffer = deque(islice(buffer, demand, None))
        count = len(batch)
        if count and demand != MAX_DEMAND:
            self._demand = demand - count
        finished = self._done and count == size
        if count == 0 and not finished:
            return None
        downstream = self._downstream
        assert downstream is not None  # checked by the caller under the same lock
        return batch, count, finished, downstream, self._upstream

    def _hand_down(self, downstream: Subscriber[T], batch: deque[T] | list[T], count: int) -> None:
        """Hand ``batch`` downstream without the lock, and count what went out.

        Stops at a cancel; an ``on_next`` that raises is reported and counts as a cancel
        (Rule 2.13). A run-taking subscriber gets the batch in one call.
        """
        remaining = iter(batch)
        failed = 0
        run = self._run
        if run is not None:
            run(remaining)  # never raises; leaves what it did not take in ``remaining``
        else:
            on_next = downstream.on_next
            try:
                for element in remaining:
                    on_next(element)
                    if self._cancelled:
                        break
            except Exception as exc:
                report_violation(downstream, "on_next", exc)
                failed = 1
                with self._lock:
                    self._cancelled = self._closed = True
        # Counted once per batch, not per element: what the iterator did not yield.
        sent = count - length_hint(remaining) - failed
        with self._lock:
            self._delivered += sent
            if sent + failed < count:  # only a cancel stops a run early: never drop
                self._cancelled = self._closed = True

    def _complete(self, downstream: Subscriber[T], upstream: Subscription | None) -> None:
        """The buffer is empty and upstream ended: pass the terminal signal on (Rule 1.7)."""
        with self._lock:
            self._terminate_locked()
            overflowed = self._overflowed
            error = self._error
        if overflowed and upstream is not None:
            cancel_quietly(upstream)  # Rule 1.1 broken: stop the upstream
        if error is not None:
            signal_on_error(downstream, error)
        else:
            signal_on_complete(downstream)

    def _refill(self, upstream: Subscription | None, count: int) -> None:
        """Request what was consumed once it reaches 75% of ``prefetch`` (Rule 2.7)."""
        self._consumed += count
        if self._consumed >= self._limit and upstream is not None:
            replenish, self._consumed = self._consumed, 0
            # A synchronous upstream re-enters on_next here, on this thread; the mark
            # lets those calls append without the lock.
            self._inline_thread = get_ident()
            try:
                upstream.request(replenish)
            finally:
                self._inline_thread = 0
