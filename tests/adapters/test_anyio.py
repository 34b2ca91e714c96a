"""reactive_streams.adapters.anyio on both backends: asyncio and trio."""

from __future__ import annotations

import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from anyio.streams.memory import MemoryObjectReceiveStream

from reactive_streams import Publisher, Subscriber, Subscription
from reactive_streams.adapters.anyio import from_receive_stream, to_receive_stream
from reactive_streams.operators import Flow
from reactive_streams.tck import PublisherVerification
from reactive_streams.testing import RecordingSubscriber

TIMEOUT = 10.0

BACKENDS = ["asyncio", "trio"]


def run(backend: str, main: Callable[[], Awaitable[None]]) -> None:
    async def with_timeout() -> None:
        with anyio.fail_after(TIMEOUT):
            await main()

    anyio.run(with_timeout, backend=backend)


async def wait_for(predicate: Callable[[], bool]) -> None:
    """Poll ``predicate`` from the loop (the subscriber's signals come from a worker)."""
    while not predicate():
        await anyio.sleep(0.001)


class _Spy(Publisher[Any]):
    """Records requests (and the threads they came from) and the cancel."""

    def __init__(self, source: Publisher[Any]) -> None:
        self._source = source
        self.requests: list[int] = []
        self.threads: set[int] = set()
        self.cancelled = threading.Event()
        self.subscribe_thread = 0

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        self.subscribe_thread = threading.get_ident()
        spy = self

        class Link(Subscriber[Any], Subscription):
            def on_subscribe(self, subscription: Subscription) -> None:
                self._inner = subscription
                subscriber.on_subscribe(self)

            def on_next(self, element: Any) -> None:
                subscriber.on_next(element)

            def on_error(self, error: Exception) -> None:
                subscriber.on_error(error)

            def on_complete(self) -> None:
                subscriber.on_complete()

            def request(self, n: int) -> None:
                spy.requests.append(n)
                spy.threads.add(threading.get_ident())
                self._inner.request(n)

            def cancel(self) -> None:
                spy.cancelled.set()
                self._inner.cancel()

        self._source.subscribe(Link())


# ---------------------------------------------------------------- Publisher -> receive stream
@pytest.mark.parametrize("backend", BACKENDS)
def test_to_receive_stream_round_trip_is_exact(backend: str) -> None:
    data = list(range(5000))
    received: list[int] = []

    async def main() -> None:
        async with to_receive_stream(Flow.from_iterable(data), max_buffer_size=64) as stream:
            assert isinstance(stream, MemoryObjectReceiveStream)
            async for element in stream:
                received.append(element)

    run(backend, main)
    assert received == data


@pytest.mark.parametrize("backend", BACKENDS)
def test_to_receive_stream_buffer_is_the_demand(backend: str) -> None:
    spy = _Spy(Flow.range(0, 100))
    loop_thread = [0]
    fills: list[int] = []

    async def main() -> None:
        loop_thread[0] = threading.get_ident()
        async with to_receive_stream(spy, max_buffer_size=8) as stream:
            assert stream.statistics().max_buffer_size == 8
            await wait_for(lambda: stream.statistics().current_buffer_used == 8)
            fills.append(stream.statistics().current_buffer_used)
            async for _element in stream:
                fills.append(stream.statistics().current_buffer_used)

    run(backend, main)
    assert spy.requests[0] == 8
    assert set(spy.requests[1:]) == {6}  # replenish_threshold(8)
    assert sum(spy.requests) >= 100
    assert max(fills) <= 8
    # upstream work (subscribe, request, and the range producing inside request) is off-loop
    assert loop_thread[0] not in spy.threads
    assert spy.subscribe_thread != loop_thread[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_leaving_the_block_cancels(backend: str) -> None:
    spy = _Spy(Flow.interval(0.001).on_backpressure_drop())

    async def main() -> None:
        async with to_receive_stream(spy, max_buffer_size=4) as stream:
            first = await stream.receive()  # ticks before the first request are dropped
            assert await stream.receive() > first

    run(backend, main)
    assert spy.cancelled.wait(TIMEOUT)


@pytest.mark.parametrize("backend", BACKENDS)
def test_upstream_error_is_raised_when_the_block_is_left(backend: str) -> None:
    received: list[int] = []

    async def main() -> None:
        flow = Flow.concat(Flow.range(0, 3), Flow.error(KeyError("upstream")))
        async with to_receive_stream(flow, max_buffer_size=2) as stream:
            async for element in stream:
                received.append(element)

    with pytest.raises(KeyError, match="upstream"):
        run(backend, main)
    assert received == [0, 1, 2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_to_receive_stream_checks_its_bound(backend: str) -> None:
    async def main() -> None:
        with pytest.raises(ValueError, match=r"^max_buffer_size must be positive, got 0$"):
            async with to_receive_stream(Flow.empty(), max_buffer_size=0):
                pass

    run(backend, main)


# ---------------------------------------------------------------- receive stream -> Publisher
@pytest.mark.parametrize("backend", BACKENDS)
def test_from_receive_stream_round_trip_is_exact(backend: str) -> None:
    data = list(range(3000))
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=10**9)

    async def main() -> None:
        send, receive = anyio.create_memory_object_stream[int](16)
        from_receive_stream(receive).subscribe(subscriber)
        async with send:
            for element in data:
                await send.send(element)
        await wait_for(lambda: subscriber.terminated)

    run(backend, main)
    assert subscriber.elements == data
    assert subscriber.completed


@pytest.mark.parametrize("backend", BACKENDS)
def test_from_receive_stream_pulls_only_on_demand(backend: str) -> None:
    loop_thread = [0]
    on_next_threads: set[int] = set()

    class Watching(RecordingSubscriber[int]):
        def on_next(self, element: int) -> None:
            on_next_threads.add(threading.get_ident())
            super().on_next(element)

    subscriber = Watching(initial_request=3)

    async def main() -> None:
        loop_thread[0] = threading.get_ident()
        send, receive = anyio.create_memory_object_stream[int](100)
        for element in range(10):
            send.send_nowait(element)
        from_receive_stream(receive).subscribe(subscriber)
        await wait_for(lambda: len(subscriber.elements) == 3)
        # demand pulls: three delivered, one held to look ahead for the end of the stream
        await wait_for(lambda: receive.statistics().current_buffer_used == 6)
        subscriber.request(7)  # from the loop thread: returns at once
        await wait_for(lambda: len(subscriber.elements) == 10)
        send.close()
        await wait_for(lambda: subscriber.terminated)

    run(backend, main)
    assert subscriber.elements == list(range(10))
    assert loop_thread[0] not in on_next_threads


@pytest.mark.parametrize("backend", BACKENDS)
def test_cancel_interrupts_a_pending_receive_and_closes_the_stream(backend: str) -> None:
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=5)

    async def main() -> None:
        send, receive = anyio.create_memory_object_stream[int](4)
        from_receive_stream(receive).subscribe(subscriber)
        await send.send(1)
        await wait_for(lambda: subscriber.elements == [1])
        assert subscriber.subscription is not None
        subscriber.subscription.cancel()  # the worker is waiting in receive()
        await wait_for(lambda: send.statistics().open_receive_streams == 0)
        with pytest.raises(anyio.BrokenResourceError):
            send.send_nowait(2)
        send.close()

    run(backend, main)
    assert not subscriber.terminated


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_request_is_signalled_while_waiting(backend: str) -> None:
    subscriber: RecordingSubscriber[int] = RecordingSubscriber(initial_request=1)

    async def main() -> None:
        send, receive = anyio.create_memory_object_stream[int](4)
        from_receive_stream(receive).subscribe(subscriber)
        await anyio.sleep(0.01)  # let the worker start waiting (the test passes either way)
        assert subscriber.subscription is not None
        subscriber.subscription.request(0)
        await wait_for(lambda: subscriber.terminated)
        send.close()

    run(backend, main)
    assert isinstance(subscriber.error, ValueError)
    assert str(subscriber.error).startswith("Rule 3.9")


