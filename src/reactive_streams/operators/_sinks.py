"""Sinks: the subscribers at the end of a pipeline (callbacks, lists, blocking iteration).

Every sink requests in bounded batches and replenishes at 75% of its batch, except
``collect_list`` which must hold everything anyway and requests unbounded demand.
"""

from __future__ import annotations

import threading
from collections import deque
from operator import length_hint
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._core import (
    MAX_DEMAND,
    accept_subscription,
    check_positive,
    replenish_threshold,
    report_undeliverable,
)
from ..api import Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import TracebackType

__all__ = ["BlockingIterator", "CallbackSubscriber", "collect_list", "first", "for_each"]

T = TypeVar("T")


class CallbackSubscriber(Subscriber[T]):
    """A subscriber made of plain callables, requesting in batches of ``prefetch``.

    Args:
        on_next: called with each element. If it raises, the subscription is cancelled
            and the exception goes to ``on_error`` (the subscriber itself never raises,
            Rule 2.13).
        on_error: called with the terminal error; by default the error is reported through
            the undeliverable hook so it is never lost.
        on_complete: called on completion.
        prefetch: the batch of demand, replenished when 75% of it has been consumed;
            ``MAX_DEMAND`` requests unbounded demand once.

    Concurrency:
        Signals arrive serially (Rule 1.3); ``cancel()`` may be called from any thread.
    """

    __slots__ = (
        "_consumed",
        "_done",
        "_limit",
        "_on_complete",
        "_on_error",
        "_on_next",
        "_prefetch",
        "_subscription",
        "_terminated",
    )

    def __init__(
        self,
        on_next: Callable[[T], object] | None = None,
        on_error: Callable[[Exception], object] | None = None,
        on_complete: Callable[[], object] | None = None,
        *,
        prefetch: int = 256,
    ) -> None:
        check_positive("prefetch", prefetch)
        self._on_next = on_next
        self._on_error = on_error
        self._on_complete = on_complete
        self._prefetch = prefetch
        self._limit = MAX_DEMAND if prefetch == MAX_DEMAND else replenish_threshold(prefetch)
        self._consumed = 0
        self._subscription: Subscription | None = None
        self._done = False
        self._terminated = threading.Event()

    def on_subscribe(self, subscription: Subscription) -> None:
        """Request the first batch (Rule 2.1); a second subscription is cancelled (Rule 2.5)."""
        if not accept_subscription(subscription, self._subscription is None and not self._done):
            return
        self._subscription = subscription
        subscription.request(self._prefetch)

    def on_next(self, element: T) -> None:
        """Call the ``on_next`` callable; replenish demand at 75% of the batch."""
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        if self._done:
            return
        on_next = self._on_next
        if on_next is not None:
            try:
                on_next(element)
            except Exception as exc:
                self.cancel()
                self._terminal_error(exc)
                return
        consumed = self._consumed + 1
        if consumed != self._limit:
            self._consumed = consumed
            return
        self._consumed = 0
        subscription = self._subscription
        if subscription is not None:
            subscription.request(consumed)

    def on_next_run(self, elements: Iterator[T]) -> None:
        """``on_next`` for each of ``elements`` in order, as one call (a fused hand-off).

        Exactly what calling ``on_next`` per element does, with the per-element call and
        demand bookkeeping taken out of the loop: the ``on_next`` callable is called for
        each element until the subscriber is done (cancelled, or the callable raised:
        then the subscription is cancelled and the exception goes to ``on_error``, as in
        ``on_next``). Elements it did not take stay in ``elements``. Demand is
        replenished once per run, by everything consumed since the last request, as soon
        as that reaches 75% of the batch, so the outstanding demand never drops below
        zero and the sum requested equals the sum consumed plus ``prefetch``.

        The kit's ``RunSubscriber`` capability: a draining stage (``publish_on``) finds it
        with ``run_receiver``, which takes it from this class only, not from subclasses
        (they may override ``on_next``). Signals stay serial: it runs where ``on_next``
        would.

        Args:
            elements: an iterator over non-``None`` elements (the stage rejected
                ``None``, Rule 2.13); partly consumed on return if the run stopped early.
        """
        if self._subscription is None:  # cancelled or terminated (or not yet subscribed)
            return
        before = length_hint(elements)
        on_next = self._on_next
        try:
            if on_next is None:  # nothing to call: each element is just consumed
                deque(elements, maxlen=0)
            else:
                for element in elements:
                    on_next(element)
                    if self._done:
                        break
        except Exception as exc:
            self.cancel()
            self._terminal_error(exc)
            return
        consumed = self._consumed + before - length_hint(elements)
        if consumed < self._limit:
            self._consumed = consumed
            return
        self._consumed = 0
        subscription = self._subscription
        if subscription is not None:
            subscription.request(consumed)

    def on_error(self, error: Exception) -> None:
        """Call the ``on_error`` callable (or report the error); the stream is over."""
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        if self._done:
            return
        self._done = True
        self._subscription = None
        self._terminal_error(error)

    def _terminal_error(self, error: Exception) -> None:
        try:
            if self._on_error is None:
                report_undeliverable(error)
            else:
                self._on_error(error)
        except Exception as exc:
            report_undeliverable(exc)
        finally:
            self._terminated.set()

    def on_complete(self) -> None:
        """Call the ``on_complete`` callable."""
        if self._done:
            return
        self._done = True
        self._subscription = None
        try:
            if self._on_complete is not None:
                self._on_complete()
        except Exception as exc:
            report_undeliverable(exc)
        finally:
            self._terminated.set()

    def cancel(self) -> None:
        """Cancel the subscription; no callable is called afterwards."""
        self._done = True
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            subscription.cancel()
        self._terminated.set()

    def wait_terminated(self, timeout: float | None = None) -> bool:
        """Block until the stream ended or was cancelled; ``False`` on timeout (seconds)."""
        return self._terminated.wait(timeout)


