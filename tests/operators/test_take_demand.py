"""``take(n)`` caps the demand it sends upstream at ``n`` (Reactor's ``limitRequest``).

A fused push chain with a ``take`` asks its upstream for at most ``n`` plus the elements
dropped before the take, whatever downstream requested; over a network that is what
stops a server from sending thousands of frames for ten elements.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import MAX_DEMAND, Publisher, Subscriber, Subscription
from reactive_streams.operators import Flow
from reactive_streams.reference import IterablePublisher
from reactive_streams.rsocket import connect, serve

from .helpers import ManualPublisher, Recorder

TIMEOUT = 10.0


class CountingPublisher(Publisher[Any]):
    """An endless (or ``count``-long) publisher recording requests and elements sent.

    It emits ``0, 1, 2, ...``, or ``b"0", b"1", ...`` with ``as_bytes`` (for RSocket).
    """

    def __init__(self, count: int | None = None, *, as_bytes: bool = False) -> None:
        self.requests: list[int] = []
        self.sent = 0
        self.cancelled = threading.Event()
        numbers: Any = itertools.count() if count is None else range(count)
        if as_bytes:
            numbers = (str(x).encode() for x in numbers)
        self._inner: Publisher[Any] = IterablePublisher(_Reiterable(numbers))

    @property
    def total_requested(self) -> int:
        return sum(self.requests)

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        publisher = self

        class Tap(Subscriber[Any], Subscription):
            def on_subscribe(self, subscription: Subscription) -> None:
                self.upstream = subscription
                subscriber.on_subscribe(self)

            def on_next(self, element: Any) -> None:
                publisher.sent += 1
                subscriber.on_next(element)

            def on_error(self, error: Exception) -> None:
                subscriber.on_error(error)

            def on_complete(self) -> None:
                subscriber.on_complete()

            def request(self, n: int) -> None:
                publisher.requests.append(n)
                self.upstream.request(n)

            def cancel(self) -> None:
                publisher.cancelled.set()
                self.upstream.cancel()

        self._inner.subscribe(Tap())


class _Reiterable:
    def __init__(self, numbers: Any) -> None:
        self._numbers = numbers

    def __iter__(self) -> Any:
        return iter(self._numbers)


def test_take_requests_at_most_n_upstream() -> None:
    source = CountingPublisher()
    assert Flow.from_publisher(source).take(10).to_list(timeout=TIMEOUT) == list(range(10))
    assert source.total_requested == 10
    assert source.sent == 10


def test_take_after_a_filter_requests_the_dropped_elements_again() -> None:
    source = CountingPublisher()
    odd = Flow.from_publisher(source).filter(lambda x: x % 2 == 1).take(5)
    assert odd.to_list(timeout=TIMEOUT) == [1, 3, 5, 7, 9]
    assert source.total_requested == 10  # 5 for the take, 5 in place of the evens


def test_a_filter_after_take_cannot_raise_the_cap() -> None:
    source = CountingPublisher()
    flow = Flow.from_publisher(source).take(10).filter(lambda x: x % 2 == 1)
    assert flow.to_list(timeout=TIMEOUT) == [1, 3, 5, 7, 9]
    assert source.total_requested == 10


def test_take_of_a_short_source_completes_with_it() -> None:
    source = CountingPublisher(3)
    assert Flow.from_publisher(source).map(str).take(10).to_list(timeout=TIMEOUT) == [
        "0",
        "1",
        "2",
    ]
    assert source.total_requested <= 10


@settings(max_examples=100, deadline=None)
@given(
    take=st.integers(min_value=0, max_value=30),
    requests=st.lists(
        st.one_of(st.integers(min_value=1, max_value=12), st.just(MAX_DEMAND)),
        min_size=1,
        max_size=6,
    ),
    modulus=st.integers(min_value=1, max_value=3),
    filter_first=st.booleans(),
)
def test_upstream_demand_never_exceeds_what_the_take_can_pass(
    take: int, requests: list[int], modulus: int, filter_first: bool
) -> None:
    """Model: upstream total <= take + drops before it; the elements are a plain slice."""
    source = ManualPublisher[int]()
    flow = Flow.from_publisher(source)

    def kept(x: int) -> bool:
        return x % modulus == 0

    flow = flow.filter(kept).take(take) if filter_first else flow.take(take).filter(kept)
    recorder: Recorder[int] = Recorder()
    flow.subscribe(recorder)
    sent = 0
    for n in requests:
        recorder.request(n)
        while sent < source.subscription.total_requested and not recorder.terminated.is_set():
            source.next(sent)
            sent += 1
    numbers = range(sent)
    if filter_first:
        expected = [x for x in numbers if kept(x)][:take]
        dropped_before = sum(1 for x in numbers if not kept(x))
    else:
        expected = [x for x in numbers[:take] if kept(x)]
        dropped_before = 0
    assert recorder.elements == expected
    assert source.subscription.total_requested <= take + dropped_before
    assert sent <= take + dropped_before
    # No demand is lost: the stream either ended or delivered all that was requested.
    assert recorder.terminated.is_set() or len(recorder.elements) >= min(sum(requests), MAX_DEMAND)


def test_take_over_rsocket_reads_a_bounded_number_of_frames() -> None:
    """A client ``request_stream`` then ``take(10)``: the server sends about 10 frames."""
    source = CountingPublisher(as_bytes=True)
    with (
        serve({"numbers": lambda data: source}) as server,
        connect(f"tcp://127.0.0.1:{server.port}") as client,
    ):
        flow = Flow.from_publisher(client.request_stream("numbers", b"")).take(10)
        assert flow.to_list(timeout=TIMEOUT) == [b"%d" % i for i in range(10)]
        assert source.cancelled.wait(TIMEOUT), "the server's publisher was not cancelled"
    assert source.total_requested <= 10
    assert source.sent <= 10
