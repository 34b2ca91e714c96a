"""The kit's ``DaemonThreadPool``: daemon workers and a shutdown that waits a bounded time."""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError

import pytest

from reactive_streams._core import DaemonThreadPool

TIMEOUT = 10.0


def test_calls_run_on_daemon_threads_and_failures_stay_in_their_future() -> None:
    pool = DaemonThreadPool(2, "test-pool")
    try:
        assert pool.submit(lambda: threading.current_thread().daemon).result(TIMEOUT)

        def interrupted() -> None:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            pool.submit(interrupted).result(TIMEOUT)
        assert pool.submit(lambda: 42).result(TIMEOUT) == 42  # the worker survived
    finally:
        pool.shutdown()


def test_shutdown_with_a_timeout_leaves_a_stuck_call_and_cancels_the_queued_ones() -> None:
    pool = DaemonThreadPool(1, "test-pool")
    entered = threading.Event()
    release = threading.Event()

    def stuck() -> None:
        entered.set()
        release.wait(TIMEOUT * 3)

    try:
        running = pool.submit(stuck)
        queued = pool.submit(lambda: None)
        assert entered.wait(TIMEOUT)
        pool.shutdown(wait=True, cancel_futures=True, timeout=0.1)
        assert not release.is_set()  # shutdown returned while the call was stuck
        assert not running.done()
        with pytest.raises(CancelledError):
            queued.result(TIMEOUT)
        with pytest.raises(RuntimeError, match=r"^cannot schedule new futures after shutdown$"):
            pool.submit(lambda: None)
    finally:
        release.set()
    running.result(TIMEOUT)


def test_a_second_worker_starts_while_the_first_is_busy() -> None:
    pool = DaemonThreadPool(2, "test-pool")
    release = threading.Event()
    try:
        pool.submit(release.wait, TIMEOUT)
        assert pool.submit(lambda: "served").result(TIMEOUT) == "served"
    finally:
        release.set()
        pool.shutdown()


def test_max_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"^max_workers must be at least 1, got 0$"):
        DaemonThreadPool(0)