@pytest.mark.parametrize("backend", BACKENDS)
def test_second_subscriber_is_refused(backend: str) -> None:
    second: RecordingSubscriber[int] = RecordingSubscriber(initial_request=1)

    async def main() -> None:
        send, receive = anyio.create_memory_object_stream[int](4)
        publisher = from_receive_stream(receive)
        first: RecordingSubscriber[int] = RecordingSubscriber()
        publisher.subscribe(first)
        publisher.subscribe(second)
        assert first.subscription is not None
        first.subscription.cancel()
        await wait_for(lambda: send.statistics().open_receive_streams == 0)
        send.close()

    run(backend, main)
    assert isinstance(second.error, RuntimeError)


@pytest.mark.parametrize("backend", BACKENDS)
def test_both_directions_round_trip(backend: str) -> None:
    data = [f"x{i}" for i in range(2000)]
    received: list[str] = []

    async def main() -> None:
        send, receive = anyio.create_memory_object_stream[str](32)

        async def produce() -> None:
            async with send:
                for element in data:
                    await send.send(element)

        async with anyio.create_task_group() as group:
            group.start_soon(produce)
            publisher = from_receive_stream(receive)
            async with to_receive_stream(publisher, max_buffer_size=16) as stream:
                async for element in stream:
                    received.append(element)

    run(backend, main)
    assert received == data


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_clone_of_the_stream_replenishes_too(backend: str) -> None:
    """Pins the one use of anyio's private ``_state``: clones share the buffer and demand."""
    received: list[int] = []

    async def main() -> None:
        async with to_receive_stream(Flow.range(0, 50), max_buffer_size=4) as stream:
            with stream.clone() as twin:
                async for element in twin:
                    received.append(element)

    run(backend, main)
    assert received == list(range(50))


# ---------------------------------------------------------------- the TCK
# The TCK stops each test's event loop (the portal) under subscriptions that may still be
# live; anyio then warns about the coroutine it could not schedule for our worker thread.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
class TestFromReceiveStream(PublisherVerification):
    """``from_receive_stream`` over a memory stream holding the elements, on a portal's loop."""

    max_elements_from_publisher = 1024

    def _portal(self) -> BlockingPortal:
        manager = start_blocking_portal()
        portal = manager.__enter__()
        self.add_cleanup(lambda: manager.__exit__(None, None, None))
        return portal

    def create_publisher(self, elements: int) -> Publisher[Any]:
        async def make() -> Publisher[Any]:
            send, receive = anyio.create_memory_object_stream[int](max(elements, 1))
            with send:
                for element in range(elements):
                    send.send_nowait(element)
            self.add_cleanup(receive.close)  # a test that never subscribes leaves it open
            return from_receive_stream(receive)

        return self._portal().call(make)

    def create_failed_publisher(self) -> Publisher[Any] | None:
        async def make() -> Publisher[Any]:
            send, receive = anyio.create_memory_object_stream[int](1)
            receive.close()
            send.close()
            return from_receive_stream(receive)  # receive raises ClosedResourceError

        publisher: Publisher[Any] = self._portal().call(make)
        return publisher


def test_without_anyio_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anyio", None)
    hint = (
        r"^reactive_streams.adapters.anyio needs anyio: pip install 'reactive-streams-py\[anyio\]'$"
    )
    with pytest.raises(ImportError, match=hint):
        from_receive_stream(None)  # type: ignore[arg-type]
