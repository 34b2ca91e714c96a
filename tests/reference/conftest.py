"""Publisher factories for the reference tests: each makes a publisher of 0, 1, ..., n-1."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from reactive_streams import Publisher
from reactive_streams.reference import ExecutorIterablePublisher, IterablePublisher, RangePublisher

PublisherFactory = Callable[[int], Publisher[int]]


@pytest.fixture(params=["range", "iterable", "generator", "executor"])
def make_publisher(request: pytest.FixtureRequest) -> Iterator[PublisherFactory]:
    """A factory for each reference publisher; the executor one gets its own pool."""
    kind = request.param
    if kind == "range":
        yield lambda n: RangePublisher(0, n)
    elif kind == "iterable":
        yield lambda n: IterablePublisher(list(range(n)))
    elif kind == "generator":
        yield lambda n: IterablePublisher(x for x in range(n))
    else:
        pool = ThreadPoolExecutor(2, thread_name_prefix="publisher")
        try:
            yield lambda n: ExecutorIterablePublisher(range(n), pool, batch_size=7)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
