"""One RSocket connection: frames in and out, the stream table, keepalive, failure fan-out.

``Connection`` is an ``asyncio.Protocol`` that lives on one event loop. It never runs
user code: frames that arrive are decoded and handed to the ``StreamHandler`` registered
for their stream, and those handlers only update counters and buffers and schedule work
elsewhere (an executor). Frames to send come from any thread through ``send``: over plain
TCP, a batch sent from another thread while nothing waits ahead of it goes straight to
the socket (no wake-up of the loop); otherwise it joins an outbox, and the loop is woken
at most once per batch, so a thousand payloads produced in a burst leave in one
``transport.write``.

The multiplexing rule: per-stream demand is the only flow control. Nothing here waits on a
stream, so a slow stream never stalls the others; the transport's own write buffer only
pauses the responders' requests upstream (``writable``), it never blocks a thread.

Failure: a malformed frame, a length beyond the maximum, the peer closing (mid-frame or
not), a keepalive timeout or a local close all go through ``fail``, which closes the
transport once and gives every open stream exactly one ``on_connection_error``. Frames
for a stream ID that is not in the stream table (``PAYLOAD``, ``ERROR``, ``REQUEST_N``,
``CANCEL``) are ignored, as the spec's "Handling the Unexpected" requires: they may have
crossed a ``CANCEL`` on the wire, and once IDs wrap past ``2**31 - 1`` an ID the peer
uses may have been used before.
"""

from __future__ import annotations

import asyncio
import asyncio.selector_events
import contextlib
import logging
import os
import threading
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Final

from .._core import report_undeliverable
from ._errors import FrameError, RSocketConnectionError, code_name
from ._frames import (
    FLAG_COMPLETE,
    FLAG_FOLLOWS,
    FLAG_IGNORE,
    FLAG_METADATA,
    FLAG_RESPOND,
    MAX_FRAME_SIZE,
    ErrorCode,
    Frame,
    FrameReader,
    FrameType,
    PayloadRun,
    encode_error,
    encode_keepalive,
)

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Connection", "ConnectionSettings", "StreamHandler"]

logger = logging.getLogger("reactive_streams.rsocket")

_REQUEST_TYPES: Final = frozenset(
    {
        FrameType.REQUEST_RESPONSE,
        FrameType.REQUEST_FNF,
        FrameType.REQUEST_STREAM,
        FrameType.REQUEST_CHANNEL,
    }
)
_PAYLOAD: Final[int] = int(FrameType.PAYLOAD)
_ABORT_TYPES: Final = frozenset({FrameType.CANCEL, FrameType.ERROR})
_STREAM_TYPES: Final = _REQUEST_TYPES | {
    FrameType.PAYLOAD,
    FrameType.REQUEST_N,
    FrameType.CANCEL,
    FrameType.ERROR,
}


class ConnectionSettings:
    """The knobs of one connection.

    Args:
        max_frame_size: frames longer than this (bytes, header included) are refused on
            receipt and never sent: larger payloads are fragmented. At most ``2**24 - 1``.
        max_payload_size: the largest reassembled payload accepted, in bytes; a fragment
            chain that grows beyond it closes the connection (no unbounded buffering).
        keepalive: seconds between the client's ``KEEPALIVE`` frames.
        max_lifetime: seconds of silence from the peer after which the connection is
            declared dead and closed with an error.
        write_high_water: the transport's write buffer above which ``writable`` is false
            (and the outbox not yet flushed at four times it; see ``writable``).
        memory_budget: bytes the connection may hold for its peer (``None``: no bound).
            Reading: the frame being read plus every fragment chain being reassembled;
            beyond it the connection closes with ``ERROR[CONNECTION_ERROR]``. Writing:
            beyond it reading pauses until the queued frames drain.
    """

    __slots__ = (
        "keepalive",
        "max_frame_size",
        "max_lifetime",
        "max_payload_size",
        "memory_budget",
        "write_high_water",
    )

    def __init__(
        self,
        *,
        max_frame_size: int = MAX_FRAME_SIZE,
        max_payload_size: int = 64 * 2**20,
        keepalive: float = 20.0,
        max_lifetime: float = 90.0,
        write_high_water: int = 64 * 1024,
        memory_budget: int | None = None,
    ) -> None:
        if not 64 <= max_frame_size <= MAX_FRAME_SIZE:
            raise ValueError(f"max_frame_size must be in [64, {MAX_FRAME_SIZE}]")
        if keepalive <= 0 or max_lifetime <= 0:
            raise ValueError("keepalive and max_lifetime must be positive")
        self.max_frame_size = max_frame_size
        self.max_payload_size = max_payload_size
        self.keepalive = keepalive
        self.max_lifetime = max_lifetime
        self.write_high_water = write_high_water
        self.memory_budget = memory_budget

    def with_keepalive(self, keepalive: float, max_lifetime: float) -> ConnectionSettings:
        """A copy with the given keepalive interval and max lifetime (seconds)."""
        return ConnectionSettings(
            max_frame_size=self.max_frame_size,
            max_payload_size=self.max_payload_size,
            keepalive=keepalive,
            max_lifetime=max_lifetime,
            write_high_water=self.write_high_water,
            memory_budget=self.memory_budget,
        )


