"""Shared pieces of the operator layer: stage statistics, the operator base class, errors.

Every operator is a ``Publisher`` subclass of ``Operator``: it knows its name (shown by
``Flow.metrics()``), its upstream publishers, and the most recent stage it created for a
subscriber, so a running pipeline can be walked and inspected.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from ..api import Publisher, Subscriber, Subscription
from ._exceptions import ProtocolViolationError
from ._signals import signal_on_error, signal_on_subscribe
from ._statistics import StreamStatistics

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "NoneResultError",
    "Operator",
    "StageStatistics",
    "EmptySubscription",
    "signal_error_only",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class StageStatistics(StreamStatistics):
    """A snapshot of one operator stage: ``StreamStatistics`` plus buffer and loss counters.

    Attributes:
        high_water_mark: the most elements the stage's buffer ever held at once (0 for a
            stage without a buffer).
        dropped: elements the stage discarded on purpose (an overflow strategy such as
            ``on_backpressure_drop``), each also passed to the ``on_drop`` callback if any.
    """

    high_water_mark: int = 0
    dropped: int = 0


class HasStatistics(Protocol):
    """Anything with a ``statistics()`` snapshot: every stage object."""

    def statistics(self) -> StageStatistics:
        """Return a frozen snapshot of the stage's counters."""
        ...


class NoneResultError(ProtocolViolationError, TypeError):
    """A user function returned ``None``, which is never a valid element (Rule 2.13).

    Attributes:
        position: the 0-based position of the element the function was applied to, counted
            in the stream entering the stage.
    """

    def __init__(self, what: str, position: int) -> None:
        super().__init__(
            f"Rule 2.13: {what} returned None for the element at position {position} "
            "(0-based) of its input; None is never a valid element",
            rule="2.13",
        )
        self.position = position


class Operator(Publisher[T]):
    """Base of every operator publisher: a name, upstreams, and the last stage it created.

    Subclasses implement ``subscribe`` and call ``self._track(stage)`` with the object that
    serves the new subscriber, so that ``Flow.metrics()`` can report on it.
    """

    __slots__ = ("__weakref__", "_last", "_track_lock")

    def __init__(self) -> None:
        self._last: HasStatistics | None = None
        self._track_lock = threading.Lock()

    @property
    @abstractmethod
    def name(self) -> str:
        """The operator's name as shown by ``Flow.metrics()``, e.g. ``"range|map|filter"``."""

    @property
    def upstreams(self) -> tuple[Publisher[Any], ...]:
        """The publishers this operator subscribes to (empty for a source)."""
        return ()

    def _track(self, stage: HasStatistics) -> None:
        with self._track_lock:
            # A strong reference: stages drop their subscriber when they end or are
            # cancelled (Rule 3.13), so keeping the last one costs a few counters.
            self._last = stage

    def last_statistics(self) -> StageStatistics | None:
        """Statistics of the most recent stage this operator created, if any."""
        with self._track_lock:
            stage = self._last
        return None if stage is None else stage.statistics()


def walk(publisher: Publisher[Any]) -> Iterator[Operator[Any]]:
    """Yield the operators of a pipeline, sources first (depth-first, each once)."""
    seen: set[int] = set()
    order: list[Operator[Any]] = []

    def visit(node: Publisher[Any]) -> None:
        inner = getattr(node, "_node", node)  # a Flow wraps its operator
        if id(inner) in seen or not isinstance(inner, Operator):
            return
        seen.add(id(inner))
        for upstream in inner.upstreams:
            visit(upstream)
        order.append(inner)

    visit(publisher)
    return iter(order)


class EmptySubscription(Subscription):
    """A subscription with nothing behind it: ``request`` and ``cancel`` do nothing."""

    __slots__ = ()

    def request(self, n: int) -> None:
        """Ignore demand: the stream is already over or about to end."""

    def cancel(self) -> None:
        """Nothing to cancel."""


def signal_error_only(subscriber: Subscriber[Any], error: Exception) -> None:
    """Serve a subscriber that can only fail: ``on_subscribe`` then ``on_error`` (Rule 1.9)."""
    if signal_on_subscribe(subscriber, EmptySubscription()):
        signal_on_error(subscriber, error)


def check_subscriber(subscriber: object) -> None:
    """Raise ``TypeError`` for ``subscribe(None)`` (Rule 1.9)."""
    if subscriber is None:
        raise TypeError("Rule 1.9: subscribe() requires a Subscriber, got None")


class SingleUpstreamOperator(Operator[T]):
    """An operator with exactly one upstream publisher, which ``Flow.metrics()`` walks."""

    __slots__ = ("_upstream",)

    def __init__(self, upstream: Publisher[Any]) -> None:
        super().__init__()
        self._upstream = upstream

    @property
    def upstreams(self) -> tuple[Publisher[Any], ...]:
        """The one publisher this operator subscribes to."""
        return (self._upstream,)


class StageOperator(SingleUpstreamOperator[T]):
    """A single-upstream operator that serves each subscriber with a new stage.

    ``subscribe`` checks the subscriber (Rule 1.9), builds the stage with ``_new_stage``,
    tracks it for ``Flow.metrics()`` and subscribes it upstream; the stage then signals
    ``on_subscribe`` downstream when its upstream subscription arrives.
    """

    __slots__ = ()

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Subscribe ``subscriber`` through a new stage (Rule 1.9)."""
        check_subscriber(subscriber)
        stage = self._new_stage(subscriber)
        self._track(cast("HasStatistics", stage))  # every stage has statistics()
        self._upstream.subscribe(stage)

    @abstractmethod
    def _new_stage(self, subscriber: Subscriber[T]) -> Subscriber[Any]:
        """The stage that serves ``subscriber``: a subscriber upstream with statistics()."""
