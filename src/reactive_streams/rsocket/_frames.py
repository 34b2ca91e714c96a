"""The RSocket frame codec: bytes on the wire to ``Frame`` objects and back.

Written from the public protocol spec (``rsocket/rsocket``, ``Protocol.md``, version 1.0)
with ``struct``: every frame on a TCP connection is a 24-bit big-endian length, then a
6-byte header (31-bit stream ID, 6-bit frame type, 10 bits of flags), then the body that
depends on the type. ``FrameReader`` splits a byte stream into frames and refuses anything
malformed with ``FrameError``; the ``encode_*`` functions build whole frames, length prefix
included, so a sender only joins them (``encode_payload_header`` builds the header of an
element frame once for elements of one size). ``encode_fragments`` splits a request or
payload that is larger than the frame limit into a ``FOLLOWS`` chain.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import TYPE_CHECKING, Final

from ._errors import FrameError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "FLAG_COMPLETE",
    "FLAG_FOLLOWS",
    "FLAG_IGNORE",
    "FLAG_LEASE",
    "FLAG_METADATA",
    "FLAG_NEXT",
    "FLAG_RESPOND",
    "FLAG_RESUME",
    "MAX_FRAME_SIZE",
    "MAX_REQUEST_N",
    "MAX_STREAM_ID",
    "ErrorCode",
    "Frame",
    "FrameReader",
    "FrameType",
    "PayloadRun",
    "Setup",
    "encode_cancel",
    "encode_error",
    "encode_fragments",
    "encode_keepalive",
    "encode_payload",
    "encode_payload_header",
    "encode_request",
    "encode_request_n",
    "encode_setup",
    "wire_request_n",
]

MAX_FRAME_SIZE: Final[int] = 0xFFFFFF
"""The largest frame the protocol allows, header included: ``2**24 - 1`` bytes."""

MAX_REQUEST_N: Final[int] = 0x7FFFFFFF
"""The largest request-n a frame can carry (31 bits); RSocket has no "unbounded" value.

The encoders clamp a larger request-n to it (as rsocket-java does: a subscriber's
``MAX_DEMAND`` becomes the largest grant the wire can say) and refuse one below 1, which
the decoder would refuse (the spec: request-n is at least 1).
"""

MAX_STREAM_ID: Final[int] = 0x7FFFFFFF
"""The largest stream ID (31 bits; the top bit of the field is reserved)."""

# The flags: 10 bits after the 6-bit frame type. Bits 0x80 and 0x40 mean different things
# for different frame types, as the spec numbers them.
FLAG_IGNORE: Final[int] = 0x200
"""(I) an unknown frame of this type may be dropped."""
FLAG_METADATA: Final[int] = 0x100
"""(M) the frame carries metadata, behind a 24-bit length (except ``METADATA_PUSH``)."""
FLAG_FOLLOWS: Final[int] = 0x80
"""(F) on requests and ``PAYLOAD``: more fragments of this frame follow."""
FLAG_RESUME: Final[int] = 0x80
"""(R) on ``SETUP``: a resume token follows the fixed fields."""
FLAG_RESPOND: Final[int] = 0x80
"""(R) on ``KEEPALIVE``: the peer must answer with a ``KEEPALIVE``."""
FLAG_LEASE: Final[int] = 0x40
"""(L) on ``SETUP``: the client will honour ``LEASE`` frames."""
FLAG_COMPLETE: Final[int] = 0x40
"""(C) on ``PAYLOAD`` and ``REQUEST_CHANNEL``: the stream is complete."""
FLAG_NEXT: Final[int] = 0x20
"""(N) on ``PAYLOAD``: the frame carries an element (data and/or metadata)."""

# The layout of a frame, in bytes. On TCP every frame is preceded by its length (24 bits,
# ``_LENGTH_SIZE``), which is not part of the frame; the offsets below are from the start
# of the frame, after that prefix.
_LENGTH_SIZE: Final[int] = 3
"""A 24-bit length: the frame length prefix, and the metadata length inside a frame."""
_HEADER_SIZE: Final[int] = 6
"""The frame header: a 31-bit stream ID (u32), then the type and the flags (u16)."""
_FRAME_TYPE_SHIFT: Final[int] = 10
"""The type sits in the top 6 bits of the u16, above the 10 flag bits."""
_FLAGS_MASK: Final[int] = 0x3FF
_TYPE_MASK: Final[int] = 0x3F << _FRAME_TYPE_SHIFT
_MASK_31: Final[int] = 0x7FFFFFFF
_RESERVED_BIT: Final[int] = 0x80000000
"""The top bit of a 32-bit field whose value has 31 bits (stream ID, request-n, times)."""
_MASK_63: Final[int] = (1 << 63) - 1
_REQUEST_N_SIZE: Final[int] = 4
_ERROR_CODE_SIZE: Final[int] = 4
_POSITION_SIZE: Final[int] = 8
_LEASE_FIXED_SIZE: Final[int] = 8
"""``LEASE``: time-to-live in ms and number of requests, two u32 before the metadata."""
_REQUEST_N_END: Final[int] = _HEADER_SIZE + _REQUEST_N_SIZE
"""Where the body of ``REQUEST_STREAM``/``REQUEST_CHANNEL`` begins; ``REQUEST_N``'s size."""
_ERROR_DATA: Final[int] = _HEADER_SIZE + _ERROR_CODE_SIZE
"""Where an ``ERROR`` frame's message begins, after the 32-bit error code."""
_KEEPALIVE_DATA: Final[int] = _HEADER_SIZE + _POSITION_SIZE
"""Where a ``KEEPALIVE`` frame's data begins, after the 63-bit last received position."""
_LEASE_METADATA: Final[int] = _HEADER_SIZE + _LEASE_FIXED_SIZE


