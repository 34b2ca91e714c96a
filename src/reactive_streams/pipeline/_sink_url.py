"""``--sink URL``: which ``SinkTarget`` a URL names (see ``_target`` for the forms)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._errors import PipelineUsageError

if TYPE_CHECKING:
    from ._target import SinkTarget

__all__ = ["parse_sink"]


def parse_sink(url: str, *, stream: str, retry_for: float) -> SinkTarget:
    """The target ``url`` names (nothing is connected or opened yet).

    Args:
        url: the ``--sink`` URL (see the module docstring).
        stream: the stream's id (``stream_id``), under which batch ids are recorded.
        retry_for: seconds a write keeps trying again after a lost connection.

    Raises:
        PipelineUsageError: not a URL of a known kind, or missing a part.
    """
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme in ("postgresql", "postgres"):
        from ._postgres import PostgresTarget  # noqa: PLC0415

        return PostgresTarget.from_url(url, stream=stream, retry_for=retry_for)
    if scheme == "delta":
        from ._delta import DeltaTarget  # noqa: PLC0415

        return DeltaTarget.from_url(url, stream=stream)
    raise PipelineUsageError(
        f"--sink {url}: not a sink URL; use postgresql://USER@HOST[:PORT]/DB?table=NAME "
        "or delta:PATH"
    )
