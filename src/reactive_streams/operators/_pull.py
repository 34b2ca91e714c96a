"""The pull fast path: an iterable source and its fused chain, driven by an emitter election.

``PullPublisher`` is what ``Flow.range``, ``Flow.from_iterable`` and ``Flow.just`` build,
together with every synchronous operator fused after them. For each subscriber it opens a
fresh iterator (``factory()``), wraps it with the compiled chain (see ``_fusion``) and emits
from it on the thread that calls ``request`` (Rule 3.10), with the recursion depth bounded
to 1 by the election (Rule 3.3).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, TypeVar

from .._core import (
    MAX_DEMAND,
    DrainLoop,
    EmitterElection,
    NoneResultError,
    Operator,
    StageStatistics,
    check_subscriber,
    report_undeliverable,
    report_violation,
    signal_on_complete,
    signal_on_error,
    signal_on_subscribe,
)
from ..api import Subscriber, Subscription
from ._fusion import FusedOp, cancellable, compile_pull

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from concurrent.futures import Executor

    from .._core import ExecutorRejectedError

__all__ = ["PullPublisher"]

T = TypeVar("T")

_PASS_LIMIT = 4096
"""On an executor, elements emitted per task before the task resubmits itself."""


class PullPublisher(Operator[T]):
    """A cold publisher over an iterable, with a fused chain of synchronous operators.

    Args:
        factory: returns the iterable to read for each new subscriber (``range(...)``, a
            list, or the user's iterable: a one-shot iterator is read by one subscriber).
        ops: the fused operators, applied in order.
        source_name: the source's name for ``Flow.metrics()``.

    Backpressure:
        Emits at most the requested number of elements; it reads the iterator only while
        there is demand, so nothing is buffered and nothing is read ahead: each element
        goes out as soon as ``next()`` returns it. The end is found by the read that comes
        up short, so a stream whose last element used up the demand completes on the next
        ``request`` (Rule 1.5 allows that; the TCK's end-of-stream test requests once more).

    Concurrency:
        Emits on the thread that calls ``request``; concurrent requests from other
        threads only add demand for the elected emitter (Rules 1.3, 3.3).
    """

    __slots__ = ("_build", "_factory", "_ops", "_source_name")

    def __init__(
        self,
        factory: Callable[[], Iterable[T]],
        ops: tuple[FusedOp, ...] = (),
        source_name: str = "iterable",
    ) -> None:
        super().__init__()
        self._factory = factory
        self._ops = ops
        self._source_name = source_name
        self._build: Callable[[Iterator[Any], Callable[[], int] | None], Iterator[Any]] | None = (
            None
        )

    @property
    def name(self) -> str:
        return "|".join([self._source_name, *(op.name for op in self._ops)])

    def with_op(self, op: FusedOp) -> PullPublisher[Any]:
        """A new publisher with ``op`` fused at the end of the chain."""
        return PullPublisher(self._factory, (*self._ops, op), self._source_name)

    def open(self, is_cancelled: Callable[[], bool]) -> tuple[Iterator[Any], Iterator[Any]]:
        """Return ``(chain, raw)``: the fused iterator and the raw source iterator."""
        build = self._build
        if build is None:
            build = self._build = compile_pull(self._ops)
        iterator, raw, position = cancellable(self._factory(), is_cancelled)
        return build(iterator, position), raw

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Serve ``subscriber`` from a fresh iterator (Rule 1.9: ``None`` -> ``TypeError``)."""
        self.subscribe_on_executor(subscriber, None)

    def subscribe_on_executor(self, subscriber: Subscriber[T], executor: Executor | None) -> None:
        """Serve ``subscriber``, emitting on ``executor`` (SYNC fusion with ``publish_on``).

        ``publish_on`` after an iterable source needs no buffer: the elected emitter simply
        runs on the executor and reads the iterator there, as Reactor's SYNC fusion does.
        Nothing is read without demand, so the bound is the demand itself.
        """
        check_subscriber(subscriber)
        subscription = PullSubscription(self, subscriber, executor)
        self._track(subscription)
        if executor is None:  # emitting inside on_subscribe is same-thread nesting: allowed
            if not signal_on_subscribe(subscriber, subscription):
                subscription.cancel()
            return
        # On an executor, no on_next may start before on_subscribe has returned (Rule 1.3):
        # own the election during on_subscribe; requests made there only add demand.
        election = subscription.election
        election.acquire()
        if not signal_on_subscribe(subscriber, subscription):
            election.cancel()
        if election.release():
            subscription.start_owned()


class PullSubscription(Subscription):
    """One subscriber's iterator, emitted by whoever the election picks."""

    __slots__ = (
        "__weakref__",
        "_election",
        "_executor",
        "_iterator",
        "_loop",
        "_publisher",
        "_raw",
        "_subscriber",
    )

    def __init__(
        self,
        publisher: PullPublisher[Any],
        subscriber: Subscriber[Any],
        executor: Executor | None = None,
    ) -> None:
        self._executor = executor
        self._publisher: PullPublisher[Any] | None = publisher
        self._subscriber: Subscriber[Any] | None = subscriber
        self._election = EmitterElection()
        self._iterator: Iterator[Any] | None = None
        self._raw: Iterator[Any] | None = None
        # The package's one drain loop, on the election: it resubmits a pass that yields
        # the executor, and ends the stream if a pass raises (a KeyboardInterrupt in a
        # user function on the executor: StreamInterruptedError downstream, re-raised).
        self._loop = DrainLoop(
            self._emit,
            executor=executor,
            on_rejected=self._rejected,
            guard=self._election,
            on_failure=self._failed,
        )

    def statistics(self) -> StageStatistics:
        """Requested and delivered counts; this stage never buffers."""
        election = self._election
        return StageStatistics(
            requested=election.requested,
            delivered=election.delivered,
            buffered=0,
            cancelled=election.cancelled,
            terminated=election.terminated,
        )

    def request(self, n: int) -> None:
        """Add demand (Rule 3.8); the elected caller emits (Rule 3.3). Never raises."""
        if self._election.request(n):
            self._start()

    def cancel(self) -> None:
        """Stop emitting and drop the subscriber and the iterator (Rules 3.7, 3.13)."""
        if self._election.cancel():
            self._start()

    @property
    def election(self) -> EmitterElection:
        """The demand accounting and emitter election of this subscription."""
        return self._election

    def start_owned(self) -> None:
        """Start emitting for a caller that owns the election."""
        self._start()

    def _start(self) -> None:
        """Run the emit loop here, or as a task on the executor (the caller owns it)."""
        self._loop.start_owned()

    def _rejected(self, rejected: ExecutorRejectedError) -> None:
        # Shut down, closed loop: the stream ends with the error (we own the election).
        self._failed(rejected)

    def _failed(self, error: Exception) -> None:
        subscriber = self._subscriber
        if subscriber is None:
            report_undeliverable(error)
        else:
            self._fail(subscriber, error)

    def _release_resources(self) -> None:
        raw = self._raw
        self._subscriber = None
        self._iterator = None
        self._raw = None
        self._publisher = None
        close = getattr(raw, "close", None)
        if close is not None:
            try:
                close()
            except Exception as exc:  # a generator's cleanup failed: report, never lose
                report_violation(raw, "close", exc)

    def _fail(self, subscriber: Subscriber[Any], error: Exception) -> None:
        self._election.terminate()
        self._release_resources()
        signal_on_error(subscriber, error)

    def _emit(self) -> bool:
        """One pass of the elected emitter; ``True`` to yield the executor with demand left."""
        election = self._election
        subscriber = self._subscriber
        if subscriber is None:
            election.retire()
            return False
        error = election.take_error()
        if error is not None:  # Rule 3.9
            self._fail(subscriber, error)
            return False
        if election.cancelled:  # Rules 3.6, 3.13: keep ownership, drop references
            election.retire()
            self._release_resources()
            return False
        iterator = self._iterator
        if iterator is None:
            publisher = self._publisher
            assert publisher is not None
            try:
                iterator, self._raw = publisher.open(lambda: election.cancelled)
            except Exception as exc:  # iter() of the user's iterable failed (Rule 1.4)
                self._fail(subscriber, exc)
                return False
            self._iterator = iterator
        demand = election.demand
        if self._executor is not None and demand > _PASS_LIMIT:
            demand = _PASS_LIMIT  # yield the executor regularly (an event loop, say)
        batch = iterator if demand == MAX_DEMAND else itertools.islice(iterator, demand)
        on_next = subscriber.on_next
        emitted = 0
        try:
            for element in batch:
                if element is None:
                    raise NoneResultError("the source", election.delivered + emitted)
                try:
                    on_next(element)
                except Exception as exc:  # Rule 2.13: treat as cancelled, report
                    election.produced(emitted + 1)
                    election.cancel()
                    election.retire()
                    self._release_resources()
                    report_violation(subscriber, "on_next", exc)
                    return False
                emitted += 1
                if election._cancelled:
                    break
        except Exception as exc:  # a user function or the source raised (Rule 1.4)
            election.produced(emitted)
            self._fail(subscriber, exc)
            return False
        remaining = election.produced(emitted)
        if emitted < demand and not election.cancelled:  # exhausted (Rules 1.2, 1.5)
            election.terminate()
            self._release_resources()
            signal_on_complete(subscriber)
            return False
        # With demand left after a full batch on an executor, the loop continues in a new
        # task, still owning; otherwise it releases the election (or passes again if missed).
        return self._executor is not None and bool(remaining) and emitted == _PASS_LIMIT
