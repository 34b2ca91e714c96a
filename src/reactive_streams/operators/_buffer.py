"""``buffer``: group elements into lists of ``size``, optionally flushed after a timeout."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, TypeVar

from .._core import MAX_DEMAND, BufferedStage, StageOperator, check_positive

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._core import Cancellable
    from ..api import Publisher, Subscriber, Subscription

__all__ = ["BufferOperator"]

T = TypeVar("T")


class BufferOperator(StageOperator[list[T]]):
    """Emit lists of ``size`` elements; the last list may be shorter.

    With ``timeout`` (seconds), a non-empty partial list is also emitted when ``timeout``
    has passed since its first element arrived, so a slow source still makes progress.

    Marble (``size=2``)::

        source:     -1-2-3-4-5-|
        buffer(2):  ---[1,2]---[3,4]-[5]|

    Backpressure:
        ``request(n)`` downstream becomes ``request(n * size)`` upstream. Lists flushed early
        by the timeout wait for demand in a queue bounded by the upstream demand.

    Concurrency:
        The timeout runs on a ``threading.Timer`` thread; it and the upstream thread only
        append under one lock, and one drain loop delivers the lists serially (Rule 1.3).
        The timer is cancelled when the stream ends.
    """

    __slots__ = ("_size", "_timeout")

    def __init__(self, upstream: Publisher[T], size: int, timeout: float | None) -> None:
        super().__init__(upstream)
        check_positive("buffer size", size)
        if timeout is not None and timeout <= 0:
            raise ValueError(f"buffer timeout must be positive seconds, got {timeout!r}")
        self._size = size
        self._timeout = timeout

    @property
    def name(self) -> str:
        return "buffer"

    def _new_stage(self, subscriber: Subscriber[list[T]]) -> Subscriber[Any]:
        return _Buffer(subscriber, self._size, self._timeout)


class _Buffer(BufferedStage):
    """``_current`` fills up to ``size``; full (or timed-out) lists wait in ``_ready``."""

    __slots__ = (
        "__weakref__",
        "_current",
        "_size",
        "_timeout",
        "_timer",
    )

    _errors_wait = False  # an upstream error drops the lists not yet delivered

    def __init__(self, downstream: Subscriber[Any], size: int, timeout: float | None) -> None:
        super().__init__(downstream)
        self._size = size
        self._timeout = timeout
        self._current: list[Any] = []
        self._timer: threading.Timer | None = None

    def _buffered_now(self) -> int:
        return len(self._current) + sum(len(chunk) for chunk in self._ready)

    def on_subscribe(self, subscription: Subscription) -> None:
        self._accept_upstream(subscription)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        start_timer = False
        with self._lock:
            if self._done or self._cancelled:
                return
            current = self._current
            current.append(element)
            if len(current) == 1 and self._timeout is not None:
                start_timer = True
            if len(current) >= self._size:
                self._ready.append(current)
                self._current = []
                start_timer = False
                timer, self._timer = self._timer, None
            else:
                timer = None
            self._high_water = max(
                self._high_water, len(self._current) + self._size * len(self._ready)
            )
            start = bool(self._ready) and self._guard.acquire_locked()
        if timer is not None:
            timer.cancel()
        if start_timer:
            self._arm_timer()
        if start:
            self._loop.start_owned()

    def _arm_timer(self) -> None:
        assert self._timeout is not None
        timer = threading.Timer(self._timeout, self._flush)
        timer.daemon = True
        with self._lock:
            if self._done or self._cancelled or not self._current:
                return
            previous, self._timer = self._timer, timer
        if previous is not None:
            previous.cancel()
        timer.start()

    def _flush(self) -> None:
        with self._lock:
            if not self._current or self._done or self._cancelled:
                return
            self._ready.append(self._current)
            self._current = []
            self._timer = None
        self._schedule()

    def _upstream_completed(self) -> None:
        if self._current:
            self._ready.append(self._current)
            self._current = []

    def _demand_added(self, count: int) -> None:
        upstream = self._upstream
        if upstream is not None:
            self.request_upstream(
                upstream, count * self._size if count < MAX_DEMAND else MAX_DEMAND
            )

    def _stop_locked(self) -> Sequence[Cancellable]:
        super()._stop_locked()
        self._current = []
        timer, self._timer = self._timer, None
        return () if timer is None else (timer,)
