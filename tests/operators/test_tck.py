"""The TCK on every operator, applied to a range, and on the ``PublishOn`` processor.

``PublisherVerification`` runs on each operator (pull and push paths);
``IdentityProcessorVerification`` on the processor-shaped ``publish_on`` stage (``via``
is checked as a publisher that routes through a ``PublishOn``).

Every ``create_publisher(n)`` builds a flow of exactly ``n`` elements (an endless one for
``n == MAX_DEMAND``) through the operator under test.
"""

from __future__ import annotations

import itertools
import operator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from reactive_streams import MAX_DEMAND, Processor, Publisher, Subscriber
from reactive_streams._core import EmptySubscription
from reactive_streams.operators import Flow, KillSwitch
from reactive_streams.operators._publish_on import PublishOn
from reactive_streams.reference import RangePublisher
from reactive_streams.schedulers import default_scheduler
from reactive_streams.tck import IdentityProcessorVerification, PublisherVerification

if TYPE_CHECKING:
    from collections.abc import Callable


def _numbers(elements: int, extra: int = 0) -> Flow[int]:
    if elements == MAX_DEMAND:
        return Flow.from_iterable(itertools.count())
    return Flow.range(0, elements + extra)


def _pushed(elements: int) -> Flow[int]:
    """A range behind a non-fusable publisher, so operators take the push path."""
    if elements == MAX_DEMAND:
        return Flow.from_publisher(RangePublisher(0, MAX_DEMAND))
    return Flow.from_publisher(RangePublisher(0, elements))


class _FlowVerification(PublisherVerification):
    """Shared failed publisher: every operator must pass an upstream error on.

    ``create_publisher_from(source)`` is ``create_publisher(MAX_DEMAND)`` with the TCK's
    endless source in place of the endless range (``_numbers``/``_pushed``): every
    operator that has an endless variant runs the endless-source and Rule 2.3 tests. An
    operator with other sources overrides ``create_publisher_with_source`` to put the
    probe there (a trigger, a lane, an inner, a fallback).
    """

    _source: Publisher[Any] | None = None

    def create_publisher_from(self, source: Publisher[Any]) -> Publisher[Any] | None:
        if self.max_elements_from_publisher < MAX_DEMAND - 1:
            return None  # a fold, or a stage of a bounded count: no endless variant
        self._source = source
        return self.create_publisher(MAX_DEMAND)

    def _numbers(self, elements: int, extra: int = 0) -> Flow[int]:
        if elements == MAX_DEMAND and self._source is not None:
            return Flow.from_publisher(self._source)
        return _numbers(elements, extra)

    def _pushed(self, elements: int) -> Flow[int]:
        if elements == MAX_DEMAND and self._source is not None:
            return Flow.from_publisher(self._source)
        return _pushed(elements)

    def _failing_after(self, elements: int) -> Flow[int]:
        """``elements`` numbers then an error (an endless flow for ``MAX_DEMAND``)."""
        if elements == MAX_DEMAND:
            return self._numbers(elements)
        return Flow.concat(Flow.range(0, elements), Flow.error(RuntimeError("TCK: upstream error")))

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return Flow.error(RuntimeError("TCK: failed publisher")).map(lambda x: x)

    def executor(self) -> ThreadPoolExecutor:
        pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tck-operators")
        self.add_cleanup(lambda: pool.shutdown(wait=False, cancel_futures=True))
        return pool


