"""``flat_map`` / ``concat_map`` / ``merge`` / ``concat``: flatten inner publishers.

One coordinator serves all of them: it subscribes to at most ``concurrency`` inner
publishers at a time, each through an ``_Inner`` with a bounded queue, and a drain loop
(single owner, one lock) hands their elements downstream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from .._core import (
    MAX_DEMAND,
    InnerSubscriber,
    ProtocolViolationError,
    StageOperator,
    UpstreamStage,
    accept_subscription,
    cancel_quietly,
    check_positive,
    replenish_threshold,
    report_undeliverable,
    signal_on_complete,
    signal_on_error,
)
from ..api import Publisher, Subscriber, Subscription
from ._pull import PullPublisher

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["FlatMapOperator"]

T = TypeVar("T")
R = TypeVar("R")


class FlatMapOperator(StageOperator[R]):
    """Map each upstream element to a publisher and merge what those publishers emit.

    Marble (``concurrency=2``)::

        source:     -a-----b-----c-|
        fn(a):       -1--2-|
        fn(b):             -3-4-|
        result:     --1--2--3-4---...|

    Args:
        upstream: the outer publisher.
        fn: element -> ``Publisher`` (or any iterable, wrapped with ``Flow.from_iterable``).
        concurrency: inner publishers subscribed at once; ``1`` keeps the order
            (``concat_map``).
        prefetch: the bounded queue (and demand) of each inner subscriber.

    Backpressure:
        Requests ``concurrency`` outer elements, then one more each time an inner
        publisher completes. Each inner is requested ``prefetch`` elements and refilled at
        75%, so at most ``concurrency * prefetch`` elements are buffered.

    Concurrency:
        Inner publishers may emit on any thread; their elements are queued under one lock
        and a single drain (whoever finds it idle) delivers them, so downstream signals
        are serial (Rule 1.3). The first error cancels everything and is signalled.
    """

    __slots__ = ("_concurrency", "_fn", "_label", "_prefetch")

    def __init__(
        self,
        upstream: Publisher[T],
        fn: Callable[[T], Any],
        *,
        concurrency: int,
        prefetch: int = 32,
        label: str = "flat_map",
    ) -> None:
        super().__init__(upstream)
        check_positive("concurrency", concurrency)
        check_positive("prefetch", prefetch)
        self._fn = fn
        self._concurrency = concurrency
        self._prefetch = prefetch
        self._label = label

    @property
    def name(self) -> str:
        return self._label

    def _new_stage(self, subscriber: Subscriber[R]) -> Subscriber[Any]:
        return _Coordinator(subscriber, self._fn, self._concurrency, self._prefetch)


class _Inner(InnerSubscriber["_Coordinator"]):
    __slots__ = ()

    def on_subscribe(self, subscription: Subscription) -> None:
        if not accept_subscription(
            subscription, lambda kept: self.owner.inner_subscribed(self, kept)
        ):
            return
        self.request(self.owner.prefetch)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        self.owner.inner_next(self, element)

    def on_complete(self) -> None:
        self.owner.inner_complete(self)


class _Coordinator(UpstreamStage):
    __slots__ = (
        "__weakref__",
        "_active",
        "_buffered",
        "_concurrency",
        "_fn",
        "_limit",
        "_outer_done",
        "_outer_position",
        "_pending_outer",
        "prefetch",
    )

    def __init__(
        self,
        downstream: Subscriber[Any],
        fn: Callable[[Any], Any],
        concurrency: int,
        prefetch: int,
    ) -> None:
        super().__init__(downstream)  # the outer subscription is ``_upstream``
        self._fn = fn
        self._concurrency = concurrency
        self.prefetch = prefetch
        self._limit = replenish_threshold(prefetch)
        self._outer_done = False
        self._outer_position = 0
        self._active: list[_Inner] = []
        self._pending_outer = 0  # inner completions whose replacement is not yet requested
        self._buffered = 0

    def _buffered_now(self) -> int:
        return self._buffered

    # ---------------------------------------------------------------- outer side
    def on_subscribe(self, subscription: Subscription) -> None:
        if self._accept_upstream(subscription):
            self.request_upstream(subscription, self._concurrency)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        position = self._outer_position
        self._outer_position += 1
        try:
            inner = self._fn(element)
            if inner is None:
                raise TypeError(
                    f"Rule 2.13: the function given to flat_map() returned None for the "
                    f"element at position {position} (0-based) of its input"
                )
            if not isinstance(inner, Publisher):
                if isinstance(inner, str | bytes) or not hasattr(inner, "__iter__"):
                    raise TypeError(
                        "the function given to flat_map() must return a Publisher or an "
                        f"iterable, got {type(inner).__qualname__}"
                    )
                items = inner
                inner = PullPublisher(lambda: items, (), "iterable")
        except Exception as exc:
            self.fail(exc)
            return
        subscriber = _Inner(self)
        with self._lock:
            if self._cancelled or self._terminated:
                return
            self._active.append(subscriber)
        try:
            inner.subscribe(subscriber)
        except Exception as exc:  # the inner publisher broke Rule 1.9
            self.fail(exc)

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        with self._lock:
            self._outer_done = True  # Rule 2.3: the drain leaves the ended outer uncancelled
            first = self._keep_error_locked(error)
        if not first:
            report_undeliverable(error)
        self._schedule()

    def on_complete(self) -> None:
        with self._lock:
            self._outer_done = True
        self._schedule()

    # ---------------------------------------------------------------- inner side
    def inner_subscribed(self, inner: _Inner, subscription: Subscription) -> bool:
        with self._lock:
            if inner.subscription is not None or self._cancelled or self._terminated:
                return False
            inner.subscription = subscription
            return True

    def inner_next(self, inner: _Inner, element: Any) -> None:
        with self._lock:
            if self._cancelled or self._terminated:
                return
            if len(inner.queue) >= self.prefetch:
                self._error = self._error or ProtocolViolationError(
                    f"Rule 1.1: an inner publisher sent more than the {self.prefetch} "
                    "elements requested",
                    rule="1.1",
                )
            else:
                inner.queue.append(element)
                self._buffered += 1
                self._high_water = max(self._high_water, self._buffered)
            start = self._guard.acquire_locked()
        if start:
            self._loop.start_owned()

    def inner_complete(self, inner: _Inner) -> None:
        with self._lock:
            inner.done = True
        self._schedule()

    # ---------------------------------------------------------------- the drain
    # request, cancel and fail (the first error wins) are DownstreamStage's.
    def _abandon_locked(self) -> list[Subscription]:
        subscriptions = _Inner.live_subscriptions(self._active)  # Rule 2.3: not ended ones
        self._active = []
        self._buffered = 0
        outer, self._upstream = self._upstream, None
        if outer is not None and not self._outer_done:
            subscriptions.append(outer)
        return subscriptions

    def _drain(self) -> bool | None:
        """Serial passes of the single owner; returns when it finds nothing to do.

        A run started by a ``request`` delivers at most ``CALLER_BUDGET`` elements on the
        caller's thread; it then returns ``True`` and the loop relays the rest (Rule 3.4).
        """
        while True:
            with self._lock:
                if self._terminated:
                    return None
                downstream = self._downstream
                if self._cancelled or self._error is not None or downstream is None:
                    error = None if self._cancelled else self._error
                    self._terminate_locked()
                    subscriptions = self._abandon_locked()
                    stop = True
                else:
                    stop = False
                    batch: list[Any] = []
                    refills: list[tuple[_Inner, int]] = []
                    demand = self._demand
                    due = min(self._buffered, demand)
                    allowed = self._loop.allow(due) if due else 0
                    for inner in self._active:
                        queue = inner.queue
                        take = min(len(queue), allowed - len(batch))
                        if take <= 0:
                            continue
                        batch.extend(queue.popleft() for _ in range(take))
                        inner.consumed += take
                        if inner.consumed >= self._limit and not inner.done:
                            refills.append((inner, inner.consumed))
                            inner.consumed = 0
                    finished = [inner for inner in self._active if inner.done and not inner.queue]
                    if finished:
                        self._active = [inner for inner in self._active if inner not in finished]
                        self._pending_outer += len(finished)
                    more_outer = 0
                    if self._pending_outer and not self._outer_done:
                        more_outer, self._pending_outer = self._pending_outer, 0
                    count = len(batch)
                    self._buffered -= count
                    if count and demand != MAX_DEMAND:
                        self._demand = demand - count
                    complete = self._outer_done and not self._active
                    if complete:
                        self._terminate_locked()
                    outer = self._upstream
                    if not count and not refills and not more_outer and not complete:
                        if due:
                            return True  # Rule 3.4: the caller's share is spent; relay
                        if self._guard.release_locked():
                            continue  # work arrived meanwhile
                        return None
            if stop:
                for subscription in subscriptions:
                    cancel_quietly(subscription)
                if error is not None and downstream is not None:
                    signal_on_error(downstream, error)
                return None
            assert downstream is not None
            self._deliver(downstream, batch)  # stops at a cancel; Rule 2.13
            for inner, amount in refills:
                inner.request(amount)
            if more_outer and outer is not None:
                self.request_upstream(outer, more_outer)
            if complete:
                signal_on_complete(downstream)
                return None
