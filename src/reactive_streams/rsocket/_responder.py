"""The responder side of a stream: a route's ``Publisher[bytes]`` sent as frames.

``ResponderStream`` subscribes to the publisher a route's factory returns and is the
connection's handler for that stream:

* The requester's credit (the initial request-n, then ``REQUEST_N`` frames) is passed
  upstream as ``request(k)``, and only while the connection is ``writable`` (its outbox
  and socket buffer below the write high-water mark). At most ``CHUNK`` elements are
  outstanding at a time, and at most one write high-water mark of bytes, judged by the
  largest element seen so far (``FIRST_BATCH`` elements before any is seen): a peer that
  never reads makes each stream hold about one high-water mark however much credit it
  grants, and however large the route's elements are. It never sends more
  ``PAYLOAD`` frames than were requested: an element beyond the demand it signalled is a
  broken Rule 1.1 upstream, and ends the stream with ``ERROR[APPLICATION_ERROR]``.
* ``on_next`` becomes ``PAYLOAD`` (NEXT), ``on_complete`` becomes ``PAYLOAD`` (COMPLETE),
  ``on_error`` becomes ``ERROR[APPLICATION_ERROR]`` with the exception's text.
* ``CANCEL`` from the peer, or the connection failing, cancels the subscription; but a
  fire-and-forget already received is still started and asked for elements once when its
  connection fails (its work is carried out), and cancelled after that.
* A factory, ``subscribe``, ``request`` or ``cancel`` that raises, ``SystemExit`` and
  ``KeyboardInterrupt`` included, ends the stream with ``ERROR[APPLICATION_ERROR]`` and
  removes it from the stream table (``DrainLoop``'s ``on_failure``); a ``BaseException``
  is then re-raised on the worker, never swallowed.

User code (the factory, ``subscribe``, ``request``, ``cancel``) runs only in the stream's
``DrainLoop`` on the server's executor, never on the event loop; a synchronous publisher
that emits inside ``request`` therefore emits on an executor thread, a batch at a time.
The stream declares the kit's ``RunSubscriber`` capability (``on_next_run``): a publisher
that hands it runs of elements (``IterablePublisher`` does) has them encoded a slice at a
time instead of one ``on_next`` each.
"""

from __future__ import annotations

import logging
import threading
from itertools import islice
from typing import TYPE_CHECKING, Final

from .._core import MAX_DEMAND, DrainLoop, accept_subscription, add_demand
from ..api import Publisher, Subscriber, Subscription
from ._connection import StreamHandler
from ._frames import (
    ErrorCode,
    FrameType,
    encode_error,
    encode_fragments,
    encode_payload,
    encode_payload_header,
)
from ._payload import Payload

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from concurrent.futures import Executor

    from .._core import ExecutorRejectedError
    from ._connection import Connection
    from ._errors import RSocketConnectionError
    from ._frames import Frame

__all__ = ["CHUNK", "FIRST_BATCH", "ResponderStream"]

logger = logging.getLogger("reactive_streams.rsocket")

CHUNK: Final[int] = 1024
"""The most elements requested from a route's publisher and not yet received."""
FIRST_BATCH: Final[int] = 16
"""The most elements requested before the size of one is known."""
_FRAME_OVERHEAD: Final[int] = 10  # length prefix and header of a PAYLOAD frame, at least 1
COALESCE: Final[int] = 256
"""The most frames a pass holds back before handing them to the connection."""


