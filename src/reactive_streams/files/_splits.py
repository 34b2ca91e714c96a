"""Files as splits: planned once (records counted, record boundaries noted), read anywhere.

A ``FileSplit`` is one input file (or one row group of a Parquet file) as the planner saw
it: its identity (device, inode, size and modification time, from the descriptor the
planner read; a file that changes, is replaced or disappears later is named in a clear
error instead of being read half old, half new), its records, and where a reader may
start without reading from the file's start:

* a Parquet file: its row groups (a reader skips whole row groups before its offset);
* a CSV or JSON Lines file: a record boundary about every ``BLOCK_BYTES``
  (``Checkpoint``), found by the same scanner the readers use (``_records``), so a
  reader opened at one reads exactly the records the planner counted after it.

``SplitReader`` reads a split from a record offset: every record of the split once, in
order, each batch holding one row per record (so offsets count records, good or not), the
refused ones as dead letters in their own column. It opens the file once (``O_NOFOLLOW``
unless the listing accepted a link there), checks that the descriptor is the file planned
(``FileIdentity``, and the ctime), and checks it again after every chunk it reads, so a
file replaced or rewritten meanwhile is refused, never read on from an old offset.
"""

from __future__ import annotations

import bisect
import functools
import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from ._convert import DEAD_LETTER_COLUMN, ConversionOptions, Converted, Validator, aligned_batch
from ._formats import InputFile, RawChunk, open_reader
from ._identity import FileChangedError, FileIdentity, check_status, open_file
from ._records import BLOCK_BYTES, Checkpoint, RecordScanner, index_records

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path
    from typing import BinaryIO

    from ._dead_letter import DeadLetter

__all__ = [
    "FileChangedError",
    "FileSplit",
    "RefusedRecordError",
    "SplitReader",
    "count_records",
    "parquet_columns",
    "plan_splits",
    "split_boundaries",
]


class RefusedRecordError(ValueError):
    """A record did not fit the schema, and dead letters were not asked for.

    Attributes:
        dead_letter: the record, where it was and why it was refused.
    """

    def __init__(self, dead_letter: DeadLetter) -> None:
        kind = dead_letter.position_kind
        raw = str(dead_letter.raw)
        super().__init__(
            f"{dead_letter.source} {kind} {dead_letter.position:,}: {dead_letter.reason} "
            f"(record: {raw[:120]!r}{'...' if len(raw) > 120 else ''})"
        )
        self.dead_letter = dead_letter


@dataclass(frozen=True, slots=True)
class FileSplit:
    """One file (or one Parquet row group) of an input, as planned.

    Attributes:
        file: the file, its format and (CSV) dialect.
        size: its size in bytes when planned.
        mtime_ns: its modification time when planned (nanoseconds).
        records: the split's records: rows, or CSV records after the header, or JSON
            Lines' non-blank lines.
        index: the file's place in the input (splits of one file share it).
        label: how errors and dead letters name the file; ``None``: by its path.
        row_group: the Parquet row group the split is, or ``None`` for the whole file.
        first: the file's record the split starts at (a row group's first row).
        checkpoints: record boundaries of a text file, by absolute record number.
        boundaries: offsets from the split's start where a micro-batch may end cheaply
            (row groups; text checkpoints), ascending, each ``0 < b < records``.
        device: the file system's device number when planned (``0``: not known).
        inode: the file's inode when planned (``0``: not known; then neither it nor the
            ctime is checked, only the size and modification time).
        ctime_ns: its status-change time when planned (nanoseconds).
    """

    file: InputFile
    size: int
    mtime_ns: int
    records: int
    index: int = 0
    label: str | None = None
    row_group: int | None = None
    first: int = 0
    checkpoints: tuple[Checkpoint, ...] = field(default=(), repr=False)
    boundaries: tuple[int, ...] = field(default=(), repr=False)
    device: int = field(default=0, repr=False)
    inode: int = field(default=0, repr=False)
    ctime_ns: int = field(default=0, repr=False)

    @property
    def path(self) -> Path:
        """The file."""
        return self.file.path

    @property
    def identity(self) -> FileIdentity:
        """The file as planned: device, inode, size and modification time."""
        return FileIdentity(self.device, self.inode, self.size, self.mtime_ns)

    def moved_to(self, path: Path, ctime_ns: int) -> FileSplit:
        """The same split, its file now at ``path`` (moved there: the same identity).

        A rename sets a file's ctime, so ``ctime_ns`` is what it was seen to be there.
        """
        return replace(self, file=replace(self.file, path=path), ctime_ns=ctime_ns)

    def check(self, status: os.stat_result, path: Path | None = None) -> None:
        """Raise a one-line error naming the file unless ``status`` is the file planned.

        Raises:
            FileChangedError: another file is there, or it changed (size, modification
                time, or rewritten in place: its ctime), or it is not a regular file.
        """
        if self.inode == 0:  # planned by hand: only the size and modification time
            given = FileIdentity(status.st_dev, status.st_ino, self.size, self.mtime_ns)
            check_status(path or self.path, status, given, None)
            return
        check_status(path or self.path, status, self.identity, self.ctime_ns)

    def open_checked(self) -> BinaryIO:
        """The file opened (``InputFile.open_raw``), checked to be the file planned.

        Raises:
            FileNotFoundError: the file disappeared since it was planned.
            FileChangedError: another file or a link is there, or the file changed.
            OSError: it cannot be opened.
        """
        path = self.path
        try:
            fd, status = open_file(path, follow_symlink=self.file.follow_symlink)
        except FileNotFoundError:
            raise FileNotFoundError(
                f"input file {path} disappeared after it was planned (deleted or moved while "
                "it was being read)"
            ) from None
        raw = os.fdopen(fd, "rb")
        try:
            self.check(status)
        except BaseException:
            raw.close()
            raise
        return raw

    @property
    def name(self) -> str:
        """How dead letters name the file: ``label`` or its path."""
        return self.label if self.label is not None else str(self.file.path)

    def __str__(self) -> str:
        if self.row_group is None:
            return self.name
        return f"{self.name} (row group {self.row_group})"

    def checkpoint(self, record: int) -> Checkpoint | None:
        """The last record boundary at or before the file's record ``record``."""
        points = self.checkpoints
        if not points:
            return None
        at = bisect.bisect_right([point.record for point in points], record) - 1
        return points[at] if at >= 0 else None


