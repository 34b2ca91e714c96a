"""``to_async_iterator``: consume any publisher with ``async for``, with bounded prefetch."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from typing import TYPE_CHECKING, Generic, TypeVar

from .._exceptions import ProtocolViolationError
from .._serialized import SerializedSubscription
from .._statistics import StreamStatistics
from ..api import Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from types import TracebackType
    from typing import Self

__all__ = ["AsyncIteratorSubscriber", "to_async_iterator"]

T = TypeVar("T")


class AsyncIteratorSubscriber(Subscriber[T], Generic[T]):
    """A subscriber that is also an async iterator and an async context manager.

    Created by ``to_async_iterator``; see there. It subscribes on first use (``async with``
    or the first ``__anext__``) from inside a running event loop, requests ``prefetch``
    elements, and requests again each time three quarters of that were consumed, so the
    buffer never holds more than ``prefetch`` elements.

    Concurrency: the publisher may signal from any thread; signals only touch a
    lock-guarded deque and wake the waiting coroutine with ``loop.call_soon_threadsafe``.
    The loop thread never blocks.
    """

    def __init__(self, publisher: Publisher[T], *, prefetch: int = 256) -> None:
        if type(prefetch) is not int or prefetch < 1:
            raise ValueError(f"prefetch must be an int >= 1, got {prefetch!r}")
        if publisher is None:
            raise TypeError("to_async_iterator() requires a publisher, got None")
        self._publisher: Publisher[T] | None = publisher
        self._prefetch = prefetch
        self._replenish_at = max(1, prefetch - prefetch // 4)
        self._lock = threading.Lock()
        self._buffer: deque[T] = deque()
        self._subscription: SerializedSubscription | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._error: Exception | None = None
        self._completed = False
        self._closed = False  # aclose() or the end of the stream was handed out
        self._consumed = 0  # since the last request
        self._requested = 0
        self._received = 0

    # -- async iterator / context manager -------------------------------------------------

    def __aiter__(self) -> Self:
        return self

    async def __aenter__(self) -> Self:
        self._ensure_subscribed()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def __anext__(self) -> T:
        """The next element.

        Raises:
            StopAsyncIteration: after ``on_complete``, or once closed.
            Exception: the error of ``on_error``, once, after the elements before it.
        """
        self._ensure_subscribed()
        while True:
            with self._lock:
                if self._buffer:
                    element = self._buffer.popleft()
                    self._consumed += 1
                    request = 0
                    if self._consumed >= self._replenish_at and not self._closed:
                        request, self._consumed = self._consumed, 0
                        self._requested += request
                    subscription = self._subscription
                    waiter = None
                elif self._error is not None and not self._closed:
                    self._closed = True
                    raise self._error
                elif self._completed or self._closed:
                    self._closed = True
                    raise StopAsyncIteration
                else:  # nothing yet: wait; the signal that fills the buffer resolves it
                    assert self._loop is not None  # set by _ensure_subscribed
                    waiter = self._loop.create_future()
                    self._waiter = waiter
            if waiter is None:
                if request and subscription is not None:
                    subscription.request(request)  # replenish (Rule 2.1), outside the lock
                return element
            await waiter

    async def aclose(self) -> None:
        """Cancel the subscription and drop buffered elements; idempotent (Rule 2.6)."""
        with self._lock:
            self._closed = True
            self._buffer.clear()
            subscription = self._subscription
            self._publisher = None
        if subscription is not None:
            subscription.cancel()

    def statistics(self) -> StreamStatistics:
        """Requested and received counts, elements buffered now, cancelled, terminated."""
        with self._lock:
            return StreamStatistics(
                requested=self._requested,
                delivered=self._received,
                buffered=len(self._buffer),
                cancelled=self._closed,
                terminated=self._completed or self._error is not None,
            )

    def _ensure_subscribed(self) -> None:
        if self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        publisher = self._publisher
        if publisher is not None:
            publisher.subscribe(self)

    # -- the Subscriber interface (any thread) --------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Store the subscription and request ``prefetch`` elements (Rules 2.5, 3.10)."""
        if subscription is None:
            raise TypeError("Rule 2.13: on_subscribe(subscription) must not be None")
        with self._lock:
            reject = self._subscription is not None or self._closed
            if not reject:
                self._subscription = SerializedSubscription(subscription)
                self._requested += self._prefetch
            serialized = self._subscription
        if reject:
            subscription.cancel()  # Rule 2.5
        elif serialized is not None:
            serialized.request(self._prefetch)

    def on_next(self, element: T) -> None:
        """Buffer ``element`` and wake the consumer."""
        if element is None:
            raise TypeError("Rule 2.13: on_next(element) must not be None")
        with self._lock:
            if self._closed:
                return  # Rule 2.8: late elements after cancel are dropped
            self._received += 1
            if len(self._buffer) >= self._prefetch:  # the publisher broke Rule 1.1
                self._error = ProtocolViolationError(
                    f"Rule 1.1: publisher sent more than the {self._prefetch} elements requested",
                    rule="1.1",
                )
                subscription = self._subscription
            else:
                self._buffer.append(element)
                subscription = None
        if subscription is not None:
            subscription.cancel()
        self._wake()

    def on_error(self, error: Exception) -> None:
        """Keep ``error`` for ``__anext__`` to raise after the buffered elements."""
        if error is None:
            raise TypeError("Rule 2.13: on_error(error) must not be None")
        with self._lock:
            if self._error is None:
                self._error = error
        self._wake()

    def on_complete(self) -> None:
        """Mark the end; ``__anext__`` raises ``StopAsyncIteration`` after the buffer."""
        with self._lock:
            self._completed = True
        self._wake()

    def _wake(self) -> None:
        with self._lock:
            waiter, self._waiter = self._waiter, None
        if waiter is None:
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            waiter.get_loop().call_soon_threadsafe(_resolve, waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def to_async_iterator(
    publisher: Publisher[T], *, prefetch: int = 256
) -> AsyncIteratorSubscriber[T]:
    """Consume ``publisher`` with ``async for``, buffering at most ``prefetch`` elements.

    Args:
        publisher: any publisher; it may signal from any thread.
        prefetch: the demand requested up front, and the bound of the buffer, in elements
            (``>= 1``). Demand is replenished each time three quarters were consumed.

    Returns:
        An async iterator that is also an async context manager. Leaving the ``async with``
        block (or calling ``aclose()``) cancels the subscription.

    Raises:
        ValueError: if ``prefetch < 1``.
        TypeError: if ``publisher`` is ``None``.

    From ``__anext__``: the stream's ``on_error`` exception, after the elements that came
    before it; ``ProtocolViolationError`` (Rule 1.1) if the publisher sends more than was
    requested.

    Example:
        >>> import asyncio
        >>> from reactive_streams.reference import RangePublisher
        >>> async def main() -> list[int]:
        ...     async with to_async_iterator(RangePublisher(0, 5), prefetch=2) as elements:
        ...         return [element async for element in elements]
        >>> asyncio.run(main())
        [0, 1, 2, 3, 4]
    """
    return AsyncIteratorSubscriber(publisher, prefetch=prefetch)
