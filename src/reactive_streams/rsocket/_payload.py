"""``Payload``: an element with the metadata of its ``PAYLOAD`` frame."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Payload"]


@dataclass(frozen=True, slots=True)
class Payload:
    """One RSocket payload: its data and, if the frame had any, its metadata.

    A route's publisher may emit ``Payload`` instead of ``bytes`` to send metadata with an
    element; ``client.request_stream(..., payloads=True)`` delivers ``Payload`` elements so
    a subscriber can read the metadata a peer sent.

    Attributes:
        data: the payload's data.
        metadata: the payload's metadata, or ``None`` when the frame carried none.
    """

    data: bytes
    metadata: bytes | None = None
