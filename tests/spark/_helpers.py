"""Small publishers and subscribers for the Spark tests (synchronous, demand-exact)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from reactive_streams import EmitterElection, Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from pyspark.sql.streaming.query import StreamingQuery

T = TypeVar("T")


class SequencePublisher(Publisher[T]):
    """Emits the items of a (lazy) iterable on the requesting thread, then completes.

    ``fail_with``: signal ``on_error(fail_with)`` instead of completing. Records the total
    demand it was asked for in ``requested`` (across subscriptions) and cancellations.
    """

    def __init__(self, items: Callable[[], Iterable[T]], *, fail_with: Exception | None = None):
        self._items = items
        self._fail_with = fail_with
        self.requested = 0
        self.cancelled = threading.Event()
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        _SequenceSubscription(self, subscriber, iter(self._items())).start()

    def add_requested(self, n: int) -> None:
        with self._lock:
            self.requested += n


class _SequenceSubscription(Subscription, Generic[T]):
    def __init__(
        self, publisher: SequencePublisher[T], subscriber: Subscriber[T], items: Iterator[T]
    ) -> None:
        self._publisher = publisher
        self._subscriber = subscriber
        self._items = items
        self._election = EmitterElection()

    def start(self) -> None:
        self._subscriber.on_subscribe(self)

    def request(self, n: int) -> None:
        if isinstance(n, int) and n > 0:
            self._publisher.add_requested(n)
        if self._election.request(n):
            self._emit()

    def cancel(self) -> None:
        self._publisher.cancelled.set()
        self._election.cancel()

    def _emit(self) -> None:
        election = self._election
        while True:
            error = election.take_error()
            if error is not None:
                election.terminate()
                self._subscriber.on_error(error)
                return
            sent = 0
            demand = election.demand
            while sent < demand and not election.cancelled:
                try:
                    item = next(self._items)
                except StopIteration:
                    election.terminate()
                    if self._publisher._fail_with is not None:
                        self._subscriber.on_error(self._publisher._fail_with)
                    else:
                        self._subscriber.on_complete()
                    return
                self._subscriber.on_next(item)
                sent += 1
            election.produced(sent)
            if election.cancelled or not election.release():
                return


class Collector(Subscriber[T]):
    """Requests ``batch`` at a time (``None``: unbounded); records what it gets."""

    def __init__(self, *, batch: int | None = None, limit: int | None = None) -> None:
        self.items: list[T] = []
        self.error: Exception | None = None
        self.completed = False
        self.done = threading.Event()
        self.got_one = threading.Condition()
        self.subscription: Subscription | None = None
        self._batch = batch
        self._limit = limit  # stop requesting after this many items

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(self._batch or 2**63 - 1)

    def on_next(self, element: T) -> None:
        with self.got_one:
            self.items.append(element)
            count = len(self.items)
            self.got_one.notify_all()
        if self._batch is not None and (self._limit is None or count < self._limit):
            assert self.subscription is not None
            self.subscription.request(1)

    def on_error(self, error: Exception) -> None:
        self.error = error
        self.done.set()

    def on_complete(self) -> None:
        self.completed = True
        self.done.set()

    def wait_for(self, count: int, timeout: float) -> bool:
        with self.got_one:
            return self.got_one.wait_for(lambda: len(self.items) >= count, timeout)


class OneShot(Collector[T]):
    """Requests ``count`` once in ``on_subscribe`` and never again."""

    def __init__(self, count: int) -> None:
        super().__init__(batch=count)
        self._count = count

    def on_next(self, element: T) -> None:
        with self.got_one:
            self.items.append(element)
            self.got_one.notify_all()


class ManualPublisher(Publisher[T]):
    """The test drives it: ``emit``/``complete``/``fail`` (demand is recorded, not enforced)."""

    def __init__(self) -> None:
        self.subscriber: Subscriber[T] | None = None
        self.requested = 0
        self.cancelled = threading.Event()
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        self.subscriber = subscriber
        subscriber.on_subscribe(_ManualSubscription(self))

    def add_requested(self, n: int) -> None:
        with self._lock:
            self.requested += n


class _ManualSubscription(Subscription):
    def __init__(self, publisher: ManualPublisher[Any]) -> None:
        self._publisher = publisher

    def request(self, n: int) -> None:
        self._publisher.add_requested(n)

    def cancel(self) -> None:
        self._publisher.cancelled.set()


def wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    """Poll ``predicate`` (for state nobody signals, e.g. Spark's status tracker)."""
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        pause.wait(0.05)
    return True


def await_stopped(query: StreamingQuery, timeout: float) -> None:
    """Wait for a query cancelled by its subscriber; a batch that waited fails it on purpose."""
    failure: Exception | None = None
    try:
        query.awaitTermination(int(timeout))
    except Exception as exc:  # the batch that waited was refused so that it stays uncommitted
        failure = exc
    assert failure is None or "cancelled" in str(failure)


def run_to_completion(dataframe: Any, timeout: float) -> list[Any]:
    """Subscribe a ``Collector`` to ``from_streaming_query(dataframe)``; its micro-batches.

    Asserts the stream completed without error within ``timeout`` seconds.
    """
    from reactive_streams.spark._from_streaming_query import from_streaming_query

    collector: Collector[Any] = Collector()
    from_streaming_query(dataframe).subscribe(collector)
    assert collector.done.wait(timeout)
    assert collector.error is None, collector.error
    assert collector.completed
    return collector.items
