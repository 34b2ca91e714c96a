"""The TCK's own helper publisher: the upstream of the processor verification.

The TCK ships its own small, correct publisher (as the JVM TCK ships its copy of the
examples' ``AsyncIterablePublisher``) so that the processor tests do not depend on the
implementation under test. It is built from the package's demand core: an
``EmitterElection`` decides the single emitter (Rules 1.3, 3.3), a ``DrainLoop`` runs the
emission on the caller's thread or on an executor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core import (
    MAX_DEMAND,
    DrainLoop,
    EmitterElection,
    signal_on_complete,
    signal_on_error,
    signal_on_next,
    signal_on_subscribe,
)
from ..api import Publisher, Subscriber, Subscription
from ._support import is_none

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import Executor

__all__ = ["HelperPublisher"]

_BATCH = 64


class HelperPublisher(Publisher[Any]):
    """Emits ``create_element(0) ... create_element(elements - 1)``, then completes.

    Args:
        elements: how many elements each subscriber gets; ``MAX_DEMAND`` means infinite.
        executor: where signals after ``on_subscribe`` run; ``None`` runs them on the
            thread that calls ``request`` (a synchronous publisher, Rule 3.10).
        create_element: the element for an index; by default the index itself.

    Each subscriber gets its own sequence (unicast, Rule 1.11). An empty publisher
    completes right after ``on_subscribe``.
    """

    def __init__(
        self,
        elements: int,
        *,
        executor: Executor | None = None,
        create_element: Callable[[int], Any] | None = None,
    ) -> None:
        self._elements = elements
        self._executor = executor
        self._create_element = create_element or _identity

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        """Attach ``subscriber`` (Rule 1.9: ``None`` raises ``TypeError``)."""
        if is_none(subscriber):
            raise TypeError("Rule 1.9: subscribe(None): the subscriber must not be None")
        _HelperSubscription(self, subscriber).start()


def _identity(index: int) -> int:
    return index


def _cancelled(election: EmitterElection) -> bool:
    """Read the flag afresh: another thread may have cancelled since the last look."""
    return election.cancelled


class _HelperSubscription(Subscription):
    def __init__(self, publisher: HelperPublisher, subscriber: Subscriber[Any]) -> None:
        self._subscriber: Subscriber[Any] | None = subscriber
        self._end = publisher._elements
        self._create = publisher._create_element
        self._index = 0
        self._subscribed = False
        self._election = EmitterElection()
        self._loop = DrainLoop(
            self._drain,
            executor=publisher._executor,
            on_rejected=self._rejected,
            guard=self._election,
        )

    def start(self) -> None:
        # on_subscribe runs inside the drain loop, so that no on_next can overlap it when
        # the subscriber requests from on_subscribe (Rule 1.3); with an executor it runs
        # there, like every later signal.
        if self._election.acquire():
            self._loop.start_owned()

    def request(self, n: int) -> None:
        if self._election.request(n):
            self._loop.start_owned()

    def cancel(self) -> None:
        if self._election.cancel():
            self._subscriber = None  # Rule 3.13; the guard stays owned for good

    def _rejected(self, error: Exception) -> None:
        subscriber, self._subscriber = self._subscriber, None
        self._election.terminate()
        if subscriber is not None:
            signal_on_error(subscriber, error)

    def _drain(self) -> bool:
        election = self._election
        subscriber = self._subscriber
        if subscriber is None or election.terminated:
            return False
        if not self._subscribed:
            self._subscribed = True
            if not signal_on_subscribe(subscriber, self):
                election.cancel()  # Rule 2.13
        if _cancelled(election):
            self._subscriber = None
            return False
        if self._index == self._end and self._end != MAX_DEMAND:
            election.terminate()
            self._subscriber = None
            signal_on_complete(subscriber)  # an empty stream completes without demand
            return False
        error = election.take_error()
        if error is not None:
            election.terminate()
            self._subscriber = None
            signal_on_error(subscriber, error)
            return False
        sent = 0
        demand = election.demand
        while sent < demand and sent < _BATCH and self._index != self._end:
            if _cancelled(election):
                break
            element = self._create(self._index)
            self._index += 1
            sent += 1
            if not signal_on_next(subscriber, element):
                election.cancel()  # Rule 2.13: treat as cancelled
                break
        election.produced(sent)
        if _cancelled(election):
            self._subscriber = None
            return False
        if self._index == self._end and self._end != MAX_DEMAND:
            election.terminate()
            self._subscriber = None
            signal_on_complete(subscriber)
            return False
        return sent == _BATCH and election.demand > 0
