"""``subscribe_on``: subscribe, request and cancel upstream on an executor."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, TypeVar

from .._core import (
    DrainLoop,
    ExecutorRejectedError,
    ExecutorSubscribable,
    PassThroughStage,
    SingleUpstreamOperator,
    StageStatistics,
    StreamInterruptedError,
    accept_subscription,
    add_demand,
    cancel_quietly,
    check_subscriber,
    report_undeliverable,
    report_violation,
    signal_error_only,
    signal_on_error,
    signal_on_subscribe,
)
from ._executors import as_executor
from ._publish_on import _Delegate

if TYPE_CHECKING:
    import asyncio
    from concurrent.futures import Executor

    from ..api import Publisher, Subscriber, Subscription

__all__ = ["SubscribeOnOperator"]

T = TypeVar("T")


class SubscribeOnOperator(SingleUpstreamOperator[T]):
    """``Flow.subscribe_on``: upstream ``subscribe``, ``request`` and ``cancel`` on an executor.

    A synchronous source therefore produces on the executor, not on the subscriber's
    thread. Elements are passed through as they arrive, on the thread that emits them.

    Marble::

        upstream (on executor):  -1-2-3-|
        downstream:              -1-2-3-|

    Backpressure:
        Demand is forwarded unchanged; requests made while a forwarding task is pending
        are added together and sent as one ``request``.

    Concurrency:
        Calls to the upstream subscription are serialised by a ``DrainLoop`` on the
        executor (Rule 2.7); ``request``/``cancel`` return at once (Rules 3.4, 3.5). If
        the executor refuses a task the subscriber gets ``on_error(ExecutorRejectedError)``.
        An upstream whose ``subscribe`` or ``request`` raises (Rules 1.9, 3.16 broken) is
        cancelled and its error signalled; a ``KeyboardInterrupt``/``SystemExit`` raised
        there ends the stream with ``StreamInterruptedError`` and is re-raised on the
        executor, never swallowed.
    """

    __slots__ = ("_executor",)

    def __init__(
        self, upstream: Publisher[T], executor: Executor | asyncio.AbstractEventLoop
    ) -> None:
        super().__init__(upstream)
        self._executor = as_executor(executor)

    @property
    def name(self) -> str:
        return "subscribe_on"

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Submit the upstream subscription to the executor (Rule 1.9 checked here)."""
        check_subscriber(subscriber)
        upstream = self._upstream
        if isinstance(upstream, ExecutorSubscribable):
            # An iterable source does nothing at subscribe time: what matters is where it
            # emits. Its emitter runs on the executor (every request elected there), which
            # is subscribe_on without a forwarding stage.
            upstream.subscribe_on_executor(subscriber, self._executor)
            self._track(_Delegate(upstream.last_statistics))
            return
        stage: _SubscribeOn[T] = _SubscribeOn(subscriber, self._executor)
        self._track(stage)
        try:
            self._executor.submit(stage.subscribe_to, self._upstream)
        except Exception as exc:
            rejected = ExecutorRejectedError(f"the executor refused the subscribe task: {exc!r}")
            rejected.__cause__ = exc
            signal_error_only(subscriber, rejected)


class _SubscribeOn(PassThroughStage[T]):
    __slots__ = (
        "__weakref__",
        "_bad",
        "_cancelled",
        "_forwarded_cancel",
        "_forwarder",
        "_loop",
        "_pending",
    )

    def __init__(self, downstream: Subscriber[T], executor: Executor) -> None:
        super().__init__(downstream)
        self._pending = 0
        self._bad: list[object] = []
        self._cancelled = False
        self._forwarded_cancel = False
        self._forwarder: int | None = None  # the thread inside upstream.request, if any
        self._loop = DrainLoop(
            self._forward, executor=executor, on_rejected=self._rejected, on_failure=self._failed
        )

    def subscribe_to(self, upstream: Publisher[T]) -> None:
        """The subscribe task, on the executor: ``upstream.subscribe(self)``, guarded."""
        try:
            upstream.subscribe(self)
        except Exception as exc:  # the upstream broke Rule 1.9
            self._failed(exc)
        except BaseException as exc:  # KeyboardInterrupt, SystemExit: end the stream, re-raise
            interrupted = StreamInterruptedError(
                f"the stream's task was interrupted by {type(exc).__name__}"
            )
            interrupted.__cause__ = exc
            report_undeliverable(exc)
            self._failed(interrupted)
            raise

    def statistics(self) -> StageStatistics:
        return StageStatistics(
            requested=self._requested,
            delivered=self._delivered,
            buffered=0,
            cancelled=self._cancelled,
            terminated=self._done,
        )

    def on_subscribe(self, subscription: Subscription) -> None:
        if not accept_subscription(subscription, self._upstream is None):
            return
        self._upstream = subscription
        downstream = self._downstream
        # Own the forwarding loop while downstream runs on_subscribe: a request made there
        # must not reach upstream (and trigger on_next on another executor thread) before
        # on_subscribe has returned (Rule 1.3).
        guard = self._loop.guard
        guard.acquire()
        if downstream is None or not signal_on_subscribe(downstream, self):
            self.cancel()
        if guard.release():
            self._loop.start_owned()

    def on_next(self, element: T) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        downstream = self._downstream
        if downstream is None or self._done:
            return
        self._delivered += 1
        try:
            downstream.on_next(element)
        except Exception as exc:
            report_violation(downstream, "on_next", exc)
            self.cancel()

    def request(self, n: int) -> None:
        with self._lock:
            if self._cancelled:
                return
            if type(n) is int and n > 0:
                self._pending = add_demand(self._pending, n)
                self._requested = add_demand(self._requested, n)
            else:
                self._bad.append(n)  # upstream signals the Rule 3.9 error, in order
        self._loop.schedule()

    def cancel(self) -> None:
        """Cancel upstream on the executor; at once when called from inside our request.

        A synchronous upstream emits inside the ``request`` the loop forwarded; a cancel
        from the ``on_next`` it leads to (same thread, nested: Rule 3.3) goes upstream at
        once, since the loop that would forward it is the call still on the stack.
        """
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            nested = self._forwarder == threading.get_ident()
            if nested:
                self._forwarded_cancel = True
        self._downstream = None  # Rule 3.13
        upstream = self._upstream
        if nested and upstream is not None:
            cancel_quietly(upstream)
            return
        self._loop.schedule()

    def _forward(self) -> bool:
        upstream = self._upstream
        if upstream is None or self._forwarded_cancel:
            return False
        with self._lock:
            cancelled = self._cancelled
            pending, self._pending = self._pending, 0
            bad, self._bad = self._bad, []
        if cancelled:
            self._forwarded_cancel = True
            upstream.cancel()
            return False
        self._forwarder = threading.get_ident()
        try:
            for n in bad:
                upstream.request(n)  # type: ignore[arg-type]
            if pending:
                upstream.request(pending)
        finally:
            self._forwarder = None
        return False

    def _rejected(self, error: ExecutorRejectedError) -> None:
        self._failed(error)

    def _failed(self, error: Exception) -> None:
        """End the stream with ``error``: cancel upstream, one ``on_error`` downstream."""
        self._loop.guard.retire()
        upstream = self._upstream
        if upstream is not None:
            cancel_quietly(upstream)
        downstream = self._end()
        if downstream is not None:
            signal_on_error(downstream, error)
        else:
            report_undeliverable(error)
