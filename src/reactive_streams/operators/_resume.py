"""``on_error_resume``, ``retry``, ``switch_if_empty``: continue with a new source.

The first two switch after an upstream error, the last after an upstream that completed
without an element.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any, TypeVar

from .._core import (
    MAX_DEMAND,
    DrainLoop,
    ProtocolViolationError,
    SingleUpstreamOperator,
    StageStatistics,
    WorkGuard,
    add_demand,
    cancel_quietly,
    check_subscriber,
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

__all__ = ["ResumeOperator"]

T = TypeVar("T")


class ResumeOperator(SingleUpstreamOperator[T]):
    """Switch to another publisher when upstream fails.

    ``on_error_resume(fn)``: on ``on_error(e)``, subscribe to ``fn(e)`` and continue.
    ``retry(times)``: on ``on_error(e)``, subscribe to the same upstream again, at most
    ``times`` times; the last error is signalled.
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

    __slots__ = ("_fallback", "_if_empty", "_label", "_times")

    def __init__(
        self,
        upstream: Publisher[T],
        *,
        fallback: Callable[[Exception], Publisher[T]] | None = None,
        times: int = 0,
        if_empty: Publisher[T] | None = None,
        label: str,
    ) -> None:
        super().__init__(upstream)
        self._fallback = fallback
        self._times = times
        self._if_empty = if_empty
        self._label = label

    @property
    def name(self) -> str:
        return self._label

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Subscribe ``subscriber`` through a new stage (Rule 1.9)."""
        check_subscriber(subscriber)
        stage = _Resume(subscriber, self._upstream, self._fallback, self._times, self._if_empty)
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
        if subscription is None:
            raise TypeError("Rule 2.13: on_subscribe(None)")
        self.owner.attempt_subscribed(self, subscription)

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
        "_current",
        "_delivered",
        "_done",
        "_downstream",
        "_fallback",
        "_guard",
        "_if_empty",
        "_lock",
        "_loop",
        "_outstanding",
        "_queue",
        "_requested",
        "_seen",
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

    def attempt_subscribed(self, attempt: _Attempt, subscription: Subscription) -> None:
        with self._lock:
            if self._done or attempt is not self._attempt or self._current is not None:
                stale = True
            else:
                stale = False
                self._current = subscription
                outstanding = self._outstanding
        if stale:
            subscription.cancel()
            return
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
        if self._fallback is None and self._attempts < self._times:
            self._attempts += 1
            self.start(self._upstream)
            return
        self._finish(error)

    def attempt_complete(self, attempt: _Attempt) -> None:
        if attempt is not self._attempt:
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
            start = self._guard.acquire_locked()
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
        if current is not None:
            cancel_quietly(current)
