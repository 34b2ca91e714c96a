"""``tap``/``do_on_*`` and ``log``: look at every signal without changing the stream."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .._core import (
    MAX_DEMAND,
    BufferedStage,
    StageOperator,
    accept_subscription,
    report_undeliverable,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..api import Publisher, Subscriber, Subscription

__all__ = ["LOGGER_NAME", "TapCallbacks", "TapOperator"]

T = TypeVar("T")

LOGGER_NAME = "reactive_streams"
"""The logger ``Flow.log`` writes to."""


@dataclass(frozen=True, slots=True)
class TapCallbacks:
    """The callbacks of a tap; ``None`` for a signal nobody watches."""

    on_next: Callable[[Any], object] | None = None
    on_error: Callable[[Exception], object] | None = None
    on_complete: Callable[[], object] | None = None
    on_cancel: Callable[[], object] | None = None
    on_request: Callable[[int], object] | None = None
    on_subscribe: Callable[[Subscription], object] | None = None


class TapOperator(StageOperator[T]):
    """Call user callbacks on the signals that pass; optionally log each of them.

    A callback that raises ends the stream: upstream is cancelled and the exception goes
    downstream as ``on_error`` (an ``on_error`` callback's exception has the original
    error as ``__context__``); the ``on_cancel`` callback's exception goes to the
    undeliverable hook, as nobody listens any more.

    Backpressure:
        Demand passes through unchanged; the stage holds at most the elements
        downstream asked for.

    Concurrency:
        ``on_next``/``on_error``/``on_complete``/``on_subscribe`` callbacks run on the
        thread that delivers the upstream signal, ``on_request``/``on_cancel`` on the
        thread that calls ``request``/``cancel``; delivery goes through the stage's one
        drain loop (Rule 1.3).
    """

    __slots__ = ("_callbacks", "_label", "_level", "_log_name")

    def __init__(
        self,
        upstream: Publisher[T],
        callbacks: TapCallbacks,
        *,
        label: str,
        log_name: str | None = None,
        level: int = logging.INFO,
    ) -> None:
        super().__init__(upstream)
        self._callbacks = callbacks
        self._label = label
        self._log_name = log_name
        self._level = level

    @property
    def name(self) -> str:
        return self._label

    def _new_stage(self, subscriber: Subscriber[T]) -> Subscriber[Any]:
        return _Tap(subscriber, self._callbacks, self._log_name, self._level)


class _Tap(BufferedStage):
    __slots__ = ("_callbacks", "_cancel_seen", "_level", "_log_name", "_logger")

    def __init__(
        self,
        downstream: Subscriber[Any],
        callbacks: TapCallbacks,
        log_name: str | None,
        level: int,
    ) -> None:
        super().__init__(downstream)
        self._callbacks = callbacks
        self._log_name = log_name
        self._level = level
        self._logger = logging.getLogger(LOGGER_NAME) if log_name is not None else None
        self._cancel_seen = False

    def _log(self, message: str, *args: object) -> None:
        logger = self._logger
        if logger is not None and logger.isEnabledFor(self._level):
            logger.log(
                self._level,
                "%s | %s [thread %s]",
                self._log_name,
                message % args,
                threading.current_thread().name,
            )

    def _callback_failed(self, error: Exception) -> None:
        """A callback raised: signal it downstream now, upstream cancelled."""
        self._fail_urgently(error)
        self._schedule()

    def on_subscribe(self, subscription: Subscription) -> None:
        accept_subscription(subscription, True)  # Rule 2.13 before the callback; 2.5 below
        self._log("on_subscribe(%s)", type(subscription).__name__)
        callback = self._callbacks.on_subscribe
        failure: Exception | None = None
        if callback is not None and self._upstream is None:
            try:
                callback(subscription)
            except Exception as exc:
                failure = exc
        if failure is not None:
            self._fail_urgently(failure)  # before downstream can request anything
        self._accept_upstream(subscription)
        if failure is not None:
            self._schedule()

    def _demand_added(self, count: int) -> None:
        with self._lock:
            if self._done:
                return
            demand = self._demand
        self._log("request(%d) demand=%s", count, _show(demand))
        callback = self._callbacks.on_request
        if callback is not None:
            try:
                callback(count)
            except Exception as exc:
                self._callback_failed(exc)
                return
        if self._upstream is not None:
            self.request_upstream(self._upstream, count)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        with self._lock:
            if self._done or self._cancelled:
                return
            demand = self._demand
            if demand != MAX_DEMAND:
                demand -= len(self._ready)
        self._log("on_next(%r) demand=%s", element, _show(demand))
        callback = self._callbacks.on_next
        if callback is not None:
            try:
                callback(element)
            except Exception as exc:
                self._callback_failed(exc)
                return
        super().on_next(element)  # dropped if the callback cancelled the stream

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        with self._lock:
            if self._done:
                return
        self._log("on_error(%r)", error)
        callback = self._callbacks.on_error
        if callback is not None:
            try:
                callback(error)
            except Exception as exc:
                exc.__context__ = error
                error = exc
        super().on_error(error)

    def on_complete(self) -> None:
        with self._lock:
            if self._done:
                return
        self._log("on_complete()")
        callback = self._callbacks.on_complete
        if callback is not None:
            try:
                callback()
            except Exception as exc:
                super().on_error(exc)  # upstream has ended: nothing to cancel
                return
        super().on_complete()

    def cancel(self) -> None:
        with self._lock:
            first = not (self._cancel_seen or self._cancelled or self._terminated)
            self._cancel_seen = True
        if first:
            self._log("cancel()")
            callback = self._callbacks.on_cancel
            if callback is not None:
                try:
                    callback()
                except Exception as exc:
                    report_undeliverable(exc)  # nobody listens any more
        super().cancel()


def _show(demand: int) -> str:
    return "unbounded" if demand == MAX_DEMAND else str(demand)
