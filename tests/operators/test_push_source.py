"""``Flow.push_source``: offers from callbacks, a bounded buffer, the overflow strategies."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import MAX_DEMAND, MissingBackpressureError, Publisher
from reactive_streams.operators import Flow, OfferResult, PushSource
from reactive_streams.tck import PublisherVerification
from reactive_streams.testing import RecordingSubscriber

WAIT = 10.0  # generous: only to turn a hang into a failure


def _subscribed(flow: Publisher[Any], request: int = 0) -> RecordingSubscriber[Any]:
    subscriber: RecordingSubscriber[Any] = RecordingSubscriber(initial_request=request)
    flow.subscribe(subscriber)
    return subscriber


def test_offers_before_the_subscriber_wait_in_the_buffer_and_complete_follows_them() -> None:
    source, flow = Flow.push_source(3)
    assert [source.try_offer(x) for x in "abc"] == [OfferResult.ENQUEUED] * 3
    assert source.try_offer("d") is OfferResult.FULL
    assert source.complete() is True
    assert source.complete() is False
    assert flow.to_list(timeout=WAIT) == ["a", "b", "c"]
    assert source.try_offer("e") is OfferResult.CLOSED


def test_delivery_follows_demand_and_the_buffer_holds_the_rest() -> None:
    source, flow = Flow.push_source(4)
    subscriber = _subscribed(flow, request=2)
    for x in range(5):
        source.offer(x, timeout=WAIT)
    assert subscriber.elements == [0, 1]
    assert source.statistics().buffered == 3
    subscriber.request(10)
    assert subscriber.elements == [0, 1, 2, 3, 4]
    source.complete()
    assert subscriber.wait_terminated(WAIT)
    assert subscriber.completed
    assert subscriber.violations == []


def test_drop_latest_drops_and_counts_the_new_element() -> None:
    dropped: list[int] = []
    source, flow = Flow.push_source(2, "drop_latest", on_drop=dropped.append)
    subscriber = _subscribed(flow, request=1)
    results = [source.offer(x) for x in range(5)]
    assert results == [OfferResult.ENQUEUED] * 3 + [OfferResult.DROPPED] * 2
    assert dropped == [3, 4]
    assert source.statistics().dropped == 2
    source.complete()
    subscriber.request(10)
    assert subscriber.wait_terminated(WAIT)
    assert subscriber.elements == [0, 1, 2]


def test_drop_oldest_keeps_the_newest_elements() -> None:
    dropped: list[int] = []
    source, flow = Flow.push_source(2, "drop_oldest", on_drop=dropped.append)
    results = [source.offer(x) for x in range(5)]
    assert results == [OfferResult.ENQUEUED] * 5
    assert dropped == [0, 1, 2]
    assert source.statistics().dropped == 3
    assert source.statistics().high_water_mark == 2
    source.complete()
    assert flow.to_list(timeout=WAIT) == [3, 4]


def test_error_strategy_fails_the_stream_at_once_and_closes_the_source() -> None:
    source, flow = Flow.push_source(2, "error")
    subscriber = _subscribed(flow)
    assert [source.offer(x) for x in range(3)] == [
        OfferResult.ENQUEUED,
        OfferResult.ENQUEUED,
        OfferResult.FAILED,
    ]
    assert subscriber.wait_terminated(WAIT)
    assert isinstance(subscriber.error, MissingBackpressureError)
    assert str(subscriber.error) == (
        "push_source: the buffer of 2 elements is full and the overflow strategy is 'error'"
    )
    assert subscriber.elements == []  # no demand: nothing was delivered before the error
    assert source.offer(9) is OfferResult.CLOSED


def test_error_ends_the_stream_without_demand_and_discards_the_buffer() -> None:
    source, flow = Flow.push_source(4)
    subscriber = _subscribed(flow)
    source.offer(1)
    failure = RuntimeError("sensor gone")
    assert source.error(failure) is True
    assert subscriber.wait_terminated(WAIT)
    assert subscriber.error is failure
    assert subscriber.elements == []
    assert source.statistics().buffered == 0
    assert source.error(RuntimeError("again")) is False
    assert source.offer(2) is OfferResult.CLOSED


def test_a_blocking_offer_waits_for_demand() -> None:
    source, flow = Flow.push_source(1)
    subscriber = _subscribed(flow)
    source.offer(0)
    results: list[OfferResult] = []
    producer = threading.Thread(target=lambda: results.append(source.offer(1, timeout=WAIT)))
    producer.start()
    assert not subscriber.wait_for_elements(1, 0.05)  # no demand: nothing, and 1 waits
    subscriber.request(2)
    producer.join(WAIT)
    assert results == [OfferResult.ENQUEUED]
    assert subscriber.elements == [0, 1]


def test_an_offer_times_out_with_full() -> None:
    source, _flow = Flow.push_source(1)
    source.offer(0)
    assert source.offer(1, timeout=0.01) is OfferResult.FULL
    assert source.statistics().buffered == 1


def test_a_cancel_wakes_a_waiting_offer_and_later_offers_are_closed() -> None:
    source, flow = Flow.push_source(1)
    subscriber = _subscribed(flow)
    source.offer(0)
    results: list[OfferResult] = []
    waiting = threading.Thread(target=lambda: results.append(source.offer(1)))  # no timeout
    waiting.start()
    assert not subscriber.wait_for_elements(1, 0.05)
    subscriber.cancel()
    waiting.join(WAIT)
    assert not waiting.is_alive()
    assert results == [OfferResult.CLOSED]
    assert source.closed
    assert source.try_offer(2) is OfferResult.CLOSED
    assert source.statistics().cancelled


def test_an_offer_from_inside_on_next_does_not_wait_for_itself() -> None:
    source, flow = Flow.push_source(1)
    results: list[OfferResult] = []

    class Reoffering(RecordingSubscriber[int]):
        def on_next(self, element: int) -> None:
            super().on_next(element)
            if element < 3:
                results.append(source.offer(element + 10))  # the buffer holds one at most
                results.append(source.offer(element + 20))

    subscriber = Reoffering(initial_request=MAX_DEMAND)
    flow.subscribe(subscriber)
    source.offer(0)
    assert results[:2] == [OfferResult.ENQUEUED, OfferResult.FULL]
    assert subscriber.elements[:2] == [0, 10]


def test_a_second_subscriber_is_refused_with_on_error() -> None:
    source, flow = Flow.push_source(2)
    first = _subscribed(flow, request=1)
    second = _subscribed(flow, request=1)
    assert second.wait_terminated(WAIT)
    assert isinstance(second.error, RuntimeError)
    assert str(second.error).startswith("Rule 1.9: a push source serves one subscriber")
    source.offer(1)
    assert first.elements == [1]


def test_offer_async_awaits_room_without_blocking_the_loop() -> None:
    source, flow = Flow.push_source(1)
    subscriber = _subscribed(flow)

    async def main() -> list[OfferResult]:
        results = [await source.offer_async(0)]
        waiter = asyncio.ensure_future(source.offer_async(1))
        await asyncio.sleep(0)  # the loop runs on while the offer waits
        assert not waiter.done()
        threading.Thread(target=subscriber.request, args=(2,)).start()
        results.append(await asyncio.wait_for(waiter, WAIT))
        results.append(await source.offer_async(2))  # into the buffer: no demand left
        results.append(await source.offer_async(3, timeout=0.01))
        return results

    expected = [OfferResult.ENQUEUED] * 3 + [OfferResult.FULL]
    assert asyncio.run(main()) == expected
    assert subscriber.elements == [0, 1]


def test_offer_async_is_woken_by_a_cancel() -> None:
    source, flow = Flow.push_source(1)
    subscriber = _subscribed(flow)
    source.offer(0)

    async def main() -> OfferResult:
        waiter = asyncio.ensure_future(source.offer_async(1))
        await asyncio.sleep(0)
        threading.Thread(target=subscriber.cancel).start()
        return await asyncio.wait_for(waiter, WAIT)

    assert asyncio.run(main()) is OfferResult.CLOSED


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"^capacity must be positive, got 0$"):
        Flow.push_source(0)
    with pytest.raises(ValueError, match=r"^overflow must be 'backpressure'"):
        Flow.push_source(1, "drop_newest")  # type: ignore[arg-type]
    source, _ = Flow.push_source(1)
    with pytest.raises(TypeError, match=r"^Rule 2\.13: None is never an element"):
        source.offer(None)
    with pytest.raises(ValueError, match=r"^timeout must be >= 0"):
        source.offer(1, timeout=-1)
    with pytest.raises(TypeError, match=r"^error\(\) needs an Exception"):
        source.error("boom")  # type: ignore[arg-type]


def test_metrics_show_the_push_source() -> None:
    source, flow = Flow.push_source(2, "drop_latest")
    mapped = flow.map(lambda x: x + 1)
    for x in range(4):
        source.offer(x)
    source.complete()
    assert mapped.to_list(timeout=WAIT) == [1, 2]
    assert mapped.metrics()["0:push_source"].dropped == 2


# -- several threads at once, under hypothesis -------------------------------------------


class _BoundChecking(RecordingSubscriber[tuple[int, int]]):
    """Checks, at every element, that the source's buffer is within its capacity."""

    def __init__(self, source: PushSource[Any]) -> None:
        super().__init__()
        self.source = source
        self.over_bound: list[int] = []

    def on_next(self, element: tuple[int, int]) -> None:
        buffered = self.source.statistics().buffered
        if buffered > self.source.capacity:
            self.over_bound.append(buffered)
        super().on_next(element)


