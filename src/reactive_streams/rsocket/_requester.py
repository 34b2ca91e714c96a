"""The requester side of a stream: a ``Publisher[bytes]`` whose elements come over the wire.

Each ``subscribe`` opens a new RSocket stream (a cold publisher, Rule 1.11). The mapping:

* The stream opens right after ``on_subscribe`` returns, demand or not, so that a route
  that fails (unknown, refused, a factory that raises) reaches the subscriber as
  ``on_error`` even if it never requests (Rules 1.4, 1.9). Its initial request-n is the
  demand signalled inside ``on_subscribe``, or 1 without any: that one element is held in
  a one-element buffer until the subscriber requests it (Rule 1.1).
* ``request(n)`` adds to the subscriber's demand (Rule 3.8). Demand is carried on the wire
  as the initial request-n of ``REQUEST_STREAM`` and then as ``REQUEST_N`` frames. The
  credit granted to the peer never exceeds the demand not yet covered by elements in hand
  (or 1, the eager open's credit), and is capped at ``window`` (at most ``2**31 - 1``,
  RSocket's largest request-n): unbounded demand (``MAX_DEMAND``, Rule 3.17) is topped up
  as the elements are consumed, when the credit left falls to half the window.
* ``cancel()`` sends ``CANCEL`` (Rule 3.5: idempotent, from any thread).
* ``PAYLOAD`` frames become ``on_next``; the COMPLETE flag becomes ``on_complete`` after the
  elements already received; an ``ERROR`` frame, the connection failing, a keepalive
  timeout or a malformed frame become ``on_error``. Exactly one terminal signal per stream.
* A peer that sends more payloads than it was granted breaks the protocol: the excess is
  not buffered, the stream gets ``on_error`` with a ``ProtocolViolationError`` (Rule 1.1)
  and the peer gets ``CANCEL``.

The subscriber is never called on the connection's event loop: frames only fill a buffer
(at most the credit granted), and a ``DrainLoop`` on the client's executor delivers them,
one pass at a time (Rules 1.3, 2.7), elected by ``EmitterElection`` so that a ``request``
from inside ``on_next`` only adds demand (Rule 3.3).
"""

from __future__ import annotations

import functools
import threading
from collections import deque
from operator import length_hint
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from .._core import (
    DrainLoop,
    EmitterElection,
    ProtocolViolationError,
    StreamStatistics,
    run_receiver,
    signal_each,
    signal_on_complete,
    signal_on_error,
    signal_on_subscribe,
)
from ..api import Publisher, Subscriber, Subscription
from ._connection import StreamHandler
from ._errors import RSocketConnectionError, RSocketStreamError, code_name
from ._frames import (
    FLAG_COMPLETE,
    FLAG_NEXT,
    MAX_REQUEST_N,
    FrameType,
    encode_cancel,
    encode_fragments,
    encode_request_n,
)
from ._payload import Payload

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from concurrent.futures import Executor

    from .._core import ExecutorRejectedError
    from ._client_connection import ClientConnection
    from ._frames import Frame

__all__ = ["RemotePublisher"]

T = TypeVar("T")

_PAYLOAD: Final[int] = int(FrameType.PAYLOAD)
_BATCH: Final[int] = 512
"""Elements delivered per drain pass before the pass yields the executor."""
_STEP: Final[int] = 64
"""Elements delivered between two looks at the credit to grant (see ``_deliver``)."""