class FrameType(IntEnum):
    """The frame types of RSocket 1.0."""

    SETUP = 0x01
    LEASE = 0x02
    KEEPALIVE = 0x03
    REQUEST_RESPONSE = 0x04
    REQUEST_FNF = 0x05
    REQUEST_STREAM = 0x06
    REQUEST_CHANNEL = 0x07
    REQUEST_N = 0x08
    CANCEL = 0x09
    PAYLOAD = 0x0A
    ERROR = 0x0B
    METADATA_PUSH = 0x0C
    RESUME = 0x0D
    RESUME_OK = 0x0E
    EXT = 0x3F


class ErrorCode(IntEnum):
    """The error codes an ``ERROR`` frame carries."""

    INVALID_SETUP = 0x001
    UNSUPPORTED_SETUP = 0x002
    REJECTED_SETUP = 0x003
    REJECTED_RESUME = 0x004
    CONNECTION_ERROR = 0x101
    CONNECTION_CLOSE = 0x102
    APPLICATION_ERROR = 0x201
    REJECTED = 0x202
    CANCELED = 0x203
    INVALID = 0x204


_REQUEST_TYPES: Final = frozenset(
    {
        FrameType.REQUEST_RESPONSE,
        FrameType.REQUEST_FNF,
        FrameType.REQUEST_STREAM,
        FrameType.REQUEST_CHANNEL,
    }
)
_KNOWN_TYPES: Final = frozenset(int(member) for member in FrameType)
_REQUEST_N_TYPES: Final = frozenset({FrameType.REQUEST_STREAM, FrameType.REQUEST_CHANNEL})
_PAYLOAD: Final[int] = int(FrameType.PAYLOAD)
_PAYLOAD_BITS: Final[int] = _PAYLOAD << _FRAME_TYPE_SHIFT
_RUN_MASK: Final[int] = _TYPE_MASK | FLAG_METADATA | FLAG_FOLLOWS | FLAG_NEXT
_RUN_BITS: Final[int] = _PAYLOAD_BITS | FLAG_NEXT
"""A ``PAYLOAD`` with NEXT, without metadata and FOLLOWS (a run's frame) matches here."""

# length prefix split as u8 + u16 (24 bits), stream ID u32, type and flags u16
_PREFIX_HEADER = struct.Struct(">BHIH")
_PREFIX_HEADER_N = struct.Struct(">BHIHI")
_U32 = struct.Struct(">I")
_U24_SPLIT = struct.Struct(">BH")
_HEADER = struct.Struct(">IH")
_SETUP_FIXED = struct.Struct(">HHII")
"""``SETUP``: major and minor version (u16), keepalive and max lifetime in ms (31 bits)."""
_SETUP_FIXED_END: Final[int] = _HEADER_SIZE + _SETUP_FIXED.size
_KEEPALIVE_POSITION = struct.Struct(">Q")


class Setup:
    """The connection parameters a ``SETUP`` frame carries.

    Attributes:
        major_version, minor_version: the protocol version the client speaks (1.0).
        keepalive_ms: time between the client's ``KEEPALIVE`` frames, in milliseconds.
        max_lifetime_ms: how long a side may stay silent before it counts as dead, in ms.
        resume_token: the resume identification token, ``None`` without the resume flag.
        lease: whether the client asked to honour ``LEASE`` frames.
        metadata_mime, data_mime: the MIME types of metadata and data on this connection.
    """

    __slots__ = (
        "data_mime",
        "keepalive_ms",
        "lease",
        "major_version",
        "max_lifetime_ms",
        "metadata_mime",
        "minor_version",
        "resume_token",
    )

    def __init__(
        self,
        *,
        major_version: int,
        minor_version: int,
        keepalive_ms: int,
        max_lifetime_ms: int,
        resume_token: bytes | None,
        lease: bool,
        metadata_mime: str,
        data_mime: str,
    ) -> None:
        self.major_version = major_version
        self.minor_version = minor_version
        self.keepalive_ms = keepalive_ms
        self.max_lifetime_ms = max_lifetime_ms
        self.resume_token = resume_token
        self.lease = lease
        self.metadata_mime = metadata_mime
        self.data_mime = data_mime


