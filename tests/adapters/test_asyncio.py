"""The asyncio bridges: to_async_iterator and from_async_iterable."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

import pytest

from reactive_streams import (
    ExecutorRejectedError,
    Flow,
    ProtocolViolationError,
    Publisher,
    SourceCancelledError,
    Subscriber,
    Subscription,
)
from reactive_streams.adapters import _async_iterator
from reactive_streams.adapters.asyncio import from_async_iterable, to_async_iterator
from reactive_streams.reference import ExecutorIterablePublisher, IterablePublisher, RangePublisher
from reactive_streams.testing import RecordingSubscriber, collect

TIMEOUT = 10.0


class _DemandRecorder(Publisher[int]):
    """A publisher on a foreign thread that records every request it receives."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.requests: list[int] = []
        self.cancelled = threading.Event()
        self.max_outstanding = 0

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        recorder = self
        lock = threading.Lock()
        state = {"demand": 0, "next": 0, "running": False}

        def pump() -> None:
            while True:
                with lock:
                    if (
                        recorder.cancelled.is_set()
                        or state["demand"] == 0
                        or state["next"] >= recorder.total
                    ):
                        state["running"] = False
                        done = state["next"] >= recorder.total and not recorder.cancelled.is_set()
                        break
                    state["demand"] -= 1
                    element = state["next"]
                    state["next"] += 1
                subscriber.on_next(element)
            if done:
                subscriber.on_complete()

        class _Subscription(Subscription):
            def request(self, n: int) -> None:
                with lock:
                    recorder.requests.append(n)
                    state["demand"] += n
                    recorder.max_outstanding = max(recorder.max_outstanding, state["demand"])
                    start = not state["running"]
                    state["running"] = True
                if start:
                    threading.Thread(target=pump, daemon=True).start()

            def cancel(self) -> None:
                recorder.cancelled.set()

        subscriber.on_subscribe(_Subscription())


def test_to_async_iterator_reads_a_whole_stream() -> None:
    async def main() -> list[int]:
        async with to_async_iterator(RangePublisher(0, 1000), prefetch=16) as elements:
            return [element async for element in elements]

    assert asyncio.run(main()) == list(range(1000))


def test_prefetch_bounds_demand_and_replenishes_at_three_quarters() -> None:
    publisher = _DemandRecorder(100)

    async def main() -> list[int]:
        async with to_async_iterator(publisher, prefetch=8) as elements:
            return [element async for element in elements]

    assert asyncio.run(main()) == list(range(100))
    assert publisher.requests[0] == 8
    assert set(publisher.requests[1:]) == {6}  # 75% of 8, each time that many were consumed
    assert publisher.max_outstanding <= 8


def test_publisher_signalling_from_a_foreign_thread(executor: ThreadPoolExecutor) -> None:
    async def main() -> tuple[list[int], set[int]]:
        loop_thread = threading.get_ident()
        seen: set[int] = set()
        elements = []
        async with to_async_iterator(
            ExecutorIterablePublisher(range(5000), executor, batch_size=32), prefetch=64
        ) as it:
            async for element in it:
                seen.add(threading.get_ident())
                elements.append(element)
        assert seen == {loop_thread}
        return elements, seen

    elements, _ = asyncio.run(main())
    assert elements == list(range(5000))


@pytest.mark.rule("2.6")
def test_leaving_early_cancels_the_subscription() -> None:
    publisher = _DemandRecorder(1_000_000)

    async def main() -> list[int]:
        taken = []
        async with to_async_iterator(publisher, prefetch=16) as elements:
            async for element in elements:
                taken.append(element)
                if element == 20:
                    break
        return taken

    assert asyncio.run(main()) == list(range(21))
    assert publisher.cancelled.wait(TIMEOUT)
    assert sum(publisher.requests) <= 21 + 16


def test_on_error_is_raised_after_the_elements_before_it() -> None:
    def failing() -> object:
        yield 1
        yield 2
        raise LookupError("source failed")

    received: list[int] = []

    async def main() -> None:
        publisher: IterablePublisher[int] = IterablePublisher(failing())  # type: ignore[arg-type]
        async for element in to_async_iterator(publisher, prefetch=4):
            received.append(element)

    with pytest.raises(LookupError, match="source failed"):
        asyncio.run(main())
    assert received == [1, 2]


