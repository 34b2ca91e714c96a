"""Eight threads calling ``request`` and ``cancel`` on every asynchronous stage.

Bounded in time (each case stops after a fixed number of calls). Checks: no element lost
(when nobody cancels), none duplicated, no overlapping signals (Rule 1.3), nothing after a
terminal signal (Rule 1.7), nothing beyond demand (Rule 1.1).
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest

from reactive_streams import Flow, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

N = 2000
THREADS = 8
TIMEOUT = 10.0


class _Checker(Subscriber[Any]):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.subscription: Subscription | None = None
        self.subscribed = threading.Event()
        self.done = threading.Event()
        self.elements: list[Any] = []
        self.requested = 0
        self.active = 0
        self.violations: list[str] = []
        self.terminal: str | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        self.subscribed.set()

    def _enter(self, what: str) -> None:
        with self.lock:
            self.active += 1
            if self.active > 1:
                self.violations.append(f"Rule 1.3: {what} overlapped")
            if self.terminal is not None:
                self.violations.append(f"Rule 1.7: {what} after {self.terminal}")

    def _leave(self) -> None:
        with self.lock:
            self.active -= 1

    def on_next(self, element: Any) -> None:
        self._enter("on_next")
        with self.lock:
            self.elements.append(element)
            if len(self.elements) > self.requested:
                self.violations.append("Rule 1.1: beyond demand")
        self._leave()

    def on_error(self, error: Exception) -> None:
        self._enter("on_error")
        with self.lock:
            self.terminal = f"on_error({error!r})"
        self._leave()
        self.done.set()

    def on_complete(self) -> None:
        self._enter("on_complete")
        with self.lock:
            self.terminal = "on_complete"
        self._leave()
        self.done.set()

    def request(self, n: int) -> None:
        with self.lock:
            self.requested += n
        assert self.subscription is not None
        self.subscription.request(n)


@pytest.fixture(scope="module")
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(4) as pool:
        yield pool


def _flatten(elements: list[Any]) -> list[Any]:
    out: list[Any] = []
    for element in elements:
        if isinstance(element, list):
            out.extend(element)
        elif isinstance(element, tuple):
            out.append(element[0])
        else:
            out.append(element)
    return out


STAGES: dict[str, tuple[Callable[[ThreadPoolExecutor], Flow[Any]], bool]] = {
    # name: (build, every element must arrive when nobody cancels)
    "publish_on": (lambda ex: Flow.range(0, N).publish_on(ex, prefetch=16), True),
    "publish_on-buffered": (
        lambda ex: Flow.range(0, N).subscribe_on(ex).map(lambda x: x).publish_on(ex, prefetch=16),
        True,
    ),
    "subscribe_on": (lambda ex: Flow.range(0, N).map(lambda x: x).subscribe_on(ex), True),
    "buffer": (lambda ex: Flow.range(0, N).publish_on(ex, prefetch=8).buffer(3), True),
    "on_backpressure_buffer": (
        lambda ex: Flow.range(0, N).publish_on(ex).on_backpressure_buffer(N),
        True,
    ),
    "on_backpressure_drop": (
        lambda ex: Flow.range(0, N).publish_on(ex).on_backpressure_drop(),
        False,
    ),
    "on_backpressure_latest": (
        lambda ex: Flow.range(0, N).publish_on(ex).on_backpressure_latest(),
        False,
    ),
    "flat_map": (lambda ex: Flow.range(0, N).flat_map(lambda x: Flow.just(x).publish_on(ex)), True),
    "merge": (
        lambda ex: Flow.merge(
            Flow.range(0, N // 2).publish_on(ex, prefetch=8),
            Flow.range(N // 2, N).publish_on(ex, prefetch=8),
        ),
        True,
    ),
    "zip": (
        lambda ex: Flow.zip(Flow.range(0, N).publish_on(ex), Flow.range(0, N), prefetch=8),
        True,
    ),
    "share": (lambda ex: Flow.range(0, N).publish_on(ex, prefetch=8).share(prefetch=8), True),
    "publish": (lambda ex: Flow.range(0, N).publish_on(ex, prefetch=8).publish(prefetch=8), True),
}


def _start(flow: Flow[Any], checker: _Checker) -> None:
    flow.subscribe(checker)
    connect = getattr(flow, "connect", None)
    if connect is not None:  # publish(): connect once the subscriber is in
        connect()


def _hammer(checker: _Checker, cancel_at: int | None) -> None:
    assert checker.subscribed.wait(TIMEOUT)
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        rng = random.Random(index)
        try:
            for call in range(N):
                if checker.done.is_set():
                    return
                if cancel_at is not None and index == 0 and call == cancel_at:
                    assert checker.subscription is not None
                    checker.subscription.cancel()
                    return
                checker.request(rng.randint(1, 4))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert errors == []


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_eight_threads_requesting(stage: str, executor: ThreadPoolExecutor) -> None:
    build, lossless = STAGES[stage]
    checker = _Checker()
    _start(build(executor), checker)
    _hammer(checker, None)
    if lossless:
        assert checker.done.wait(TIMEOUT), f"{stage}: no terminal signal"
        assert checker.terminal == "on_complete"
    with checker.lock:
        assert checker.violations == []
        values = _flatten(checker.elements)
    duplicates = [value for value, seen in Counter(values).items() if seen > 1]
    assert duplicates == []
    if lossless:
        assert sorted(values) == list(range(N))
    else:
        assert set(values) <= set(range(N))


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_eight_threads_requesting_and_one_cancelling(
    stage: str, executor: ThreadPoolExecutor
) -> None:
    build, _ = STAGES[stage]
    checker = _Checker()
    _start(build(executor), checker)
    _hammer(checker, cancel_at=50)
    with checker.lock:
        assert checker.violations == []
        values = _flatten(checker.elements)
    assert [value for value, seen in Counter(values).items() if seen > 1] == []
    assert set(values) <= set(range(N))