class Frame:
    """One decoded frame.

    Attributes:
        stream_id: 0 for the connection, otherwise the stream the frame belongs to.
        frame_type: the ``FrameType`` value, as an ``int``.
        flags: the 10 flag bits.
        number: the type's number field: initial request-n (``REQUEST_STREAM``,
            ``REQUEST_CHANNEL``), request-n (``REQUEST_N``), error code (``ERROR``), last
            received position (``KEEPALIVE``); 0 for other types.
        metadata: the metadata, or ``None`` when the metadata flag is not set.
        data: the data (for ``ERROR``, the UTF-8 message).
        setup: the parameters of a ``SETUP`` frame, ``None`` for other types.
    """

    __slots__ = ("data", "flags", "frame_type", "metadata", "number", "setup", "stream_id")

    def __init__(  # noqa: PLR0917 - positional on the hot path of the decoder
        self,
        stream_id: int,
        frame_type: int,
        flags: int,
        number: int = 0,
        metadata: bytes | None = None,
        data: bytes = b"",
        setup: Setup | None = None,
    ) -> None:
        self.stream_id = stream_id
        self.frame_type = frame_type
        self.flags = flags
        self.number = number
        self.metadata = metadata
        self.data = data
        self.setup = setup

    def __repr__(self) -> str:
        try:
            name = FrameType(self.frame_type).name
        except ValueError:
            name = hex(self.frame_type)
        return (
            f"Frame({name}, stream={self.stream_id}, flags={self.flags:#05x}, "
            f"number={self.number}, metadata={self.metadata!r:.40}, data={self.data!r:.40})"
        )


class FrameReader:
    """Splits a TCP byte stream into frames.

    ``feed(data)`` takes whatever bytes arrived and returns every frame they complete, in
    order; an incomplete frame waits in the buffer for the next call. ``feed_runs`` does
    the same with the consecutive element frames of a stream as one ``PayloadRun`` (the
    connection's hot path). Frames are checked as
    they are decoded: a length prefix above ``max_frame_size``, a frame shorter than its
    header, a metadata length that overruns the frame, a request-n of 0, or an unknown type
    without the ignore flag raise ``FrameError`` (the connection must then close). Frames
    of an unknown type *with* the ignore flag are dropped, as the spec asks.

    Args:
        max_frame_size: the largest frame accepted, in bytes, header included (the length
            prefix excluded); at most ``MAX_FRAME_SIZE``.
    """

    __slots__ = ("_max_frame_size", "_need", "_pending", "count")

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self._pending = bytearray()
        self._need = 0
        self._max_frame_size = max_frame_size
        self.count = 0

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        return len(self._pending)

    @property
    def expected(self) -> int:
        """The size of the frame being read, once its length prefix is in (else 0 or 3).

        That is what the reader will hold when the frame is whole, length prefix included:
        a peer announcing a large frame can be refused before it sends the rest.
        """
        return self._need if self._pending else 0

    def feed(self, data: bytes) -> list[Frame]:
        """Add ``data``; return the frames it completes, one ``Frame`` each.

        ``feed_runs`` with every ``PayloadRun`` spelled out as its frames.

        Raises:
            FrameError: a frame is malformed or longer than ``max_frame_size``.
        """
        frames: list[Frame] = []
        for item in self.feed_runs(data):
            if type(item) is PayloadRun:
                frames += item.frames()
            else:
                frames.append(item)  # type: ignore[arg-type]  # a Frame
        return frames

    def feed_runs(self, data: bytes) -> list[Frame | PayloadRun]:
        """Add ``data``; return what it completes, in order: frames and payload runs.

        Consecutive ``PAYLOAD`` frames of one stream with NEXT and without metadata or
        FOLLOWS, the bulk of a stream, come back as one ``PayloadRun``: their data as a
        list, and no ``Frame`` object per frame. Every other frame is a ``Frame``. A
        frame split over many reads is collected without re-parsing (linear time).
        ``count`` is then the number of frames the call completed.

        Raises:
            FrameError: a frame is malformed or longer than ``max_frame_size``.
        """
        pending = self._pending
        self.count = 0
        if pending:
            pending += data
            if len(pending) < self._need:
                return []
            buffer = bytes(pending)
            pending.clear()
        else:
            buffer = bytes(data)
        items: list[Frame | PayloadRun] = []
        append = items.append
        position = 0
        end = len(buffer)
        count = 0
        unpack_length = _U24_SPLIT.unpack_from
        unpack_header = _HEADER.unpack_from
        max_frame_size = self._max_frame_size
        header_size = _HEADER_SIZE
        run: list[bytes] | None = None  # the data of the run being collected
        run_stream = -1
        run_append: Callable[[bytes], None] = bytearray().extend  # never called: no run yet
        startswith = buffer.startswith
        # The length prefix and header of the run's last frame, and that frame's size: a
        # frame that starts with the same bytes has the same length, stream and flags, all
        # checked already, so only its data needs taking (the bulk of a stream: elements
        # of one size).
        prefix = b""
        prefix_size = _LENGTH_SIZE + header_size
        frame_size = 0
        while end - position >= _LENGTH_SIZE:
            if run is not None and startswith(prefix, position):
                whole = (end - position) // frame_size  # frames of that size that fit
                if whole:
                    same = _same_prefix(buffer, position, prefix, frame_size, whole)
                    stop = position + same * frame_size
                    data_size = frame_size - prefix_size
                    first = position + prefix_size  # the first frame's data
                    run += [
                        buffer[start : start + data_size]
                        for start in range(first, first + same * frame_size, frame_size)
                    ]
                    count += same
                    position = stop
                    continue
            high, low = unpack_length(buffer, position)
            length = (high << 16) | low
            if length > max_frame_size:
                raise FrameError(
                    f"frame length {length} is beyond the maximum of {max_frame_size} bytes"
                )
            if length < header_size:
                raise FrameError(
                    f"frame length {length} is shorter than the {_HEADER_SIZE}-byte header"
                )
            start = position + _LENGTH_SIZE
            stop = start + length
            if stop > end:
                self._need = stop - position
                break
            count += 1
            stream_id, type_and_flags = unpack_header(buffer, start)
            if type_and_flags & _RUN_MASK == _RUN_BITS and stream_id < _RESERVED_BIT:
                # PAYLOAD with NEXT, without metadata and FOLLOWS: joins or starts a run
                if run is None or stream_id != run_stream:
                    run = []
                    run_append = run.append
                    run_stream = stream_id
                    append(PayloadRun(stream_id, run))
                run_append(buffer[start + header_size : stop])
                if type_and_flags & FLAG_COMPLETE:
                    items[-1].complete = True  # type: ignore[union-attr]  # the run
                    run = None
                else:
                    prefix = buffer[position : start + header_size]
                    frame_size = stop - position
            else:
                run = None
                frame = decode_frame(buffer[start:stop])
                if frame is not None:
                    append(frame)
            position = stop
        else:
            self._need = _LENGTH_SIZE
        if position < end:
            pending += buffer[position:]
        self.count = count
        return items


