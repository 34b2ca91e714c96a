"""``from_async_iterable``: an async iterable (an async generator, say) as a publisher."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import TYPE_CHECKING, Generic, TypeVar

from .._core import (
    MAX_DEMAND,
    LoopThread,
    ProtocolViolationError,
    SourceCancelledError,
    StreamStatistics,
    add_demand,
    report_undeliverable,
    signal_on_complete,
    signal_on_error,
    signal_on_next,
    signal_on_subscribe,
    validate_request,
)
from ..api import Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import AsyncIterable, AsyncIterator, Callable, Coroutine
    from typing import Any

__all__ = ["AsyncIterablePublisher", "from_async_iterable"]

T = TypeVar("T")


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


class _AsyncIterableSubscription(Subscription, Generic[T]):
    """One subscriber's iteration. Signals run on the loop; ``request``/``cancel`` hop there.

    The pump task is the single emitter (Rule 1.3): it is started when demand appears and
    nobody is pumping, and it stops when demand is used up. It awaits exactly one item per
    unit of demand, so the source never runs ahead of the subscriber.
    """

    def __init__(
        self,
        subscriber: Subscriber[T],
        aiterable: AsyncIterable[T],
        loop: asyncio.AbstractEventLoop,
        private: LoopThread | None,
    ) -> None:
        self._subscriber: Subscriber[T] | None = subscriber
        self._aiterable: AsyncIterable[T] | None = aiterable
        self._iterator: AsyncIterator[T] | None = None
        self._loop = loop
        self._private = private
        self._lock = threading.Lock()
        self._demand = 0
        self._requested = 0
        self._delivered = 0
        self._error: ProtocolViolationError | None = None
        self._cancelled = False
        self._terminated = False
        self._started = False  # on_subscribe was signalled and the iterator is ready
        self._pumping = False
        self._awaiting_source = False  # the pump is inside `await anext(iterator)`
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # every task started, until done

    # -- any thread ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._private is None:
            _LOOP_WATCH.add(self)  # a loop we do not own may be closed under the stream
        if not self._hop(self._begin):
            _LOOP_WATCH.remove(self)
            # The loop is closed: nothing can ever run there. Tell the subscriber here.
            subscriber, self._subscriber = self._subscriber, None
            self._terminated = self._cancelled = True
            if subscriber is not None and signal_on_subscribe(subscriber, self):
                signal_on_error(subscriber, SourceCancelledError("the event loop is closed"))

    def request(self, n: int) -> None:
        """Add demand (Rule 3.8) or park a Rule 3.9 error; never raises (Rule 3.16)."""
        try:
            count = validate_request(n)
        except ProtocolViolationError as error:
            count = 0
            bad: ProtocolViolationError | None = error
        else:
            bad = None
        with self._lock:
            if self._cancelled:
                return  # Rule 3.6
            if bad is not None:
                self._error = self._error or bad
            else:
                self._demand = add_demand(self._demand, count)
                self._requested = add_demand(self._requested, count)
            start = self._started and not self._pumping
            if start:
                self._pumping = True
        if self._loop.is_closed() or (start and not self._hop(self._start_pump)):
            self.abandon()

    def cancel(self) -> None:
        """Stop pulling, close the async iterator (``aclose``) and drop the subscriber."""
        with self._lock:
            if self._cancelled:
                return  # Rule 3.7
            self._cancelled = True
        self._subscriber = None  # Rule 3.13
        if not self._hop(self._on_cancel):
            _LOOP_WATCH.remove(self)

    def statistics(self) -> StreamStatistics:
        """Requested and delivered counts; ``buffered`` is always 0 (no read-ahead)."""
        with self._lock:
            return StreamStatistics(
                requested=self._requested,
                delivered=self._delivered,
                buffered=0,
                cancelled=self._cancelled,
                terminated=self._terminated,
            )

    @property
    def loop_closed(self) -> bool:
        """Whether the stream's event loop is closed."""
        return self._loop.is_closed()

    def _hop(self, callback: Callable[[], None]) -> bool:
        try:
            self._loop.call_soon_threadsafe(callback)
        except RuntimeError:  # the loop is closed
            return False
        return True

    # -- on the loop ---------------------------------------------------------------------------

    def _begin(self) -> None:
        subscriber = self._subscriber
        if subscriber is None:
            self._finished()
            return
        if not signal_on_subscribe(subscriber, self):  # Rule 2.13: treat as cancelled
            self.cancel()
            return
        aiterable, self._aiterable = self._aiterable, None
        try:
            self._iterator = aiter(aiterable)  # type: ignore[arg-type]
        except Exception as exc:  # Rule 1.4
            self._terminate(exc)
            return
        with self._lock:
            self._started = True
            start = not self._cancelled and (self._demand > 0 or self._error is not None)
            self._pumping = start
        if start:
            self._start_pump()

    def _start_pump(self) -> None:
        self._task = self._spawn(self._pump())

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Start a task on the loop and keep it referenced until done (asyncio keeps weak ones)."""
        task = self._loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _pump(self) -> None:
        iterator = self._iterator
        if iterator is None:  # closed by a cancel that overtook this pump's start
            self._finished()
            return
        try:
            while True:
                with self._lock:
                    if self._cancelled:
                        break
                    error, self._error = self._error, None
                    if error is None and self._demand == 0:
                        self._pumping = False
                        return
                if error is not None:  # Rule 3.9
                    self._terminate(error)
                    return
                try:
                    self._awaiting_source = True
                    element = await anext(iterator)
                except StopAsyncIteration:
                    self._terminate(None)
                    return
                except Exception as exc:  # Rule 1.4
                    self._terminate(exc)
                    return
                finally:
                    self._awaiting_source = False
                if element is None:
                    self._terminate(TypeError("Rule 2.13: the async iterable produced None"))
                    return
                with self._lock:
                    if self._cancelled_meanwhile():
                        break  # the subscriber cancelled while we awaited: it wants no more
                    if self._demand != MAX_DEMAND:
                        self._demand -= 1
                    self._delivered += 1
                subscriber = self._subscriber
                if subscriber is None or not signal_on_next(subscriber, element):
                    self.cancel()  # Rule 2.13
                    break
        except asyncio.CancelledError:
            if not self._cancelled:  # cancelled by someone other than the subscriber
                self._terminate(SourceCancelledError("the task feeding the stream was cancelled"))
            else:
                await self._close_iterator()
                self._finished()
            raise
        await self._close_iterator()
        self._finished()

    def _cancelled_meanwhile(self) -> bool:
        return self._cancelled

    def _on_cancel(self) -> None:
        task = self._task
        if task is not None and not task.done():
            if self._awaiting_source:
                task.cancel()  # interrupt the wait for the source; the pump then closes it
            return  # otherwise the pump sees the cancel at its next step and closes
        if self._pumping:
            return  # a pump start is queued behind us: it sees the cancel and closes
        self._spawn(self._close_and_finish())

    async def _close_and_finish(self) -> None:
        await self._close_iterator()
        self._finished()

    async def _close_iterator(self) -> None:
        iterator, self._iterator = self._iterator, None
        aclose = getattr(iterator, "aclose", None)
        if aclose is None:
            return
        try:
            await aclose()
        except Exception as exc:
            report_undeliverable(exc)

    def _terminate(self, error: Exception | None) -> None:
        """Signal the terminal state (Rules 1.4, 1.5) and make the subscription inert."""
        with self._lock:
            already = self._cancelled
            self._cancelled = self._terminated = True  # Rule 1.6
        subscriber, self._subscriber = self._subscriber, None
        if not already and subscriber is not None:
            if error is None:
                signal_on_complete(subscriber)
            else:
                signal_on_error(subscriber, error)
        self._spawn(self._close_and_finish())

    def abandon(self) -> None:
        """The loop was closed before the stream ended: end it here (any thread).

        Nothing can run on a closed loop any more, so no signal from the loop can overlap
        this one (Rule 1.3). Unless cancelled, the subscriber gets
        ``on_error(SourceCancelledError)``: the stream never ends without a terminal signal.
        """
        _LOOP_WATCH.remove(self)
        with self._lock:
            already = self._cancelled
            self._cancelled = self._terminated = True
        for task in list(self._tasks):
            # A task queued on the loop that never got to start can never run now; close its
            # coroutine, or its "never awaited" warning surfaces at some later collection.
            coroutine = task.get_coro()
            if (
                inspect.iscoroutine(coroutine)
                and inspect.getcoroutinestate(coroutine) == inspect.CORO_CREATED
            ):
                coroutine.close()
        subscriber, self._subscriber = self._subscriber, None
        if not already and subscriber is not None:
            signal_on_error(
                subscriber,
                SourceCancelledError(
                    "the event loop running from_async_iterable was closed before the stream ended"
                ),
            )

    def _finished(self) -> None:
        _LOOP_WATCH.remove(self)
        if self._private is not None:
            private, self._private = self._private, None
            private.stop()


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
