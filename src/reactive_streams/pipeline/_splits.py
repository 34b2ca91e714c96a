"""Reading the pipeline's files on Spark's executors: splits, their opener, dead letters.

With ``--read-on executors`` (the default) the pipeline does not read its input in this
process: ``from_splits`` (``reactive_streams.spark``) plans micro-batches over the
splits (*one per input file*, or, when there are fewer files than cores, runs of a big
Parquet file's row groups or ranges of a big text file's lines) and each executor's
Python worker reads its share of a split, validates it and hands Spark the records that
fit. The pieces, all picklable (they run in Spark's processes):

* ``PipelineSplit``: one input file, a run of its row groups or a range of its lines, as listed
  (size and modification time, so a file that changes or disappears after planning is
  named in a clear error), with where its row groups start (``split_boundaries``: each
  micro-batch's share ends at one, so no row group is decoded twice);
* ``count_records``: how many records a split has, as the pipeline's readers count them
  (Parquet footers; lines after the header for CSV; lines up to the last non-blank one
  for JSON Lines), cached per file version;
* ``SplitReader``: the opener. ``open_reader`` (``_formats``) from the start record,
  ``validate`` (``_validate``) on each chunk, published as one ``pyarrow.RecordBatch``
  per chunk with **one row per input record** (so ``from_splits``'s offsets count input
  records, and a batch cut at a micro-batch's end cuts at a record): the converted
  columns, plus ``_rs_kind`` (0: a record that fits, 1: a dead letter, 2: a blank
  line) and ``_rs_dead`` (the dead letter as JSON);
* ``DeadLetterSplitter``: the transform, on the executor: writes the dead letters of a
  batch to a part file named by its content (so a replayed micro-batch rewrites the
  same file) and keeps the records that fit;
* ``merge_dead_letters``: on the driver at the end, the part files, each dead letter
  once (keyed by file and position), in input order, into the dead-letter file.

So the counts add up: the records Spark receives plus the dead letters are the input's
records, with nothing lost or counted twice across retries and checkpoint restarts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from .._arrow_literals import int8_scalar
from ..operators import Flow
from ._dead_letter import DeadLetter
from ._formats import InputFile, RawChunk, _csv_header, _Lines, open_reader
from ._validate import validate

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from ..api import Publisher

__all__ = [
    "DEAD_COLUMN",
    "KIND_COLUMN",
    "DeadLetterSplitter",
    "PipelineSplit",
    "SplitReader",
    "count_dead_letter_parts",
    "count_records",
    "list_splits",
    "master_cores",
    "merge_dead_letters",
    "split_boundaries",
]

KIND_COLUMN: Final = "_rs_kind"
"""0: a record that fits the schema; 1: a dead letter; 2: a blank line (no record)."""

DEAD_COLUMN: Final = "_rs_dead"
"""The dead letter of a row of kind 1, as one line of JSON."""

_GOOD, _DEAD, _BLANK = 0, 1, 2
_GOOD_KIND, _DEAD_KIND = int8_scalar(_GOOD), int8_scalar(_DEAD)  # no pandas import


@dataclass(frozen=True, slots=True)
class PipelineSplit:
    """One input file, as planned.

    Attributes:
        item: the file and its format.
        index: its position in the input (dead letters are written in this order).
        label: how dead letters and errors name it (its path, or the default input's name
            for the cached flights).
        size: its size in bytes when planned.
        mtime_ns: its modification time when planned.
        first: the file's record where the split starts (``0``: the whole file).
        rows: the split's records when it is a range of a Parquet file's row groups or of
            a CSV or JSON Lines file's lines; ``None``: the file from ``first`` to its end.
        boundaries: where the split's Parquet row groups start, in records from
            ``first`` (after the first, ascending); a micro-batch ends at one of them
            (``split_boundaries``) and a chunk never crosses one.
    """

    item: InputFile
    index: int
    label: str
    size: int
    mtime_ns: int
    first: int = 0
    rows: int | None = None
    boundaries: tuple[int, ...] = ()

    def __str__(self) -> str:
        if self.rows is None:
            return self.label
        return f"{self.label} (rows {self.first:,}-{self.first + self.rows - 1:,})"


def split_boundaries(split: PipelineSplit) -> tuple[int, ...]:
    """``split.boundaries``: ``from_splits`` rounds each micro-batch's share to them."""
    return split.boundaries


