"""A private asyncio event loop on a daemon thread.

For code that must run on an event loop while its caller has none: RSocket's blocking
``serve`` and ``connect``, and ``from_async_iterable`` subscribed from a plain thread.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Coroutine
    from typing import Any

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """An asyncio loop running on its own thread until ``stop``.

    Args:
        name: the thread's name (shows in tracebacks and thread dumps).
    """

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
                for task in tasks:
                    task.cancel()
                if tasks:
                    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coroutine`` on the loop and wait at most ``timeout`` seconds for its result.

        Raises:
            TimeoutError: it did not finish in time (it is cancelled).
            Exception: whatever the coroutine raised.
        """
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    @property
    def in_loop_thread(self) -> bool:
        """Whether the caller runs on the loop's own thread."""
        return threading.current_thread() is self._thread

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop and join its thread (unless called from it); idempotent."""
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:  # already closed
            return
        if not self.in_loop_thread:
            self._thread.join(timeout)