def _row_groups(raw: BinaryIO) -> list[int]:
    """The rows of each row group of a Parquet file (its footer)."""
    metadata = pq.read_metadata(raw)
    return [metadata.row_group(group).num_rows for group in range(metadata.num_row_groups)]


def _starts(sizes: Sequence[int]) -> tuple[int, ...]:
    """Where each piece after the first starts, from the sizes of the pieces."""
    starts, total = [], 0
    for size in sizes[:-1]:
        total += size
        starts.append(total)
    return tuple(start for start in starts if 0 < start < total + sizes[-1])


def plan_splits(
    files: Sequence[InputFile],
    *,
    labels: Sequence[str | None] | None = None,
    by_row_group: bool = False,
    every: int | None = None,
) -> tuple[FileSplit, ...]:
    """The splits of ``files``, in order: one per file (or per Parquet row group).

    Each file is examined now, through one descriptor (``InputFile.open_raw``: a link put
    in place of a file listed as a regular one is refused): its identity (device, inode,
    size, modification time and ctime, from that descriptor), and its records (a Parquet
    footer; every byte of a text file, through the record scanner, noting a record
    boundary about every ``every`` bytes).

    Args:
        files: the input files.
        labels: how to name each file in errors and dead letters (``None``: its path).
        by_row_group: one split per Parquet row group instead of per file.
        every: bytes between a text file's checkpoints, about; ``None``:
            ``CHECKPOINT_BYTES`` (1 MiB).

    Raises:
        OSError: a file cannot be examined.
        FileChangedError: a link or something other than a regular file is where a
            listed file was, or a file changed while it was examined.
        FormatError: a CSV file's header cannot be read.
        pyarrow.ArrowException: a Parquet file's footer is not valid.
    """
    every = every if every is not None else CHECKPOINT_BYTES
    splits: list[FileSplit] = []
    for index, item in enumerate(files):
        label = labels[index] if labels is not None else None
        raw = item.open_raw()[0]
        with raw:
            splits.extend(
                _plan_file(item, raw, index, label, by_row_group=by_row_group, every=every)
            )
    return tuple(splits)


def _plan_file(
    item: InputFile,
    raw: BinaryIO,
    index: int,
    label: str | None,
    *,
    by_row_group: bool,
    every: int,
) -> list[FileSplit]:
    """The splits of one file, examined through ``raw`` (``plan_splits``).

    Raises:
        FileChangedError: the file was written to while it was examined.
    """
    from ._formats import read_csv_header  # noqa: PLC0415

    fd = raw.fileno()
    status = os.fstat(fd)
    split = functools.partial(
        FileSplit,
        item,
        size=status.st_size,
        mtime_ns=status.st_mtime_ns,
        index=index,
        label=label,
        device=status.st_dev,
        inode=status.st_ino,
        ctime_ns=status.st_ctime_ns,
    )
    if item.format == "parquet":
        groups = _row_groups(raw)
        if not by_row_group:
            splits = [split(records=sum(groups), boundaries=_starts(groups) if groups else ())]
        else:
            splits, first = [], 0
            for group, rows in enumerate(groups):
                splits.append(split(records=rows, row_group=group, first=first))
                first += rows
        if splits:
            splits[0].check(os.fstat(fd))
        return splits
    with item.open(raw) as handle:  # closes ``raw`` too
        scanner = RecordScanner(handle, item.format, item.dialect)
        if item.format == "csv" and read_csv_header(item, scanner) is None:
            found = None
        else:
            found = index_records(scanner, every)
        after = os.fstat(fd)  # written to while it was examined: not planned half-way
    if found is None:
        whole = split(records=0)  # an empty file
    elif not item.seekable:  # a compressed file is read from its start
        whole = split(records=found.records, checkpoints=found.checkpoints[:1])
    else:
        points = found.checkpoints
        inside = tuple(point.record for point in points if 0 < point.record < found.records)
        whole = split(records=found.records, checkpoints=points, boundaries=inside)
    whole.check(after)
    return [whole]


