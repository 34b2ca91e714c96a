"""``zip``: combine the n-th elements of several publishers into tuples."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core import (
    MAX_DEMAND,
    DownstreamStage,
    InnerSubscriber,
    Operator,
    ProtocolViolationError,
    accept_subscription,
    cancel_quietly,
    check_positive,
    check_subscriber,
    replenish_threshold,
    signal_on_complete,
    signal_on_error,
    signal_on_subscribe,
)

if TYPE_CHECKING:
    from ..api import Publisher, Subscriber, Subscription

__all__ = ["ZipOperator"]


class ZipOperator(Operator[tuple[Any, ...]]):
    """Emit ``(a_n, b_n, ...)`` once every source has produced its n-th element.

    Marble::

        a:       -1---2---3-|
        b:       ---x---y-|
        zip:     ---(1,x)-(2,y)|

    Backpressure:
        Each source is requested ``prefetch`` elements into its own bounded queue and
        refilled at 75% of what the zipped output consumed, so the stage buffers at most
        ``len(sources) * prefetch`` elements.

    Concurrency:
        Sources may emit on any threads; one drain loop (single owner under one lock)
        builds and delivers the tuples serially. The zip completes as soon as one source
        has completed and its queue is empty; the other sources are then cancelled.
    """

    __slots__ = ("_prefetch", "_sources")

    def __init__(self, sources: tuple[Publisher[Any], ...], prefetch: int = 32) -> None:
        super().__init__()
        if not sources:
            raise ValueError("zip() needs at least one publisher")
        self._sources = sources
        self._prefetch = check_positive("prefetch", prefetch)

    @property
    def name(self) -> str:
        return "zip"

    @property
    def upstreams(self) -> tuple[Publisher[Any], ...]:
        return self._sources

    def subscribe(self, subscriber: Subscriber[tuple[Any, ...]]) -> None:
        """Subscribe to every source through one coordinator (Rule 1.9)."""
        check_subscriber(subscriber)
        stage = _Zip(subscriber, len(self._sources), self._prefetch)
        self._track(stage)
        if not signal_on_subscribe(subscriber, stage):
            stage.cancel()
        for source, lane in zip(self._sources, stage.lanes, strict=True):
            try:
                source.subscribe(lane)
            except Exception as exc:  # the source broke Rule 1.9: the zip fails with it
                stage.fail(exc)


class _Lane(InnerSubscriber["_Zip"]):
    __slots__ = ()

    def on_subscribe(self, subscription: Subscription) -> None:
        if not accept_subscription(subscription, self._claim):
            return
        self.request(self.owner.prefetch)

    def _claim(self, subscription: Subscription) -> bool:
        with self.owner._lock:
            duplicate = self.subscription is not None
            if not duplicate:
                self.subscription = subscription
            return not duplicate and not self.owner._terminated

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        owner = self.owner
        with owner._lock:
            if owner._terminated:
                return
            if len(self.queue) >= owner.prefetch:
                owner._error = owner._error or ProtocolViolationError(
                    "Rule 1.1: a zipped publisher sent more than requested", rule="1.1"
                )
            else:
                self.queue.append(element)
        owner._schedule()

    def on_complete(self) -> None:
        with self.owner._lock:
            self.done = True
        self.owner._schedule()


class _Zip(DownstreamStage):
    """The zip's subscription: ``request``, ``cancel`` and ``fail`` are DownstreamStage's."""

    __slots__ = ("__weakref__", "lanes", "prefetch")

    def __init__(self, downstream: Subscriber[tuple[Any, ...]], width: int, prefetch: int) -> None:
        super().__init__(downstream)
        self.prefetch = prefetch
        self.lanes = [_Lane(self) for _ in range(width)]

    def _buffered_now(self) -> int:
        return sum(len(lane.queue) for lane in self.lanes)

    def _abandon_locked(self) -> list[Subscription]:
        for lane in self.lanes:
            lane.queue.clear()
        return _Lane.live_subscriptions(self.lanes)

    def _drain(self) -> None:
        limit = replenish_threshold(self.prefetch)
        while True:
            with self._lock:
                if self._terminated:
                    return
                downstream = self._downstream
                lanes = self.lanes
                exhausted = any(lane.done and not lane.queue for lane in lanes)
                stop = self._cancelled or self._error is not None or downstream is None
                if stop or exhausted:
                    error = None if self._cancelled else self._error
                    self._terminate_locked()
                    subscriptions = self._abandon_locked()
                else:
                    ready = min(len(lane.queue) for lane in lanes)
                    count = min(ready, self._demand)
                    batch = [tuple(lane.queue.popleft() for lane in lanes) for _ in range(count)]
                    if count and self._demand != MAX_DEMAND:
                        self._demand -= count
                    refills: list[tuple[_Lane, int]] = []
                    for lane in lanes:
                        lane.consumed += count
                        if lane.consumed >= limit and lane.subscription is not None:
                            refills.append((lane, lane.consumed))
                            lane.consumed = 0
                    if not count:
                        if self._guard.release_locked():
                            continue  # work arrived meanwhile
                        return
            if stop or exhausted:
                for subscription in subscriptions:
                    cancel_quietly(subscription)
                if downstream is not None:
                    if error is not None:
                        signal_on_error(downstream, error)
                    elif not stop:
                        signal_on_complete(downstream)
                return
            assert downstream is not None
            self._deliver(downstream, batch)
            for lane, amount in refills:
                lane.request(amount)
