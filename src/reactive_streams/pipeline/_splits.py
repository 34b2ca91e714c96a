"""The pipeline's side of reading on Spark's executors: dead letters and the default input.

With ``--read-on executors`` (the default) the pipeline does not read its input in this
process: the files are planned as splits (``reactive_streams.files.plan_splits``, one per
file: every record counted, record boundaries noted) and read on Spark's executors through
``reactive_streams.spark.splits`` (``FileSplits.to_dataframe``: ``from_splits`` in input
order), each executor's Python worker converting its records to the schema. Every batch
holds one row per input record, so ``from_splits``' offsets count input records, and a
refused record is a row with its dead letter (``_dead_letter``). What is the pipeline's
own, here:

* ``DeadLetterSplitter``: the transform, on the executor: writes the dead letters of a
  batch to a part file named by its content (so a replayed micro-batch rewrites the same
  file) and keeps the records that fit;
* ``merge_dead_letters``: on the driver at the end, the part files, each dead letter once
  (keyed by file, position and record number), in input order, into the dead-letter file;
* ``cache_table`` / ``cached_files``: the default input, cached once as Parquet files so
  it can be read on the executors.

So the counts add up: the records Spark receives plus the dead letters are the input's
records, with nothing lost or counted twice across retries and checkpoint restarts.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from ..files import DEAD_LETTER_COLUMN, DeadLetter, FileSplit, InputFile, dead_letters_of
from ._late import NO_KEY
from ._parts import write_part

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._late import LateTally

__all__ = [
    "DeadLetterSplitter",
    "cache_dir",
    "cache_table",
    "cached_files",
    "count_dead_letter_parts",
    "merge_dead_letters",
]


@dataclass(frozen=True, slots=True)
class DeadLetterSplitter:
    """The transform: dead letters to a part file, the records that fit to Spark.

    A part file is named by a hash of its content, and written whole (a temporary file
    renamed), so a replayed or retried micro-batch writes the same file again and a
    crash never leaves half a file under the final name.

    With ``late`` set, the batch also carries each row's record number and file
    (``row_column``, ``file_column``: ``FileOpener``'s extra columns, dropped here), and
    the records that fit are tallied for the count of late input rows (``LateTally``).

    Attributes:
        directory: where the part files go (a path every executor can write).
        names: the stream's column names (the dead-letter column is dropped).
        late: the tally of late keys, if the query's late rows are counted as input rows.
        row_column: the record-number column (with ``late``).
        file_column: the file-path column (with ``late``).
    """

    directory: str
    names: tuple[str, ...]
    late: LateTally | None = None
    row_column: str = "_row"
    file_column: str = "_file"

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch``'s records that fit, in the stream's columns; its dead letters saved.

        Raises:
            OSError: the part file cannot be written (the query fails).
        """
        data = batch.select(list(self.names))
        dead = dead_letters_of(batch)
        if self.late is not None and batch.num_rows:
            rule = self.late.rule
            keys = rule.keys(batch.column(rule.column))
            if dead:  # a dead letter never reaches Spark: never late
                keys[pc.is_valid(batch.column(DEAD_LETTER_COLUMN)).to_numpy(False)] = NO_KEY
            self.late.record(
                str(batch.column(self.file_column)[0].as_py()),
                int(batch.column(self.row_column)[0].as_py()),
                keys,
            )
        if not dead:
            return data
        write_part(self.directory, "".join(line + "\n" for line in dead), ".jsonl")
        return data.filter(pc.is_null(batch.column(DEAD_LETTER_COLUMN)))


def count_dead_letter_parts(directory: Path) -> int:
    """Dead letters in the part files so far (a retried batch may count twice here)."""
    total = 0
    with contextlib.suppress(OSError):
        for part in directory.glob("*.jsonl"):
            with contextlib.suppress(OSError), part.open("rb") as handle:
                total += sum(1 for _ in handle)
    return total


def merge_dead_letters(
    directory: Path, target: Path, splits: Sequence[FileSplit]
) -> list[DeadLetter]:
    """Write every dead letter of the part files once, in input order, to ``target``.

    ``splits`` give the input order (empty: dead letters are ordered by source, then
    position). Each dead letter is keyed by its file, position and record number
    (``DeadLetter.key``), so one written twice (a retried task, a micro-batch replayed
    after a restart) is kept once, and records that start on the same line are each
    kept. ``target`` is
    written only when there is a dead letter (and replaced whole).

    Returns:
        The dead letters written, in order.

    Raises:
        OSError: a part file cannot be read, or ``target`` cannot be written.
    """
    order = {split.name: split.index for split in splits}
    found: dict[tuple[str, str, int, int], tuple[str, DeadLetter]] = {}
    if directory.is_dir():
        for part in sorted(directory.glob("*.jsonl")):
            for line in part.read_text(encoding="utf-8").splitlines():
                letter = DeadLetter.from_json(line)
                found.setdefault(letter.key, (line, letter))
    # In input order: by split, then position and record (sources that are no split here,
    # such as a remote producer's files, come first, by name).
    ranked = sorted(
        found.items(),
        key=lambda entry: (order.get(entry[0][0], -1), entry[0][0], entry[0][2], entry[0][3]),
    )
    if ranked:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        temporary.write_text("".join(line + "\n" for _, (line, _) in ranked), encoding="utf-8")
        temporary.replace(target)
    return [letter for _, (_, letter) in ranked]


CACHE_ENV: Final = "REACTIVE_STREAMS_CACHE"
"""The environment variable naming the cache directory (else ``$XDG_CACHE_HOME`` or
``~/.cache``, under ``reactive-streams``)."""


def cache_dir() -> Path:
    """Where the pipeline caches the default input as Parquet files."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "reactive-streams"


def _cache_paths(key: str, parts: int) -> list[Path]:
    directory = cache_dir() / "pipeline" / key
    return [directory / f"part-{index:02d}.parquet" for index in range(parts)]


def cached_files(key: str, *, parts: int = 4) -> tuple[InputFile, ...] | None:
    """The files ``cache_table(table, key, parts=parts)`` wrote, if they are all there."""
    files = _cache_paths(key, parts)
    if not all(path.is_file() for path in files):
        return None
    return tuple(InputFile(path, "parquet") for path in files)


def cache_table(
    table: pa.Table, key: str, *, parts: int = 4, row_group_rows: int = 25_000
) -> tuple[InputFile, ...]:
    """``table`` as ``parts`` Parquet files in the cache (written once, then reused).

    Each file is written to a temporary name and renamed, so processes running at the
    same time never see half a file.

    Args:
        table: the in-memory table (the default input).
        key: names the table's version (its name, size and source package version).
        parts: files to split it into (one split each, so micro-batches read in parallel).
        row_group_rows: rows per Parquet row group (a split opened at an offset skips
            whole row groups before it).

    Raises:
        OSError: the cache cannot be written.
    """
    directory = cache_dir() / "pipeline" / key
    files = _cache_paths(key, parts)
    if not all(path.is_file() for path in files):
        directory.mkdir(parents=True, exist_ok=True)
        rows = -(-table.num_rows // parts)
        for index, path in enumerate(files):
            temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            pq.write_table(
                table.slice(index * rows, rows), temporary, row_group_size=row_group_rows
            )
            temporary.replace(path)
    return tuple(InputFile(path, "parquet") for path in files)
