"""Where a rerun with ``--checkpoint`` resumes: read from Spark's own checkpoint.

``--checkpoint DIR`` holds Spark's checkpoint of the query (``DIR/query``) and the sink's
journal (``DIR/sink``). Spark writes ``offsets/<id>`` when it plans micro-batch ``id`` (the
stream's end offset for that batch, ``{"seq": n}``: ``n`` rows read before) and
``commits/<id>`` once the batch's sink returned. On a restart Spark replays the planned but
uncommitted batch, with the same id and rows, then goes on.

So a rerun resumes at the end offset of the last committed batch: the source skips that
many valid records (the input's order is deterministic), ``to_spark_stream`` starts its
offsets there and serves Spark's replay of the uncommitted batch, and the sink, which
journaled every batch it folded in, skips a replayed batch it already has.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._errors import PipelineUsageError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ResumePoint", "resume_point"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumePoint:
    """Where a query checkpoint says the stream stands.

    Attributes:
        offset: rows of the stream in committed micro-batches (where the source resumes).
        committed: how many micro-batches were committed.
        replay: ``(start, end)`` rows of the planned, uncommitted micro-batch Spark will
            replay first, or ``None``.
    """

    offset: int
    committed: int
    replay: tuple[int, int] | None


def _batch_ids(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(path.name) for path in directory.iterdir() if path.name.isdigit())


def _end_offset(offsets: Path, batch_id: int) -> int:
    """The stream's end offset that ``offsets/<batch_id>`` records.

    Raises:
        PipelineUsageError: the file is not a one-source offset log of this pipeline.
    """
    path = offsets / str(batch_id)
    lines = path.read_text(encoding="utf-8").splitlines()
    try:
        (source,) = lines[2:]  # "v1", the batch's metadata, then one line per source
        seq = json.loads(source)["seq"]
    except (ValueError, KeyError, TypeError):
        raise PipelineUsageError(
            f"--checkpoint: {path} is not an offset log of this pipeline's stream (another "
            "query's checkpoint?); use a new checkpoint directory"
        ) from None
    if not isinstance(seq, int) or seq < 0:
        raise PipelineUsageError(f"--checkpoint: {path} holds a bad offset {seq!r}")
    return seq


def resume_point(query_checkpoint: Path) -> ResumePoint | None:
    """Where Spark's checkpoint ``query_checkpoint`` resumes, or ``None`` if it is new.

    Raises:
        PipelineUsageError: the checkpoint was not written by this pipeline.
    """
    offsets = query_checkpoint / "offsets"
    planned = _batch_ids(offsets)
    if not planned:
        return None
    committed = _batch_ids(query_checkpoint / "commits")
    last = committed[-1] if committed else None
    offset = 0 if last is None else _end_offset(offsets, last)
    replay = None
    if planned[-1] != last:
        replay = (offset, _end_offset(offsets, planned[-1]))
    return ResumePoint(offset=offset, committed=0 if last is None else last + 1, replay=replay)
