"""``SyncSubscriber`` and ``ExecutorSubscriber``: subscriber base classes users subclass.

A user implements one method, ``when_next(element) -> bool`` (``False`` cancels), and
optionally ``when_complete()`` and ``when_error(error)``. The base classes carry the rules:

* the subscription is stored before the first ``request``, because a synchronous
  publisher may call ``on_next`` from inside it (Rule 3.10);
* a second ``on_subscribe`` is cancelled (Rule 2.5);
* ``None`` arguments raise ``TypeError`` to the caller (Rule 2.13);
* demand is requested in batches: ``batch_size`` up front, and the consumed amount again
  each time three quarters of a batch is consumed, so there are never more than
  ``batch_size`` elements outstanding and no stop-and-wait per element (Rule 2.1);
* ``request`` and ``cancel`` go through a ``SerializedSubscription``, so they are serial
  even when the user cancels from another thread while ``on_next`` requests (Rule 2.7);
* nothing calls the subscription from ``on_complete``/``on_error`` (Rule 2.3), and the
  subscription counts as cancelled after them (Rule 2.4);
* a ``when_next`` that raises cancels the subscription and is passed to ``when_error``:
  the failure is not lost, and the subscriber itself still returns normally (Rule 2.13).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import deque
from typing import TYPE_CHECKING, Generic, TypeVar

from .._core import (
    DrainLoop,
    SerializedSubscription,
    StreamStatistics,
    check_positive,
    replenish_threshold,
    report_undeliverable,
)
from ..api import Subscriber, Subscription

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from .._core import ExecutorRejectedError

__all__ = ["ExecutorSubscriber", "SyncSubscriber"]

T = TypeVar("T")


class _SubscriberCore(Generic[T]):
    """The signal handling shared by both base classes; its ``_handle_*`` run serially."""

    def __init__(self, batch_size: int) -> None:
        self._batch_size = check_positive("batch_size", batch_size)
        # Replenish when three quarters of a batch were consumed (at least 1 element).
        self._replenish_at = replenish_threshold(batch_size)
        self._lock = threading.Lock()
        self._subscription: SerializedSubscription | None = None
        self._done = False  # cancelled, or a terminal signal arrived
        self._terminated = threading.Event()
        self._error: Exception | None = None
        self._requested = 0
        self._received = 0
        self._consumed = 0  # since the last request

    # -- what users implement ---------------------------------------------------------------

    @abstractmethod
    def when_next(self, element: T) -> bool:
        """Handle one element; return ``False`` to cancel the subscription.

        An exception cancels the subscription and is passed to ``when_error``.
        """

    def when_complete(self) -> None:
        """Called once when the stream completes normally. The default does nothing."""

    def when_error(self, error: Exception) -> None:
        """Called once when the stream fails, or when ``when_next`` raised.

        The default does nothing: the error is kept in ``error`` and reported by
        ``wait_terminated`` callers who look.
        """

    # -- what users call ----------------------------------------------------------------------

    def cancel(self) -> None:
        """Cancel the subscription from any thread; idempotent (Rules 2.6, 3.5).

        Elements already under way may still arrive and are ignored (Rule 2.8).
        """
        with self._lock:
            if self._done:
                return
            self._done = True
            subscription = self._subscription
        if subscription is not None:
            subscription.cancel()
        self._terminated.set()

    def wait_terminated(self, timeout: float | None = None) -> bool:
        """Block until the stream completed, failed or was cancelled.

        Args:
            timeout: seconds to wait at most; ``None`` waits forever.

        Returns:
            ``True`` if it ended within ``timeout``, else ``False``.
        """
        return self._terminated.wait(timeout)

    @property
    def error(self) -> Exception | None:
        """The error the stream ended with (or that ``when_next`` raised), if any."""
        return self._error

    def statistics(self) -> StreamStatistics:
        """A snapshot: elements requested and received, buffered, cancelled, terminated."""
        with self._lock:
            return StreamStatistics(
                requested=self._requested,
                delivered=self._received,
                buffered=self._buffered(),
                cancelled=self._done,
                terminated=self._terminated.is_set(),
            )

    def _buffered(self) -> int:
        return 0

    # -- the rules, run serially ---------------------------------------------------------------

    def _handle_subscribe(self, subscription: Subscription) -> None:
        with self._lock:
            duplicate = self._subscription is not None or self._done
            if not duplicate:
                self._subscription = SerializedSubscription(subscription)  # Rule 3.10
                self._requested = self._batch_size
            serialized = self._subscription
        if duplicate:
            subscription.cancel()  # Rule 2.5: one active subscription at a time
            return
        if serialized is not None:
            serialized.request(self._batch_size)

    def _handle_next(self, element: T) -> None:
        if self._done:  # Rule 2.8: after cancel, late elements are ignored
            return
        self._received += 1
        try:
            keep_going = self.when_next(element)
        except Exception as exc:
            self._fail(exc)
            return
        if not keep_going:
            self.cancel()
            return
        self._consumed += 1
        if self._consumed >= self._replenish_at:
            count, self._consumed = self._consumed, 0
            with self._lock:
                self._requested += count
                subscription = None if self._done else self._subscription
            if subscription is not None:
                subscription.request(count)

    def _handle_error(self, error: Exception) -> None:
        # Rules 2.3 and 2.4: the subscription is over; never call it from here.
        with self._lock:
            if self._terminated.is_set():
                return
            self._done = True
            self._error = error
        self._call_terminal(self.when_error, error)

    def _handle_complete(self) -> None:
        with self._lock:
            if self._terminated.is_set():
                return
            self._done = True
        self._call_terminal(self.when_complete)

    def _fail(self, error: Exception) -> None:
        """``when_next`` raised: cancel upstream, keep the error, tell ``when_error``."""
        with self._lock:
            subscription = self._subscription
            self._done = True
            self._error = error
        if subscription is not None:
            subscription.cancel()
        self._call_terminal(self.when_error, error)

    def _call_terminal(self, method: object, *args: Exception) -> None:
        try:
            method(*args)  # type: ignore[operator]
        except Exception as exc:  # user code failed in a terminal handler: make it known
            report_undeliverable(exc)
        finally:
            self._terminated.set()


def _check_not_none(value: object, what: str) -> None:
    if value is None:
        raise TypeError(f"Rule 2.13: {what} must not be None")


class SyncSubscriber(_SubscriberCore[T], Subscriber[T], ABC):
    """A subscriber that handles each signal on the thread that delivers it.

    Subclass it and implement ``when_next``. Use it when handling an element is quick;
    for slow handling use ``ExecutorSubscriber``, so the publisher is not held up (Rule 2.2).

    Args:
        batch_size: elements requested at once, ``>= 1``: the most that can be outstanding.

    Raises:
        ValueError: if ``batch_size < 1``.

    Example:
        >>> from reactive_streams.reference import RangePublisher, SyncSubscriber
        >>> class Summer(SyncSubscriber[int]):
        ...     total = 0
        ...     def when_next(self, element: int) -> bool:
        ...         self.total += element
        ...         return True
        >>> summer = Summer(batch_size=16)
        >>> RangePublisher(0, 100).subscribe(summer)
        >>> summer.wait_terminated(timeout=5.0), summer.total
        (True, 4950)
    """

    def __init__(self, *, batch_size: int = 64) -> None:
        super().__init__(batch_size)

    def on_subscribe(self, subscription: Subscription) -> None:
        """Store the subscription, then request a first batch (Rules 2.1, 2.5, 3.10)."""
        _check_not_none(subscription, "on_subscribe(subscription)")
        self._handle_subscribe(subscription)

    def on_next(self, element: T) -> None:
        """Pass ``element`` to ``when_next`` and replenish demand (Rules 2.1, 2.8, 2.13)."""
        _check_not_none(element, "on_next(element)")
        self._handle_next(element)

    def on_error(self, error: Exception) -> None:
        """Pass ``error`` to ``when_error`` (Rules 2.3, 2.4, 2.10)."""
        _check_not_none(error, "on_error(error)")
        self._handle_error(error)

    def on_complete(self) -> None:
        """Call ``when_complete`` (Rules 2.3, 2.4, 2.9)."""
        self._handle_complete()


class ExecutorSubscriber(_SubscriberCore[T], Subscriber[T], ABC):
    """A subscriber that handles its signals in tasks on a ``concurrent.futures.Executor``.

    The signal methods only queue the signal and return at once (Rule 2.2), so a slow
    ``when_next`` never holds up the publisher's thread. At most one task per subscriber
    runs at a time, which makes the handling serial and gives each signal a happens-before
    edge to its handling (Rule 2.11). The queue is bounded by the demand the subscriber
    itself signalled: at most ``batch_size`` elements.

    Args:
        executor: where the handling runs; not shut down by the subscriber. If it refuses
            a task, the subscription is cancelled and ``when_error`` gets an
            ``ExecutorRejectedError``.
        batch_size: elements requested at once, ``>= 1``.

    Raises:
        ValueError: if ``batch_size < 1``.
    """

    def __init__(self, executor: Executor, *, batch_size: int = 64) -> None:
        super().__init__(batch_size)
        self._queue: deque[tuple[int, object]] = deque()
        self._drain_loop = DrainLoop(self._drain, executor=executor, on_rejected=self._on_rejected)

    _SUBSCRIBE, _NEXT, _ERROR, _COMPLETE = range(4)

    def on_subscribe(self, subscription: Subscription) -> None:
        """Queue the subscription; the task stores it and requests (Rules 2.1, 2.5, 3.10)."""
        _check_not_none(subscription, "on_subscribe(subscription)")
        self._enqueue(self._SUBSCRIBE, subscription)

    def on_next(self, element: T) -> None:
        """Queue ``element`` for ``when_next`` (Rules 2.2, 2.11, 2.13)."""
        _check_not_none(element, "on_next(element)")
        self._enqueue(self._NEXT, element)

    def on_error(self, error: Exception) -> None:
        """Queue ``error`` for ``when_error`` (Rules 2.3, 2.4, 2.10)."""
        _check_not_none(error, "on_error(error)")
        self._enqueue(self._ERROR, error)

    def on_complete(self) -> None:
        """Queue the completion for ``when_complete`` (Rules 2.3, 2.4, 2.9)."""
        self._enqueue(self._COMPLETE, None)

    def _enqueue(self, kind: int, value: object) -> None:
        with self._lock:
            if kind == self._NEXT and self._done:
                return  # Rule 2.8: a late element after cancel is ignored, not queued
            self._queue.append((kind, value))
        self._drain_loop.schedule()

    def _buffered(self) -> int:
        return sum(1 for kind, _ in self._queue if kind == self._NEXT)

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    return
                kind, value = self._queue.popleft()
            if kind == self._NEXT:
                self._handle_next(value)  # type: ignore[arg-type]
            elif kind == self._SUBSCRIBE:
                self._handle_subscribe(value)  # type: ignore[arg-type]
            elif kind == self._ERROR:
                self._handle_error(value)  # type: ignore[arg-type]
            else:
                self._handle_complete()

    def _on_rejected(self, error: ExecutorRejectedError) -> None:
        # No task can run; we own the drain loop, so we may handle the failure here.
        with self._lock:
            pending = list(self._queue)
            self._queue.clear()
        for kind, value in pending:
            if kind == self._SUBSCRIBE:  # never handled: cancel it without requesting
                value.cancel()  # type: ignore[attr-defined]
        self._fail(error)
