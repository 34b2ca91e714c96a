"""A broken upstream (its ``request`` raises, breaking Rule 3.16) must not hang any stage.

Reactor's rule: an exception thrown by upstream (or by our own machinery) cancels upstream
and reaches the subscriber as exactly one ``on_error``. It never escapes our own ``request``
(Rule 3.16) or ``subscribe`` (Rule 1.9).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest

from reactive_streams import Flow, Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

TIMEOUT = 5.0


class BrokenRequest(RuntimeError):
    """What the broken upstream raises from ``request``."""


class _BrokenSubscription(Subscription):
    def __init__(self, owner: BrokenPublisher, subscriber: Subscriber[int]) -> None:
        self.owner = owner
        self.subscriber = subscriber
        self.calls = 0
        self.sent = 0
        self.cancelled = threading.Event()

    def request(self, n: int) -> None:
        self.calls += 1
        if self.calls > self.owner.good_requests:
            raise BrokenRequest(f"request({n}) broke")
        for _ in range(min(n, self.owner.per_request)):
            if self.cancelled.is_set():
                return
            self.sent += 1
            self.subscriber.on_next(self.sent)

    def cancel(self) -> None:
        self.cancelled.set()


class BrokenPublisher(Publisher[int]):
    """``request`` emits ``per_request`` elements ``good_requests`` times, then raises."""

    def __init__(self, good_requests: int = 0, per_request: int = 1) -> None:
        self.good_requests = good_requests
        self.per_request = per_request
        self.subscriptions: list[_BrokenSubscription] = []

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        subscription = _BrokenSubscription(self, subscriber)
        self.subscriptions.append(subscription)
        subscriber.on_subscribe(subscription)


class Probe(Subscriber[Any]):
    """Counts terminal signals; records anything that escapes ``request``."""

    def __init__(self, demand: int) -> None:
        self.demand = demand
        self.subscription: Subscription | None = None
        self.elements: list[Any] = []
        self.errors: list[Exception] = []
        self.completions = 0
        self.escaped: list[BaseException] = []
        self.after_terminal = 0
        self.done = threading.Event()

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        self.request(self.demand)

    def request(self, n: int) -> None:
        assert self.subscription is not None
        try:
            self.subscription.request(n)
        except BaseException as exc:
            self.escaped.append(exc)

    def on_next(self, element: Any) -> None:
        if self.done.is_set():
            self.after_terminal += 1
        self.elements.append(element)
        self.request(1)  # keep demand up, so every stage has to request upstream again

    def on_error(self, error: Exception) -> None:
        if self.done.is_set():
            self.after_terminal += 1
        self.errors.append(error)
        self.done.set()

    def on_complete(self) -> None:
        if self.done.is_set():
            self.after_terminal += 1
        self.completions += 1
        self.done.set()


@pytest.fixture(scope="module")
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(2) as pool:
        yield pool


def _stages(executor: ThreadPoolExecutor) -> dict[str, Callable[[Publisher[int]], Flow[Any]]]:
    return {
        "publish_on": lambda p: Flow.from_publisher(p).publish_on(executor, prefetch=4),
        "map": lambda p: Flow.from_publisher(p).map(lambda x: x + 1),
        "buffer": lambda p: Flow.from_publisher(p).buffer(2),
        "on_backpressure_buffer": lambda p: Flow.from_publisher(p).on_backpressure_buffer(8),
        "flat_map": lambda p: Flow.from_publisher(p).flat_map(Flow.just, prefetch=4),
        "merge": lambda p: Flow.merge(p, Flow.range(0, 3)),
        "zip": lambda p: Flow.zip(p, Flow.range(0, 100), prefetch=4),
        "share": lambda p: Flow.from_publisher(p).share(prefetch=4),
    }


STAGES = list(_stages(None).keys())  # type: ignore[arg-type]


def _is_caused_by_broken(error: Exception) -> bool:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, BrokenRequest):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


CASES = [(stage, 0) for stage in STAGES] + [
    (stage, good)
    for stage in STAGES
    if stage != "on_backpressure_buffer"  # it requests once (unbounded): no second request
    for good in (1, 2)
]


@pytest.mark.parametrize(("stage", "good_requests"), CASES)
def test_broken_upstream_request_ends_in_one_error(
    stage: str, good_requests: int, executor: ThreadPoolExecutor
) -> None:
    upstream = BrokenPublisher(good_requests=good_requests, per_request=40)
    flow = _stages(executor)[stage](upstream)
    probe = Probe(demand=3)
    flow.subscribe(probe)  # must not raise (Rule 1.9)
    assert probe.done.wait(TIMEOUT), f"{stage}: no terminal signal, elements {probe.elements}"
    if probe.completions == 0:
        assert len(probe.errors) == 1
        assert _is_caused_by_broken(probe.errors[0]), probe.errors
        assert all(s.cancelled.wait(TIMEOUT) for s in upstream.subscriptions), (
            f"{stage}: upstream not cancelled after its request raised"
        )
    else:  # the stage completed before it had to request again (merge/zip might)
        assert probe.errors == []
    # later demand must neither raise nor signal again
    probe.request(5)
    assert probe.escaped == []
    assert probe.after_terminal == 0
    assert len(probe.errors) + probe.completions == 1