def check_unchanged(split: FileSplit) -> None:
    """Raise a clear error when the file is gone or is not the file planned.

    Raises:
        FileNotFoundError: the file disappeared since it was planned.
        FileChangedError: another file or a link is there, or it changed (``FileSplit.check``).
    """
    split.open_checked().close()


def count_records(split: FileSplit) -> int:
    """The split's records, as planned, once the file is checked to be unchanged.

    Raises:
        FileNotFoundError: the file disappeared since it was planned.
        FileChangedError: the file changed since it was planned.
    """
    check_unchanged(split)
    return split.records


def split_boundaries(split: FileSplit) -> tuple[int, ...]:
    """``split.boundaries``: where ``from_splits`` may end a micro-batch's share cheaply."""
    return split.boundaries


def parquet_columns(
    path: Path | BinaryIO, schema: pa.Schema, keep: Sequence[str]
) -> tuple[str, ...] | None:
    """The columns of a Parquet file to read when only ``keep`` are carried on.

    A column stored with exactly its type in ``schema`` converts as it is: converting it
    can never refuse a record, so unless it is kept it is not read at all (as Spark's own
    Parquet reader prunes columns). Every other column is read: the kept ones, and those
    whose conversion may refuse a record.

    Args:
        path: the file, or the file opened (``InputFile.open_raw``).
        schema: the columns and their types to convert to.
        keep: the columns carried on.

    Returns:
        The names to read, in ``schema``'s order; ``None`` when that is every column.

    Raises:
        OSError: the file cannot be read.
        pyarrow.ArrowException: its footer is not valid Parquet.
    """
    stored = pq.read_schema(path)
    wanted = set(keep)
    names = tuple(
        column.name
        for column in schema
        if column.name in wanted
        or stored.get_field_index(column.name) < 0
        or stored.field(column.name).type != column.type
    )
    return None if len(names) == len(schema) else names


_READ_ROWS: Final = 10_000

CHECKPOINT_BYTES = BLOCK_BYTES
"""Bytes between a text file's checkpoints, about (``plan_splits``' default)."""