@settings(max_examples=150, deadline=None)
@given(
    capacity=st.integers(1, 6),
    overflow=st.sampled_from(["backpressure", "drop_latest", "drop_oldest", "error"]),
    producers=st.lists(st.integers(0, 40), min_size=1, max_size=3),
    requests=st.lists(st.integers(1, 8), max_size=12),
)
def test_offers_and_requests_from_several_threads(
    capacity: int, overflow: Any, producers: list[int], requests: list[int]
) -> None:
    dropped: list[tuple[int, int]] = []
    drops_lock = threading.Lock()

    def on_drop(element: tuple[int, int]) -> None:
        with drops_lock:
            dropped.append(element)

    source, flow = Flow.push_source(capacity, overflow, on_drop=on_drop)
    subscriber = _BoundChecking(source)
    flow.subscribe(subscriber)
    results: list[list[OfferResult]] = [[] for _ in producers]

    def produce(producer: int, count: int) -> None:
        for index in range(count):
            results[producer].append(source.offer((producer, index), timeout=WAIT))

    def demand() -> None:
        for n in requests:
            subscriber.request(n)

    threads = [threading.Thread(target=produce, args=pair) for pair in enumerate(producers)]
    threads.append(threading.Thread(target=demand))
    for thread in threads[:-1]:
        thread.start()
    threads[-1].start()
    if overflow == "backpressure":  # the producers wait for demand: give it once requested
        threads[-1].join(WAIT)
        subscriber.request(MAX_DEMAND)
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()
    source.complete()
    subscriber.request(MAX_DEMAND)
    assert subscriber.wait_terminated(WAIT)

    offered = {(p, i) for p, count in enumerate(producers) for i in range(count)}
    received = subscriber.elements
    tally = Counter(result for per_producer in results for result in per_producer)
    statistics = source.statistics()
    assert subscriber.violations == []
    assert subscriber.over_bound == []
    assert statistics.high_water_mark <= capacity
    assert len(received) == len(set(received))  # nothing duplicated
    for producer in range(len(producers)):  # each producer's order is kept
        mine = [index for p, index in received if p == producer]
        assert mine == sorted(mine)
    assert statistics.dropped == len(dropped)
    assert set(received).isdisjoint(dropped)
    if overflow == "error":
        taken = {
            (p, i)
            for p, per_producer in enumerate(results)
            for i, result in enumerate(per_producer)
            if result is OfferResult.ENQUEUED
        }
        assert set(received) <= taken
        assert dropped == []
        assert tally[OfferResult.FAILED] <= 1
        if tally[OfferResult.FAILED]:
            assert isinstance(subscriber.error, MissingBackpressureError)
        else:
            assert set(received) == offered
            assert subscriber.completed
        return
    assert subscriber.completed
    assert set(received) | set(dropped) == offered  # nothing lost: delivered, or counted
    if overflow == "backpressure":
        assert dropped == []
        assert tally == Counter({OfferResult.ENQUEUED: len(offered)})
    elif overflow == "drop_latest":
        assert tally[OfferResult.DROPPED] == len(dropped)
    else:
        assert tally == Counter({OfferResult.ENQUEUED: len(offered)})


# -- our TCK -------------------------------------------------------------------------------


class TestPushSourceTck(PublisherVerification):
    max_elements_from_publisher = 4096

    def create_publisher(self, elements: int) -> Publisher[Any]:
        source, flow = Flow.push_source(max(elements, 1))
        for x in range(elements):
            source.offer(x)
        source.complete()
        return flow

    def create_failed_publisher(self) -> Publisher[Any] | None:
        source, flow = Flow.push_source(1)
        source.error(RuntimeError("TCK: failed push source"))
        return flow
