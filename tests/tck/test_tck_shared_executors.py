"""The whole TCK against publishers on shared, warm executors and event loops.

A fresh executor per publisher (what most TCK runs use) starts its first thread inside the
test, which slows the first asynchronous signal down enough to hide races between a test
and asynchronous delivery. Here every publisher of a class shares one executor (or one
event loop on one thread) that is already warm, as it is in an application, so signals
arrive at once and on another thread. A test that fails here but not with a fresh
executor is racing against asynchronous delivery: a bug of the TCK.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from reactive_streams import MAX_DEMAND, Publisher
from reactive_streams.adapters.asyncio import from_async_iterable
from reactive_streams.operators import Flow
from reactive_streams.reference import ExecutorIterablePublisher, RangePublisher
from reactive_streams.tck import PublisherVerification

_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="tck-shared")


def _warm_pool() -> None:
    barrier = threading.Barrier(4, timeout=10)
    for future in [_POOL.submit(barrier.wait) for _ in range(4)]:  # all 4 threads started
        future.result(10)


class _LoopThread:
    """One event loop running on one daemon thread for the whole module."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="tck-shared-loop", daemon=True
        )
        self._thread.start()
        ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(ready.set)
        self.loop.run_forever()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


_LOOP: _LoopThread | None = None


@pytest.fixture(scope="module", autouse=True)
def _shared() -> Iterator[None]:
    global _LOOP  # the module's one loop, shared by every test as an application would
    _warm_pool()
    _LOOP = _LoopThread()
    try:
        yield
    finally:
        _LOOP.close()
        _LOOP = None


def _loop() -> asyncio.AbstractEventLoop:
    assert _LOOP is not None
    return _LOOP.loop


def _numbers(elements: int) -> Flow[int]:
    if elements == MAX_DEMAND:
        return Flow.from_iterable(itertools.count())
    return Flow.range(0, elements)


class _Shared(PublisherVerification):
    def create_failed_publisher(self) -> Publisher[Any] | None:
        return Flow.error(RuntimeError("TCK: failed publisher")).publish_on(_POOL)


class TestPublishOnSharedPool(_Shared):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return _numbers(elements).publish_on(_POOL, prefetch=16)


class TestPushPublishOnSharedPool(_Shared):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return Flow.from_publisher(RangePublisher(0, elements)).publish_on(_POOL, prefetch=16)


class TestSubscribeOnSharedPool(_Shared):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return _numbers(elements).subscribe_on(_POOL)


class TestExecutorIterablePublisherSharedPool(_Shared):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        if elements == MAX_DEMAND:
            return ExecutorIterablePublisher(itertools.count(), _POOL)
        return ExecutorIterablePublisher(range(elements), _POOL)


class TestPublishOnSharedLoop(_Shared):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return _numbers(elements).publish_on(_loop(), prefetch=16)


class TestAsyncIterableOnSharedLoop(_Shared):
    max_elements_from_publisher = 10_000

    def create_publisher(self, elements: int) -> Publisher[Any]:
        async def numbers() -> AsyncIterator[int]:
            for value in range(elements):
                yield value

        return from_async_iterable(numbers(), loop=_loop())
