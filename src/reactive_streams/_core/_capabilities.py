"""Fusion capabilities: what a publisher or subscriber declares so a stage can skip work.

A stage asks for a capability, never for a concrete class: any class that declares one
gets the fast path, and a class that does not keeps the general one. Reactor does the
same with ``requestFusion``.

* ``ExecutorSubscribable``: a publisher that can run its own emission on an executor
  (Reactor's SYNC fusion). ``publish_on`` and ``subscribe_on`` then need no buffer and no
  forwarding stage: they hand the executor to the source.
* ``RunSubscriber`` and ``run_receiver``: a subscriber that takes a run of elements in
  one call (``on_next_run``), so a draining stage hands it a batch instead of calling
  ``on_next`` per element.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from concurrent.futures import Executor

    from ..api import Subscriber
    from ._operator import StageStatistics

__all__ = ["ExecutorSubscribable", "RunSubscriber", "run_receiver"]

T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)


@runtime_checkable
class ExecutorSubscribable(Protocol[T_co]):
    """A publisher that emits on an executor it is given, reading its source only on demand.

    A class declares it by implementing both methods (``PullPublisher`` does);
    ``isinstance(publisher, ExecutorSubscribable)`` is the test a stage makes, once per
    subscriber.
    """

    def subscribe_on_executor(
        self, subscriber: Subscriber[T_co], executor: Executor | None
    ) -> None:
        """Serve ``subscriber`` with every signal but ``on_subscribe`` run on ``executor``.

        Rules 1.3 and 1.9 hold as for ``subscribe``: ``on_subscribe`` returns before the
        first ``on_next`` starts. ``None`` emits on the requesting thread, as ``subscribe``.
        """
        ...

    def last_statistics(self) -> StageStatistics | None:
        """Statistics of the most recent subscription, for the fused stage to report."""
        ...


class RunSubscriber(Protocol[T_contra]):
    """A subscriber that accepts a run of elements in one call.

    A class declares it by defining ``on_next_run`` itself (``CallbackSubscriber`` does);
    ``run_receiver`` finds it.
    """

    def on_next_run(self, elements: Iterator[T_contra]) -> None:
        """Exactly ``on_next`` for each of ``elements`` in order, in one call.

        It stops early once the subscriber is done (cancelled, or its callable raised: the
        subscriber then cancels and reports as ``on_next`` would, never raising, Rule
        2.13) and leaves what it did not take in ``elements``. It is called where
        ``on_next`` would be, so signals stay serial (Rule 1.3).
        """
        ...


def run_receiver(subscriber: Subscriber[Any]) -> Callable[[Iterator[Any]], None] | None:
    """``subscriber.on_next_run`` if the subscriber's own class declares it, else ``None``.

    Only the class itself counts, not a base class: a subclass that overrides ``on_next``
    but inherits ``on_next_run`` would see its ``on_next`` bypassed, so it gets the plain
    path unless it declares ``on_next_run`` itself. Look it up once per subscription.
    """
    declared = type(subscriber).__dict__.get("on_next_run")
    if declared is None:
        return None
    method: Callable[[Iterator[Any]], None] = declared.__get__(subscriber)
    return method
