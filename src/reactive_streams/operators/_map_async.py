"""``map_async`` and ``map_async_unordered``: calls in flight on an executor or a loop."""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from typing import TYPE_CHECKING, Any, TypeVar

from .._core import (
    BufferedStage,
    DaemonThreadPool,
    LoopThread,
    NoneResultError,
    StageOperator,
    check_positive,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from concurrent.futures import Executor, Future

    from .._core import Cancellable
    from ..api import Publisher, Subscriber, Subscription

__all__ = ["MapAsyncOperator"]

T = TypeVar("T")

_shared_loop: LoopThread | None = None
_shared_loop_lock = threading.Lock()


def _default_loop() -> asyncio.AbstractEventLoop:
    """The loop coroutines run on when no ``loop=`` is given: one daemon thread, shared."""
    global _shared_loop
    with _shared_loop_lock:
        if _shared_loop is None or _shared_loop.loop.is_closed():
            _shared_loop = LoopThread("reactive-streams-map-async")
        return _shared_loop.loop


class MapAsyncOperator(StageOperator[Any]):
    """Run ``fn`` on each element with at most ``parallelism`` calls in flight (Akka mapAsync).

    ``fn`` is a plain function, run on ``executor`` (by default a ``DaemonThreadPool`` of
    ``parallelism`` threads per subscriber, shut down when the stream ends), or a
    coroutine function, run on ``loop`` (by default one shared ``LoopThread``). With
    ``ordered`` the results keep the order of the elements; without it, each goes
    downstream as soon as it is ready.

    A slot is taken when an element arrives and freed when its result is delivered
    downstream, so at most ``parallelism`` calls run or results wait; upstream is
    requested ``parallelism`` at first and then one element per delivered result.

    A call that raises (or returns ``None``, Rule 2.13) ends the stream at once with that
    error: upstream is cancelled, the calls not yet started are cancelled, and the results
    of the others are discarded. An upstream error also ends it at once (the results in
    flight are discarded); completion waits for every call in flight.
    """

    __slots__ = ("_executor", "_fn", "_is_coroutine", "_loop", "_ordered", "_parallelism")

    def __init__(
        self,
        upstream: Publisher[T],
        fn: Callable[[T], Any],
        parallelism: int,
        *,
        ordered: bool,
        executor: Executor | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(upstream)
        if not callable(fn):
            raise TypeError(f"map_async() needs a callable, got {type(fn).__qualname__}")
        self._fn = fn
        self._parallelism = check_positive("parallelism", parallelism)
        self._ordered = ordered
        self._is_coroutine = inspect.iscoroutinefunction(fn)
        if self._is_coroutine and executor is not None:
            raise TypeError("map_async(): a coroutine function runs on loop=, not executor=")
        if not self._is_coroutine and loop is not None:
            raise TypeError("map_async(): loop= is for a coroutine function (async def)")
        self._executor = executor
        self._loop = loop

    @property
    def name(self) -> str:
        return "map_async" if self._ordered else "map_async_unordered"

    def _new_stage(self, subscriber: Subscriber[Any]) -> Subscriber[Any]:
        submit: Callable[[Any], Future[Any]]
        pool: DaemonThreadPool | None = None
        if self._is_coroutine:
            loop = self._loop if self._loop is not None else _default_loop()
            fn = self._fn

            def submit(element: Any) -> Future[Any]:
                coroutine = fn(element)
                try:
                    return asyncio.run_coroutine_threadsafe(coroutine, loop)
                except Exception:  # the loop is closed: the coroutine never runs
                    close = getattr(coroutine, "close", None)
                    if close is not None:
                        close()
                    raise

        else:
            if self._executor is None:
                pool = DaemonThreadPool(self._parallelism, thread_name_prefix="map-async")
                executor: Executor = pool
            else:
                executor = self._executor
            call = self._fn

            def submit(element: Any) -> Future[Any]:
                return executor.submit(call, element)

        return _MapAsync(
            subscriber,
            submit,
            parallelism=self._parallelism,
            ordered=self._ordered,
            pool=pool,
            label=self.name,
        )


class _MapAsync(BufferedStage):
    """The stage; ``_slots`` holds the futures in flight, by element position.

    ``_ready`` holds results due downstream (in order, for ``ordered``); ``_results``
    holds, for ``ordered``, results that finished ahead of an earlier element's.
    ``_upstream_done`` says upstream completed; ``_done`` (the buffered drain's "no more
    elements") is set once it has and no call is in flight.
    """

    __slots__ = (
        "__weakref__",
        "_label",
        "_next_out",
        "_ordered",
        "_parallelism",
        "_pool",
        "_position",
        "_results",
        "_slots",
        "_submit",
        "_upstream_done",
    )

    _errors_wait = False  # an upstream error overtakes the results (they are discarded)

    def __init__(
        self,
        downstream: Subscriber[Any],
        submit: Callable[[Any], Future[Any]],
        *,
        parallelism: int,
        ordered: bool,
        pool: DaemonThreadPool | None,
        label: str,
    ) -> None:
        super().__init__(downstream)
        self._submit = submit
        self._parallelism = parallelism
        self._ordered = ordered
        self._pool = pool
        self._label = label
        self._slots: dict[int, Future[Any] | None] = {}
        self._results: dict[int, Any] = {}
        self._position = 0
        self._next_out = 0
        self._upstream_done = False

    def _buffered_now(self) -> int:
        return len(self._ready) + len(self._slots) + len(self._results)

    def on_subscribe(self, subscription: Subscription) -> None:
        if self._accept_upstream(subscription):
            self.request_upstream(subscription, self._parallelism)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        with self._lock:
            if self._done or self._cancelled:
                return
            position = self._position
            self._position += 1
            self._slots[position] = None
            held = len(self._slots) + len(self._results) + len(self._ready)
            self._high_water = max(self._high_water, held)
        try:
            future = self._submit(element)
        except Exception as exc:  # the executor refused, or fn(element) raised at once
            self._fail_urgently(exc)
            self._schedule()
            return
        with self._lock:
            live = position in self._slots
            if live:
                self._slots[position] = future
        if not live:  # the stream ended meanwhile
            future.cancel()
            return
        future.add_done_callback(functools.partial(self._finished, position))

    def _finished(self, position: int, future: Future[Any]) -> None:
        """A call ended (on the executor's thread, or the loop's): keep its result."""
        error: BaseException | None
        if future.cancelled():
            error = asyncio.CancelledError(f"{self._label}: the call was cancelled")
        else:
            error = future.exception()
        result = None if error is not None else future.result()
        with self._lock:
            if self._slots.pop(position, 0) == 0 or self._done:
                return  # discarded: the stream ended
            if error is None and result is None:
                error = NoneResultError(f"the function given to {self._label}()", position)
            if error is not None:
                if not isinstance(error, Exception):  # KeyboardInterrupt in the call
                    wrapped = RuntimeError(f"{self._label}: the call raised {error!r}")
                    wrapped.__cause__ = error
                    error = wrapped
                self._error = error
                self._done = True
                self._urgent = True
            elif self._ordered:
                self._results[position] = result
                while self._next_out in self._results:
                    self._ready.append(self._results.pop(self._next_out))
                    self._next_out += 1
            else:
                self._ready.append(result)
            if self._upstream_done and not self._slots and not self._results:
                self._done = True
            start = self._guard.acquire_locked()
        if start:
            self._loop.start_owned()

    def on_complete(self) -> None:
        """Upstream completed: complete once every call in flight has delivered."""
        with self._lock:
            if self._done:
                return
            self._upstream_done = True
            self._done = not self._slots and not self._results
        self._schedule()

    def _after_delivery(self, count: int) -> None:
        upstream = self._upstream
        if count and upstream is not None and not self._done:
            self.request_upstream(upstream, count)  # as many slots as results delivered

    def _stop_locked(self) -> Sequence[Cancellable]:
        super()._stop_locked()
        pending = [_Undo(f.cancel) for f in self._slots.values() if f is not None]
        self._slots.clear()
        self._results.clear()
        if self._pool is not None:
            pending.append(_Undo(functools.partial(self._pool.shutdown, wait=False)))
        return pending


class _Undo:
    """Something to call once the stream ended (outside the lock): a ``Cancellable``.

    A future's ``cancel`` runs its done callbacks, which take the stage's lock, so the
    futures in flight are cancelled after the lock is released, as timers are.
    """

    __slots__ = ("_action",)

    def __init__(self, action: Callable[[], object]) -> None:
        self._action = action

    def cancel(self) -> None:
        self._action()
