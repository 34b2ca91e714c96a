"""``Router`` (n producers -> m selective consumers) and ``MergeHub`` (n -> 1)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._core import (
    MAX_DEMAND,
    cancel_quietly,
    check_positive,
    report_undeliverable,
    report_violation,
    signal_on_complete,
    signal_on_error,
    signal_on_subscribe,
)
from ..api import Publisher, Subscriber
from ._hub import HubBase, HubConsumer, HubProducer, HubStatistics

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["MergeHub", "Router"]

T = TypeVar("T")


def _everything(_: object) -> bool:
    return True


class _RouteConsumer(HubConsumer):
    __slots__ = ("predicate",)

    def __init__(
        self, hub: Router[Any], subscriber: Subscriber[Any], predicate: Callable[[Any], object]
    ) -> None:
        super().__init__(hub, subscriber)
        self.predicate = predicate


class Router(HubBase, Generic[T]):
    """The n -> m router: producers attach with ``sink()``, consumers with ``subscribe_where``.

    Every element goes to every consumer whose predicate matches it, in each producer's
    order: n + m streams instead of n x m. Nothing is lost or duplicated: an element is
    delivered once to each matching consumer, and an element that no consumer wants is
    counted in ``statistics().dropped`` and dropped. While no consumer is attached at all,
    elements wait (the producers are backpressured) instead of being dropped.

    >>> from reactive_streams import Flow
    >>> router = Router(buffer_size=4)
    >>> evens = router.subscribe_where(lambda x: x % 2 == 0)
    >>> small = router.subscribe_where(lambda x: x < 3)
    >>> seen_evens, seen_small = [], []
    >>> Flow.from_publisher(evens).subscribe(on_next=seen_evens.append)
    >>> Flow.from_publisher(small).subscribe(on_next=seen_small.append)
    >>> Flow.range(0, 6).subscribe(router.sink())
    >>> seen_evens, seen_small, router.statistics().dropped
    ([0, 2, 4], [0, 1, 2], 2)

    Args:
        buffer_size: each producer's bounded queue: ``buffer_size`` elements are
            requested from it, refilled at 75%.

    Backpressure:
        An element waits at the head of its producer's queue until every consumer it goes
        to has demand: the demand is the minimum over those consumers, and a slow consumer
        holds back only the producers whose elements it wants. The hub holds at most
        ``buffer_size`` elements per producer.

    Concurrency:
        Producers and consumers may signal from any threads; one drain loop routes, so
        each consumer's signals are serial (Rule 1.3). Predicates run in the drain loop,
        without the hub's lock; a predicate that raises ends its consumer with that error.
        A predicate is asked again each time a waiting element is looked at (consumers may
        have come or gone meanwhile), so it must be a pure function of the element.

    Completion:
        The consumers complete after ``close()`` once every producer has completed and
        every queue is empty. A producer's error ends that producer only: it is counted
        in ``statistics().producer_errors`` and reported through the undeliverable hook.
    """

    def __init__(self, buffer_size: int = 256) -> None:
        super().__init__()
        self._buffer_size = check_positive("buffer_size", buffer_size)
        self._producers: list[HubProducer] = []
        self._consumers: list[_RouteConsumer] = []
        self._closed = False
        self._terminated = False
        self._dropped = 0
        self._failed = 0
        self._producer_errors = 0
        self._delivered = 0
        self._next_producer = 0
        self._attaching = 0  # consumers inside their on_subscribe, not yet routed to

    # ------------------------------------------------------------------ attaching
    def sink(self) -> Subscriber[T]:
        """A new producer's ``Subscriber``: subscribe it to the producer's publisher.

        After ``close()``, a new sink's subscription is cancelled at once.
        """
        return HubProducer(self, self._buffer_size, self._attach_producer)

    def _attach_producer(self, producer: HubProducer) -> bool:
        with self._lock:
            if self._closed or self._terminated:
                return False
            self._producers.append(producer)
            return True

    def subscribe_where(self, predicate: Callable[[T], object]) -> Publisher[T]:
        """A ``Publisher`` of the elements for which ``predicate`` is truthy.

        Each subscriber of it is one consumer, with its own demand; it receives the
        elements routed after it attached.
        """
        return _RoutePublisher(self, predicate)

    def _attach_consumer(self, subscriber: Subscriber[Any], predicate: Any) -> None:
        # The consumer joins the routing only once its on_subscribe returned, so that no
        # producer's drain signals it meanwhile (Rule 1.3); what it requests from
        # on_subscribe waits until then.
        consumer = _RouteConsumer(self, subscriber, predicate)
        with self._lock:
            self._attaching += 1
        try:
            accepted = signal_on_subscribe(subscriber, consumer)
        finally:
            with self._lock:
                self._attaching -= 1
                ended = self._terminated
                if not ended:
                    self._consumers.append(consumer)
        if not accepted:
            consumer.cancel()
            return
        if ended:
            signal_on_complete(subscriber)
            return
        self._schedule_borrowed()

    def close(self) -> None:
        """Accept no new producer; consumers complete once the current producers finish."""
        with self._lock:
            self._closed = True
        self._schedule()

    def statistics(self) -> HubStatistics:
        """A snapshot: producers, consumers, buffered elements, drops, failures."""
        with self._lock:
            return HubStatistics(
                producers=len(self._producers),
                consumers=len(self._consumers),
                buffered=sum(len(producer.queue) for producer in self._producers),
                dropped=self._dropped,
                failed_consumers=self._failed,
                producer_errors=self._producer_errors,
                delivered=self._delivered,
            )

    # ------------------------------------------------------------------ the drain
    def _drain(self) -> bool:
        """Route until nothing moves; ``True`` when a consumer's request used its share.

        A run started by a consumer's ``request`` routes at most ``CALLER_BUDGET``
        elements on that thread; the loop relays the rest (Rule 3.4).
        """
        while True:
            failed = self._sweep()
            for consumer, error in failed:
                if consumer.subscriber is not None:
                    signal_on_error(consumer.subscriber, error)
                    consumer.subscriber = None
            if self._finish_if_done():
                return False
            moved = self._route_round()
            if moved is None:
                return True
            if not moved:
                return False

    def _sweep(self) -> list[tuple[_RouteConsumer, Exception]]:
        """Forget cancelled consumers and ended producers; collect Rule 3.9 failures."""
        failed: list[tuple[_RouteConsumer, Exception]] = []
        with self._lock:
            keep: list[_RouteConsumer] = []
            for consumer in self._consumers:
                if consumer.error is not None and not consumer.cancelled:
                    consumer.cancelled = True
                    self._failed += 1
                    failed.append((consumer, consumer.error))
                elif consumer.cancelled:
                    consumer.subscriber = None  # Rule 3.13
                else:
                    keep.append(consumer)
            self._consumers = keep
            self._producers = [p for p in self._producers if not (p.done and not p.queue)]
        return failed

    def _finish_if_done(self) -> bool:
        with self._lock:
            if self._terminated:
                return True
            if not (self._closed and not self._producers):
                return False
            self._terminated = True
            self._guard.retire_locked()
            consumers, self._consumers = self._consumers, []
        for consumer in consumers:
            subscriber, consumer.subscriber = consumer.subscriber, None
            if subscriber is not None:
                signal_on_complete(subscriber)
        return True

    def _targets(self, element: Any, consumers: list[_RouteConsumer]) -> list[_RouteConsumer]:
        targets: list[_RouteConsumer] = []
        for consumer in consumers:
            try:
                wanted = consumer.predicate(element)
            except Exception as exc:  # the consumer's own function: end that consumer
                with self._lock:
                    consumer.error = consumer.error or exc
                continue
            if wanted:
                targets.append(consumer)
        return targets

    def _route_round(self) -> bool | None:
        """Route at most one element per producer; return whether anything moved.

        ``None``: an element was due but the run's share of the caller's thread is spent.
        """
        with self._lock:
            producers = list(self._producers)
            consumers = [c for c in self._consumers if not c.cancelled and c.error is None]
            start = self._next_producer
        if not consumers or not producers:
            return False
        moved = False
        count = len(producers)
        for offset in range(count):
            producer = producers[(start + offset) % count]
            with self._lock:
                if not producer.queue:
                    continue
                element = producer.queue[0]
            targets = self._targets(element, consumers)
            with self._lock:
                if any(c.error is not None for c in consumers):
                    return True  # a predicate failed: sweep, then route again
                if any(c.cancelled or c.demand <= 0 for c in targets):
                    continue  # blocked until every target has demand
                if not self._loop.allow(1):
                    return None  # Rule 3.4: hand the rest to the relay
                producer.queue.popleft()
                for consumer in targets:
                    if consumer.demand != MAX_DEMAND:
                        consumer.demand -= 1
                if targets:
                    self._delivered += len(targets)
                else:
                    self._dropped += 1
                refill = producer.taken()
                self._next_producer = (start + offset + 1) % count
            moved = True
            for consumer in targets:
                self._deliver_one(consumer, element)
            if refill:
                producer.request_more(refill)
        return moved

    def _deliver_one(self, consumer: HubConsumer, element: Any) -> None:
        subscriber = consumer.subscriber
        if subscriber is None:
            return
        try:
            subscriber.on_next(element)
        except Exception as exc:  # Rule 2.13: treat as cancelled
            report_violation(subscriber, "on_next", exc)
            consumer.cancel()

    def _fail_hub(self, error: Exception) -> None:
        with self._lock:
            self._terminated = True
            consumers, self._consumers = self._consumers, []
            producers, self._producers = self._producers, []
        for producer in producers:
            if producer.subscription is not None:
                cancel_quietly(producer.subscription)
        if not consumers:
            report_undeliverable(error)
        for consumer in consumers:
            subscriber, consumer.subscriber = consumer.subscriber, None
            if subscriber is not None:
                signal_on_error(subscriber, error)


class _RoutePublisher(Publisher[T]):
    __slots__ = ("_predicate", "_router")

    def __init__(self, router: Router[T], predicate: Callable[[T], object]) -> None:
        self._router = router
        self._predicate = predicate

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Attach ``subscriber`` as a consumer of the matching elements (Rule 1.9)."""
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe() requires a Subscriber, got None")
        self._router._attach_consumer(subscriber, self._predicate)