@pytest.mark.rule("1.1")
def test_a_publisher_that_ignores_demand_is_reported() -> None:
    class Flooding(Publisher[int]):
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            class _Subscription(Subscription):
                def request(self, n: int) -> None:
                    pass

                def cancel(self) -> None:
                    pass

            subscriber.on_subscribe(_Subscription())
            for element in range(10):  # never asked for this many
                subscriber.on_next(element)

    async def main() -> None:
        with pytest.raises(ProtocolViolationError, match=r"^Rule 1\.1: "):
            async for _ in to_async_iterator(Flooding(), prefetch=4):
                pass

    asyncio.run(main())


def test_prefetch_is_validated() -> None:
    with pytest.raises(ValueError, match=r"^prefetch must be positive, got 0$"):
        to_async_iterator(RangePublisher(0, 1), prefetch=0)
    with pytest.raises(TypeError, match=r"^prefetch must be an int, got float$"):
        to_async_iterator(RangePublisher(0, 1), prefetch=1.5)  # type: ignore[arg-type]


async def _count(limit: int, closed: threading.Event | None = None) -> AsyncIterator[int]:
    try:
        for value in range(limit):
            yield value
    finally:
        if closed is not None:
            closed.set()


def test_from_async_iterable_from_plain_threads_uses_a_private_loop() -> None:
    before = threading.active_count()
    assert collect(from_async_iterable(_count(50))) == list(range(50))
    for _ in range(100):  # the private loop thread ends with the stream
        if threading.active_count() <= before:
            break
        threading.Event().wait(0.02)
    assert threading.active_count() <= before


def test_from_async_iterable_pulls_one_item_per_unit_of_demand() -> None:
    pulled: list[int] = []

    async def source() -> AsyncIterator[int]:
        for value in range(100):
            pulled.append(value)
            yield value

    subscriber: RecordingSubscriber[int] = RecordingSubscriber()
    from_async_iterable(source()).subscribe(subscriber)
    for _ in range(500):
        if subscriber.subscription is not None:
            break
        threading.Event().wait(0.01)
    subscriber.request(3)
    assert subscriber.wait_for_elements(3, TIMEOUT)
    assert not subscriber.wait_for_elements(4, 0.1)
    assert pulled == [0, 1, 2]  # never runs ahead
    subscriber.cancel()


def test_from_async_iterable_on_a_running_loop_with_requests_from_a_thread() -> None:
    async def main() -> list[int]:
        subscriber: RecordingSubscriber[int] = RecordingSubscriber()
        from_async_iterable(_count(30)).subscribe(subscriber)
        while subscriber.subscription is None:
            await asyncio.sleep(0)
        # 31: the end of the source is discovered only by awaiting one more item.
        requester = threading.Thread(target=subscriber.request, args=(31,))
        requester.start()
        requester.join(TIMEOUT)
        for _ in range(int(TIMEOUT / 0.001)):
            if subscriber.terminated:
                break
            await asyncio.sleep(0.001)
        assert subscriber.violations == []
        return subscriber.elements

    assert asyncio.run(main()) == list(range(30))


def test_from_async_iterable_cancel_closes_the_generator() -> None:
    closed = threading.Event()
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=5)
    from_async_iterable(_count(1_000_000, closed)).subscribe(subscriber)
    assert subscriber.wait_for_elements(5, TIMEOUT)
    subscriber.cancel()
    assert closed.wait(TIMEOUT)
    assert not subscriber.terminated


@pytest.mark.rule("3.9")
def test_from_async_iterable_bad_request_signals_value_error() -> None:
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=0)
    from_async_iterable(_count(5)).subscribe(subscriber)
    for _ in range(500):
        if subscriber.subscription is not None:
            break
        threading.Event().wait(0.01)
    subscriber.request(-1)
    assert subscriber.wait_terminated(TIMEOUT)
    assert isinstance(subscriber.error, ValueError)


def test_from_async_iterable_failure_becomes_on_error() -> None:
    async def failing() -> AsyncIterator[int]:
        yield 1
        raise ConnectionError("socket closed")

    subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=10)
    from_async_iterable(failing()).subscribe(subscriber)
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.elements == [1]
    assert isinstance(subscriber.error, ConnectionError)


