"""The push path: synchronous operators fused behind any publisher, in ONE subscriber.

``PushPublisher`` is built when ``map``/``filter``/``take``/... follow a publisher that is
not an iterable source (an async boundary, a merge, a third-party publisher). The whole
chain is compiled into one ``push(x)`` function (see ``_fusion``) and runs inside a single
``FusedSubscriber``: one ``on_next`` per element, whatever the chain's length.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from .._core import (
    MAX_DEMAND,
    PassThroughStage,
    StageOperator,
    StageStatistics,
    accept_subscription,
    add_demand,
    cancel_quietly,
    report_violation,
    signal_on_complete,
    signal_on_error,
    signal_on_subscribe,
)
from ._fusion import SKIP, FusedOp, PushControl, compile_push
from ._take import LimitingTakeOp, TakeOp

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..api import Publisher, Subscriber, Subscription

__all__ = ["FusedSubscriber", "LimitedFusedSubscriber", "PushPublisher"]

T = TypeVar("T")


class PushPublisher(StageOperator[T]):
    """Synchronous operators fused after ``upstream``.

    Backpressure:
        Downstream demand is passed upstream unchanged; every element the chain drops
        (``filter``, ``skip``, ...) is replaced by ``request(1)`` upstream, unless the
        demand is unbounded. With a ``take(n)`` in the chain, the upstream demand is
        capped at ``n`` plus the elements dropped before the take (Reactor's
        ``limitRequest``): even an unbounded downstream demand never makes upstream
        send more than the take can pass. ``take(n)`` cancels upstream after its last
        element.

    Concurrency:
        The chain runs on the thread that delivers ``on_next``; it adds no thread and no
        buffer. ``request``/``cancel`` go straight to the upstream subscription, which
        serialises them with its signals (so a Rule 3.9 error is signalled by upstream,
        in order).
    """

    __slots__ = ("_factory", "_limit", "_ops", "_push_ops")

    def __init__(self, upstream: Publisher[Any], ops: tuple[FusedOp, ...]) -> None:
        super().__init__(upstream)
        self._ops = ops
        self._factory: Callable[[PushControl], Callable[[Any], Any]] | None = None
        # The first take caps the upstream demand; its push form counts what reaches it.
        first = next((i for i, op in enumerate(ops) if isinstance(op, TakeOp)), None)
        if first is None:
            self._limit: int | None = None
            self._push_ops = ops
        else:
            count = ops[first].count  # type: ignore[attr-defined]
            self._limit = count
            self._push_ops = (*ops[:first], LimitingTakeOp(count), *ops[first + 1 :])

    @property
    def name(self) -> str:
        return "|".join(op.name for op in self._ops)

    def with_op(self, op: FusedOp) -> PushPublisher[Any]:
        """A new publisher with ``op`` fused at the end of the chain."""
        return PushPublisher(self._upstream, (*self._ops, op))

    def _new_stage(self, subscriber: Subscriber[T]) -> Subscriber[Any]:
        factory = self._factory
        if factory is None:
            factory = self._factory = compile_push(self._push_ops)
        control = PushControl()
        take_zero = any(isinstance(op, TakeOp) and op.count <= 0 for op in self._ops)
        if self._limit is None:
            return FusedSubscriber(subscriber, factory(control), control, take_zero=take_zero)
        return LimitedFusedSubscriber(
            subscriber, factory(control), control, self._limit, take_zero=take_zero
        )


class FusedSubscriber(PassThroughStage[Any]):
    """Subscriber to upstream and subscription for downstream, running one push chain."""

    __slots__ = ("__weakref__", "_control", "_push", "_take_zero", "_unbounded")

    def __init__(
        self,
        downstream: Subscriber[Any],
        push: Callable[[Any], Any],
        control: PushControl,
        *,
        take_zero: bool = False,
    ) -> None:
        super().__init__(downstream)
        self._push = push
        self._control = control
        self._take_zero = take_zero
        self._unbounded = False

    def statistics(self) -> StageStatistics:
        """Requested (by downstream) and delivered counts; this stage never buffers."""
        return StageStatistics(
            requested=self._requested,
            delivered=self._delivered,
            buffered=0,
            cancelled=self._done,
            terminated=self._done and self._downstream is None,
        )

    # --- Subscriber side: signals from upstream, serial by Rule 1.3 ---
    def on_subscribe(self, subscription: Subscription) -> None:
        """Store the upstream subscription and hand ourselves to downstream."""
        if not accept_subscription(subscription, self._upstream is None):
            return
        self._upstream = subscription
        downstream = self._downstream
        if downstream is None:
            subscription.cancel()
            return
        if not signal_on_subscribe(downstream, self):
            self.cancel()
            return
        if self._take_zero:
            self._finish(None)

    def on_next(self, element: Any) -> None:
        """Run the chain on ``element``; forward, drop-and-replenish, or finish."""
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        downstream = self._downstream
        if self._done or downstream is None:
            return  # after cancel or a terminal signal (Rule 2.8)
        try:
            result = self._push(element)
        except Exception as exc:  # a user function raised: cancel upstream, fail downstream
            self._finish(exc)
            return
        if result is not SKIP:
            self._delivered += 1
            try:
                downstream.on_next(result)
            except Exception as exc:  # Rule 2.13
                report_violation(downstream, "on_next", exc)
                self.cancel()
                return
        elif not self._control.done and not self._unbounded:
            self._replace_dropped()
        if self._control.done:
            self._finish(None)

    def _replace_dropped(self) -> None:
        """Request one element upstream in place of one the chain dropped."""
        upstream = self._upstream
        if upstream is not None:
            self._request_upstream(upstream, 1)

    def _request_upstream(self, upstream: Subscription, n: int) -> None:
        """Request ``n``; an upstream that raises (Rule 3.16 broken) ends the stage.

        The error is signalled at once, after upstream is cancelled: a stage without a
        buffer has no drain to defer it to. The caller of ``request`` runs downstream's
        code (it is downstream's own ``request``, or our ``on_next``), so the signal is
        nested in it, never concurrent with an ``on_next`` of ours on the same thread.
        """
        try:
            upstream.request(n)
        except Exception as exc:
            self._finish(exc)

    def _finish(self, error: Exception | None) -> None:
        downstream = self._end()
        upstream = self._upstream
        if upstream is not None:
            cancel_quietly(upstream)
        if downstream is None:
            return
        if error is None:
            signal_on_complete(downstream)
        else:
            signal_on_error(downstream, error)

    # --- Subscription side: calls from downstream ---
    def request(self, n: int) -> None:
        """Pass demand upstream; upstream validates it and signals Rule 3.9 errors."""
        if self._done:
            return  # Rule 3.6
        if type(n) is int and n > 0:
            with self._lock:
                self._requested = add_demand(self._requested, n)
                self._unbounded = self._requested == MAX_DEMAND
        upstream = self._upstream
        if upstream is not None:
            self._request_upstream(upstream, n)

    def cancel(self) -> None:
        """Cancel upstream and drop the downstream reference (Rules 3.7, 3.13)."""
        with self._lock:
            if self._done:
                return
            self._done = True
        self._downstream = None
        upstream = self._upstream
        if upstream is not None:
            upstream.cancel()


class LimitedFusedSubscriber(FusedSubscriber):
    """A ``FusedSubscriber`` whose chain has a ``take(n)``: upstream demand is capped.

    ``_cap`` is the most upstream may ever be asked for in total: ``n`` plus the elements
    dropped before the take (a ``filter`` ahead of it, which the take never counted);
    ``_up`` is what was asked so far. Both are guarded by ``_lock`` and ``_up`` never
    exceeds ``_cap``. Downstream demand is forwarded clipped to the cap; a dropped
    element is replaced only within it. So upstream's outstanding demand is at most what
    the take can still pass, and a plain ``take(n)`` sees at most ``request(n)`` in total,
    whatever downstream requested (Reactor's ``limitRequest``).

    Drops are counted by the ``on_next`` thread alone (``_drops_before``: before the take,
    raising the cap; ``_drops``: all of them, each owed a replacement) and settled under
    the lock in batches of ``REPLACE_BATCH``, or as soon as upstream owes nothing more
    (so a stream never waits on a replacement held back): a ``filter`` that drops most
    elements costs one ``request`` per batch, not a lock and a ``request`` per element.
    """

    __slots__ = ("_cap", "_drops", "_drops_before", "_reached_before", "_received", "_up")

    REPLACE_BATCH = 32

    def __init__(
        self,
        downstream: Subscriber[Any],
        push: Callable[[Any], Any],
        control: PushControl,
        limit: int,
        *,
        take_zero: bool = False,
    ) -> None:
        super().__init__(downstream, push, control, take_zero=take_zero)
        self._cap = limit
        self._up = 0
        # Written by on_next only (serial, Rule 1.3):
        self._received = 0
        self._drops = 0
        self._drops_before = 0
        self._reached_before = 0

    def on_next(self, element: Any) -> None:
        """Run the chain; then settle the drops once a batch is due or upstream owes none."""
        self._reached_before = self._control.reached
        self._received += 1
        super().on_next(element)
        drops = self._drops
        # An unlocked read of _up, which only grows: a stale value settles early, harmlessly.
        if drops and (drops >= self.REPLACE_BATCH or self._up <= self._received):
            self._settle_drops()

    def _replace_dropped(self) -> None:
        """Count the drop; a drop before the take also raises the cap (settled later)."""
        self._drops += 1
        if self._control.reached == self._reached_before:
            self._drops_before += 1  # the take never saw this element: it may have another

    def _settle_drops(self) -> None:
        """Raise the cap by the drops before the take; request the replacements within it."""
        if self._done:
            return
        with self._lock:
            self._cap += self._drops_before
            count = max(0, min(self._drops, self._cap - self._up))
            self._up += count
        self._drops = self._drops_before = 0
        upstream = self._upstream
        if count and upstream is not None:
            self._request_upstream(upstream, count)

    def request(self, n: int) -> None:
        """Forward downstream demand clipped to the cap; Rule 3.9 errors go upstream."""
        if self._done:
            return  # Rule 3.6
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            super().request(n)  # upstream validates and signals the Rule 3.9 error
            return
        n = int(n)
        with self._lock:
            self._requested = add_demand(self._requested, n)
            forward = max(0, min(n, self._cap - self._up))
            self._up += forward
        upstream = self._upstream
        if forward > 0 and upstream is not None:
            self._request_upstream(upstream, forward)