class StreamHandler(ABC):
    """One side of one stream, as the connection sees it (all calls on the loop thread)."""

    stream_id: int = 0
    touched: bool = False

    @abstractmethod
    def on_frame(self, frame: Frame) -> None:
        """A frame for this stream arrived (fragments already reassembled)."""

    @abstractmethod
    def on_connection_error(self, error: RSocketConnectionError) -> None:
        """The connection failed; the handler must end its stream with ``error``."""

    def on_payloads(self, data: list[bytes], complete: bool) -> None:
        """Whole ``PAYLOAD`` frames with NEXT and only data arrived: one per item of ``data``.

        ``complete``: the last of them also had the COMPLETE flag. By default each becomes
        an ``on_frame`` call; a handler that receives streams takes the run at once.
        """
        for frame in PayloadRun(self.stream_id, data, complete).frames():
            self.on_frame(frame)

    def flush(self) -> None:  # noqa: B027 - optional hook
        """Called once after a batch of frames in which this handler set ``touched``."""

    def on_writable(self) -> None:  # noqa: B027 - optional hook
        """The transport's write buffer drained below its low-water mark."""


class _Partial:
    """A fragment chain being reassembled."""

    __slots__ = ("data", "flags", "frame_type", "metadata", "number", "size")

    def __init__(self, frame: Frame) -> None:
        self.frame_type = frame.frame_type
        self.flags = frame.flags
        self.number = frame.number
        self.metadata: list[bytes] = [] if frame.metadata is None else [frame.metadata]
        self.data = [frame.data]
        self.size = len(frame.data) + len(frame.metadata or b"")


_READ_SIZE: Final[int] = 64 * 1024
"""Bytes asked of the socket per read (see ``Connection.get_buffer``)."""
_read_buffers = threading.local()  # .buffer: each loop thread's read buffer
_NO_BUFFER: Final = memoryview(b"")


_SOCKET_TRANSPORT: Final = getattr(asyncio.selector_events, "_SelectorSocketTransport", None)
"""asyncio's transport for plain TCP and Unix sockets (a private class; see ``_direct_fd``)."""


def _direct_fd(transport: asyncio.BaseTransport) -> int:
    """The socket to write to from other threads, for ``transport``; ``-1`` for none.

    Only asyncio's own socket transport, whose write buffer is empty exactly when every
    byte given to it has been handed to the kernel (it sends at once when its buffer is
    empty, and keeps the rest in order): a frame written to the socket then, under the
    connection's lock, comes after everything written before. Not a TLS transport (its
    bytes are encrypted on the loop), nor any other (WebSocket, a test's fake).
    """
    if _SOCKET_TRANSPORT is None or not isinstance(transport, _SOCKET_TRANSPORT):
        return -1
    sock = transport.get_extra_info("socket")
    return -1 if sock is None else int(sock.fileno())