def _row_groups(path: Path) -> list[int]:
    """The rows of each row group of a Parquet file (its footer)."""
    metadata = pq.read_metadata(path)
    return [metadata.row_group(group).num_rows for group in range(metadata.num_row_groups)]


_LINE_UNIT: Final = 10_000
"""A CSV or JSON Lines file is cut into line ranges in units of this many records."""


def _line_units(item: InputFile) -> list[int]:
    """A text file's records (``count_records``' lines) in units of ``_LINE_UNIT``."""
    records = _count_text_records(item)
    whole, rest = divmod(records, _LINE_UNIT)
    return [_LINE_UNIT] * whole + ([rest] if rest else [])


def _ranges(groups: list[list[int]], parallelism: int) -> list[list[int]]:
    """Runs of row groups, the largest halved until there are ``parallelism`` of them.

    A run of two or more row groups is cut at the row group nearest its middle; this stops
    when every run is a single row group.

    >>> _ranges([[10, 10, 10, 10]], 3)
    [[10], [10], [10, 10]]
    >>> _ranges([[10, 10], [5]], 2)
    [[10, 10], [5]]
    """
    runs = [list(run) for run in groups]
    while len(runs) < parallelism:
        candidates = [index for index, run in enumerate(runs) if len(run) > 1]
        if not candidates:
            break
        widest = max(candidates, key=lambda index: (sum(runs[index]), -index))
        run = runs[widest]
        half, total, cut = sum(run) / 2, 0, 1
        best = None
        for position in range(1, len(run)):
            total += run[position - 1]
            if best is None or abs(total - half) < best:
                best, cut = abs(total - half), position
        runs[widest : widest + 1] = [run[:cut], run[cut:]]
    return runs


def master_cores(master: str) -> int:
    """The cores a Spark master URL reads with.

    ``local[N]``: N; ``local-cluster[E,C,M]``: E times C; ``local[*]`` and any cluster
    manager's URL: this machine's.

    >>> master_cores("local[2]"), master_cores("local-cluster[2,1,1024]"), master_cores("local")
    (2, 2, 1)
    """
    found = re.fullmatch(r"local(?:\[(\d+)(?:,\s*\d+)?\])?", master.strip())
    if found is not None:
        return int(found.group(1) or 1)
    found = re.fullmatch(r"local-cluster\[(\d+),\s*(\d+),\s*\d+\]", master.strip())
    if found is not None:
        return int(found.group(1)) * int(found.group(2))
    return os.cpu_count() or 1


def list_splits(
    files: Sequence[InputFile], label: str | None = None, *, parallelism: int = 1
) -> tuple[PipelineSplit, ...]:
    """The splits of ``files``, in order, with each file's size and modification time now.

    One split per file, except that when there are fewer files than ``parallelism``,
    Parquet files are cut into runs of whole row groups and CSV and JSON Lines files into
    ranges of lines (counted here, in units of ``_LINE_UNIT`` records), the largest run
    halved first, until there are ``parallelism`` splits or every run is one unit: so a
    single big file still keeps every core busy. A Parquet split also carries where its
    row groups start (``boundaries``). A text reader may take lines past a range's end
    (a CSV chunk the malformed lines before its last record, a JSON Lines chunk the
    blank ones); ``SplitReader.batches`` cuts its batches at the range's end, and the
    next range reads those lines itself.

    Args:
        files: the input files.
        label: how to name every split (the default input); ``None``: by path.
        parallelism: how many splits to aim for (the cores Spark reads with).

    Raises:
        OSError: a file cannot be examined.
        pyarrow.ArrowException: a Parquet file's footer is not valid.
    """
    entries: list[tuple[int, InputFile, os.stat_result, list[int] | None]] = []
    few = parallelism > len(files)  # then big files are cut, so every core has a split
    for index, item in enumerate(files):
        groups = None
        if item.format == "parquet":
            groups = _row_groups(item.path)
        elif few:  # CSV or JSON Lines: ranges of lines
            groups = _line_units(item)
        entries.append((index, item, item.path.stat(), groups))
    runs_of = {index: [groups] for index, _, _, groups in entries if groups}
    if parallelism > len(entries) and runs_of:
        flat = [(index, run) for index, runs in runs_of.items() for run in runs]
        cut = _ranges([run for _, run in flat], parallelism - (len(entries) - len(flat)))
        # _ranges keeps the order of the runs: map the pieces back to their files.
        runs_of, position = {}, 0
        for index, run in flat:
            pieces, covered = [], 0
            while covered < len(run):
                pieces.append(cut[position])
                covered += len(cut[position])
                position += 1
            runs_of[index] = pieces
    splits = []
    for index, item, status, _groups in entries:
        runs = runs_of.get(index, [[]])
        first = 0
        for run in runs:
            splits.append(
                PipelineSplit(
                    item=item,
                    index=index,
                    label=label if label is not None else str(item.path),
                    size=status.st_size,
                    mtime_ns=status.st_mtime_ns,
                    first=first,
                    rows=None if len(runs) == 1 else sum(run),
                    boundaries=tuple(sum(run[:end]) for end in range(1, len(run)))
                    if item.format == "parquet"
                    else (),
                )
            )
            first += sum(run)
    return tuple(splits)


