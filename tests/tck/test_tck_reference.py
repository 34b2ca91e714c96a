"""The TCK on every reference implementation: each must pass every required test."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from reactive_streams import MAX_DEMAND, Publisher, Subscriber
from reactive_streams.adapters.asyncio import from_async_iterable
from reactive_streams.reference import (
    ExecutorIterablePublisher,
    ExecutorSubscriber,
    IterablePublisher,
    RangePublisher,
    SyncSubscriber,
)
from reactive_streams.tck import (
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    WhiteboxSubscriberProbe,
    probed,
)


class _Broken:
    """An iterable that fails when iteration starts (for the failed-publisher tests)."""

    def __iter__(self) -> Iterator[int]:
        raise RuntimeError("TCK: this iterable always fails")


class _Naturals:
    """0, 1, 2, ... for ever; iterable any number of times (one sequence per subscriber)."""

    def __iter__(self) -> Iterator[int]:
        return itertools.count()


def _elements(elements: int) -> Iterable[int]:
    return _Naturals() if elements == MAX_DEMAND else range(elements)


class TestRangePublisher(PublisherVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return RangePublisher(0, elements)


class TestIterablePublisher(PublisherVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return IterablePublisher(_elements(elements))

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return IterablePublisher(_Broken())


class TestExecutorIterablePublisher(PublisherVerification):
    def _executor(self) -> ThreadPoolExecutor:
        executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tck-reference")
        self.add_cleanup(lambda: executor.shutdown(wait=False, cancel_futures=True))
        return executor

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return ExecutorIterablePublisher(_elements(elements), self._executor())

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return ExecutorIterablePublisher(_Broken(), self._executor())


async def _agen(elements: int) -> AsyncIterator[int]:
    for element in _elements(elements):
        yield element


class _BrokenAsync:
    """An async iterable that fails when iteration starts (for the failed-publisher tests)."""

    def __aiter__(self) -> AsyncIterator[int]:
        raise RuntimeError("TCK: this async iterable always fails")


class TestFromAsyncIterable(PublisherVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return from_async_iterable(_agen(elements))

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return from_async_iterable(_BrokenAsync())


class _Collecting(SyncSubscriber[Any]):
    def when_next(self, element: Any) -> bool:
        return True


class _ExecutorCollecting(ExecutorSubscriber[Any]):
    def when_next(self, element: Any) -> bool:
        return True


class TestSyncSubscriberBlackbox(SubscriberBlackboxVerification):
    def create_subscriber(self) -> Subscriber[Any]:
        return _Collecting(batch_size=4)


class TestSyncSubscriberWhitebox(SubscriberWhiteboxVerification):
    def create_subscriber(self, probe: WhiteboxSubscriberProbe) -> Subscriber[Any]:
        subscriber = _Collecting(batch_size=4)
        return probed(subscriber, probe, cancel=subscriber.cancel)


class TestExecutorSubscriberBlackbox(SubscriberBlackboxVerification):
    def create_subscriber(self) -> Subscriber[Any]:
        executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tck-reference")
        self.add_cleanup(lambda: executor.shutdown(wait=False, cancel_futures=True))
        return _ExecutorCollecting(executor, batch_size=4)
