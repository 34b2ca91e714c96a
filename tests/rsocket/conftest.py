"""Fixtures for the RSocket tests: our server, rsocket-py as a peer, tracked publishers."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

import pytest

from reactive_streams import Publisher, Subscriber, Subscription
from reactive_streams.reference import IterablePublisher
from reactive_streams.rsocket import RSocketServer, serve

TIMEOUT = 10.0


def numbered(count: int | None) -> Iterable[bytes]:
    """``b"item-0", b"item-1", ...``: ``count`` of them, or for ever."""
    numbers: Iterable[int] = itertools.count() if count is None else range(count)
    return (b"item-%d" % number for number in numbers)


def items_route(data: bytes) -> Publisher[bytes]:
    """The ``items`` route: ``int(data)`` numbered elements (10 without data)."""
    return IterablePublisher(list(numbered(int(data or b"10"))))


class TrackedPublisher(Publisher[bytes]):
    """An endless numbered publisher that records what its subscriber requested and cancels."""

    def __init__(self) -> None:
        self.requested: list[int] = []
        self.cancelled = threading.Event()
        self.subscribed = threading.Event()
        self._inner = IterablePublisher(_Endless())

    def subscribe(self, subscriber: Subscriber[bytes]) -> None:
        tracker = self

        class _Tap(Subscriber[bytes]):
            def on_subscribe(self, subscription: Subscription) -> None:
                subscriber.on_subscribe(_TapSubscription(subscription, tracker))
                tracker.subscribed.set()

            def on_next(self, element: bytes) -> None:
                subscriber.on_next(element)

            def on_error(self, error: Exception) -> None:
                subscriber.on_error(error)

            def on_complete(self) -> None:
                subscriber.on_complete()

        self._inner.subscribe(_Tap())


class _Endless:
    def __iter__(self) -> Iterator[bytes]:
        return iter(numbered(None))


class _TapSubscription(Subscription):
    def __init__(self, inner: Subscription, tracker: TrackedPublisher) -> None:
        self._inner = inner
        self._tracker = tracker

    def request(self, n: int) -> None:
        self._tracker.requested.append(n)
        self._inner.request(n)

    def cancel(self) -> None:
        self._tracker.cancelled.set()
        self._inner.cancel()


@pytest.fixture
def tracked() -> TrackedPublisher:
    return TrackedPublisher()


@pytest.fixture
def server(tracked: TrackedPublisher) -> Iterator[RSocketServer]:
    def boom(data: bytes) -> Publisher[bytes]:
        raise RuntimeError("the factory failed on purpose")

    routes: dict[str, Callable[[bytes], Publisher[bytes]]] = {
        "items": items_route,
        "tracked": lambda data: tracked,
        "boom": boom,
    }
    with serve(routes) as running:
        yield running


class PeerThread:
    """An asyncio loop on a thread, for running rsocket-py servers next to our code."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Any, timeout: float = TIMEOUT) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        async def _drain() -> None:
            tasks = [
                task
                for task in asyncio.all_tasks()
                if task is not asyncio.current_task() and not task.done()
            ]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.loop.shutdown_asyncgens()

        self.run(_drain())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(TIMEOUT)
        self.loop.close()


@pytest.fixture
def peer_thread() -> Iterator[PeerThread]:
    thread = PeerThread()
    try:
        yield thread
    finally:
        thread.close()


async def single_transport(transport: Any) -> AsyncIterator[Any]:
    """rsocket-py's client takes an async iterator of transports; we give it one."""
    yield transport