def _check_unchanged(split: PipelineSplit) -> None:
    """Raise a clear error when the file is gone or differs from the plan."""
    path = split.item.path
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"input file {path} disappeared after the pipeline planned its splits "
            "(deleted or moved while the run was reading it)"
        ) from None
    if status.st_size != split.size or status.st_mtime_ns != split.mtime_ns:
        raise ValueError(
            f"input file {path} changed after the pipeline planned its splits "
            f"({split.size} -> {status.st_size} bytes); run again to read the new version"
        )


_COUNTS: dict[tuple[str, int, int], int] = {}


def count_records(split: PipelineSplit) -> int:
    """Records of ``split`` as its reader numbers them (what ``start`` counts).

    Parquet: rows (footer; a range split: its row groups' rows). CSV: physical lines after
    the header (a blank or malformed
    line is a record: it becomes a dead letter). JSON Lines: lines up to the last
    non-blank one (blank lines are read over, never published on their own). Cached per
    file version in the calling process (Spark asks before every micro-batch).

    Raises:
        FileNotFoundError: the file disappeared since it was planned.
        ValueError: the file changed since it was planned.
    """
    _check_unchanged(split)
    if split.rows is not None:
        return split.rows
    key = (str(split.item.path), split.size, split.mtime_ns)
    cached = _COUNTS.get(key)
    if cached is not None:
        return cached
    item = split.item
    if item.format == "parquet":
        records = int(pq.read_metadata(item.path).num_rows)
    else:
        records = _count_text_records(item)
    _COUNTS[key] = records
    return records


def _count_text_records(item: InputFile) -> int:
    """Records of a CSV or JSON Lines file, as ``count_records`` counts them."""
    with item.path.open("rb") as handle:
        lines = _Lines(handle)
        if item.format == "csv":
            _csv_header(item, lines)
            return lines.skip_lines(2**63 - 1)
        records = last = 0
        while (line := lines.next_line()) is not None:
            records += 1
            if not isinstance(line, bytes) or line.strip():
                last = records
        return last


def _first_record(item: InputFile) -> int:
    """What to subtract from a position to get the record number ``start`` counts."""
    return {"csv": 2, "jsonl": 1, "parquet": 0}[item.format]


def parquet_columns(path: Path, schema: pa.Schema, keep: Sequence[str]) -> tuple[str, ...] | None:
    """The columns of a Parquet file to read when only ``keep`` go on to Spark.

    A column stored with exactly its type in ``schema`` converts as it is: validating it
    can never refuse a record (``_validate``), so unless the query uses it, it is not
    read at all (as Spark's own Parquet reader prunes columns). Every other column is
    read: the query's, and those whose conversion may refuse a record (a dead letter).

    Returns:
        The names to read, in ``schema``'s order; ``None`` when that is every column.

    Raises:
        OSError: the file cannot be read.
        pyarrow.ArrowException: its footer is not valid Parquet.
    """
    stored = pq.read_schema(path)
    wanted = set(keep)
    names = tuple(
        field.name
        for field in schema
        if field.name in wanted
        or stored.get_field_index(field.name) < 0
        or stored.field(field.name).type != field.type
    )
    return None if len(names) == len(schema) else names