class TestRange(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._numbers(elements)


class TestFusedMapFilter(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return (
            self._numbers(elements * 2 if elements != MAX_DEMAND else elements)
            .filter(lambda x: x % 2 == 0)
            .map(lambda x: x + 1)
        )


class TestPushMapFilter(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        source = self._pushed(elements * 2 if elements != MAX_DEMAND else elements)
        return source.filter(lambda x: x % 2 == 0).map(lambda x: x + 1)


class TestTakeSkip(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        flow = self._numbers(elements, extra=3).skip(3)
        return flow if elements == MAX_DEMAND else flow.take(elements)


class TestPushTakeSkip(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        if elements == MAX_DEMAND:
            return self._pushed(elements).skip(3)
        return Flow.from_publisher(RangePublisher(0, elements + 10)).skip(3).take(elements)


class TestScanDistinctTakeWhile(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        flow = self._numbers(elements, extra=5).scan(lambda acc, x: x).distinct_until_changed()
        if elements == MAX_DEMAND:
            return flow
        return flow.take_while(lambda x: x < elements)


class TestReduce(_FlowVerification):
    max_elements_from_publisher = 1

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._numbers(elements * 5).reduce(operator.add)

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.from_publisher(source).reduce(operator.add)


class TestPushReduce(_FlowVerification):
    max_elements_from_publisher = 1

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._pushed(elements * 5).reduce(operator.add)

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.from_publisher(source).reduce(operator.add)


class TestPublishOnFused(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._numbers(elements).publish_on(self.executor(), prefetch=16)


class TestPublishOnBuffered(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._pushed(elements).publish_on(self.executor(), prefetch=16)


class TestSubscribeOn(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._numbers(elements).subscribe_on(self.executor())


class TestFlatMap(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._numbers(elements).flat_map(Flow.just, concurrency=4)

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.just(0).flat_map(lambda _: source)  # an inner


class TestConcatMap(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._numbers(elements).concat_map(lambda x: [x])

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.just(0).concat_map(lambda _: source)  # an inner


class TestMerge(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        if elements == MAX_DEMAND:
            return Flow.merge(self._numbers(elements), self._numbers(elements))
        half = elements // 2
        return Flow.merge(Flow.range(0, half), Flow.range(half, elements))

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.merge(Flow.range(0, 3), source)  # the second lane


class TestConcat(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        if elements == MAX_DEMAND:
            return Flow.concat(Flow.just(-1), self._numbers(elements))
        half = elements // 2
        return Flow.concat(Flow.range(0, half), Flow.range(half, elements))

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.concat(Flow.range(0, 3), source)  # the second source


class TestZip(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return Flow.zip(self._numbers(elements), self._numbers(elements, extra=3))

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.zip(Flow.range(0, 3), source)  # the second lane

    def create_publisher_from(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.zip(Flow.from_publisher(source), _numbers(MAX_DEMAND))  # a one-shot source


class TestBuffer(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        if elements == MAX_DEMAND:
            return self._numbers(elements).buffer(2)
        return Flow.range(0, elements * 2).buffer(2)


class TestOnErrorResume(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        if elements == MAX_DEMAND:
            return Flow.error(RuntimeError("x")).on_error_resume(lambda _: self._numbers(elements))
        half = elements // 2
        failing = Flow.range(0, half).concat_with(Flow.error(RuntimeError("TCK: resume me")))
        return failing.on_error_resume(lambda _: Flow.range(half, elements))


class TestRetry(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        attempts = [0]

        def source() -> Flow[int]:
            attempts[0] += 1
            if attempts[0] == 1:
                return Flow.error(RuntimeError("TCK: first attempt fails"))
            return self._numbers(elements)

        return Flow.defer(source).retry(1)


class TestOnBackpressureBuffer(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        # a source on another thread, as hot sources are; the capacity never overflows
        source = self._numbers(elements).subscribe_on(self.executor())
        return source.on_backpressure_buffer(max(elements, 1))

    def create_publisher_from(self, source: Publisher[Any]) -> Publisher[Any] | None:
        # a bounded capacity: an unbounded one reads an endless source without bound
        return Flow.from_publisher(source).subscribe_on(self.executor()).on_backpressure_buffer(64)


class TestInterval(_FlowVerification):
    """The interval's own subscription, behind a buffer that takes every tick.

    The timer is hot (a tick without demand is ``MissingBackpressureError``), so the TCK's
    demand tests run against the buffer; the interval's subscription gets the rest:
    ``on_subscribe`` first, ticks in order, completion after ``count``, cancel, Rule 3.13.
    """

    def create_publisher(self, elements: int) -> Publisher[Any]:
        count = None if elements == MAX_DEMAND else elements
        return Flow.interval(0.0005, count=count).on_backpressure_buffer(max(elements, 1))

    def create_publisher_from(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return None  # the timer is its own source


class TestScheduledInterval(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        count = None if elements == MAX_DEMAND else elements
        flow = Flow.interval(0.0005, count=count, scheduler=default_scheduler())
        return flow.on_backpressure_buffer(max(elements, 1))

    def create_publisher_from(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return None  # the timer is its own source


class TestGroupByMain(_FlowVerification):
    """``group_by``'s main stream: one group per distinct key, the groups left unconsumed.

    Every key is new, so each element opens a group; ``prefetch`` and ``max_groups``
    cover the largest publisher, so the main stream completes with its groups still full.
    """

    max_elements_from_publisher = 256

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._numbers(elements).group_by(lambda x: x, max_groups=512, prefetch=512)

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return Flow.error(RuntimeError("TCK: failed publisher")).group_by(lambda x: x)

    def create_publisher_from(self, source: Publisher[Any]) -> Publisher[Any] | None:
        # eight groups, left unconsumed: their prefetch bounds what the main stream reads
        return Flow.from_publisher(source).group_by(lambda x: x % 8, prefetch=16)


class TestShare(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._numbers(elements).share(prefetch=16)


class TestReplay(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._numbers(elements).replay(4, prefetch=16)


class TestVia(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        pool = self.executor()
        return self._pushed(elements).via(lambda: PublishOn(pool, prefetch=16))


class TestPublishOnProcessor(IdentityProcessorVerification):
    max_supported_subscribers = 1

    def create_identity_processor(self, buffer_size: int) -> Processor[Any, Any]:
        pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tck-publish-on")
        self.add_cleanup(lambda: pool.shutdown(wait=False, cancel_futures=True))
        return PublishOn(pool, prefetch=buffer_size)

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return Flow.error(RuntimeError("TCK: failed publisher"))

    def create_publisher_from(self, source: Publisher[Any]) -> Publisher[Any] | None:
        pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tck-publish-on")
        self.add_cleanup(lambda: pool.shutdown(wait=False, cancel_futures=True))
        return Flow.from_publisher(source).via(lambda: PublishOn(pool, prefetch=16))


class TestLimitRate(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._pushed(elements).limit_rate(4)


class TestTap(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        seen: list[object] = []
        return self._pushed(elements).tap(
            on_next=seen.append,
            on_error=seen.append,
            on_complete=lambda: None,
            on_cancel=lambda: None,
            on_request=seen.append,
            on_subscribe=seen.append,
        )


class TestLog(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._numbers(elements).log("tck")


class TestOnErrorReturn(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        if elements == 0:
            return Flow.empty().on_error_return(-1)
        return self._failing_after(
            elements - 1 if elements != MAX_DEMAND else elements
        ).on_error_return(lambda error: -1)


class TestOnErrorMap(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._pushed(elements).on_error_map(lambda error: ValueError(str(error)))

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return Flow.error(RuntimeError("TCK")).on_error_map(lambda error: ValueError("mapped"))


class TestOnErrorComplete(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._failing_after(elements).on_error_complete()


def _one_element(flow: Callable[[Flow[int]], Flow[Any]], elements: int) -> Flow[Any]:
    """A fold over a pushed range: one element, or none (``skip(1)``) for ``elements == 0``."""
    folded = flow(_pushed(5))
    return folded.skip(1) if elements == 0 else folded


class _FoldVerification(_FlowVerification):
    """A fold: one element (none for ``elements == 0``); its upstream probed for Rule 2.3."""

    max_elements_from_publisher = 1

    def fold(self, flow: Flow[int]) -> Flow[Any]:
        raise NotImplementedError

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return _one_element(self.fold, elements)

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return self.fold(Flow.from_publisher(source))


class TestCount(_FoldVerification):
    def fold(self, flow: Flow[int]) -> Flow[Any]:
        return flow.count()


class TestLast(_FoldVerification):
    def fold(self, flow: Flow[int]) -> Flow[Any]:
        return flow.last()


class TestAll(_FoldVerification):
    def fold(self, flow: Flow[int]) -> Flow[Any]:
        return flow.all(lambda x: x < 3)


class TestAny(_FoldVerification):
    def fold(self, flow: Flow[int]) -> Flow[Any]:
        return flow.any(lambda x: x > 3)


class TestCollect(_FoldVerification):
    def fold(self, flow: Flow[int]) -> Flow[Any]:
        return flow.collect(list, list.append)


class TestToDict(_FoldVerification):
    def fold(self, flow: Flow[int]) -> Flow[Any]:
        return flow.to_dict(lambda x: x % 2)


class TestElementAt(_FoldVerification):
    def fold(self, flow: Flow[int]) -> Flow[Any]:
        return flow.element_at(2)


class TestTakeLast(_FlowVerification):
    max_elements_from_publisher = 4096  # it emits only at completion: no endless variant

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._pushed(elements + 3).take_last(elements)

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.from_publisher(source).take_last(3)


class TestDefaultIfEmpty(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        empty = Flow.from_publisher(RangePublisher(0, 0))
        if elements == 0:
            return empty.default_if_empty(-1).skip(1)
        if elements == 1:
            return empty.default_if_empty(-1)
        return self._pushed(elements).default_if_empty(-1)


class TestSwitchIfEmpty(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return Flow.from_publisher(RangePublisher(0, 0)).switch_if_empty(self._pushed(elements))


class TestSkipWhile(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        if elements == MAX_DEMAND:
            return self._pushed(elements).skip_while(lambda x: x < 3)
        return Flow.from_publisher(RangePublisher(-3, elements)).skip_while(lambda x: x < 0)


class TestDistinct(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        if elements == MAX_DEMAND:
            return self._pushed(elements).distinct(max_keys=64)
        return self._pushed(elements * 2).distinct(lambda x: x // 2)


class TestTakeUntil(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._pushed(elements).take_until(Flow.empty())

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.from_publisher(_Silent()).take_until(source)  # the trigger


class TestSlidingBuffer(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._pushed(elements).buffer(3, 1)  # one list opens per element


class TestSkippingBuffer(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        if elements == MAX_DEMAND:
            return self._pushed(elements).buffer(2, 3)
        return self._pushed(elements * 3).buffer(2, 3)


class TestSlidingWindow(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._pushed(elements).window(2, skip=1)


class TestSwitchMap(_FlowVerification):
    """One source element: the inner carries the whole demand."""

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return Flow.just(0).switch_map(lambda _: self._pushed(elements))

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.just(0).switch_map(lambda _: source)  # the inner


class TestSwitchMapSwitching(_FlowVerification):
    """Earlier inners are replaced (empty ones, so the count stays exact)."""

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return Flow.range(0, 3).switch_map(
            lambda i: (
                self._pushed(elements) if i == 2 else Flow.from_publisher(RangePublisher(0, 0))
            )
        )

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.range(0, 3).switch_map(lambda i: source if i == 2 else Flow.empty())


class TestMapAsync(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._pushed(elements).map_async(lambda x: x + 1, 4)


class TestMapAsyncUnordered(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._pushed(elements).map_async_unordered(
            lambda x: x + 1, 4, executor=self.executor()
        )


async def _increment(x: int) -> int:
    return x + 1


class TestMapAsyncCoroutine(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._pushed(elements).map_async(_increment, 3)


class TestCombineLatest(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return Flow.combine_latest(Flow.just("x"), self._pushed(elements))

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.combine_latest(Flow.just("x"), source)  # a lane


class TestWithLatestFrom(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._pushed(elements).with_latest_from(Flow.just("x"))

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        # a silent main source: the stage is still running when the other one ends
        return Flow.from_publisher(_Silent()).with_latest_from(source)


class _Silent(Publisher[Any]):
    """A source that never signals anything after ``on_subscribe``."""

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        subscriber.on_subscribe(EmptySubscription())


class TestTimeoutFallback(_FlowVerification):
    """The source stays silent: after 10 ms every element comes from the fallback."""

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return Flow.from_publisher(_Silent()).timeout(0.01, self._pushed(elements))

    def create_publisher_with_source(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.from_publisher(_Silent()).timeout(0.01, source)  # fallback


class TestTimeout(_FlowVerification):
    """A timeout that never fires: the stage passes everything on, a timer armed."""

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._numbers(elements).timeout(30)


class TestThrottle(_FlowVerification):
    """A fast rate on the shared timer thread: the TCK's waits stay short."""

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._pushed(elements).throttle(10_000, 1.0, burst=4)


class TestUsing(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return Flow.using(lambda: elements, self._pushed, lambda _: None)


class TestKillSwitch(_FlowVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self._pushed(elements).via(KillSwitch().flow())


class TestKillSwitchProcessor(IdentityProcessorVerification):
    max_supported_subscribers = 1

    def create_identity_processor(self, buffer_size: int) -> Processor[Any, Any]:
        return KillSwitch().flow()()

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return Flow.error(RuntimeError("TCK: failed publisher"))

    def create_publisher_from(self, source: Publisher[Any]) -> Publisher[Any] | None:
        return Flow.from_publisher(source).via(KillSwitch().flow())
