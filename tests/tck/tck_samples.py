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
    MAX_DEMAND,
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
    validate_request,
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
        # Own the loop during on_subscribe: an element that upstream sends at once on
        # another thread waits until on_subscribe returned (Rule 1.3).
        held = self._election.acquire()
        accepted = signal_on_subscribe(subscriber, _Downstream(self))
        if held and self._election.release():
            self._loop.start_owned()
        if not accepted:
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


class _Member(Subscription):
    """One downstream subscriber of ``MulticastProcessor``: its queue, demand and drain."""

    def __init__(self, processor: MulticastProcessor, subscriber: Subscriber[Any]) -> None:
        self.processor = processor
        self.subscriber: Subscriber[Any] | None = subscriber
        self.queue: deque[Any] = deque()
        self.demand = 0
        self.error: Exception | None = None  # a Rule 3.9 error to signal
        self.cancelled = False
        self.done = False
        self.loop = DrainLoop(self.drain)

    def request(self, n: int) -> None:
        self.processor._request(self, n)

    def cancel(self) -> None:
        self.processor._cancel(self)

    def drain(self) -> bool:
        processor = self.processor
        while True:
            with processor._lock:
                subscriber = self.subscriber
                if subscriber is None or self.done:
                    return False
                if self.cancelled:
                    self.subscriber = None  # Rule 3.13
                    return False
                error = self.error or (processor._error if processor._terminated else None)
                if error is not None:  # Rules 3.9 and 4.2: errors do not wait for demand
                    self.done = True
                    self.subscriber = None
                    self.queue.clear()
                    terminal: str | None = "error"
                elif not self.queue and processor._terminated:
                    self.done = True
                    self.subscriber = None
                    terminal = "complete"
                elif self.queue and self.demand > 0:
                    element = self.queue.popleft()
                    if self.demand != MAX_DEMAND:
                        self.demand -= 1
                    terminal = None
                else:
                    return False
            if terminal == "error":
                assert error is not None
                signal_on_error(subscriber, error)
                return False
            if terminal == "complete":
                signal_on_complete(subscriber)
                return False
            if not signal_on_next(subscriber, element):
                self.cancel()
                return False
            processor._replenish()


class MulticastProcessor(Processor[Any, Any]):
    """An identity processor for any number of subscribers, each with its own queue.

    Upstream demand follows the hungriest subscriber; an element goes into the queue of
    every subscriber present when it arrives; an error reaches everyone at once (Rule 4.2).
    """

    def __init__(self, buffer_size: int) -> None:
        self._lock = threading.Lock()
        self._upstream: Subscription | None = None
        self._upstream_outstanding = 0
        self._members: list[_Member] = []
        self._terminated = False
        self._error: Exception | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        if is_none(subscription):
            raise TypeError("Rule 2.13: on_subscribe(None)")
        with self._lock:
            duplicate = self._upstream is not None
            if not duplicate:
                self._upstream = subscription
        if duplicate:
            subscription.cancel()  # Rule 2.5
            return
        self._replenish()

    def on_next(self, element: Any) -> None:
        if is_none(element):
            raise TypeError("Rule 2.13: on_next(None)")
        with self._lock:
            self._upstream_outstanding -= 1
            members = list(self._members)
            for member in members:
                member.queue.append(element)
        for member in members:
            member.loop.schedule()

    def on_error(self, error: Exception) -> None:
        if is_none(error):
            raise TypeError("Rule 2.13: on_error(None)")
        self._terminate(error)

    def on_complete(self) -> None:
        self._terminate(None)

    def _terminate(self, error: Exception | None) -> None:
        with self._lock:
            if self._terminated:
                return
            self._terminated = True
            self._error = error
            members = list(self._members)
        for member in members:
            member.loop.schedule()

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        if is_none(subscriber):
            raise TypeError("Rule 1.9: subscribe(None)")
        member = _Member(self, subscriber)
        with self._lock:
            self._members.append(member)
        # Own the member's loop during on_subscribe: an element that arrives meanwhile on
        # another thread waits until on_subscribe returned (Rule 1.3).
        held = member.loop.guard.acquire()
        accepted = signal_on_subscribe(subscriber, member)
        if held and member.loop.guard.release():
            member.loop.start_owned()
        if not accepted:
            self._cancel(member)
            return
        member.loop.schedule()  # a terminal signal that came before this subscriber

    def _request(self, member: _Member, n: int) -> None:
        with self._lock:
            if member.cancelled or member.done:
                return
            try:
                member.demand = add_demand(member.demand, validate_request(n))
            except ProtocolViolationError as error:
                member.error = member.error or error
        member.loop.schedule()
        self._replenish()

    def _cancel(self, member: _Member) -> None:
        with self._lock:
            member.cancelled = True
            if member in self._members:
                self._members.remove(member)
            last = not self._members and not self._terminated
            upstream = self._upstream if last else None
        member.loop.schedule()
        if upstream is not None:
            upstream.cancel()  # the last subscriber left: let the cancel flow upstream

    def _replenish(self) -> None:
        """Request upstream what the hungriest subscriber still lacks."""
        with self._lock:
            upstream = self._upstream
            if upstream is None or self._terminated:
                return
            wanted = max(
                (min(m.demand, MAX_DEMAND) - len(m.queue) for m in self._members), default=0
            )
            missing = min(wanted, MAX_DEMAND) - self._upstream_outstanding
            if missing <= 0:
                return
            self._upstream_outstanding += missing
        upstream.request(missing)
