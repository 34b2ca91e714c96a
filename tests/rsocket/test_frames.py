"""The frame codec and composite metadata, checked against rsocket-py's codec."""

from __future__ import annotations

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
    MAX_FRAME_SIZE,
    ErrorCode,
    FrameReader,
    FrameType,
    encode_cancel,
    encode_error,
    encode_fragments,
    encode_keepalive,
    encode_payload,
    encode_request,
    encode_request_n,
    encode_setup,
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
