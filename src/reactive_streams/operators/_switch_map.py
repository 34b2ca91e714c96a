"""``switch_map``: map each element to a publisher; the newest one wins."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from .._core import (
    MAX_DEMAND,
    BufferedStage,
    ProtocolViolationError,
    StageOperator,
    accept_subscription,
    add_demand,
    cancel_quietly,
    report_undeliverable,
)
from ..api import Publisher, Subscriber
from ._pull import PullPublisher

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .._core import Cancellable
    from ..api import Subscription

__all__ = ["SwitchMapOperator"]

T = TypeVar("T")
R = TypeVar("R")


class SwitchMapOperator(StageOperator[R]):
    """Map each upstream element to a publisher and relay only the newest one (Rx switchMap).

    A new upstream element cancels the inner publisher in use and subscribes to the one
    ``fn`` returns for it; elements of the cancelled inner that were received but not yet
    delivered are dropped (counted in ``statistics().dropped``). The flow completes once
    upstream and the current inner have completed; any error (upstream's, an inner's,
    ``fn``'s) cancels everything and is signalled at once.

    Backpressure:
        Upstream is requested without bound (each element only replaces the inner, none
        is buffered). The current inner is requested the outstanding downstream demand
        (Reactor's ``switchMap``): a new inner gets what downstream asked for and has
        not received, and later requests go to whichever inner is current.

    Concurrency:
        Upstream and the inners may signal on any threads; every signal goes through the
        stage's lock and its one drain loop, so downstream signals are serial (Rule 1.3).
    """

    __slots__ = ("_fn",)

    def __init__(self, upstream: Publisher[T], fn: Callable[[T], Any]) -> None:
        super().__init__(upstream)
        self._fn = fn

    @property
    def name(self) -> str:
        return "switch_map"

    def _new_stage(self, subscriber: Subscriber[R]) -> Subscriber[Any]:
        return _SwitchMap(subscriber, self._fn)


class _Inner(Subscriber[Any]):
    """One inner publisher's subscriber; ``outstanding`` is guarded by the owner's lock."""

    __slots__ = ("done", "outstanding", "owner", "subscription")

    def __init__(self, owner: _SwitchMap) -> None:
        self.owner = owner
        self.subscription: Subscription | None = None
        self.outstanding = 0  # requested from this inner and not yet received
        self.done = False

    def on_subscribe(self, subscription: Subscription) -> None:
        if accept_subscription(subscription, lambda kept: self.owner.inner_claimed(self, kept)):
            self.owner._top_up()

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        self.owner.inner_next(self, element)

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        self.owner.inner_error(self, error)

    def on_complete(self) -> None:
        self.owner.inner_complete(self)


def _as_publisher(inner: Any, position: int) -> Publisher[Any]:
    if inner is None:
        raise TypeError(
            "Rule 2.13: the function given to switch_map() returned None for the element "
            f"at position {position} (0-based) of its input"
        )
    if isinstance(inner, Publisher):
        return inner
    if isinstance(inner, str | bytes) or not hasattr(inner, "__iter__"):
        raise TypeError(
            "the function given to switch_map() must return a Publisher or an iterable, "
            f"got {type(inner).__qualname__}"
        )
    items = inner
    return PullPublisher(lambda: items, (), "iterable")


class _SwitchMap(BufferedStage):
    """The stage: ``_ready`` holds elements of the current inner only.

    ``_current`` is the inner in use (``None`` before the first element and after the
    stage ends); ``_outer_done`` says upstream completed. ``_done`` (the buffered drain's
    "no more elements will come") is set once both upstream and the current inner have
    completed, or by an error.
    """

    __slots__ = ("_current", "_dropped", "_fn", "_outer_done", "_position")

    _errors_wait = False  # an error overtakes the elements waiting for demand (Reactor)

    def __init__(self, downstream: Subscriber[Any], fn: Callable[[Any], Any]) -> None:
        super().__init__(downstream)
        self._fn = fn
        self._current: _Inner | None = None
        self._outer_done = False
        self._position = 0
        self._dropped = 0

    def _dropped_now(self) -> int:
        return self._dropped

    # ---------------------------------------------------------------- upstream
    def on_subscribe(self, subscription: Subscription) -> None:
        if self._accept_upstream(subscription):
            self.request_upstream(subscription, MAX_DEMAND)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        position = self._position
        self._position += 1
        try:
            publisher = _as_publisher(self._fn(element), position)
        except Exception as exc:
            self._fail_urgently(exc)
            self._schedule()
            return
        inner = _Inner(self)
        with self._lock:
            if self._done or self._cancelled or self._terminated:
                return
            previous, self._current = self._current, inner
            self._dropped += len(self._ready)
            self._ready.clear()  # the previous inner's elements: the newest inner wins
        if previous is not None and previous.subscription is not None:
            cancel_quietly(previous.subscription)
        try:
            publisher.subscribe(inner)
        except Exception as exc:  # the inner publisher broke Rule 1.9
            self._fail_urgently(exc)
            self._schedule()

    def on_complete(self) -> None:
        """Upstream completed: the flow completes once the current inner has too."""
        with self._lock:
            if self._done:
                return
            self._outer_done = True
            current = self._current
            self._done = current is None or current.done
        self._schedule()

    # ---------------------------------------------------------------- demand
    def _demand_added(self, count: int) -> None:
        self._top_up()

    def _top_up(self) -> None:
        """Request from the current inner what downstream is owed and nobody will send."""
        with self._lock:
            inner = self._current
            if inner is None or inner.subscription is None or inner.done or self._done:
                return
            if self._demand == MAX_DEMAND:
                extra = 0 if inner.outstanding == MAX_DEMAND else MAX_DEMAND
            else:
                extra = self._demand - len(self._ready) - inner.outstanding
            if extra <= 0:
                return
            inner.outstanding = add_demand(inner.outstanding, extra)
            subscription = inner.subscription
        self.request_upstream(subscription, extra)

    # ---------------------------------------------------------------- inners
    def inner_claimed(self, inner: _Inner, subscription: Subscription) -> bool:
        """Keep ``inner``'s subscription unless it was replaced, ended, or Rule 2.5."""
        with self._lock:
            live = (
                inner is self._current
                and inner.subscription is None
                and not self._done
                and not self._cancelled
            )
            if live:
                inner.subscription = subscription
        return live

    def inner_next(self, inner: _Inner, element: Any) -> None:
        with self._lock:
            if inner is not self._current or self._done or self._cancelled:
                self._dropped += 1  # a replaced inner's element that was already on its way
                return
            if inner.outstanding == 0:
                self._fail_urgently_locked(
                    ProtocolViolationError(
                        "Rule 1.1: an inner publisher of switch_map() sent more than requested",
                        rule="1.1",
                    )
                )
            else:
                if inner.outstanding != MAX_DEMAND:
                    inner.outstanding -= 1
                self._ready.append(element)
                self._high_water = max(self._high_water, len(self._ready))
            start = self._guard.acquire_locked()
        if start:
            self._loop.start_owned()

    def inner_error(self, inner: _Inner, error: Exception) -> None:
        with self._lock:
            current = inner is self._current
            if current:
                inner.done = True  # Rule 2.3: the drain must not cancel it from inside on_error
                self._fail_urgently_locked(error)
        if not current:
            report_undeliverable(error)  # a replaced inner failed after its cancel
            return
        self._schedule()

    def inner_complete(self, inner: _Inner) -> None:
        with self._lock:
            if inner is not self._current or self._done:
                return
            inner.done = True
            self._done = self._outer_done
        self._schedule()

    # ---------------------------------------------------------------- the end
    def _stop_locked(self) -> Sequence[Cancellable]:
        super()._stop_locked()
        current, self._current = self._current, None
        if current is None or current.subscription is None or current.done:
            return ()
        return (current.subscription,)
