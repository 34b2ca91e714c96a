"""``reduce``: fold the whole stream into one element, emitted at completion."""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._core import (
    MAX_DEMAND,
    NoneResultError,
    ProtocolViolationError,
    StageOperator,
    StageStatistics,
    accept_subscription,
    signal_on_complete,
    signal_on_error,
    signal_on_next,
    signal_on_subscribe,
    validate_request,
)
from ..api import Publisher, Subscriber, Subscription
from ._fusion import UNSET, FusedOp

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["ReduceOp", "ReducePublisher"]

T = TypeVar("T")
R = TypeVar("R")


class ReduceOp(FusedOp):
    """Pull form of ``reduce``: ``functools.reduce`` over the fused chain, in C.

    Marble::

        source:        -1-2-3-|
        reduce(add, 0) -------6|
    """

    __slots__ = ("fn", "initial")
    name = "reduce"
    pull_inline = False
    push_capable = False

    def __init__(self, fn: Callable[[Any, Any], Any], initial: object = UNSET) -> None:
        self.fn = fn
        self.initial = initial

    def wrap(self, iterator: Iterator[Any]) -> Iterator[Any]:
        return _reduce_iter(self.fn, self.initial, iterator)


def _reduce_iter(
    fn: Callable[[Any, Any], Any], initial: object, source: Iterator[Any]
) -> Iterator[Any]:
    if initial is UNSET:
        first = next(source, UNSET)
        if first is UNSET:
            return  # an empty stream without a seed completes empty
        result = functools.reduce(fn, source, first)
    else:
        result = functools.reduce(fn, source, initial)
    if result is None:
        raise NoneResultError("the function given to reduce()", -1)
    yield result


class ReducePublisher(StageOperator[R], Generic[T, R]):
    """``reduce`` after a general publisher: requests unbounded, emits one element at the end.

    Backpressure:
        Requests ``MAX_DEMAND`` upstream (the stage holds one accumulator, never a buffer)
        and emits its single element only once downstream has requested.

    Concurrency:
        Upstream signals and downstream requests may come from different threads; the
        final ``on_next``/``on_complete`` is sent by whichever of the two events (upstream
        completion, first request) happens last, under a lock-guarded handshake.
    """

    __slots__ = ("_fn", "_initial")

    def __init__(
        self, upstream: Publisher[T], fn: Callable[[Any, T], R], initial: object = UNSET
    ) -> None:
        super().__init__(upstream)
        self._fn = fn
        self._initial = initial

    @property
    def name(self) -> str:
        return "reduce"

    def _new_stage(self, subscriber: Subscriber[R]) -> Subscriber[Any]:
        return _ReduceSubscriber(subscriber, self._fn, self._initial)


class _ReduceSubscriber(Subscriber[Any], Subscription):
    __slots__ = (
        "__weakref__",
        "_acc",
        "_done",
        "_downstream",
        "_finished",
        "_fn",
        "_lock",
        "_position",
        "_requested",
        "_upstream",
    )

    def __init__(
        self, downstream: Subscriber[Any], fn: Callable[[Any, Any], Any], initial: object
    ) -> None:
        self._downstream: Subscriber[Any] | None = downstream
        self._fn = fn
        self._acc = initial
        self._position = 0
        self._upstream: Subscription | None = None
        self._lock = threading.Lock()
        self._requested = False
        self._finished = False  # upstream completed, result ready
        self._done = False  # terminal signal sent or cancelled

    def statistics(self) -> StageStatistics:
        return StageStatistics(
            requested=int(self._requested),
            delivered=int(self._done and self._finished),
            buffered=int(self._finished and not self._done),
            cancelled=self._done,
            terminated=self._done,
            high_water_mark=1 if self._finished else 0,
        )

    # Subscriber side
    def on_subscribe(self, subscription: Subscription) -> None:
        if not accept_subscription(subscription, self._upstream is None):
            return
        self._upstream = subscription
        downstream = self._downstream
        if downstream is not None and signal_on_subscribe(downstream, self):
            subscription.request(MAX_DEMAND)
        else:
            subscription.cancel()

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        if self._done:
            return
        try:
            if self._acc is UNSET:
                self._acc = element
            else:
                self._acc = self._fn(self._acc, element)
                if self._acc is None:
                    raise NoneResultError("the function given to reduce()", self._position)
        except Exception as exc:
            self._fail(exc, cancel_upstream=True)
        self._position += 1

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        self._fail(error, cancel_upstream=False)

    def on_complete(self) -> None:
        with self._lock:
            if self._done:
                return
            self._finished = True
            ready = self._requested
        if ready:
            self._emit()

    def _fail(self, error: Exception, *, cancel_upstream: bool) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        if cancel_upstream and self._upstream is not None:
            self._upstream.cancel()
        downstream, self._downstream = self._downstream, None
        if downstream is not None:
            signal_on_error(downstream, error)

    def _emit(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        downstream, self._downstream = self._downstream, None
        if downstream is None:
            return
        if self._acc is UNSET or signal_on_next(downstream, self._acc):
            signal_on_complete(downstream)

    # Subscription side (downstream)
    def request(self, n: int) -> None:
        try:
            validate_request(n)
        except ProtocolViolationError as exc:  # Rule 3.9: signalled, never raised
            # Every downstream signal of this stage is guarded by ``_done``, so failing
            # here cannot overlap another downstream signal (Rule 1.3).
            self._fail(exc, cancel_upstream=True)
            return
        with self._lock:
            if self._requested or self._done:
                return
            self._requested = True
            ready = self._finished
        if ready:
            self._emit()

    def cancel(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._downstream = None
        if self._upstream is not None:
            self._upstream.cancel()