def _same_prefix(buffer: bytes, position: int, prefix: bytes, frame_size: int, whole: int) -> int:
    """How many frames in a row from ``position`` start with ``prefix``, at most ``whole``.

    The first one does, and a frame that starts with ``prefix`` (its length prefix and
    header) is ``frame_size`` bytes long, so the next one starts that far on. Each byte of
    ``prefix`` is checked for all ``whole`` frames at once, as a column of the buffer (the
    bytes ``frame_size`` apart): the first frame that differs is the first row where any
    column does.
    """
    if whole == 1:
        return 1
    same = whole
    limit = position + whole * frame_size
    for offset in range(len(prefix)):
        column = buffer[position + offset : limit : frame_size]
        rest = len(column.lstrip(prefix[offset : offset + 1]))  # from the first other byte
        if rest and whole - rest < same:
            same = whole - rest
    return same


class PayloadRun:
    """Consecutive ``PAYLOAD`` frames of one stream, each with NEXT and only data.

    Attributes:
        stream_id: the stream the frames belong to.
        data: each frame's data, in order (at least one).
        complete: the last frame also had the COMPLETE flag.
    """

    __slots__ = ("complete", "data", "stream_id")

    def __init__(self, stream_id: int, data: list[bytes], complete: bool = False) -> None:
        self.stream_id = stream_id
        self.data = data
        self.complete = complete

    def frames(self) -> list[Frame]:
        """The run as the ``Frame`` objects it stands for."""
        stream_id = self.stream_id
        frames = [Frame(stream_id, _PAYLOAD, FLAG_NEXT, 0, None, data) for data in self.data]
        if self.complete:
            frames[-1].flags = FLAG_NEXT | FLAG_COMPLETE
        return frames

    def __repr__(self) -> str:
        return (
            f"PayloadRun(stream={self.stream_id}, frames={len(self.data)}, "
            f"complete={self.complete})"
        )


def _split_metadata(frame: bytes, offset: int, flags: int) -> tuple[bytes | None, bytes]:
    if not flags & FLAG_METADATA:
        return None, frame[offset:]
    if len(frame) - offset < _LENGTH_SIZE:
        raise FrameError("the metadata flag is set but the frame has no metadata length")
    high, low = _U24_SPLIT.unpack_from(frame, offset)
    length = (high << 16) | low
    start = offset + _LENGTH_SIZE
    if start + length > len(frame):
        raise FrameError(
            f"metadata length {length} overruns the frame ({len(frame) - start} bytes left)"
        )
    return frame[start : start + length], frame[start + length :]