@dataclass(frozen=True, slots=True)
class SplitReader:
    """Reads a ``FileSplit`` from a record offset: validated record batches.

    Deterministic from an offset (the readers are): each batch holds one row per record
    of the split, in order, from record ``start`` on: its columns converted to
    ``schema``, or, for a refused record, nulls and its dead letter (``dead_column``).

    Every column that could refuse a record is converted, whichever are carried on. With
    ``keep``, a Parquet file's columns that are neither kept nor in need of conversion are
    not read; a chunk with a dead letter is then read again whole, so the dead letter
    carries every column of its record.

    Attributes:
        schema: the columns and their types (a CSV file's header names some or all of
            them, in any order; a JSON object's fields must be among them; a column a file
            lacks is null in its records).
        chunk_rows: the most records read and converted at a time.
        keep: the columns the batches carry, in ``schema``'s order; ``None``: all.
        dead_letters: ``True``: a refused record is a row with its dead letter;
            ``False``: it raises ``RefusedRecordError``.
        dead_column: the name of the dead-letter column (present only with
            ``dead_letters``).
        options: null text and timestamp forms of the conversion (``ConversionOptions``).
    """

    schema: pa.Schema
    chunk_rows: int = _READ_ROWS
    keep: tuple[str, ...] | None = None
    dead_letters: bool = True
    dead_column: str = DEAD_LETTER_COLUMN
    options: ConversionOptions = field(default_factory=ConversionOptions)

    @property
    def kept_schema(self) -> pa.Schema:
        """The columns of ``schema`` the batches carry (``keep``)."""
        if self.keep is None:
            return self.schema
        return pa.schema([self.schema.field(name) for name in self.keep])

    @property
    def output_schema(self) -> pa.Schema:
        """The batches' schema: ``kept_schema``, plus the dead-letter column."""
        if not self.dead_letters:
            return self.kept_schema
        return self.kept_schema.append(pa.field(self.dead_column, pa.string()))

    def batches(
        self, split: FileSplit, start: int = 0, stop: int | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The split's records from record ``start`` (of the split) to ``stop``, in batches.

        Args:
            split: the split to read.
            start: the first record, counted from the split's start.
            stop: the record to stop before (exclusive; at most ``split.records``);
                ``None``: the split's end. A batch never holds a record at or past it, and
                nothing past it is read (beyond the block a text reader holds).

        Raises:
            FileNotFoundError: the file disappeared since it was planned.
            FileChangedError: the file changed since it was planned.
            RefusedRecordError: a record was refused and ``dead_letters`` is ``False``.
            ValueError: the file ended before the records planned (it changed).
        """
        raw = split.open_checked()
        try:
            yield from self._read(split, raw, start, stop)
        finally:
            raw.close()

    def _read(
        self, split: FileSplit, raw: BinaryIO, start: int, stop: int | None
    ) -> Iterator[pa.RecordBatch]:
        """``batches`` from the opened file ``raw``; it is checked after every chunk read."""
        file = split.file
        fd = raw.fileno()
        read = None
        if self.keep is not None and file.format == "parquet":
            read = parquet_columns(raw, self.schema, self.keep)
        schema = self.schema if read is None else pa.schema([self.schema.field(n) for n in read])
        validator = Validator(schema, self.options)
        # A chunk ends at the next boundary: a micro-batch's share ends at one, so the last
        # chunk reads nothing past it (a Parquet row group is never decoded twice).
        end = split.records if stop is None else min(stop, split.records)
        edges = [edge for edge in split.boundaries if start < edge < end] + [end]
        absolute = split.first + start
        reader = open_reader(
            file,
            list(self.schema.names),
            start=absolute,
            at=split.checkpoint(absolute),
            parquet_columns=read,
            source=split.name,
            raw=raw,
        )
        try:
            position = start
            while position < end:
                while edges[0] <= position:
                    edges.pop(0)
                chunk = reader.read(min(self.chunk_rows, edges[0] - position))
                # Replaced or rewritten while being read (cp -p keeps size and mtime, not
                # ctime): what was read may be the new bytes, so nothing of it is sent.
                split.check(os.fstat(fd))
                if chunk is None:
                    raise ValueError(
                        f"{split}: the file ended at record {split.first + position:,}, before "
                        f"the {split.records:,} records planned (did it change?)"
                    )
                converted = validator.convert(chunk)
                if converted.rejects and schema is not self.schema:
                    # A dead letter carries its whole record: these records again, whole.
                    whole = self._whole_chunk(split, chunk)
                    converted = Validator(self.schema, self.options).convert(whole)
                if converted.rejects and not self.dead_letters:
                    raise RefusedRecordError(converted.rejects[0][1])
                position += chunk.count
                yield self._batch(converted)
        finally:
            reader.close()

    def _batch(self, converted: Converted) -> pa.RecordBatch:
        batch = aligned_batch(converted, self.keep, dead_column=self.dead_column)
        if not self.dead_letters:
            return batch.drop_columns([self.dead_column])
        return batch

    def _whole_chunk(self, split: FileSplit, chunk: RawChunk) -> RawChunk:
        """The rows of ``chunk`` (Parquet) again, every column.

        Raises:
            ValueError: the file ended before (it changed since it was planned).
        """
        raw = split.open_checked()
        reader = open_reader(split.file, list(self.schema.names), start=chunk.first,
                             source=split.name, raw=raw)  # fmt: skip
        pieces: list[pa.Table] = []
        taken = 0
        try:
            while taken < chunk.count:
                piece = reader.read(chunk.count - taken)
                if piece is None or piece.table is None:
                    raise ValueError(
                        f"{split}: the file ended at row {chunk.first + taken:,} while its rows "
                        f"up to {chunk.first + chunk.count - 1:,} were read again (did it change?)"
                    )
                pieces.append(piece.table)
                taken += piece.count
        finally:
            reader.close()
            raw.close()
        return RawChunk(
            source=chunk.source,
            position_kind="row",
            first=chunk.first,
            count=taken,
            positions=list(range(chunk.first, chunk.first + taken)),
            table=pa.concat_tables(pieces),
        )


def dead_letters_of(batch: pa.RecordBatch, column: str = DEAD_LETTER_COLUMN) -> list[str]:
    """The dead letters (JSON) of a ``SplitReader`` batch, in order."""
    dead = batch.column(column)
    if dead.null_count == len(dead):
        return []
    return [text for text in pc.drop_null(dead).to_pylist() if text is not None]


__all__ += ["check_unchanged", "dead_letters_of"]