def test_a_task_cancelled_by_someone_else_ends_with_source_cancelled_error() -> None:
    started = threading.Event()

    async def blocking() -> AsyncIterator[int]:
        started.set()
        await asyncio.Event().wait()  # never set
        yield 1

    async def main() -> RecordingSubscriber[int]:
        subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=1)
        from_async_iterable(blocking()).subscribe(subscriber)
        while not started.is_set():
            await asyncio.sleep(0)
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()  # as a loop shutdown would
        await asyncio.sleep(0.01)
        return subscriber

    subscriber = asyncio.run(main())
    assert subscriber.wait_terminated(TIMEOUT)
    assert isinstance(subscriber.error, SourceCancelledError)


def test_from_async_iterable_rejects_non_async_iterables() -> None:
    with pytest.raises(TypeError, match="needs an async iterable"):
        from_async_iterable([1, 2, 3])  # type: ignore[arg-type]


# -- upstream work runs off the event loop ----------------------------------------------


def _slow(value: int) -> int:
    time.sleep(0.01)  # blocking work in a user function, as a stand-in for I/O or CPU
    return value


async def _ticks_while(consume: Callable[[], Awaitable[list[int]]]) -> tuple[list[int], int, float]:
    """Run ``consume`` beside a 1 ms ticker; return its result, the ticks and the seconds."""
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            await asyncio.sleep(0.001)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    start = time.perf_counter()
    elements = await consume()
    seconds = time.perf_counter() - start
    stop.set()
    await ticking
    return elements, ticks, seconds


def test_a_blocking_upstream_does_not_block_the_event_loop() -> None:
    async def consume() -> list[int]:
        return [x async for x in to_async_iterator(Flow.range(0, 30).map(_slow))]

    elements, ticks, seconds = asyncio.run(_ticks_while(consume))
    assert elements == list(range(30))
    # About one tick per millisecond when the loop is free; 0 to 3 in all when map(f) ran
    # on the loop thread. A tenth of the expectation leaves room for a loaded machine.
    assert ticks >= seconds * 1000 / 10, (ticks, seconds)


def test_non_blocking_calls_upstream_on_the_loop_thread_and_the_default_does_not() -> None:
    async def threads(*, non_blocking: bool = False) -> set[int]:
        seen: set[int] = set()

        def record(value: int) -> int:
            seen.add(threading.get_ident())
            return value

        source = Flow.range(0, 100).map(record)
        assert [
            x async for x in to_async_iterator(source, prefetch=8, non_blocking=non_blocking)
        ] == list(range(100))
        return seen

    async def main() -> None:
        loop_thread = threading.get_ident()
        assert loop_thread not in await threads()
        assert await threads(non_blocking=True) == {loop_thread}

    asyncio.run(main())


def test_a_given_executor_runs_the_upstream_calls(executor: ThreadPoolExecutor) -> None:
    names: set[str] = set()

    def record(value: int) -> int:
        names.add(threading.current_thread().name)
        return value

    async def main() -> list[int]:
        iterator = to_async_iterator(Flow.range(0, 50).map(record), executor=executor)
        return [x async for x in iterator]

    assert asyncio.run(main()) == list(range(50))
    assert names and all(name.startswith("test") for name in names)


def test_executor_and_non_blocking_are_exclusive(executor: ThreadPoolExecutor) -> None:
    with pytest.raises(ValueError, match="not both"):
        to_async_iterator(RangePublisher(0, 1), executor=executor, non_blocking=True)
    with pytest.raises(TypeError, match=r"^executor must be a concurrent\.futures\.Executor"):
        to_async_iterator(RangePublisher(0, 1), executor="pool")  # type: ignore[arg-type]


@pytest.mark.parametrize("non_blocking", [False, True])
@pytest.mark.parametrize("prefetch", [1, 3, 256])
def test_every_element_in_order_whatever_the_path(non_blocking: bool, prefetch: int) -> None:
    async def main() -> list[int]:
        iterator = to_async_iterator(
            RangePublisher(0, 2000), prefetch=prefetch, non_blocking=non_blocking
        )
        return [x async for x in iterator]

    assert asyncio.run(main()) == list(range(2000))


def test_anext_and_async_for_share_the_buffered_elements() -> None:
    async def main() -> tuple[list[int], list[int]]:
        async with to_async_iterator(RangePublisher(0, 100), prefetch=16) as iterator:
            first = [await anext(iterator) for _ in range(5)]
            rest = [x async for x in iterator]
        return first, rest

    first, rest = asyncio.run(main())
    assert first + rest == list(range(100))