def _require(frame: bytes, size: int, name: str) -> None:
    if len(frame) < size:
        raise FrameError(f"{name} frame of {len(frame)} bytes is too short (needs {size})")


def decode_frame(frame: bytes) -> Frame | None:
    """Decode one frame (without its length prefix); ``None`` for an ignorable unknown type.

    Raises:
        FrameError: the frame is malformed.
    """
    stream_id, type_and_flags = _HEADER.unpack_from(frame, 0)
    if stream_id & _RESERVED_BIT:
        raise FrameError(f"stream ID {stream_id:#x} has its reserved top bit set")
    frame_type = type_and_flags >> _FRAME_TYPE_SHIFT
    flags = type_and_flags & _FLAGS_MASK
    if frame_type == FrameType.PAYLOAD:  # the hot path
        if not flags & (FLAG_NEXT | FLAG_COMPLETE):
            raise FrameError("PAYLOAD frame with neither the NEXT nor the COMPLETE flag")
        if flags & FLAG_METADATA:
            metadata, data = _split_metadata(frame, _HEADER_SIZE, flags)
            return Frame(stream_id, frame_type, flags, 0, metadata, data)
        return Frame(stream_id, frame_type, flags, 0, None, frame[_HEADER_SIZE:])
    if frame_type not in _KNOWN_TYPES:
        if flags & FLAG_IGNORE:
            return None
        raise FrameError(f"unknown frame type {frame_type:#x} without the ignore flag")
    if frame_type in (FrameType.REQUEST_STREAM, FrameType.REQUEST_CHANNEL, FrameType.REQUEST_N):
        _require(frame, _REQUEST_N_END, FrameType(frame_type).name)
        number = _U32.unpack_from(frame, _HEADER_SIZE)[0] & _MASK_31
        if number == 0:
            raise FrameError(f"{FrameType(frame_type).name} frame with request-n 0")
        if frame_type == FrameType.REQUEST_N:
            return Frame(stream_id, frame_type, flags, number)
        metadata, data = _split_metadata(frame, _REQUEST_N_END, flags)
        return Frame(stream_id, frame_type, flags, number, metadata, data)
    if frame_type in (FrameType.REQUEST_RESPONSE, FrameType.REQUEST_FNF):
        metadata, data = _split_metadata(frame, _HEADER_SIZE, flags)
        return Frame(stream_id, frame_type, flags, 0, metadata, data)
    if frame_type == FrameType.CANCEL:
        return Frame(stream_id, frame_type, flags)
    if frame_type == FrameType.ERROR:
        _require(frame, _ERROR_DATA, "ERROR")
        code = _U32.unpack_from(frame, _HEADER_SIZE)[0]
        return Frame(stream_id, frame_type, flags, code, None, frame[_ERROR_DATA:])
    if frame_type == FrameType.KEEPALIVE:
        _require(frame, _KEEPALIVE_DATA, "KEEPALIVE")
        position = _KEEPALIVE_POSITION.unpack_from(frame, _HEADER_SIZE)[0] & _MASK_63
        return Frame(stream_id, frame_type, flags, position, None, frame[_KEEPALIVE_DATA:])
    if frame_type == FrameType.SETUP:
        return _decode_setup(frame, stream_id, flags)
    if frame_type == FrameType.METADATA_PUSH:
        return Frame(stream_id, frame_type, flags, 0, frame[_HEADER_SIZE:], b"")
    if frame_type == FrameType.LEASE:
        _require(frame, _LEASE_METADATA, "LEASE")
        return Frame(stream_id, frame_type, flags, 0, frame[_LEASE_METADATA:] or None, b"")
    # RESUME, RESUME_OK and EXT: understood as types, not supported; the caller decides.
    return Frame(stream_id, frame_type, flags, 0, None, frame[_HEADER_SIZE:])


def _decode_setup(frame: bytes, stream_id: int, flags: int) -> Frame:
    """Decode a ``SETUP``; a frame that cannot be read is refused with ``INVALID_SETUP``."""
    try:
        return _decode_setup_fields(frame, stream_id, flags)
    except FrameError as error:
        if error.code != ErrorCode.CONNECTION_ERROR:
            raise
        raise FrameError(str(error), code=ErrorCode.INVALID_SETUP) from None


