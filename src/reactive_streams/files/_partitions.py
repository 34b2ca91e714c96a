"""Files as partitions: an input's records cut into P contiguous ranges, readable from any offset.

``FilePartitions`` plans the files once (``plan_splits``: records counted, record
boundaries noted) and cuts their records, in input order and file by file, into
``partitions`` contiguous ranges of nearly equal size (they differ by one record at most).
A partition is a sequence of ``PartitionPiece`` (a split, its first record and the record
it stops before); a record's *position* is its index in its partition, counting every
record, dead letters too. ``open(p, start)`` is a publisher of the partition's records from
``start`` on, read by ``SplitReader`` only as fast as its subscriber requests batches.

The same files and the same ``partitions`` and ``batch_rows`` give the same partitions and
the same batches from every offset: a reader that replays a range gets the same records.
This is the shape of a partitioned route (``reactive_streams.rsocket.partitioned_routes``
serves a ``FilePartitions`` as one); the files are final, so ``live`` is ``False``.

A ``FilePartitions`` made with ``live=True`` grows: ``extend(splits)`` appends files that
landed later (their records cut into the same number of ranges, one appended to each
partition, so every position keeps its record), and readers at the end of a partition
wait for the next ``extend`` instead of completing, until ``finish()``. ``FileFollower``
polls directories and extends one, and tells it where a planned file was moved to
(``relocate``): a file is known by its identity (``FileIdentity``), so a reader reads it
wherever it lies now. Nothing checks a file but the reader that reads it: a file that was
read and committed may be moved or deleted, and one that changed fails only the readers
of its own records, with an error naming it.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .._core import (
    MAX_DEMAND,
    EmitLoopSubscription,
    LatencyWindow,
    check_positive,
    report_undeliverable,
)
from ..api import Publisher, Subscriber
from ._convert import ConversionOptions
from ._infer import infer_files_schema
from ._splits import FileSplit, SplitReader, plan_splits

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    from ._formats import InputFile
    from ._identity import FileIdentity

__all__ = ["DEFAULT_BATCH_ROWS", "FilePartitions", "PartitionPiece", "cut_partitions"]

logger = logging.getLogger("reactive_streams.files")

DEFAULT_BATCH_ROWS: Final = 4096
"""Records per batch at most (``FilePartitions``' default): one PAYLOAD of a route."""


@dataclass(frozen=True, slots=True)
class PartitionPiece:
    """The part of one split that belongs to a partition: its records ``start`` to ``stop``.

    Attributes:
        split: the file (or row group) the records are in.
        start: the first record, counted from the split's start.
        stop: the record it stops before (exclusive), ``start < stop <= split.records``.
    """

    split: FileSplit
    start: int
    stop: int

    @property
    def records(self) -> int:
        """How many records the piece holds."""
        return self.stop - self.start


def cut_partitions(
    splits: Sequence[FileSplit], partitions: int
) -> tuple[tuple[PartitionPiece, ...], ...]:
    """``splits``' records, in order, cut into ``partitions`` contiguous ranges.

    Partition ``i`` holds the input's records ``i * n // partitions`` up to (not
    including) ``(i + 1) * n // partitions`` of the ``n`` in all, so sizes differ by one at
    most; with more partitions than records some are empty.

    Raises:
        ValueError: ``partitions`` is below 1.
    """
    check_positive("partitions", partitions)
    total = sum(split.records for split in splits)
    edges = [index * total // partitions for index in range(partitions + 1)]
    cut: list[tuple[PartitionPiece, ...]] = []
    for begin, end in itertools.pairwise(edges):
        pieces: list[PartitionPiece] = []
        offset = 0  # the input's record where the split starts
        for split in splits:
            first, last = max(begin, offset), min(end, offset + split.records)
            if first < last:
                pieces.append(PartitionPiece(split, first - offset, last - offset))
            offset += split.records
        cut.append(tuple(pieces))
    return tuple(cut)


class FilePartitions:
    """Files as ``partitions`` replayable partitions of record batches (module doc).

    Build one with ``FilePartitions.plan(files, ...)``, which examines the files now.

    Attributes:
        schema: every batch's schema: the converted columns and the dead-letter column
            (``SplitReader.output_schema``; a string, null for a record that converted).
        partitions: how many partitions there are.
        batch_rows: the most records in one batch.
        live: whether partitions may still grow (``extend``); ``False`` unless made with
            ``live=True`` and not yet ``finish``-ed.
        records: the input's records in all.
    """

    def __init__(
        self,
        splits: Sequence[FileSplit],
        schema: pa.Schema,
        *,
        partitions: int = 1,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        options: ConversionOptions | None = None,
        live: bool = False,
    ) -> None:
        """Partitions over splits already planned (``plan_splits``).

        Args:
            splits: the input's splits, in order.
            schema: the columns and their types to convert to (without the dead-letter
                column).
            partitions: how many partitions, ``>= 1``.
            batch_rows: records per batch at most, ``>= 1``.
            options: null text and timestamp forms of the conversion.
            live: more files may come (``extend``) until ``finish``.

        Raises:
            ValueError: ``partitions`` or ``batch_rows`` is below 1.
        """
        check_positive("batch_rows", batch_rows)
        self._lock = threading.Lock()
        self._pieces = [list(part) for part in cut_partitions(splits, partitions)]
        self._readers: list[set[_PartitionSubscription]] = [set() for _ in range(partitions)]
        self._live = live
        # Per partition, the records appended by each ``extend``: (end offset, when).
        self._arrivals: list[deque[tuple[int, float]]] = [deque() for _ in range(partitions)]
        self._latency = LatencyWindow()
        self._reader = SplitReader(
            schema, chunk_rows=batch_rows, options=options or ConversionOptions()
        )
        self.schema: pa.Schema = self._reader.output_schema
        self.partitions = partitions
        self.batch_rows = batch_rows
        self._records = sum(split.records for split in splits)
        self._planned: dict[FileIdentity, Path] = {split.identity: split.path for split in splits}
        self._moved: dict[FileIdentity, tuple[Path, int]] = {}  # where to, its ctime there

    @property
    def live(self) -> bool:
        """Whether partitions may still grow (made ``live`` and not ``finish``-ed)."""
        with self._lock:
            return self._live

    @property
    def records(self) -> int:
        """The records of every partition, as planned (including extensions)."""
        with self._lock:
            return self._records

    def extend(self, splits: Sequence[FileSplit]) -> int:
        """Append the records of ``splits`` (files that landed later); return how many.

        They are cut into ``partitions`` contiguous ranges, range ``i`` appended to
        partition ``i``, so every position keeps its record; readers waiting at the end
        of a partition are woken.

        Raises:
            ValueError: the partitions are not live (or were finished).
        """
        cut = cut_partitions(splits, self.partitions)
        with self._lock:
            if not self._live:
                raise ValueError("these FilePartitions are final: nothing can be appended")
            now = time.monotonic()
            for part, pieces, arrivals in zip(self._pieces, cut, self._arrivals, strict=True):
                part.extend(pieces)
                if pieces:
                    arrivals.append((sum(piece.records for piece in part), now))
            added = sum(split.records for split in splits)
            self._records += added
            self._planned.update((split.identity, split.path) for split in splits)
            woken = [reader for readers in self._readers for reader in readers]
        for reader in woken:
            reader.wake()
        return added

    def files(self) -> dict[FileIdentity, Path]:
        """Every file planned (and appended), by identity: where it is now, as known."""
        with self._lock:
            known = dict(self._planned)
            known.update((identity, path) for identity, (path, _) in self._moved.items())
            return known

    def relocate(self, identity: FileIdentity, path: Path, ctime_ns: int) -> None:
        """The file planned as ``identity`` was moved to ``path``: read it there from now on.

        Args:
            identity: the file, as planned (``FileSplit.identity``).
            path: where it is now.
            ctime_ns: its ctime there (a rename sets it; it is checked when opened).
        """
        with self._lock:
            if identity in self._planned:
                self._moved[identity] = (path, ctime_ns)

    def forget(self, identity: FileIdentity) -> None:
        """The file planned as ``identity`` is gone (deleted or moved away): stop tracking it.

        Its records keep their positions; a reader that still asks for them gets an error
        naming the file.
        """
        with self._lock:
            self._moved.pop(identity, None)

    def _located(self, split: FileSplit) -> FileSplit:
        """``split``, at the path its file was moved to (``relocate``), if it was."""
        with self._lock:
            moved = self._moved.get(split.identity) if self._moved else None
        return split if moved is None else split.moved_to(*moved)

    def finish(self) -> None:
        """No more files will come: every partition is final; waiting readers complete."""
        with self._lock:
            self._live = False
            woken = [reader for readers in self._readers for reader in readers]
        for reader in woken:
            reader.wake()

    @classmethod
    def plan(
        cls,
        files: Sequence[InputFile],
        *,
        schema: pa.Schema | None = None,
        partitions: int = 1,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        options: ConversionOptions | None = None,
        live: bool = False,
    ) -> FilePartitions:
        """Plan ``files`` (``list_files`` finds them) as partitions; empty files are skipped.

        Args:
            files: the input files, in reading order.
            schema: the columns to convert to; ``None``: ``infer_files_schema(files)``.
            partitions: how many partitions, ``>= 1``.
            batch_rows: records per batch at most, ``>= 1`` (default 4,096).
            options: null text and timestamp forms, for inference and conversion.
            live: more files may come (``extend``, ``FileFollower``) until ``finish``.

        Raises:
            ValueError: ``partitions`` or ``batch_rows`` is below 1, or no schema was
                given and there is no file to infer it from.
            OSError: a file cannot be examined.
            FormatError: a file cannot be read as its format.
            pyarrow.ArrowException: a Parquet file is not valid.
        """
        check_positive("partitions", partitions)
        check_positive("batch_rows", batch_rows)
        files = [item for item in files if item.path.stat().st_size]
        if schema is None:
            if not files:
                raise ValueError("no file to infer the schema from: give the schema")
            schema = infer_files_schema(files, options)
        return cls(
            plan_splits(files),
            schema,
            partitions=partitions,
            batch_rows=batch_rows,
            options=options,
            live=live,
        )

    def pieces(self, partition: int) -> tuple[PartitionPiece, ...]:
        """The pieces of ``partition``, in order.

        Raises:
            ValueError: there is no such partition.
        """
        self._check(partition)
        with self._lock:
            return tuple(self._pieces[partition])

    def _check(self, partition: int) -> None:
        if type(partition) is not int or not 0 <= partition < self.partitions:
            raise ValueError(
                f"no partition {partition!r}: there are {self.partitions} (0 to "
                f"{self.partitions - 1})"
            )

    def size(self, partition: int) -> int:
        """The records of ``partition``, as planned (no file is checked).

        Raises:
            ValueError: there is no such partition.
        """
        return sum(piece.records for piece in self.pieces(partition))

    def high_water(self, partition: int) -> int:
        """The records of ``partition``, as planned (``size``).

        No file is looked at: a file that was read may be moved or deleted, and one that
        changed fails only the readers of its own records (``open``), never this.

        Raises:
            ValueError: there is no such partition.
        """
        return self.size(partition)

    def final(self, partition: int) -> bool:
        """Whether the partition will not grow: always, unless ``live`` and not finished.

        Raises:
            ValueError: there is no such partition.
        """
        self._check(partition)
        return not self.live

    def open(self, partition: int, start: int) -> Publisher[pa.RecordBatch]:
        """The records of ``partition`` from position ``start`` on, in batches.

        Each subscriber reads on its own: batches of 1 to ``batch_rows`` rows, one per
        requested element, read on the thread that calls ``request`` (Rule 3.10) and only
        then (no read-ahead), then ``on_complete`` right after the last record (Rule 1.5).
        A file that disappeared or changed since it was planned, or that cannot be read,
        ends the stream with ``on_error`` naming it (Rule 1.4).

        Raises:
            ValueError: there is no such partition, or ``start`` is not between 0 and the
                partition's size.
        """
        size = self.size(partition)
        if type(start) is not int or not 0 <= start <= size:
            raise ValueError(
                f"start {start!r} is beyond partition {partition}'s {size:,} records"
                if type(start) is int and start > size
                else f"start must be an integer >= 0, got {start!r}"
            )
        return _PartitionPublisher(self, partition, start)

    def commit(self, partition: int, offset: int) -> None:
        """Nothing to release (files can always be read again); measures the latency.

        For records appended by ``extend``: the seconds from their arrival to this commit
        (``commit_latencies``).

        Raises:
            ValueError: there is no such partition.
        """
        self._check(partition)
        now = time.monotonic()
        with self._lock:
            arrivals = self._arrivals[partition]
            while arrivals and arrivals[0][0] <= offset:
                self._latency.add(now - arrivals.popleft()[1])

    def commit_latencies(self) -> tuple[float, float, int] | None:
        """``(p50, p99, samples)``: seconds from records' arrival to their commit.

        Arrival is the ``extend`` that appended them; ``None`` before any such commit
        (always for files planned at the start).
        """
        return self._latency.quantiles()

    # -- for the readers ----------------------------------------------------------------

    def _piece(self, partition: int, index: int) -> PartitionPiece | None:
        """Piece ``index`` of ``partition``, or ``None`` past its end for now.

        A reader of a live partition was registered when it opened (``_join``), so the
        next ``extend`` or ``finish`` wakes it.
        """
        with self._lock:
            pieces = self._pieces[partition]
            return pieces[index] if index < len(pieces) else None

    def _join(self, reader: _PartitionSubscription, partition: int) -> None:
        """Register ``reader`` for wake-ups while the partitions are live.

        So a reader with no demand still completes once they are finished (Rule 1.5).
        """
        with self._lock:
            if self._live:
                self._readers[partition].add(reader)

    def _at_end(self, partition: int, index: int) -> bool:
        """Whether piece ``index`` is past the end of a partition that will not grow."""
        with self._lock:
            return index >= len(self._pieces[partition]) and not self._live

    def _forget(self, reader: _PartitionSubscription, partition: int) -> None:
        with self._lock:
            self._readers[partition].discard(reader)

    def __repr__(self) -> str:
        return (
            f"FilePartitions(partitions={self.partitions}, records={self.records:,}, "
            f"batch_rows={self.batch_rows})"
        )


class _PartitionPublisher(Publisher["pa.RecordBatch"]):
    """One partition from one position: each subscriber reads it on its own (Rule 1.11)."""

    __slots__ = ("_partition", "_source", "_start")

    def __init__(self, source: FilePartitions, partition: int, start: int) -> None:
        self._source = source
        self._partition = partition
        self._start = start

    def subscribe(self, subscriber: Subscriber[pa.RecordBatch]) -> None:
        """Start reading for ``subscriber`` (Rule 1.9).

        Raises:
            TypeError: ``subscriber`` is ``None`` (Rule 1.9).
        """
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe() requires a subscriber, got None")
        _PartitionSubscription(subscriber, self._source, self._partition, self._start).start()


class _PartitionSubscription(EmitLoopSubscription["pa.RecordBatch"]):
    """Reads the pieces in order; one ``next`` of a ``SplitReader`` per requested batch.

    ``_index`` is the piece being read and ``_offset`` the next record of it (from the
    piece's start); the end is known from the plan, so nothing is read ahead to find it.
    At the end of a live partition the reader waits (registered with the source, no
    thread held) until files are appended or the source is finished.
    """

    __slots__ = (
        "_batches",
        "_error",
        "_index",
        "_offset",
        "_partition",
        "_piece",
        "_reader",
        "_source",
        "_start",
    )

    def __init__(
        self,
        subscriber: Subscriber[pa.RecordBatch],
        source: FilePartitions,
        partition: int,
        start: int,
    ) -> None:
        super().__init__(subscriber, batch_size=MAX_DEMAND)
        self._source = source
        self._partition = partition
        self._start = start
        self._reader = source._reader
        self._index = 0
        self._offset = 0
        self._piece: PartitionPiece | None = None  # the piece at _index, once looked up
        self._batches: Iterator[pa.RecordBatch] | None = None
        self._error: Exception | None = None

    def _current(self) -> PartitionPiece | None:
        piece = self._piece
        if piece is None:
            piece = self._piece = self._source._piece(self._partition, self._index)
        return piece

    def _open(self) -> None:
        self._source._join(self, self._partition)
        skip = self._start
        while (piece := self._current()) is not None and skip >= piece.records:
            skip -= piece.records
            self._index += 1
            self._piece = None
        self._offset = skip

    def _next_batch(self, piece: PartitionPiece) -> pa.RecordBatch | None:
        """The next batch of ``piece`` (moving to the next piece after its last)."""
        if self._batches is None:
            self._batches = self._reader.batches(
                self._source._located(piece.split), piece.start + self._offset, piece.stop
            )
        batch = next(self._batches, None)
        if batch is None:
            raise ValueError(
                f"{piece.split}: its records ended at {piece.start + self._offset:,}, before "
                f"the {piece.stop:,} planned (did it change?)"
            )
        self._offset += batch.num_rows
        if self._offset >= piece.records:
            self._close_batches()
            self._index += 1
            self._piece = None
            self._offset = 0
        return batch if batch.num_rows else None

    def _emit(self, subscriber: Subscriber[pa.RecordBatch], count: int) -> int:
        emitted = 0
        election = self._election
        while emitted < count and self._error is None and not election.cancelled:
            piece = self._current()
            if piece is None:  # the end for now; an extend or finish wakes the loop
                break
            try:
                batch = self._next_batch(piece)
            except Exception as exc:  # a file gone, changed or unreadable: Rule 1.4
                logger.warning("partition %d refused: %s", self._partition, exc)
                self._error = exc
                break
            if batch is None:
                continue
            emitted += 1
            try:
                subscriber.on_next(batch)
            except Exception as exc:
                self._deliver_failed(subscriber, exc)
                break
        return emitted

    def _exhausted(self) -> bool:
        if self._error is not None:
            return True
        if self._piece is not None:
            return False
        return self._source._at_end(self._partition, self._index)

    def _failure(self) -> Exception | None:
        return self._error

    def _close_batches(self) -> None:
        batches, self._batches = self._batches, None
        close = getattr(batches, "close", None)
        if close is not None:
            try:
                close()  # the generator's reader closes its file now
            except Exception as exc:
                report_undeliverable(exc)

    def _close(self) -> None:
        self._close_batches()
        self._source._forget(self, self._partition)