@pytest.mark.rule("3.16")
def test_an_upstream_request_that_raises_ends_the_stream_and_cancels() -> None:
    cancelled = threading.Event()

    class Raising(Publisher[int]):
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            class _Subscription(Subscription):
                def request(self, n: int) -> None:
                    raise RuntimeError("broken request")

                def cancel(self) -> None:
                    cancelled.set()

            subscriber.on_subscribe(_Subscription())

    async def main() -> None:
        with pytest.raises(ProtocolViolationError, match=r"^Rule 3\.16: .*broken request"):
            async for _ in to_async_iterator(Raising()):
                pass

    asyncio.run(main())
    assert cancelled.wait(TIMEOUT)


@pytest.mark.rule("1.9")
def test_a_subscribe_that_raises_ends_the_stream() -> None:
    class Raising(Publisher[int]):
        def subscribe(self, subscriber: Subscriber[int]) -> None:
            raise RuntimeError("broken subscribe")

    async def main() -> None:
        with pytest.raises(ProtocolViolationError, match=r"^Rule 1\.9: .*broken subscribe"):
            await anext(to_async_iterator(Raising()))

    asyncio.run(main())


# -- leaving `async for` early cancels upstream -----------------------------------------


@pytest.mark.parametrize("how", ["break", "raise", "cancel task"])
@pytest.mark.parametrize("through", ["Flow", "to_async_iterator"])
def test_leaving_async_for_early_cancels_a_thread_driven_source(how: str, through: str) -> None:
    publisher = _DemandRecorder(10**9)

    async def consume(started: asyncio.Event) -> None:
        iterable = (
            Flow.from_publisher(publisher)
            if through == "Flow"
            else to_async_iterator(publisher, prefetch=16)
        )
        async for element in iterable:
            started.set()
            if how == "break" and element == 20:
                break
            if how == "raise" and element == 20:
                raise LookupError("consumer failed")
            if how == "cancel task":
                await asyncio.sleep(0)

    async def main() -> None:
        started = asyncio.Event()
        task = asyncio.create_task(consume(started))
        await asyncio.wait_for(started.wait(), TIMEOUT)
        if how == "cancel task":
            task.cancel()
        with contextlib.suppress(LookupError, asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert publisher.cancelled.wait(TIMEOUT)


def test_an_executor_that_refuses_the_lane_ends_the_stream() -> None:
    pool = ThreadPoolExecutor(1)
    pool.shutdown()

    async def main() -> None:
        with pytest.raises(ExecutorRejectedError):
            async with to_async_iterator(RangePublisher(0, 10), executor=pool) as iterator:
                await anext(iterator)

    asyncio.run(main())


# -- a loop closed under from_async_iterable ---------------------------------------------


@pytest.mark.parametrize("then_request", [True, False])
def test_closing_the_loop_without_cancelling_tasks_ends_the_stream(then_request: bool) -> None:
    async def never() -> AsyncIterator[int]:
        await asyncio.Event().wait()
        yield 1

    loop = asyncio.new_event_loop()
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=1)
    try:
        from_async_iterable(never(), loop=loop).subscribe(subscriber)
        loop.run_until_complete(asyncio.sleep(0.01))  # on_subscribe, the pump waits
        assert subscriber.subscription is not None
    finally:
        loop.close()  # no task was cancelled: the pump stays suspended for good
    if then_request:
        subscriber.request(1)
    assert subscriber.wait_terminated(TIMEOUT)
    assert isinstance(subscriber.error, SourceCancelledError)
    assert subscriber.violations == []


def test_a_loop_closed_before_it_ran_anything_still_signals_on_subscribe_first() -> None:
    loop = asyncio.new_event_loop()
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=1)
    from_async_iterable(_count(3), loop=loop).subscribe(subscriber)
    loop.close()  # the first pass (on_subscribe) was queued there and can never run
    assert subscriber.wait_terminated(TIMEOUT)
    assert subscriber.subscription is not None  # Rule 1.9: on_subscribe before on_error
    assert isinstance(subscriber.error, SourceCancelledError)
    assert subscriber.violations == []


