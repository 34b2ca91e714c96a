"""``take_until``: pass elements until another publisher emits its first element."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from .._core import BufferedStage, StageOperator, accept_subscription, cancel_quietly
from ..api import Subscriber

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._core import Cancellable
    from ..api import Publisher, Subscription

__all__ = ["TakeUntilOperator"]

T = TypeVar("T")


class TakeUntilOperator(StageOperator[T]):
    """Pass upstream's elements until ``other`` emits; then complete (Reactor's ``takeUntilOther``).

    ``other`` is subscribed first, before upstream, with ``request(1)``. Its first
    element completes the flow and cancels both; its error fails the flow (upstream
    cancelled); its completion alone changes nothing.

    Backpressure:
        Downstream demand passes to upstream unchanged; ``other`` is asked for one
        element.

    Concurrency:
        ``other`` may signal on any thread; both inputs go through the stage's lock and
        its one drain loop, so downstream signals stay serial (Rule 1.3). Elements that
        arrived before ``other``'s element are delivered first, then ``on_complete``.
    """

    __slots__ = ("_other",)

    def __init__(self, upstream: Publisher[T], other: Publisher[Any]) -> None:
        super().__init__(upstream)
        self._other = other

    @property
    def name(self) -> str:
        return "take_until"

    def _new_stage(self, subscriber: Subscriber[T]) -> Subscriber[Any]:
        stage = _TakeUntil(subscriber)
        try:
            self._other.subscribe(_Trigger(stage))
        except Exception as exc:  # a broken publisher: Rule 1.9 says it must not raise
            stage.trigger_failed(exc)
        return stage


class _TakeUntil(BufferedStage):
    """The stage; ``_started`` says downstream has had ``on_subscribe``.

    Before that, ``other``'s signal only marks the stage (``_done``) and ``on_subscribe``
    runs the drain, so nothing reaches downstream before ``on_subscribe`` (Rule 1.9).
    """

    _forwards_demand = True

    __slots__ = ("_started", "_trigger")

    def __init__(self, downstream: Subscriber[Any]) -> None:
        super().__init__(downstream)
        self._trigger: Subscription | None = None
        self._started = False

    def on_subscribe(self, subscription: Subscription) -> None:
        if not self._accept_upstream(subscription):
            return
        with self._lock:
            self._started = True
            stopped = self._done
        if stopped:  # other emitted (or failed) before upstream subscribed
            cancel_quietly(subscription)
            self._schedule()

    # ------------------------------------------------------------- the other publisher
    def trigger_subscribed(self, subscription: Subscription) -> bool:
        """Keep ``other``'s subscription; ``False`` if the stage already ended."""
        with self._lock:
            live = not self._terminated and self._trigger is None
            if live:
                self._trigger = subscription
        return live

    def trigger_fired(self) -> None:
        """``other`` emitted: complete after what already arrived; cancel upstream."""
        with self._lock:
            if self._done:
                return
            self._done = True
            started = self._started
            upstream = self._upstream
        if started:
            if upstream is not None:
                cancel_quietly(upstream)
            self._schedule()

    def trigger_failed(self, error: Exception) -> None:
        """``other`` failed: fail now, upstream cancelled (an urgent error).

        ``other``'s subscription is dropped first: the drain that may run inside its
        ``on_error`` must not cancel it (Rule 2.3).
        """
        with self._lock:
            self._trigger = None
            self._fail_urgently_locked(error)
            started = self._started
        if started:
            self._schedule()

    def _stop_locked(self) -> Sequence[Cancellable]:
        super()._stop_locked()
        trigger, self._trigger = self._trigger, None
        return () if trigger is None else (trigger,)


class _Trigger(Subscriber[Any]):
    """The subscriber to ``other``: one element is all it needs."""

    __slots__ = ("_stage",)

    def __init__(self, stage: _TakeUntil) -> None:
        self._stage = stage

    def on_subscribe(self, subscription: Subscription) -> None:
        if not accept_subscription(subscription, self._stage.trigger_subscribed):
            return  # the stage ended, or a second subscription (Rule 2.5)
        self._stage.request_upstream(subscription, 1)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        self._stage.trigger_fired()

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        self._stage.trigger_failed(error)

    def on_complete(self) -> None:
        """``other`` ended without an element: the flow goes on."""
