"""``Flow``: the fluent, backpressured pipeline builder.

A ``Flow[T]`` is a ``Publisher[T]``: an immutable description of a pipeline that can be
subscribed many times (unicast by default: every subscriber gets its own run). Each method
returns a new ``Flow`` and delegates to one operator module; adjacent synchronous operators
are fused into one stage (see ``_fusion``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from .._core import (
    Backoff,
    OnBackpressureOperator,
    Operator,
    Overflow,
    StageStatistics,
    check_positive,
    replenish_threshold,
    walk,
)
from ..adapters.asyncio import AsyncIteratorSubscriber, from_async_iterable, to_async_iterator
from ..api import Processor, Publisher, Subscriber
from ._buffer import BufferOperator
from ._combine_latest import CombineLatestOperator, WithLatestFromOperator
from ._distinct import DistinctOp, DistinctUntilChangedOp
from ._filter import FilterOp
from ._flat_map import FlatMapOperator
from ._fold import (
    AllFold,
    AnyFold,
    CollectFold,
    CountFold,
    ElementAtFold,
    FoldOperator,
    LastFold,
    TakeLastFold,
    ToDictFold,
)
from ._fusion import UNSET, FusedOp
from ._group_by import GroupByOperator
from ._interval import IntervalPublisher
from ._limit_rate import LimitRateOperator
from ._map import MapOp
from ._map_async import MapAsyncOperator
from ._multicast import MulticastOperator
from ._publish_on import PublishOnOperator
from ._pull import PullPublisher
from ._push import PushPublisher
from ._push_source import PushOverflow, PushSource
from ._rebatch import RebatchOperator
from ._reduce import ReduceOp, ReducePublisher
from ._resume import ResumeOperator, RetryOn
from ._scan import ScanOp
from ._sinks import (
    NO_DEFAULT,
    BlockingIterator,
    CallbackSubscriber,
    collect_list,
    first,
    for_each,
)
from ._skip import SkipOp
from ._skip_while import SkipWhileOp
from ._sliding import SlidingBufferOperator
from ._sources import DeferPublisher, ErrorPublisher, WrappedPublisher
from ._subscribe_on import SubscribeOnOperator
from ._switch_map import SwitchMapOperator
from ._take import TakeOp
from ._take_until import TakeUntilOperator
from ._take_while import TakeWhileOp
from ._tap import TapCallbacks, TapOperator
from ._throttle import ThrottleOperator
from ._time import (
    DebounceOperator,
    DelayOperator,
    SampleOperator,
    ThrottleFirstOperator,
    TimeoutOperator,
    WindowOperator,
)
from ._using import UsingPublisher
from ._via import ViaOperator
from ._zip import ZipOperator

if TYPE_CHECKING:
    import asyncio
    from collections.abc import (
        AsyncIterable,
        AsyncIterator,
        Awaitable,
        Callable,
        Hashable,
        Iterable,
        Iterator,
    )
    from concurrent.futures import Executor

    from .._core import Scheduler
    from ..api import Subscription

__all__ = ["ConnectableFlow", "Flow", "GroupedFlow"]

T = TypeVar("T")
R = TypeVar("R")
A = TypeVar("A")
K = TypeVar("K")


def _check_count(what: str, count: int) -> int:
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"{what}() needs an int count, got {type(count).__qualname__}")
    if count < 0:
        raise ValueError(f"{what}() needs a count >= 0, got {count}")
    return count


def _identity(value: Any) -> Any:
    return value


class Flow(Publisher[T], Generic[T]):
    """A publisher with a fluent operator API; every stage follows the specification.

    Build a flow from a source, chain operators, then subscribe or use a sink:

    >>> Flow.range(0, 10).map(lambda x: x * 2).filter(lambda x: x % 3 == 0).to_list()
    [0, 6, 12, 18]
    >>> Flow.just(1, 2, 3).reduce(lambda acc, x: acc + x, 0).first()
    6

    Demand travels from the last subscriber back to the source: nothing is produced that
    was not requested, and every buffer in the pipeline is bounded.

    Backpressure:
        Each operator documents how it turns downstream demand into upstream demand.

    Concurrency:
        Synchronous operators run on the thread that delivers the upstream signal;
        ``publish_on`` and ``subscribe_on`` move signals to an executor.
    """

    __slots__ = ("_node",)

    def __init__(self, node: Publisher[T]) -> None:
        self._node = node

    def __repr__(self) -> str:
        name = self._node.name if isinstance(self._node, Operator) else type(self._node).__name__
        return f"Flow({name})"

    # ------------------------------------------------------------------ Publisher
    @overload
    def subscribe(self, subscriber: Subscriber[T]) -> None: ...

    @overload
    def subscribe(
        self,
        subscriber: None = None,
        *,
        on_next: Callable[[T], object] | None = None,
        on_error: Callable[[Exception], object] | None = None,
        on_complete: Callable[[], object] | None = None,
        prefetch: int = 256,
    ) -> None: ...

    def subscribe(
        self,
        subscriber: Subscriber[T] | None = None,
        *,
        on_next: Callable[[T], object] | None = None,
        on_error: Callable[[Exception], object] | None = None,
        on_complete: Callable[[], object] | None = None,
        prefetch: int = 256,
    ) -> None:
        """Subscribe a ``Subscriber``, or plain callables.

        Args:
            subscriber: a ``Subscriber``; ``None`` is allowed only together with at least
                one callable (Rule 1.9).
            on_next: called with each element.
            on_error: called with the terminal error (by default it goes to the
                undeliverable hook: errors are never lost).
            on_complete: called at completion.
            prefetch: demand batch of the callback subscriber, replenished at 75%.

        Raises:
            TypeError: neither a subscriber nor any callable was given (Rule 1.9).
        """
        if subscriber is None:
            if on_next is None and on_error is None and on_complete is None:
                raise TypeError("Rule 1.9: subscribe() requires a Subscriber, got None")
            subscriber = CallbackSubscriber(on_next, on_error, on_complete, prefetch=prefetch)
        self._node.subscribe(subscriber)

    # ------------------------------------------------------------------ sources
    @staticmethod
    def from_iterable(iterable: Iterable[R]) -> Flow[R]:
        """Emit the elements of ``iterable``; ``iter()`` is called once per subscriber.

        A one-shot iterator (a generator) can therefore serve one subscriber only; pass a
        re-iterable collection, or use ``Flow.defer``, for several.
        """
        if iterable is None:
            raise TypeError("from_iterable() needs an iterable, got None")
        return Flow(PullPublisher(lambda: iterable, (), "from_iterable"))

    @staticmethod
    def range(start: int, stop: int | None = None) -> Flow[int]:
        """Emit ``range(start, stop)`` (or ``range(start)`` when ``stop`` is omitted).

        >>> Flow.range(3).to_list()
        [0, 1, 2]
        """
        numbers = range(start) if stop is None else range(start, stop)
        return Flow(PullPublisher(lambda: numbers, (), "range"))

    @staticmethod
    def just(*items: R) -> Flow[R]:
        """Emit the given items, then complete."""
        if any(item is None for item in items):
            raise TypeError("Rule 2.13: Flow.just() got None, which is never a valid element")
        return Flow(PullPublisher(lambda: items, (), "just"))

    @staticmethod
    def empty() -> Flow[Any]:
        """Complete without elements (at the first request)."""
        return Flow(PullPublisher(tuple, (), "empty"))

    @staticmethod
    def error(error: Exception) -> Flow[Any]:
        """Signal ``on_error(error)`` right after ``on_subscribe``, without waiting for demand."""
        return Flow(ErrorPublisher(error))

    @staticmethod
    def from_async_iterable(
        aiterable: AsyncIterable[R], *, loop: asyncio.AbstractEventLoop | None = None
    ) -> Flow[R]:
        """Publish an async iterable, one ``__anext__`` per unit of demand.

        Delegates to ``reactive_streams.adapters.asyncio.from_async_iterable``: the
        iteration and every signal run on ``loop`` (the running loop at subscribe time by
        default, or a private loop thread when there is none).
        """
        return Flow(WrappedPublisher(from_async_iterable(aiterable, loop=loop)))

    @staticmethod
    def from_publisher(publisher: Publisher[R]) -> Flow[R]:
        """Wrap any publisher, including a third party's registered with ``Publisher.register``."""
        if isinstance(publisher, Flow):
            return publisher
        return Flow(WrappedPublisher(publisher))

    @staticmethod
    def defer(factory: Callable[[], Publisher[R]]) -> Flow[R]:
        """Call ``factory()`` for each subscriber and subscribe it to the publisher returned."""
        return Flow(DeferPublisher(factory))

    @staticmethod
    def interval(
        period: float, *, count: int | None = None, scheduler: Scheduler | None = None
    ) -> Flow[int]:
        """A hot timer: ``0, 1, 2, ...`` every ``period`` seconds (``count`` ticks at most).

        A tick without demand fails the flow with ``MissingBackpressureError``: follow it
        with an ``on_backpressure_*`` operator to choose what to do instead. Without
        ``scheduler`` each subscriber gets a timer thread; with one (a
        ``VirtualTimeScheduler`` in tests) the ticks run there.
        """
        return Flow(IntervalPublisher(period, count, scheduler))

    @staticmethod
    def merge(*publishers: Publisher[R], concurrency: int | None = None) -> Flow[R]:
        """Interleave the elements of several publishers as they arrive.

        Backpressure: at most ``concurrency`` sources (all by default) are subscribed at
        once, each with a bounded queue of 32; downstream demand is honoured exactly.

        Concurrency: sources may emit on any threads; delivery is serial.
        """
        sources = tuple(publishers)
        width = concurrency if concurrency is not None else max(1, len(sources))
        return Flow(
            FlatMapOperator(
                PullPublisher(lambda: sources, (), "sources"),
                _identity,
                concurrency=width,
                label="merge",
            )
        )

    @staticmethod
    def concat(*publishers: Publisher[R]) -> Flow[R]:
        """All elements of the first publisher, then of the second, and so on.

        Backpressure: one source at a time, with a bounded queue; demand carries over.
        """
        sources = tuple(publishers)
        return Flow(
            FlatMapOperator(
                PullPublisher(lambda: sources, (), "sources"),
                _identity,
                concurrency=1,
                label="concat",
            )
        )

    @staticmethod
    def zip(*publishers: Publisher[Any], prefetch: int = 32) -> Flow[tuple[Any, ...]]:
        """Tuples of the n-th elements of every publisher; ends with the shortest.

        Backpressure: each source has a bounded queue of ``prefetch``, refilled at 75%.
        """
        return Flow(ZipOperator(tuple(publishers), prefetch))

    def merge_with(self, *others: Publisher[T], concurrency: int | None = None) -> Flow[T]:
        """``Flow.merge(self, *others, concurrency=...)``."""
        return Flow.merge(self, *others, concurrency=concurrency)

    def concat_with(self, *others: Publisher[T]) -> Flow[T]:
        """``Flow.concat(self, *others)``."""
        return Flow.concat(self, *others)

    def zip_with(self, *others: Publisher[Any], prefetch: int = 32) -> Flow[tuple[Any, ...]]:
        """``Flow.zip(self, *others)``."""
        return Flow.zip(self, *others, prefetch=prefetch)

    # ------------------------------------------------------------------ fused operators
    def _fuse(self, op: FusedOp) -> Flow[Any]:
        node = self._node
        if isinstance(node, PullPublisher) or (isinstance(node, PushPublisher) and op.push_capable):
            return Flow(node.with_op(op))
        if isinstance(op, ReduceOp):  # ends a push chain: a stage of its own
            return Flow(ReducePublisher(node, op.fn, op.initial))
        return Flow(PushPublisher(node, (op,)))

    def map(self, fn: Callable[[T], R]) -> Flow[R]:
        """Apply ``fn`` to every element (fused with its synchronous neighbours).

        A ``None`` result signals ``on_error(NoneResultError)`` (a ``TypeError``, Rule 2.13)
        naming the element's position; an exception from ``fn`` cancels upstream and is
        signalled downstream.

        Backpressure: one output per input; demand passes through unchanged.

        Concurrency: runs on the thread that delivers the element.
        """
        return self._fuse(MapOp(fn))

    def filter(self, predicate: Callable[[T], object]) -> Flow[T]:
        """Keep the elements for which ``predicate`` is truthy.

        Backpressure: every dropped element is re-requested upstream, so downstream gets
        what it asked for.

        Concurrency: runs on the thread that delivers the element.
        """
        return self._fuse(FilterOp(predicate))

    def scan(self, fn: Callable[[A, T], A], initial: A = UNSET) -> Flow[A]:
        """Emit every running accumulation ``acc = fn(acc, x)`` (the seed is not emitted).

        Backpressure: one output per input.

        Concurrency: runs on the thread that delivers the element.
        """
        return self._fuse(ScanOp(fn, initial))

    def reduce(self, fn: Callable[[A, T], A], initial: A = UNSET) -> Flow[A]:
        """Fold the stream into one element, emitted when upstream completes.

        Without ``initial`` the first element seeds the fold and an empty stream completes
        empty.

        Backpressure: requests upstream without bound (it keeps one accumulator) and emits
        its one element only when requested.

        Concurrency: fused after an iterable source it runs in ``functools.reduce``; after
        another publisher it is a stage of its own.
        """
        return self._fuse(ReduceOp(fn, initial))

    def distinct_until_changed(self, key: Callable[[T], object] | None = None) -> Flow[T]:
        """Drop elements whose key equals the previous element's key.

        Backpressure: dropped elements are re-requested upstream.

        Concurrency: runs on the thread that delivers the element.
        """
        return self._fuse(DistinctUntilChangedOp(key))

    def take(self, count: int) -> Flow[T]:
        """Emit the first ``count`` elements, then complete and cancel upstream.

        >>> Flow.range(0, 1_000_000_000).skip(2).take(3).to_list()
        [2, 3, 4]

        Marble (``take(2)``, downstream requests unbounded)::

            request:  (2)                  upstream never sees more than 2
            source:   -1-2|
            result:   -1-2|

        Backpressure: never reads past the ``count``-th element of an iterable source.
        After any other publisher the upstream demand is capped at ``count`` in total,
        even when downstream requests without bound (Reactor's ``limitRequest``);
        elements dropped before the take (a ``filter`` ahead of it) are re-requested
        on top. So a network source sends ``count`` elements, not a prefetch's worth.

        Concurrency: runs on the thread that delivers the element; the cap is kept
        under the stage's lock, as ``request`` may come from any thread.
        """
        return self._fuse(TakeOp(_check_count("take", count)))

    def skip(self, count: int) -> Flow[T]:
        """Drop the first ``count`` elements.

        Backpressure: skipped elements are re-requested upstream.

        Concurrency: runs on the thread that delivers the element.
        """
        return self._fuse(SkipOp(_check_count("skip", count)))

    def take_while(self, predicate: Callable[[T], object]) -> Flow[T]:
        """Emit elements while ``predicate`` holds; the first failure completes the flow.

        Backpressure: demand passes through; upstream is cancelled at the end.

        Concurrency: runs on the thread that delivers the element.
        """
        return self._fuse(TakeWhileOp(predicate))

    # ------------------------------------------------------------------ folds
    def count(self) -> Flow[int]:
        """The number of elements, as a one-element flow (Reactor's ``count``).

        >>> Flow.range(0, 5).count().to_list()
        [5]

        Marble::

            source:  -a-b-c-|
            result:  -------3|

        Backpressure: unbounded upstream demand from downstream's first ``request``;
        the count waits for downstream demand. Concurrency: counts on the thread that
        delivers each element.
        """
        return Flow(FoldOperator(self._node, CountFold()))

    def last(self, default: T = NO_DEFAULT) -> Flow[T]:
        """The last element, or ``default`` for an empty flow (Reactor's ``last``).

        >>> Flow.range(0, 5).last().to_list()
        [4]
        >>> Flow.empty().last(default=-1).to_list()
        [-1]

        Marble::

            source:  -a-b-c-|
            result:  -------c|

        An empty flow without ``default`` fails with ``LookupError``.

        Backpressure: unbounded upstream demand (one element kept). Concurrency: runs on
        the thread that delivers each element.
        """
        return Flow(FoldOperator(self._node, LastFold(default)))

    def all(self, predicate: Callable[[T], object]) -> Flow[bool]:
        """``True`` if ``predicate`` holds for every element (an empty flow: ``True``).

        >>> Flow.range(0, 5).all(lambda x: x < 3).to_list()
        [False]

        Marble (``all(< 3)``)::

            source:  -1-2-5-...
            result:  -----False|   (upstream cancelled at the first failing element)

        Backpressure: unbounded upstream demand until the answer is known.
        Concurrency: ``predicate`` runs on the thread that delivers each element.
        """
        return Flow(FoldOperator(self._node, AllFold(predicate)))

    def any(self, predicate: Callable[[T], object]) -> Flow[bool]:
        """``True`` if ``predicate`` holds for some element (an empty flow: ``False``).

        >>> Flow.range(0, 5).any(lambda x: x > 3).to_list()
        [True]

        Marble (``any(> 3)``)::

            source:  -1-2-5-...
            result:  -----True|    (upstream cancelled at the first matching element)

        Backpressure: unbounded upstream demand until the answer is known.
        Concurrency: ``predicate`` runs on the thread that delivers each element.
        """
        return Flow(FoldOperator(self._node, AnyFold(predicate)))

    def collect(self, factory: Callable[[], A], add: Callable[[A, T], object]) -> Flow[A]:
        """Call ``add(container, x)`` for each element; emit ``factory()``'s container at the end.

        >>> Flow.just(3, 1, 3).collect(set, set.add).to_list()
        [{1, 3}]

        Marble (``collect(list, list.append)``)::

            source:  -a-b-|
            result:  -----[a, b]|

        ``factory`` runs once per subscriber, at subscribe time.

        Backpressure: unbounded upstream demand; the container holds what ``add``
        keeps. Concurrency: ``add`` runs on the thread that delivers each element.
        """
        return Flow(FoldOperator(self._node, CollectFold(factory, add)))

    def to_dict(
        self, key: Callable[[T], Hashable], value: Callable[[T], Any] | None = None
    ) -> Flow[dict[Any, Any]]:
        """One ``{key(x): value(x) or x}`` dict of every element; later keys win.

        >>> Flow.just("a", "bb", "cc").to_dict(len).to_list()
        [{1: 'a', 2: 'cc'}]

        Marble (``to_dict(len)``)::

            source:  -a-bb-cc-|
            result:  ---------{1: a, 2: cc}|

        Backpressure: unbounded upstream demand; one entry per distinct key.
        Concurrency: ``key``/``value`` run on the thread that delivers each element.
        """
        return Flow(FoldOperator(self._node, ToDictFold(key, value)))

    def element_at(self, index: int, default: T = NO_DEFAULT) -> Flow[T]:
        """The element at 0-based ``index``, or ``default`` (Reactor's ``elementAt``).

        >>> Flow.range(10, 20).element_at(3).to_list()
        [13]

        Marble (``element_at(1)``)::

            source:  -a-b-c-|
            result:  ---b|         (upstream cancelled)

        A flow too short for ``index`` fails with ``IndexError`` unless ``default``.

        Backpressure: ``request(index + 1)`` upstream, once, at downstream's first
        ``request``. Concurrency: runs on the thread that delivers each element.
        """
        return Flow(
            FoldOperator(self._node, ElementAtFold(_check_count("element_at", index), default))
        )

    def take_last(self, count: int) -> Flow[T]:
        """The last ``count`` elements, emitted once upstream completes.

        >>> Flow.range(0, 10).take_last(3).to_list()
        [7, 8, 9]

        Marble (``take_last(2)``)::

            source:  -a-b-c-|
            result:  -------b-c|

        Backpressure: unbounded upstream demand; at most ``count`` elements kept (a
        ring), then delivered within downstream demand. Concurrency: runs on the
        thread that delivers each element; delivery on the stage's drain loop.
        """
        return Flow(FoldOperator(self._node, TakeLastFold(_check_count("take_last", count))))

    # ------------------------------------------------------------------ empty streams
    def default_if_empty(self, value: T) -> Flow[T]:
        """``value`` alone if upstream completes without an element (Reactor's ``defaultIfEmpty``).

        >>> Flow.empty().default_if_empty(0).to_list()
        [0]
        >>> Flow.just(1).default_if_empty(0).to_list()
        [1]

        Marble::

            source:  ---|
            result:  ---0|

        Backpressure: demand passes through; the default waits for demand.
        Concurrency: the switch happens on the thread that delivered ``on_complete``.

        Raises:
            TypeError: ``value`` is ``None`` (Rule 2.13).
        """
        return self._if_empty(Flow.just(value), "default_if_empty")

    def switch_if_empty(self, publisher: Publisher[T]) -> Flow[T]:
        """Continue with ``publisher`` if upstream completes without an element.

        >>> Flow.empty().switch_if_empty(Flow.range(0, 2)).to_list()
        [0, 1]

        Marble::

            source:       ---|
            publisher:       -a-b-|
            result:       ----a-b-|

        Backpressure: outstanding demand is carried over to ``publisher``.
        Concurrency: ``publisher`` is subscribed on the thread that delivered
        ``on_complete``.
        """
        if not isinstance(publisher, Publisher):
            raise TypeError(
                f"switch_if_empty() needs a Publisher, got {type(publisher).__qualname__}"
            )
        return self._if_empty(publisher, "switch_if_empty")

    def _if_empty(self, publisher: Publisher[T], label: str) -> Flow[T]:
        return Flow(ResumeOperator(self._node, if_empty=publisher, label=label))

    def skip_while(self, predicate: Callable[[T], object]) -> Flow[T]:
        """Drop elements while ``predicate`` holds; from the first that fails, emit all.

        >>> Flow.just(1, 2, 5, 1).skip_while(lambda x: x < 3).to_list()
        [5, 1]

        Marble (``skip_while(< 3)``)::

            source:  -1-2-5-1-|
            result:  -----5-1-|

        Backpressure: dropped elements are re-requested upstream.

        Concurrency: fused; runs on the thread that delivers the element.
        """
        return self._fuse(SkipWhileOp(predicate))

    def distinct(
        self, key: Callable[[T], object] | None = None, *, max_keys: int = 100_000
    ) -> Flow[T]:
        """Drop elements whose key (``key(x)``, or ``x``) was seen before.

        >>> Flow.just(1, 2, 1, 3, 2).distinct().to_list()
        [1, 2, 3]

        Marble::

            source:      -1-2-1-3-2-|
            distinct()   -1-2---3---|

        Memory is bounded: at most ``max_keys`` keys are remembered; a new key beyond
        that forgets the key seen least recently, which would then pass again (Reactor
        and Rx remember every key, without bound).

        Backpressure: dropped elements are re-requested upstream.

        Concurrency: fused; runs on the thread that delivers the element, with a set of
        keys per subscriber.

        Raises:
            TypeError, ValueError: ``max_keys`` is not a positive int.
        """
        return self._fuse(DistinctOp(key, check_positive("max_keys", max_keys)))

    def take_until(self, other: Publisher[Any]) -> Flow[T]:
        """Emit elements until ``other`` emits its first element; then complete.

        >>> Flow.range(0, 5).take_until(Flow.empty()).to_list()  # completion alone: no stop
        [0, 1, 2, 3, 4]

        Marble::

            source:  -1-2-3-4-5-|
            other:   ------x
            result:  -1-2-3|          (source and other cancelled)

        ``other`` is subscribed first (Reactor's ``takeUntilOther``); its completion
        without an element changes nothing; its error fails the flow.

        Backpressure: downstream demand passes to the source unchanged; ``other`` is
        asked for one element.

        Concurrency: ``other`` may signal on any thread; downstream signals stay serial
        (the stage's one drain loop).
        """
        if not isinstance(other, Publisher):
            raise TypeError(f"take_until() needs a Publisher, got {type(other).__qualname__}")
        return Flow(TakeUntilOperator(self._node, other))

    # ------------------------------------------------------------------ stage operators
    def flat_map(
        self,
        fn: Callable[[T], Publisher[R] | Iterable[R]],
        *,
        concurrency: int = 16,
        prefetch: int = 32,
    ) -> Flow[R]:
        """Map each element to a publisher (or iterable) and merge their elements.

        Marble (``concurrency=2``)::

            source:   -a-----b-|
            fn(a):     -1--2-|
            fn(b):           -3-4-|
            result:   --1--2--3-4-|

        Backpressure: at most ``concurrency`` inner publishers at once, each with a queue
        of ``prefetch`` refilled at 75%; the outer flow is requested one element per
        finished inner.

        Concurrency: inner publishers may emit on any threads; delivery is serial and the
        first error cancels everything.
        """
        return Flow(FlatMapOperator(self._node, fn, concurrency=concurrency, prefetch=prefetch))

    def concat_map(
        self, fn: Callable[[T], Publisher[R] | Iterable[R]], *, prefetch: int = 32
    ) -> Flow[R]:
        """``flat_map`` with ``concurrency=1``: inner publishers in order, one at a time."""
        return Flow(
            FlatMapOperator(self._node, fn, concurrency=1, prefetch=prefetch, label="concat_map")
        )

    # ------------------------------------------------------------------ switch, async, pace
    # switch_map, map_async(_unordered), combine_latest, with_latest_from, throttle, using
    def switch_map(self, fn: Callable[[T], Publisher[R] | Iterable[R]]) -> Flow[R]:
        """Map each element to a publisher; only the newest one's elements pass (Rx switchMap).

        >>> Flow.range(0, 3).switch_map(lambda x: Flow.just(x, x * 10)).to_list()
        [0, 0, 1, 10, 2, 20]

        Marble::

            source:   -a-----b---------|
            fn(a):     -1--2--3|           (cancelled when b arrives: 3 never passes)
            fn(b):           -4--5-|
            request:  (3)
            result:   --1--2--4|           (3 elements requested, 3 delivered)

        A new element cancels the inner publisher in use; its elements received but not
        yet delivered are dropped (``statistics().dropped``). The flow completes when
        the source and the current inner have completed; the first error (source, inner,
        or ``fn``) cancels everything and overtakes the waiting elements.

        Backpressure: the source is requested without bound (an element only replaces
        the inner); the current inner is requested the outstanding downstream demand,
        which carries over to the next inner (Reactor's ``switchMap``).

        Concurrency: the source and the inners may signal on any threads; downstream
        signals are serial (the stage's one drain loop).
        """
        return Flow(SwitchMapOperator(self._node, fn))

    @overload
    def map_async(
        self,
        fn: Callable[[T], Awaitable[R]],
        parallelism: int,
        *,
        executor: None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Flow[R]: ...

    @overload
    def map_async(
        self,
        fn: Callable[[T], R],
        parallelism: int,
        *,
        executor: Executor | None = None,
        loop: None = None,
    ) -> Flow[R]: ...

    def map_async(
        self,
        fn: Callable[[T], Any],
        parallelism: int,
        *,
        executor: Executor | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Flow[Any]:
        """Apply ``fn`` with up to ``parallelism`` calls at once; results in order (Akka mapAsync).

        >>> import asyncio
        >>> async def double(x):
        ...     await asyncio.sleep(0.01 * (3 - x))  # the later elements finish first
        ...     return x * 2
        >>> Flow.range(0, 4).map_async(double, 4).to_list(timeout=10)
        [0, 2, 4, 6]
        >>> Flow.range(0, 4).map_async(lambda x: x + 1, 2).to_list(timeout=10)
        [1, 2, 3, 4]

        Marble (``parallelism=2``; ``b`` takes longer than ``c``)::

            source:   -a-b-----c-----|
            calls:     [a][b-------]
                                 [c]
            request:  (2)-(1)-----(1)(1)    (upstream: one per delivered result)
            result:   --A-------B-C--|

        Args:
            fn: a plain function, run on ``executor`` (by default a pool of
                ``parallelism`` daemon threads per subscriber, shut down when the stream
                ends), or a coroutine function (``async def``), run on ``loop`` (by
                default one shared event loop on a daemon thread).
            parallelism: the most calls running or results waiting for delivery.
            executor: where a plain ``fn`` runs (any ``concurrent.futures.Executor``).
            loop: where a coroutine ``fn`` runs (it need not be the caller's).

        A call that raises or returns ``None`` (Rule 2.13) fails the flow at once:
        upstream is cancelled, calls not started are cancelled and the other results
        are discarded. An upstream error is signalled at once too, discarding the
        results in flight; completion waits for them.

        Backpressure: ``parallelism`` requested upstream at first, then one element per
        result delivered downstream, so at most ``parallelism`` calls run or results
        wait. A result that arrives ahead of an earlier one waits for it.

        Concurrency: the calls run on the executor's threads or the loop; results are
        delivered serially from the stage's drain loop, on the thread of the call that
        made them deliverable or of the downstream ``request``.

        Raises:
            TypeError, ValueError: ``parallelism`` is not a positive int; ``executor=``
                with a coroutine function, or ``loop=`` with a plain one.
        """
        return Flow(
            MapAsyncOperator(
                self._node, fn, parallelism, ordered=True, executor=executor, loop=loop
            )
        )

    @overload
    def map_async_unordered(
        self,
        fn: Callable[[T], Awaitable[R]],
        parallelism: int,
        *,
        executor: None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Flow[R]: ...

    @overload
    def map_async_unordered(
        self,
        fn: Callable[[T], R],
        parallelism: int,
        *,
        executor: Executor | None = None,
        loop: None = None,
    ) -> Flow[R]: ...

    def map_async_unordered(
        self,
        fn: Callable[[T], Any],
        parallelism: int,
        *,
        executor: Executor | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Flow[Any]:
        """``map_async``, each result delivered as soon as it is ready (Akka mapAsyncUnordered).

        >>> sorted(Flow.range(0, 4).map_async_unordered(lambda x: x * 3, 2).to_list(timeout=10))
        [0, 3, 6, 9]

        Marble (``parallelism=2``; ``b`` takes longer than ``c``)::

            source:   -a-b-----c-----|
            request:  (2)-(1)---(1)-(1)
            result:   --A-----C---B--|

        Backpressure: as ``map_async``: at most ``parallelism`` calls running or results
        waiting; one upstream element requested per result delivered.

        Concurrency: as ``map_async``; the order of the results is the order in which the
        calls finish.
        """
        return Flow(
            MapAsyncOperator(
                self._node, fn, parallelism, ordered=False, executor=executor, loop=loop
            )
        )

    @overload
    @staticmethod
    def combine_latest(
        *publishers: Publisher[Any], prefetch: int = 32
    ) -> Flow[tuple[Any, ...]]: ...

    @overload
    @staticmethod
    def combine_latest(
        *publishers: Publisher[Any], combiner: Callable[[tuple[Any, ...]], R], prefetch: int = 32
    ) -> Flow[R]: ...

    @staticmethod
    def combine_latest(
        *publishers: Publisher[Any],
        combiner: Callable[[tuple[Any, ...]], Any] = tuple,
        prefetch: int = 32,
    ) -> Flow[Any]:
        """``combiner(latest)`` each time a source emits, once every source has emitted (Rx).

        ``latest`` is the tuple of each source's latest element, in the sources' order.

        >>> Flow.combine_latest(Flow.just("a"), Flow.range(0, 3)).to_list()
        [('a', 0), ('a', 1), ('a', 2)]
        >>> Flow.combine_latest(Flow.just(1), Flow.just(10), combiner=sum).to_list()
        [11]

        Marble::

            a:        -1-----2-----|
            b:        ----x-----y----|
            request:  (10)
            result:   ----(1,x)-(2,x)-(2,y)-|

        The flow completes once every source has completed (or at once when one
        completes without an element); the first error cancels every source. Elements
        are taken in the order they arrived (Reactor's ``combineLatest``).

        Backpressure: each source is requested ``prefetch`` and refilled at 75% of what
        was taken from it, so at most ``len(publishers) * prefetch`` elements wait, and a
        source whose elements wait for demand is not asked for more. A hot source that
        sends beyond what it was requested ends the flow with
        ``MissingBackpressureError`` (put ``on_backpressure_latest()`` or ``sample`` in
        front of it) rather than being buffered without bound.

        Concurrency: sources may emit on any threads; the combiner runs on the stage's one
        drain loop, and downstream signals are serial.

        Raises:
            ValueError: no publisher, or a non-positive ``prefetch``.
        """
        return Flow(CombineLatestOperator(tuple(publishers), combiner, prefetch))

    @overload
    def with_latest_from(self, other: Publisher[A], *, prefetch: int = 32) -> Flow[tuple[T, A]]: ...

    @overload
    def with_latest_from(
        self, other: Publisher[A], combiner: Callable[[tuple[T, A]], R], *, prefetch: int = 32
    ) -> Flow[R]: ...

    def with_latest_from(
        self,
        other: Publisher[Any],
        combiner: Callable[[tuple[Any, Any]], Any] = tuple,
        *,
        prefetch: int = 32,
    ) -> Flow[Any]:
        """``combiner((element, latest))``, ``latest`` being ``other``'s latest element (Rx).

        >>> Flow.range(0, 3).with_latest_from(Flow.just("x")).to_list()
        [(0, 'x'), (1, 'x'), (2, 'x')]

        Marble::

            source:   -1---2---3---4-|
            other:    ---a-------b-|
            result:   -----(2,a)-(3,a)-(4,b)-|     (1 dropped: other had no element)

        ``other`` is subscribed first. An element that arrives before ``other`` emitted is
        dropped (``statistics().dropped``). The flow completes with the source (``other``
        cancelled); ``other``'s completion changes nothing; any error fails the flow.

        Backpressure: demand passes to the source, a dropped element is requested again.
        ``other`` is requested ``prefetch`` at a time, refilled at 75% of what arrived;
        only its latest element is kept, so a fast ``other`` costs no memory; one that
        sends beyond its requests ends the flow with ``MissingBackpressureError``.

        Concurrency: ``other`` may emit on any thread; the combiner runs on the thread
        that delivers the source's element.
        """
        if not isinstance(other, Publisher):
            raise TypeError(f"with_latest_from() needs a Publisher, got {type(other).__qualname__}")
        return Flow(WithLatestFromOperator(self._node, other, combiner, prefetch))

    def throttle(
        self,
        elements: int,
        per: float,
        *,
        burst: int = 1,
        scheduler: Scheduler | None = None,
    ) -> Flow[T]:
        """Pace to ``elements`` per ``per`` seconds by delaying, never dropping (Akka throttle).

        >>> from reactive_streams.testing import RecordingSubscriber, VirtualTimeScheduler
        >>> clock = VirtualTimeScheduler()
        >>> seen = RecordingSubscriber(initial_request=10)
        >>> Flow.range(0, 5).throttle(1, 2.0, burst=2, scheduler=clock).subscribe(seen)
        >>> seen.elements                      # the bucket starts full: a burst of 2
        [0, 1]
        >>> clock.advance(2.0); seen.elements  # then one element every 2 seconds
        [0, 1, 2]
        >>> clock.advance(4.0); seen.elements, seen.completed
        ([0, 1, 2, 3, 4], True)

        A token bucket (shaping mode): ``burst`` tokens, full at subscription, one more
        every ``per / elements`` seconds up to ``burst``; each element takes a token and
        waits for one when there is none. Order is kept; completion and errors come after
        the elements that arrived before them.

        Marble (``throttle(1, 2, burst=2)``: one token every 2 seconds)::

            source:   -abcd-----|
            request:  (10)
            result:   -ab-c-d---|

        Args:
            elements: tokens per ``per`` seconds (a positive int).
            per: seconds (positive).
            burst: the bucket's size: the most elements delivered back to back after a
                quiet spell; ``1`` spaces every element evenly.
            scheduler: where the waits run (the shared timer thread by default).

        Backpressure: at most ``min(demand, max(burst, 16))`` elements requested upstream
        and not yet delivered; a token is spent only on an element downstream has demand
        for, so a slow consumer never causes a burst above the bucket.

        Concurrency: the waits run on ``scheduler``; delivery is serial.

        Raises:
            TypeError, ValueError: a non-positive ``elements``, ``per`` or ``burst``.
        """
        return Flow(ThrottleOperator(self._node, elements, per, burst, scheduler))

    @staticmethod
    def using(
        resource_factory: Callable[[], A],
        flow_factory: Callable[[A], Publisher[R]],
        cleanup: Callable[[A], object],
    ) -> Flow[R]:
        """A resource per subscriber, streamed from, then cleaned up once (Reactor ``using``).

        >>> closed = []
        >>> Flow.using(lambda: [1, 2, 3], Flow.from_iterable, closed.append).to_list()
        [1, 2, 3]
        >>> closed
        [[1, 2, 3]]
        >>> Flow.using(lambda: "r", lambda r: Flow.range(0, 100), closed.append).take(2).to_list()
        [0, 1]
        >>> closed[-1]                         # take cancelled the stream: cleaned up too
        'r'

        Marble::

            resource:  (open)-------------(cleanup)
            flow:        -1-2-3|
            result:      -1-2-3|           (cleanup runs before on_complete)

        ``resource_factory()`` runs at each ``subscribe``, ``flow_factory(resource)`` gives
        the publisher, and ``cleanup(resource)`` runs exactly once when the stream
        completes, fails or is cancelled: before the terminal signal (eager), or after
        upstream was cancelled. A ``flow_factory`` that raises cleans up and fails the
        subscriber; a ``cleanup`` that raises turns a completion into ``on_error`` (after
        an error or a cancel it goes to the undeliverable hook).

        Backpressure: demand passes through to the resource's publisher.

        Concurrency: ``cleanup`` runs on the thread that ends the stream.
        """
        return Flow(UsingPublisher(resource_factory, flow_factory, cleanup))

    def buffer(
        self, size: int, skip: int | None = None, *, timeout: float | None = None
    ) -> Flow[list[T]]:
        """Lists of ``size`` elements; a new list every ``skip`` elements (``size`` by default).

        >>> Flow.range(0, 5).buffer(2).to_list()
        [[0, 1], [2, 3], [4]]
        >>> Flow.range(0, 7).buffer(3, 2).to_list()
        [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6]]
        >>> Flow.range(0, 7).buffer(2, 3).to_list()
        [[0, 1], [3, 4], [6]]

        Marble (``buffer(3, 2)``)::

            source:  -0-1-2-3-4-5-6-|
            result:  -----[0,1,2]-[2,3,4]-[4,5,6]-[6]|

        ``skip < size`` overlaps the lists (sliding windows), ``skip > size`` drops the
        elements between them; the lists open at completion are emitted, shorter.
        With ``timeout`` seconds (only without ``skip``), a partial list is flushed.

        Backpressure: ``request(n)`` becomes ``request(n * size)`` upstream (``n *
        skip`` with ``skip``; ``size + (n - 1) * skip`` the first time when the lists
        overlap); at most ``ceil(size / skip)`` lists are open.

        Concurrency: the timeout runs on a timer thread; delivery is serial.

        Raises:
            ValueError: a non-positive ``size`` or ``skip``, or ``skip`` with ``timeout``.
        """
        if skip is None or skip == size:
            return Flow(BufferOperator(self._node, size, timeout))
        check_positive("buffer size", size)
        check_positive("buffer skip", skip)
        if timeout is not None:
            raise ValueError("buffer(): a timeout works only without skip")
        return Flow(SlidingBufferOperator(self._node, size, skip))

    def via(self, processor: Processor[T, R] | Callable[[], Processor[T, R]]) -> Flow[R]:
        """Route the flow through a ``Processor`` (an instance, or a factory of them)."""
        return Flow(ViaOperator(self._node, processor))

    def on_error_resume(self, fn: Callable[[Exception], Publisher[T]]) -> Flow[T]:
        """On an upstream error, continue with the publisher ``fn(error)`` returns.

        Backpressure: outstanding demand is carried over to the new publisher.
        """
        return Flow(ResumeOperator(self._node, fallback=fn, label="on_error_resume"))

    def on_error_return(self, value: T | Callable[[Exception], T]) -> Flow[T]:
        """On an upstream error, emit one last element and complete (Reactor's ``onErrorReturn``).

        >>> Flow.concat(Flow.just(1), Flow.error(KeyError("k"))).on_error_return(0).to_list()
        [1, 0]
        >>> Flow.error(KeyError("k")).on_error_return(lambda e: type(e).__name__).to_list()
        ['KeyError']

        Marble (``on_error_return(0)``)::

            source:  -1-2-X
            result:  -1-2-0|

        Args:
            value: the element; a callable is called with the error and its result is
                the element. A ``None`` (or a callable that raises) fails the flow
                with that error, whose ``__context__`` is the upstream error.

        Backpressure: the element is emitted only once downstream has demand for it.

        Concurrency: the callable runs on the thread that delivered ``on_error``.
        """
        if callable(value):
            fn = value
            return Flow(
                ResumeOperator(
                    self._node, fallback=lambda error: Flow.just(fn(error)), label="on_error_return"
                )
            )
        element = value
        return Flow(
            ResumeOperator(
                self._node, fallback=lambda _: Flow.just(element), label="on_error_return"
            )
        )

    def on_error_map(self, fn: Callable[[Exception], Exception]) -> Flow[T]:
        """On an upstream error, signal ``fn(error)`` instead (Reactor's ``onErrorMap``).

        >>> Flow.error(KeyError("k")).on_error_map(lambda e: LookupError("missing")).to_list()
        Traceback (most recent call last):
        ...
        LookupError: missing

        Marble::

            source:  -1-X
            result:  -1-Y        (Y = fn(X))

        ``fn`` must return an ``Exception``; otherwise, or if it raises, that failure is
        signalled, with the upstream error as its ``__context__``.

        Backpressure: demand passes through. Concurrency: ``fn`` runs on the thread
        that delivered ``on_error``.
        """

        def mapped(error: Exception) -> Publisher[T]:
            replacement = fn(error)
            if not isinstance(replacement, Exception):
                raise TypeError(
                    "the function given to on_error_map() must return an Exception, "
                    f"got {type(replacement).__qualname__}"
                )
            return Flow.error(replacement)

        return Flow(ResumeOperator(self._node, fallback=mapped, label="on_error_map"))

    def on_error_complete(self) -> Flow[T]:
        """On an upstream error, complete instead (Reactor's ``onErrorComplete``).

        >>> Flow.concat(Flow.just(1), Flow.error(KeyError("k"))).on_error_complete().to_list()
        [1]

        Marble::

            source:  -1-X
            result:  -1-|

        The error is dropped on purpose: it reaches neither downstream nor the
        undeliverable hook.

        Backpressure: demand passes through. Concurrency: completes on the thread that
        delivered ``on_error``.
        """
        return Flow(
            ResumeOperator(self._node, fallback=lambda _: Flow.empty(), label="on_error_complete")
        )

    def retry(self, times: int) -> Flow[T]:
        """On an upstream error, subscribe again, at most ``times`` times.

        Backpressure: outstanding demand is carried over to the new subscription.
        """
        return Flow(ResumeOperator(self._node, times=_check_count("retry", times), label="retry"))

    # -- live input: push sources, retry with backoff, restart -----------------------------

    def retry_backoff(
        self,
        backoff: Backoff,
        *,
        retry_on: RetryOn = Exception,
        scheduler: Scheduler | None = None,
    ) -> Flow[T]:
        """On an upstream error, subscribe again after a growing, jittered delay.

        Reactor's ``retryWhen(Retry.backoff(...))``. Retry ``k`` (0-based) waits
        ``backoff.delay(k)`` seconds on ``scheduler``: ``min_backoff * factor ** k``
        capped at ``max_backoff``, moved by up to ``+- jitter`` of itself. Once
        ``backoff.max_attempts`` retries were made, or the next one would start past
        ``backoff.deadline`` seconds after the series' first failure, the last error is
        signalled. With ``backoff.reset_on_success`` (the default) an element ends the
        series: the next failure starts again from ``min_backoff``, with fresh attempts
        and deadline. Only errors that ``retry_on`` matches are retried (exception classes
        as in ``except``, or a function of the error; every ``Exception`` by default):
        any other ends the flow at once (Reactor's ``Retry.filter``).

        Marble (``Backoff(1, 4, jitter=0, max_attempts=2, reset_on_success=False)``,
        one character a second)::

            source (1st):  a-X
            source (2nd):     -a-X           (1 s after the 1st failure)
            source (3rd):         --a-X      (2 s after the 2nd)
            result:        a----a-----a-X    (2 retries made: the last error)

        With ``reset_on_success=True`` each ``a`` resets the series, so every retry
        waits 1 s and the retries never run out while elements keep coming.

        Backpressure: outstanding demand (requested, not delivered) is carried over to
        each new subscription; nothing is requested while waiting.

        Concurrency: the new subscription is made on ``scheduler``'s thread (the
        default is the package's timer thread); a cancel during the wait stops the
        timer, and the upstream is never subscribed again.

        Raises:
            TypeError: ``backoff`` is not a ``Backoff``, or ``retry_on`` is neither
                exception classes nor a function.
        """
        return Flow(
            ResumeOperator(
                self._node,
                backoff=backoff,
                scheduler=scheduler,
                retry_on=retry_on,
                label="retry_backoff",
            )
        )

    @staticmethod
    def restart(
        factory: Callable[[], Publisher[R]],
        backoff: Backoff,
        *,
        on_complete: bool = False,
        retry_on: RetryOn = Exception,
        scheduler: Scheduler | None = None,
    ) -> Flow[R]:
        """A source made again by ``factory()`` after it fails, once a backoff delay passed.

        Akka's ``RestartSource.onFailuresWithBackoff`` (``withBackoff`` with
        ``on_complete=True``): ``factory`` is called for the first subscription and again
        for each restart, so a connection, a file or a query is opened afresh. Restart
        ``k`` (0-based) waits ``backoff.delay(k)`` seconds; ``backoff.max_attempts``
        (Akka's ``maxRestarts``) and ``backoff.deadline`` bound them, and once they are
        used up the last signal passes through: the error, or the completion. An element
        ends a series of failures (``backoff.reset_on_success``). A factory that raises
        counts as a failure. Only errors that ``retry_on`` matches restart the source
        (as in ``retry_backoff``); any other ends the flow. Elements delivered before a
        failure are not repeated by this operator; a restarted source starts wherever
        ``factory`` makes it start (pass it the offset reached so far to resume).

        Marble (``Backoff(1, 4, jitter=0, max_attempts=1)``, one character a second)::

            factory() (1st):  a-b-X
            factory() (2nd):        -c-|
            result:           a-b---c-|

        Backpressure: outstanding demand is carried over to each new source; nothing is
        requested while waiting.

        Concurrency: each restart subscribes on ``scheduler`` (the package's timer thread
        by default); a cancel during the wait stops the timer.

        Raises:
            TypeError: ``backoff`` is not a ``Backoff``, or ``retry_on`` is neither
                exception classes nor a function.
        """
        return Flow(
            ResumeOperator(
                DeferPublisher(factory),
                backoff=backoff,
                scheduler=scheduler,
                on_complete=on_complete,
                retry_on=retry_on,
                label="restart",
            )
        )

    @staticmethod
    def push_source(
        capacity: int,
        overflow: PushOverflow = "backpressure",
        *,
        on_drop: Callable[[Any], object] | None = None,
    ) -> tuple[PushSource[Any], Flow[Any]]:
        """A bounded buffer that callbacks ``offer`` to, and the one ``Flow`` that reads it.

        Reactor's ``Sinks.many().unicast().onBackpressureBuffer()``, Akka's
        ``Source.queue``: ``offer(x, timeout=None)`` (blocking), ``await
        offer_async(x)``, ``try_offer(x)``, each returning an ``OfferResult``;
        ``complete()`` and ``error(exc)`` end the stream.

        >>> source, flow = Flow.push_source(4)
        >>> [source.try_offer(x).name for x in (1, 2)]
        ['ENQUEUED', 'ENQUEUED']
        >>> source.complete()
        True
        >>> flow.to_list()
        [1, 2]

        Marble (``capacity=2``, ``overflow="drop_latest"``)::

            offer:    -1-2-3-4-5-complete
            request:  (1)........(9)
            result:   -1.........-3-4-|     dropped: 5

        Args:
            capacity: elements buffered at most (``>= 1``).
            overflow: a full buffer makes ``offer`` wait (``"backpressure"``), drops the
                new element (``"drop_latest"``) or the oldest (``"drop_oldest"``), or
                fails the stream with ``MissingBackpressureError`` (``"error"``); drops
                are counted in ``statistics().dropped``.
            on_drop: called with each dropped element.

        Backpressure: the subscriber's demand paces delivery; at most ``capacity``
        elements wait in between, and the strategy decides beyond that.

        Concurrency: one subscriber (a second gets ``on_error(RuntimeError)``, Rule
        1.9); offers from any thread or event loop; ``on_next`` runs on the thread of
        the ``offer`` or ``request`` that found the stream idle, one at a time.

        Raises:
            TypeError: ``capacity`` is not an int.
            ValueError: ``capacity < 1``, or an unknown ``overflow``.
        """
        source: PushSource[Any] = PushSource(capacity, overflow, on_drop=on_drop)
        return source, Flow(source)

    def on_backpressure_buffer(
        self,
        capacity: int,
        *,
        overflow: Overflow = "error",
        on_drop: Callable[[T], object] | None = None,
    ) -> Flow[T]:
        """Buffer up to ``capacity`` undemanded elements of a hot source.

        Args:
            capacity: elements kept beyond the downstream demand.
            overflow: ``"error"`` (``MissingBackpressureError``), ``"drop_oldest"`` or
                ``"drop_latest"``.
            on_drop: called with each dropped element; drops are counted in
                ``statistics().dropped``.

        Backpressure: requests unbounded demand upstream.

        Raises:
            TypeError: ``capacity`` is not an int.
            ValueError: ``capacity <= 0``: a buffer of no element is ``on_backpressure_drop``
                (or, with ``overflow="error"``, a stream that fails at its first
                undemanded element), so it is refused rather than guessed.
        """
        return Flow(
            OnBackpressureOperator(
                self._node,
                check_positive("capacity", capacity),
                overflow,
                on_drop,
                "on_backpressure_buffer",
            )
        )

    def on_backpressure_drop(self, on_drop: Callable[[T], object] | None = None) -> Flow[T]:
        """Drop (count, and pass to ``on_drop``) elements that arrive without demand."""
        return Flow(
            OnBackpressureOperator(self._node, 0, "drop_latest", on_drop, "on_backpressure_drop")
        )

    def on_backpressure_latest(self, on_drop: Callable[[T], object] | None = None) -> Flow[T]:
        """Keep only the latest undemanded element; older ones are dropped and counted."""
        return Flow(
            OnBackpressureOperator(self._node, 1, "drop_oldest", on_drop, "on_backpressure_latest")
        )

    def limit_rate(self, high_tide: int, low_tide: int | None = None) -> Flow[T]:
        """Split downstream demand into upstream requests of at most ``high_tide``.

        >>> Flow.range(0, 5).limit_rate(2).to_list()
        [0, 1, 2, 3, 4]

        Marble (``limit_rate(4, low_tide=3)``, downstream requests unbounded)::

            request up:  (4)------(3)------(3)...
            source:      -1-2-3-4-5-6-7-...
            result:      -1-2-3-4-5-6-7-...

        Args:
            high_tide: the most elements upstream is ever owed (requested, not received).
            low_tide: after this many arrived, the stage requests again (refilling to
                ``high_tide``); 75% of ``high_tide`` by default (Reactor's
                ``limitRate``). ``low_tide == high_tide`` refills only once all arrived.

        Backpressure: never more than downstream asked for, and never more than
        ``high_tide`` outstanding upstream; an unbounded downstream demand becomes
        bounded requests (a network source sends batches, not everything at once).

        Concurrency: delivery runs on the stage's one drain loop; ``request`` may come
        from any thread.

        Raises:
            TypeError: a non-int tide.
            ValueError: ``high_tide <= 0``, or ``low_tide`` not in ``1..high_tide``.
        """
        high = check_positive("high_tide", high_tide)
        if low_tide is None:
            low = replenish_threshold(high)
        else:
            low = check_positive("low_tide", low_tide)
        if low > high:
            raise ValueError(f"limit_rate() needs low_tide <= high_tide, got {low} > {high}")
        return Flow(LimitRateOperator(self._node, high, low))

    # ------------------------------------------------------------------ side effects
    def tap(
        self,
        *,
        on_next: Callable[[T], object] | None = None,
        on_error: Callable[[Exception], object] | None = None,
        on_complete: Callable[[], object] | None = None,
        on_cancel: Callable[[], object] | None = None,
        on_request: Callable[[int], object] | None = None,
        on_subscribe: Callable[[Subscription], object] | None = None,
    ) -> Flow[T]:
        """Call the given callbacks on the signals that pass; the stream is unchanged.

        >>> seen = []
        >>> flow = Flow.just(1, 2).tap(on_next=seen.append, on_complete=lambda: seen.append("end"))
        >>> flow.to_list()
        [1, 2]
        >>> seen
        [1, 2, 'end']

        Marble (``tap(on_next=f)``)::

            source:  -1-2-|
            f:        1 2
            result:  -1-2-|

        A callback that raises ends the stream with its exception: upstream is
        cancelled and downstream gets ``on_error`` (an ``on_error`` callback's exception
        carries the original error as ``__context__``; an ``on_complete`` callback's
        replaces the completion). An ``on_cancel`` callback's exception goes to the
        undeliverable hook. ``on_request`` sees each valid ``request(n)`` (Rule 3.9
        errors are the stage's own); ``on_cancel`` runs once, and not after the stream
        ended.

        Backpressure: demand passes through unchanged; at most the elements downstream
        asked for wait in the stage.

        Concurrency: ``on_next``/``on_error``/``on_complete``/``on_subscribe`` run on
        the thread that delivers the upstream signal, ``on_request``/``on_cancel`` on
        the caller's; downstream signals stay serial (Rule 1.3).
        """
        callbacks = TapCallbacks(
            on_next, on_error, on_complete, on_cancel, on_request, on_subscribe
        )
        return Flow(TapOperator(self._node, callbacks, label="tap"))

    def _tap(self, label: str, **callbacks: Any) -> Flow[T]:
        return Flow(TapOperator(self._node, TapCallbacks(**callbacks), label=label))

    def do_on_next(self, fn: Callable[[T], object]) -> Flow[T]:
        """``tap(on_next=fn)``: ``fn`` sees each element before downstream does.

        Marble::

            source:  -1-2-|
            fn:       1 2
            result:  -1-2-|

        Backpressure: demand passes through. Concurrency: ``fn`` runs on the thread
        that delivers the element. A raising ``fn`` cancels upstream and fails the flow.
        """
        return self._tap("do_on_next", on_next=fn)

    def do_on_error(self, fn: Callable[[Exception], object]) -> Flow[T]:
        """``tap(on_error=fn)``: ``fn`` sees the upstream error before downstream does.

        Marble::

            source:  -1-X
            fn:         X
            result:  -1-X

        Backpressure: demand passes through. Concurrency: runs on the thread that
        delivers the error. A raising ``fn`` replaces the error (the original is its
        ``__context__``).
        """
        return self._tap("do_on_error", on_error=fn)

    def do_on_complete(self, fn: Callable[[], object]) -> Flow[T]:
        """``tap(on_complete=fn)``: ``fn`` runs when upstream completes.

        Marble::

            source:  -1-|
            fn:         *
            result:  -1-|

        Backpressure: demand passes through. Concurrency: runs on the thread that
        delivers the completion. A raising ``fn`` turns the completion into ``on_error``.
        """
        return self._tap("do_on_complete", on_complete=fn)

    def do_on_cancel(self, fn: Callable[[], object]) -> Flow[T]:
        """``tap(on_cancel=fn)``: ``fn`` runs once when downstream cancels.

        Marble::

            source:  -1-2-3-...
            result:  -1-2-^        (downstream cancels; fn runs, then upstream is cancelled)

        Backpressure: demand passes through. Concurrency: runs on the thread that calls
        ``cancel``; an exception goes to the undeliverable hook.
        """
        return self._tap("do_on_cancel", on_cancel=fn)

    def do_on_request(self, fn: Callable[[int], object]) -> Flow[T]:
        """``tap(on_request=fn)``: ``fn(n)`` for each valid ``request(n)`` from downstream.

        Marble::

            request: (2)----(1)
            fn:       2      1
            source:  -1-2----3-|

        Backpressure: ``n`` is then passed upstream unchanged. Concurrency: runs on the
        thread that calls ``request``. A raising ``fn`` cancels upstream and fails the flow.
        """
        return self._tap("do_on_request", on_request=fn)

    def do_on_subscribe(self, fn: Callable[[Subscription], object]) -> Flow[T]:
        """``tap(on_subscribe=fn)``: ``fn`` sees the upstream subscription first.

        Marble::

            subscribe: *          (fn(subscription), then downstream's on_subscribe)
            source:    -1-|
            result:    -1-|

        Backpressure: demand passes through. Concurrency: runs on the thread that
        subscribes. A raising ``fn`` cancels upstream and fails the flow right after
        downstream's ``on_subscribe``.
        """
        return self._tap("do_on_subscribe", on_subscribe=fn)

    def log(self, name: str = "flow", *, level: int = logging.INFO) -> Flow[T]:
        """Log every signal, with the outstanding demand, on the ``reactive_streams`` logger.

        Lines look like ``prices | request(16) demand=16 [thread MainThread]`` and
        ``prices | on_next(3) demand=15 [thread MainThread]``; ``demand`` is what
        downstream requested and has not yet been given, ``unbounded`` after a
        ``request`` that reached ``MAX_DEMAND`` (Reactor's ``log()``).

        Marble::

            source:  -1-2-|
            log:      on_subscribe, request(n), on_next(1), on_next(2), on_complete()
            result:  -1-2-|

        Backpressure: demand passes through. Concurrency: each line is written on the
        thread of the signal, whose name it shows. Nothing is formatted unless the
        logger is enabled for ``level``.
        """
        return Flow(
            TapOperator(self._node, TapCallbacks(), label="log", log_name=name, level=level)
        )

    # ------------------------------------------------------------------ multicast
    def publish(self, *, prefetch: int = 256) -> ConnectableFlow[T]:
        """A multicast flow that subscribes upstream only when ``connect()`` is called.

        Backpressure: every subscriber is served at the slowest one's pace; the fastest is
        at most ``prefetch`` elements ahead (the bounded drift).

        Concurrency: one drain loop delivers to all subscribers, serially per subscriber.
        """
        return ConnectableFlow(
            MulticastOperator(self._node, prefetch=prefetch, ref_count=False, label="publish")
        )

    def share(self, *, prefetch: int = 256) -> Flow[T]:
        """Multicast, connected at the first subscriber and cancelled after the last leaves.

        Subscribers that join later get the elements from then on. After completion the
        next subscriber starts a new upstream subscription.

        Backpressure: as ``publish()``: the pace of the slowest, drift at most ``prefetch``.
        """
        return Flow(MulticastOperator(self._node, prefetch=prefetch, ref_count=True, label="share"))

    def replay(self, count: int, *, prefetch: int = 256) -> Flow[T]:
        """``share()`` that also keeps the last ``count`` elements for late subscribers.

        After completion, new subscribers get the kept elements and the terminal signal.

        Backpressure: as ``share()``; the replay window adds at most ``count`` elements.
        """
        return Flow(
            MulticastOperator(
                self._node,
                prefetch=prefetch,
                replay=_check_count("replay", count),
                ref_count=True,
                label="replay",
            )
        )

    # ------------------------------------------------------------------ async boundaries
    def publish_on(
        self, executor: Executor | asyncio.AbstractEventLoop, *, prefetch: int = 256
    ) -> Flow[T]:
        """Deliver downstream signals on ``executor`` through a buffer of ``prefetch``.

        Marble::

            source:    -1-2-3-|        (any thread)
            request:   (256) ... (192 each time 75% is consumed)
            result:    --1-2-3-|       (on the executor)

        Args:
            executor: a ``concurrent.futures.Executor`` or an asyncio event loop.
            prefetch: the buffer bound in elements, and the demand sent upstream.

        Backpressure:
            At most ``prefetch`` elements are buffered; upstream gets ``request(prefetch)``
            and then ``request(k)`` each time ``k`` = 75% of ``prefetch`` has been consumed.

        Concurrency:
            Elements are handed to the executor in batches under one lock; one drain task
            runs at a time, so downstream signals are serial (Rule 1.3).
        """
        return Flow(PublishOnOperator(self._node, executor, prefetch))

    def subscribe_on(self, executor: Executor | asyncio.AbstractEventLoop) -> Flow[T]:
        """Subscribe to, request from and cancel upstream on ``executor``.

        Backpressure:
            Demand is forwarded unchanged (coalesced while a forwarding task is pending).

        Concurrency:
            A synchronous source produces on the executor; upstream calls are serialised
            (Rule 2.7).
        """
        return Flow(SubscribeOnOperator(self._node, executor))

    # ------------------------------------------------------------------ sinks
    def to_list(self, timeout: float | None = None) -> list[T]:
        """Block until completion and return all elements (see ``collect_list``)."""
        return collect_list(self, timeout)

    def for_each(self, fn: Callable[[T], object], timeout: float | None = None) -> None:
        """Block, calling ``fn`` on each element, until completion (see ``for_each``)."""
        for_each(self, fn, timeout)

    def first(self, default: T = NO_DEFAULT, timeout: float | None = None) -> T:
        """Return the first element (the rest is cancelled), or ``default`` if empty.

        Raises:
            LookupError: the flow is empty and no ``default`` was given.
        """
        return first(self, default, timeout)

    def iterate(self, *, prefetch: int = 256, timeout: float | None = None) -> BlockingIterator[T]:
        """A blocking iterator holding at most ``prefetch`` elements; close it to cancel."""
        iterator: BlockingIterator[T] = BlockingIterator(prefetch, timeout)
        self.subscribe(iterator)
        return iterator

    def __iter__(self) -> Iterator[T]:
        """``for x in flow``: ``iterate()``, cancelled as soon as the loop is left.

        Leaving the loop early (``break``, ``return``, an exception) drops the iterator,
        which closes it: the subscription is cancelled there and then, so an endless
        upstream (``interval``, a live source) stops instead of running on unseen.
        """
        iterator = self.iterate()
        try:
            yield from iterator
        finally:
            iterator.close()

    def aiter(
        self,
        *,
        prefetch: int = 256,
        executor: Executor | None = None,
        non_blocking: bool = False,
    ) -> AsyncIteratorSubscriber[T]:
        """An async iterator (and async context manager) holding at most ``prefetch``.

        Delegates to ``reactive_streams.adapters.asyncio.to_async_iterator``: it subscribes
        on first use, from inside the running event loop; upstream ``subscribe`` and
        ``request`` run on ``executor`` (a shared thread pool by default), or on the
        caller's thread with ``non_blocking=True``. Leaving ``async with`` cancels.
        """
        return to_async_iterator(
            self, prefetch=prefetch, executor=executor, non_blocking=non_blocking
        )

    def __aiter__(self) -> AsyncIterator[T]:
        """``async for x in flow``: ``aiter()``, cancelled as soon as the loop is left.

        Leaving the loop early (``break``, ``return``, an exception, the consuming task
        cancelled) closes the iterator, which cancels the subscription, as ``for`` does.
        """
        return self.aiter().__aiter__()

    # ------------------------------------------------------------------ introspection
    def metrics(self) -> dict[str, StageStatistics]:
        """Per-stage statistics of the most recent run, sources first.

        Keys are ``"<index>:<operator name>"``, fused stages show all their operators
        (``"0:range|map|filter"``). Stages whose run has ended and been garbage-collected
        are left out.
        """
        result: dict[str, StageStatistics] = {}
        for index, operator in enumerate(walk(self)):
            stats = operator.last_statistics()
            if stats is not None:
                result[f"{index}:{operator.name}"] = stats
        return result

    # ------------------------------------------------------------------ time
    def sample(self, period: float, *, scheduler: Scheduler | None = None) -> Flow[T]:
        """Every ``period`` seconds, the latest element if a new one arrived (see ``_time``).

        Marble (``period=2``)::

            source:  -a-b---c-----d|
            result:  --b-----c-----d|

        The element waiting at completion is emitted before ``on_complete``.

        Backpressure: unbounded upstream demand; an element due without downstream demand
        ends the flow with ``MissingBackpressureError``.

        Concurrency: ticks on ``scheduler`` (the shared timer thread by default).
        """
        return Flow(SampleOperator(self._node, period, scheduler))

    def throttle_first(self, period: float, *, scheduler: Scheduler | None = None) -> Flow[T]:
        """Emit an element, then drop the elements of the next ``period`` seconds.

        Marble (``period=3``)::

            source:  -a-b-c---d-e|
            result:  -a-------d--|

        Backpressure: unbounded upstream demand; drops are counted in ``statistics()``;
        an element to emit without downstream demand is a ``MissingBackpressureError``.

        Concurrency: reads ``scheduler.now()`` on the upstream's thread.
        """
        return Flow(ThrottleFirstOperator(self._node, period, scheduler))

    def debounce(self, period: float, *, scheduler: Scheduler | None = None) -> Flow[T]:
        """Emit an element once ``period`` seconds pass without a newer one.

        Marble (``period=2``)::

            source:  -a-b------c-d-|
            result:  -----b--------d|

        The waiting element is emitted at completion (Reactor's semantics).

        Backpressure: unbounded upstream demand; an element due without downstream demand
        ends the flow with ``MissingBackpressureError``.

        Concurrency: the wait runs on ``scheduler``; delivery is serial.
        """
        return Flow(DebounceOperator(self._node, period, scheduler))

    def timeout(
        self,
        period: float,
        fallback: Publisher[T] | None = None,
        *,
        scheduler: Scheduler | None = None,
    ) -> Flow[T]:
        """After ``period`` seconds of silence, cancel upstream; fail or switch to ``fallback``.

        Without ``fallback``, fail with ``TimeoutError``; with it, go on with its elements
        (Reactor's ``timeout(Duration, Publisher)``; the fallback itself is not timed).
        The wait starts at subscription and restarts at each element.

        Marble (``period=3``)::

            source:    -a-b-------c|
            result:    -a-b---X(TimeoutError)
            fallback:         -x-y|
            result:    -a-b----x-y|        (timeout(3, fallback))
            request:   (5)                 (the fallback is requested 5 - 2 = 3)

        Backpressure: demand passes through; the clock runs even without demand. On a
        switch, the fallback is requested the outstanding demand, and later requests.

        Concurrency: the timer runs on ``scheduler``; signals stay serial.
        """
        if fallback is not None and not isinstance(fallback, Publisher):
            raise TypeError(
                f"timeout() needs a Publisher as fallback, got {type(fallback).__qualname__}"
            )
        return Flow(TimeoutOperator(self._node, period, scheduler, fallback))

    def delay(self, period: float, *, scheduler: Scheduler | None = None) -> Flow[T]:
        """Shift every element, the completion and the error ``period`` seconds later.

        Marble (``period=2``)::

            source:  -a-b---c|
            result:  ---a-b---c|

        Backpressure: demand passes up, with at most 256 elements requested and not yet
        delivered (the elements in flight are bounded).

        Concurrency: signals move to ``scheduler``; delivery is serial.
        """
        return Flow(DelayOperator(self._node, period, scheduler))

    def window(
        self,
        count: int | None = None,
        timespan: float | None = None,
        *,
        skip: int | None = None,
        scheduler: Scheduler | None = None,
    ) -> Flow[Flow[T]]:
        """Windows of ``count`` elements and/or ``timespan`` seconds, each a cold ``Flow``.

        >>> [w.to_list() for w in Flow.range(0, 5).window(2).to_list()]
        [[0, 1], [2, 3], [4]]

        A window is emitted when it closes (full, at a ``timespan`` tick, or at
        completion); empty windows are skipped.

        With ``skip`` (count windows only), a window opens every ``skip`` elements:
        ``skip < count`` overlaps them, ``skip > count`` leaves gaps, as ``buffer(count,
        skip)`` does, each list a window:

        >>> [w.to_list() for w in Flow.range(0, 5).window(3, skip=2).to_list()]
        [[0, 1, 2], [2, 3, 4], [4]]

        Backpressure: with ``count``, ``request(n)`` becomes ``request(n * count)``; with
        ``timespan`` only, unbounded upstream demand and ``MissingBackpressureError`` for a
        window closed without downstream demand.

        Raises:
            ValueError: neither ``count`` nor ``timespan``, or a non-positive one.
        """
        if skip is not None and skip != count:
            if count is None or timespan is not None:
                raise ValueError("window(): skip works with count only, not with timespan")
            return self.buffer(count, skip).map(Flow.from_iterable)
        return Flow(WindowOperator(self._node, count, timespan, scheduler, Flow))

    def rebatch(self, *, max_rows: int | None = None, max_bytes: int | None = None) -> Flow[T]:
        """Re-cut ``pyarrow.RecordBatch`` or ``bytes`` elements to at most the bounds.

        >>> Flow.just(b"abcde", b"f", b"gh").rebatch(max_bytes=3).to_list()
        [b'abc', b'def', b'gh']

        Larger inputs are sliced (``RecordBatch.slice``, no copy), smaller ones joined up
        to the bound, rows in order. ``max_bytes`` bounds ``RecordBatch.nbytes`` (``len``
        for bytes); for bytes a row is a byte. pyarrow is imported only for batches.

        Backpressure: one input is requested at a time, only when fewer outputs are ready
        than requested, so demand bounds memory in bytes.

        Raises:
            ValueError: neither bound given, or one ``<= 0``. A single row larger than
                ``max_bytes`` is signalled with ``on_error(ValueError)``.
        """
        return Flow(RebatchOperator(self._node, max_rows, max_bytes))

    def group_by(
        self, key: Callable[[T], K], *, max_groups: int = 256, prefetch: int = 256
    ) -> Flow[GroupedFlow[K, T]]:
        """One ``GroupedFlow`` (a ``Flow`` with ``.key``) per distinct key.

        >>> groups = Flow.range(0, 6).group_by(lambda x: x % 2)
        >>> sorted(groups.flat_map(lambda g: g.map(lambda x: (g.key, x))).to_list())
        [(0, 0), (0, 2), (0, 4), (1, 1), (1, 3), (1, 5)]

        A group that is cancelled is forgotten: its key, if it comes back, opens a new
        group. More than ``max_groups`` live groups is a ``TooManyGroupsError`` naming the
        limit.

        Backpressure: ``prefetch`` elements upstream, replenished only as the groups'
        subscribers take elements. A group nobody consumes therefore stalls every group
        once its elements fill ``prefetch`` (Reactor's caveat): consume or cancel every
        group, or put ``timeout(...)`` on the consumers to turn a stall into an error.
        """
        return Flow(GroupByOperator(self._node, key, max_groups, prefetch, GroupedFlow))


class ConnectableFlow(Flow[T]):
    """A ``Flow`` from ``publish()``: subscribers wait until ``connect()`` is called."""

    __slots__ = ()

    def connect(self) -> None:
        """Subscribe upstream (once); elements then go to the current subscribers."""
        node = self._node
        assert isinstance(node, MulticastOperator)
        node.connect()


class GroupedFlow(Flow[T], Generic[K, T]):
    """One group of ``group_by``: a ``Flow`` of the elements whose key is ``key``.

    It accepts one subscriber (a second one gets ``on_error(RuntimeError)``); the elements
    that arrived before it subscribed wait for it, within the operator's ``prefetch``.
    """

    __slots__ = ("key",)

    def __init__(self, key: K, node: Publisher[T]) -> None:
        super().__init__(node)
        self.key = key

    def __repr__(self) -> str:
        return f"GroupedFlow(key={self.key!r})"
