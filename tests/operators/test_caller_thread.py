"""Rule 3.4: ``request`` gives the caller's thread back after ``CALLER_BUDGET`` elements.

Producers keep the stages below supplied faster than the subscriber takes elements:
synchronous inner sources that refill from inside the drain (``merge``, ``flat_map``), or
an asynchronous one that filled a buffer. A drain run by the thread that called
``request`` would deliver everything requested on that thread. The tests count the
``on_next`` calls that run on that thread: at most ``CALLER_BUDGET``; the rest of the
stream goes on elsewhere.
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest

from reactive_streams._core import CALLER_BUDGET
from reactive_streams.operators import Flow

from .helpers import ThreadCountingSubscriber, run_on_thread

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from reactive_streams import Publisher

HANG = 30.0  # seconds: only to fail instead of hanging
WORK = 0.0005  # seconds of simulated work per element: slower than the producers
TOTAL = 4 * CALLER_BUDGET


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="producer")
    yield executor
    executor.shutdown(wait=False, cancel_futures=True)


def _counting() -> Flow[int]:
    return Flow.from_iterable(itertools.count())


STAGES: dict[str, Callable[[ThreadPoolExecutor], Publisher[Any]]] = {
    "merge_synchronous": lambda _: Flow.merge(_counting(), _counting()),
    "flat_map_synchronous": lambda _: Flow.just(0, 1).flat_map(
        lambda _: _counting(), concurrency=2
    ),
    "on_backpressure_buffer": lambda pool: (
        Flow.range(0, TOTAL).publish_on(pool).on_backpressure_buffer(TOTAL)
    ),
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_request_from_a_control_thread_returns_after_the_budget(
    stage: str, pool: ThreadPoolExecutor
) -> None:
    total = TOTAL
    subscriber = ThreadCountingSubscriber(initial=0, per_element=0, limit=total, work=WORK)
    STAGES[stage](pool).subscribe(subscriber)
    assert subscriber.subscription is not None
    subscription = subscriber.subscription
    caller = run_on_thread(lambda: subscription.request(total), HANG)
    assert subscriber.reached.wait(HANG)
    assert subscriber.errors == []
    assert subscriber.delivered == total
    assert subscriber.on_thread(caller) <= CALLER_BUDGET