def _decode_setup_fields(frame: bytes, stream_id: int, flags: int) -> Frame:
    _require(frame, _SETUP_FIXED_END, "SETUP")
    major, minor, keepalive, lifetime = _SETUP_FIXED.unpack_from(frame, _HEADER_SIZE)
    offset = _SETUP_FIXED_END
    token: bytes | None = None
    if flags & FLAG_RESUME:
        _require(frame, offset + 2, "SETUP")
        token_length = int.from_bytes(frame[offset : offset + 2], "big")
        offset += 2
        _require(frame, offset + token_length, "SETUP")
        token = frame[offset : offset + token_length]
        offset += token_length
    mimes: list[str] = []
    for _ in range(2):
        _require(frame, offset + 1, "SETUP")
        mime_length = frame[offset]
        offset += 1
        _require(frame, offset + mime_length, "SETUP")
        try:
            mimes.append(frame[offset : offset + mime_length].decode("ascii"))
        except UnicodeDecodeError:
            raise FrameError(
                "SETUP frame with a MIME type that is not US-ASCII",
                code=ErrorCode.UNSUPPORTED_SETUP,
            ) from None
        offset += mime_length
    metadata, data = _split_metadata(frame, offset, flags)
    setup = Setup(
        major_version=major,
        minor_version=minor,
        keepalive_ms=keepalive & _MASK_31,
        max_lifetime_ms=lifetime & _MASK_31,
        resume_token=token,
        lease=bool(flags & FLAG_LEASE),
        metadata_mime=mimes[0],
        data_mime=mimes[1],
    )
    return Frame(stream_id, FrameType.SETUP, flags, 0, metadata, data, setup)


# -- encoding -----------------------------------------------------------------------------
#
# Every encoder refuses, with ValueError, what would make a frame the decoder refuses: a
# stream ID outside 0 to MAX_STREAM_ID, a frame longer than MAX_FRAME_SIZE, a request-n
# below 1, a PAYLOAD with neither NEXT nor COMPLETE, a 31-bit field out of range. A
# request-n above MAX_REQUEST_N is clamped to it. tests/rsocket/test_frames.py checks by
# property that every frame they can write is read back with the same fields.


def wire_request_n(n: int) -> int:
    """The request-n a frame carries for a demand of ``n``: ``n``, at most ``MAX_REQUEST_N``.

    Demand above the 31 bits of the wire (``MAX_DEMAND`` means "unbounded") is clamped, as
    rsocket-java does; the requester grants the rest later, as elements are consumed.

    Raises:
        ValueError: ``n < 1`` (the decoder refuses a request-n of 0).
    """
    if n < 1:
        raise ValueError(f"request-n must be at least 1, got {n}")
    return n if n <= MAX_REQUEST_N else MAX_REQUEST_N


def _name(frame_type: int) -> str:
    try:
        return FrameType(frame_type).name
    except ValueError:
        return hex(frame_type)


def _refuse(length: int, stream_id: int, frame_type: int) -> ValueError:
    if not 0 <= stream_id <= MAX_STREAM_ID:
        return ValueError(f"stream ID {stream_id} is outside 0 to {MAX_STREAM_ID}")
    return ValueError(
        f"a {_name(frame_type)} frame of {length} bytes is beyond the maximum of "
        f"{MAX_FRAME_SIZE} bytes"
    )


def _prefix_header(length: int, stream_id: int, frame_type: int, flags: int) -> bytes:
    """The length prefix and the header of a frame of ``length`` bytes (header included)."""
    if length > MAX_FRAME_SIZE or not 0 <= stream_id <= MAX_STREAM_ID:
        raise _refuse(length, stream_id, frame_type)
    return _PREFIX_HEADER.pack(
        length >> 16, length & 0xFFFF, stream_id, (frame_type << _FRAME_TYPE_SHIFT) | flags
    )


def _metadata_length(metadata: bytes) -> bytes:
    size = len(metadata)
    if size > MAX_FRAME_SIZE:
        raise ValueError(f"metadata of {size} bytes is beyond the maximum of {MAX_FRAME_SIZE}")
    return _U24_SPLIT.pack(size >> 16, size & 0xFFFF)


def encode_payload(
    stream_id: int,
    data: bytes,
    metadata: bytes | None = None,
    *,
    next_: bool = True,
    complete: bool = False,
    follows: bool = False,
) -> bytes:
    """A ``PAYLOAD`` frame with its length prefix; ``next_``/``complete`` set N and C.

    Raises:
        ValueError: neither ``next_`` nor ``complete`` (the spec forbids it), a stream ID
            outside 0 to ``MAX_STREAM_ID``, or a frame longer than ``MAX_FRAME_SIZE``.
    """
    flags = (FLAG_NEXT if next_ else 0) | (FLAG_COMPLETE if complete else 0)
    if not flags:
        raise ValueError("a PAYLOAD frame needs NEXT or COMPLETE: next_ or complete must be set")
    if follows:
        flags |= FLAG_FOLLOWS
    if metadata is None:
        length = _HEADER_SIZE + len(data)
        if length > MAX_FRAME_SIZE or not 0 <= stream_id <= MAX_STREAM_ID:
            raise _refuse(length, stream_id, _PAYLOAD)
        return (
            _PREFIX_HEADER.pack(length >> 16, length & 0xFFFF, stream_id, _PAYLOAD_BITS | flags)
            + data
        )
    flags |= FLAG_METADATA
    length = _HEADER_SIZE + _LENGTH_SIZE + len(metadata) + len(data)
    return (
        _prefix_header(length, stream_id, _PAYLOAD, flags)
        + _metadata_length(metadata)
        + metadata
        + data
    )


