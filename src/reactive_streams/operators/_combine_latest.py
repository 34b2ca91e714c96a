"""``combine_latest`` and ``with_latest_from``: combine the latest elements of publishers."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from .._core import (
    MAX_DEMAND,
    BufferedStage,
    DownstreamStage,
    InnerSubscriber,
    MissingBackpressureError,
    NoneResultError,
    Operator,
    StageOperator,
    accept_subscription,
    add_demand,
    cancel_quietly,
    check_positive,
    check_subscriber,
    replenish_threshold,
    signal_on_complete,
    signal_on_error,
    signal_on_subscribe,
)
from ..api import Subscriber

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from .._core import Cancellable
    from ..api import Publisher, Subscription

__all__ = ["CombineLatestOperator", "WithLatestFromOperator"]


def _overrun(label: str, index: int) -> MissingBackpressureError:
    return MissingBackpressureError(
        f"{label}: source {index} sent more than it was requested (Rule 1.1); a hot source "
        "needs an on_backpressure_* operator (or sample) in front of it"
    )


# --------------------------------------------------------------------------- combine_latest
class CombineLatestOperator(Operator[Any]):
    """Emit ``combiner(latest)`` each time a source emits, once every source has emitted.

    ``latest`` is the tuple of every source's latest element, in the sources' order
    (``combiner=tuple``, the default, emits it as it is).

    Reactor's ``combineLatest``: the sources' elements enter one queue in arrival order;
    the drain takes them one by one, updates that source's latest element and, once
    every source has one, emits the combination (one unit of demand each). The flow
    completes when every source has completed and the queue is delivered, or at once when
    a source completes without ever emitting (there can be no combination); the first
    error cancels everything.

    Backpressure:
        Each source is requested ``prefetch`` and refilled at 75% of what the drain took
        from it, so the queue holds at most ``len(sources) * prefetch`` elements; a source
        waits while its elements wait for downstream demand. A source that sends more
        than it was requested (a hot one) ends the flow with ``MissingBackpressureError``
        instead of being buffered without bound.

    Concurrency:
        Sources may signal on any threads; the combiner runs on the stage's one drain loop,
        never concurrently with itself, and downstream signals are serial (Rule 1.3).
    """

    __slots__ = ("_combiner", "_prefetch", "_sources")

    def __init__(
        self,
        sources: tuple[Publisher[Any], ...],
        combiner: Callable[[tuple[Any, ...]], Any] = tuple,
        prefetch: int = 32,
    ) -> None:
        super().__init__()
        if not sources:
            raise ValueError("combine_latest() needs at least one publisher")
        self._sources = sources
        self._combiner = combiner
        self._prefetch = check_positive("prefetch", prefetch)

    @property
    def name(self) -> str:
        return "combine_latest"

    @property
    def upstreams(self) -> tuple[Publisher[Any], ...]:
        return self._sources

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        """Subscribe to every source through one coordinator (Rule 1.9)."""
        check_subscriber(subscriber)
        stage = _CombineLatest(subscriber, len(self._sources), self._prefetch, self._combiner)
        self._track(stage)
        if not signal_on_subscribe(subscriber, stage):
            stage.cancel()
        for source, lane in zip(self._sources, stage.lanes, strict=True):
            try:
                source.subscribe(lane)
            except Exception as exc:  # the source broke Rule 1.9
                stage.fail(exc)


class _Lane(InnerSubscriber["_CombineLatest"]):
    """One source: ``outstanding`` (requested, not received) and ``queued`` (in the queue)."""

    __slots__ = ("has_value", "index", "outstanding", "queued")

    def __init__(self, owner: _CombineLatest, index: int) -> None:
        super().__init__(owner)
        self.index = index
        self.outstanding = 0
        self.queued = 0
        self.has_value = False

    def on_subscribe(self, subscription: Subscription) -> None:
        if accept_subscription(subscription, self._claim):
            self.request(self.owner.prefetch)

    def _claim(self, subscription: Subscription) -> bool:
        owner = self.owner
        with owner._lock:
            duplicate = self.subscription is not None
            if not duplicate:
                self.subscription = subscription
                self.outstanding = owner.prefetch
            return not duplicate and not owner._terminated

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        owner = self.owner
        with owner._lock:
            if owner._terminated:
                return
            if self.outstanding <= 0:
                owner._error = owner._error or _overrun("combine_latest", self.index)
            else:
                self.outstanding -= 1
                self.queued += 1
                owner.queue.append((self, element))
                owner._high_water = max(owner._high_water, len(owner.queue))
        owner._schedule()

    def on_complete(self) -> None:
        with self.owner._lock:
            self.done = True
        self.owner._schedule()


class _CombineLatest(DownstreamStage):
    """The coordinator: ``queue`` of ``(lane, element)`` in arrival order, ``latest`` values."""

    __slots__ = (
        "__weakref__",
        "_combined",
        "_combiner",
        "_latest",
        "_missing",
        "lanes",
        "prefetch",
        "queue",
    )

    def __init__(
        self,
        downstream: Subscriber[Any],
        width: int,
        prefetch: int,
        combiner: Callable[[tuple[Any, ...]], Any],
    ) -> None:
        super().__init__(downstream)
        self._combined = 0  # combinations made so far (for error messages)
        self.prefetch = prefetch
        self._combiner = combiner
        self.lanes = [_Lane(self, index) for index in range(width)]
        self.queue: deque[tuple[_Lane, Any]] = deque()
        self._latest: list[Any] = [None] * width
        self._missing = width  # sources without an element yet

    def _buffered_now(self) -> int:
        return len(self.queue)

    def _abandon_locked(self) -> list[Subscription]:
        self.queue.clear()
        return _Lane.live_subscriptions(self.lanes)

    def _finished_locked(self) -> bool:
        """Every source completed with its queue taken, or one completed without a value."""
        if all(lane.done for lane in self.lanes) and not self.queue:
            return True
        return any(lane.done and not lane.has_value and not lane.queued for lane in self.lanes)

    def _take_locked(self, allowed: int) -> tuple[list[tuple[Any, ...]], list[tuple[_Lane, int]]]:
        """Take queued elements; a combination for each once every source has a value."""
        limit = replenish_threshold(self.prefetch)
        combinations: list[tuple[Any, ...]] = []
        refills: list[tuple[_Lane, int]] = []
        queue = self.queue
        while queue:
            lane, element = queue[0]
            emits = self._missing == 0 or (self._missing == 1 and not lane.has_value)
            if emits and len(combinations) >= allowed:
                break
            queue.popleft()
            lane.queued -= 1
            if not lane.has_value:
                lane.has_value = True
                self._missing -= 1
            self._latest[lane.index] = element
            if emits:
                combinations.append(tuple(self._latest))
            lane.consumed += 1
            if lane.consumed >= limit and not lane.done:
                refills.append((lane, lane.consumed))
                lane.outstanding = add_demand(lane.outstanding, lane.consumed)
                lane.consumed = 0
        return combinations, refills

    def _combine(self, combinations: list[tuple[Any, ...]]) -> tuple[list[Any], Exception | None]:
        results: list[Any] = []
        for values in combinations:
            try:
                result = self._combiner(values)
                if result is None:
                    raise NoneResultError("the combiner given to combine_latest()", self._combined)
            except Exception as exc:
                return results, exc
            results.append(result)
            self._combined += 1
        return results, None

    def _drain(self) -> bool | None:
        while True:
            with self._lock:
                if self._terminated:
                    return None
                downstream = self._downstream
                stop = self._cancelled or self._error is not None or downstream is None
                if stop or self._finished_locked():
                    error = None if self._cancelled else self._error
                    self._terminate_locked()
                    subscriptions = self._abandon_locked()
                    combinations: list[tuple[Any, ...]] = []
                    refills: list[tuple[_Lane, int]] = []
                    end = True
                else:
                    end = False
                    demand = self._demand
                    due = min(len(self.queue), demand)
                    allowed = self._loop.allow(due) if due else 0
                    before = len(self.queue)
                    combinations, refills = self._take_locked(allowed)
                    count = len(combinations)
                    if count and demand != MAX_DEMAND:
                        self._demand = demand - count
                    if len(self.queue) == before and not refills:
                        if due:
                            return True  # Rule 3.4: the caller's share is spent; relay
                        if self._guard.release_locked():
                            continue  # work arrived meanwhile
                        return None
            if end:
                for subscription in subscriptions:
                    cancel_quietly(subscription)
                if downstream is not None and not self._cancelled:
                    if error is None:
                        signal_on_complete(downstream)
                    else:
                        signal_on_error(downstream, error)
                return None
            assert downstream is not None
            results, failure = self._combine(combinations)
            self._deliver(downstream, results)
            if failure is not None:
                self._keep_error(failure)
            for lane, amount in refills:
                lane.request(amount)


# --------------------------------------------------------------------------- with_latest_from
class WithLatestFromOperator(StageOperator[Any]):
    """Emit ``combiner((element, latest))`` for each upstream element (Rx withLatestFrom).

    ``latest`` is ``other``'s latest element; ``combiner=tuple`` (the default) emits the
    pair as it is.

    ``other`` is subscribed first. An upstream element that arrives before ``other`` has
    emitted is dropped (counted in ``statistics().dropped``, and one more is requested
    upstream). Upstream's completion completes the flow (``other`` cancelled); ``other``'s
    completion changes nothing (its last element stays in use); any error fails the flow.

    Backpressure:
        Downstream demand passes to upstream unchanged. ``other`` is requested ``prefetch``
        elements at a time and refilled at 75% of what arrived: only its latest element
        is kept, so a fast ``other`` costs no memory (and a hot one that sends more than
        requested ends the flow with ``MissingBackpressureError``).

    Concurrency:
        ``other`` may signal on any thread: its latest element is swapped under the
        stage's lock. The combiner runs on the thread that delivers the upstream element.
    """

    __slots__ = ("_combiner", "_other", "_prefetch")

    def __init__(
        self,
        upstream: Publisher[Any],
        other: Publisher[Any],
        combiner: Callable[[tuple[Any, Any]], Any] = tuple,
        prefetch: int = 32,
    ) -> None:
        super().__init__(upstream)
        self._other = other
        self._combiner = combiner
        self._prefetch = check_positive("prefetch", prefetch)

    @property
    def name(self) -> str:
        return "with_latest_from"

    @property
    def upstreams(self) -> tuple[Publisher[Any], ...]:
        return (self._upstream, self._other)

    def _new_stage(self, subscriber: Subscriber[Any]) -> Subscriber[Any]:
        stage = _WithLatestFrom(subscriber, self._combiner, self._prefetch)
        try:
            self._other.subscribe(_Other(stage))
        except Exception as exc:  # the publisher broke Rule 1.9
            stage.other_failed(exc)
        return stage


class _WithLatestFrom(BufferedStage):
    _forwards_demand = True

    __slots__ = (
        "_combiner",
        "_dropped",
        "_latest",
        "_other",
        "_other_outstanding",
        "_other_seen",
        "_position",
        "_prefetch",
        "_started",
    )

    def __init__(
        self, downstream: Subscriber[Any], combiner: Callable[[tuple[Any, Any]], Any], prefetch: int
    ) -> None:
        super().__init__(downstream)
        self._combiner = combiner
        self._prefetch = prefetch
        self._latest: Any = None
        self._other: Subscription | None = None
        self._other_outstanding = 0
        self._other_seen = 0
        self._dropped = 0
        self._position = 0
        self._started = False

    def _dropped_now(self) -> int:
        return self._dropped

    def on_subscribe(self, subscription: Subscription) -> None:
        if not self._accept_upstream(subscription):
            return
        with self._lock:
            self._started = True
            stopped = self._done
        if stopped:  # other failed before upstream subscribed
            cancel_quietly(subscription)
            self._schedule()

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        position = self._position
        self._position += 1
        with self._lock:
            if self._done or self._cancelled:
                return
            latest = self._latest
            if latest is None:
                self._dropped += 1
        upstream = self._upstream
        if latest is None:
            if upstream is not None:
                self.request_upstream(upstream, 1)  # the dropped element's replacement
            return
        try:
            result = self._combiner((element, latest))
            if result is None:
                raise NoneResultError("the combiner given to with_latest_from()", position)
        except Exception as exc:
            self._fail_urgently(exc)
            self._schedule()
            return
        with self._lock:
            if not self._open_locked():  # ended while the combiner ran
                return
            self._ready.append(result)
            self._high_water = max(self._high_water, len(self._ready))
        self._schedule()

    def _open_locked(self) -> bool:
        return not (self._done or self._cancelled)

    # ------------------------------------------------------------------ the other publisher
    def other_subscribed(self, subscription: Subscription) -> bool:
        with self._lock:
            live = not self._terminated and self._other is None
            if live:
                self._other = subscription
                self._other_outstanding = self._prefetch
        if live:
            self.request_upstream(subscription, self._prefetch)
        return live

    def other_next(self, element: Any) -> None:
        refill = 0
        with self._lock:
            if self._done:
                return
            if self._other_outstanding <= 0:
                self._fail_urgently_locked(_overrun("with_latest_from", 1))
            else:
                self._latest = element
                self._other_outstanding -= 1
                self._other_seen += 1
                if self._other_seen >= replenish_threshold(self._prefetch):
                    refill, self._other_seen = self._other_seen, 0
                    self._other_outstanding += refill
            subscription = self._other
            failed = self._urgent
            started = self._started
        if failed:
            if started:
                self._schedule()
        elif refill and subscription is not None:
            self.request_upstream(subscription, refill)

    def other_failed(self, error: Exception) -> None:
        """``other`` failed: fail now; its subscription is dropped first (Rule 2.3)."""
        with self._lock:
            self._other = None
            self._fail_urgently_locked(error)
            started = self._started
        if started:
            self._schedule()

    def _stop_locked(self) -> Sequence[Cancellable]:
        super()._stop_locked()
        other, self._other = self._other, None
        self._latest = None
        return () if other is None else (other,)


class _Other(Subscriber[Any]):
    __slots__ = ("_stage",)

    def __init__(self, stage: _WithLatestFrom) -> None:
        self._stage = stage

    def on_subscribe(self, subscription: Subscription) -> None:
        accept_subscription(subscription, self._stage.other_subscribed)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        self._stage.other_next(element)

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        self._stage.other_failed(error)

    def on_complete(self) -> None:
        """``other`` ended: its last element stays in use."""
