"""The frame codec and composite metadata, checked against rsocket-py's codec."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rsocket.extensions.helpers import authenticate_bearer, composite, route
from rsocket.frame import (
    CancelFrame,
    ErrorFrame,
    PayloadFrame,
    RequestNFrame,
    RequestStreamFrame,
    SetupFrame,
    parse_or_ignore,
    serialize_with_frame_size_header,
)

from reactive_streams.rsocket._errors import FrameError
from reactive_streams.rsocket._frames import (
    FLAG_COMPLETE,
    FLAG_FOLLOWS,
    FLAG_METADATA,
    FLAG_NEXT,
    FLAG_RESPOND,
    MAX_FRAME_SIZE,
    MAX_REQUEST_N,
    MAX_STREAM_ID,
    ErrorCode,
    FrameReader,
    FrameType,
    PayloadRun,
    encode_cancel,
    encode_error,
    encode_fragments,
    encode_keepalive,
    encode_payload,
    encode_payload_header,
    encode_request,
    encode_request_n,
    encode_setup,
    wire_request_n,
)
from reactive_streams.rsocket._metadata import (
    AUTHENTICATION,
    COMPOSITE,
    ROUTING,
    decode_composite,
    encode_bearer,
    encode_composite,
    encode_routing,
    route_of,
)


def _peer_parse(wire: bytes) -> object:
    assert int.from_bytes(wire[:3], "big") == len(wire) - 3
    return parse_or_ignore(wire[3:])


def test_payload_roundtrip_with_rsocket_py() -> None:
    frame = _peer_parse(encode_payload(7, b"hello", b"meta", complete=True))
    assert isinstance(frame, PayloadFrame)
    assert (frame.stream_id, frame.data, frame.metadata) == (7, b"hello", b"meta")
    assert frame.flags_next and frame.flags_complete
    [ours] = FrameReader().feed(encode_payload(3, b"x"))
    assert (ours.stream_id, ours.frame_type, ours.data, ours.metadata) == (3, 10, b"x", None)
    assert ours.flags & FLAG_NEXT and not ours.flags & FLAG_COMPLETE


def test_request_stream_and_request_n_with_rsocket_py() -> None:
    metadata = encode_composite([(ROUTING, encode_routing("items"))])
    wire = encode_request(FrameType.REQUEST_STREAM, 5, b"data", metadata, initial_n=42)
    frame = _peer_parse(wire)
    assert isinstance(frame, RequestStreamFrame)
    assert (frame.stream_id, frame.initial_request_n, frame.data) == (5, 42, b"data")
    assert frame.metadata == composite(route("items"))
    request_n = _peer_parse(encode_request_n(5, 2**31 - 1))
    assert isinstance(request_n, RequestNFrame)
    assert request_n.request_n == 2**31 - 1
    assert isinstance(_peer_parse(encode_cancel(5)), CancelFrame)


def test_error_and_setup_with_rsocket_py() -> None:
    error = _peer_parse(encode_error(9, ErrorCode.REJECTED, "no route 'x'"))
    assert isinstance(error, ErrorFrame)
    assert (error.error_code, error.data) == (ErrorCode.REJECTED, b"no route 'x'")
    setup = _peer_parse(
        encode_setup(
            keepalive_ms=500,
            max_lifetime_ms=9000,
            metadata_mime=COMPOSITE,
            data_mime="application/octet-stream",
            metadata=b"m",
        )
    )
    assert isinstance(setup, SetupFrame)
    assert (setup.keep_alive_milliseconds, setup.max_lifetime_milliseconds) == (500, 9000)
    assert setup.metadata_encoding == COMPOSITE.encode()
    assert setup.metadata == b"m"


def test_reader_decodes_rsocket_py_frames() -> None:
    peer = RequestStreamFrame()
    peer.stream_id = 1
    peer.initial_request_n = 5
    peer.metadata = composite(route("items"), authenticate_bearer("s3cret"))
    peer.data = b"abc"
    wire = serialize_with_frame_size_header(peer)
    reader = FrameReader()
    assert reader.feed(wire[:4]) == []  # split anywhere: the frame waits for the rest
    [frame] = reader.feed(wire[4:])
    assert (frame.frame_type, frame.stream_id, frame.number, frame.data) == (6, 1, 5, b"abc")
    assert route_of(COMPOSITE, frame.metadata) == ("items", b"s3cret")
    entries = decode_composite(frame.metadata or b"")
    assert [mime for mime, _ in entries] == [ROUTING, AUTHENTICATION]
    assert entries[1][1] == encode_bearer("s3cret")


def test_custom_mime_in_composite_roundtrip() -> None:
    block = encode_composite([("application/x.custom", b"abc"), (ROUTING, encode_routing("r"))])
    assert decode_composite(block) == [("application/x.custom", b"abc"), (ROUTING, b"\x01r")]


def test_keepalive_and_several_frames_in_one_chunk() -> None:
    wire = encode_keepalive(respond=True, data=b"ping") + encode_request_n(3, 7)
    keepalive, request_n = FrameReader().feed(wire)
    assert keepalive.frame_type == FrameType.KEEPALIVE and keepalive.data == b"ping"
    assert request_n.number == 7


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (b"\x00\x00\x02ab", r"^frame length 2 is shorter than the 6-byte header$"),
        (b"\x00\x00\x06\x00\x00\x00\x01\x28\x00", r"neither the NEXT nor the COMPLETE"),
        (b"\x00\x00\x06\x00\x00\x00\x01\xc0\x00", r"^unknown frame type 0x30"),
        (b"\x00\x00\x0a\x00\x00\x00\x01\x20\x00\x00\x00\x00\x00", r"request-n 0$"),
        (b"\x00\x00\x08\x00\x00\x00\x01\x29\x20\x00\x00", r"no metadata length$"),
        (b"\x00\x00\x0a\x00\x00\x00\x01\x29\x20\x00\x00\x09x", r"^metadata length 9 overruns"),
    ],
)
def test_malformed_frames_are_refused(wire: bytes, message: str) -> None:
    with pytest.raises(FrameError, match=message):
        FrameReader().feed(wire)


def test_length_beyond_the_maximum() -> None:
    reader = FrameReader(max_frame_size=1024)
    with pytest.raises(FrameError, match=r"^frame length 1025 is beyond the maximum of 1024"):
        reader.feed((1025).to_bytes(3, "big"))


def test_ignorable_unknown_frame_is_dropped() -> None:
    wire = b"\x00\x00\x06\x00\x00\x00\x00" + (0x3E << 10 | 0x200).to_bytes(2, "big")
    assert FrameReader().feed(wire + encode_cancel(1))[0].frame_type == FrameType.CANCEL


def test_fragments_reassemble_in_order() -> None:
    metadata = b"M" * 50
    data = bytes(range(256)) * 3
    frames = encode_fragments(
        FrameType.REQUEST_STREAM, 3, data, metadata, max_frame_size=100, initial_n=9
    )
    assert len(frames) > 2
    decoded = FrameReader().feed(b"".join(frames))
    assert decoded[0].frame_type == FrameType.REQUEST_STREAM and decoded[0].number == 9
    assert all(frame.frame_type == FrameType.PAYLOAD for frame in decoded[1:])
    assert all(frame.flags & FLAG_FOLLOWS for frame in decoded[:-1])
    assert not decoded[-1].flags & FLAG_FOLLOWS
    assert b"".join(frame.metadata or b"" for frame in decoded) == metadata
    assert b"".join(frame.data for frame in decoded) == data
    assert all(len(wire) - 3 <= 100 for wire in frames)
    payloads = encode_fragments(FrameType.PAYLOAD, 3, data, None, max_frame_size=64, complete=True)
    decoded = FrameReader().feed(b"".join(payloads))
    assert decoded[-1].flags & FLAG_COMPLETE and not decoded[0].flags & FLAG_COMPLETE
    assert not any(frame.flags & FLAG_METADATA for frame in decoded)
    assert b"".join(frame.data for frame in decoded) == data


def test_large_payload_uses_a_long_length_prefix() -> None:
    data = b"z" * 70000
    [frame] = FrameReader().feed(encode_payload(1, data))
    assert frame.data == data
    assert MAX_FRAME_SIZE == 2**24 - 1


@settings(max_examples=60, deadline=None)
@given(
    data=st.binary(max_size=3000),
    metadata=st.one_of(st.none(), st.binary(max_size=600)),
    max_frame_size=st.integers(min_value=64, max_value=2048),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
    kind=st.sampled_from([FrameType.PAYLOAD, FrameType.REQUEST_STREAM, FrameType.REQUEST_FNF]),
)
def test_any_fragmentation_read_in_any_chunks_gives_back_the_payload(
    data: bytes,
    metadata: bytes | None,
    max_frame_size: int,
    cuts: list[int],
    kind: FrameType,
) -> None:
    frames = encode_fragments(
        kind, 7, data, metadata, max_frame_size=max_frame_size, initial_n=3, complete=True
    )
    wire = b"".join(frames)
    assert all(len(frame) - 3 <= max_frame_size for frame in frames)
    reader = FrameReader(max_frame_size=max_frame_size)
    decoded = []
    previous = 0
    for cut in sorted({min(cut, len(wire)) for cut in cuts} | {len(wire)}):
        decoded += reader.feed(wire[previous:cut])
        previous = cut
    assert reader.pending == 0
    assert len(decoded) == len(frames)
    assert decoded[0].frame_type == kind
    assert all(frame.frame_type == FrameType.PAYLOAD for frame in decoded[1:])
    assert [bool(frame.flags & FLAG_FOLLOWS) for frame in decoded] == [True] * (
        len(decoded) - 1
    ) + [False]
    assert b"".join(frame.data for frame in decoded) == data
    pieces = [frame.metadata for frame in decoded if frame.metadata is not None]
    assert (b"".join(pieces) if pieces else None) == metadata


# -- every frame the encoders can write, the reader reads back with the same fields ------

_STREAM_IDS = st.integers(min_value=0, max_value=MAX_STREAM_ID)
_BYTES = st.binary(max_size=300)
_METADATA = st.one_of(st.none(), _BYTES)
_REQUEST_TYPES = st.sampled_from(
    [
        FrameType.REQUEST_RESPONSE,
        FrameType.REQUEST_FNF,
        FrameType.REQUEST_STREAM,
        FrameType.REQUEST_CHANNEL,
    ]
)


@st.composite
def _encoded(draw: st.DrawFn) -> tuple[bytes, dict[str, object]]:
    """One frame from one of the encoders, with the fields the reader must give back."""
    kind = draw(st.sampled_from(["payload", "request", "request_n", "cancel", "error", "ka"]))
    stream_id = draw(_STREAM_IDS)
    if kind == "payload":
        data, metadata = draw(_BYTES), draw(_METADATA)
        next_, complete = draw(st.sampled_from([(True, False), (False, True), (True, True)]))
        follows = draw(st.booleans())
        wire = encode_payload(
            stream_id, data, metadata, next_=next_, complete=complete, follows=follows
        )
        flags = (
            (FLAG_NEXT if next_ else 0)
            | (FLAG_COMPLETE if complete else 0)
            | (FLAG_FOLLOWS if follows else 0)
            | (FLAG_METADATA if metadata is not None else 0)
        )
        fields = {"frame_type": FrameType.PAYLOAD, "stream_id": stream_id, "flags": flags}
        return wire, {**fields, "number": 0, "metadata": metadata, "data": data}
    if kind == "request":
        frame_type = draw(_REQUEST_TYPES)
        data, metadata = draw(_BYTES), draw(_METADATA)
        initial_n = draw(st.integers(min_value=1, max_value=2**64))
        follows = draw(st.booleans())
        wire = encode_request(
            frame_type, stream_id, data, metadata, initial_n=initial_n, follows=follows
        )
        carries_n = frame_type in (FrameType.REQUEST_STREAM, FrameType.REQUEST_CHANNEL)
        flags = (FLAG_FOLLOWS if follows else 0) | (FLAG_METADATA if metadata is not None else 0)
        return wire, {
            "frame_type": frame_type,
            "stream_id": stream_id,
            "flags": flags,
            "number": min(initial_n, MAX_REQUEST_N) if carries_n else 0,
            "metadata": metadata,
            "data": data,
        }
    if kind == "request_n":
        n = draw(st.integers(min_value=1, max_value=2**64))
        wire = encode_request_n(stream_id, n)
        return wire, {
            "frame_type": FrameType.REQUEST_N,
            "stream_id": stream_id,
            "flags": 0,
            "number": min(n, MAX_REQUEST_N),
            "metadata": None,
            "data": b"",
        }
    if kind == "cancel":
        return encode_cancel(stream_id), {
            "frame_type": FrameType.CANCEL,
            "stream_id": stream_id,
            "flags": 0,
            "number": 0,
            "metadata": None,
            "data": b"",
        }
    if kind == "error":
        code = draw(st.integers(min_value=0, max_value=2**32 - 1))
        message = draw(st.text(max_size=100))
        return encode_error(stream_id, code, message), {
            "frame_type": FrameType.ERROR,
            "stream_id": stream_id,
            "flags": 0,
            "number": code,
            "metadata": None,
            "data": message.encode("utf-8", "replace"),
        }
    respond, data = draw(st.booleans()), draw(_BYTES)
    position = draw(st.integers(min_value=0, max_value=2**63 - 1))
    return encode_keepalive(respond=respond, data=data, position=position), {
        "frame_type": FrameType.KEEPALIVE,
        "stream_id": 0,
        "flags": FLAG_RESPOND if respond else 0,
        "number": position,
        "metadata": None,
        "data": data,
    }


@settings(max_examples=300, deadline=None)
@given(frames=st.lists(_encoded(), min_size=1, max_size=5), cut=st.integers(min_value=0))
def test_every_frame_the_encoders_write_is_read_back_with_the_same_fields(
    frames: list[tuple[bytes, dict[str, object]]], cut: int
) -> None:
    wire = b"".join(encoded for encoded, _ in frames)
    cut %= len(wire) + 1
    reader = FrameReader()
    decoded = reader.feed(wire[:cut]) + reader.feed(wire[cut:])
    assert reader.pending == 0
    assert len(decoded) == len(frames)
    for frame, (_, expected) in zip(decoded, frames, strict=True):
        assert {name: getattr(frame, name) for name in expected} == expected


@settings(max_examples=300, deadline=None)
@given(
    elements=st.lists(
        st.tuples(
            st.sampled_from([1, 3]),  # two streams, interleaved
            st.sampled_from([b"", b"abcde", b"0123456789" * 2]),  # frames of equal headers
            st.sampled_from(["next", "next", "next", "next+complete", "complete", "metadata"]),
        ),
        min_size=1,
        max_size=40,
    ),
    cuts=st.lists(st.integers(min_value=0), max_size=8),
)
def test_payload_runs_are_exactly_the_frames_however_the_bytes_are_cut(
    elements: list[tuple[int, bytes, str]], cuts: list[int]
) -> None:
    frames = []
    for stream_id, data, kind in elements:
        if kind == "metadata":
            frames.append(encode_payload(stream_id, data, b"m"))
        else:
            frames.append(
                encode_payload(stream_id, data, next_=kind != "complete", complete=kind != "next")
            )
    wire = b"".join(frames)
    points = sorted({cut % (len(wire) + 1) for cut in cuts} | {0, len(wire)})
    reader = FrameReader()
    items = []
    for start, stop in itertools.pairwise(points):
        items += reader.feed_runs(wire[start:stop])
    spelled = []
    for item in items:
        spelled += item.frames() if isinstance(item, PayloadRun) else [item]
    assert reader.pending == 0
    expected = FrameReader().feed(wire)  # in one piece
    # ... and each frame read alone, so no run is involved
    assert [(f.stream_id, f.flags, f.metadata, f.data) for f in expected] == [
        (f.stream_id, f.flags, f.metadata, f.data)
        for frame in frames
        for f in FrameReader().feed(frame)
    ]
    assert [(f.stream_id, f.flags, f.metadata, f.data) for f in spelled] == [
        (f.stream_id, f.flags, f.metadata, f.data) for f in expected
    ]
    assert len(expected) == len(elements)
    for run in items:  # a run is one stream's, all NEXT, and ends where COMPLETE does
        if isinstance(run, PayloadRun):
            assert run.data


@given(stream_id=st.integers(0, MAX_STREAM_ID), data=st.binary(max_size=64))
def test_a_payload_header_and_its_data_are_the_payload_frame(stream_id: int, data: bytes) -> None:
    assert encode_payload_header(stream_id, len(data)) + data == encode_payload(stream_id, data)


_ASCII = st.text(alphabet=st.characters(max_codepoint=127), max_size=255)


@settings(max_examples=100, deadline=None)
@given(
    times=st.tuples(st.integers(1, 2**31 - 1), st.integers(1, 2**31 - 1)),
    versions=st.tuples(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)),
    mimes=st.tuples(_ASCII, _ASCII),
    metadata=_METADATA,
    data=_BYTES,
)
def test_every_setup_frame_is_read_back_with_the_same_parameters(
    times: tuple[int, int],
    versions: tuple[int, int],
    mimes: tuple[str, str],
    metadata: bytes | None,
    data: bytes,
) -> None:
    wire = encode_setup(
        keepalive_ms=times[0],
        max_lifetime_ms=times[1],
        metadata_mime=mimes[0],
        data_mime=mimes[1],
        metadata=metadata,
        data=data,
        major_version=versions[0],
        minor_version=versions[1],
    )
    [frame] = FrameReader().feed(wire)
    setup = frame.setup
    assert setup is not None
    assert (frame.frame_type, frame.stream_id, frame.metadata, frame.data) == (
        FrameType.SETUP,
        0,
        metadata,
        data,
    )
    assert (setup.major_version, setup.minor_version) == versions
    assert (setup.keepalive_ms, setup.max_lifetime_ms) == times
    assert (setup.metadata_mime, setup.data_mime) == mimes
    assert setup.resume_token is None and not setup.lease


def test_request_n_is_clamped_to_the_wire_maximum_and_refused_below_one() -> None:
    assert wire_request_n(1) == 1
    assert wire_request_n(2**31) == MAX_REQUEST_N
    assert wire_request_n(2**63 - 1) == MAX_REQUEST_N
    [frame] = FrameReader().feed(encode_request_n(1, 2**31))
    assert frame.number == MAX_REQUEST_N
    with pytest.raises(ValueError, match=r"^request-n must be at least 1, got 0$"):
        encode_request_n(1, 0)
    with pytest.raises(ValueError, match=r"^request-n must be at least 1, got -5$"):
        encode_request(FrameType.REQUEST_STREAM, 1, b"", initial_n=-5)


@pytest.mark.parametrize(
    ("encode", "message"),
    [
        (
            lambda: encode_request(FrameType.REQUEST_STREAM, 1, b""),
            r"^a REQUEST_STREAM frame needs initial_n \(at least 1\)$",
        ),
        (
            lambda: encode_request(FrameType.PAYLOAD, 1, b""),
            r"^PAYLOAD is not a request frame type$",
        ),
        (lambda: encode_cancel(2**31), r"^stream ID 2147483648 is outside 0 to 2147483647$"),
        (lambda: encode_payload(-1, b""), r"^stream ID -1 is outside 0 to 2147483647$"),
        (
            lambda: encode_payload(1, b"", next_=False),
            r"^a PAYLOAD frame needs NEXT or COMPLETE: next_ or complete must be set$",
        ),
        (
            lambda: encode_payload(1, bytes(MAX_FRAME_SIZE)),
            r"^a PAYLOAD frame of 16777221 bytes is beyond the maximum of 16777215 bytes$",
        ),
        (
            lambda: encode_keepalive(respond=False, position=2**63),
            r"^keepalive position 9223372036854775808 is outside 0 to 2\*\*63 - 1$",
        ),
        (
            lambda: encode_setup(
                keepalive_ms=0, max_lifetime_ms=1, metadata_mime="a", data_mime="b"
            ),
            r"^keepalive_ms must be 1 to 2\*\*31 - 1, got 0$",
        ),
        (
            lambda: encode_error(1, 2**32, "x"),
            r"^error code 4294967296 is not a 32-bit unsigned value$",
        ),
    ],
)
def test_the_encoders_refuse_what_the_reader_would_refuse(
    encode: Callable[[], bytes], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        encode()
