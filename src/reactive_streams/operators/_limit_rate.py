"""``limit_rate``: cap the demand sent upstream, refilled in batches (Reactor's ``limitRate``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from .._core import BufferedStage, StageOperator, add_demand

if TYPE_CHECKING:
    from ..api import Publisher, Subscriber, Subscription

__all__ = ["LimitRateOperator"]

T = TypeVar("T")


class LimitRateOperator(StageOperator[T]):
    """Pass elements through; upstream is never owed more than ``high_tide`` elements.

    Marble (``limit_rate(4, low_tide=3)``, downstream requests unbounded)::

        request up:  (4)------(3)------(3)...
        source:      -1-2-3-4-5-6-7-...
        result:      -1-2-3-4-5-6-7-...

    Backpressure:
        Downstream demand is kept as a debt and sent upstream in pieces: at most
        ``high_tide`` requested and not yet received; once ``low_tide`` of them arrived,
        the difference is requested again (never more than downstream still wants).

    Concurrency:
        Elements go through the stage's one drain loop (``BufferedStage``), which
        holds at most the elements downstream asked for; ``request`` may come from any
        thread.
    """

    __slots__ = ("_high", "_low")

    def __init__(self, upstream: Publisher[T], high_tide: int, low_tide: int) -> None:
        super().__init__(upstream)
        self._high = high_tide
        self._low = low_tide

    @property
    def name(self) -> str:
        return "limit_rate"

    def _new_stage(self, subscriber: Subscriber[T]) -> Subscriber[Any]:
        return _LimitRate(subscriber, self._high, self._low)


class _LimitRate(BufferedStage):
    """``_debt``: demand not yet sent upstream; ``_owed``: requested, not yet received."""

    __slots__ = ("_debt", "_high", "_owed", "_refill_at")

    def __init__(self, downstream: Subscriber[Any], high_tide: int, low_tide: int) -> None:
        super().__init__(downstream)
        self._high = high_tide
        self._refill_at = high_tide - low_tide  # refill once _owed fell to this
        self._debt = 0
        self._owed = 0

    def on_subscribe(self, subscription: Subscription) -> None:
        self._accept_upstream(subscription)

    def _top_up_locked(self) -> int:
        """How much to request upstream now (``_lock`` held), and count it as owed."""
        if not self._debt or self._owed > self._refill_at or self._done:
            return 0
        count = min(self._debt, self._high - self._owed)
        self._debt -= count
        self._owed += count
        return count

    def _demand_added(self, count: int) -> None:
        with self._lock:
            self._debt = add_demand(self._debt, count)
            more = self._top_up_locked()
        if more and self._upstream is not None:
            self.request_upstream(self._upstream, more)

    def _queued_locked(self) -> int:
        self._owed -= 1
        return self._top_up_locked()
