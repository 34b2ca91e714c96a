"""``on_error_resume``, ``retry``, ``retry_backoff``, ``switch_if_empty``: a new source.

The first three switch after an upstream error (``retry_backoff`` after a delay on a
scheduler, from a ``Backoff`` policy), the last after an upstream that completed without
an element.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from .._core import (
    MAX_DEMAND,
    Backoff,
    DrainLoop,
    ProtocolViolationError,
    SingleUpstreamOperator,
    StageStatistics,
    WorkGuard,
    accept_subscription,
    add_demand,
    cancel_quietly,
    check_subscriber,
    default_scheduler,
    report_undeliverable,
    report_violation,
    signal_on_complete,
    signal_on_error,
    signal_on_subscribe,
    validate_request,
)
from ..api import Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._core import ScheduledTask, Scheduler

__all__ = ["ResumeOperator", "RetryOn", "retry_predicate"]

T = TypeVar("T")

RetryOn: TypeAlias = "type[Exception] | tuple[type[Exception], ...] | Callable[[Exception], object]"
"""Which errors are retried: exception classes (as in ``except``), or a predicate."""


def _always(error: Exception) -> bool:
    return True


def retry_predicate(retry_on: RetryOn) -> Callable[[Exception], bool]:
    """``retry_on`` as a predicate: exception classes (as in ``except``), or a function.

    Raises:
        TypeError: neither an exception class, a tuple of them, nor a callable.
    """
    if isinstance(retry_on, type) and issubclass(retry_on, Exception):
        kinds: tuple[type[Exception], ...] = (retry_on,)
    elif isinstance(retry_on, tuple) and all(
        isinstance(kind, type) and issubclass(kind, Exception) for kind in retry_on
    ):
        kinds = retry_on
    elif callable(retry_on) and not isinstance(retry_on, type):
        predicate = retry_on
        return lambda error: bool(predicate(error))
    else:
        raise TypeError(
            "retry_on must be an exception class, a tuple of them, or a function of the "
            f"error, got {retry_on!r}"
        )
    if kinds == (Exception,):
        return _always
    return lambda error: isinstance(error, kinds)


class ResumeOperator(SingleUpstreamOperator[T]):
    """Switch to another publisher when upstream fails.

    ``on_error_resume(fn)``: on ``on_error(e)``, subscribe to ``fn(e)`` and continue.
    ``retry(times)``: on ``on_error(e)``, subscribe to the same upstream again, at most
    ``times`` times; the last error is signalled.
    ``retry_backoff(backoff)`` (``backoff=``): the same, each new subscription after the
    policy's delay on ``scheduler``, within its attempts and deadline; the last error is
    signalled once they are used up.
    ``restart(factory, backoff)`` (``backoff=``, ``on_complete=True`` to restart after a
    completion too): ``retry_backoff`` over a ``defer(factory)`` upstream; once the bound
    is used up, the last signal (error or completion) passes through.
    ``switch_if_empty(p)`` (``if_empty=p``): when upstream completes without an element,
    subscribe to ``p`` and continue (once).

    Marble (``retry(1)``)::

        source (1st):  -1-2-X
        source (2nd):       -1-2-3-|
        result:        -1-2--1-2-3-|

    Backpressure:
        Outstanding demand (requested and not delivered) is carried over: the new
        subscription is requested exactly that amount.

    Concurrency:
        The switch happens on the thread that delivered ``on_error``. Downstream
        ``request``/``cancel`` go to whichever subscription is current. Every downstream
        signal goes through one ``DrainLoop``: elements queue (within demand) and the
        terminal signal follows them, so a Rule 3.9 error found by a ``request`` on
        another thread never overlaps an ``on_next`` (Rule 1.3) nor precedes one
        (Rule 1.7).
    """

    __slots__ = (
        "_backoff",
        "_fallback",
        "_if_empty",
        "_label",
        "_on_complete",
        "_retry_on",
        "_scheduler",
        "_times",
    )

    def __init__(
        self,
        upstream: Publisher[T],
        *,
        fallback: Callable[[Exception], Publisher[T]] | None = None,
        times: int = 0,
        if_empty: Publisher[T] | None = None,
        backoff: Backoff | None = None,
        scheduler: Scheduler | None = None,
        on_complete: bool = False,
        retry_on: RetryOn = Exception,
        label: str,
    ) -> None:
        super().__init__(upstream)
        if backoff is not None and not isinstance(backoff, Backoff):
            raise TypeError(f"backoff must be a Backoff, got {type(backoff).__qualname__}")
        self._fallback = fallback
        self._times = times
        self._if_empty = if_empty
        self._backoff = backoff
        self._scheduler = scheduler
        self._on_complete = on_complete
        self._retry_on = retry_predicate(retry_on)
        self._label = label

    @property
    def name(self) -> str:
        return self._label

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Subscribe ``subscriber`` through a new stage (Rule 1.9)."""
        check_subscriber(subscriber)
        stage = _Resume(subscriber, self._upstream, self._fallback, self._times, self._if_empty)
        if self._backoff is not None:
            stage.use_backoff(
                self._backoff,
                self._scheduler or default_scheduler(),
                self._on_complete,
                self._retry_on,
            )
        self._track(stage)
        if not signal_on_subscribe(subscriber, stage):
            stage.cancel()
            return
        stage.start(self._upstream)


