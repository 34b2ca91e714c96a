"""Multicast: ``publish()`` (connectable), ``share()`` (reference counted) and ``replay(n)``.

A ``_Hub`` subscribes once upstream and serves any number of subscribers at the pace of the
slowest: the shared buffer holds at most ``prefetch`` elements that some subscriber has not
received yet (the bounded drift between the fastest and the slowest), plus the last
``replay`` elements for subscribers that join late.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, TypeVar

from .._core import (
    MAX_DEMAND,
    DrainLoop,
    MemberSubscription,
    MissingBackpressureError,
    SingleUpstreamOperator,
    StageStatistics,
    TerminalLatch,
    WorkGuard,
    accept_subscription,
    cancel_quietly,
    check_positive,
    check_subscriber,
    replenish_threshold,
    report_undeliverable,
    signal_each,
    signal_on_error,
    signal_on_subscribe,
    signal_terminal,
)
from ..api import Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["MulticastOperator"]

T = TypeVar("T")


class MulticastOperator(SingleUpstreamOperator[T]):
    """One upstream subscription shared by many subscribers.

    Marble (two subscribers, the second one slower)::

        source:  -1-2-3-4-|
        fast:    -1-2-3---4-|       (waits for the slow one when the drift reaches prefetch)
        slow:    ---1---2---3-4-|

    Args:
        upstream: the publisher to share.
        prefetch: the most elements the fastest subscriber may be ahead of the slowest;
            also the demand sent upstream, refilled at 75%.
        replay: elements kept for late subscribers (``replay(n)``); after completion they
            still get these and the terminal signal.
        ref_count: ``share()``: connect at the first subscriber, cancel upstream when the
            last one leaves. Without it (``publish()``), call ``connect()``.

    Backpressure:
        Upstream gets at most ``prefetch`` outstanding demand beyond what the slowest
        subscriber has taken, so every subscriber is served at the slowest one's pace.
        Nothing more is requested while no subscriber is attached (``publish()`` after
        its subscribers cancelled). An upstream that sends more than requested breaks
        Rule 1.1: it is cancelled and every subscriber gets ``MissingBackpressureError``.
        An upstream whose ``request`` raises (Rule 3.16 broken) is cancelled and every
        subscriber gets that error.

    Concurrency:
        Subscribers may request and cancel from any thread; one drain loop under one lock
        delivers to all of them, never holding the lock while calling a subscriber.
    """

    __slots__ = ("_hub", "_label", "_lock", "_prefetch", "_ref_count", "_replay")

    def __init__(
        self,
        upstream: Publisher[T],
        *,
        prefetch: int = 256,
        replay: int = 0,
        ref_count: bool,
        label: str,
    ) -> None:
        super().__init__(upstream)
        check_positive("prefetch", prefetch)
        if replay < 0:
            raise ValueError(f"replay must be >= 0, got {replay}")
        self._prefetch = prefetch
        self._replay = replay
        self._ref_count = ref_count
        self._label = label
        self._lock = threading.Lock()
        self._hub: _Hub | None = None

    @property
    def name(self) -> str:
        return self._label

    def _current_hub(self) -> tuple[_Hub, bool]:
        with self._lock:
            hub = self._hub
            if hub is None or (hub.finished and self._replay == 0):
                hub = self._hub = _Hub(self._prefetch, self._replay, self._forget)
                self._track(hub)
                return hub, True
            return hub, False

    def _forget(self, hub: _Hub) -> None:
        with self._lock:
            if self._hub is hub:
                self._hub = None

    def connect(self) -> None:
        """Subscribe upstream now (``publish()``); a no-op if already connected."""
        hub, _ = self._current_hub()
        if hub.claim_connection():
            self._connect(hub)

    def _connect(self, hub: _Hub) -> None:
        try:
            self._upstream.subscribe(hub)
        except Exception as exc:  # the upstream broke Rule 1.9: every subscriber gets it
            hub.fail(exc)

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Add ``subscriber`` to the shared stream (Rule 1.9).

        A hub that a ``share()`` is disconnecting (its last subscriber just left) refuses
        the newcomer atomically with that decision, and the newcomer joins a fresh hub:
        a late subscriber is never left without signals.
        """
        check_subscriber(subscriber)
        while True:
            hub, _ = self._current_hub()
            if hub.add(subscriber, ref_count=self._ref_count):
                break
            self._forget(hub)  # disconnected meanwhile: the next round makes a new hub
        if self._ref_count and hub.claim_connection():
            self._connect(hub)