class _Outcome(Generic[T]):
    __slots__ = ("done", "error", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: Exception | None = None
        self.value: T | None = None


def _wait(
    outcome: _Outcome[Any], subscriber: CallbackSubscriber[Any], timeout: float | None
) -> None:
    if not outcome.done.wait(timeout):
        subscriber.cancel()
        raise TimeoutError(f"the flow did not terminate within {timeout} s")
    if outcome.error is not None:
        raise outcome.error


def collect_list(publisher: Publisher[T], timeout: float | None = None) -> list[T]:
    """Subscribe with unbounded demand and return every element once the stream completes.

    Raises:
        Exception: the stream's error, as signalled by ``on_error``.
        TimeoutError: the stream did not terminate within ``timeout`` seconds (it is then
            cancelled).
    """
    items: list[T] = []
    outcome: _Outcome[None] = _Outcome()

    def failed(error: Exception) -> None:
        outcome.error = error
        outcome.done.set()

    subscriber: CallbackSubscriber[T] = CallbackSubscriber(
        items.append, failed, outcome.done.set, prefetch=MAX_DEMAND
    )
    publisher.subscribe(subscriber)
    _wait(outcome, subscriber, timeout)
    return items


def for_each(
    publisher: Publisher[T], fn: Callable[[T], object], timeout: float | None = None
) -> None:
    """Call ``fn`` on every element, blocking until the stream completes.

    Raises:
        Exception: the stream's error, or the exception ``fn`` raised (the stream is then
            cancelled).
        TimeoutError: no termination within ``timeout`` seconds.
    """
    outcome: _Outcome[None] = _Outcome()

    def failed(error: Exception) -> None:
        outcome.error = error
        outcome.done.set()

    subscriber: CallbackSubscriber[T] = CallbackSubscriber(fn, failed, outcome.done.set)
    publisher.subscribe(subscriber)
    _wait(outcome, subscriber, timeout)


NO_DEFAULT: Any = object()


def first(publisher: Publisher[T], default: T = NO_DEFAULT, timeout: float | None = None) -> T:
    """Request one element, cancel, and return it.

    Raises:
        LookupError: the stream completed empty and no ``default`` was given.
        Exception: the stream's error.
        TimeoutError: no element and no termination within ``timeout`` seconds.
    """
    outcome: _Outcome[T] = _Outcome()
    holder: list[CallbackSubscriber[T]] = []

    def got(element: T) -> None:
        outcome.value = element
        holder[0].cancel()
        outcome.done.set()

    def failed(error: Exception) -> None:
        outcome.error = error
        outcome.done.set()

    subscriber: CallbackSubscriber[T] = CallbackSubscriber(
        got, failed, outcome.done.set, prefetch=1
    )
    holder.append(subscriber)
    publisher.subscribe(subscriber)
    _wait(outcome, subscriber, timeout)
    if outcome.value is None:
        if default is NO_DEFAULT:
            raise LookupError("first(): the flow completed without any element")
        return default
    return outcome.value


class BlockingIterator(Subscriber[T]):
    """``for x in flow``: a blocking iterator with a bounded prefetch buffer.

    Args:
        prefetch: the buffer bound and the initial demand; more is requested when 75% of
            it has been consumed, so at most ``prefetch`` elements are ever buffered.
        timeout: the longest wait for one element, in seconds (``None``: no limit).

    Backpressure:
        Demand never exceeds free buffer space: ``buffered + outstanding <= prefetch``.

    Concurrency:
        Elements may arrive on any thread; the consuming thread blocks on a condition
        variable. ``close()`` (or leaving a ``with`` block) cancels the subscription.

    Raises:
        Exception: from ``__next__``, the stream's error once the buffered elements are
            consumed.
        TimeoutError: from ``__next__``, when no element arrived within ``timeout``.
    """

    __slots__ = (
        "_buffer",
        "_closed",
        "_condition",
        "_consumed",
        "_error",
        "_finished",
        "_high_water",
        "_limit",
        "_prefetch",
        "_subscription",
        "_timeout",
        "_waiting",
    )

    def __init__(self, prefetch: int = 256, timeout: float | None = None) -> None:
        check_positive("prefetch", prefetch)
        self._prefetch = prefetch
        self._limit = replenish_threshold(prefetch)
        self._timeout = timeout
        self._buffer: deque[T] = deque()
        self._condition = threading.Condition(threading.Lock())
        self._subscription: Subscription | None = None
        self._finished = False
        self._error: Exception | None = None
        self._consumed = 0
        self._waiting = False
        self._closed = False
        self._high_water = 0

    def on_subscribe(self, subscription: Subscription) -> None:
        """Request ``prefetch`` elements (Rule 2.1)."""
        if not accept_subscription(subscription, self._subscription is None and not self._closed):
            return
        self._subscription = subscription
        subscription.request(self._prefetch)

    def on_next(self, element: T) -> None:
        """Buffer ``element`` and wake the consumer."""
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        with self._condition:
            self._buffer.append(element)
            size = len(self._buffer)
            self._high_water = max(self._high_water, size)
            if self._waiting:
                self._condition.notify()

    def on_error(self, error: Exception) -> None:
        """Remember the error; ``__next__`` raises it after the buffered elements."""
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        with self._condition:
            self._error = error
            self._finished = True
            self._condition.notify()

    def on_complete(self) -> None:
        """Remember completion; ``__next__`` raises ``StopIteration`` after the buffer."""
        with self._condition:
            self._finished = True
            self._condition.notify()

    def __iter__(self) -> BlockingIterator[T]:
        return self

    def __next__(self) -> T:
        with self._condition:
            while not self._buffer:
                if self._finished or self._closed:
                    error, self._error = self._error, None
                    self._subscription = None
                    if error is not None:
                        raise error
                    raise StopIteration
                self._waiting = True
                try:
                    if not self._condition.wait(self._timeout):
                        raise TimeoutError(f"no element arrived within {self._timeout} s")
                finally:
                    self._waiting = False
            element = self._buffer.popleft()
        self._consumed += 1
        if self._consumed == self._limit:
            self._consumed = 0
            subscription = self._subscription
            if subscription is not None:
                subscription.request(self._limit)  # may emit synchronously into the buffer
        return element

    @property
    def high_water_mark(self) -> int:
        """The most elements ever buffered at once (never more than ``prefetch``)."""
        return self._high_water

    def close(self) -> None:
        """Cancel the subscription and drop the buffer; iteration then stops."""
        with self._condition:
            self._closed = True
            self._buffer.clear()
            subscription, self._subscription = self._subscription, None
        if subscription is not None:
            subscription.cancel()

    def __enter__(self) -> BlockingIterator[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
