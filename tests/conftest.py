"""Fixtures shared by the whole test suite."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from reactive_streams import set_undeliverable_hook


@pytest.fixture
def undeliverable() -> Iterator[list[BaseException]]:
    """Collect errors reported through the undeliverable hook during one test."""
    reported: list[BaseException] = []
    previous = set_undeliverable_hook(reported.append)
    try:
        yield reported
    finally:
        set_undeliverable_hook(previous)


@pytest.fixture
def executor() -> Iterator[ThreadPoolExecutor]:
    """A small thread pool, shut down after the test."""
    pool = ThreadPoolExecutor(4, thread_name_prefix="test")
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
