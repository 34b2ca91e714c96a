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
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._errors import PipelineUsageError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = [
    "FINGERPRINT_FILE",
    "ResumePoint",
    "check_fingerprint",
    "checkpoint_columns",
    "fingerprint",
    "resume_point",
]


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


FINGERPRINT_FILE = "pipeline.json"
"""The file in the checkpoint directory that says which run wrote the checkpoint."""


def fingerprint(
    *,
    sql: str,
    output_mode: str,
    inputs: Sequence[Path],
    default_input: str | None,
    schema: str,
    splits: Sequence[Path] | None = None,
    tables: Sequence[tuple[str, Sequence[Path]]] = (),
    sink: str | None = None,
) -> dict[str, object]:
    """What a checkpoint is only valid for: the query, the inputs and tables as they were.

    Args:
        sql: the query text as run (the default query's text when no ``--sql``).
        output_mode: the output mode asked for (``"auto"`` included).
        inputs: the input files in reading order; each is recorded with its size in
            bytes and its modification time in nanoseconds, so a file edited since is
            seen as different.
        default_input: the name of the default input, when there are no files.
        schema: the stream's schema, as text.
        splits: ``--read-on executors``: the file of each split, in order (offsets in the
            checkpoint are per split, so the split plan must be the same to resume);
            ``None`` when the input is read in this process.
        tables: the reference tables (``--table``), as ``(name, files)`` in the order
            given; each file is recorded like an input file. ``None`` is recorded when
            there are none (as in checkpoints written before tables existed).
        sink: the ``--sink`` target (its URL without password), or ``None`` for a result
            file: a rerun must write where the first run wrote, or the target would miss
            the micro-batches committed before.

    Raises:
        OSError: an input file cannot be examined.
    """
    files = [_file_entry(path) for path in inputs]
    return {
        "version": 1,
        "sql": sql,
        "output_mode": output_mode,
        "inputs": files if default_input is None else default_input,
        "schema": schema,
        "splits": None if splits is None else [_file_entry(path) for path in splits],
        "tables": [
            {"name": name, "files": [_file_entry(path) for path in files]} for name, files in tables
        ]
        or None,
        "sink": sink,
    }


def _file_entry(path: Path) -> dict[str, object]:
    status = path.stat()
    return {"path": str(path.resolve()), "bytes": status.st_size, "mtime_ns": status.st_mtime_ns}


_WHAT = {
    "sql": "the query (--sql)",
    "output_mode": "the output mode",
    "inputs": "the input files (paths, sizes or modification times)",
    "schema": "the input's schema",
    "splits": "the split plan (--read-on, and the files read as splits)",
    "tables": "the reference tables (--table names, paths, sizes or modification times)",
    "sink": "the sink (--sink)",
}


def check_fingerprint(checkpoint: Path, expected: dict[str, object]) -> None:
    """Refuse a checkpoint written by another run; record ``expected`` in a new one.

    A directory without Spark's offset log is new: the fingerprint is written (atomically)
    and the run starts from the beginning. A checkpoint without a fingerprint (written by
    an older version) is accepted as it is.

    Raises:
        PipelineUsageError: the checkpoint's fingerprint differs from ``expected``; the
            message names what differs and says to use a new directory (exit status 2).
    """
    path = checkpoint / FINGERPRINT_FILE
    started = bool(_batch_ids(checkpoint / "query" / "offsets"))
    if started and path.is_file():
        recorded = _recorded(path)
        differs = [what for key, what in _WHAT.items() if recorded.get(key) != expected[key]]
        if differs:
            raise PipelineUsageError(
                f"--checkpoint {checkpoint} was written by another run: {', '.join(differs)} "
                "changed since; resuming would give a wrong result, so use a new checkpoint "
                "directory (or the same inputs and query)"
            )
        return
    if started:
        return
    checkpoint.mkdir(parents=True, exist_ok=True)
    temporary = checkpoint / f".{FINGERPRINT_FILE}.{os.getpid()}.tmp"
    temporary.write_text(json.dumps(expected, indent=2) + "\n", encoding="utf-8")
    temporary.replace(path)


def _recorded(path: Path) -> dict[str, Any]:
    """The JSON object in ``pipeline.json``; ``{}`` when it is not one (a damaged file)."""
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return {}
    return recorded if isinstance(recorded, dict) else {}


def checkpoint_columns(
    checkpoint: Path, columns: Sequence[str], names: Sequence[str]
) -> tuple[str, ...]:
    """The input columns to send Spark with ``checkpoint`` (``--read-on executors``).

    A checkpoint is resumed with the columns it was written with, whatever the analysis
    of the query finds now (it may have fallen back to every column in one run and not
    in the other): they are recorded as ``"columns"`` in ``pipeline.json`` before the
    first micro-batch. A started checkpoint without them (written by an older version,
    which sent every column) resumes with every column.

    Args:
        checkpoint: the ``--checkpoint`` directory (``check_fingerprint`` already ran).
        columns: the columns the query reads (``_columns.query_columns``).
        names: every column of the input, in order.

    Returns:
        The columns to send, in ``names``' order.

    Raises:
        PipelineUsageError: the recorded columns are not the input's, or lack one the
            query reads.
        OSError: ``pipeline.json`` cannot be written.
    """
    path = checkpoint / FINGERPRINT_FILE
    recorded = _recorded(path) if path.is_file() else {}
    if _batch_ids(checkpoint / "query" / "offsets"):
        kept = recorded.get("columns", list(names))
        if not isinstance(kept, list) or not set(columns) <= set(kept) <= set(names):
            raise PipelineUsageError(
                f"--checkpoint {checkpoint} was written with other input columns "
                f"({kept!r}) than this run reads; use a new checkpoint directory"
            )
        return tuple(name for name in names if name in kept)
    recorded["columns"] = list(columns)
    checkpoint.mkdir(parents=True, exist_ok=True)
    temporary = checkpoint / f".{FINGERPRINT_FILE}.{os.getpid()}.tmp"
    temporary.write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")
    temporary.replace(path)
    return tuple(columns)
