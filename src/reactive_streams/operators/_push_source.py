"""``Flow.push_source``: a bounded queue that callbacks offer to, read as a publisher.

Reactor's ``Sinks.many().unicast().onBackpressureBuffer()`` and Akka's
``Source.queue(bufferSize, overflowStrategy)``: producers that cannot be pulled (a
websocket client's callback, a sensor SDK, a message handler) ``offer`` elements; the one
subscriber reads them within its demand. The buffer is bounded, and what a full buffer
does is a strategy: wait for room (``"backpressure"``), or one of the kit's overflow
strategies (``"drop_latest"``, ``"drop_oldest"``, ``"error"``, decided by ``admit``).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .._core import (
    Admission,
    EmitLoopSubscription,
    MissingBackpressureError,
    Operator,
    StageStatistics,
    admit,
    check_positive,
    check_subscriber,
    report_undeliverable,
    signal_error_only,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ..api import Subscriber

__all__ = ["OfferResult", "PushOverflow", "PushSource"]

T = TypeVar("T")

PushOverflow = Literal["backpressure", "error", "drop_oldest", "drop_latest"]
"""What a full push source does with an offer: wait for room, or an ``Overflow`` strategy."""

_STRATEGIES = ("backpressure", "error", "drop_oldest", "drop_latest")

_BATCH = 1024
"""Elements delivered per pass at most, before the emit loop checks for new work."""


class OfferResult(enum.Enum):
    """What became of an offered element.

    * ``ENQUEUED``: the element is in the buffer (or already delivered). With
      ``"drop_oldest"`` the oldest buffered element may have been dropped for it.
    * ``DROPPED``: the buffer was full and ``"drop_latest"`` dropped this element.
    * ``FULL``: the buffer was full under ``"backpressure"`` and no room came before the
      timeout (at once for ``try_offer``); nothing changed, offer it again later.
    * ``FAILED``: the buffer was full under ``"error"``: the stream now fails with
      ``MissingBackpressureError`` and the element was not taken.
    * ``CLOSED``: the source is over (``complete``, ``error``, an overflow failure, or
      the subscriber cancelled); the element was not taken.
    """

    ENQUEUED = "enqueued"
    DROPPED = "dropped"
    FULL = "full"
    FAILED = "failed"
    CLOSED = "closed"


class PushSource(Operator[T]):
    """A bounded buffer fed by ``offer`` from any thread or event loop; one subscriber reads it.

    Made by ``Flow.push_source(capacity, overflow=...)``, which returns it with the
    ``Flow`` that reads it. Elements offered before the subscriber arrives wait in the
    buffer. ``complete()`` ends the stream after the buffered elements; ``error(exc)``
    ends it at once, discarding what is buffered (Reactor's and Akka's choice: a failed
    source is over).

    Marble (``capacity=2``, ``overflow="drop_latest"``)::

        offer:    -1-2-3-4-5-complete
        request:  (1)........(9)
        result:   -1.........-3-4-|     dropped: 5 (the buffer held 3, 4)

    Args:
        capacity: elements the buffer holds at most, delivered or not yet requested
            (``>= 1``). An element offered while the subscriber has demand passes
            through the buffer at once, on the offering thread.
        overflow: what an offer to a full buffer does. ``"backpressure"``: ``offer``
            waits for room (``try_offer`` returns ``FULL``); ``"drop_latest"``: the new
            element is dropped; ``"drop_oldest"``: the oldest buffered element is
            dropped for it; ``"error"``: the stream fails with
            ``MissingBackpressureError``. Every drop is counted in
            ``statistics().dropped``.
        on_drop: called with each dropped element, on the offering thread, without any
            lock held; an exception from it goes to the undeliverable hook.

    Backpressure:
        The subscriber's demand paces delivery; the buffer absorbs at most ``capacity``
        elements beyond it, and the strategy decides the rest. With ``"backpressure"``
        the producers wait: a slow subscriber slows every ``offer``.

    Concurrency:
        Unicast: one subscriber; a second one gets ``on_subscribe`` then
        ``on_error(RuntimeError)`` (Rule 1.9), even after the first one is gone. Offers
        may come from any number of threads and event loops at once; the order of the
        buffer is the order in which offers took the lock. Every signal comes from the
        subscription's one emit loop (``EmitLoopSubscription``): usually on the thread
        of the ``offer`` or ``request`` that found it idle, so ``on_next`` may run on an
        offering thread or event loop (Rule 1.3 holds: never two at once). An ``offer``
        that would wait, made from inside ``on_next`` (where the wait could never end),
        returns ``FULL`` at once.

    Raises:
        TypeError: ``capacity`` is not an int.
        ValueError: ``capacity < 1`` or an unknown ``overflow``.
    """

    __slots__ = (
        "_async_waiters",
        "_buffer",
        "_capacity",
        "_delivering",
        "_dropped",
        "_error",
        "_high_water",
        "_lock",
        "_offered",
        "_on_drop",
        "_overflow",
        "_room",
        "_state",
        "_subscribed",
        "_subscription",
        "_waiting",
    )

    def __init__(
        self,
        capacity: int,
        overflow: PushOverflow = "backpressure",
        *,
        on_drop: Callable[[T], object] | None = None,
    ) -> None:
        super().__init__()
        self._capacity = check_positive("capacity", capacity)
        if overflow not in _STRATEGIES:
            raise ValueError(
                "overflow must be 'backpressure', 'error', 'drop_oldest' or 'drop_latest', "
                f"got {overflow!r}"
            )
        self._overflow: PushOverflow = overflow
        self._on_drop = on_drop
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)  # blocking offers wait here
        self._async_waiters: list[asyncio.Future[None]] = []
        self._waiting = 0  # blocking offers waiting on _room
        self._buffer: deque[T] = deque()
        # "open", then "completed" (delivers the buffer first), "failed" or "cancelled"
        self._state = "open"
        self._error: Exception | None = None
        self._dropped = 0
        self._offered = 0
        self._high_water = 0
        self._subscribed = False
        self._subscription: _PushSubscription[T] | None = None
        self._delivering: int | None = None  # the thread inside on_next, if any

    @property
    def name(self) -> str:
        return "push_source"

    @property
    def capacity(self) -> int:
        """Elements the buffer holds at most."""
        return self._capacity

    @property
    def closed(self) -> bool:
        """Whether offers are refused: completed, failed, or the subscriber cancelled."""
        with self._lock:
            return self._state != "open"

    # -- the Publisher side ---------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Serve ``subscriber`` from the buffer; only the first subscriber (Rules 1.9, 1.11).

        Raises:
            TypeError: ``subscriber`` is ``None`` (Rule 1.9).
        """
        check_subscriber(subscriber)
        with self._lock:
            first = not self._subscribed
            self._subscribed = True
            if first:
                subscription = _PushSubscription(subscriber, self)
                self._subscription = subscription
        if not first:
            signal_error_only(
                subscriber,
                RuntimeError(
                    "Rule 1.9: a push source serves one subscriber; put share() or "
                    "publish() after it to serve several"
                ),
            )
            return
        self._track(subscription)
        subscription.start()

    # -- the producer side ----------------------------------------------------------------

    def try_offer(self, element: T) -> OfferResult:
        """Offer ``element`` without waiting: ``offer(element, timeout=0)``.

        Raises:
            TypeError: ``element`` is ``None``, which is never an element (Rule 2.13).
        """
        return self.offer(element, timeout=0)

    def offer(self, element: T, timeout: float | None = None) -> OfferResult:
        """Put ``element`` into the buffer; under ``"backpressure"`` wait for room.

        Args:
            element: the element; never ``None``.
            timeout: seconds to wait for room under ``"backpressure"``; ``None`` waits
                until there is room or the source closes (a cancel wakes the wait at
                once, so it never outlives the stream). Other strategies never wait.

        Returns:
            What became of the element (``OfferResult``): ``FULL`` once the timeout
            passed, ``CLOSED`` once the source is over.

        Raises:
            TypeError: ``element`` is ``None`` (Rule 2.13).
            ValueError: ``timeout < 0``.
        """
        _check_element(element)
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout must be >= 0 or None, got {timeout}")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                result = self._try_locked(element)
                if result is not None:
                    break
                # Full under "backpressure": wait for room, unless this wait cannot end.
                if self._delivering == threading.get_ident():
                    return OfferResult.FULL
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return OfferResult.FULL
                self._waiting += 1
                try:
                    self._room.wait(left)
                finally:
                    self._waiting -= 1
        return self._after_offer(result)

    async def offer_async(self, element: T, timeout: float | None = None) -> OfferResult:
        """``offer`` for a coroutine: awaits room without blocking the event loop.

        Args and results as ``offer``. The element may be delivered (``on_next``) on
        the event loop's thread, before this returns. Cancelling the awaiting task
        leaves the element out of the buffer (and raises ``CancelledError``).

        Raises:
            TypeError: ``element`` is ``None`` (Rule 2.13).
            ValueError: ``timeout < 0``.
        """
        _check_element(element)
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout must be >= 0 or None, got {timeout}")
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            with self._lock:
                result = self._try_locked(element)
                if result is None:
                    if self._delivering == threading.get_ident():
                        return OfferResult.FULL
                    waiter: asyncio.Future[None] = loop.create_future()
                    self._async_waiters.append(waiter)
            if result is not None:
                return self._after_offer(result)
            try:
                if deadline is None:
                    await waiter
                else:
                    left = deadline - loop.time()
                    if left <= 0:
                        return OfferResult.FULL
                    try:
                        await asyncio.wait_for(waiter, left)
                    except TimeoutError:
                        return OfferResult.FULL
            finally:
                with self._lock:
                    if waiter in self._async_waiters:
                        self._async_waiters.remove(waiter)

    def complete(self) -> bool:
        """End the stream after the buffered elements (``on_complete``, Rule 1.5).

        Returns ``False`` (and does nothing) if the source was already over.
        """
        return self._close("completed", None)

    def error(self, error: Exception) -> bool:
        """Fail the stream now with ``error`` (Rule 1.4); buffered elements are discarded.

        Returns ``False`` (and does nothing) if the source was already over.

        Raises:
            TypeError: ``error`` is not an ``Exception``.
        """
        if not isinstance(error, Exception):
            raise TypeError(f"error() needs an Exception, got {type(error).__qualname__}")
        return self._close("failed", error)

    def statistics(self) -> StageStatistics:
        """A snapshot: the subscription's demand and deliveries, and the buffer's counters.

        ``buffered`` is the buffer's length now, ``high_water_mark`` the most it ever
        held (never above ``capacity``), ``dropped`` the elements dropped by the
        overflow strategy.
        """
        with self._lock:
            subscription = self._subscription
            buffered = len(self._buffer)
            high_water = self._high_water
            dropped = self._dropped
            state = self._state
        if subscription is None:
            return StageStatistics(
                requested=0,
                delivered=0,
                buffered=buffered,
                cancelled=state == "cancelled",
                terminated=False,
                high_water_mark=high_water,
                dropped=dropped,
            )
        base = EmitLoopSubscription.statistics(subscription)
        return StageStatistics(
            requested=base.requested,
            delivered=base.delivered,
            buffered=buffered,
            cancelled=base.cancelled,
            terminated=base.terminated,
            high_water_mark=high_water,
            dropped=dropped,
        )

    # -- under the lock -------------------------------------------------------------------

    def _try_locked(self, element: T) -> tuple[OfferResult, Any] | None:
        """One attempt: the result and a dropped element, or ``None`` (wait for room)."""
        if self._state != "open":
            return OfferResult.CLOSED, None
        buffer = self._buffer
        overflow = self._overflow
        outcome: Admission
        dropped: Any
        if overflow == "backpressure":
            if len(buffer) >= self._capacity:
                return None
            buffer.append(element)
            outcome, dropped = "enqueued", None
        else:
            outcome, dropped = admit(buffer, self._capacity, overflow, element)
        if dropped is not None:
            self._dropped += 1
        if outcome == "enqueued":
            self._offered += 1
            self._high_water = max(self._high_water, len(buffer))
            return OfferResult.ENQUEUED, dropped
        if outcome == "dropped":
            return OfferResult.DROPPED, dropped
        self._state = "failed"
        self._error = MissingBackpressureError(
            f"push_source: the buffer of {self._capacity} elements is full and the "
            "overflow strategy is 'error'"
        )
        self._wake_waiters_locked()
        return OfferResult.FAILED, None

    def _after_offer(self, outcome: tuple[OfferResult, Any]) -> OfferResult:
        """Without the lock: report a drop, and wake the emit loop."""
        result, dropped = outcome
        if dropped is not None and self._on_drop is not None:
            try:
                self._on_drop(dropped)
            except Exception as exc:
                report_undeliverable(exc)
        if result in (OfferResult.ENQUEUED, OfferResult.FAILED):
            self._wake()
        return result

    def _wake(self) -> None:
        with self._lock:
            subscription = self._subscription
        if subscription is not None:
            subscription.wake()

    def _wake_waiters_locked(self) -> None:
        """There is room, or the source closed: every waiting offer looks again."""
        self._room.notify_all()
        for waiter in self._async_waiters:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits it
                waiter.get_loop().call_soon_threadsafe(_resolve, waiter)
        self._async_waiters.clear()

    def _close(self, state: str, error: Exception | None) -> bool:
        with self._lock:
            if self._state != "open":
                return False
            self._state = state
            self._error = error
            if error is not None:
                self._buffer.clear()
            self._wake_waiters_locked()
        self._wake()
        return True

    # -- the emit loop's side (the subscription calls these) ------------------------------

    def _take(self) -> Iterator[T]:
        """Buffered elements, one at a time, each taken out when the loop asks for it."""
        while True:
            with self._lock:
                if not self._buffer or self._state in ("failed", "cancelled"):
                    return
                element = self._buffer.popleft()
                if self._waiting or self._async_waiters:
                    self._wake_waiters_locked()
            yield element

    def _ended(self) -> tuple[bool, Exception | None]:
        """Whether the stream is over for the subscriber, and its error."""
        with self._lock:
            state = self._state
            if state == "failed":
                return True, self._error
            return state == "cancelled" or (state == "completed" and not self._buffer), None

    def _buffered(self) -> int:
        with self._lock:
            return len(self._buffer)

    def _subscription_closed(self) -> None:
        """The stream ended or was cancelled: refuse later offers, wake the waiting ones."""
        with self._lock:
            if self._state == "open":
                self._state = "cancelled"
            self._buffer.clear()
            self._wake_waiters_locked()

    def _set_delivering(self, thread: int | None) -> None:
        self._delivering = thread


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _check_element(element: object) -> None:
    if element is None:
        raise TypeError("Rule 2.13: None is never an element; offer() needs a value")


class _PushSubscription(EmitLoopSubscription[T]):
    """The one subscriber's subscription: the emit loop delivers the source's buffer."""

    __slots__ = ("__weakref__", "_source")

    def __init__(self, subscriber: Subscriber[T], source: PushSource[T]) -> None:
        super().__init__(subscriber, batch_size=_BATCH)
        self._source = source

    def statistics(self) -> StageStatistics:
        """The source's snapshot (the buffer's counters included)."""
        return self._source.statistics()

    def _open(self) -> None:
        pass  # offers before the subscriber are already in the buffer

    def _emit(self, subscriber: Subscriber[T], count: int) -> int:
        source = self._source
        source._set_delivering(threading.get_ident())
        try:
            taken = source._take()
            elements = (element for _, element in zip(range(count), taken, strict=False))
            return self._deliver_each(subscriber, elements)
        finally:
            source._set_delivering(None)

    def _exhausted(self) -> bool:
        return self._source._ended()[0]

    def _failure(self) -> Exception | None:
        return self._source._ended()[1]

    def _close(self) -> None:
        self._source._subscription_closed()

    def _buffered(self) -> int:
        return self._source._buffered()