class _Attempt(Subscriber[Any]):
    """One subscription attempt; a fresh object each time (Rule 2.12)."""

    __slots__ = ("owner",)

    def __init__(self, owner: _Resume) -> None:
        self.owner = owner

    def on_subscribe(self, subscription: Subscription) -> None:
        if accept_subscription(subscription, lambda kept: self.owner.attempt_claimed(self, kept)):
            self.owner.attempt_subscribed(subscription)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        self.owner.attempt_next(self, element)

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        self.owner.attempt_error(self, error)

    def on_complete(self) -> None:
        self.owner.attempt_complete(self)


class _Resume(Subscription):
    __slots__ = (
        "__weakref__",
        "_attempt",
        "_attempts",
        "_backoff",
        "_current",
        "_delivered",
        "_done",
        "_downstream",
        "_fallback",
        "_guard",
        "_if_empty",
        "_lock",
        "_loop",
        "_on_complete",
        "_outstanding",
        "_pending",
        "_queue",
        "_requested",
        "_retry_on",
        "_scheduler",
        "_seen",
        "_series_start",
        "_terminal",
        "_times",
        "_upstream",
    )

    def __init__(
        self,
        downstream: Subscriber[Any],
        upstream: Publisher[Any],
        fallback: Callable[[Exception], Publisher[Any]] | None,
        times: int,
        if_empty: Publisher[Any] | None = None,
    ) -> None:
        self._downstream: Subscriber[Any] | None = downstream
        self._upstream = upstream
        self._fallback = fallback
        self._times = times
        self._if_empty = if_empty
        self._seen = False  # an element arrived (switch_if_empty switches only without)
        self._attempts = 0
        self._lock = threading.Lock()
        self._attempt: _Attempt | None = None
        self._current: Subscription | None = None
        self._outstanding = 0
        self._requested = 0
        self._delivered = 0
        self._done = False
        self._queue: deque[Any] = deque()  # elements for the drain, within demand
        self._terminal: tuple[Exception | None] | None = None  # (error or None,) once ended
        self._guard = WorkGuard(self._lock)
        self._loop = DrainLoop(self._drain, guard=self._guard, on_failure=self._drain_failed)
        self._backoff: Backoff | None = None
        self._scheduler: Scheduler | None = None
        self._series_start: float | None = None  # the series of failures began (backoff)
        self._pending: ScheduledTask | None = None  # the next subscription, due later
        self._on_complete = False  # a completion is retried too (restart)
        self._retry_on: Callable[[Exception], bool] = _always

    def use_backoff(
        self,
        backoff: Backoff,
        scheduler: Scheduler,
        on_complete: bool,
        retry_on: Callable[[Exception], bool],
    ) -> None:
        """Retry after ``backoff``'s delays on ``scheduler``; before ``start`` only.

        With ``on_complete`` a completion is retried like a failure; only errors for
        which ``retry_on`` is true are retried.
        """
        self._backoff = backoff
        self._scheduler = scheduler
        self._on_complete = on_complete
        self._retry_on = retry_on

    def statistics(self) -> StageStatistics:
        return StageStatistics(
            requested=self._requested,
            delivered=self._delivered,
            buffered=0,
            cancelled=self._done,
            terminated=self._done and self._downstream is None,
        )

    def start(self, publisher: Publisher[Any]) -> None:
        attempt = _Attempt(self)
        with self._lock:
            if self._done:
                return
            self._attempt = attempt
            self._current = None
        try:
            publisher.subscribe(attempt)
        except Exception as exc:  # a broken publisher: Rule 1.9 says it must not raise
            self._finish(exc)

    def attempt_claimed(self, attempt: _Attempt, subscription: Subscription) -> bool:
        """Keep ``attempt``'s subscription unless it is stale or a second one (Rule 2.5)."""
        with self._lock:
            if self._done or attempt is not self._attempt or self._current is not None:
                return False
            self._current = subscription
            return True

    def attempt_subscribed(self, subscription: Subscription) -> None:
        with self._lock:
            outstanding = self._outstanding
        if outstanding:
            try:
                subscription.request(outstanding)
            except Exception as exc:  # the upstream broke Rule 3.16
                cancel_quietly(subscription)
                self._finish(exc)

    def attempt_next(self, attempt: _Attempt, element: Any) -> None:
        with self._lock:
            if attempt is not self._attempt or self._done:
                return
            if self._outstanding != MAX_DEMAND:
                self._outstanding -= 1
            self._seen = True
            backoff = self._backoff
            if self._series_start is not None and backoff and backoff.reset_on_success:
                self._series_start = None  # a success ends the series of failures
                self._attempts = 0
            self._queue.append(element)
            start = self._guard.acquire_locked()
        if start:
            self._loop.start_owned()

    def _drain(self) -> None:
        """The single owner's pass: queued elements in order, then the terminal signal."""
        while True:
            with self._lock:
                downstream = self._downstream
                if downstream is None:  # cancelled (Rule 3.13)
                    self._queue.clear()
                    return
                batch = list(self._queue)
                self._queue.clear()
                terminal = self._terminal
                if not batch and terminal is None:
                    return
                if not batch:  # the terminal signal, after every element (Rule 1.7)
                    self._downstream = None
                    self._guard.retire_locked()
            if not batch:
                assert terminal is not None
                error = terminal[0]
                if error is None:
                    signal_on_complete(downstream)
                else:
                    signal_on_error(downstream, error)
                return
            for element in batch:
                try:
                    downstream.on_next(element)
                except Exception as exc:  # Rule 2.13
                    report_violation(downstream, "on_next", exc)
                    self.cancel()
                    return
                with self._lock:
                    self._delivered += 1

    def _drain_failed(self, error: Exception) -> None:
        with self._lock:
            current, self._current = self._current, None
            downstream, self._downstream = self._downstream, None
            self._done = True
        if current is not None:
            cancel_quietly(current)
        if downstream is None:
            report_undeliverable(error)
        else:
            signal_on_error(downstream, error)

    def attempt_error(self, attempt: _Attempt, error: Exception) -> None:
        if attempt is not self._attempt or self._done:
            return
        if self._fallback is not None and self._attempts == 0:
            self._attempts += 1
            try:
                publisher = self._fallback(error)
                if not isinstance(publisher, Publisher):
                    raise TypeError(
                        "the function given to on_error_resume() must return a Publisher, "
                        f"got {type(publisher).__qualname__}"
                    )
            except Exception as exc:
                exc.__context__ = error
                self._finish(exc)
                return
            self.start(publisher)
            return
        if self._backoff is not None:
            if self._retryable(error):
                self._retry_later(error, self._backoff)
            else:
                self._finish(error)
            return
        if self._fallback is None and self._attempts < self._times:
            self._attempts += 1
            self.start(self._upstream)
            return
        self._finish(error)

    def _retryable(self, error: Exception) -> bool:
        try:
            return bool(self._retry_on(error))
        except Exception as exc:  # the predicate broke: end with its error, after the cause
            exc.__context__ = error
            self._finish(exc)
            return False

    def _retry_later(self, error: Exception | None, backoff: Backoff) -> None:
        """Subscribe upstream again after the policy's delay, or end with ``error``.

        ``error`` is ``None`` for a completion (``restart(..., on_complete=True)``).
        """
        scheduler = self._scheduler
        assert scheduler is not None
        now = scheduler.now()
        with self._lock:
            if self._done:
                return
            if self._series_start is None:
                self._series_start = now
            attempt = self._attempts
            delay = backoff.delay(attempt)
            allowed = backoff.allows(attempt, now - self._series_start, delay)
            if allowed:
                self._attempts = attempt + 1
                self._current = None  # the failed subscription is over (Rule 1.6)
        if not allowed:
            self._finish(error)
            return
        self._keep_pending(scheduler.schedule(delay, self._resubscribe))

    def _keep_pending(self, task: ScheduledTask) -> None:
        """Remember the retry's timer, so that a cancel stops it; cancel it if too late."""
        with self._lock:
            cancelled = self._done  # cancelled meanwhile: never subscribe
            if not cancelled:
                self._pending = task
        if cancelled:
            task.cancel()

    def _resubscribe(self) -> None:
        with self._lock:
            self._pending = None
        self.start(self._upstream)

    def attempt_complete(self, attempt: _Attempt) -> None:
        if attempt is not self._attempt:
            return
        if self._on_complete and self._backoff is not None:
            self._retry_later(None, self._backoff)
            return
        with self._lock:
            alternative, self._if_empty = self._if_empty, None  # switch once at most
            switch = alternative is not None and not self._seen and not self._done
        if switch:
            assert alternative is not None
            self.start(alternative)
            return
        self._finish(None)

    def _finish(self, error: Exception | None) -> None:
        """End the stream: the drain signals ``error`` (or completion) after the queue."""
        with self._lock:
            if self._done:
                return
            self._done = True
            self._current = None  # a failed or completed subscription is over (Rule 1.6)
            self._terminal = (error,)
            pending, self._pending = self._pending, None
            start = self._guard.acquire_locked()
        if pending is not None:
            pending.cancel()
        if start:
            self._loop.start_owned()

    def request(self, n: int) -> None:
        try:
            count = validate_request(n)
        except ProtocolViolationError as error:
            with self._lock:
                current = self._current
            if current is not None:
                cancel_quietly(current)
            self._finish(error)  # Rule 3.9, signalled by the drain (Rule 1.3)
            return
        with self._lock:
            if self._done:
                return
            self._outstanding = add_demand(self._outstanding, count)
            self._requested = add_demand(self._requested, count)
            current = self._current
        if current is not None:
            try:
                current.request(count)
            except Exception as exc:  # the upstream broke Rule 3.16
                cancel_quietly(current)
                self._finish(exc)

    def cancel(self) -> None:
        with self._lock:
            if self._done and self._downstream is None:
                return
            self._done = True
            current, self._current = self._current, None
            self._downstream = None  # Rule 3.13; a running drain stops at its next look
            self._queue.clear()
            pending, self._pending = self._pending, None
        if pending is not None:  # a retry waiting for its delay never subscribes
            pending.cancel()
        if current is not None:
            cancel_quietly(current)