class Connection(asyncio.BufferedProtocol):
    """The frame-level half of an RSocket connection; subclassed for client and server.

    Concurrency: ``send``, ``close``, ``register``, ``unregister`` and ``writable`` are
    thread-safe; everything else runs on the connection's loop.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, settings: ConnectionSettings) -> None:
        self._loop = loop
        self._settings = settings
        self._lock = threading.Lock()
        self._streams: dict[int, StreamHandler] = {}
        self._watched: set[StreamHandler] = set()  # subscribed, stream not opened yet
        self._outbox: list[bytes] = []
        self._outbox_bytes = 0
        self._outbox_high_water = 4 * settings.write_high_water
        self._stalled = False  # a writer saw the outbox full: tell the streams when it drains
        self._flush_pending = False
        self._flushing = False  # the loop is writing what it took from the outbox
        self._direct = -1  # the socket other threads may write to (see _write_locked)
        self._closed = False
        self._error: RSocketConnectionError | None = None
        self._transport: asyncio.Transport | None = None
        self._reader = FrameReader(settings.max_frame_size)
        self._read_buffer = _NO_BUFFER  # the loop thread's, between get_buffer and its use
        self._partials: dict[int, _Partial] = {}
        self._reassembly_bytes = 0  # the sum of every chain in _partials
        self._read_holds: set[str] = set()  # why reading is paused ("writes", "budget")
        self._touched: list[StreamHandler] = []
        self._paused = False
        self._loop_thread = 0
        self._last_received = loop.time()
        self.frames_received = 0  # counters: received on the loop thread, sent under _lock
        self.frames_sent = 0
        self.bytes_received = 0
        self.bytes_sent = 0
        self._timer: asyncio.TimerHandle | None = None
        self.closed: asyncio.Future[None] = loop.create_future()
        """Done once the transport is closed (``connection_lost`` ran)."""
        self.on_closed: Callable[[Connection, RSocketConnectionError], None] | None = None

    # -- thread-safe API ------------------------------------------------------------------

    @property
    def settings(self) -> ConnectionSettings:
        """The connection's settings."""
        return self._settings

    @property
    def writable(self) -> bool:
        """False while the frames queued for writing are above their marks.

        Both queues count: the transport's write buffer (above ``write_high_water``) and
        the outbox not yet flushed (at or above four times it: it is emptied on every
        turn of the loop, so writers on other threads may fill it between two turns; a
        lower mark only costs more wake-ups). Once it is false, every stream's
        ``on_writable`` is called when they have drained.
        """
        if self._paused:
            return False
        with self._lock:
            if self._outbox_bytes < self._outbox_high_water:
                return True
            self._stalled = True
            return False

    @property
    def open_streams(self) -> int:
        """How many streams are in the stream table right now."""
        with self._lock:
            return len(self._streams)

    @property
    def error(self) -> RSocketConnectionError | None:
        """The error that ended the connection, once it is closed."""
        return self._error

    @property
    def is_closed(self) -> bool:
        """Whether the connection has failed or been closed."""
        return self._closed

    def send(self, frame: bytes) -> bool:
        """Send an encoded frame; ``False`` if the connection is closed (frame dropped).

        From a thread other than the loop's, over plain TCP, with nothing queued before
        it, the frame goes to the socket at once (``_write_locked``); otherwise it joins
        the outbox, which the loop writes on its next turn (woken once per batch).
        """
        return self.send_all([frame])

    def send_all(self, frames: list[bytes]) -> bool:
        """Send several encoded frames in order (a batch, a fragment chain); see ``send``."""
        with self._lock:
            if self._closed:
                return False
            if self._direct >= 0:
                frames = self._write_locked(frames)
                if not frames:
                    return True
            self._outbox.extend(frames)
            self._outbox_bytes += sum(map(len, frames))
            if self._flush_pending:
                return True
            self._flush_pending = True
        self._wake()
        return True

    def _write_locked(self, frames: list[bytes]) -> list[bytes]:
        """Write ``frames`` to the socket now if nothing is ahead of them; return the rest.

        Only on a thread other than the loop's, with the outbox empty, the loop not
        writing and the transport's buffer empty (``_direct_fd``): then no byte is waiting
        to go before these, and the lock keeps every other writer out until they are in
        the kernel. The socket is non-blocking: what it does not take now (a full buffer,
        an error the loop's own write will then meet and report) goes back to the outbox
        in order. This saves the loop a wake-up per batch.
        """
        transport = self._transport
        if (
            self._outbox
            or self._flushing
            or self._paused
            or transport is None
            or transport.get_write_buffer_size()
            or threading.get_ident() == self._loop_thread
        ):
            return frames
        data = frames[0] if len(frames) == 1 else b"".join(frames)
        try:
            written = os.write(self._direct, data)
        except OSError:  # full (BlockingIOError), or broken: the loop's write handles it
            return frames
        self.bytes_sent += written
        if written == len(data):
            self.frames_sent += len(frames)
            return []
        for index, frame in enumerate(frames):  # a partial write: keep the rest, in order
            if written < len(frame):
                self.frames_sent += index
                return [frame[written:], *frames[index + 1 :]]
            written -= len(frame)
        return []  # not reached: written < len(data)

    def _wake(self) -> None:
        if threading.get_ident() == self._loop_thread:
            self._loop.call_soon(self._flush)
            return
        try:
            self._loop.call_soon_threadsafe(self._flush)
        except RuntimeError:  # the loop is closed: the connection is gone with it
            with self._lock:
                self._closed = True
                self._outbox.clear()

    def register(self, handler: StreamHandler, stream_id: int) -> bool:
        """Put ``handler`` in the stream table; ``False`` if the connection is closed."""
        with self._lock:
            if self._closed:
                return False
            self._register_locked(handler, stream_id)
            return True

    def _register_locked(self, handler: StreamHandler, stream_id: int) -> None:
        """``register``'s work, for a caller that holds the lock and checked ``_closed``."""
        self._watched.discard(handler)
        self._streams[stream_id] = handler
        handler.stream_id = stream_id

    def watch(self, handler: StreamHandler) -> bool:
        """Have ``handler`` told of a failure before it has a stream; ``False`` if closed."""
        with self._lock:
            if self._closed:
                return False
            self._watched.add(handler)
            return True

    def unwatch(self, handler: StreamHandler) -> None:
        """Stop watching ``handler`` (its stream opened, or it ended)."""
        with self._lock:
            self._watched.discard(handler)

    def unregister(self, stream_id: int) -> None:
        """Remove a finished stream; later frames for it are ignored (they may be in flight)."""
        with self._lock:
            self._streams.pop(stream_id, None)

    def close(self, error: RSocketConnectionError | None = None) -> None:
        """Close the connection from any thread; open streams fail with ``error``."""
        failure = error or RSocketConnectionError("the connection was closed locally")
        if threading.get_ident() == self._loop_thread:
            self.fail(failure, notify_peer=False)
            return
        with contextlib.suppress(RuntimeError):  # the loop is gone: so is the connection
            self._loop.call_soon_threadsafe(self.fail, failure, False)

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        high_water = self._settings.write_high_water
        transport.set_write_buffer_limits(high=high_water, low=high_water // 4)
        self._loop_thread = threading.get_ident()
        with self._lock:
            self._direct = _direct_fd(transport)
        self._last_received = self._loop.time()
        self._opened()
        self._schedule_tick()

    def get_buffer(self, sizehint: int) -> memoryview:
        """The buffer the socket reads into: 64 KiB, whatever ``sizehint`` says.

        asyncio's socket transport otherwise reads up to 256 KiB into a new ``bytes`` per
        read, and an allocation that large costs a fresh mapping of memory (glibc's mmap
        threshold) each time: about 13 us per read on the development machine, against
        2 us for the whole read at 64 KiB, which a stream of small frames pays for every
        few frames. The buffer is the loop thread's, shared by all its connections (a
        read fills it and ``buffer_updated`` copies the bytes out before the loop does
        anything else), so a thousand idle connections do not hold 64 MiB.
        """
        buffer: memoryview | None = getattr(_read_buffers, "buffer", None)
        if buffer is None:
            buffer = _read_buffers.buffer = memoryview(bytearray(_READ_SIZE))
        self._read_buffer = buffer
        return buffer

    def buffer_updated(self, nbytes: int) -> None:
        data = self._read_buffer[:nbytes].tobytes()
        self._read_buffer = _NO_BUFFER
        self.data_received(data)

    def data_received(self, data: bytes) -> None:
        """Decode ``data`` (whole frames or not, length-prefixed) and dispatch the frames."""
        if self._closed:
            return
        self._last_received = self._loop.time()
        self.bytes_received += len(data)
        reader = self._reader
        try:
            items = reader.feed_runs(data)
        except FrameError as error:
            self.fail(error, notify_peer=True)
            return
        self.frames_received += reader.count
        touched = self._touched
        streams = self._streams
        partials = self._partials
        lock = self._lock
        try:
            for item in items:
                if self.is_closed:
                    break
                if isinstance(item, PayloadRun):  # the hot path: a stream's elements
                    stream_id = item.stream_id
                    if stream_id not in partials:
                        with lock:
                            handler = streams.get(stream_id)
                        if handler is not None:
                            handler.on_payloads(item.data, item.complete)
                            continue
                    self._dispatch_run(item)  # the end of a chain, or no handler: in full
                    continue
                frame = item
                if (
                    frame.frame_type == _PAYLOAD
                    and not frame.flags & FLAG_FOLLOWS
                    and frame.stream_id not in partials
                ):
                    with lock:
                        handler = streams.get(frame.stream_id)
                    if handler is not None:
                        handler.on_frame(frame)
                        continue
                self._dispatch(frame)
        except FrameError as error:
            self.fail(error, notify_peer=True)
        except Exception as exc:  # a bug of ours: never lose it, never hang the streams
            report_undeliverable(exc)
            self.fail(RSocketConnectionError(f"internal error: {exc!r}"), notify_peer=True)
        finally:
            for handler in touched:
                handler.touched = False
                handler.flush()
            touched.clear()
        if not self._closed:
            self._check_held()
            self._held_changed()

    def _dispatch_run(self, run: PayloadRun) -> None:
        for frame in run.frames():
            if self._closed:
                return
            self._dispatch(frame)

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost does the rest

    def connection_lost(self, exc: Exception | None) -> None:
        with self._lock:  # the socket is closed once this returns: no one writes to it now
            self._direct = -1
        if self._closed:
            if not self.closed.done():
                self.closed.set_result(None)
            return
        pending = self._reader.pending
        if pending:
            message = f"the peer closed the connection in the middle of a frame ({pending} bytes)"
        else:
            message = "the peer closed the connection"
        if exc is not None:
            message += f": {exc}"
        self.fail(RSocketConnectionError(message), notify_peer=False)
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self.release_reading("writes")
        self._notify_writable()
        self._held_changed()

    def hold_reading(self, reason: str) -> None:
        """Loop thread: stop reading from the peer for ``reason`` (until released)."""
        if self._closed or self._transport is None or reason in self._read_holds:
            return
        if not self._read_holds:
            self._transport.pause_reading()
        self._read_holds.add(reason)

    def release_reading(self, reason: str) -> None:
        """Loop thread: ``reason`` no longer holds reading; read again if nothing else does."""
        if reason not in self._read_holds:
            return
        self._read_holds.discard(reason)
        if not self._read_holds and self._transport is not None and not self._closed:
            self._transport.resume_reading()

    @property
    def held_bytes(self) -> int:
        """Loop thread: bytes this connection holds for its peer now.

        The frame being read (at its declared length), fragment chains being reassembled,
        frames queued and not yet given to the socket, and the socket's write buffer.
        """
        transport = self._transport
        buffered = 0 if transport is None or self._closed else transport.get_write_buffer_size()
        return self._reader.expected + self._reassembly_bytes + self._outbox_bytes + buffered

    def _held_changed(self) -> None:
        """Loop thread: ``held_bytes`` may have changed (after a read or a write)."""

    def _notify_writable(self) -> None:
        with self._lock:
            handlers = list(self._streams.values())
        for handler in handlers:
            handler.on_writable()

    # -- the loop side --------------------------------------------------------------------

    def _flush(self) -> None:
        transport = self._transport
        with self._lock:
            frames = self._outbox
            closed = self._closed
            self._outbox = []
            if frames and not closed and transport is not None:
                self.frames_sent += len(frames)
                self.bytes_sent += self._outbox_bytes
                self._flushing = True  # other threads queue behind these (_write_locked)
            self._outbox_bytes = 0
            self._flush_pending = False
            stalled = self._stalled
            self._stalled = False
        if closed or transport is None:
            return
        if frames:
            try:
                transport.write(b"".join(frames))
            finally:
                with self._lock:
                    self._flushing = False
        budget = self._settings.memory_budget
        if budget is not None and self._paused and transport.get_write_buffer_size() > budget:
            # the peer does not read: hold no more for it (keepalive echoes, new requests)
            # until the buffer drains (resume_writing)
            self.hold_reading("writes")
        if stalled and not self._paused:
            self._notify_writable()  # paused: resume_writing will
        self._held_changed()

    def fail(self, error: RSocketConnectionError, notify_peer: bool = False) -> None:
        """End the connection once: tell the peer (if asked), close, fail every stream."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._direct = -1
            handlers = [*self._streams.values(), *self._watched]
            self._streams.clear()
            self._watched.clear()
            frames = self._outbox
            self._outbox = []
            self._outbox_bytes = 0
        self._error = error
        self._partials.clear()
        self._reassembly_bytes = 0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        transport = self._transport
        code = self._error_code(error)
        if transport is not None and not transport.is_closing():
            if notify_peer:
                frames.append(encode_error(0, code, str(error)))
            if frames:
                transport.write(b"".join(frames))
            transport.close()
        if notify_peer:
            logger.warning("closing RSocket connection with %s: %s", code_name(code), error)
        for handler in handlers:
            try:
                handler.on_connection_error(error)
            except Exception as exc:
                report_undeliverable(exc)
        if transport is None and not self.closed.done():
            self.closed.set_result(None)
        if self.on_closed is not None:
            self.on_closed(self, error)

    def _error_code(self, error: RSocketConnectionError) -> int:
        """The code of the ``ERROR`` frame on stream 0 that tells the peer about ``error``."""
        return error.code if error.code is not None else ErrorCode.CONNECTION_ERROR

    def _schedule_tick(self) -> None:
        if not self._closed:
            self._timer = self._loop.call_later(self._tick_interval(), self._tick)

    def _tick_interval(self) -> float:
        return min(self._settings.keepalive, self._settings.max_lifetime)

    def _tick(self) -> None:
        silent = self._loop.time() - self._last_received
        if silent > self._settings.max_lifetime:
            self.fail(
                RSocketConnectionError(
                    f"keepalive timeout: nothing from the peer for {silent:.3g} s "
                    f"(max lifetime {self._settings.max_lifetime:g} s)",
                    code=ErrorCode.CONNECTION_ERROR,
                ),
                notify_peer=True,
            )
            return
        self._keepalive()
        self._schedule_tick()

    def _keepalive(self) -> None:
        """Called every tick while the peer is alive; the client sends KEEPALIVE here."""

    def _dispatch(self, frame: Frame) -> None:
        stream_id = frame.stream_id
        frame_type = frame.frame_type
        if stream_id == 0:
            self._connection_frame(frame)
            return
        flags = frame.flags
        if frame_type == FrameType.PAYLOAD or frame_type in _REQUEST_TYPES:
            if stream_id in self._partials or (flags & FLAG_FOLLOWS and not flags & FLAG_COMPLETE):
                reassembled = self._reassemble(frame)
                if reassembled is None:
                    return
                frame = reassembled
                frame_type = frame.frame_type
        elif frame_type in _ABORT_TYPES:
            # spec: a sender may abandon a fragment chain with CANCEL (or ERROR); a request
            # still in reassembly has no stream yet, so the frame is then ignored below
            dropped = self._partials.pop(stream_id, None)
            if dropped is not None:
                self._reassembly_bytes -= dropped.size
        elif frame_type not in _STREAM_TYPES:
            return  # spec: METADATA_PUSH, KEEPALIVE, SETUP... on a stream ID > 0 are ignored
        if frame_type in _REQUEST_TYPES:
            self._request(frame)
            return
        with self._lock:
            handler = self._streams.get(stream_id)
        if handler is not None:
            handler.on_frame(frame)
        # else, spec: PAYLOAD, ERROR, REQUEST_N and CANCEL on an unknown stream are ignored

    def _reassemble(self, frame: Frame) -> Frame | None:
        stream_id = frame.stream_id
        partial = self._partials.get(stream_id)
        if partial is None:
            if frame.frame_type == FrameType.PAYLOAD:
                with self._lock:
                    known = stream_id in self._streams
                if not known:
                    return frame  # let _dispatch ignore or refuse it
            elif not self._admit(frame):
                return None  # refused on its first fragment: the rest is ignored
            partial = self._partials[stream_id] = _Partial(frame)
            self._hold(partial.size)
            return None
        if frame.frame_type != FrameType.PAYLOAD:
            raise FrameError(
                f"fragment chain on stream {stream_id} interrupted by "
                f"{_type_name(frame.frame_type)}"
            )
        if frame.metadata is not None:
            partial.metadata.append(frame.metadata)
        partial.data.append(frame.data)
        added = len(frame.data) + len(frame.metadata or b"")
        partial.size += added
        self._hold(added)
        if partial.size > self._settings.max_payload_size:
            raise FrameError(
                f"reassembled payload on stream {stream_id} is beyond the maximum of "
                f"{self._settings.max_payload_size} bytes"
            )
        if frame.flags & FLAG_FOLLOWS and not frame.flags & FLAG_COMPLETE:
            return None
        del self._partials[stream_id]
        self._reassembly_bytes -= partial.size
        flags = (partial.flags & ~(FLAG_FOLLOWS | FLAG_METADATA)) | (frame.flags & FLAG_COMPLETE)
        metadata: bytes | None = None
        if partial.metadata:
            flags |= FLAG_METADATA
            metadata = b"".join(partial.metadata)
        return Frame(
            stream_id,
            partial.frame_type,
            flags,
            partial.number,
            metadata,
            b"".join(partial.data),
        )

    def _hold(self, size: int) -> None:
        """Count ``size`` more bytes of reassembly; beyond the budget, refuse the chain."""
        self._reassembly_bytes += size
        budget = self._settings.memory_budget
        if budget is not None and self._reassembly_bytes > budget:
            raise FrameError(
                f"fragment chains being reassembled hold {self._reassembly_bytes} bytes, "
                f"beyond the connection's memory budget of {budget} bytes"
            )

    def _check_held(self) -> None:
        """After each read: close the connection if it holds more than its budget."""
        budget = self._settings.memory_budget
        if budget is None:
            return
        held = self._reader.expected + self._reassembly_bytes
        if held > budget:
            self.fail(
                RSocketConnectionError(
                    f"the peer made the connection hold {held} bytes (the frame being read "
                    f"and fragment chains), beyond its memory budget of {budget} bytes",
                    code=ErrorCode.CONNECTION_ERROR,
                ),
                notify_peer=True,
            )

    def _admit(self, frame: Frame) -> bool:
        """The first fragment of a request arrived; ``False`` refuses it (already answered).

        Subclasses check what they can before the rest is buffered.
        """
        return True

    def _connection_frame(self, frame: Frame) -> None:
        frame_type = frame.frame_type
        if frame_type == FrameType.KEEPALIVE:
            if frame.flags & FLAG_RESPOND:
                self.send(encode_keepalive(respond=False, data=frame.data))
        elif frame_type == FrameType.ERROR:
            self._connection_error_frame(frame)
        elif frame_type == FrameType.SETUP:
            self._setup(frame)
        elif frame_type in _REQUEST_TYPES or frame_type == FrameType.REQUEST_N:
            raise FrameError(f"{_type_name(frame_type)} frame on stream 0")
        elif frame_type == FrameType.EXT and not frame.flags & FLAG_IGNORE:
            raise FrameError("EXT frame is not supported (and its ignore flag is clear)")
        # LEASE, METADATA_PUSH, RESUME_OK, PAYLOAD and CANCEL on stream 0: ignored (spec)

    def _connection_error_frame(self, frame: Frame) -> None:
        message = frame.data.decode("utf-8", "replace")
        self.fail(
            RSocketConnectionError(
                f"the peer closed the connection with {code_name(frame.number)}: {message}",
                code=frame.number,
            ),
            notify_peer=False,
        )

    def _opened(self) -> None:
        """The transport is up (the client sends SETUP here)."""

    def _setup(self, frame: Frame) -> None:
        """A SETUP frame arrived; a client ignores it (spec)."""

    def _request(self, frame: Frame) -> None:
        """A (reassembled) request frame arrived on a stream ID > 0; subclasses override."""
        raise NotImplementedError

    def touch(self, handler: StreamHandler) -> None:
        """Loop thread: have ``handler.flush()`` called once after the current batch."""
        if not handler.touched:
            handler.touched = True
            self._touched.append(handler)


def _type_name(frame_type: int) -> str:
    try:
        return FrameType(frame_type).name
    except ValueError:
        return hex(frame_type)
