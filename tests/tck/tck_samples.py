"""Small correct implementations the TCK's own tests run against.

``BatchSubscriber`` is a synchronous subscriber that requests in batches;
``PassThroughProcessor`` is a single-subscriber identity processor built on the package's
demand core. Both must pass every required test of their verification.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from reactive_streams import (
    DrainLoop,
    EmitterElection,
    Processor,
    ProtocolViolationError,
    Publisher,
    Subscriber,
    Subscription,
    add_demand,
    signal_on_complete,
    signal_on_error,
    signal_on_next,
    signal_on_subscribe,
)
from reactive_streams.tck._support import is_none


class BatchSubscriber(Subscriber[Any]):
    """Requests ``batch`` elements at a time and keeps them in ``received``."""

    def __init__(self, batch: int = 4) -> None:
        self.batch = batch
        self.subscription: Subscription | None = None
        self.received: list[Any] = []
        self.outstanding = 0
        self.done = False

    def on_subscribe(self, subscription: Subscription) -> None:
        if is_none(subscription):
            raise TypeError("Rule 2.13: on_subscribe(None)")
        if self.subscription is not None:
            subscription.cancel()  # Rule 2.5
            return
        self.subscription = subscription
        self.outstanding = self.batch
        subscription.request(self.batch)

    def on_next(self, element: Any) -> None:
        if is_none(element):
            raise TypeError("Rule 2.13: on_next(None)")
        if self.done or self.subscription is None:
            return
        self.received.append(element)
        self.outstanding -= 1
        if self.outstanding == 0:
            self.outstanding = self.batch
            self.subscription.request(self.batch)

    def on_error(self, error: Exception) -> None:
        if is_none(error):
            raise TypeError("Rule 2.13: on_error(None)")
        self.done = True

    def on_complete(self) -> None:
        self.done = True


class _NoopSubscription(Subscription):
    def request(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        pass


class _Downstream(Subscription):
    def __init__(self, processor: PassThroughProcessor) -> None:
        self._processor = processor

    def request(self, n: int) -> None:
        self._processor._request(n)

    def cancel(self) -> None:
        self._processor._cancel()


class PassThroughProcessor(Processor[Any, Any]):
    """An identity processor for one subscriber: downstream demand goes straight upstream."""

    errors_need_demand = False  # a broken subclass sets it (Rule 4.2)

    def __init__(self, buffer_size: int) -> None:
        self._lock = threading.Lock()
        self._upstream: Subscription | None = None
        self._upstream_cancelled = False
        self._pending_upstream = 0
        self._downstream: Subscriber[Any] | None = None
        self._queue: deque[Any] = deque()
        self._terminal: list[Exception | None] = []
        self._election = EmitterElection()
        self._loop = DrainLoop(self._drain, guard=self._election)

    # -- subscriber side --------------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        if is_none(subscription):
            raise TypeError("Rule 2.13: on_subscribe(None)")
        with self._lock:
            duplicate = self._upstream is not None
            if not duplicate:
                self._upstream = subscription
                pending, self._pending_upstream = self._pending_upstream, 0
                cancelled = self._upstream_cancelled
        if duplicate:
            subscription.cancel()  # Rule 2.5
            return
        if cancelled:
            subscription.cancel()
        elif pending:
            subscription.request(pending)

    def on_next(self, element: Any) -> None:
        if is_none(element):
            raise TypeError("Rule 2.13: on_next(None)")
        with self._lock:
            self._queue.append(element)
        self._loop.schedule()

    def on_error(self, error: Exception) -> None:
        if is_none(error):
            raise TypeError("Rule 2.13: on_error(None)")
        with self._lock:
            if not self._terminal:
                self._terminal.append(error)
        self._loop.schedule()

    def on_complete(self) -> None:
        with self._lock:
            if not self._terminal:
                self._terminal.append(None)
        self._loop.schedule()

    # -- publisher side --------------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        if is_none(subscriber):
            raise TypeError("Rule 1.9: subscribe(None)")
        with self._lock:
            taken = self._downstream is not None or self._election.cancelled
            if not taken:
                self._downstream = subscriber
        if taken:
            signal_on_subscribe(subscriber, _NoopSubscription())
            signal_on_error(
                subscriber,
                ProtocolViolationError(
                    "Rule 1.9: this processor supports a single subscriber", rule="1.9"
                ),
            )
            return
        if not signal_on_subscribe(subscriber, _Downstream(self)):
            self._cancel()
            return
        self._loop.schedule()

    def _request(self, n: int) -> None:
        elected = self._election.request(n)
        if type(n) is int and n > 0 and not self._election.cancelled:
            with self._lock:
                upstream = self._upstream
                if upstream is None:
                    self._pending_upstream = add_demand(self._pending_upstream, n)
            if upstream is not None:
                upstream.request(n)
        if elected:
            self._loop.start_owned()

    def _cancel(self) -> None:
        if self._election.cancel():
            self._loop.start_owned()

    def _cancel_upstream(self) -> None:
        with self._lock:
            self._upstream_cancelled = True
            upstream = self._upstream
        if upstream is not None:
            upstream.cancel()

    def _drain(self) -> bool:
        election = self._election
        subscriber = self._downstream
        if subscriber is None or election.terminated:
            return False
        if election.cancelled:
            self._downstream = None  # Rule 3.13
            self._cancel_upstream()
            return False
        error = election.take_error()
        if error is not None:
            election.terminate()
            self._downstream = None
            self._cancel_upstream()
            signal_on_error(subscriber, error)
            return False
        sent = 0
        demand = election.demand
        while sent < demand:
            with self._lock:
                if not self._queue:
                    break
                element = self._queue.popleft()
            sent += 1
            if not signal_on_next(subscriber, element):
                election.produced(sent)
                election.cancel()
                self._downstream = None
                self._cancel_upstream()
                return False
        election.produced(sent)
        with self._lock:
            finished = not self._queue and bool(self._terminal)
            terminal = self._terminal[0] if finished else None
        if terminal is not None and self.errors_need_demand and election.demand == 0:
            return False
        if finished:
            election.terminate()
            self._downstream = None
            if terminal is None:
                signal_on_complete(subscriber)
            else:
                signal_on_error(subscriber, terminal)
        return False


class FailedPublisher(Publisher[Any]):
    """A publisher that rejects every subscriber: on_subscribe, then on_error (Rule 1.9)."""

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        if is_none(subscriber):
            raise TypeError("Rule 1.9: subscribe(None)")
        if signal_on_subscribe(subscriber, _NoopSubscription()):
            signal_on_error(subscriber, RuntimeError("this publisher always fails"))