class _Member(MemberSubscription):
    """One subscriber of the hub (the kit's ``MemberSubscription``) and its position."""

    __slots__ = ("delivered", "done", "hub", "index")

    def __init__(self, hub: _Hub, subscriber: Subscriber[Any], index: int) -> None:
        super().__init__(hub, subscriber)
        self.hub = hub
        self.index = index  # absolute index of the next element to deliver
        self.delivered = 0
        self.done = False  # no longer served: cancelled, failed or ended

    def _cancelled_locked(self) -> None:
        self.done = True
        self.subscriber = None  # Rule 3.13
        members = self.hub._members
        if self in members:
            members.remove(self)


class _Hub(TerminalLatch, Subscriber[Any]):
    __slots__ = (
        "__weakref__",
        "_base",
        "_buffer",
        "_connected",
        "_delivered",
        "_done",
        "_error",
        "_forget",
        "_guard",
        "_had_members",
        "_high_water",
        "_limit",
        "_lock",
        "_loop",
        "_members",
        "_outstanding",
        "_prefetch",
        "_ref_count",
        "_replay",
        "_upstream",
        "_upstream_cancelled",
        "_urgent",
        "finished",
    )

    def __init__(self, prefetch: int, replay: int, forget: Callable[[_Hub], None]) -> None:
        self._prefetch = prefetch
        self._limit = replenish_threshold(prefetch)
        self._replay = replay
        self._forget = forget
        self._lock = threading.Lock()
        self._buffer: list[Any] = []
        self._base = 0  # absolute index of _buffer[0]
        self._members: list[_Member] = []
        self._upstream: Subscription | None = None
        self._upstream_cancelled = False
        self._connected = False
        self._outstanding = 0
        self._delivered = 0
        self._high_water = 0
        self._error: Exception | None = None
        self._ref_count = False
        self._had_members = False
        self._done = False  # upstream terminated
        self.finished = False  # terminal delivered to everyone (or disconnected)
        self._urgent = False  # our own error (Rules 1.1, 3.16): signalled before the buffer
        self._guard = WorkGuard(self._lock)
        self._loop = DrainLoop(
            self._drain,
            guard=self._guard,
            on_failure=self._terminate_due_to,
            self_releasing=True,
        )

    def statistics(self) -> StageStatistics:
        with self._lock:
            tail = self._base + len(self._buffer)
            slowest = min((member.index for member in self._members), default=tail)
            return StageStatistics(
                requested=sum(member.requested for member in self._members),
                delivered=self._delivered,
                buffered=tail - slowest,
                cancelled=self._upstream_cancelled,
                terminated=self.finished,
                high_water_mark=self._high_water,
            )

    def claim_connection(self) -> bool:
        with self._lock:
            if self._connected:
                return False
            self._connected = True
            return True

    def add(self, subscriber: Subscriber[Any], *, ref_count: bool) -> bool:
        """Attach ``subscriber``; ``False`` if this hub was disconnected (use a new one)."""
        with self._lock:
            if self._upstream_cancelled:
                return False
            self._ref_count = ref_count
            tail = self._base + len(self._buffer)
            if self._replay:
                index = max(self._base, tail - self._replay)
            elif not self._had_members:
                index = self._base  # the first subscriber gets what a connect() prefetched
            else:
                index = tail
            member = _Member(self, subscriber, index)
            self._members.append(member)
            self._had_members = True
        if not signal_on_subscribe(subscriber, member):
            member.cancel()
            return True
        self._schedule()
        return True

    # -------------------------------------------------------------- upstream side
    def _claim_upstream(self, subscription: Subscription) -> bool:
        with self._lock:
            if self._upstream is not None:
                return False
            self._upstream = subscription
            self._outstanding = self._prefetch
            return True

    def on_subscribe(self, subscription: Subscription) -> None:
        if not accept_subscription(subscription, self._claim_upstream):
            return
        try:
            subscription.request(self._prefetch)
        except Exception as exc:  # the upstream broke Rule 3.16
            self.fail(exc)

    def fail(self, error: Exception) -> None:
        """Our own error: cancel upstream, signal ``error`` to everyone before the buffer."""
        with self._lock:
            if self._done:
                late = True
            else:
                late = False
                self._done = self._urgent = True
                self._error = error
        if late:
            report_undeliverable(error)
        self._schedule()

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        with self._lock:
            if self._done:
                return
            if self._outstanding == 0:  # Rule 1.1 broken: more than requested
                overflow = True
            else:
                overflow = False
                self._buffer.append(element)
                if self._outstanding != MAX_DEMAND:
                    self._outstanding -= 1
            tail = self._base + len(self._buffer)
            slowest = min((member.index for member in self._members), default=self._base)
            self._high_water = max(self._high_water, tail - slowest)
        if overflow:
            self.fail(
                MissingBackpressureError(
                    f"Rule 1.1: upstream sent more than the {self._prefetch} elements "
                    "the multicast requested"
                )
            )
            return
        self._schedule()

    # -------------------------------------------------------------- the drain
    def _schedule(self) -> None:
        if self._guard.acquire():
            self._loop.start_owned()

    def _terminate_due_to(self, error: Exception) -> None:
        """A drain pass raised: cancel upstream, signal ``error`` to every subscriber."""
        with self._lock:
            members, self._members = self._members, []
            subscribers = [m.subscriber for m in members if not m.done]
            for member in members:
                member.done = True
                member.subscriber = None
            self._done = self.finished = self._upstream_cancelled = True
            upstream = self._upstream
        if upstream is not None:
            cancel_quietly(upstream)
        delivered = False
        for subscriber in subscribers:
            if subscriber is not None:
                delivered = True
                signal_on_error(subscriber, error)
        if not delivered:
            report_undeliverable(error)
        self._forget(self)

    def _drain(self) -> None:
        while True:
            deliveries: list[tuple[_Member, Subscriber[Any], list[Any], bool]] = []
            failures: list[tuple[Subscriber[Any], Exception]] = []
            with self._lock:
                buffer = self._buffer
                base = self._base
                tail = base + len(buffer)
                for member in list(self._members):
                    subscriber = member.subscriber
                    if member.done or subscriber is None:
                        continue
                    if member.error is not None:  # Rule 3.9
                        member.done = True
                        member.subscriber = None
                        self._members.remove(member)
                        failures.append((subscriber, member.error))
                        continue
                    count = 0 if self._urgent else member.take_locked(tail - member.index)
                    batch = buffer[member.index - base : member.index - base + count]
                    member.index += count
                    member.delivered += count
                    ending = self._done and (member.index == tail or self._urgent)
                    if ending:
                        member.done = True
                        member.subscriber = None
                        self._members.remove(member)
                    if batch or ending:
                        deliveries.append((member, subscriber, batch, ending))
                # trim what every member has received, keeping the replay window
                slowest = min((member.index for member in self._members), default=tail)
                if not self._members and not self._replay and not self._had_members:
                    slowest = base  # nobody has come yet: keep the prefetched elements
                keep_from = min(slowest, max(base, tail - self._replay))
                if keep_from > base:
                    del buffer[: keep_from - base]
                    self._base = keep_from
                refill = 0
                upstream = self._upstream
                if (
                    not self._done
                    and upstream is not None
                    and self._outstanding != MAX_DEMAND
                    and self._members  # nobody to serve: request nothing (publish())
                ):
                    room = self._prefetch - (tail - slowest) - self._outstanding
                    if room >= self._limit or (room > 0 and self._outstanding == 0):
                        refill = room
                        self._outstanding += room
                disconnect = (
                    self._ref_count
                    and not self._members
                    and not self._done
                    and self._had_members
                    and not self._upstream_cancelled
                )
                if self._urgent and not self._upstream_cancelled:
                    disconnect = True  # our own error: the upstream is still running
                if disconnect:
                    self._upstream_cancelled = True
                    self.finished = True
                if self._done and not self._members:
                    self.finished = True
                error = self._error
                if not deliveries and not failures and not refill and not disconnect:
                    if self._guard.release_locked():
                        continue  # work arrived meanwhile
                    finished = self.finished
                    break
            for subscriber, failure in failures:
                signal_on_error(subscriber, failure)
            for member, subscriber, batch, last in deliveries:
                sent, ok = signal_each(subscriber, batch, member.is_cancelled)
                with self._lock:
                    self._delivered += sent
                if not ok:  # Rule 2.13
                    member.cancel()
                elif last and not member.cancelled:
                    signal_terminal(subscriber, error)
            if disconnect and upstream is not None:
                cancel_quietly(upstream)
            elif refill and upstream is not None:
                upstream.request(refill)  # a raise ends every member (_terminate_due_to)
        if finished and not self._replay:
            self._forget(self)