@dataclass(frozen=True, slots=True)
class SplitReader:
    """The opener of the pipeline's splits: records from ``start`` on, validated.

    Deterministic from an offset (the readers are): each published batch holds one row
    per input record, in order, from record ``start`` on.

    Every column that could refuse a record is validated, whichever are sent on. With
    ``keep``, a Parquet file's columns that are neither kept nor in need of conversion
    are not read (``parquet_columns``); a chunk with a dead letter is then read again
    whole, so the dead letter carries every column of its record.

    Attributes:
        columns: the stream's column names (the first file's), for CSV headers.
        schema: the stream's Arrow schema (what ``validate`` converts to).
        chunk_rows: the most records read and validated at a time.
        keep: the columns the published batches carry, a subset of ``schema``'s names in
            its order (the query's, ``_columns.query_columns``); ``None``: all of them.
    """

    columns: tuple[str, ...]
    schema: pa.Schema
    chunk_rows: int = 10_000
    keep: tuple[str, ...] | None = None

    @property
    def kept_schema(self) -> pa.Schema:
        """The columns of ``schema`` the batches carry (``keep``)."""
        if self.keep is None:
            return self.schema
        return pa.schema([self.schema.field(name) for name in self.keep])

    @property
    def output_schema(self) -> pa.Schema:
        """The published batches' schema: ``kept_schema`` plus the kind and dead-letter columns."""
        return self.kept_schema.append(pa.field(KIND_COLUMN, pa.int8())).append(
            pa.field(DEAD_COLUMN, pa.string())
        )

    def __call__(self, split: PipelineSplit, start: int) -> Publisher[pa.RecordBatch]:
        """The records of ``split`` from record ``start`` on (the file opens on demand).

        Raises:
            FileNotFoundError: the file disappeared since it was planned.
            ValueError: the file changed since it was planned.
        """
        _check_unchanged(split)
        return Flow.defer(lambda: Flow.from_iterable(self.batches(split, start)))

    def batches(self, split: PipelineSplit, start: int) -> Iterator[pa.RecordBatch]:
        """The batches ``__call__`` publishes, as an iterator."""
        # A reader may take records past where it was asked to stop: a CSV chunk takes the
        # malformed lines before its last record with it (into the next range of a cut
        # file), a JSON Lines chunk the blank lines after its last record (which
        # ``count_records`` leaves out). No batch goes past the split's end.
        limit = split.rows
        if limit is None and split.item.format == "jsonl":
            limit = count_records(split)
        # A Parquet chunk ends at the next row group: a micro-batch's share ends at one
        # (split_boundaries), so the last chunk reads nothing past it.
        edges = [edge for edge in split.boundaries if edge > start]
        if split.rows is not None:
            edges.append(split.rows)
        read = None
        if self.keep is not None and split.item.format == "parquet":
            read = parquet_columns(split.item.path, self.schema, self.keep)
        schema = self.schema if read is None else pa.schema([self.schema.field(n) for n in read])
        reader = open_reader(
            split.item, list(self.columns), start=split.first + start, parquet_columns=read
        )
        try:
            position = start
            while split.rows is None or position < split.rows:
                while edges and edges[0] <= position:
                    edges.pop(0)
                wanted = min(self.chunk_rows, edges[0] - position) if edges else self.chunk_rows
                chunk = reader.read(wanted)
                if chunk is None:
                    break
                batch = self._align(split, chunk, split.first + position, schema)
                position += chunk.consumed
                if limit is not None and position > limit:
                    batch = batch.slice(0, max(0, batch.num_rows - (position - limit)))
                if batch.num_rows:
                    yield batch
        finally:
            reader.close()

    def _align(
        self, split: PipelineSplit, chunk: RawChunk, first: int, schema: pa.Schema
    ) -> pa.RecordBatch:
        """One row per record ``first .. first + chunk.consumed - 1``.

        ``schema``: the columns ``chunk`` holds (``self.schema``, or fewer for a Parquet
        file read without the columns that need no conversion).
        """
        good, letters = validate(chunk, schema)
        if letters and schema is not self.schema:
            # A dead letter carries its whole record: these records again, every column.
            chunk = self._whole_chunk(split, first, int(chunk.consumed))
            good, letters = validate(chunk, self.schema)
        if self.keep is not None:  # validated; only the query's columns go on
            good = good.select(list(self.keep))
        size = int(chunk.consumed)
        if not letters and good.num_rows == size:
            kinds = pa.repeat(_GOOD_KIND, size)  # no Python list per row, no pandas import
            dead = pa.nulls(size, pa.string())
            return pa.RecordBatch.from_arrays(
                [*good.columns, kinds, dead], schema=self.output_schema
            )
        offset = _first_record(split.item) + first
        bad = {letter.position for letter in letters}
        slots: list[int | None] = [None] * size
        kind = [_BLANK] * size
        texts: list[str | None] = [None] * size
        row = 0
        for position in chunk.positions:
            if position in bad:
                continue
            slots[position - offset] = row
            kind[position - offset] = _GOOD
            row += 1
        for letter in letters:
            named = letter if letter.source == split.label else replace(letter, source=split.label)
            kind[letter.position - offset] = _DEAD
            texts[letter.position - offset] = named.to_json()
        taken = good.take(pa.array(slots, pa.int64()))
        return pa.RecordBatch.from_arrays(
            [*taken.columns, pa.array(kind, pa.int8()), pa.array(texts, pa.string())],
            schema=self.output_schema,
        )

    def _whole_chunk(self, split: PipelineSplit, first: int, count: int) -> RawChunk:
        """Records ``first .. first + count - 1`` of a Parquet file, every column.

        Raises:
            ValueError: the file ended before (it changed since it was planned).
        """
        reader = open_reader(split.item, list(self.columns), start=first)
        pieces: list[RawChunk] = []
        taken = 0
        try:
            while taken < count:
                piece = reader.read(count - taken)
                if piece is None:
                    raise ValueError(
                        f"{split}: the file ended at row {first + taken:,} while its rows "
                        f"up to {first + count - 1:,} were read again (did it change?)"
                    )
                pieces.append(piece)
                taken += piece.consumed
        finally:
            reader.close()
        return RawChunk(
            source=pieces[0].source,
            position_kind="row",
            positions=[position for piece in pieces for position in piece.positions],
            table=pa.concat_tables([piece.table for piece in pieces]),
            consumed=taken,
        )


