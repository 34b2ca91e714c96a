"""Folds: accumulate the whole stream, then emit what is left at the end.

``count``, ``last``, ``all``, ``any``, ``collect``, ``to_dict``, ``element_at`` (one
element, Reactor's ``Mono`` operators as a one-element ``Flow``) and ``take_last`` (the
last ``n``) are one stage, ``FoldOperator``, given a ``Fold``: what to keep, how each
element changes it, whether it already knows the answer (``all``/``any``/``element_at``
stop early and cancel upstream), and what to emit at the end.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._core import MAX_DEMAND, BufferedStage, StageOperator, cancel_quietly
from ._sinks import NO_DEFAULT

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Sequence

    from ..api import Publisher, Subscriber, Subscription

__all__ = [
    "AllFold",
    "AnyFold",
    "CollectFold",
    "CountFold",
    "ElementAtFold",
    "Fold",
    "FoldOperator",
    "LastFold",
    "TakeLastFold",
    "ToDictFold",
]

T = TypeVar("T")
A = TypeVar("A")


class Fold(Generic[A]):
    """What a fold keeps (``A``) and does; a new accumulator per subscriber.

    ``demand`` is what the stage requests upstream (once, at the first downstream
    request): unbounded by default; ``element_at(i)`` needs only ``i + 1``.
    """

    name = "fold"
    demand = MAX_DEMAND

    def begin(self) -> A:
        """The accumulator of one subscription (may call user code; may raise)."""
        raise NotImplementedError

    def step(self, acc: A, element: Any) -> tuple[A, bool]:
        """Fold ``element`` in; ``True`` when the answer is known (cancel upstream, emit)."""
        raise NotImplementedError

    def end(self, acc: A) -> Sequence[Any]:
        """The elements to emit at the end (raise for an error instead)."""
        raise NotImplementedError


class CountFold(Fold[int]):
    name = "count"

    def begin(self) -> int:
        return 0

    def step(self, acc: int, element: Any) -> tuple[int, bool]:
        return acc + 1, False

    def end(self, acc: int) -> Sequence[Any]:
        return (acc,)


class LastFold(Fold[Any]):
    name = "last"

    def __init__(self, default: Any) -> None:
        self.default = default

    def begin(self) -> Any:
        return NO_DEFAULT

    def step(self, acc: Any, element: Any) -> tuple[Any, bool]:
        return element, False

    def end(self, acc: Any) -> Sequence[Any]:
        if acc is not NO_DEFAULT:
            return (acc,)
        if self.default is NO_DEFAULT:
            raise LookupError("last() of an empty flow, and no default was given")
        return (self.default,)


class AllFold(Fold[bool]):
    name = "all"

    def __init__(self, predicate: Callable[[Any], object]) -> None:
        self.predicate = predicate

    def begin(self) -> bool:
        return True

    def step(self, acc: bool, element: Any) -> tuple[bool, bool]:
        if self.predicate(element):
            return True, False
        return False, True

    def end(self, acc: bool) -> Sequence[Any]:
        return (acc,)


class AnyFold(Fold[bool]):
    name = "any"

    def __init__(self, predicate: Callable[[Any], object]) -> None:
        self.predicate = predicate

    def begin(self) -> bool:
        return False

    def step(self, acc: bool, element: Any) -> tuple[bool, bool]:
        if self.predicate(element):
            return True, True
        return False, False

    def end(self, acc: bool) -> Sequence[Any]:
        return (acc,)


class CollectFold(Fold[Any]):
    name = "collect"

    def __init__(self, factory: Callable[[], Any], add: Callable[[Any, Any], object]) -> None:
        self.factory = factory
        self.add = add

    def begin(self) -> Any:
        container = self.factory()
        if container is None:
            raise TypeError("Rule 2.13: the factory given to collect() returned None")
        return container

    def step(self, acc: Any, element: Any) -> tuple[Any, bool]:
        self.add(acc, element)
        return acc, False

    def end(self, acc: Any) -> Sequence[Any]:
        return (acc,)


class ToDictFold(Fold[dict[Any, Any]]):
    name = "to_dict"

    def __init__(self, key: Callable[[Any], Hashable], value: Callable[[Any], Any] | None) -> None:
        self.key = key
        self.value = value

    def begin(self) -> dict[Any, Any]:
        return {}

    def step(self, acc: dict[Any, Any], element: Any) -> tuple[dict[Any, Any], bool]:
        acc[self.key(element)] = element if self.value is None else self.value(element)
        return acc, False

    def end(self, acc: dict[Any, Any]) -> Sequence[Any]:
        return (acc,)


class ElementAtFold(Fold[list[Any]]):
    """Keeps ``[seen, element]``: the position counter, then the element once found.

    The element is ``NO_DEFAULT`` until then (the sinks' marker for "no value").
    """

    name = "element_at"

    def __init__(self, index: int, default: Any) -> None:
        self.index = index
        self.default = default
        self.demand = index + 1

    def begin(self) -> list[Any]:
        return [0, NO_DEFAULT]

    def step(self, acc: list[Any], element: Any) -> tuple[list[Any], bool]:
        if acc[0] == self.index:
            acc[1] = element
            return acc, True
        acc[0] += 1
        return acc, False

    def end(self, acc: list[Any]) -> Sequence[Any]:
        if acc[1] is not NO_DEFAULT:
            return (acc[1],)
        if self.default is NO_DEFAULT:
            raise IndexError(
                f"element_at({self.index}): the flow has only {acc[0]} elements, "
                "and no default was given"
            )
        return (self.default,)


class TakeLastFold(Fold[deque[Any]]):
    name = "take_last"

    def __init__(self, count: int) -> None:
        self.count = count

    def begin(self) -> deque[Any]:
        return deque(maxlen=self.count)

    def step(self, acc: deque[Any], element: Any) -> tuple[deque[Any], bool]:
        acc.append(element)
        return acc, False

    def end(self, acc: deque[Any]) -> Sequence[Any]:
        return tuple(acc)


class FoldOperator(StageOperator[T]):
    """Fold the stream with a ``Fold``; emit its result once upstream is done.

    Backpressure:
        Nothing is requested upstream before downstream's first ``request``; then the
        fold's ``demand`` (unbounded, or ``i + 1`` for ``element_at``). The result waits
        for downstream demand; it is at most ``n`` elements (``take_last``) or one.

    Concurrency:
        The fold runs on the thread that delivers each element; the result goes out on
        the stage's one drain loop (Rule 1.3). A raising user function cancels
        upstream and is signalled downstream.
    """

    __slots__ = ("_fold",)

    def __init__(self, upstream: Publisher[Any], fold: Fold[Any]) -> None:
        super().__init__(upstream)
        self._fold = fold

    @property
    def name(self) -> str:
        return self._fold.name

    def _new_stage(self, subscriber: Subscriber[T]) -> Subscriber[Any]:
        return _FoldStage(subscriber, self._fold)


class _FoldStage(BufferedStage):
    __slots__ = ("_acc", "_asked", "_fold")

    def __init__(self, downstream: Subscriber[Any], fold: Fold[Any]) -> None:
        super().__init__(downstream)
        self._fold = fold
        self._acc: Any = None
        self._asked = False

    def on_subscribe(self, subscription: Subscription) -> None:
        failure: Exception | None = None
        if self._upstream is None:
            try:
                self._acc = self._fold.begin()
            except Exception as exc:
                failure = exc
        if failure is not None:
            self._fail_urgently(failure)
        self._accept_upstream(subscription)
        if failure is not None:
            self._schedule()

    def _demand_added(self, count: int) -> None:
        with self._lock:
            first = not self._asked and not self._done
            self._asked = True
        if first and self._upstream is not None:
            self.request_upstream(self._upstream, self._fold.demand)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        if self._done or self._cancelled:
            return  # after our own early end or a cancel (Rule 2.8)
        try:
            self._acc, known = self._fold.step(self._acc, element)
        except Exception as exc:  # a user function raised
            self._fail_urgently(exc)
            self._schedule()
            return
        if known:
            upstream = self._upstream
            self._emit_result()
            if upstream is not None:
                cancel_quietly(upstream)  # the answer is known: stop upstream

    def on_complete(self) -> None:
        if self._done:
            return
        self._emit_result()

    def _emit_result(self) -> None:
        try:
            result = self._fold.end(self._acc)
        except Exception as exc:  # an empty flow without a default, say
            self.on_error(exc)
            return
        with self._lock:
            if self._done:
                return
            for element in result:
                self._push_locked(element)
            self._acc = None
            self._done = True
        self._schedule()
