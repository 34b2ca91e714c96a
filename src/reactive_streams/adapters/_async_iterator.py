"""``to_async_iterator``: consume any publisher with ``async for``, with bounded prefetch.

Two threads of control meet here:

* the **consumer**, a coroutine on the event loop, takes elements out of the adapter;
* the **upstream lane**, which calls the publisher's ``subscribe`` and the subscription's
  ``request`` and ``cancel``. By default the lane runs on an executor, so a synchronous
  publisher (one that emits, and runs user functions, inside ``request``) does its work
  there and never on the loop thread. ``non_blocking=True`` runs the lane on the caller's
  thread instead, for publishers whose ``subscribe`` and ``request`` return at once.

Signals may arrive on any thread: ``on_next`` appends to a lock-guarded deque, and only
when the consumer is waiting does a signal wake it (``call_soon_threadsafe``, or directly
on the loop thread). A synchronous publisher emitting inside the lane's ``request`` call
wakes the consumer once, when the call returns, and not once per element: waking the loop
while the lane thread still produces would make the two threads pass the GIL back and
forth for every element. The deferral is bounded: a consumer that starts waiting while
such a call is due arms a timer for the end of the call's first ``_WAKE_DEFERRAL``
seconds, and only a waiter with that timer lets a wake-up be deferred; after the timer
the consumer waits on a plain waiter, which the next element wakes at once. So a slow
or stalled publisher's elements are never held back longer.

Inside such a call the lane's elements skip the lock (the fast path of ``on_next``):
deque's ``append`` and ``popleft`` are safe from two threads at once, the demand the lane
requested itself bounds them (Rule 1.1), and signals are serial (Rule 1.3), so the count
of received elements has one writer at a time. Nobody is woken on that path, which is
safe because the consumer, while the call runs, either is busy, or waits with the timer
above and looks at the deque by itself. A consumer that waits past the deferral first
turns the fast path off under the lock, so the later elements of the call take the lock
and wake it; an element the lane appended just before it saw that is found by a look
every ``_LATE_LOOK`` seconds while the call lasts.

The consumer takes up to a quarter of ``prefetch`` elements per lock acquisition and
hands them out from that local batch with no suspension and no future per element;
demand goes upstream once three quarters of ``prefetch`` were handed out, so the
executor hop happens once per batch of requests, not once per element.

After a pass the executor lane does not give its thread back at once: it waits up to
``_LANE_LINGER`` seconds for the consumer's next request (``DrainLoop``'s ``linger``), so
a consumer that keeps up hands each batch of demand over with one thread wake-up rather
than a new executor task. The end of the stream or a cancel retires the lane, which then
lets its thread go at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from concurrent.futures import Executor, ThreadPoolExecutor
from itertools import repeat, starmap
from typing import TYPE_CHECKING, Generic, TypeVar

from .._core import (
    DrainLoop,
    ExecutorRejectedError,
    ProtocolViolationError,
    StreamStatistics,
    accept_subscription,
    add_demand,
    check_positive,
    replenish_threshold,
    report_undeliverable,
)
from ..api import Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Iterator
    from types import TracebackType
    from typing import Self

__all__ = ["AsyncIteratorSubscriber", "default_executor", "to_async_iterator"]

T = TypeVar("T")

_get_ident = threading.get_ident

_LANE_WAIT = 10.0
"""Seconds ``async with`` and ``aclose`` wait at most for upstream ``subscribe``/``cancel``."""
_WAKE_DEFERRAL = 0.001
"""Seconds a lane ``request`` call may hold back the consumer's wake-up (see the module)."""
_LATE_LOOK = 0.016
"""Seconds between a waiting consumer's own looks at the buffer while a lane call runs."""
_LANE_LINGER = 0.002
"""Seconds the executor lane waits for the consumer's next request before it lets go."""
_monotonic = time.monotonic
_default_lock = threading.Lock()
_default: ThreadPoolExecutor | None = None


def default_executor() -> Executor:
    """The thread pool that runs upstream work for ``to_async_iterator`` by default.

    One pool for the process, created on first use (``ThreadPoolExecutor``'s default size,
    threads named ``reactive-streams-asyncio``). Each busy stream holds one of its threads
    while a ``subscribe``, ``request`` or ``cancel`` call runs upstream, and then for up
    to 2 ms more, waiting for its consumer's next request.
    """
    global _default  # one lazily created pool per process
    with _default_lock:
        if _default is None:
            _default = ThreadPoolExecutor(thread_name_prefix="reactive-streams-asyncio")
        return _default