class _StallingPublisher(Publisher[int]):
    """Emits ``0, 1, 2`` inside one ``request`` call, blocking after each until it was seen.

    A synchronous source that stalls in the middle of a demand (a blocking read): the
    adapter must not hold an element back until the ``request`` call returns, neither the
    first (within the wake-up deferral) nor a later one (after it).
    """

    def __init__(self) -> None:
        self.seen = [threading.Event() for _ in range(3)]
        self.stalled_out = False

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        publisher = self
        emitted = 0

        class _Subscription(Subscription):
            def request(self, n: int) -> None:
                nonlocal emitted
                if emitted:
                    return
                emitted = 1
                for element, seen in enumerate(publisher.seen):
                    subscriber.on_next(element)
                    # Without a bounded wake-up deferral, the consumer only hears of the
                    # element when this call returns, so ``seen`` stays unset until the
                    # timeout.
                    publisher.stalled_out |= not seen.wait(TIMEOUT)
                subscriber.on_complete()

            def cancel(self) -> None:
                for seen in publisher.seen:
                    seen.set()

        subscriber.on_subscribe(_Subscription())


def test_an_element_emitted_before_upstream_stalls_reaches_the_consumer() -> None:
    publisher = _StallingPublisher()

    async def main() -> list[int]:
        elements = []
        async for x in to_async_iterator(publisher, prefetch=4):
            elements.append(x)
            publisher.seen[x].set()
        return elements

    assert asyncio.run(main()) == [0, 1, 2]
    assert not publisher.stalled_out, "an element waited for the whole request call"


def test_elements_of_one_request_call_wake_the_consumer_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fast synchronous publisher: one wake-up per ``request`` call, not per element."""
    wakes = 0
    resolve = _async_iterator._resolve

    def counting_resolve(waiter: asyncio.Future[None]) -> None:
        nonlocal wakes
        wakes += 1
        resolve(waiter)

    monkeypatch.setattr(_async_iterator, "_resolve", counting_resolve)

    async def main() -> list[int]:
        return [x async for x in to_async_iterator(RangePublisher(0, 4096), prefetch=256)]

    assert asyncio.run(main()) == list(range(4096))
    # 4096 elements come in 22 request calls (256, then 192 each); the deferral may lapse
    # on a loaded machine and add a few wake-ups, but never one per element.
    assert wakes < 4096 // 8, wakes


def test_the_lane_serves_a_stream_s_requests_in_one_task_and_ends_with_it(
    executor: ThreadPoolExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor lane waits for the consumer's next request instead of a new task."""
    monkeypatch.setattr(_async_iterator, "_LANE_LINGER", 60.0)
    tasks: list[Future[Any]] = []

    class Counting(Executor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
            future = executor.submit(fn, *args, **kwargs)
            tasks.append(future)
            return future

    async def main() -> list[int]:
        iterator = to_async_iterator(RangePublisher(0, 4096), prefetch=256, executor=Counting())
        return [x async for x in iterator]

    assert asyncio.run(main()) == list(range(4096))
    assert len(tasks) == 1  # 22 request calls (256, then 192 each), one task
    tasks[0].result(timeout=TIMEOUT / 2)  # the end of the stream let the lane go at once


def test_elements_of_a_lane_call_take_no_lock_each() -> None:
    """The lane's elements go into the buffer without the adapter's lock (see on_next)."""

    class CountingLock:
        def __init__(self) -> None:
            self.inner = threading.Lock()
            self.acquisitions = 0

        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            got = self.inner.acquire(blocking, timeout)
            self.acquisitions += got  # counted while held
            return got

        def release(self) -> None:
            self.inner.release()

        def __enter__(self) -> bool:
            return self.acquire()

        def __exit__(self, *exc_info: object) -> None:
            self.release()

    lock = CountingLock()

    async def main() -> list[int]:
        iterator = to_async_iterator(RangePublisher(0, 4096), prefetch=256)
        iterator._lock = lock  # type: ignore[assignment]
        return [x async for x in iterator]

    assert asyncio.run(main()) == list(range(4096))
    # A few acquisitions per batch of 192 (the consumer's refills, the lane's passes),
    # against one per element when every on_next takes the lock; a call that outlives the
    # wake-up deferral on a loaded machine takes it for its later elements.
    assert lock.acquisitions < 4096 // 2, lock.acquisitions
