"""``buffer(size, skip)``: lists of ``size`` elements, a new one every ``skip`` elements."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, TypeVar

from .._core import MAX_DEMAND, BufferedStage, StageOperator

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._core import Cancellable
    from ..api import Publisher, Subscriber, Subscription

__all__ = ["SlidingBufferOperator"]

T = TypeVar("T")


class SlidingBufferOperator(StageOperator[list[T]]):
    """Open a list at every ``skip``-th element; emit each once it holds ``size`` elements.

    ``skip < size``: overlapping lists (a sliding window); ``skip > size``: the elements
    between lists are dropped. At completion the lists still open are emitted, shorter,
    in order (Reactor's and Rx's ``buffer(size, skip)``).

    Marble (``size=3, skip=2``)::

        source:  -0-1-2-3-4-5-6-|
        result:  -----[0,1,2]-[2,3,4]-[4,5,6]-[6]|

    Backpressure:
        ``request(n)`` lists become upstream requests of the elements they need:
        ``n * skip`` (``skip >= size``), or ``size + (n - 1) * skip`` the first time and
        ``n * skip`` afterwards (overlapping). At most ``ceil(size / skip)`` lists are
        open, each at most ``size`` long.

    Concurrency:
        Runs on the thread that delivers each element; delivery goes through the
        stage's one drain loop (Rule 1.3).
    """

    __slots__ = ("_size", "_skip")

    def __init__(self, upstream: Publisher[T], size: int, skip: int) -> None:
        super().__init__(upstream)
        self._size = size
        self._skip = skip

    @property
    def name(self) -> str:
        return "buffer"

    def _new_stage(self, subscriber: Subscriber[list[T]]) -> Subscriber[Any]:
        return _Sliding(subscriber, self._size, self._skip)


class _Sliding(BufferedStage):
    """``_open``: the lists being filled, oldest first; ``_index``: elements seen."""

    __slots__ = ("_asked", "_index", "_open", "_size", "_skip")

    _errors_wait = False  # an upstream error drops the lists not yet delivered

    def __init__(self, downstream: Subscriber[Any], size: int, skip: int) -> None:
        super().__init__(downstream)
        self._size = size
        self._skip = skip
        self._open: deque[list[Any]] = deque()
        self._index = 0
        self._asked = False

    def _buffered_now(self) -> int:
        return sum(len(chunk) for chunk in self._open) + sum(len(c) for c in self._ready)

    def on_subscribe(self, subscription: Subscription) -> None:
        self._accept_upstream(subscription)

    def _demand_added(self, count: int) -> None:
        with self._lock:
            first = not self._asked
            self._asked = True
        if count >= MAX_DEMAND:
            needed = MAX_DEMAND
        elif first and self._skip < self._size:
            needed = self._size + (count - 1) * self._skip
        else:
            needed = count * self._skip
        upstream = self._upstream
        if upstream is not None:
            self.request_upstream(upstream, min(needed, MAX_DEMAND))

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        with self._lock:
            if self._done or self._cancelled:
                return
            if self._index % self._skip == 0:
                self._open.append([])
            self._index += 1
            for chunk in self._open:
                chunk.append(element)
            full = bool(self._open) and len(self._open[0]) >= self._size
            if full:
                self._ready.append(self._open.popleft())
            self._high_water = max(self._high_water, self._buffered_now())
        if full:
            self._schedule()
        # An element in a gap (skip > size) went into no list; its list's quota of
        # ``skip`` elements was already requested, so nothing is re-requested.

    def _upstream_completed(self) -> None:
        self._ready.extend(chunk for chunk in self._open if chunk)
        self._open.clear()

    def _stop_locked(self) -> Sequence[Cancellable]:
        self._open.clear()
        return super()._stop_locked()
