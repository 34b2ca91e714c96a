"""A request made inside ``on_subscribe`` or ``on_next`` over a synchronous (fused) source.

``Flow.range`` and ``Flow.from_iterable`` emit inside ``request``, on the caller's
thread. A stage that forwards downstream's demand upstream used to do it while it still
owned its drain loop (inside downstream's ``on_subscribe``, or inside an ``on_next`` its
drain delivered), so every element was queued and none delivered: ``on_subscribe`` did
not return until the source ran dry (never, for an endless one) and the queue held it
all. The stage now defers such a request until the loop is free (a trampoline): the
subscriber's fifth element arrives, its cancel stops the source, and the stage never
holds more than a handful of elements.

The sources here are long but finite (200 000 elements), so the old behaviour fails the
test (a high-water mark of the whole source) instead of running for ever.
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Any

import pytest

from reactive_streams import MAX_DEMAND, Subscriber, Subscription
from reactive_streams._core import CALLER_BUDGET
from reactive_streams.operators import Flow, KillSwitch

if TYPE_CHECKING:
    from collections.abc import Callable

HANG = 30.0  # seconds: only to fail instead of hanging
LENGTH = 200_000
CANCEL_AT = 5

SOURCES: dict[str, Callable[[], Flow[int]]] = {
    "range": lambda: Flow.range(0, LENGTH),
    "from_iterable": lambda: Flow.from_iterable(itertools.islice(itertools.count(), LENGTH)),
}

STAGES: dict[str, Callable[[Flow[int]], Flow[Any]]] = {
    "timeout": lambda flow: flow.timeout(30),
    "do_on_next": lambda flow: flow.do_on_next(lambda _: None),
    "log": lambda flow: flow.log("reentrant"),
    "limit_rate": lambda flow: flow.limit_rate(4),
    "kill_switch": lambda flow: flow.via(KillSwitch().flow()),
    "with_latest_from": lambda flow: flow.with_latest_from(Flow.just("x")),
    "using": lambda flow: Flow.using(lambda: 1, lambda _: flow, lambda _: None),
    "take_until": lambda flow: flow.take_until(Flow.empty()),
}


class _Reader(Subscriber[Any]):
    """Requests ``initial`` in on_subscribe, ``later`` in the first on_next; cancels at 5."""

    def __init__(self, initial: int, later: int) -> None:
        self.initial = initial
        self.later = later
        self.subscription: Subscription | None = None
        self.received = 0
        self.returned = threading.Event()
        self.fifth = threading.Event()
        self.errors: list[Exception] = []

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(self.initial)
        self.returned.set()

    def on_next(self, element: Any) -> None:
        self.received += 1
        assert self.subscription is not None
        if self.received == 1 and self.later:
            self.subscription.request(self.later)
        if self.received == CANCEL_AT:
            self.subscription.cancel()
            self.fifth.set()

    def on_error(self, error: Exception) -> None:
        self.errors.append(error)
        self.fifth.set()

    def on_complete(self) -> None:
        self.fifth.set()


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("stage", list(STAGES))
@pytest.mark.parametrize(
    ("initial", "later"), [(MAX_DEMAND, 0), (1, MAX_DEMAND)], ids=["max", "one_then_max"]
)
def test_a_request_inside_on_subscribe_delivers_and_keeps_the_buffer_bounded(
    source: str, stage: str, initial: int, later: int
) -> None:
    reader = _Reader(initial, later)
    flow = STAGES[stage](SOURCES[source]())
    worker = threading.Thread(target=lambda: flow.subscribe(reader), daemon=True)
    worker.start()
    assert reader.returned.wait(HANG)
    assert reader.fifth.wait(HANG)
    worker.join(HANG)
    assert reader.errors == []
    assert reader.received == CANCEL_AT
    subscription = reader.subscription
    statistics = getattr(subscription, "statistics", None)
    assert statistics is not None
    assert statistics().high_water_mark <= CALLER_BUDGET