class ResponderStream(StreamHandler, Subscriber[bytes | Payload]):
    """One stream, responder side (see the module docstring).

    Args:
        connection: the connection the stream lives on.
        kind: ``REQUEST_STREAM``, ``REQUEST_RESPONSE`` or ``REQUEST_FNF``.
        route: the route's name, for error messages.
        factory: the route's factory; called with ``data`` on the executor.
        data: the request's data.
        initial_n: the requester's initial credit (1 for request-response).
        executor: where the factory and the publisher's ``request``/``cancel`` run.
    """

    def __init__(
        self,
        connection: Connection,
        *,
        kind: FrameType,
        route: str,
        factory: Callable[[bytes], Publisher[bytes | Payload]],
        data: bytes,
        initial_n: int,
        executor: Executor,
    ) -> None:
        self._connection = connection
        self._kind = kind
        self._route = route
        self._factory: Callable[[bytes], Publisher[bytes | Payload]] | None = factory
        self._data = data
        self._lock = threading.Lock()
        self._credits = MAX_DEMAND if kind == FrameType.REQUEST_FNF else initial_n
        self._outstanding = 0
        self._refill_at = 0  # request more when _outstanding falls to this
        self._element_size = 0  # the largest element so far (bytes of data and metadata)
        self._window = connection.settings.write_high_water
        self._subscription: Subscription | None = None
        self._subscribed = False
        self._done = False
        self._cancel_pending = False
        self._started = False
        self._requested = False  # the publisher was asked for elements at least once
        self._orphaned = False  # a fire-and-forget whose connection closed
        self._max_payload = connection.settings.max_frame_size - 6
        self._pending: list[bytes] | None = None  # frames held while the pump is in request
        self._header = b""  # the PAYLOAD header for elements of _header_size bytes
        self._header_size = -1
        self._streaming = kind == FrameType.REQUEST_STREAM
        self._pump = DrainLoop(
            self._pass,
            executor=executor,
            on_rejected=self._on_rejected,
            on_failure=self._on_failure,
        )

    def start(self) -> None:
        """Call the factory and subscribe, on the executor."""
        self._pump.schedule()

    # -- the pump (serial, on the executor) -----------------------------------------------

    def _pass(self) -> None:
        if not self._started:
            self._started = True
            factory, self._factory = self._factory, None
            try:
                assert factory is not None
                publisher = factory(self._data)
                if not isinstance(publisher, Publisher):
                    raise TypeError(
                        f"the factory returned {type(publisher).__name__}, not a Publisher"
                    )
                publisher.subscribe(self)
            except Exception as exc:
                logger.error("route %r failed: %s", self._route, exc, exc_info=exc)
                self._end_with_error(f"route {self._route!r} failed: {type(exc).__name__}: {exc}")
            return
        cancel = False
        count = 0
        with self._lock:
            subscription = self._subscription
            if subscription is None:
                return
            if self._cancel_pending:
                self._cancel_pending = False
                self._subscription = None
                cancel = True
            elif self._done:
                return
            elif (
                self._outstanding <= self._refill_at and self._credits and self._connection.writable
            ):
                batch = self._batch()
                count = min(self._credits, batch - self._outstanding)
                if count > 0:
                    if self._credits != MAX_DEMAND:
                        self._credits -= count
                    self._outstanding += count
                    self._refill_at = self._outstanding // 2
                else:  # the elements grew: come back once fewer than a batch are out
                    self._refill_at = batch - 1
        if cancel:
            subscription.cancel()
        elif count > 0:
            # Frames signalled while request runs (a synchronous publisher emits them all
            # here) are held and handed to the connection at once: one wake-up of the
            # loop and one write for the batch, not one per frame.
            with self._lock:
                self._pending = []
            try:
                subscription.request(count)
            finally:
                with self._lock:
                    frames, self._pending = self._pending, None
                    self._requested = True
                    orphaned = self._orphaned
                if frames:
                    self._connection.send_all(frames)
            if orphaned:  # a fire-and-forget whose connection closed: its work was asked for
                self._cancel()

    def _batch(self) -> int:
        """The most elements to have outstanding: ``CHUNK``, and one window of bytes."""
        size = self._element_size
        if size == 0:
            return FIRST_BATCH
        return max(1, min(CHUNK, self._window // (size + _FRAME_OVERHEAD)))

    def _on_failure(self, error: Exception) -> None:
        """End the stream with ``ERROR[APPLICATION_ERROR]`` because a pass raised.

        The factory or ``subscribe`` raised a ``BaseException`` that is not an
        ``Exception`` (``SystemExit``, ``KeyboardInterrupt``: ``error`` is then a
        ``StreamInterruptedError`` and ``DrainLoop`` re-raises the original after this
        returns), or the publisher's ``request``/``cancel`` raised (against Rule 3.16).
        The stream leaves the stream table and upstream is cancelled.
        """
        with self._lock:
            subscription, self._subscription = self._subscription, None
            ended = self._done
            self._done = True
        if ended:
            self._connection.unregister(self.stream_id)
        else:
            logger.error("route %r failed: %s", self._route, error, exc_info=error)
            self._end_with_error(f"route {self._route!r} failed: {type(error).__name__}: {error}")
        if subscription is not None:
            subscription.cancel()

    def _on_rejected(self, error: ExecutorRejectedError) -> None:
        # The server is shutting down: cancel upstream here, the stream is over.
        with self._lock:
            subscription, self._subscription = self._subscription, None
            self._done = True
        if subscription is not None:
            subscription.cancel()
        self._connection.unregister(self.stream_id)

    # -- Subscriber (any thread, serial per Rule 1.3) -------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep the subscription; a second one is cancelled (Rule 2.5).

        Raises:
            TypeError: ``subscription`` is ``None`` (Rule 2.13).
        """
        if not accept_subscription(subscription, self._claim):
            return
        self._pump.schedule()

    def _claim(self, subscription: Subscription) -> bool:
        with self._lock:
            duplicate = self._subscribed
            self._subscribed = True
            if duplicate or self._done:
                return False
            self._subscription = subscription
            return True

    def on_next(self, element: bytes | Payload) -> None:
        """Send ``element`` as one ``PAYLOAD`` (fragmented if larger than a frame).

        A ``Payload`` element sends its metadata too; ``bytearray`` and ``memoryview`` are
        sent as bytes; anything else ends the stream with ``ERROR[APPLICATION_ERROR]``.

        Raises:
            TypeError: ``element`` is ``None`` (Rule 2.13).
        """
        if element is None:
            raise TypeError("Rule 2.13: on_next() requires an element, got None")
        if type(element) is bytes and self._streaming:
            # the hot path: a bytes element of a request-stream that fits one frame
            size = len(element)
            if size != self._header_size:  # a new size: a new header (rarely)
                if size > self._max_payload:
                    self._next_slow(element)
                    return
                self._header = encode_payload_header(self.stream_id, size)
                self._header_size = size
                largest = self._element_size  # read by the pump without the lock: stale
                if size > largest:  # at worst by one batch
                    self._element_size = size
            frame = self._header + element
            held: list[bytes] | None = None
            refill = False
            with self._lock:
                if self._done:
                    return
                outstanding = self._outstanding - 1
                if outstanding >= 0:
                    self._outstanding = outstanding
                    refill = outstanding == self._refill_at and self._credits > 0
                    pending = self._pending
                    if pending is not None:
                        pending.append(frame)
                        frame = b""
                        if len(pending) >= COALESCE:  # enough for one write: hand them over
                            held, self._pending = pending, []
                else:
                    self._done = True
                    self._cancel_pending = True
            if outstanding < 0:
                self._violation()
                return
            if held is not None:
                self._connection.send_all(held)
            elif frame:
                self._connection.send(frame)
            if refill:
                self._pump.schedule()
            return
        self._next_slow(element)

    def on_next_run(self, elements: Iterator[bytes | Payload]) -> None:
        """``on_next`` for each of ``elements``, in order, as one call (``RunSubscriber``).

        The elements of a request-stream go in slices of at most ``COALESCE``, each
        taken within the demand signalled upstream: a slice of ``bytes`` elements of one
        size is encoded and counted in one critical section and handed to the connection
        with the frames the pump holds; any other slice goes element by element through
        ``on_next``. Once the stream is over (cancelled, failed) the rest stays in
        ``elements``. An element beyond the demand ends the stream as ``on_next`` does
        (Rule 1.1). Never raises (Rule 2.13).
        """
        if not self._streaming:
            self._next_each(elements)
            return
        lock = self._lock
        while True:
            with lock:
                if self._done:
                    return
                budget = self._outstanding
            if budget <= 0:  # an element now would be beyond the demand: on_next ends it
                self._next_each(islice(elements, 1))
                return
            limit = budget if budget < COALESCE else COALESCE
            chunk = list(islice(elements, limit))
            if not chunk:
                return
            size = self._header_size
            header = self._header
            frames = [
                header + element
                for element in chunk
                if type(element) is bytes and len(element) == size
            ]
            if len(frames) != len(chunk):
                self._next_each(iter(chunk))  # new sizes, payloads: the general path
            else:
                self._send_run(frames)
            if len(chunk) < limit:
                return

    def _send_run(self, frames: list[bytes]) -> None:
        """Count ``frames`` (within the demand) as sent, and hand them over with the held."""
        held: list[bytes] | None = None
        count = len(frames)
        with self._lock:
            if self._done:
                return
            before = self._outstanding
            after = before - count
            self._outstanding = after
            refill = after <= self._refill_at < before and self._credits > 0
            pending = self._pending
            if pending is None:
                held = frames
            else:
                pending += frames
                if len(pending) >= COALESCE:
                    held, self._pending = pending, []
        if held is not None:
            self._connection.send_all(held)
        if refill:
            self._pump.schedule()

    def _next_each(self, elements: Iterator[bytes | Payload]) -> None:
        for element in elements:
            if self._done:
                return
            self.on_next(element)

    def _next_slow(self, element: bytes | Payload) -> None:
        """``on_next`` of anything but a ``bytes`` element of a request-stream in one frame."""
        refill = False
        with self._lock:
            if self._done:
                return
            if self._outstanding <= 0:
                self._done = True
                self._cancel_pending = True
                violation = True
            else:
                violation = False
                self._outstanding -= 1
                refill = self._outstanding == self._refill_at and self._credits > 0
                if self._kind == FrameType.REQUEST_RESPONSE:
                    self._done = True
                    self._cancel_pending = True
        if violation:
            self._violation()
            return
        kind = self._kind
        if kind == FrameType.REQUEST_FNF:
            if refill:
                self._pump.schedule()
            return
        value: object = element
        metadata: bytes | None = None
        if type(value) is bytes:
            data = value
        elif isinstance(value, Payload):
            data, metadata = bytes(value.data), value.metadata
        else:
            if not isinstance(value, (bytearray, memoryview)):
                with self._lock:
                    self._done = True
                    self._cancel_pending = True
                self._end_with_error(
                    f"route {self._route!r} emitted {type(value).__name__}, not bytes or Payload"
                )
                self._pump.schedule()
                return
            data = bytes(value)
        size = len(data) if metadata is None else len(data) + len(metadata) + 3
        largest = self._element_size  # read by the pump without the lock: a stale value
        if size > largest:  # only delays one batch (and this store is rare: cheaper than max)
            self._element_size = size
        complete = kind == FrameType.REQUEST_RESPONSE
        connection = self._connection
        if complete:  # first: the ID is free once the requester hears the stream ended
            connection.unregister(self.stream_id)
        if metadata is None and len(data) <= self._max_payload:
            self._send(encode_payload(self.stream_id, data, complete=complete))
        else:
            self._send(
                *encode_fragments(
                    FrameType.PAYLOAD,
                    self.stream_id,
                    data,
                    metadata,
                    max_frame_size=connection.settings.max_frame_size,
                    complete=complete,
                )
            )
        if complete or refill:
            self._pump.schedule()

    def _violation(self) -> None:
        self._end_with_error(
            f"Rule 1.1: route {self._route!r} emitted more elements than were requested"
        )
        self._pump.schedule()

    def _send(self, *frames: bytes) -> None:
        """Send ``frames`` in order, behind any the pump holds (see ``_pass``)."""
        with self._lock:
            pending = self._pending
            if pending is not None:
                pending += frames
                return
        if len(frames) == 1:
            self._connection.send(frames[0])
        else:
            self._connection.send_all(list(frames))

    def on_error(self, error: Exception) -> None:
        """Send ``ERROR[APPLICATION_ERROR]`` with the error's type and text.

        Raises:
            TypeError: ``error`` is ``None`` (Rule 2.13).
        """
        if error is None:
            raise TypeError("Rule 2.13: on_error() requires an exception, got None")
        with self._lock:
            if self._done:
                return
            self._done = True
            self._subscription = None
        if self._kind == FrameType.REQUEST_FNF:
            logger.error("fire-and-forget route %r failed: %s", self._route, error)
            self._connection.unregister(self.stream_id)
            return
        self._end_with_error(f"{type(error).__name__}: {error}")

    def on_complete(self) -> None:
        """Send ``PAYLOAD`` with the COMPLETE flag."""
        with self._lock:
            if self._done:
                return
            self._done = True
            self._subscription = None
        # First: the ID is free once the requester hears the stream ended (it may reuse it).
        self._connection.unregister(self.stream_id)
        if self._kind != FrameType.REQUEST_FNF:
            self._send(encode_payload(self.stream_id, b"", next_=False, complete=True))

    def _end_with_error(self, message: str) -> None:
        with self._lock:
            self._done = True
        self._connection.unregister(self.stream_id)  # first: the stream is over when it hears
        if self._kind != FrameType.REQUEST_FNF:
            self._send(encode_error(self.stream_id, ErrorCode.APPLICATION_ERROR, message))

    # -- StreamHandler (loop thread) ------------------------------------------------------

    def on_frame(self, frame: Frame) -> None:
        frame_type = frame.frame_type
        if frame_type == FrameType.REQUEST_N:
            with self._lock:
                if self._done:
                    return
                self._credits = add_demand(self._credits, frame.number)
            self._pump.schedule()
        elif frame_type == FrameType.CANCEL:
            self._cancel()
        # PAYLOAD and ERROR from a requester only belong to channels: ignored

    def _cancel(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            self._cancel_pending = True
        self._connection.unregister(self.stream_id)
        self._pump.schedule()

    def on_connection_error(self, error: RSocketConnectionError) -> None:
        if self._kind == FrameType.REQUEST_FNF:
            # A fire-and-forget already received is carried out: its peer waits for no
            # answer, and one sent just before it closed (a last commit) must not be lost.
            # Its publisher is asked once more at least (the work of a request-driven
            # publisher runs then), then cancelled: an endless one does not run for ever.
            with self._lock:
                self._orphaned = True
                requested = self._requested
            if requested:
                self._cancel()
            else:
                self._pump.schedule()
            return
        self._cancel()

    def on_writable(self) -> None:
        self._pump.schedule()