def encode_payload_header(stream_id: int, size: int) -> bytes:
    """The length prefix and header of a ``PAYLOAD`` (NEXT) frame of ``size`` bytes of data.

    ``encode_payload_header(s, len(data)) + data == encode_payload(s, data)``: a sender of
    many elements of one size builds the header once.

    Raises:
        ValueError: a stream ID outside 0 to ``MAX_STREAM_ID``, or a frame longer than
            ``MAX_FRAME_SIZE``.
    """
    length = _HEADER_SIZE + size
    if length > MAX_FRAME_SIZE or not 0 <= stream_id <= MAX_STREAM_ID:
        raise _refuse(length, stream_id, _PAYLOAD)
    return _PREFIX_HEADER.pack(length >> 16, length & 0xFFFF, stream_id, _PAYLOAD_BITS | FLAG_NEXT)


def encode_request(
    frame_type: FrameType,
    stream_id: int,
    data: bytes,
    metadata: bytes | None = None,
    *,
    initial_n: int | None = None,
    follows: bool = False,
) -> bytes:
    """A ``REQUEST_RESPONSE``, ``REQUEST_FNF``, ``REQUEST_STREAM`` or ``REQUEST_CHANNEL`` frame.

    Args:
        frame_type: one of the four request types.
        stream_id: the new stream's ID.
        data: the request's data.
        metadata: its metadata, or ``None`` for none (the M flag clear).
        initial_n: the initial request-n of ``REQUEST_STREAM`` and ``REQUEST_CHANNEL``,
            required for them: at least 1, clamped to ``MAX_REQUEST_N``
            (``wire_request_n``). Ignored for the other two types.
        follows: set the FOLLOWS flag (a fragment; see ``encode_fragments``).

    Raises:
        ValueError: ``frame_type`` is not a request type; ``initial_n`` missing or below 1
            where it is carried; a stream ID outside 0 to ``MAX_STREAM_ID``; a frame longer
            than ``MAX_FRAME_SIZE``.
    """
    if frame_type not in _REQUEST_TYPES:
        raise ValueError(f"{_name(frame_type)} is not a request frame type")
    flags = FLAG_FOLLOWS if follows else 0
    parts: list[bytes] = []
    if frame_type in _REQUEST_N_TYPES:
        if initial_n is None:
            raise ValueError(f"a {_name(frame_type)} frame needs initial_n (at least 1)")
        parts.append(_U32.pack(wire_request_n(initial_n)))
    if metadata is not None:
        flags |= FLAG_METADATA
        parts += (_metadata_length(metadata), metadata)
    parts.append(data)
    body = b"".join(parts)
    return _prefix_header(_HEADER_SIZE + len(body), stream_id, frame_type, flags) + body


def encode_request_n(stream_id: int, n: int) -> bytes:
    """A ``REQUEST_N`` frame granting ``n`` more payloads, clamped to ``MAX_REQUEST_N``.

    Raises:
        ValueError: ``n < 1``, or a stream ID outside 0 to ``MAX_STREAM_ID``.
    """
    n = wire_request_n(n)
    if not 0 <= stream_id <= MAX_STREAM_ID:
        raise _refuse(_REQUEST_N_END, stream_id, FrameType.REQUEST_N)
    return _PREFIX_HEADER_N.pack(
        0, _REQUEST_N_END, stream_id, FrameType.REQUEST_N << _FRAME_TYPE_SHIFT, n
    )


def encode_cancel(stream_id: int) -> bytes:
    """A ``CANCEL`` frame.

    Raises:
        ValueError: a stream ID outside 0 to ``MAX_STREAM_ID``.
    """
    return _prefix_header(_HEADER_SIZE, stream_id, FrameType.CANCEL, 0)


def encode_error(stream_id: int, code: int, message: str) -> bytes:
    """An ``ERROR`` frame; the message travels as UTF-8, cut to fit one frame.

    Raises:
        ValueError: ``code`` is not a 32-bit unsigned value, or a stream ID outside 0 to
            ``MAX_STREAM_ID``.
    """
    if not 0 <= code <= 0xFFFFFFFF:
        raise ValueError(f"error code {code} is not a 32-bit unsigned value")
    data = message.encode("utf-8", "replace")[: MAX_FRAME_SIZE - _ERROR_DATA]
    return _prefix_header(_ERROR_DATA + len(data), stream_id, FrameType.ERROR, 0) + (
        _U32.pack(code) + data
    )


def encode_keepalive(*, respond: bool, data: bytes = b"", position: int = 0) -> bytes:
    """A ``KEEPALIVE`` frame on stream 0; ``respond`` asks the peer to echo it.

    Raises:
        ValueError: ``position`` outside 0 to ``2**63 - 1``, or a frame longer than
            ``MAX_FRAME_SIZE``.
    """
    if not 0 <= position <= _MASK_63:
        raise ValueError(f"keepalive position {position} is outside 0 to 2**63 - 1")
    flags = FLAG_RESPOND if respond else 0
    return (
        _prefix_header(_KEEPALIVE_DATA + len(data), 0, FrameType.KEEPALIVE, flags)
        + _KEEPALIVE_POSITION.pack(position)
        + data
    )


