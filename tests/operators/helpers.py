"""Test doubles for operator tests: a manual publisher and a recording subscriber."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from reactive_streams import Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")


class ManualSubscription(Subscription):
    """Records every request and cancel made by the stage under test."""

    def __init__(self) -> None:
        self.requests: list[object] = []
        self.cancelled = 0

    def request(self, n: int) -> None:
        self.requests.append(n)

    def cancel(self) -> None:
        self.cancelled += 1

    @property
    def total_requested(self) -> int:
        return sum(n for n in self.requests if isinstance(n, int))


class ManualPublisher(Publisher[T]):
    """A publisher the test drives by hand: ``next(x)``, ``complete()``, ``error(e)``."""

    def __init__(self) -> None:
        self.subscriber: Subscriber[T] | None = None
        self.subscription = ManualSubscription()

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        if subscriber is None:
            raise TypeError("Rule 1.9")
        self.subscriber = subscriber
        subscriber.on_subscribe(self.subscription)

    def next(self, *elements: T) -> None:
        assert self.subscriber is not None
        for element in elements:
            self.subscriber.on_next(element)

    def complete(self) -> None:
        assert self.subscriber is not None
        self.subscriber.on_complete()

    def error(self, error: Exception) -> None:
        assert self.subscriber is not None
        self.subscriber.on_error(error)


class Recorder(Subscriber[T], Generic[T]):
    """Records signals; requests ``initial`` on subscribe and nothing else by itself.

    ``depth`` tracks nesting of ``on_next`` inside ``request`` (Rule 3.3): with
    ``request_in_on_next`` the recorder requests 1 from inside every ``on_next``.
    """

    def __init__(self, initial: int = 0, *, request_in_on_next: bool = False) -> None:
        self.initial = initial
        self.request_in_on_next = request_in_on_next
        self.subscription: Subscription | None = None
        self.elements: list[T] = []
        self.errors: list[Exception] = []
        self.completed = 0
        self.terminated = threading.Event()
        self.signals_after_terminal = 0
        self.depth = 0
        self.max_depth = 0
        self.threads: set[int] = set()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def wait_for_count(self, count: int, timeout: float = 10.0) -> None:
        """Block until at least ``count`` elements arrived (or the stream ended)."""
        with self._changed:
            arrived = self._changed.wait_for(
                lambda: len(self.elements) >= count or self.terminated.is_set(), timeout
            )
        assert arrived, f"only {len(self.elements)} of {count} elements arrived in time"

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        if self.initial:
            self.request(self.initial)

    def request(self, n: Any) -> None:
        assert self.subscription is not None
        self.subscription.request(n)

    def cancel(self) -> None:
        assert self.subscription is not None
        self.subscription.cancel()

    def on_next(self, element: T) -> None:
        with self._lock:
            self.threads.add(threading.get_ident())
            if self.terminated.is_set():
                self.signals_after_terminal += 1
            self.elements.append(element)
            self._changed.notify_all()
        self.depth += 1
        self.max_depth = max(self.max_depth, self.depth)
        try:
            if self.request_in_on_next:
                self.request(1)
        finally:
            self.depth -= 1

    def on_error(self, error: Exception) -> None:
        if self.terminated.is_set():
            self.signals_after_terminal += 1
        self.errors.append(error)
        with self._changed:
            self.terminated.set()
            self._changed.notify_all()

    def on_complete(self) -> None:
        if self.terminated.is_set():
            self.signals_after_terminal += 1
        self.completed += 1
        with self._changed:
            self.terminated.set()
            self._changed.notify_all()

    def wait(self, timeout: float = 10.0) -> None:
        assert self.terminated.wait(timeout), "the stream did not terminate in time"


class ThreadCountingSubscriber(Subscriber[Any]):
    """Counts ``on_next`` per thread; each lasts ``work`` seconds (simulated slow work).

    Requests ``initial`` from ``on_subscribe`` and ``per_element`` from each ``on_next``;
    cancels once ``limit`` elements arrived (so that a thread it holds is let go) and
    sets ``reached`` then.
    """

    def __init__(self, *, initial: int, per_element: int, limit: int, work: float) -> None:
        self.initial = initial
        self.per_element = per_element
        self.limit = limit
        self.work = work
        self.subscription: Subscription | None = None
        self.by_thread: dict[threading.Thread, int] = {}  # objects: idents are reused
        self.delivered = 0
        self.reached = threading.Event()
        self.errors: list[Exception] = []

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        if self.initial:
            subscription.request(self.initial)

    def on_next(self, element: Any) -> None:
        me = threading.current_thread()
        self.by_thread[me] = self.by_thread.get(me, 0) + 1
        self.delivered += 1
        threading.Event().wait(self.work)
        assert self.subscription is not None
        if self.delivered == self.limit:
            self.subscription.cancel()
            self.reached.set()
        elif self.delivered < self.limit and self.per_element:
            self.subscription.request(self.per_element)

    def on_error(self, error: Exception) -> None:
        self.errors.append(error)
        self.reached.set()

    def on_complete(self) -> None:
        self.reached.set()

    def on_thread(self, thread: threading.Thread) -> int:
        """How many ``on_next`` ran on ``thread``."""
        return self.by_thread.get(thread, 0)


def run_on_thread(action: Callable[[], object], timeout: float) -> threading.Thread:
    """Run ``action`` on a new daemon thread; fail unless it returns within ``timeout``."""
    returned = threading.Event()

    def target() -> None:
        action()
        returned.set()

    thread = threading.Thread(target=target, name="test-caller", daemon=True)
    thread.start()
    assert returned.wait(timeout), "the call did not return (Rule 3.4)"
    return thread
