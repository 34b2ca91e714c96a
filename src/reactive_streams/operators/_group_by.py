"""``group_by``: split a stream into one group publisher per key, demand-bounded.

``Flow.group_by`` passes ``GroupedFlow`` as the ``group`` factory, so each group reaches
the subscriber as a ``Flow`` with a ``key``; this module does not know ``Flow``.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any

from .._core import (
    DrainLoop,
    MemberSubscription,
    StageOperator,
    StageStatistics,
    TerminalLatch,
    WorkGuard,
    accept_subscription,
    cancel_quietly,
    check_positive,
    replenish_threshold,
    report_undeliverable,
    signal_each,
    signal_error_only,
    signal_on_error,
    signal_on_subscribe,
    signal_terminal,
)
from ..api import Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["GroupByOperator", "TooManyGroupsError"]


class TooManyGroupsError(RuntimeError):
    """``group_by`` met a new key while ``max_groups`` groups were live."""


class GroupByOperator(StageOperator[Any]):
    """Emit one group per distinct key, each with the elements of its key.

    Marble (``key=lambda x: x % 2``)::

        source:   -1-2-3-4-|
        result:   -G1-G0-----|
        G1 (odd):  1---3---|
        G0 (even):   2---4-|

    Backpressure:
        ``prefetch`` elements are requested upstream and replenished (at 75%) only as the
        groups' subscribers take elements: upstream demand is bounded by the groups'
        demand. New groups wait for the main subscriber's demand. Consequence (Reactor's
        caveat): a group that is never consumed keeps its elements, and once they fill
        ``prefetch`` every group stalls. Consume or cancel every group (``flat_map`` with
        ``concurrency >= max_groups``), or put ``timeout`` on the consumers to turn a stall
        into an error.

    Errors:
        ``key`` raising, or a new key while ``max_groups`` groups are live
        (``TooManyGroupsError`` naming the limit), cancel upstream and signal
        ``on_error`` to the main subscriber and to every group. An error (ours or
        upstream's) overtakes the elements still queued in groups, as in Reactor.

    Concurrency:
        One drain loop delivers to the main subscriber and every group, serially for each.

    Args:
        upstream: the source.
        key: the key of an element.
        max_groups: the most groups live at once.
        prefetch: elements requested upstream ahead of the groups' demand.
        group: makes the element emitted for a new group from its key and its publisher
            (``Flow.group_by`` passes ``GroupedFlow``).
    """

    __slots__ = ("_group", "_key", "_max_groups", "_prefetch")

    def __init__(
        self,
        upstream: Publisher[Any],
        key: Callable[[Any], Any],
        max_groups: int,
        prefetch: int,
        group: Callable[[Any, Publisher[Any]], Publisher[Any]],
    ) -> None:
        super().__init__(upstream)
        self._key = key
        self._group = group
        self._max_groups = check_positive("max_groups", max_groups)
        self._prefetch = check_positive("prefetch", prefetch)

    @property
    def name(self) -> str:
        return "group_by"

    def _new_stage(self, subscriber: Subscriber[Any]) -> Subscriber[Any]:
        return _GroupBy(subscriber, self._key, self._max_groups, self._prefetch, self._group)


class _Group(Publisher[Any], MemberSubscription):
    """A group's publisher and its subscription (the kit's ``MemberSubscription``).

    Its state is guarded by the owner's lock; the owner's drain loop delivers to it.
    """

    def __init__(self, owner: _GroupBy, key: Any) -> None:
        super().__init__(owner, None)
        self.group_by = owner
        self.key = key
        self.queue: deque[Any] = deque()
        self.subscribed = False
        self.finished = False

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe() requires a Subscriber, got None")
        with self.group_by._lock:
            taken = self.subscribed
            self.subscribed = True
        if taken:
            signal_error_only(
                subscriber, RuntimeError(f"group {self.key!r} already has a subscriber")
            )
            return
        self.subscriber = subscriber
        if not signal_on_subscribe(subscriber, self):
            self.cancel()
            return
        self.group_by._schedule()


class _GroupBy(TerminalLatch, Subscriber[Any]):
    """The coordinator: upstream subscriber and the drain loop of the main and the groups.

    The main subscriber's ``Subscription``, like each group's, is one of the kit's
    ``MemberSubscription``: its demand, its parked Rule 3.9 error and its cancel, served
    by this stage's one drain loop.
    """

    def __init__(
        self,
        downstream: Subscriber[Any],
        key: Callable[[Any], Any],
        max_groups: int,
        prefetch: int,
        group: Callable[[Any, Publisher[Any]], Publisher[Any]],
    ) -> None:
        self._lock = threading.Lock()
        self._group = group
        self._guard = WorkGuard(self._lock)
        self._loop = DrainLoop(self._drain, guard=self._guard, on_failure=self._fail_now)
        self._main = MemberSubscription(self, downstream)
        self._key = key
        self._max_groups = max_groups
        self._prefetch = prefetch
        self._threshold = replenish_threshold(prefetch)
        self._upstream: Subscription | None = None
        self._groups: dict[Any, _Group] = {}
        self._new: deque[_Group] = deque()
        self._live: list[_Group] = []  # every group not finished, emitted or not
        self._delivered = 0
        self._consumed = 0
        self._done = False
        self._error: Exception | None = None
        self._urgent = False
        self._upstream_cancelled = False
        self._main_ended = False
        self._dropped = 0

    def statistics(self) -> StageStatistics:
        with self._lock:
            return StageStatistics(
                requested=self._main.requested,
                delivered=self._delivered,
                buffered=sum(len(group.queue) for group in self._live),
                cancelled=self._main.cancelled,
                terminated=self._main_ended,
                dropped=self._dropped,
            )

    # ------------------------------------------------------------------ upstream
    def on_subscribe(self, subscription: Subscription) -> None:
        if not accept_subscription(subscription, self._upstream is None):
            return
        self._upstream = subscription
        main = self._main
        downstream = main.subscriber
        if downstream is None or not signal_on_subscribe(downstream, main):
            main.cancel()
            return
        try:
            subscription.request(self._prefetch)
        except Exception as exc:  # Rule 3.16 broken
            self._fail(exc)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        with self._lock:
            if self._done:
                return
        try:
            key = self._key(element)
        except Exception as exc:
            self._fail(exc)
            return
        error: Exception | None = None
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                if self._main.cancelled:  # nobody can take a new group any more: count it
                    self._dropped += 1
                    self._consumed += 1
                elif len(self._groups) >= self._max_groups:
                    error = TooManyGroupsError(
                        f"group_by: a new key {key!r} arrived while max_groups="
                        f"{self._max_groups} groups are live; raise max_groups, or consume "
                        "(or cancel) groups so they can close"
                    )
                else:
                    group = _Group(self, key)
                    self._groups[key] = group
                    self._new.append(group)
                    self._live.append(group)
            if group is not None:
                group.queue.append(element)
        if error is not None:
            self._fail(error)
            return
        self._schedule()

    def _fail(self, error: Exception) -> None:
        """Our own error (key raised, too many groups): urgent, upstream cancelled."""
        with self._lock:
            if self._urgent:
                report = True
            else:
                report = False
                self._done = True
                self._error = error
                self._urgent = True
        if report:
            report_undeliverable(error)
        self._schedule()

    # ------------------------------------------------------------------ the drain
    def _schedule(self) -> None:
        if self._guard.acquire():
            self._loop.start_owned()

    def _drain(self) -> None:
        while True:
            moved = False
            moved |= self._serve_main()
            for group in list(self._live):
                moved |= self._serve_group(group)
            moved |= self._replenish_or_stop()
            if not moved:
                return

    def _serve_main(self) -> bool:
        error: Exception | None
        main = self._main
        parked = False  # ending with the main's own Rule 3.9 error
        with self._lock:
            downstream = main.subscriber
            if self._main_ended or downstream is None:
                return False
            if main.cancelled or main.error is not None:
                self._main_ended = True
                main.subscriber = None  # Rule 3.13
                error = None if main.cancelled else main.error
                main.cancelled = True
                self._drop_unemitted_locked(self._new)
                self._new.clear()
                if error is None:
                    return True
                batch: list[_Group] = []
                finished = parked = True
            else:
                error = self._error
                count = 0 if error is not None else main.take_locked(len(self._new))
                batch = [self._new.popleft() for _ in range(count)]
                self._delivered += count
                finished = error is not None or (self._done and not self._new)
                if finished:
                    error = self._error
                    self._main_ended = True
                    main.subscriber = None  # Rule 3.13
        emitted = (self._group(group.key, group) for group in batch)
        sent, ok = signal_each(downstream, emitted, main.is_cancelled)
        if sent < len(batch):  # a cancel (or a raise) cut the run short
            with self._lock:
                self._drop_unemitted_locked(batch[sent + (not ok) :])
                self._delivered -= len(batch) - sent
        if not ok:  # Rule 2.13
            main.cancel()
            return True
        if self._main_ended and finished:
            if parked or not main.cancelled:  # not cancelled from inside on_next
                signal_terminal(downstream, error)
            return True
        return bool(batch) or self._main_ended

    def _drop_unemitted_locked(self, groups: Iterable[_Group]) -> None:
        """Groups never emitted, now that nobody can take them: their elements are dropped."""
        for group in groups:
            self._live.remove(group)
            if self._groups.get(group.key) is group:
                del self._groups[group.key]
            self._dropped += len(group.queue)
            self._consumed += len(group.queue)
            group.queue.clear()
            group.finished = True

    def _serve_group(self, group: _Group) -> bool:
        with self._lock:
            if group.finished:
                return False
            if group.cancelled or group.error is not None:
                group.finished = True
                self._consumed += len(group.queue)
                group.queue.clear()
                if self._groups.get(group.key) is group:
                    del self._groups[group.key]  # the key opens a new group if it returns
                self._live.remove(group)
                error = group.error if not group.cancelled else None
                subscriber, group.subscriber = group.subscriber, None
                if error is not None and subscriber is not None:
                    group.cancelled = True
                else:
                    return True
            else:
                subscriber = group.subscriber
                if subscriber is None:
                    return False  # not subscribed yet: its elements wait
                urgent_error = self._error  # an error overtakes queued elements (Reactor)
                count = 0 if urgent_error is not None else group.take_locked(len(group.queue))
                batch = [group.queue.popleft() for _ in range(count)]
                self._consumed += count
                ended = urgent_error is not None or (self._done and not group.queue)
                error = self._error if ended else None
                if ended:
                    group.finished = True
                    group.subscriber = None
                    self._live.remove(group)
                    if self._groups.get(group.key) is group:
                        del self._groups[group.key]
                if not batch and not ended:
                    return False
        if group.finished and group.cancelled:  # a Rule 3.9 error of the group
            assert error is not None
            assert subscriber is not None
            signal_on_error(subscriber, error)
            return True
        _, ok = signal_each(subscriber, batch, group.is_cancelled)
        if not ok:  # Rule 2.13
            group.cancel()
            return True
        if ended and not group.cancelled:  # not cancelled from inside on_next
            signal_terminal(subscriber, error)
        return True

    def _replenish_or_stop(self) -> bool:
        with self._lock:
            upstream = self._upstream
            if upstream is None or self._upstream_cancelled:
                return False
            stop = self._urgent or (self._main_ended and not self._live)
            if stop:
                self._upstream_cancelled = True
            refill = 0
            if not stop and not self._done and self._consumed >= self._threshold:
                refill, self._consumed = self._consumed, 0
        if stop:
            if not self._done or self._urgent:
                cancel_quietly(upstream)
            return False
        if refill:
            try:
                upstream.request(refill)
            except Exception as exc:  # Rule 3.16 broken
                self._fail(exc)
            return True
        return False

    def _fail_now(self, error: Exception) -> None:
        """A drain pass raised (a bug of ours): one on_error everywhere, upstream cancelled."""
        with self._lock:
            downstream, self._main.subscriber = self._main.subscriber, None
            groups = [g for g in self._live if g.subscriber is not None]
            self._live = []
            upstream = self._upstream
        if upstream is not None:
            cancel_quietly(upstream)
        if downstream is not None:
            signal_on_error(downstream, error)
        for group in groups:
            subscriber, group.subscriber = group.subscriber, None
            if subscriber is not None:
                signal_on_error(subscriber, error)
