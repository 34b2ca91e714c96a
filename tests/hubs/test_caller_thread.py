"""Rule 3.4 on the hubs: ``subscribe`` and ``request`` give the caller's thread back.

Producers on a pool keep the hub's queues full while the consumer takes elements slowly,
so a drain run by the consumer's thread would never run dry; at most ``CALLER_BUDGET``
``on_next`` calls may run on the thread that called ``subscribe`` or ``request``.
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest

from reactive_streams._core import CALLER_BUDGET
from reactive_streams.hubs import MergeHub, Router
from reactive_streams.operators import Flow
from tests.operators.helpers import ThreadCountingSubscriber, run_on_thread

if TYPE_CHECKING:
    from collections.abc import Iterator

    from reactive_streams import Subscriber

HANG = 30.0  # seconds: only to fail instead of hanging
WORK = 0.0005  # seconds of simulated work per element: slower than the producers


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="producer")
    yield executor
    executor.shutdown(wait=False, cancel_futures=True)


def _feed(pool: ThreadPoolExecutor, sink: Subscriber[int]) -> None:
    Flow.from_iterable(itertools.count()).publish_on(pool).subscribe(sink)


def test_merge_hub_subscribe_returns_while_producers_go_on(pool: ThreadPoolExecutor) -> None:
    hub: MergeHub[int] = MergeHub(16)
    _feed(pool, hub.sink())
    total = 4 * CALLER_BUDGET
    slow = ThreadCountingSubscriber(initial=1, per_element=1, limit=total, work=WORK)
    caller = run_on_thread(lambda: hub.source.subscribe(slow), HANG)
    assert slow.reached.wait(HANG)
    assert slow.errors == []
    assert slow.on_thread(caller) <= CALLER_BUDGET


def test_router_request_from_a_control_thread_returns(pool: ThreadPoolExecutor) -> None:
    router: Router[int] = Router(buffer_size=64)
    _feed(pool, router.sink())
    _feed(pool, router.sink())
    total = 4 * CALLER_BUDGET
    subscriber = ThreadCountingSubscriber(initial=0, per_element=0, limit=total, work=WORK)
    router.subscribe_where(lambda _: True).subscribe(subscriber)
    subscription = subscriber.subscription
    assert subscription is not None
    caller = run_on_thread(lambda: subscription.request(total), HANG)
    assert subscriber.reached.wait(HANG)
    assert subscriber.errors == []
    assert subscriber.delivered == total
    assert subscriber.on_thread(caller) <= CALLER_BUDGET
