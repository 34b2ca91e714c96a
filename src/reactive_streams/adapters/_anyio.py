"""Bridges between reactive streams and anyio object streams, on asyncio and on trio.

Publishers here are synchronous: ``subscribe``, ``request`` and ``on_next`` run on whatever
thread calls them, and a synchronous upstream may do real work inside ``request``. So the
bridges never call upstream from the event loop thread: upstream calls run on a worker
thread, batched (one ``request`` per 75% of the buffer, one loop hop per batch of
elements), and the event loop is only ever handed short non-blocking callbacks.

* ``from_receive_stream(stream)``: a worker thread owned by the subscription runs the
  drain loop; each pass asks the event loop (``anyio.from_thread.run``) for up to the
  outstanding demand, waiting for the first element and taking the rest without waiting.
  ``cancel`` interrupts a pending receive and closes the stream.
* ``to_receive_stream(publisher, *, max_buffer_size)``: the subscriber side; elements
  arriving on any thread are queued and moved into a memory object stream of
  ``max_buffer_size`` by one loop callback per batch. Upstream demand is what the stream
  can still hold: ``max_buffer_size`` at first, then what the consumer took, each time it
  took 75% (``replenish_threshold``).
"""

from __future__ import annotations

import asyncio
import importlib
import queue
import threading
from collections import deque
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._core import (
    DrainLoop,
    EmitterElection,
    MissingBackpressureError,
    Operator,
    StageStatistics,
    accept_subscription,
    cancel_quietly,
    check_positive,
    check_subscriber,
    replenish_threshold,
    report_undeliverable,
    signal_error_only,
    signal_on_complete,
    signal_on_error,
    signal_on_next,
    signal_on_subscribe,
)
from ..api import Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from anyio.abc import ObjectReceiveStream
    from anyio.lowlevel import EventLoopToken
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["ReceiveStreamPublisher", "from_receive_stream", "to_receive_stream"]

T = TypeVar("T")

_INSTALL_HINT = (
    "reactive_streams.adapters.anyio needs anyio: pip install 'reactive-streams-py[anyio]'"
)

_BATCH = 1024
"""The most elements one pass of ``from_receive_stream`` takes from the event loop."""


def _anyio() -> Any:
    """Import anyio, or raise ``ImportError`` saying what to install."""
    try:
        return importlib.import_module("anyio")
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc


class _WorkerThread(Executor):
    """One daemon thread running submitted calls in order: a subscription's own worker.

    A daemon, unlike ``ThreadPoolExecutor``'s workers, because a pass may be waiting on an
    event loop that was torn down under a live subscription; such a thread must not keep
    the interpreter from exiting. A call that raises is reported, never lost.
    """

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Queue ``fn(*args, **kwargs)``; its ``Future`` completes when it has run."""
        future: Future[T] = Future()

        def call() -> None:
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # the DrainLoop reported it already
                future.set_exception(exc)

        self._calls.put(call)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop after the queued calls (never waits: it may be called from the worker)."""
        self._calls.put(None)

    def _run(self) -> None:
        while (call := self._calls.get()) is not None:
            call()


class _LoopHandle:
    """Schedule a short callback on the running event loop from any thread, without waiting.

    anyio has no portable non-blocking ``call_soon_threadsafe``; each backend has its own
    (asyncio's ``loop.call_soon_threadsafe``, trio's ``TrioToken.run_sync_soon``), so this
    is the one place that tells them apart (with ``sniffio``, as anyio itself does).
    """

    __slots__ = ("_call",)

    def __init__(self) -> None:
        library = importlib.import_module("sniffio").current_async_library()
        if library == "asyncio":
            self._call: Callable[[Callable[[], object]], object] = (
                asyncio.get_running_loop().call_soon_threadsafe
            )
        elif library == "trio":
            trio = importlib.import_module("trio")
            self._call = trio.lowlevel.current_trio_token().run_sync_soon
        else:  # pragma: no cover - anyio supports only these two
            raise RuntimeError(f"unsupported async library {library!r}")

    def call_soon(self, callback: Callable[[], object]) -> bool:
        """Run ``callback`` on the loop soon; ``False`` if the loop is gone."""
        try:
            self._call(callback)
        except RuntimeError:  # asyncio: loop closed; trio: RunFinishedError
            return False
        return True


