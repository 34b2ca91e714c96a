"""``RecordingSubscriber`` and ``collect``."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Generic, TypeVar

from .._core import MAX_DEMAND, accept_subscription, add_demand
from ..api import Subscriber, Subscription

if TYPE_CHECKING:
    from ..api import Publisher

__all__ = ["RecordingSubscriber", "collect"]

T = TypeVar("T")


class RecordingSubscriber(Subscriber[T], Generic[T]):
    """A subscriber for tests: it records signals and requests only when told to.

    Args:
        initial_request: demand to request from ``on_subscribe`` (0 for none).
        request_on_next: demand to request again from each ``on_next`` (0 for none).

    Attributes (read them after a ``wait_*`` call returned ``True``):
        elements: the ``on_next`` elements, in order.
        error: the ``on_error`` argument, if any.
        completed: whether ``on_complete`` arrived.
        violations: rule violations seen, as messages starting with the rule.

    Concurrency: signals may arrive from any thread; the ``wait_*`` methods block with a
    timeout in seconds and return ``False`` when it expires.
    """

    def __init__(self, *, initial_request: int = 0, request_on_next: int = 0) -> None:
        self._condition = threading.Condition()
        self._initial_request = initial_request
        self._request_on_next = request_on_next
        self.subscription: Subscription | None = None
        self.elements: list[T] = []
        self.error: Exception | None = None
        self.completed = False
        self.violations: list[str] = []
        self._requested = 0
        self._in_signal = False

    # -- control ------------------------------------------------------------------------------

    def request(self, n: int) -> None:
        """Request ``n`` more elements (any value: tests may send bad ones on purpose)."""
        with self._condition:
            if type(n) is int and n > 0:
                self._requested = add_demand(self._requested, n)
            subscription = self.subscription
        if subscription is None:
            raise RuntimeError("request() before on_subscribe")
        subscription.request(n)

    def cancel(self) -> None:
        """Cancel the subscription, if there is one."""
        subscription = self.subscription
        if subscription is not None:
            subscription.cancel()

    # -- waiting ------------------------------------------------------------------------------

    def wait_for_elements(self, count: int, timeout: float) -> bool:
        """Wait until at least ``count`` elements arrived or the stream ended."""
        with self._condition:
            return self._condition.wait_for(
                lambda: len(self.elements) >= count or self.terminated, timeout
            )

    def wait_terminated(self, timeout: float) -> bool:
        """Wait for ``on_complete`` or ``on_error``."""
        with self._condition:
            return self._condition.wait_for(lambda: self.terminated, timeout)

    @property
    def terminated(self) -> bool:
        """Whether a terminal signal arrived."""
        return self.completed or self.error is not None

    # -- the Subscriber interface -------------------------------------------------------------

    def _enter(self, signal: str) -> None:
        with self._condition:
            if self._in_signal:
                self.violations.append(f"Rule 1.3: {signal} overlapped another signal")
            if self.terminated:
                self.violations.append(f"Rule 1.7: {signal} after a terminal signal")
            if signal != "on_subscribe" and self.subscription is None:
                self.violations.append(f"Rule 1.9: {signal} before on_subscribe")
            self._in_signal = True

    def _leave(self) -> None:
        with self._condition:
            self._in_signal = False
            self._condition.notify_all()

    def on_subscribe(self, subscription: Subscription) -> None:
        """Record the subscription and make the initial request, if any."""
        self._enter("on_subscribe")
        try:
            kept = accept_subscription(subscription, self._claim)
        finally:
            self._leave()
        if not kept:
            return
        if self._initial_request:
            self.request(self._initial_request)

    def _claim(self, subscription: Subscription) -> bool:
        with self._condition:
            if self.subscription is not None:
                self.violations.append("Rule 2.12: on_subscribe called twice")
                return False
            self.subscription = subscription
            return True

    def on_next(self, element: T) -> None:
        """Record ``element``; check it was requested (Rule 1.1)."""
        if element is None:
            raise TypeError("Rule 2.13: on_next(element) must not be None")
        self._enter("on_next")
        try:
            with self._condition:
                self.elements.append(element)
                if len(self.elements) > self._requested:
                    self.violations.append(
                        f"Rule 1.1: {len(self.elements)} elements for {self._requested} requested"
                    )
        finally:
            self._leave()
        if self._request_on_next:
            self.request(self._request_on_next)

    def on_error(self, error: Exception) -> None:
        """Record ``error``."""
        if error is None:
            raise TypeError("Rule 2.13: on_error(error) must not be None")
        self._enter("on_error")
        with self._condition:
            self.error = error
        self._leave()

    def on_complete(self) -> None:
        """Record completion."""
        self._enter("on_complete")
        with self._condition:
            self.completed = True
        self._leave()


def collect(publisher: Publisher[T], *, timeout: float = 30.0) -> list[T]:
    """Subscribe to ``publisher`` with unbounded demand and return all its elements.

    Args:
        publisher: a finite publisher.
        timeout: seconds to wait for the stream to end.

    Returns:
        The elements, in order.

    Raises:
        TimeoutError: if the stream did not end within ``timeout`` (it is cancelled).
        Exception: the error the stream ended with, re-raised as is.
    """
    subscriber: RecordingSubscriber[T] = RecordingSubscriber(initial_request=MAX_DEMAND)
    publisher.subscribe(subscriber)
    if not subscriber.wait_terminated(timeout):
        subscriber.cancel()
        raise TimeoutError(f"{publisher!r} did not terminate within {timeout} s")
    if subscriber.error is not None:
        raise subscriber.error
    return list(subscriber.elements)