@dataclass(frozen=True, slots=True)
class DeadLetterSplitter:
    """The transform: dead letters to a part file, the records that fit to Spark.

    A part file is named by a hash of its content, and written whole (a temporary file
    renamed), so a replayed or retried micro-batch writes the same file again and a
    crash never leaves half a file under the final name.

    Attributes:
        directory: where the part files go (a path every executor can write).
        names: the stream's column names (the helper columns are dropped).
    """

    directory: str
    names: tuple[str, ...]

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch``'s records of kind 0, in the stream's columns; its dead letters saved.

        Raises:
            OSError: the part file cannot be written (the query fails).
        """
        kinds = batch.column(KIND_COLUMN)
        data = batch.select(list(self.names))
        if pc.all(pc.equal(kinds, _GOOD_KIND)).as_py() is not False:
            return data
        dead = pc.filter(batch.column(DEAD_COLUMN), pc.equal(kinds, _DEAD_KIND)).to_pylist()
        if dead:
            text = "".join(line + "\n" for line in dead)
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
            directory = Path(self.directory)
            directory.mkdir(parents=True, exist_ok=True)
            final = directory / f"{digest}.jsonl"
            if not final.exists():
                temporary = directory / f".{digest}.{os.getpid()}.tmp"
                temporary.write_text(text, encoding="utf-8")
                temporary.replace(final)
        return data.filter(pc.equal(kinds, _GOOD_KIND))


def count_dead_letter_parts(directory: Path) -> int:
    """Dead letters in the part files so far (a retried batch may count twice here)."""
    total = 0
    with contextlib.suppress(OSError):
        for part in directory.glob("*.jsonl"):
            with contextlib.suppress(OSError), part.open("rb") as handle:
                total += sum(1 for _ in handle)
    return total


def merge_dead_letters(
    directory: Path, target: Path, splits: Sequence[PipelineSplit]
) -> list[DeadLetter]:
    """Write every dead letter of the part files once, in input order, to ``target``.

    Each dead letter is keyed by its file and position, so one written twice (a retried
    task, a micro-batch replayed after a restart) is kept once. ``target`` is written only
    when there is a dead letter (and replaced whole).

    Returns:
        The dead letters written, in order.

    Raises:
        OSError: a part file cannot be read, or ``target`` cannot be written.
    """
    order = {split.label: split.index for split in splits}
    found: dict[tuple[str, str, int], tuple[str, DeadLetter]] = {}
    if directory.is_dir():
        for part in sorted(directory.glob("*.jsonl")):
            for line in part.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                kind: Literal["line", "row"] = "line" if "line" in record else "row"
                letter = DeadLetter(
                    source=record["source"],
                    position=int(record[kind]),
                    position_kind=kind,
                    reason=record["reason"],
                    raw=record["raw"],
                )
                found.setdefault((letter.source, kind, letter.position), (line, letter))
    ranked = sorted(found.items(), key=lambda entry: (order.get(entry[0][0], -1), entry[0][2]))
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
