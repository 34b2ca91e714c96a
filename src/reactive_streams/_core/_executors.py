"""Executors of the kit: a pool of daemon threads, and an asyncio event loop as an executor.

``DaemonThreadPool``: a thread pool of daemon threads whose shutdown waits a bounded time.

``concurrent.futures.ThreadPoolExecutor`` is the right pool for work that always ends, but
its threads are joined at interpreter exit and ``shutdown(wait=True)`` has no timeout, so
one task blocked in user code (a route's publisher waiting on a lock, a socket, an event)
holds up whoever closes the pool, and then the process's exit. A server that runs user
code on its workers must be able to close anyway.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

__all__ = ["DaemonThreadPool", "LoopExecutor"]

T = TypeVar("T")

_WorkItem = tuple[Future[Any], "Callable[..., Any]", tuple[Any, ...], dict[str, Any]]


class DaemonThreadPool(Executor):
    """Up to ``max_workers`` daemon threads that run submitted calls in order of submission.

    Threads are started as work arrives (while none is idle) and live until ``shutdown``.
    Being daemon threads, a worker stuck in a call never keeps the interpreter from
    exiting; ``shutdown(timeout=...)`` waits at most that long and then leaves such a
    worker running, with every call still queued cancelled.

    A call that raises, ``BaseException`` included, fails its ``Future`` and leaves the
    worker serving (as ``ThreadPoolExecutor`` does).

    Args:
        max_workers: the most threads, ``>= 1``.
        thread_name_prefix: the threads are named ``f"{thread_name_prefix}_{index}"``.

    Raises:
        ValueError: ``max_workers < 1``.

    Concurrency: every method is thread-safe.
    """

    def __init__(self, max_workers: int, thread_name_prefix: str = "daemon-pool") -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self._max_workers = max_workers
        self._prefix = thread_name_prefix
        self._queue: queue.SimpleQueue[_WorkItem | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0  # workers waiting for a call
        self._waiting = 0  # calls queued and not yet taken by a worker
        self._shutdown = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Queue ``fn(*args, **kwargs)``; its ``Future`` gets the result or the exception.

        Raises:
            RuntimeError: the pool was shut down.
        """
        future: Future[T] = Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._queue.put((future, fn, args, kwargs))
            self._waiting += 1
            if self._waiting <= self._idle or len(self._threads) >= self._max_workers:
                return future  # an idle worker takes it, or the first worker to be free
            thread = threading.Thread(
                target=self._work,
                name=f"{self._prefix}_{len(self._threads)}",
                daemon=True,
            )
            self._threads.append(thread)
        thread.start()
        return future

    def _work(self) -> None:
        work = self._queue
        lock = self._lock
        while True:
            with lock:
                self._idle += 1
            item = work.get()
            with lock:
                self._idle -= 1
                if item is not None:
                    self._waiting -= 1
            if item is None:
                work.put(None)  # wake the next worker: it stops too
                return
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # the future carries it, whatever it is
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args, kwargs, item  # hold nothing while idle

    def shutdown(
        self, wait: bool = True, *, cancel_futures: bool = False, timeout: float | None = None
    ) -> None:
        """Refuse new calls; stop the workers once the queue is empty.

        Args:
            wait: wait for the workers to end (the calls queued before, unless cancelled,
                run first).
            cancel_futures: cancel the calls that have not started.
            timeout: with ``wait``, the most seconds to wait; workers still busy after it
                (stuck in a call) are left running as daemon threads. ``None``: no bound.

        Idempotent.
        """
        with self._lock:
            first = not self._shutdown
            self._shutdown = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        if first or cancel_futures:
            self._queue.put(None)
        if not wait:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in threads:
            if thread is threading.current_thread():
                continue
            if deadline is None:
                thread.join()
            else:
                thread.join(max(0.0, deadline - time.monotonic()))


class LoopExecutor(Executor):
    """Runs each submitted call as one callback of an asyncio event loop.

    For an ``EmitLoopSubscription`` whose signals must all come from an event loop (an
    async iterable's stream): every pass of its emit loop is one
    ``loop.call_soon_threadsafe`` callback, so ``submit`` may be called from any thread
    and never blocks the loop.

    Args:
        loop: the event loop; it runs the calls whenever it runs.

    Raises:
        RuntimeError: from ``submit``, once the loop is closed (a call can never run).
    """

    __slots__ = ("_loop",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Queue ``fn(*args, **kwargs)`` on the loop; its ``Future`` gets the outcome.

        An exception that is not an ``Exception`` (``KeyboardInterrupt``) fails the
        ``Future`` and propagates out of the loop's callback, as asyncio does with it.

        Raises:
            RuntimeError: the loop is closed.
        """
        future: Future[T] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:
                future.set_exception(exc)
            except BaseException as exc:
                future.set_exception(exc)
                raise
            else:
                future.set_result(result)

        self._loop.call_soon_threadsafe(run)
        return future