# ---------------------------------------------------------------------- receive stream -> Publisher
class ReceiveStreamPublisher(Operator[T]):
    """A ``Publisher`` that pulls from an anyio ``ObjectReceiveStream``: one subscriber only.

    Built by ``from_receive_stream``. A stream is consumed once, so a second subscriber
    gets ``on_subscribe`` then ``on_error(RuntimeError)`` (Rules 1.9, 1.11).
    """

    __slots__ = ("_executor", "_handle", "_stream", "_subscribed", "_token")

    def __init__(
        self,
        stream: ObjectReceiveStream[T],
        token: EventLoopToken,
        handle: _LoopHandle,
        executor: Executor | None,
    ) -> None:
        super().__init__()
        self._stream = stream
        self._token = token
        self._handle = handle
        self._executor = executor
        self._subscribed = False

    @property
    def name(self) -> str:
        return "from_receive_stream"

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Serve ``subscriber``, the only one (Rule 1.9)."""
        check_subscriber(subscriber)
        with self._track_lock:
            second, self._subscribed = self._subscribed, True
        if second:
            signal_error_only(
                subscriber,
                RuntimeError("from_receive_stream: the stream already has a subscriber"),
            )
            return
        subscription = _PullSubscription(
            self._stream, subscriber, self._token, self._handle, self._executor
        )
        self._track(subscription)
        subscription.start(subscriber)


class _PullSubscription(Subscription):
    """Demand pulls from the stream, on a worker thread, a batch per pass.

    ``EmitterElection`` accounts demand and elects the pass owner; ``DrainLoop`` runs the
    passes on the worker (so the event loop thread only runs ``_receive_batch``). A pass
    that raises ends the stream through ``_fail``: the stream closed, one ``on_error``.
    """

    __slots__ = (
        "_bad_request",
        "_closed",
        "_downstream",
        "_election",
        "_ended",
        "_handle",
        "_held",
        "_lock",
        "_loop",
        "_own_executor",
        "_scope",
        "_stream",
        "_token",
    )

    def __init__(
        self,
        stream: ObjectReceiveStream[Any],
        downstream: Subscriber[Any],
        token: EventLoopToken,
        handle: _LoopHandle,
        executor: Executor | None,
    ) -> None:
        self._stream = stream
        self._downstream: Subscriber[Any] | None = downstream
        self._token = token
        self._handle = handle
        self._lock = threading.Lock()
        self._scope: Any = None  # the CancelScope of a pending receive, loop thread only
        self._closed = False
        self._bad_request = False
        self._held: deque[Any] = deque()  # received, not yet delivered: the look-ahead
        self._ended = False  # the stream signalled EndOfStream
        self._own_executor: _WorkerThread | None = None
        if executor is None:
            # a receive may wait for a long time: one thread per subscription, not a pool
            executor = self._own_executor = _WorkerThread("rs-from-receive-stream")
        self._election = EmitterElection()
        self._loop = DrainLoop(
            self._drain,
            executor=executor,
            guard=self._election,
            on_failure=self._fail,
            on_rejected=self._fail,
        )

    def start(self, subscriber: Subscriber[Any]) -> None:
        """Signal ``on_subscribe``; no pass runs before it returns (Rule 1.3).

        The election is held during ``on_subscribe``, so a ``request`` made from inside it
        only leaves a "missed" mark; the first pass starts here, afterwards, with or
        without demand: it looks one item ahead, so an empty or failed stream ends at once
        (Rules 1.4, 1.5).
        """
        self._election.acquire()
        if not signal_on_subscribe(subscriber, self):
            self._election.cancel()
        self._loop.start_owned()

    def statistics(self) -> StageStatistics:
        election = self._election
        return StageStatistics(
            requested=election.requested,
            delivered=election.delivered,
            buffered=len(self._held),
            cancelled=election.cancelled,
            terminated=election.terminated,
        )

    def request(self, n: int) -> None:
        """Add demand; the worker pulls it from the stream.

        A bad ``n`` is signalled as ``on_error`` (Rule 3.9), interrupting a pending receive.
        """
        if type(n) is not int or n <= 0:
            self._bad_request = True  # Rule 3.9: the election parks the error to signal
        if self._election.request(n):
            self._loop.start_owned()
        elif self._bad_request:
            self._interrupt()  # the owner may be waiting on the stream: let it see the error

    def cancel(self) -> None:
        """Stop (Rule 3.7): interrupt a pending receive; the worker closes the stream."""
        if self._election.cancel():
            self._loop.start_owned()
        else:
            self._interrupt()

    def _interrupt(self) -> None:
        """Cancel a pending ``_receive_batch``, if any (from any thread, without waiting)."""
        with self._lock:
            scope = self._scope
        if scope is not None:
            self._handle.call_soon(scope.cancel)

    # ------------------------------------------------------------------ on the worker
    def _drain(self) -> bool:
        election = self._election
        downstream = self._downstream
        error = election.take_error()
        if election.cancelled or downstream is None:
            self._finish(None)  # cancelled: a parked Rule 3.9 error is not signalled
            return False
        if error is not None:
            self._finish(error)
            return False
        held = self._held
        wanted = max(1, min(election.demand, _BATCH))  # at least one: the look-ahead
        if not self._ended and len(held) < wanted:
            anyio = _anyio()
            items, self._ended = anyio.from_thread.run(
                self._receive_batch, wanted - len(held), token=self._token
            )
            held.extend(items)
        sent = 0
        while held and sent < election.demand and not self._is_cancelled():
            if not signal_on_next(downstream, held.popleft()):
                election.cancel()
                break
            sent += 1
        if sent:
            election.produced(sent)
        if self._is_cancelled():
            return True  # one more pass closes the stream
        if self._ended and not held:
            election.terminate()
            self._downstream = None
            self._close_stream()
            signal_on_complete(downstream)
            return False
        # more to do: deliver within demand, or look one element ahead (to see the end)
        return bool(held and election.demand) or not (held or self._ended)

    def _is_cancelled(self) -> bool:
        return self._election.cancelled  # a call, so it is read afresh each time

    async def _receive_batch(self, wanted: int) -> tuple[list[Any], bool]:
        """On the loop: wait for one element, then take up to ``wanted`` without waiting."""
        anyio = _anyio()
        items: list[Any] = []
        with anyio.CancelScope() as scope:
            with self._lock:
                self._scope = scope
            try:
                if self._election.cancelled or self._bad_request:
                    return items, False
                # a stream without receive_nowait (not a memory stream): one item per pass
                receive_nowait = getattr(self._stream, "receive_nowait", None)
                try:
                    items.append(await self._stream.receive())
                    while receive_nowait is not None and len(items) < wanted:
                        items.append(receive_nowait())
                except anyio.WouldBlock:
                    pass
                except anyio.EndOfStream:
                    return items, True
            finally:
                with self._lock:
                    self._scope = None
        return items, False

    def _finish(self, error: Exception | None) -> None:
        """Cancelled, or a Rule 3.9 error: close the stream, signal the error if any."""
        self._election.retire()
        downstream, self._downstream = self._downstream, None
        self._close_stream()
        if error is not None and downstream is not None:
            signal_on_error(downstream, error)

    def _fail(self, error: Exception) -> None:
        """A pass raised (the stream broke, the loop is gone): close, one ``on_error``."""
        self._election.terminate()
        downstream, self._downstream = self._downstream, None
        self._close_stream()
        if downstream is None:
            report_undeliverable(error)
        else:
            signal_on_error(downstream, error)

    def _close_stream(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        close = getattr(self._stream, "close", None)  # memory streams close synchronously
        if close is not None:
            if not self._handle.call_soon(close):
                close()  # the loop is gone: nobody else can touch the stream now
        else:
            try:
                _anyio().from_thread.run(self._stream.aclose, token=self._token)
            except Exception as exc:  # the loop is gone, or aclose broke
                report_undeliverable(exc)
        if self._own_executor is not None:
            self._own_executor.shutdown(wait=False)


def from_receive_stream(
    stream: ObjectReceiveStream[T], *, executor: Executor | None = None
) -> ReceiveStreamPublisher[T]:
    """Publish the items of an anyio receive stream; demand pulls them, cancel closes it.

    Call it from inside the event loop that owns ``stream`` (asyncio or trio, through
    anyio); the publisher then works from any thread.

    Marble::

        stream:   -a-b-c-d-|
        request:  (2)....(5)
        result:   -a-b...-c-d-|

    Args:
        stream: any ``anyio.abc.ObjectReceiveStream`` (a ``MemoryObjectReceiveStream``,
            a ``BufferedByteReceiveStream`` wrapped as objects, ...). Items are elements;
            ``None`` breaks Rule 2.13.
        executor: where the subscription's passes run; by default a daemon thread of its own,
            shut down when the stream ends (a pass may wait on the stream for long).

    Returns:
        A single-subscriber ``Publisher``. End of stream becomes ``on_complete``; an
        exception from ``receive`` (``BrokenResourceError``, ``ClosedResourceError``,
        an event loop that has finished) becomes ``on_error``, once.

    Raises:
        ImportError: anyio is not installed.
        anyio.NoEventLoopError: not called from a running event loop.

    Backpressure:
        Each pass takes at most the outstanding demand (and at most 1024), waiting only
        for the first item. With no demand the subscription waits for one item ahead
        (held, shown in ``statistics().buffered``), so that the end of the stream is
        signalled without waiting for more demand (Rule 1.5): never more than one item
        is received beyond demand.

    Concurrency:
        ``request`` and ``cancel`` return at once from any thread, the event loop's
        included. ``on_next`` runs on the worker thread, never on the event loop thread,
        so a slow subscriber never blocks the loop; a pending receive is interrupted by
        ``cancel`` (Rule 3.5).
    """
    anyio = _anyio()
    token = anyio.lowlevel.current_token()
    return ReceiveStreamPublisher(stream, token, _LoopHandle(), executor)


# ---------------------------------------------------------------------- Publisher -> receive stream
_SHARED_POOL: ThreadPoolExecutor | None = None
_SHARED_POOL_LOCK = threading.Lock()


def _shared_pool() -> ThreadPoolExecutor:
    """The worker threads that subscribe and request upstream for ``to_receive_stream``."""
    global _SHARED_POOL
    with _SHARED_POOL_LOCK:
        if _SHARED_POOL is None:
            _SHARED_POOL = ThreadPoolExecutor(4, thread_name_prefix="rs-to-receive-stream")
        return _SHARED_POOL


def _receive_stream_type() -> type[MemoryObjectReceiveStream[Any]]:
    """The ``MemoryObjectReceiveStream`` subclass that reports each receive to its bridge."""
    memory = importlib.import_module("anyio.streams.memory")
    base: type[MemoryObjectReceiveStream[Any]] = memory.MemoryObjectReceiveStream

    class DemandReceiveStream(base):  # type: ignore[valid-type,misc]
        """A ``MemoryObjectReceiveStream`` whose receives replenish upstream demand."""

        _on_receive: Callable[[], None] | None = None

        def receive_nowait(self) -> Any:
            item = super().receive_nowait()
            if self._on_receive is not None:
                self._on_receive()
            return item

        async def receive(self) -> Any:
            item = await super().receive()
            if self._on_receive is not None:
                self._on_receive()  # idempotent: the bridge recomputes what was consumed
            return item

        def clone(self) -> Any:
            if self._closed:
                return super().clone()  # raises ClosedResourceError
            twin = type(self)(_state=self._state)
            twin._on_receive = self._on_receive
            return twin

    DemandReceiveStream.__name__ = DemandReceiveStream.__qualname__ = "MemoryObjectReceiveStream"
    return DemandReceiveStream


class _StreamBridge(Subscriber[T], Generic[T]):
    """The subscriber behind ``to_receive_stream``.

    Elements from any thread go into ``_pending``; the first one of a batch schedules
    ``_flush`` on the loop, which moves the batch into the memory stream with
    ``send_nowait`` (it cannot block: upstream demand never exceeds the free space).
    ``_on_receive`` (loop thread, after every receive) computes what the consumer took,
    ``_sent - buffer used``, and once that reaches 75% of ``max_buffer_size`` hands a
    ``request`` of that size to the worker (``_requests`` drain loop).

    State under ``_lock``: ``_pending``, ``_scheduled``, ``_done``/``error`` (upstream
    ended), ``_closed`` (the context was left), ``_to_request`` (demand the worker has to
    send), ``_subscription``.
    """

    def __init__(self, send: MemoryObjectSendStream[T], size: int, handle: _LoopHandle) -> None:
        self._send = send
        self._size = size
        self._limit = replenish_threshold(size)
        self._handle = handle
        self._lock = threading.Lock()
        self._pending: deque[T] = deque()
        self._scheduled = False
        self._done = False
        self._closed = False
        self.error: Exception | None = None
        self._subscription: Subscription | None = None
        self._sent = 0  # loop thread only
        self._granted = size  # loop thread only: demand granted so far, in total
        self._to_request = 0
        self._cancel = False
        self._requests = DrainLoop(self._request_pass, executor=_shared_pool())

    # ------------------------------------------------------------------ upstream signals
    def on_subscribe(self, subscription: Subscription) -> None:
        if not accept_subscription(subscription, self._claim):
            return  # Rule 2.5, or the context was already left
        self._requests.schedule()

    def _claim(self, subscription: Subscription) -> bool:
        with self._lock:
            if self._subscription is not None or self._closed:
                return False
            self._subscription = subscription
            self._to_request += self._size
            return True

    def on_next(self, element: T) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        with self._lock:
            if self._done or self._closed:
                return
            self._pending.append(element)
            schedule = not self._scheduled
            self._scheduled = True
        if schedule:
            self._handle.call_soon(self._flush)

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        self._end(error)

    def on_complete(self) -> None:
        self._end(None)

    def _end(self, error: Exception | None) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            if self.error is None:
                self.error = error
            schedule = not self._scheduled
            self._scheduled = True
        if schedule and not self._handle.call_soon(self._flush) and error is not None:
            report_undeliverable(error)  # the loop is gone: nobody can receive it

    # ------------------------------------------------------------------ on the loop
    def _flush(self) -> None:
        """On the loop: ``_move``, and nothing ever escapes into the event loop."""
        try:
            self._move()
        except Exception as exc:  # a bug of ours: end the stream with it, cancel upstream
            self._stop(exc)

    def _move(self) -> None:
        """Move pending elements into the stream; close it after the terminal signal."""
        anyio = _anyio()
        with self._lock:
            batch = list(self._pending)
            self._pending.clear()
            self._scheduled = False
            done = self._done
            closed = self._closed
        if closed:
            return
        send = self._send
        try:
            for element in batch:
                send.send_nowait(element)
                self._sent += 1
        except anyio.WouldBlock:  # upstream sent more than requested (Rule 1.1)
            self._stop(
                MissingBackpressureError(
                    f"Rule 1.1: to_receive_stream: the upstream sent more than the "
                    f"{self._size} elements the stream can hold (max_buffer_size)"
                )
            )
            return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._stop(None)  # the consumer closed its end: nobody wants more
            return
        if done:
            send.close()

    def _stop(self, error: Exception | None) -> None:
        with self._lock:
            if error is not None and self.error is None:
                self.error = error
            self._done = True
            self._cancel = True
        self._requests.schedule()
        self._send.close()

    def on_receive(self) -> None:
        """After each receive (loop thread): replenish what the consumer took."""
        used = self._send.statistics().current_buffer_used
        consumed = self._sent - used
        owed = consumed + self._size - self._granted
        if owed >= self._limit:
            self._granted += owed
            with self._lock:
                self._to_request += owed
            self._requests.schedule()

    def close(self) -> None:
        """The context was left: cancel upstream (on the worker), drop what is pending."""
        with self._lock:
            self._closed = True
            self._cancel = True
            self._pending.clear()
        self._requests.schedule()

    # ------------------------------------------------------------------ on the worker
    def _request_pass(self) -> None:
        with self._lock:
            subscription = self._subscription
            count, self._to_request = self._to_request, 0
            cancel = self._cancel
            if cancel:
                self._subscription = None
        if subscription is None:
            return
        if cancel:
            cancel_quietly(subscription)
        elif count:
            try:
                subscription.request(count)
            except Exception as exc:  # the upstream broke Rule 3.16: end with its error
                cancel_quietly(subscription)
                self._end(exc)


@asynccontextmanager
async def to_receive_stream(
    publisher: Publisher[T], *, max_buffer_size: int
) -> AsyncIterator[MemoryObjectReceiveStream[T]]:
    """Subscribe to ``publisher`` and receive its elements from an anyio memory stream.

    Use it as ``async with to_receive_stream(publisher, max_buffer_size=64) as stream:``
    then ``async for element in stream``. Leaving the block cancels the subscription.

    Marble (``max_buffer_size=4``: requests 4, then 3 each time 3 were received)::

        publisher: -1-2-3-4-5-6-7-|
        request:   (4)......(3).....(3)
        stream:    -1-2-3-4-5-6-7-|

    Args:
        publisher: any publisher of ``T``.
        max_buffer_size: the stream's buffer and the most elements ever requested and
            not yet received, ``>= 1``.

    Yields:
        A ``MemoryObjectReceiveStream[T]`` (a subclass that replenishes demand as items
        are received). It ends (``EndOfStream``) after the last element.

    Raises:
        ImportError: anyio is not installed.
        TypeError, ValueError: ``max_buffer_size`` is not a positive ``int``.
        Exception: the publisher's ``on_error`` error (or a ``MissingBackpressureError``
            if it sent more than requested), raised when the block is left normally
            after the stream ended; when the block raised itself, that exception wins
            and the stream's error goes to the undeliverable hook.

    Backpressure:
        The memory stream's buffer is the demand: ``max_buffer_size`` at first, then
        exactly what the consumer took, in batches of 75% (``replenish_threshold``).

    Concurrency:
        ``subscribe`` and every ``request``/``cancel`` run on a worker thread, so a
        synchronous upstream that produces inside ``request`` never runs on the event
        loop. Elements cross to the loop one callback per batch.
    """
    anyio = _anyio()
    check_positive("max_buffer_size", max_buffer_size)
    send, plain = anyio.create_memory_object_stream(max_buffer_size)
    stream_type = _receive_stream_type()
    receive: Any = stream_type(_state=plain._state)  # the one use of anyio's private state
    plain.close()  # the subclass has its own count of open receive ends
    bridge: _StreamBridge[T] = _StreamBridge(send, max_buffer_size, _LoopHandle())
    receive._on_receive = bridge.on_receive
    failed = True
    try:
        await anyio.to_thread.run_sync(publisher.subscribe, bridge)
        yield receive
        failed = False
    finally:
        bridge.close()
        send.close()
        receive.close()
        error = bridge.error
        if error is not None:
            if failed:
                report_undeliverable(error)
            else:
                raise error