class RemotePublisher(Publisher[T], Generic[T]):
    """A remote stream: each subscriber opens its own RSocket stream (Rule 1.11).

    Elements are the payloads' data as ``bytes``, or ``Payload`` objects (data and
    metadata) when built with ``payloads=True``. See the module docstring for how demand,
    cancellation and termination map onto frames.
    """

    __slots__ = (
        "_connection",
        "_data",
        "_executor",
        "_kind",
        "_metadata",
        "_payloads",
        "_window",
    )

    def __init__(
        self,
        connection: ClientConnection,
        *,
        kind: FrameType,
        metadata: bytes | None,
        data: bytes,
        executor: Executor,
        window: int,
        payloads: bool,
    ) -> None:
        self._connection = connection
        self._payloads = payloads
        self._kind = kind
        self._metadata = metadata
        self._data = data
        self._executor = executor
        self._window = window

    def subscribe(self, subscriber: Subscriber[T]) -> None:
        """Open a new stream for ``subscriber``, right after its ``on_subscribe`` returns.

        The request frame carries the demand signalled inside ``on_subscribe``, or an
        initial request-n of 1 without any; an element that arrives before demand waits in
        a one-element buffer (Rule 1.1). A route that fails therefore ends the stream with
        ``on_error`` whether or not the subscriber requests (Rules 1.4, 1.9).
        ``on_subscribe`` and every later signal run on the client's executor.

        Raises:
            TypeError: ``subscriber`` is ``None`` (Rule 1.9).
        """
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe() requires a subscriber, got None")
        _RequesterSubscription(self, subscriber).start()


