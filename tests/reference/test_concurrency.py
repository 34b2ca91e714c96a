"""Eight threads requesting and cancelling on one subscription: exact, ordered, serial, no hang."""

from __future__ import annotations

import threading

import pytest

from reactive_streams import Subscriber, Subscription

from .conftest import PublisherFactory

THREADS = 8
TIMEOUT = 20.0


class _SerialChecker(Subscriber[int]):
    """Records elements and detects overlapping signals (Rule 1.3) without trusting the GIL."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0
        self.overlaps = 0
        self.elements: list[int] = []
        self.done = threading.Event()
        self.subscribed = threading.Event()
        self.error: Exception | None = None
        self.subscription: Subscription | None = None

    def _enter(self) -> None:
        with self.lock:
            self.active += 1
            if self.active > 1:
                self.overlaps += 1

    def _leave(self) -> None:
        with self.lock:
            self.active -= 1

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        self.subscribed.set()

    def on_next(self, element: int) -> None:
        self._enter()
        self.elements.append(element)
        self._leave()

    def on_error(self, error: Exception) -> None:
        self.error = error
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


@pytest.mark.rule("1.3")
@pytest.mark.rule("1.1")
def test_rule_1_3_concurrent_requests_give_exact_ordered_serial_delivery(
    make_publisher: PublisherFactory,
) -> None:
    per_thread = 500
    total = THREADS * per_thread
    checker = _SerialChecker()
    make_publisher(total).subscribe(checker)
    assert checker.subscribed.wait(TIMEOUT)
    subscription = checker.subscription
    assert subscription is not None
    barrier = threading.Barrier(THREADS)

    def requester() -> None:
        barrier.wait(TIMEOUT)
        for _ in range(per_thread):
            subscription.request(1)

    threads = [threading.Thread(target=requester) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert checker.done.wait(TIMEOUT), f"hung after {len(checker.elements)} elements"
    assert checker.error is None
    assert checker.overlaps == 0
    assert checker.elements == list(range(total))


@pytest.mark.rule("3.5")
def test_rule_3_5_concurrent_cancel_and_request_is_harmless(
    make_publisher: PublisherFactory,
) -> None:
    checker = _SerialChecker()
    make_publisher(1_000_000).subscribe(checker)
    assert checker.subscribed.wait(TIMEOUT)
    subscription = checker.subscription
    assert subscription is not None
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            barrier.wait(TIMEOUT)
            for _ in range(200):
                subscription.request(3)
                if index % 2:
                    subscription.cancel()
        except BaseException as exc:  # request/cancel must never raise (Rules 3.15, 3.16)
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert all(not thread.is_alive() for thread in threads)
    assert errors == []
    assert checker.overlaps == 0
    delivered = len(checker.elements)
    assert checker.elements == list(range(delivered))  # in order, no gaps, no duplicates
    assert delivered <= THREADS * 200 * 3  # never beyond the demand (Rule 1.1)
    assert checker.error is None
    assert not checker.done.is_set()  # cancelled: no terminal signal
