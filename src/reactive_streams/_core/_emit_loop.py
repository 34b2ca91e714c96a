"""The emit loop shared by the single-emitter sources (ranges, interval, Spark, asyncio).

One ``EmitLoopSubscription`` links one subscriber to one source. All of its signals come
from a single emit loop run under an ``EmitterElection``:

* ``request``/``cancel`` only update the election; the caller that finds it idle runs the
  loop (synchronous publishers) or submits it to an executor (asynchronous ones). Anyone
  arriving while the loop runs, including a re-entrant ``request`` from inside ``on_next``,
  just leaves a mark and returns, so recursion depth is 1 (Rule 3.3) and signals never
  overlap (Rule 1.3).
* The loop's first pass signals ``on_subscribe`` (Rule 1.9), then emits at most the
  outstanding demand (Rule 1.1), and ends the stream as soon as the source is exhausted or
  failed, with or without demand (Rules 1.4, 1.5, 2.9, 2.10).
* After a terminal signal or a cancel the election is retired: the loop never runs again,
  so later ``request``/``cancel`` calls are no-ops (Rules 1.7, 3.6, 3.7), and the reference
  to the subscriber is dropped (Rule 3.13).

Subclasses supply the source: ``_open`` (prepare, on the loop), ``_emit`` (deliver up to
``count`` elements: with ``on_next`` each, or, when the subscriber declares the kit's
``RunSubscriber`` capability, as one run through ``_deliver_run``), ``_exhausted``,
``_failure`` and ``_close``. A source that is not
always ready (a timer, a streaming query, an async iterator) emits what it has and calls
``wake`` when it has more.

Where the loop runs is a parameter, not a copy: on the thread that calls ``request``
(no executor), on an executor (a pool, one dedicated thread per subscription, an event
loop's ``call_soon_threadsafe``), and with ``subscribe_on_caller`` the ``on_subscribe``
signal comes from the thread that calls ``start`` (``subscribe``'s), before it returns,
while the first pass waits for demand.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, Generic, TypeVar

from ..api import Subscriber, Subscription
from ._capabilities import run_receiver
from ._demand import DrainLoop, EmitterElection
from ._signals import report_violation, signal_on_complete, signal_on_error, signal_on_subscribe
from ._statistics import StreamStatistics

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from concurrent.futures import Executor


__all__ = ["EmitLoopSubscription"]

T = TypeVar("T")


class EmitLoopSubscription(Subscription, Generic[T]):
    """A subscription whose signals all come from one elected emit loop.

    Args:
        subscriber: the subscriber to serve; the subscription drops it once the stream is
            over (Rule 3.13).
        executor: run the loop as executor tasks (at most one at a time per subscription);
            ``None`` runs it on the thread that calls ``request`` (Rule 3.10).
        batch_size: at most this many elements per pass; with an executor, a task that
            reaches it resubmits itself instead of hogging a worker.
        subscribe_on_caller: ``start`` signals ``on_subscribe`` on its caller's thread
            (under the election, so a ``request`` from inside it only leaves a mark, Rule
            1.3), and runs a pass only if that call requested or cancelled. For a source
            whose loop runs elsewhere (a dedicated thread) that must not start before the
            first ``request``. ``_open`` still runs on the loop, at its first pass.
    """

    __slots__ = (
        "_batch_size",
        "_election",
        "_loop",
        "_on_next_run",
        "_opened",
        "_subscribe_on_caller",
        "_subscribed",
        "_subscriber",
    )

    def __init__(
        self,
        subscriber: Subscriber[T],
        *,
        executor: Executor | None = None,
        batch_size: int,
        subscribe_on_caller: bool = False,
    ) -> None:
        self._subscriber: Subscriber[T] | None = subscriber
        # the subscriber's on_next_run, if it declares the capability (see _deliver_run)
        self._on_next_run: Callable[[Iterator[T]], None] | None = run_receiver(subscriber)
        self._election = EmitterElection()
        self._batch_size = batch_size
        self._subscribe_on_caller = subscribe_on_caller
        self._subscribed = False  # on_subscribe was signalled
        self._opened = False  # _open ran (or the stream ended before it could)
        self._loop = DrainLoop(
            self._drain_pass,
            executor=executor,
            on_rejected=self._on_rejected,
            guard=self._election,
            on_failure=self._on_rejected,  # a pass raised: the same end, with that error
        )

    # -- the Subscription interface -------------------------------------------------------

    def request(self, n: int) -> None:
        """Add ``n`` to the demand (Rule 3.8); a bad ``n`` becomes ``on_error`` (Rule 3.9).

        Never raises (Rule 3.16). On a synchronous publisher the elements are emitted on
        this thread before it returns, unless an emit loop is already running (for
        example, this call comes from inside ``on_next``), which then emits them.
        """
        if self._election.request(n):
            self._loop.start_owned()

    def cancel(self) -> None:
        """Stop the stream and drop the subscriber (Rules 3.5, 3.7, 3.12, 3.13).

        Idempotent, thread-safe and quick: if the emit loop is running it stops at its next
        element; otherwise a last pass releases the source here (or on the executor).
        """
        if self._election.cancel():
            self._loop.start_owned()

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Run the first pass: ``on_subscribe``, then anything already due (Rule 1.9).

        With ``subscribe_on_caller``, ``on_subscribe`` runs here, and the loop starts only
        if it requested or cancelled (otherwise the first ``request`` starts it).
        """
        election = self._election
        if not election.acquire():
            return
        if self._subscribe_on_caller:
            self._signal_subscribe()
            if not election.release():  # nothing requested, nothing cancelled: idle
                return
        self._loop.start_owned()

    def wake(self) -> None:
        """The source has new elements, or ended: run a pass, or make the running one repeat.

        For a source that is not always ready (a timer, a callback): ``_emit`` may deliver
        fewer elements than asked, and the loop then gives its ownership up; whoever makes
        more available calls ``wake``. Never blocks; safe from any thread.
        """
        if self._election.acquire():
            self._loop.start_owned()

    def wake_here(self) -> None:
        """``wake`` for a caller already where the loop runs: the pass runs here, now.

        For a source whose helper runs on the loop's own executor (a task on the event
        loop that is the executor): no hop through the executor. Never from elsewhere.
        """
        if self._election.acquire():
            self._loop.start_here()

    def emit_here(self, element: T) -> int | None:
        """Deliver one element a helper fetched for the loop's demand, without a whole pass.

        For a source whose helper runs where the loop runs (a task on the event loop that
        is the executor) and fetches one element at a time, each asked for by ``_emit``
        (so a unit of demand is outstanding for it): the common case is one ``on_next``
        under the election and two lock round trips. Whenever anything else is due (a
        cancel, Rule 3.12; a parked Rule 3.9 error; a ``request`` or ``cancel`` that
        arrived meanwhile; an election owned elsewhere) the element goes to ``_hold``
        instead and the whole pass runs (here, or later by the election's owner).

        Returns:
            The demand left after ``element`` went out (the helper may fetch the next
            while it is above 0), or ``None`` when the whole pass took over: the source's
            own state (what its ``_emit`` recorded) then says whether to go on.
        """
        election = self._election
        if not election.acquire():
            self._hold(element)  # the owner's pass (queued on the loop) delivers it
            return None
        subscriber = self._subscriber
        # The election's flags read directly (the kit's own class): this is per element.
        if subscriber is None or election._cancelled or election._error is not None:
            self._hold(element)
            self._loop.start_here()
            return None
        try:
            subscriber.on_next(element)
        except Exception as exc:
            self._deliver_failed(subscriber, exc)  # Rule 2.13: cancelled; the pass ends it
            self._loop.start_here()
            return None
        left = election.produced_and_release(1)
        if left is None:  # a request or cancel (maybe from inside on_next) arrived
            self._loop.start_here()
        return left

    def abandon(self, error: Exception) -> None:
        """The loop's executor is gone for good (its event loop closed): end the stream here.

        Nothing can run on that executor any more, so no pass can overlap this call (Rule
        1.3): it takes the election over, and unless the stream was cancelled or had
        ended, the subscriber gets ``on_subscribe`` (if it never did) and then
        ``on_error(error)``. The source is closed either way. Call it only once the
        executor can never run a pass again; safe from any thread.
        """
        if self._election.seize():
            self._end_with(error)
        elif self._subscriber is not None:  # cancelled, and its last pass never ran
            self._finish()

    def statistics(self) -> StreamStatistics:
        """A snapshot of this subscription's counters."""
        election = self._election
        return StreamStatistics(
            requested=election.requested,
            delivered=election.delivered,
            buffered=self._buffered(),
            cancelled=election.cancelled,
            terminated=election.terminated,
        )

    # -- the emit loop (runs only under the election) -------------------------------------

    def _drain_pass(self) -> bool:
        """One pass; ``True`` when it stopped at ``batch_size`` with demand left."""
        election = self._election
        subscriber = self._subscriber
        if subscriber is None:  # cancelled, or already terminated
            election.retire()
            return False
        if not self._subscribed:
            self._signal_subscribe()
        if not self._opened:
            self._opened = True
            if not election.cancelled:
                self._open()
        if election.cancelled:  # Rule 3.12: stop, release the source, drop the subscriber
            self._finish()
            return False
        error = (election.take_error() if election.error_parked else None) or self._failure()
        if error is not None:  # Rules 3.9 and 1.4: a terminal error needs no demand
            self._finish()
            election.terminate()
            signal_on_error(subscriber, error)
            return False
        demand = election.demand
        emitted = 0
        if demand and not self._exhausted():
            emitted = self._emit(subscriber, min(demand, self._batch_size))
            demand = election.produced(emitted)
        if self._cancelled_meanwhile():  # on_next may have cancelled (Rules 2.13, 3.12)
            self._finish()
            return False
        if self._exhausted():  # Rules 1.4 and 1.5: end at once, with or without demand
            failure = self._failure()
            self._finish()
            election.terminate()
            if failure is None:
                signal_on_complete(subscriber)
            else:
                signal_on_error(subscriber, failure)
            return False
        # Demand left after a full batch: yield and come back. A short batch means the
        # source has nothing ready now: give the loop up until ``wake``.
        return bool(demand) and emitted >= self._batch_size

    def _signal_subscribe(self) -> None:
        """Owner only: Rule 1.9, ``on_subscribe`` first; a raise counts as cancel (2.13)."""
        self._subscribed = True
        subscriber = self._subscriber
        if subscriber is not None and not signal_on_subscribe(subscriber, self):
            self._election.cancel()

    def _cancelled_meanwhile(self) -> bool:
        return self._election.cancelled

    def _finish(self) -> None:
        self._subscriber = None  # Rule 3.13
        self._on_next_run = None
        self._election.retire()
        self._close()

    def _on_rejected(self, error: Exception) -> None:
        # The executor refused the loop's task, or a pass raised (the source broke, or a
        # KeyboardInterrupt on the executor): we still own the election, so we may signal.
        self._end_with(error)

    def _end_with(self, error: Exception) -> None:
        """Owner only: close the source and signal ``on_error(error)`` (after ``on_subscribe``)."""
        subscriber = self._subscriber
        if subscriber is None:
            return
        if not self._subscribed:
            self._subscribed = True
            if not signal_on_subscribe(subscriber, self):
                self._finish()
                return
        self._finish()
        self._election.terminate()
        signal_on_error(subscriber, error)

    def _deliver_each(self, subscriber: Subscriber[T], elements: Iterable[T]) -> int:
        """For ``_emit``: ``on_next`` each of ``elements``; return how many calls returned.

        Stops when ``on_next`` raises (Rule 2.13: ``_deliver_failed``, the subscription is
        now cancelled) or the subscriber cancelled (Rule 3.12). The cancel is checked after
        each element, so nothing more is taken from ``elements`` after it: a lazy source
        (a Spark iterator, a queue) reads no element it will not deliver. An exception
        from ``elements`` itself propagates.
        """
        sent = 0
        election = self._election
        for element in elements:
            try:
                subscriber.on_next(element)
            except Exception as exc:
                self._deliver_failed(subscriber, exc)
                return sent
            sent += 1
            if election.cancelled:
                break
        return sent

    def _deliver_run(self, subscriber: Subscriber[T], elements: Iterator[T]) -> None:
        """For ``_emit``: hand ``elements`` to the subscriber's ``on_next_run`` in one call.

        Only when ``self._on_next_run`` is set: the subscriber declares the kit's
        ``RunSubscriber`` capability. ``elements`` must yield only elements the
        subscription may deliver now (within demand, Rule 1.1; none after a cancel, Rule
        3.12), and count each as delivered when it yields it: the subscriber takes them
        one by one and may stop early, leaving the rest unread. A run that raises (it must
        not) is treated as ``on_next`` raising: reported, and the subscription cancelled
        (Rule 2.13).
        """
        run = self._on_next_run
        assert run is not None
        try:
            run(elements)
        except Exception as exc:
            self._deliver_failed(subscriber, exc)

    def _deliver_failed(self, subscriber: Subscriber[T], error: Exception) -> None:
        """``on_next`` raised: Rule 2.13 says the subscription is now cancelled."""
        report_violation(subscriber, "on_next", error)
        self._election.cancel()

    # -- the source, supplied by subclasses -----------------------------------------------

    @abstractmethod
    def _open(self) -> None:
        """Prepare the source, on the loop, after ``on_subscribe`` returned."""

    @abstractmethod
    def _emit(self, subscriber: Subscriber[T], count: int) -> int:
        """Deliver up to ``count`` elements with ``on_next``; return how many were delivered.

        Stop early if the source is exhausted or fails, if ``self._election.cancelled``
        becomes true, or if nothing more is ready (then call ``wake`` once it is); call
        ``_deliver_failed`` if ``on_next`` raises.
        """

    @abstractmethod
    def _exhausted(self) -> bool:
        """Whether the source has no more elements (or failed)."""

    @abstractmethod
    def _failure(self) -> Exception | None:
        """The error that ended the source, if it failed."""

    def _close(self) -> None:
        """Release the source's resources; called once, on the loop."""

    def _hold(self, element: T) -> None:
        """Keep ``element`` for the next pass's ``_emit`` (for sources using ``emit_here``)."""
        raise NotImplementedError(f"{type(self).__name__} does not use emit_here")

    def _buffered(self) -> int:
        """Elements held by the subscription right now (a read-ahead element, say)."""
        return 0
