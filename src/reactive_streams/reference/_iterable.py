"""``IterablePublisher`` and ``ExecutorIterablePublisher``: any iterable as a publisher."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Generic, TypeVar

from .._core import MAX_DEMAND, EmitLoopSubscription, check_positive, report_undeliverable
from ..api import Publisher, Subscriber

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from concurrent.futures import Executor

__all__ = ["ExecutorIterablePublisher", "IterablePublisher"]

T = TypeVar("T")

_NOTHING: Final = object()


class _IterablePublisherBase(Publisher[T], Generic[T]):
    """What both iterable publishers share: one ``_IteratorSubscription`` per subscriber."""

    __slots__ = ("_batch_size", "_executor", "_iterable")

    def __init__(self, iterable: Iterable[T], executor: Executor | None, batch_size: int) -> None:
        self._iterable = iterable
        self._executor = executor
        self._batch_size = batch_size

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Start a new iteration for ``subscriber`` (Rules 1.9, 1.11).

        Raises:
            TypeError: if ``subscriber`` is ``None`` (Rule 1.9).
        """
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe() requires a subscriber, got None")
        _IteratorSubscription(
            subscriber, self._iterable, executor=self._executor, batch_size=self._batch_size
        ).start()


class IterablePublisher(_IterablePublisherBase[T]):
    """Publishes the elements of an iterable, synchronously, on demand.

    Each subscriber gets its own ``iter(iterable)`` (unicast, Rule 1.11), so a list can be
    subscribed many times while a generator yields its elements once. Elements are pulled
    only as demanded, plus one element of read-ahead that tells an exhausted iterator from
    a live one: an empty iterable completes right after ``on_subscribe`` without waiting for
    demand (Rule 2.9), and completion follows the last element at once (Rule 1.5). The
    read-ahead happens after each element is delivered, never before: an element goes out
    as soon as ``next()`` returns it and there is demand, even if the next one takes long
    to come (a sporadic feed). The read-ahead element waits only for demand.

    Emission runs on the thread that calls ``request`` (Rule 3.10), with recursion depth 1
    (Rule 3.3). ``next()`` runs on that thread too, so a blocking iterator blocks the
    requester: use ``ExecutorIterablePublisher`` for those.

    A subscriber that declares the kit's ``RunSubscriber`` capability (``on_next_run``)
    gets the elements of each emission in one call, read the same way: each one only
    after the one before was taken.

    Signals:
        ``on_error`` with the iterator's exception when ``iter()`` or ``next()`` raises
        (Rule 1.4); ``on_error(TypeError)`` when the iterable yields ``None``, which is never
        a valid element (Rule 2.13).

    Cancelling closes the iterator if it has a ``close()`` method (generators do).

    Args:
        iterable: any iterable; each element is one ``on_next``.

    Example:
        >>> from reactive_streams.testing import collect
        >>> collect(IterablePublisher("abc"))
        ['a', 'b', 'c']
    """

    __slots__ = ()

    def __init__(self, iterable: Iterable[T]) -> None:
        super().__init__(iterable, None, MAX_DEMAND)

    def __repr__(self) -> str:
        return f"IterablePublisher({self._iterable!r})"


class ExecutorIterablePublisher(_IterablePublisherBase[T]):
    """Publishes the elements of an iterable from tasks on a ``concurrent.futures.Executor``.

    Every signal of a subscription, ``on_subscribe`` included, runs in an executor task,
    never on the caller's thread, and at most one task per subscription runs at a time, so
    signals are serial (Rule 1.3) and ``request``/``cancel`` return at once (Rules 3.4,
    3.5). ``iter()`` and ``next()`` run in those tasks too, so a slow or blocking iterator
    never blocks a subscriber that requests. A task delivers at most ``batch_size``
    elements, then resubmits itself so that other work gets a turn on a shared executor.
    Like ``IterablePublisher`` it reads one element ahead, and only after delivering the
    one before: each element goes out as soon as it exists and is demanded.

    Signals:
        ``on_error`` with the iterator's exception (Rule 1.4), ``on_error(TypeError)`` for a
        ``None`` element (Rule 2.13), and ``on_error(ExecutorRejectedError)`` when the
        executor refuses a task (shut down or full): the stream cannot go on without it.

    Args:
        iterable: any iterable; each subscriber gets its own ``iter(iterable)``.
        executor: where the emission tasks run; it is not shut down by the publisher.
        batch_size: elements per task at most, ``>= 1``.

    Raises:
        ValueError: if ``batch_size < 1``.
        TypeError: if ``executor`` has no ``submit`` method.
    """

    __slots__ = ()

    def __init__(
        self, iterable: Iterable[T], executor: Executor, *, batch_size: int = 1024
    ) -> None:
        check_positive("batch_size", batch_size)
        if not callable(getattr(executor, "submit", None)):
            raise TypeError(f"executor must be a concurrent.futures.Executor, got {executor!r}")
        super().__init__(iterable, executor, batch_size)

    def __repr__(self) -> str:
        return f"ExecutorIterablePublisher({self._iterable!r}, batch_size={self._batch_size})"