class MergeHub(Generic[T]):
    """n producers -> one consumer: ``sink()`` per producer, ``source`` for everything.

    Akka's ``MergeHub``: producers attach and leave while the stream runs; each has its
    own bounded buffer of ``buffer_size``. Elements of one producer keep their order;
    producers are served round-robin. Before ``source`` has a subscriber, producers are
    backpressured (nothing is dropped). ``source`` takes one subscriber at a time; a
    second one gets ``on_error(RuntimeError)``. After ``close()``, ``source`` completes
    once the attached producers finish.

    >>> from reactive_streams import Flow
    >>> hub = MergeHub(buffer_size=8)
    >>> Flow.range(0, 3).subscribe(hub.sink())
    >>> Flow.range(10, 13).subscribe(hub.sink())
    >>> hub.close()
    >>> sorted(Flow.from_publisher(hub.source).to_list(timeout=5))
    [0, 1, 2, 10, 11, 12]

    Backpressure:
        ``buffer_size`` requested from each producer, refilled at 75% as the consumer
        takes elements; the consumer's demand is never exceeded.

    Concurrency:
        As ``Router``: one drain loop, serial signals to the consumer.
    """

    def __init__(self, buffer_size: int = 256) -> None:
        self._router: Router[T] = Router(buffer_size)
        self._source = _MergeSource(self._router)

    def sink(self) -> Subscriber[T]:
        """A new producer's ``Subscriber``."""
        return self._router.sink()

    @property
    def source(self) -> Publisher[T]:
        """The ``Publisher`` of every producer's elements (one subscriber at a time)."""
        return self._source

    def close(self) -> None:
        """Accept no new producer; ``source`` completes when the current ones finish."""
        self._router.close()

    def statistics(self) -> HubStatistics:
        """A snapshot: producers, consumers (0 or 1), buffered elements, errors."""
        return self._router.statistics()


class _MergeSource(Publisher[T]):
    __slots__ = ("_router",)

    def __init__(self, router: Router[T]) -> None:
        self._router = router

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Attach the one consumer (Rule 1.9); a second concurrent one is refused."""
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe() requires a Subscriber, got None")
        router = self._router
        with router._lock:
            busy = router._attaching > 0 or any(not c.cancelled for c in router._consumers)
        if busy:
            from .._core import signal_error_only  # noqa: PLC0415

            signal_error_only(subscriber, RuntimeError("MergeHub.source already has a subscriber"))
            return
        router._attach_consumer(subscriber, _everything)
