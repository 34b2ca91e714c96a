"""Pieces shared by the hubs: statistics, a consumer's subscription, a producer's sink."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .._core import (
    DrainLoop,
    MemberSubscription,
    SharedDrainOwner,
    WorkGuard,
    accept_subscription,
    cancel_quietly,
    replenish_threshold,
    report_undeliverable,
)
from ..api import Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["HubStatistics"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HubStatistics:
    """A snapshot of a hub.

    Attributes:
        producers: producers attached now (subscribed sinks, or the one source).
        consumers: consumers attached now.
        buffered: elements held by the hub right now.
        dropped: elements discarded on purpose: for a ``Router``, elements no consumer
            wanted; for a ``BroadcastHub`` with ``slow_consumer="drop"``, elements skipped
            for slow consumers (one per element per consumer).
        failed_consumers: consumers ended by the hub (``slow_consumer="fail"``, a raising
            predicate, a Rule 3.9 request).
        producer_errors: producers that ended with ``on_error`` (each error also went to
            the undeliverable hook).
        delivered: ``on_next`` signals sent to consumers, in total.
    """

    producers: int
    consumers: int
    buffered: int
    dropped: int = 0
    failed_consumers: int = 0
    producer_errors: int = 0
    delivered: int = 0


class _HubOwner(SharedDrainOwner, Protocol):
    def _schedule_borrowed(self) -> None: ...


class HubBase:
    """A hub's lock and its single drain loop (the package's ``DrainLoop``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._guard = WorkGuard(self._lock)
        self._loop = DrainLoop(self._drain, guard=self._guard, on_failure=self._fail_hub)

    def _schedule(self) -> None:
        if self._guard.acquire():
            self._loop.start_owned()

    def _schedule_borrowed(self) -> None:
        """``_schedule`` for a consumer's ``request``: a bounded run on its thread (Rule 3.4)."""
        if self._guard.acquire():
            self._loop.start_borrowed()

    def _drain(self) -> bool | None:
        raise NotImplementedError

    def _fail_hub(self, error: Exception) -> None:
        """A drain pass raised (a bug of ours): end every consumer with it, cancel producers."""
        raise NotImplementedError


class HubConsumer(MemberSubscription):
    """One consumer's subscription: the kit's ``MemberSubscription`` on the hub's lock.

    Its state is guarded by the hub's lock; the hub's drain loop delivers to it. Its
    ``error`` is a Rule 3.9 request or the consumer's own function (a raising predicate).
    """

    __slots__ = ("_hub",)

    def __init__(self, hub: _HubOwner, subscriber: Subscriber[Any]) -> None:
        super().__init__(hub, subscriber)
        self._hub = hub

    def _drain_after_request(self) -> None:
        """A bounded run on the requesting thread; the rest goes to a relay (Rule 3.4)."""
        self._hub._schedule_borrowed()


class HubProducer(Subscriber[Any]):
    """One producer's sink: a bounded queue of ``buffer_size``, refilled at 75%.

    ``on_next`` only appends under the hub's lock and nudges the drain loop; the drain loop
    calls ``consumed`` for each element taken, which requests more upstream.
    """

    __slots__ = ("buffer_size", "consumed", "done", "hub", "on_attach", "queue", "subscription")

    def __init__(
        self, hub: SharedDrainOwner, buffer_size: int, on_attach: Callable[[HubProducer], bool]
    ) -> None:
        self.hub = hub
        self.buffer_size = buffer_size
        self.queue: deque[Any] = deque()
        self.subscription: Subscription | None = None
        self.done = False
        self.consumed = 0
        self.on_attach = on_attach

    def on_subscribe(self, subscription: Subscription) -> None:
        """Attach to the hub and request ``buffer_size`` (Rules 2.5, 2.13)."""
        if not accept_subscription(subscription, self._claim):
            return
        if not self.on_attach(self):
            cancel_quietly(subscription)
            return
        self.request_more(self.buffer_size)

    def _claim(self, subscription: Subscription) -> bool:
        with self.hub._lock:
            if self.subscription is not None:
                return False
            self.subscription = subscription
            return True

    def request_more(self, n: int) -> None:
        """Request ``n`` from the producer; a raise (Rule 3.16 broken) ends the producer."""
        subscription = self.subscription
        if subscription is None:
            return
        try:
            subscription.request(n)
        except Exception as exc:
            report_undeliverable(exc)
            self.on_error(exc)

    def taken(self) -> int:
        """Drain loop, lock held: one element was taken; return how many to request now."""
        self.consumed += 1
        if self.consumed >= replenish_threshold(self.buffer_size):
            count, self.consumed = self.consumed, 0
            return count
        return 0

    def on_next(self, element: Any) -> None:
        """Queue ``element`` for the hub (at most ``buffer_size`` were requested)."""
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        with self.hub._lock:
            if self.done:
                return
            self.queue.append(element)
        self.hub._schedule()

    def on_error(self, error: Exception) -> None:
        """The producer failed: reported and counted; the hub goes on without it."""
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        with self.hub._lock:
            if self.done:
                return
            self.done = True
            self.queue.clear()
            self._count_error_locked()
        report_undeliverable(error)
        self.hub._schedule()

    def _count_error_locked(self) -> None:
        counter = getattr(self.hub, "_producer_errors", None)
        if counter is not None:
            self.hub._producer_errors = counter + 1  # type: ignore[attr-defined]

    def on_complete(self) -> None:
        """The producer finished; its queued elements still go out."""
        with self.hub._lock:
            if self.done:
                return
            self.done = True
        self.hub._schedule()