class AsyncIteratorSubscriber(Subscriber[T], Generic[T]):
    """A subscriber that is also an async iterator and an async context manager.

    Created by ``to_async_iterator``; see there for the parameters and the guarantees.

    Concurrency: the publisher may signal from any thread. Calls on the upstream
    subscription (and the ``subscribe`` call) go through one serial lane, a ``DrainLoop``
    on the executor (or on the caller's thread with ``non_blocking=True``), so they never
    overlap (Rule 2.7) and, by default, never run on the loop thread. The consumer side
    (``__anext__``, ``async for``, ``aclose``) belongs to the event loop it first ran on.
    """

    # Slots: over thirty attributes would leave CPython 3.11's inline instance values
    # and make every attribute access of the per-element path slower (measured).
    __slots__ = (
        "__weakref__",
        "_buffer",
        "_cancel_upstream",
        "_chunk",
        "_closed",
        "_completed",
        "_consumed",
        "_error",
        "_fast_thread",
        "_flush",
        "_inline_lane",
        "_lane",
        "_lane_call_started",
        "_lane_dead",
        "_lane_granted",
        "_lane_requesting",
        "_lane_thread",
        "_local",
        "_lock",
        "_loop",
        "_loop_thread",
        "_pending",
        "_prefetch",
        "_publisher",
        "_ready",
        "_received",
        "_refilling",
        "_replenish_at",
        "_requested",
        "_taken",
        "_terminated",
        "_to_subscribe",
        "_upstream",
        "_upstream_done",
        "_waiter",
        "_waiter_polled",
    )

    def __init__(
        self,
        publisher: Publisher[T],
        *,
        prefetch: int = 256,
        executor: Executor | None = None,
        non_blocking: bool = False,
    ) -> None:
        check_positive("prefetch", prefetch)
        if publisher is None:
            raise TypeError("to_async_iterator() requires a publisher, got None")
        if non_blocking and executor is not None:
            raise ValueError("to_async_iterator(): give an executor or non_blocking=True, not both")
        if executor is not None and not isinstance(executor, Executor):
            raise TypeError(f"executor must be a concurrent.futures.Executor, got {executor!r}")
        self._publisher: Publisher[T] | None = publisher
        self._prefetch = prefetch
        self._replenish_at = replenish_threshold(prefetch)
        self._chunk = max(1, prefetch - self._replenish_at)
        self._lock = threading.Lock()
        # Shared with the signalling threads, under _lock.
        # A deque: the lane's fast path appends to it without _lock (see on_next), which
        # deque's append and popleft allow from two threads at once.
        self._buffer: deque[T] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._error: Exception | None = None
        self._completed = False
        self._terminated = False  # upstream sent on_complete or on_error
        self._closed = False  # aclose(), a cancel, or the end of the stream was handed out
        self._requested = 0
        # Received so far, written by on_next only: signals are serial (Rule 1.3), so
        # the fast path may write it without _lock. The Rule 1.1 budget is _requested.
        self._received = 0
        # The upstream lane's inbox, under _lock; the lane alone calls upstream.
        self._to_subscribe: Publisher[T] | None = None
        self._upstream: Subscription | None = None
        self._pending = 0
        self._cancel_upstream = False
        self._upstream_done = False  # cancelled or failed: never call upstream again
        # The lane thread's id while it runs a request on the executor (written by the
        # lane only), and, under _lock, whether such a call is under way and since when,
        # and whether the consumer's waiter has a timer: elements of that call then wake
        # the consumer when it returns, or once _WAKE_DEFERRAL has passed (see the module).
        self._lane_thread = 0
        self._inline_lane = non_blocking
        self._lane_requesting = False
        self._lane_call_started = 0.0
        self._waiter_polled = False
        # The thread id of a lane request call whose elements may skip _lock, else 0
        # (see on_next), and the demand requested upstream when that call started (the
        # lane's own). Two kinds of calls: one on an executor's thread (set at the call's
        # start under _lock, cleared there by a consumer that waits without a timer and
        # at the call's end), and one made inside the consumer's own _refill on the loop
        # thread (non_blocking=True), during which the consumer is blocked in the call.
        self._fast_thread = 0
        self._lane_granted = 0
        self._flush: list[asyncio.Future[None]] = []  # resolved by the lane when idle
        self._lane_dead = False  # the stream ended or the executor refused: no pass runs again
        self._lane = DrainLoop(
            self._forward,
            executor=None if non_blocking else (executor or default_executor()),
            on_rejected=self._rejected,
            linger=_LANE_LINGER,
        )
        # The consumer's own state: only the loop thread touches it.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._local: Iterator[T] = iter(())
        self._taken = 0  # size of the batch in _local, counted as consumed at the next refill
        self._ready: list[T] = []  # taken from the buffer, not yet moved to _local
        self._consumed = 0  # handed out since the last request
        self._refilling = False  # _refill is scheduling the lane on the loop thread

    # -- async iterator / context manager (the loop thread) -------------------------------

    def __aiter__(self) -> AsyncGenerator[T, None]:
        """``async for``: the elements, from a local batch; leaving the loop early cancels.

        ``break``, ``return``, an exception in the loop body or the cancellation of the
        consuming task cancels the subscription (once the generator is closed, which asyncio
        does at once for a dropped generator). To read one stream in several steps, call
        ``anext()`` on this object instead.
        """
        return self._elements()

    async def _elements(self) -> AsyncGenerator[T, None]:
        self._ensure_subscribed()
        finished = False
        try:
            while True:
                for element in self._local:
                    yield element
                if not await self._refill():
                    finished = True
                    return
        finally:
            if not finished:
                self._close()

    async def __aenter__(self) -> Self:
        """Subscribe; return once ``publisher.subscribe`` returned (or ``_LANE_WAIT`` passed)."""
        self._ensure_subscribed()
        await self._flushed()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def __anext__(self) -> T:
        """The next element.

        Raises:
            StopAsyncIteration: after ``on_complete``, or once closed.
            Exception: the error of ``on_error``, once, after the elements before it.
        """
        self._ensure_subscribed()
        for element in self._local:
            return element
        if not await self._refill():
            raise StopAsyncIteration
        return next(self._local)

    async def aclose(self) -> None:
        """Cancel the subscription and drop buffered elements; idempotent (Rule 2.6).

        Returns once the upstream ``cancel`` returned, or after ``_LANE_WAIT`` seconds.
        """
        self._close()
        if self._loop is not None:
            await self._flushed()

    def statistics(self) -> StreamStatistics:
        """Requested and received counts, elements buffered now, cancelled, terminated."""
        with self._lock:
            return StreamStatistics(
                requested=self._requested,
                delivered=self._received,
                buffered=len(self._buffer) + len(self._ready),
                cancelled=self._closed,
                terminated=self._completed or self._error is not None,
            )

    def _ensure_subscribed(self) -> None:
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        with self._lock:
            self._to_subscribe, self._publisher = self._publisher, None
        self._lane.schedule()

    async def _refill(self) -> bool:
        """Put the next batch in ``_local``; ``False`` at the end; raise the stream's error.

        Replenishes demand first when three quarters of ``prefetch`` were handed out, and
        waits (one future for the whole batch) only when nothing is buffered.
        """
        ready = self._ready
        if ready and self._consumed + self._taken < self._replenish_at:
            # The next chunk of what was taken earlier, and no demand due: no lock.
            self._consumed += self._taken
            batch = ready[: self._chunk]
            del ready[: self._chunk]
            self._taken = len(batch)
            self._local = iter(batch)
            return True
        while True:
            waiter = None
            error = None
            request = 0
            poll_in = 0.0
            with self._lock:
                consumed = self._consumed + self._taken
                self._taken = 0
                self._local = iter(())
                if consumed >= self._replenish_at and not self._closed:
                    # Whole multiples of the threshold: the rest counts towards the next.
                    request = consumed - consumed % self._replenish_at
                    consumed -= request
                    self._requested = add_demand(self._requested, request)
                    self._pending = add_demand(self._pending, request)
                    self._lane_call_due_locked()
                self._consumed = consumed
                buffer = self._buffer
                chunk = self._chunk
                if self._ready or (buffer and not self._lane_requesting):
                    ready = self._ready
                    if buffer and not self._lane_requesting:
                        # No lane call appends to the buffer now: take all of it at once.
                        self._buffer = deque()
                        ready.extend(buffer)
                    batch = ready[:chunk]
                    del ready[:chunk]
                    self._taken = len(batch)
                    self._local = iter(batch)
                elif buffer:  # a lane call may append: take elements one by one, at the left
                    count = min(len(buffer), chunk)
                    self._local = iter(list(starmap(buffer.popleft, repeat((), count))))
                    self._taken = count
                elif self._closed:
                    return False
                elif self._error is not None:
                    error = self._error
                    self._closed = True
                elif self._completed:
                    self._closed = True
                    return False
                elif not request:
                    waiter = self._waiter
                    if waiter is None or waiter.done():
                        assert self._loop is not None  # set by _ensure_subscribed
                        waiter = self._waiter = self._loop.create_future()
                        poll_in = 0.0
                        if self._lane_requesting:
                            poll_in = self._lane_call_started + _WAKE_DEFERRAL - _monotonic()
                        self._waiter_polled = poll_in > 0
                        if self._lane_requesting and poll_in <= 0:
                            # The call outlived the deferral: its next elements take the
                            # lock and wake this waiter at once; one the lane appended just
                            # before it saw the flag is found by a late look.
                            self._fast_thread = 0
                            poll_in = _LATE_LOOK
            if request:
                self._refilling = True
                try:
                    self._lane.schedule()  # replenish (Rule 2.1) outside the lock
                finally:
                    self._refilling = False
            if self._taken:
                return True
            if error is not None:
                raise error
            if waiter is not None:
                if poll_in > 0:  # the lane may not wake this waiter: look again later
                    assert self._loop is not None
                    poll = self._loop.call_later(poll_in, _resolve, waiter)
                    try:
                        await waiter
                    finally:
                        poll.cancel()
                else:
                    await waiter

    def _close(self) -> None:
        with self._lock:
            already = self._closed and self._cancel_upstream
            self._closed = True
            self._cancel_upstream = True
            self._fast_thread = 0
            self._buffer = deque()
            self._publisher = None
            waiter, self._waiter = self._waiter, None
        self._local = iter(())
        self._ready = []
        if not already:
            self._lane.schedule()
        if waiter is not None:
            self._wake(waiter)

    # -- the upstream lane (the executor, or the caller's thread) -------------------------

    def _forward(self) -> bool:
        """One lane pass: make every pending upstream call, then release the flush waiters."""
        ident = _get_ident()
        # A request made inside the consumer's own _refill, on the loop thread (with
        # non_blocking=True, or an executor that runs tasks where they are submitted).
        inline = self._refilling and ident == self._loop_thread
        while True:
            with self._lock:
                publisher, self._to_subscribe = self._to_subscribe, None
                upstream = self._upstream
                cancel = request = False
                pending = 0
                if upstream is not None and not self._upstream_done and not self._terminated:
                    if self._cancel_upstream:
                        cancel = True
                        self._upstream_done = True
                    elif self._pending and not self._completed and self._error is None:
                        pending, self._pending = self._pending, 0
                        request = True
                        self._lane_call_due_locked()
                        # This call's elements skip _lock if it is made inside the
                        # consumer's _refill, or on an executor's thread unless the
                        # consumer already waits without a timer (it must be woken by
                        # the first of them). A request of non_blocking=True made on
                        # another thread takes the lock: that consumer has no timer.
                        if inline or (
                            not self._inline_lane and (self._waiter is None or self._waiter_polled)
                        ):
                            self._fast_thread = ident
                            self._lane_granted = self._requested
                if publisher is None and not cancel and not request:
                    flushed, self._flush = self._flush, []
                    # After the end or a cancel no upstream call is due ever again: the
                    # lane retires (below), so it neither lingers nor runs another pass.
                    final = self._upstream_done or self._terminated
                    if final:
                        self._lane_dead = True
                    break
            if publisher is not None:
                try:
                    publisher.subscribe(self)
                except Exception as exc:
                    self._upstream_failed("1.9", "subscribe", publisher, exc)
                continue
            assert upstream is not None  # cancel or request
            try:
                if cancel:
                    upstream.cancel()
                elif inline:
                    try:
                        upstream.request(pending)
                    finally:
                        if self._inline_lane:
                            self._fast_thread = 0  # no other thread writes it on this lane
                        else:
                            self._wake_if_buffered()  # ends the call for the consumer
                else:
                    self._lane_thread = ident
                    try:
                        upstream.request(pending)
                    finally:
                        self._lane_thread = 0
                        self._wake_if_buffered()
            except Exception as exc:
                self._upstream_failed(
                    "3.15" if cancel else "3.16", "cancel" if cancel else "request", upstream, exc
                )
        if final:
            self._lane.guard.retire()
        for waiter in flushed:
            self._wake(waiter)
        return False

    def _lane_call_due_locked(self) -> None:
        """Under ``_lock``: an executor lane is about to run a request (see the module).

        Called when demand is handed to the lane, so that a consumer that starts waiting
        before the lane thread woke up already arms its timer, and again when the call
        starts, which moves the window to the call.
        """
        if not self._inline_lane:
            self._lane_requesting = True
            self._lane_call_started = _monotonic()

    def _wake_if_buffered(self) -> None:
        """After a lane ``request`` call: wake a waiting consumer for what it deferred."""
        with self._lock:
            self._lane_requesting = False
            self._fast_thread = 0
            waiter = self._waiter if self._buffer or self._terminated else None
            if waiter is not None:
                self._waiter = None
        if waiter is not None:
            self._wake(waiter)

    async def _flushed(self) -> None:
        """Wait (at most ``_LANE_WAIT`` seconds) until the lane made the calls queued so far.

        ``async with`` uses it so that the publisher has been subscribed when the block
        starts, and ``aclose`` so that upstream has been cancelled when it returns. The
        wait is bounded: an upstream call that never returns cannot hang the consumer.
        """
        assert self._loop is not None
        waiter = self._loop.create_future()
        with self._lock:
            if self._lane_dead:
                return
            self._flush.append(waiter)
        self._lane.schedule()
        await asyncio.wait({waiter}, timeout=_LANE_WAIT)

    def _upstream_failed(self, rule: str, method: str, culprit: object, exc: Exception) -> None:
        """An upstream call raised: cancel upstream, end the stream with that error, once."""
        violation = ProtocolViolationError(
            f"Rule {rule}: {type(culprit).__qualname__}.{method} raised {exc!r}", rule=rule
        )
        violation.__cause__ = exc
        with self._lock:
            upstream = None if self._upstream_done else self._upstream
            self._upstream_done = True
            if self._closed or self._completed or self._error is not None:
                deliver = False
            else:
                self._error = violation
                deliver = True
            waiter, self._waiter = self._waiter, None
        if upstream is not None and method != "cancel":
            try:
                upstream.cancel()
            except Exception as cancel_exc:
                report_undeliverable(cancel_exc)
        if not deliver:
            report_undeliverable(violation)
        if waiter is not None:
            self._wake(waiter)

    def _rejected(self, error: ExecutorRejectedError) -> None:
        with self._lock:
            self._upstream_done = self._lane_dead = True
            upstream = self._upstream
            if self._error is None and not self._completed:
                self._error = error
            waiters, self._flush = self._flush, []
            if self._waiter is not None:
                waiters.append(self._waiter)
                self._waiter = None
        if upstream is not None:  # the executor is gone: cancel here, it must not block
            try:
                upstream.cancel()
            except Exception as exc:
                report_undeliverable(exc)
        for waiter in waiters:
            self._wake(waiter)

    # -- the Subscriber interface (any thread) --------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep the subscription and request ``prefetch`` elements through the lane.

        A second subscription is cancelled (Rule 2.5); the request is made by the lane,
        after ``on_subscribe`` returned (Rules 2.7, 3.10).
        """
        if accept_subscription(subscription, self._claim):
            self._lane.schedule()

    def _claim(self, subscription: Subscription) -> bool:
        with self._lock:
            if self._upstream is not None:
                return False
            self._upstream = subscription
            if not self._closed:
                self._requested = add_demand(self._requested, self._prefetch)
                self._pending = add_demand(self._pending, self._prefetch)
                self._lane_call_due_locked()
            return True

    def on_next(self, element: T) -> None:
        """Buffer ``element`` and wake the consumer if it waits (see the module).

        An element beyond the requested demand ends the stream with a Rule 1.1
        ``ProtocolViolationError`` and cancels upstream.
        """
        if _get_ident() == self._fast_thread and element is not None:
            # The fast path, inside a lane request call (see _fast_thread): the demand
            # the lane requested covers this element (Rule 1.1), and the consumer, which
            # is blocked in the call, busy, or waiting with a timer, finds it by itself.
            received = self._received
            if received < self._lane_granted:
                self._received = received + 1
                self._buffer.append(element)
                return
        if element is None:
            raise TypeError("Rule 2.13: on_next(element) must not be None")
        lock = self._lock
        lock.acquire()
        if self._closed:
            lock.release()
            return  # Rule 2.8: late elements after cancel are dropped
        received = self._received
        if received < self._requested:
            self._received = received + 1
            self._buffer.append(element)
            waiter = self._waiter
            if waiter is None or (self._waiter_polled and self._lane_thread == _get_ident()):
                lock.release()  # nobody waits, or the lane wakes the consumer (see module)
                return
            self._waiter = None
            lock.release()
            self._wake(waiter)
            return
        # The publisher broke Rule 1.1.
        if self._error is None and not self._completed:
            self._error = ProtocolViolationError(
                f"Rule 1.1: publisher sent more than the {self._requested} elements requested",
                rule="1.1",
            )
        self._cancel_upstream = True
        waiter, self._waiter = self._waiter, None
        lock.release()
        self._lane.schedule()
        if waiter is not None:
            self._wake(waiter)

    def on_error(self, error: Exception) -> None:
        """Keep ``error`` for the consumer to raise after the buffered elements."""
        if error is None:
            raise TypeError("Rule 2.13: on_error(error) must not be None")
        with self._lock:
            self._terminated = True
            if self._error is None and not self._completed:
                self._error = error
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            self._wake(waiter)

    def on_complete(self) -> None:
        """Mark the end; the consumer stops after the buffered elements."""
        with self._lock:
            self._terminated = True
            if self._error is None:
                self._completed = True
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            self._wake(waiter)

    def _wake(self, waiter: asyncio.Future[None]) -> None:
        if threading.get_ident() == self._loop_thread:
            _resolve(waiter)  # a synchronous publisher signalling inside the lane's call
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            waiter.get_loop().call_soon_threadsafe(_resolve, waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def to_async_iterator(
    publisher: Publisher[T],
    *,
    prefetch: int = 256,
    executor: Executor | None = None,
    non_blocking: bool = False,
) -> AsyncIteratorSubscriber[T]:
    """Consume ``publisher`` with ``async for``, buffering at most ``prefetch`` elements.

    Upstream work stays off the event loop: ``publisher.subscribe`` and the subscription's
    ``request`` and ``cancel`` run on ``executor`` (by default ``default_executor()``, one
    shared thread pool), one call at a time. A synchronous publisher emits inside
    ``request``, so its work (and that of the operators after it, ``map(f)`` say) happens
    on that thread while the loop keeps running other tasks. Demand is requested in
    batches of three quarters of ``prefetch``, so there is one hop per batch.

    Args:
        publisher: any publisher; it may signal from any thread.
        prefetch: the demand requested up front, and the bound of the buffer, in elements
            (``>= 1``). Demand is replenished each time three quarters were handed out.
        executor: where ``subscribe``, ``request`` and ``cancel`` run; a
            ``concurrent.futures.Executor``. ``None``: the shared ``default_executor()``.
        non_blocking: ``True`` promises that the publisher's ``subscribe`` and
            ``request`` return at once (a publisher that emits from its own thread or
            loop, or one that only emits a few cheap elements): they then run on the
            calling thread, the loop thread included, with no executor hop. A publisher
            that breaks the promise blocks the loop.

    Returns:
        An async iterator that is also an async context manager. Leaving the
        ``async with`` block, calling ``aclose()``, or leaving an ``async for`` over it
        early (``break``, an exception, the consuming task cancelled) cancels the
        subscription.

    Raises:
        ValueError: if ``prefetch < 1``, or both ``executor`` and ``non_blocking`` are given.
        TypeError: if ``publisher`` is ``None`` or ``executor`` is not an ``Executor``.

    From ``__anext__`` and ``async for``: the stream's ``on_error`` exception, after the
    elements that came before it; ``ProtocolViolationError`` for a publisher that sends
    more than was requested (Rule 1.1) or whose ``subscribe``, ``request`` or ``cancel``
    raises (Rules 1.9, 3.16, 3.15), upstream then being cancelled;
    ``ExecutorRejectedError`` if the executor refuses the lane's task.

    Example:
        >>> import asyncio
        >>> from reactive_streams.reference import RangePublisher
        >>> async def main() -> list[int]:
        ...     async with to_async_iterator(RangePublisher(0, 5), prefetch=2) as elements:
        ...         return [element async for element in elements]
        >>> asyncio.run(main())
        [0, 1, 2, 3, 4]
    """
    return AsyncIteratorSubscriber(
        publisher, prefetch=prefetch, executor=executor, non_blocking=non_blocking
    )