class _IteratorSubscription(EmitLoopSubscription[T]):
    """Pulls from an iterator with one element of read-ahead, read after each delivery.

    ``_next`` holds the element read but not yet delivered (``_NOTHING`` when there is
    none): one is read in ``_open``, and another after each ``on_next`` returns.
    """

    __slots__ = ("_error", "_iterable", "_iterator", "_next", "_position")

    def __init__(
        self,
        subscriber: Subscriber[T],
        iterable: Iterable[T],
        *,
        executor: Executor | None,
        batch_size: int,
    ) -> None:
        super().__init__(subscriber, executor=executor, batch_size=batch_size)
        self._iterable: Iterable[T] | None = iterable
        self._iterator: Iterator[T] | None = None
        self._next: object = _NOTHING  # the read-ahead element
        self._error: Exception | None = None
        self._position = 0  # index of the read-ahead element in the sequence

    def _open(self) -> None:
        iterable, self._iterable = self._iterable, None
        try:
            self._iterator = iter(iterable)  # type: ignore[arg-type]
        except Exception as exc:  # Rule 1.4: a source that cannot start has failed
            self._error = exc
            return
        self._advance()

    def _advance(self) -> None:
        """Read the next element ahead, or note exhaustion or failure."""
        try:
            element = next(self._iterator)  # type: ignore[arg-type]
        except Exception as exc:  # StopIteration, or a failure (Rule 1.4)
            self._stop(exc)
            return
        if element is None:
            self._stop(None)
            return
        self._next = element

    def _stop(self, error: Exception | None) -> None:
        """No element was read ahead: the iterator ended, failed, or produced ``None``."""
        self._next = _NOTHING
        if isinstance(error, StopIteration):
            self._iterator = None
        elif error is not None:  # Rule 1.4
            self._error = error
        else:
            self._error = TypeError(
                f"Rule 2.13: the iterable produced None at position {self._position}; "
                "None is never a valid element"
            )

    def _emit(self, subscriber: Subscriber[T], count: int) -> int:
        if self._on_next_run is not None and count > 1:
            return self._emit_run(subscriber, count)
        election = self._election
        emitted = 0
        while emitted < count and self._next is not _NOTHING and not election.cancelled:
            element: T = self._next  # type: ignore[assignment]
            self._next = _NOTHING
            self._position += 1
            emitted += 1
            try:
                subscriber.on_next(element)
            except Exception as exc:
                self._deliver_failed(subscriber, exc)
                break
            if self._cancelled_meanwhile():  # on_next cancelled: read no more (Rule 3.12)
                break
            # Read ahead only now that the element is out: a slow iterator delays the next
            # element, never this one, and the end is known as soon as it comes (Rule 1.5).
            self._advance()
        return emitted

    def _emit_run(self, subscriber: Subscriber[T], count: int) -> int:
        """``_emit`` for a subscriber that takes a run: one ``on_next_run`` call.

        The same order as one ``on_next`` at a time: each element is read ahead only
        after the one before was taken, and not once the subscription is cancelled.
        """
        start = self._position
        self._deliver_run(subscriber, self._elements(count))
        if (
            self._next is _NOTHING
            and self._iterator is not None
            and self._error is None
            and not self._cancelled_meanwhile()
        ):
            # the subscriber stopped after taking an element, before asking for the next:
            # read ahead now, so that the end of the source is known (Rule 1.5)
            self._advance()
        return self._position - start

    def _elements(self, count: int) -> Iterator[T]:
        """Up to ``count`` elements from the read-ahead, each counted as it is taken.

        ``_advance``'s read written out (this runs once per element); ``_stop`` notes
        the end as it does.
        """
        cancelled = self._cancelled_meanwhile
        if cancelled():
            return
        iterator = self._iterator
        element = self._next
        for _ in range(count):
            if element is _NOTHING:
                return
            self._next = _NOTHING
            self._position += 1
            yield element  # type: ignore[misc]  # not _NOTHING: an element
            if cancelled():  # taken and delivered: read no more (Rule 3.12)
                return
            try:
                element = next(iterator)  # type: ignore[arg-type]
            except Exception as exc:  # StopIteration, or a failure (Rule 1.4)
                self._stop(exc)
                return
            if element is None:
                self._stop(None)
                return
            self._next = element

    def _exhausted(self) -> bool:
        return self._next is _NOTHING

    def _failure(self) -> Exception | None:
        return self._error

    def _close(self) -> None:
        iterator, self._iterator = self._iterator, None
        self._next = _NOTHING
        close = getattr(iterator, "close", None)
        if close is not None:
            try:
                close()  # a generator's finally blocks run now, on the emit loop
            except Exception as exc:
                report_undeliverable(exc)

    def _buffered(self) -> int:
        return 0 if self._next is _NOTHING else 1
