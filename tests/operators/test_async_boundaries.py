"""publish_on and subscribe_on: thread hops, bounded buffers, demand and termination."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest

from reactive_streams import MAX_DEMAND, ExecutorRejectedError, MissingBackpressureError
from reactive_streams.operators import Flow
from reactive_streams.operators._publish_on import PublishOn

from .helpers import ManualPublisher, Recorder

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1, thread_name_prefix="consumer") as pool:
        yield pool


@pytest.fixture
def producer() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1, thread_name_prefix="producer") as pool:
        yield pool


def test_publish_on_delivers_everything_on_the_executor(executor: ThreadPoolExecutor) -> None:
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    Flow.range(0, 5000).publish_on(executor, prefetch=32).subscribe(recorder)
    recorder.wait()
    assert recorder.elements == list(range(5000))
    assert recorder.completed == 1
    assert threading.get_ident() not in recorder.threads
    assert len(recorder.threads) == 1


@pytest.mark.rule("1.1")
def test_publish_on_buffer_is_bounded_and_replenished_at_75_percent(
    executor: ThreadPoolExecutor,
) -> None:
    """request upstream: (16), then a refill once at least 12 (75%) were handed downstream."""
    source: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    flow = Flow.from_publisher(source).publish_on(executor, prefetch=16)
    flow.subscribe(recorder)
    assert source.subscription.requests == [16]
    source.next(*range(16))
    recorder.wait_for_count(16)
    executor.submit(lambda: None).result(10)  # the drain task that delivered them is over
    assert flow.metrics()["1:publish_on"].high_water_mark <= 16
    source.complete()
    recorder.wait()
    requests = [int(n) for n in source.subscription.requests]  # type: ignore[call-overload]
    assert requests[0] == 16
    assert all(12 <= n <= 16 for n in requests[1:])  # refills of at least 75%
    assert len(requests) == 2
    assert sum(requests) - len(recorder.elements) <= 16  # never more than the bound
    assert recorder.elements == list(range(16))


@pytest.mark.rule("1.1")
def test_publish_on_signals_missing_backpressure(executor: ThreadPoolExecutor) -> None:
    source: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[int] = Recorder(0)
    Flow.from_publisher(source).publish_on(executor, prefetch=2).subscribe(recorder)
    source.next(1, 2, 3)  # one more than requested
    recorder.request(10)
    recorder.wait()
    assert recorder.elements == [1, 2]
    assert isinstance(recorder.errors[0], MissingBackpressureError)


@pytest.mark.rule("3.9")
def test_publish_on_non_positive_request(executor: ThreadPoolExecutor) -> None:
    source: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[int] = Recorder(0)
    Flow.from_publisher(source).publish_on(executor).subscribe(recorder)
    recorder.request(0)
    recorder.wait()
    assert isinstance(recorder.errors[0], ValueError)
    assert "Rule 3.9" in str(recorder.errors[0])
    assert source.subscription.cancelled == 1


@pytest.mark.rule("3.12")
def test_publish_on_cancel_cancels_upstream(executor: ThreadPoolExecutor) -> None:
    source: ManualPublisher[int] = ManualPublisher()
    recorder: Recorder[int] = Recorder(1)
    flow = Flow.from_publisher(source).publish_on(executor)
    flow.subscribe(recorder)
    recorder.cancel()
    # the drain task cancels upstream; wait for it through a second task on the same executor
    executor.submit(lambda: None).result(10)
    executor.submit(lambda: None).result(10)
    assert source.subscription.cancelled == 1
    assert flow.metrics()["1:publish_on"].cancelled


def test_publish_on_error_after_elements(executor: ThreadPoolExecutor) -> None:
    boom = RuntimeError("boom")
    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    Flow.range(0, 3).map(lambda x: 10 // (2 - x)).publish_on(executor).subscribe(recorder)
    recorder.wait()
    assert recorder.elements == [5, 10]
    assert isinstance(recorder.errors[0], ZeroDivisionError)
    del boom


def test_publish_on_rejected_executor_signals_error() -> None:
    pool = ThreadPoolExecutor(1)
    pool.shutdown()
    recorder: Recorder[int] = Recorder(1)
    Flow.range(0, 3).publish_on(pool).subscribe(recorder)
    recorder.wait()
    assert isinstance(recorder.errors[0], ExecutorRejectedError)


def test_publish_on_serves_one_subscriber(executor: ThreadPoolExecutor) -> None:
    stage: PublishOn[int] = PublishOn(executor)
    first: Recorder[int] = Recorder()
    second: Recorder[int] = Recorder()
    stage.subscribe(first)
    stage.subscribe(second)
    assert second.errors
    assert "Rule 1.11" in str(second.errors[0])


def test_subscribe_on_runs_source_on_executor(producer: ThreadPoolExecutor) -> None:
    source_threads: set[int] = set()

    def record(x: int) -> int:
        source_threads.add(threading.get_ident())
        return x

    recorder: Recorder[int] = Recorder(MAX_DEMAND)
    Flow.range(0, 100).map(record).subscribe_on(producer).subscribe(recorder)
    recorder.wait()
    assert recorder.elements == list(range(100))
    assert len(source_threads) == 1
    assert threading.get_ident() not in source_threads


@pytest.mark.rule("3.9")
def test_subscribe_on_forwards_bad_requests(producer: ThreadPoolExecutor) -> None:
    recorder: Recorder[int] = Recorder()
    Flow.range(0, 10).subscribe_on(producer).subscribe(recorder)
    producer.submit(lambda: None).result(10)
    recorder.request(-1)
    recorder.wait()
    assert isinstance(recorder.errors[0], ValueError)


def test_across_two_threads_in_order(
    producer: ThreadPoolExecutor, executor: ThreadPoolExecutor
) -> None:
    flow = Flow.range(0, 20_000).subscribe_on(producer).map(lambda x: x * 2)
    result = flow.publish_on(executor, prefetch=64).filter(lambda x: x % 4 == 0).to_list(timeout=30)
    assert result == [x * 2 for x in range(20_000) if (x * 2) % 4 == 0]


def test_blocking_iteration_across_threads(executor: ThreadPoolExecutor) -> None:
    iterator = Flow.range(0, 3000).publish_on(executor, prefetch=8).iterate(prefetch=8, timeout=10)
    assert list(iterator) == list(range(3000))
    assert iterator.high_water_mark <= 8


def test_asyncio_loop_as_executor() -> None:
    async def main() -> list[Any]:
        loop = asyncio.get_running_loop()
        received: list[int] = []
        done = asyncio.Event()
        threads: set[int] = set()

        def on_next(x: int) -> None:
            threads.add(threading.get_ident())
            received.append(x)

        Flow.range(0, 1000).publish_on(loop, prefetch=16).subscribe(
            on_next=on_next, on_complete=done.set
        )
        await asyncio.wait_for(done.wait(), 10)
        return [received, threads == {threading.get_ident()}]

    received, on_loop_thread = asyncio.run(main())
    assert received == list(range(1000))
    assert on_loop_thread


def test_async_for_over_a_flow() -> None:
    async def main() -> list[int]:
        return [x async for x in Flow.range(0, 1000).map(lambda x: x * 2)]

    assert asyncio.run(main()) == [x * 2 for x in range(1000)]


def test_async_iteration_is_bounded_and_cancellable() -> None:
    source: ManualPublisher[int] = ManualPublisher()

    async def main() -> int:
        async with Flow.from_publisher(source).aiter(prefetch=4) as elements:
            source.next(1)
            return await elements.__anext__()

    assert asyncio.run(main()) == 1
    assert source.subscription.requests == [4]
    assert source.subscription.cancelled == 1


def test_from_async_iterable_through_operators() -> None:
    async def numbers() -> Any:
        for x in range(20):
            await asyncio.sleep(0)
            yield x

    async def main() -> list[int]:
        flow = Flow.from_async_iterable(numbers()).filter(lambda x: x % 2 == 0).take(5)
        return [x async for x in flow]

    assert asyncio.run(main()) == [0, 2, 4, 6, 8]
