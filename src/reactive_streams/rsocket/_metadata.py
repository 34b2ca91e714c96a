"""Composite metadata, routing and bearer authentication (the RSocket extensions).

A composite metadata block is a list of entries, each a MIME type (one byte with the top
bit set for a well-known type ID, or a length byte and the type's name) then a 24-bit
length and the entry's bytes. Routing (``message/x.rsocket.routing.v0``) carries one or
more tags, each a length byte then UTF-8; authentication
(``message/x.rsocket.authentication.v0``) carries the auth type (well-known ``bearer`` is
ID 1) then the credentials, for bearer the token's UTF-8 bytes.

The MIME-name length is written as "length - 1", as RSocket-Java and rsocket-py do (a
name is never empty), so the extension's 7 bits carry names of 1 to 128 bytes.
"""

from __future__ import annotations

from typing import Final

from ._errors import FrameError

__all__ = [
    "AUTHENTICATION",
    "COMPOSITE",
    "ROUTING",
    "bearer_token",
    "decode_composite",
    "decode_routing",
    "encode_bearer",
    "encode_composite",
    "encode_routing",
    "route_of",
]

COMPOSITE: Final[str] = "message/x.rsocket.composite-metadata.v0"
ROUTING: Final[str] = "message/x.rsocket.routing.v0"
AUTHENTICATION: Final[str] = "message/x.rsocket.authentication.v0"

_WELL_KNOWN: Final[dict[int, str]] = {
    0x00: "application/avro",
    0x01: "application/cbor",
    0x02: "application/graphql",
    0x03: "application/gzip",
    0x04: "application/javascript",
    0x05: "application/json",
    0x06: "application/octet-stream",
    0x07: "application/pdf",
    0x08: "application/vnd.apache.thrift.binary",
    0x09: "application/vnd.google.protobuf",
    0x0A: "application/xml",
    0x0B: "application/zip",
    0x21: "text/plain",
    0x7A: "message/x.rsocket.mime-type.v0",
    0x7B: "message/x.rsocket.accept-mime-types.v0",
    0x7C: AUTHENTICATION,
    0x7D: "message/x.rsocket.tracing-zipkin.v0",
    0x7E: ROUTING,
    0x7F: COMPOSITE,
}
_WELL_KNOWN_IDS: Final[dict[str, int]] = {name: key for key, name in _WELL_KNOWN.items()}
_BEARER_ID: Final[int] = 0x01


def encode_composite(entries: list[tuple[str, bytes]]) -> bytes:
    """Encode ``(mime_type, payload)`` entries as one composite metadata block."""
    parts: list[bytes] = []
    for mime, payload in entries:
        known = _WELL_KNOWN_IDS.get(mime)
        if known is not None:
            parts.append(bytes((0x80 | known,)))
        else:
            name = mime.encode("ascii")
            if not 1 <= len(name) <= 128:
                raise ValueError(f"MIME type {mime!r} must be 1 to 128 bytes long")
            parts.append(bytes((len(name) - 1,)) + name)
        if len(payload) > 0xFFFFFF:
            raise ValueError("a composite metadata entry is limited to 2**24 - 1 bytes")
        parts.append(len(payload).to_bytes(3, "big"))
        parts.append(payload)
    return b"".join(parts)


def decode_composite(metadata: bytes) -> list[tuple[str, bytes]]:
    """Decode a composite metadata block into ``(mime_type, payload)`` entries.

    Unknown well-known IDs decode as ``"unknown/0x.."`` so they can be skipped.

    Raises:
        FrameError: an entry overruns the block.
    """
    entries: list[tuple[str, bytes]] = []
    offset = 0
    size = len(metadata)
    while offset < size:
        head = metadata[offset]
        offset += 1
        if head & 0x80:
            mime = _WELL_KNOWN.get(head & 0x7F, f"unknown/{head & 0x7F:#x}")
        else:
            length = head + 1
            if offset + length > size:
                raise FrameError("composite metadata: a MIME type overruns the block")
            mime = metadata[offset : offset + length].decode("ascii", "replace")
            offset += length
        if offset + 3 > size:
            raise FrameError("composite metadata: an entry has no length")
        length = int.from_bytes(metadata[offset : offset + 3], "big")
        offset += 3
        if offset + length > size:
            raise FrameError("composite metadata: an entry overruns the block")
        entries.append((mime, metadata[offset : offset + length]))
        offset += length
    return entries


def encode_routing(*tags: str) -> bytes:
    """Encode routing tags (each at most 255 UTF-8 bytes)."""
    parts: list[bytes] = []
    for tag in tags:
        encoded = tag.encode("utf-8")
        if len(encoded) > 255:
            raise ValueError(f"route tag {tag!r} is longer than 255 bytes")
        parts.append(bytes((len(encoded),)) + encoded)
    return b"".join(parts)


def decode_routing(payload: bytes) -> list[str]:
    """Decode routing tags.

    Raises:
        FrameError: a tag overruns the payload.
    """
    tags: list[str] = []
    offset = 0
    while offset < len(payload):
        length = payload[offset]
        offset += 1
        if offset + length > len(payload):
            raise FrameError("routing metadata: a tag overruns the payload")
        tags.append(payload[offset : offset + length].decode("utf-8", "replace"))
        offset += length
    return tags


def encode_bearer(token: str) -> bytes:
    """The authentication entry's payload for a bearer token."""
    return bytes((0x80 | _BEARER_ID,)) + token.encode("utf-8")


def bearer_token(entries: list[tuple[str, bytes]]) -> bytes | None:
    """The bearer token carried by composite metadata entries, or ``None``."""
    for mime, payload in entries:
        if mime == AUTHENTICATION and payload and payload[0] == (0x80 | _BEARER_ID):
            return payload[1:]
    return None


def route_of(metadata_mime: str, metadata: bytes | None) -> tuple[str | None, bytes | None]:
    """The route and bearer token a request's metadata carries.

    ``metadata_mime`` is the connection's metadata MIME type from ``SETUP``: routing
    metadata on its own, or composite metadata (the default of Spring and rsocket-py).

    Raises:
        FrameError: the metadata is malformed.
    """
    if not metadata:
        return None, None
    if metadata_mime == ROUTING:
        tags = decode_routing(metadata)
        return (tags[0] if tags else None), None
    entries = decode_composite(metadata)
    route: str | None = None
    for mime, payload in entries:
        if mime == ROUTING:
            tags = decode_routing(payload)
            if tags:
                route = tags[0]
                break
    return route, bearer_token(entries)
