"""``from_async_iterable``: an async iterable (an async generator, say) as a publisher."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from .._core import (
    EmitLoopSubscription,
    ExecutorRejectedError,
    LoopExecutor,
    LoopThread,
    SourceCancelledError,
    report_undeliverable,
)
from ..api import Publisher, Subscriber

if TYPE_CHECKING:
    from collections.abc import AsyncIterable, AsyncIterator, Coroutine
    from typing import Any

__all__ = ["AsyncIterablePublisher", "from_async_iterable"]

T = TypeVar("T")

_BATCH: Final = 64
"""The emit loop's batch: more than the one item a pass can deliver, so it never yields."""


class AsyncIterablePublisher(Publisher[T], Generic[T]):
    """Publishes the items of an async iterable, pulling one item per unit of demand.

    Created by ``from_async_iterable``; see there.
    """

    __slots__ = ("_aiterable", "_loop")

    def __init__(
        self, aiterable: AsyncIterable[T], *, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        if not hasattr(aiterable, "__aiter__"):
            raise TypeError(f"from_async_iterable() needs an async iterable, got {aiterable!r}")
        self._aiterable = aiterable
        self._loop = loop

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Start iterating for ``subscriber`` on the publisher's event loop (Rule 1.9).

        Raises:
            TypeError: if ``subscriber`` is ``None`` (Rule 1.9).
        """
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe() requires a subscriber, got None")
        loop = self._loop
        private = None
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # called from plain threads: give the stream its own loop
                private = LoopThread("reactive-streams-async-iterable")
                loop = private.loop
        _AsyncIterableSubscription(subscriber, self._aiterable, loop, private).start()

    def __repr__(self) -> str:
        return f"AsyncIterablePublisher({self._aiterable!r})"


class _AsyncIterableSubscription(EmitLoopSubscription[T]):
    """One subscriber's iteration: the kit's emit loop, run as callbacks of the event loop.

    The emit loop's executor is the event loop (``LoopExecutor``), so every pass, and with
    it every signal, runs there; ``request``/``cancel`` from any thread only update the
    election and hop there (Rule 1.3). The source gives one item at a time: a pass with
    demand and no item starts one fetch task (``await anext(iterator)``), which stores
    the item (or the end, or the error) and wakes the loop. So exactly one item is awaited
    per unit of demand, and the source never runs ahead of the subscriber. The fetch
    task runs the pass itself (``wake_here``: it is on the loop already) and goes on
    awaiting while that pass wants more, so a steady stream costs no hop per item.
    """

    __slots__ = (
        "_aiterable",
        "_ended",
        "_error",
        "_event_loop",
        "_fetch",
        "_item",
        "_iterator",
        "_private",
        "_tasks",
        "_want",
    )

    def __init__(
        self,
        subscriber: Subscriber[T],
        aiterable: AsyncIterable[T],
        loop: asyncio.AbstractEventLoop,
        private: LoopThread | None,
    ) -> None:
        super().__init__(subscriber, executor=LoopExecutor(loop), batch_size=_BATCH)
        self._aiterable: AsyncIterable[T] | None = aiterable
        self._iterator: AsyncIterator[T] | None = None
        self._event_loop = loop
        self._private = private
        # The source's state below is only touched on the loop (or once it is closed).
        self._fetch: asyncio.Task[None] | None = None  # the task awaiting the next item
        self._item: T | None = None  # an item fetched and not yet delivered
        self._ended = False  # the iterator is exhausted or failed
        self._error: Exception | None = None
        self._want = False  # a pass run by the fetch task asked it for one more item
        self._tasks: set[asyncio.Task[None]] = set()  # every task started, until done

    # -- any thread ----------------------------------------------------------------------------

    def start(self) -> None:
        """Signal ``on_subscribe`` on the loop, then serve the demand (Rule 1.9)."""
        if self._private is None:
            _LOOP_WATCH.add(self)  # a loop we do not own may be closed under the stream
        super().start()

    @property
    def loop_closed(self) -> bool:
        """Whether the stream's event loop is closed."""
        return self._event_loop.is_closed()

    def abandon(self, error: Exception | None = None) -> None:
        """The loop was closed before the stream ended: end it here (any thread).

        Nothing can run on a closed loop any more, so no signal from the loop can overlap
        this one (Rule 1.3). Unless cancelled, the subscriber gets
        ``on_error(SourceCancelledError)``: the stream never ends without a terminal signal.
        """
        _LOOP_WATCH.remove(self)
        for task in list(self._tasks):
            # A task queued on the loop that never got to start can never run now; close its
            # coroutine, or its "never awaited" warning surfaces at some later collection.
            coroutine = task.get_coro()
            if (
                inspect.iscoroutine(coroutine)
                and inspect.getcoroutinestate(coroutine) == inspect.CORO_CREATED
            ):
                coroutine.close()
        super().abandon(error or _closed_under_the_stream())

    def _on_rejected(self, error: Exception) -> None:
        # The loop refused the pass: it is closed, and can never run one again.
        if isinstance(error, ExecutorRejectedError) and self._event_loop.is_closed():
            if self._election.cancelled:  # the subscriber cancelled: it wants no signal
                self._finish()
                return
            error = (
                _closed_under_the_stream()
                if self._subscribed
                else SourceCancelledError("the event loop is closed")
            )
        super()._on_rejected(error)

    # -- on the loop: the source of the emit loop -----------------------------------------------

    def _open(self) -> None:
        aiterable, self._aiterable = self._aiterable, None
        try:
            self._iterator = aiter(aiterable)  # type: ignore[arg-type]
        except Exception as exc:  # Rule 1.4
            self._ended = True
            self._error = exc

    def _emit(self, subscriber: Subscriber[T], count: int) -> int:
        item, self._item = self._item, None
        sent = 0 if item is None else self._deliver_each(subscriber, (item,))
        if self._election.cancelled:  # on_next cancelled, or raised (Rule 2.13)
            return sent
        if sent < count and not self._ended:  # one item for one unit of demand
            if self._fetch is None:
                self._fetch = self._spawn(self._pull())
            else:
                self._want = True  # the fetch task runs this pass: it awaits one more
        return sent

    async def _pull(self) -> None:
        """Await items one by one, each handed to a pass run here, while the pass wants more.

        A source that does not suspend runs its items through in this one task step, as
        an ``async for`` would; the task ends when the demand is used up or the source is.
        """
        iterator = self._iterator
        assert iterator is not None  # _open made it, or the stream ended (no pull then)
        try:
            while True:
                try:
                    item = await anext(iterator)
                except StopAsyncIteration:
                    self._ended = True
                    return
                except asyncio.CancelledError:
                    if not self._election.cancelled:  # cancelled by someone but the subscriber
                        self._ended = True
                        self._error = SourceCancelledError(
                            "the task feeding the stream was cancelled"
                        )
                    raise
                except Exception as exc:  # Rule 1.4
                    self._ended = True
                    self._error = exc
                    return
                if item is None:
                    self._ended = True
                    self._error = TypeError("Rule 2.13: the async iterable produced None")
                    return
                self._want = False
                left = self.emit_here(item)  # delivered now; or held, and a pass sets _want
                if not (self._want if left is None else left):
                    return
        finally:
            self._fetch = None
            self.wake_here()  # the end, the error, or a pass that was busy elsewhere

    def _hold(self, element: T) -> None:
        self._item = element

    def _exhausted(self) -> bool:
        return self._ended and self._item is None

    def _failure(self) -> Exception | None:
        return self._error if self._item is None else None

    def _close(self) -> None:
        if self._event_loop.is_closed():  # nothing can run there any more
            self._finished()
            return
        fetch = self._fetch
        if fetch is not None:
            fetch.cancel()  # interrupt the wait for the source; then close the iterator
        self._spawn(self._shut(fetch))

    async def _shut(self, fetch: asyncio.Task[None] | None) -> None:
        if fetch is not None and not fetch.done():
            await asyncio.wait((fetch,))  # an async generator cannot close while it runs
        iterator, self._iterator = self._iterator, None
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception as exc:
                report_undeliverable(exc)
        self._finished()

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Start a task on the loop and keep it referenced until done (asyncio keeps weak ones)."""
        task = self._event_loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _finished(self) -> None:
        _LOOP_WATCH.remove(self)
        if self._private is not None:
            private, self._private = self._private, None
            private.stop()


def _closed_under_the_stream() -> SourceCancelledError:
    return SourceCancelledError(
        "the event loop running from_async_iterable was closed before the stream ended"
    )


class _LoopWatch:
    """A liveness check for streams on event loops this module does not own.

    ``loop.close()`` without cancelling the tasks first leaves a pump task suspended
    forever, and nothing runs on a closed loop to tell the subscriber. While such streams
    are open, one daemon thread looks at their loops every ``period`` seconds and ends the
    streams of a closed loop with ``SourceCancelledError``. It exits when no stream is left.
    """

    def __init__(self, period: float) -> None:
        self._period = period
        self._lock = threading.Lock()
        self._streams: set[_AsyncIterableSubscription[Any]] = set()
        self._thread: threading.Thread | None = None

    def add(self, stream: _AsyncIterableSubscription[Any]) -> None:
        with self._lock:
            self._streams.add(stream)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="reactive-streams-loop-watch", daemon=True
                )
                self._thread.start()

    def remove(self, stream: _AsyncIterableSubscription[Any]) -> None:
        with self._lock:
            self._streams.discard(stream)

    def _run(self) -> None:
        idle = threading.Event()
        while True:
            idle.wait(self._period)
            with self._lock:
                if not self._streams:
                    self._thread = None
                    return
                closed = [stream for stream in self._streams if stream.loop_closed]
            for stream in closed:
                stream.abandon()


_LOOP_WATCH = _LoopWatch(period=0.25)


def from_async_iterable(
    aiterable: AsyncIterable[T], *, loop: asyncio.AbstractEventLoop | None = None
) -> AsyncIterablePublisher[T]:
    """Publish the items of ``aiterable``, pulling exactly one item per unit of demand.

    Each subscriber gets its own ``aiter(aiterable)``: an async generator can be consumed
    once, an async iterable whose ``__aiter__`` returns a fresh iterator many times.

    Because nothing is pulled without demand, the end of the source is discovered when the
    item after the last one is awaited: a subscriber that requested exactly as many items
    as there were gets ``on_complete`` after its next ``request`` (Rules 1.2, 2.9).

    Args:
        aiterable: the source; each item is one ``on_next``.
        loop: the event loop that runs the iteration and every signal. ``None`` uses the
            loop running where ``subscribe`` is called, or, when there is none, a private
            loop on a daemon thread that stops when the stream ends.

    Returns:
        A ``Publisher``. ``request`` and ``cancel`` may be called from any thread: they hop
        onto the loop with ``call_soon_threadsafe`` and never block it.

    Signals:
        ``on_error`` with the iterator's exception (Rule 1.4); ``on_error(TypeError)`` for a
        ``None`` item (Rule 2.13); ``on_error(SourceCancelledError)`` when the pulling task
        is cancelled by anyone but the subscriber (a loop shutting down, say), when the
        loop is already closed at subscribe time, and when the loop is closed while the
        stream is open without its tasks being cancelled (seen by the next ``request``, or
        within about a quarter of a second by a watchdog thread that runs while such
        streams exist). Cancel closes the iterator with
        ``aclose()``, so an async generator's ``finally`` blocks run.

    Raises:
        TypeError: if ``aiterable`` is not an async iterable.

    Example:
        >>> from reactive_streams.testing import collect
        >>> async def countdown():
        ...     for value in (3, 2, 1):
        ...         yield value
        >>> collect(from_async_iterable(countdown()))
        [3, 2, 1]
    """
    return AsyncIterablePublisher(aiterable, loop=loop)