def _mime(mime: str) -> bytes:
    encoded = mime.encode("ascii")
    if len(encoded) > 255:
        raise ValueError(f"MIME type {mime!r} is longer than 255 bytes")
    return bytes((len(encoded),)) + encoded


def encode_setup(
    *,
    keepalive_ms: int,
    max_lifetime_ms: int,
    metadata_mime: str,
    data_mime: str,
    metadata: bytes | None = None,
    data: bytes = b"",
    major_version: int = 1,
    minor_version: int = 0,
) -> bytes:
    """A ``SETUP`` frame (no resume, no lease), version 1.0 unless told otherwise.

    Raises:
        ValueError: ``keepalive_ms`` or ``max_lifetime_ms`` outside 1 to ``2**31 - 1``
            (31-bit fields, positive by the spec), a version outside 0 to 65535, a MIME
            type that is not US-ASCII or longer than 255 bytes, or a frame longer than
            ``MAX_FRAME_SIZE``.
    """
    for name, value in (("keepalive_ms", keepalive_ms), ("max_lifetime_ms", max_lifetime_ms)):
        if not 1 <= value <= _MASK_31:
            raise ValueError(f"{name} must be 1 to 2**31 - 1, got {value}")
    for name, value in (("major_version", major_version), ("minor_version", minor_version)):
        if not 0 <= value <= 0xFFFF:
            raise ValueError(f"{name} must be 0 to 65535, got {value}")
    flags = 0
    parts = [
        _SETUP_FIXED.pack(major_version, minor_version, keepalive_ms, max_lifetime_ms),
        _mime(metadata_mime),
        _mime(data_mime),
    ]
    if metadata is not None:
        flags |= FLAG_METADATA
        parts += (_metadata_length(metadata), metadata)
    parts.append(data)
    body = b"".join(parts)
    return _prefix_header(_HEADER_SIZE + len(body), 0, FrameType.SETUP, flags) + body


def encode_fragments(
    frame_type: FrameType,
    stream_id: int,
    data: bytes,
    metadata: bytes | None,
    *,
    max_frame_size: int,
    initial_n: int | None = None,
    complete: bool = False,
) -> list[bytes]:
    """Encode a request or a ``PAYLOAD`` (with NEXT) as one frame, or as a FOLLOWS chain.

    When the whole frame fits in ``max_frame_size`` bytes it is returned alone. Otherwise
    the first fragment has the original type and the FOLLOWS flag, the next ones are
    ``PAYLOAD`` frames with FOLLOWS, and the last has FOLLOWS clear (and COMPLETE, for a
    completing payload). Metadata goes first, then data, as the spec requires.
    Fragmentation does not change request-n accounting: the chain counts as one payload.
    ``initial_n`` is as for ``encode_request``.

    Raises:
        ValueError: ``max_frame_size`` is too small to carry any payload byte, or
            ``encode_request``'s and ``encode_payload``'s reasons.
    """
    has_n = frame_type in _REQUEST_N_TYPES
    request_n_size = _REQUEST_N_SIZE if has_n else 0
    whole = _HEADER_SIZE + request_n_size + len(data)
    if metadata is not None:
        whole += _LENGTH_SIZE + len(metadata)
    if whole <= max_frame_size:
        if frame_type == FrameType.PAYLOAD:
            return [encode_payload(stream_id, data, metadata, complete=complete)]
        return [encode_request(frame_type, stream_id, data, metadata, initial_n=initial_n)]
    frames: list[bytes] = []
    meta_left = metadata
    data_left = data
    first = True
    while True:
        kind = frame_type if first else FrameType.PAYLOAD
        header = _HEADER_SIZE + (request_n_size if first else 0)
        if meta_left is not None:
            header += _LENGTH_SIZE
        budget = max_frame_size - header
        if budget <= 0:
            raise ValueError(f"max_frame_size {max_frame_size} cannot carry a payload")
        meta_part: bytes | None = None
        if meta_left is not None:
            meta_part = meta_left[:budget]
            budget -= len(meta_part)
            meta_left = meta_left[len(meta_part) :] or None
        data_part = b""
        if meta_left is None:
            data_part = data_left[:budget]
            data_left = data_left[len(data_part) :]
        last = meta_left is None and not data_left
        if kind == FrameType.PAYLOAD:
            frames.append(
                encode_payload(
                    stream_id,
                    data_part,
                    meta_part,
                    complete=last and complete,
                    follows=not last,
                )
            )
        else:
            frames.append(
                encode_request(
                    kind, stream_id, data_part, meta_part, initial_n=initial_n, follows=not last
                )
            )
        if last:
            return frames
        first = False