class _RequesterSubscription(Subscription, StreamHandler, Generic[T]):
    """One stream, requester side: the subscription and the connection's stream handler."""

    def __init__(self, publisher: RemotePublisher[T], subscriber: Subscriber[T]) -> None:
        self._publisher = publisher
        self._connection = publisher._connection
        self._subscriber: Subscriber[T] | None = subscriber
        self._election = EmitterElection()
        # ``election.cancelled`` as a callable, asked before every on_next (C calls only,
        # up to the property itself)
        self._run: Callable[[Iterator[T]], None] | None = None  # on_next_run, if declared
        self._is_cancelled: Callable[[], bool] = functools.partial(
            getattr, self._election, "cancelled"
        )
        self._drain = DrainLoop(
            self._pass,
            executor=publisher._executor,
            on_rejected=self._on_rejected,
            guard=self._election,
        )
        self._lock = threading.Lock()
        self._buffer: deque[T] = deque()
        self._payloads = publisher._payloads
        self._outstanding = 0  # credit granted to the peer and not yet used
        self._stream_open = False
        self._remote_done = False  # terminal frame received, cancelled, or connection gone
        self._terminal: Exception | None = None
        self._subscribed = False
        self._is_stream = publisher._kind == FrameType.REQUEST_STREAM

    # -- Subscription ---------------------------------------------------------------------

    def request(self, n: int) -> None:
        """Add ``n`` to the demand (Rule 3.8); a bad ``n`` becomes ``on_error`` (Rule 3.9).

        Never raises (Rule 3.16) and never blocks: the demand reaches the peer as a request
        frame sent from the client's executor.
        """
        if self._election.request(n):
            self._drain.start_owned()

    def cancel(self) -> None:
        """Stop the stream: ``CANCEL`` goes to the peer and the subscriber is dropped.

        Idempotent and thread-safe (Rules 3.5, 3.7, 3.13).
        """
        if self._election.cancel():
            self._drain.start_owned()

    def start(self) -> None:
        """Run the first pass, which signals ``on_subscribe`` (Rule 1.9), then opens the stream.

        Until the stream is open, the subscription is watched by the connection, so a
        connection that fails meanwhile still ends it (Rule 1.4).
        """
        self._connection.watch(self)
        if self._election.acquire():
            self._drain.start_owned()

    def statistics(self) -> StreamStatistics:
        """A snapshot of this subscription's counters."""
        election = self._election
        return StreamStatistics(
            requested=election.requested,
            delivered=election.delivered,
            buffered=len(self._buffer),
            cancelled=election.cancelled,
            terminated=election.terminated,
        )

    # -- the drain pass (owner only, on the executor) -------------------------------------

    def _pass(self) -> bool:
        election = self._election
        subscriber = self._subscriber
        if subscriber is None:
            election.retire()
            return False
        if not self._subscribed:
            self._subscribed = True
            self._run = run_receiver(subscriber)
            if not signal_on_subscribe(subscriber, self):  # Rule 2.13: treat as cancelled
                election.cancel()
        if election.cancelled:
            self._finish(send_cancel=True)
            return False
        error = election.take_error()
        if error is not None:  # Rule 3.9
            self._finish(send_cancel=True)
            election.terminate()
            signal_on_error(subscriber, error)
            return False
        demand = self._deliver(subscriber, election.demand)
        if self._cancelled():
            self._finish(send_cancel=True)
            return False
        connection = self._connection
        if not self._stream_open and connection.is_closed:  # Rule 1.4: fail without demand
            self.on_connection_error(
                connection.error or RSocketConnectionError("the connection is closed")
            )
        with self._lock:
            buffered = len(self._buffer)
            ended = self._remote_done and buffered == 0
            terminal = self._terminal
        if ended:  # Rules 1.4, 1.5: after the elements in hand, with or without demand
            self._finish(send_cancel=False)
            election.terminate()
            if terminal is None:
                signal_on_complete(subscriber)
            else:
                signal_on_error(subscriber, terminal)
            return False
        if self._top_up(demand, buffered):
            return True
        return bool(buffered and demand)

    def _deliver(self, subscriber: Subscriber[T], demand: int) -> int:
        """Deliver up to ``_BATCH`` buffered elements within ``demand``; the demand left.

        The elements go in slices of ``_STEP``, each taken in one critical section and
        handed over with the kit's ``signal_each`` (one ``on_next`` each; a cancel from
        inside one stops the run, Rule 3.12), or in one ``on_next_run`` call to a
        subscriber that declares the kit's ``RunSubscriber`` capability (what
        ``Flow.subscribe(on_next=...)`` creates does); after each slice the peer is granted the
        credit the subscriber's demand allows by then, so the next elements travel while
        the rest of the batch is delivered.
        """
        election = self._election
        lock = self._lock
        buffer = self._buffer
        left = _BATCH
        while demand and left:
            with lock:
                available = len(buffer)
                count = min(demand, _STEP, left, available)
                if count == available:
                    batch = list(buffer)
                    buffer.clear()
                else:
                    batch = [buffer.popleft() for _ in range(count)]
            if not batch:
                break
            run = self._run
            if run is not None:  # the subscriber takes the slice in one call
                elements = iter(batch)
                run(elements)  # it stops when done, and never raises (Rule 2.13)
                delivered = count - length_hint(elements)
            else:
                delivered, ok = signal_each(subscriber, batch, self._is_cancelled)
                if not ok:  # Rule 2.13: reported by signal_each, treated as cancelled
                    election.cancel()
            if delivered:
                demand = election.produced(delivered)
            if delivered < count or self._cancelled():
                break
            left -= count
            if count == available:
                break  # the buffer is empty: the pass tops up below
            self._top_up(demand, available - count)
        return demand

    def _cancelled(self) -> bool:
        return self._election.cancelled  # a method: the value changes under mypy's feet

    def _top_up(self, demand: int, buffered: int) -> bool:
        """Grant the peer more credit if due; ``True`` if the state changed (pass again)."""
        with self._lock:
            if self._remote_done:
                return False
            if not self._is_stream:
                if self._stream_open:
                    return False
                target = 1
            else:
                target = min(demand - buffered, self._publisher._window)
                if not self._stream_open:
                    target = max(target, 1)  # open eagerly: a failing route is heard
            outstanding = self._outstanding
            grant = target - outstanding
            if grant <= 0 or outstanding > target // 2:
                return False
            self._outstanding = target
            opened = self._stream_open
            self._stream_open = True
        if opened:
            self._connection.send(encode_request_n(self.stream_id, grant))
            return False
        return self._open(grant)

    def _open(self, initial_n: int) -> bool:
        publisher = self._publisher
        connection = self._connection
        stream_id = connection.open_stream(self)
        frames = None
        if stream_id:
            frames = encode_fragments(
                publisher._kind,
                stream_id,
                publisher._data,
                publisher._metadata,
                max_frame_size=connection.settings.max_frame_size,
                initial_n=min(initial_n, MAX_REQUEST_N),
            )
        if frames is None or not connection.send_all(frames):
            self.on_connection_error(
                connection.error or RSocketConnectionError("the connection is closed")
            )
            return True
        return False

    def _finish(self, *, send_cancel: bool) -> None:
        with self._lock:
            notify = send_cancel and self._stream_open and not self._remote_done
            self._remote_done = True
            self._buffer.clear()
        if self._stream_open:
            self._connection.unregister(self.stream_id)
        else:
            self._connection.unwatch(self)
        if notify:
            self._connection.send(encode_cancel(self.stream_id))
        self._subscriber = None  # Rule 3.13
        self._election.retire()

    def _on_rejected(self, error: ExecutorRejectedError) -> None:
        subscriber = self._subscriber
        if subscriber is None:
            return
        if not self._subscribed:
            self._subscribed = True
            if not signal_on_subscribe(subscriber, self):
                self._finish(send_cancel=True)
                return
        self._finish(send_cancel=True)
        self._election.terminate()
        signal_on_error(subscriber, error)

    # -- StreamHandler (loop thread) ------------------------------------------------------

    def on_payloads(self, data: list[bytes], complete: bool) -> None:
        """Buffer a run of elements at once: one critical section and one wake-up for it.

        As ``on_frame`` for each: beyond the credit granted, the excess is dropped and the
        stream ends with a Rule 1.1 violation after the elements within it.
        """
        if not self._is_stream:
            super().on_payloads(data, complete)
            return
        cancel = False
        with self._lock:
            if self._remote_done:
                return
            outstanding = self._outstanding
            if len(data) > outstanding:
                data = data[:outstanding]
                self._terminal = ProtocolViolationError(
                    f"Rule 1.1: the peer sent more PAYLOAD frames than were requested "
                    f"on stream {self.stream_id}; the excess was dropped",
                    rule="1.1",
                )
                self._remote_done = cancel = True
            self._outstanding = outstanding - len(data)
            if self._payloads:
                self._buffer.extend([Payload(element) for element in data])  # type: ignore[misc]
            else:
                self._buffer.extend(data)  # type: ignore[arg-type]  # T is bytes here
            if complete:
                self._remote_done = True
            done = self._remote_done
        if done:
            self._connection.unregister(self.stream_id)
        if cancel:
            self._connection.send(encode_cancel(self.stream_id))
        self._connection.touch(self)

    def on_frame(self, frame: Frame) -> None:
        frame_type = frame.frame_type
        cancel = False
        if frame_type == _PAYLOAD:
            flags = frame.flags
            with self._lock:
                if self._remote_done:
                    return
                if flags & FLAG_NEXT:
                    if self._outstanding <= 0:
                        self._terminal = ProtocolViolationError(
                            f"Rule 1.1: the peer sent more PAYLOAD frames than were requested "
                            f"on stream {self.stream_id}; the excess was dropped",
                            rule="1.1",
                        )
                        self._remote_done = True
                        cancel = True
                    else:
                        self._outstanding -= 1
                        element = (
                            Payload(frame.data, frame.metadata) if self._payloads else frame.data
                        )
                        self._buffer.append(element)  # type: ignore[arg-type]  # T is one of them
                if flags & FLAG_COMPLETE or not self._is_stream:
                    self._remote_done = True  # a request-response ends with its payload
                done = self._remote_done
        elif frame_type == FrameType.ERROR:
            message = frame.data.decode("utf-8", "replace")
            with self._lock:
                if self._remote_done:
                    return
                self._remote_done = True
                self._terminal = RSocketStreamError(
                    f"{code_name(frame.number)}: {message}", code=frame.number
                )
            done = True
        else:  # REQUEST_N or CANCEL for a requester: only meaningful on channels
            return
        if done:
            self._connection.unregister(self.stream_id)
        if cancel:
            self._connection.send(encode_cancel(self.stream_id))
        self._connection.touch(self)

    def flush(self) -> None:
        self._drain.schedule()

    def on_connection_error(self, error: RSocketConnectionError) -> None:
        with self._lock:
            if self._remote_done:
                return
            self._remote_done = True
            self._terminal = error
        self._drain.schedule()
