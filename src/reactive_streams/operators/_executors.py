"""Executors for async boundaries: any ``concurrent.futures.Executor``, or an asyncio loop."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["LoopExecutor", "as_executor"]


class LoopExecutor(Executor):
    """Runs tasks on an asyncio event loop with ``call_soon_threadsafe``.

    Safe to call from any thread, including the loop's own. ``submit`` returns a future
    that completes when the task has run on the loop.

    Raises:
        RuntimeError: from ``submit``, when the loop is closed (turned into
            ``ExecutorRejectedError`` by the stages that use it).
    """

    __slots__ = ("_loop",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop that runs the tasks."""
        return self._loop

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Schedule ``fn(*args, **kwargs)`` on the loop; never blocks."""
        future: Future[Any] = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except Exception as exc:
                future.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return future


def as_executor(executor: Executor | asyncio.AbstractEventLoop) -> Executor:
    """Accept an ``Executor`` or an asyncio event loop; return an ``Executor``.

    Raises:
        TypeError: ``executor`` is neither.
    """
    if isinstance(executor, asyncio.AbstractEventLoop):
        return LoopExecutor(executor)
    if isinstance(executor, Executor):
        return executor
    raise TypeError(
        "an async boundary needs a concurrent.futures.Executor or an asyncio event loop, "
        f"got {type(executor).__qualname__}"
    )
