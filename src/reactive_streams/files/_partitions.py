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
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .._core import MAX_DEMAND, EmitLoopSubscription, check_positive, report_undeliverable
from ..api import Publisher, Subscriber
from ._convert import ConversionOptions
from ._infer import infer_files_schema
from ._splits import FileSplit, SplitReader, count_records, plan_splits

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    from ._formats import InputFile

__all__ = ["DEFAULT_BATCH_ROWS", "FilePartitions", "PartitionPiece", "cut_partitions"]

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
        live: ``False``: files are final, no partition ever grows.
        records: the input's records in all.
    """

    live: Final = False

    def __init__(
        self,
        splits: Sequence[FileSplit],
        schema: pa.Schema,
        *,
        partitions: int = 1,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        options: ConversionOptions | None = None,
    ) -> None:
        """Partitions over splits already planned (``plan_splits``).

        Args:
            splits: the input's splits, in order.
            schema: the columns and their types to convert to (without the dead-letter
                column).
            partitions: how many partitions, ``>= 1``.
            batch_rows: records per batch at most, ``>= 1``.
            options: null text and timestamp forms of the conversion.

        Raises:
            ValueError: ``partitions`` or ``batch_rows`` is below 1.
        """
        check_positive("batch_rows", batch_rows)
        self._pieces = cut_partitions(splits, partitions)
        self._reader = SplitReader(
            schema, chunk_rows=batch_rows, options=options or ConversionOptions()
        )
        self.schema: pa.Schema = self._reader.output_schema
        self.partitions = partitions
        self.batch_rows = batch_rows
        self.records = sum(split.records for split in splits)

    @classmethod
    def plan(
        cls,
        files: Sequence[InputFile],
        *,
        schema: pa.Schema | None = None,
        partitions: int = 1,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        options: ConversionOptions | None = None,
    ) -> FilePartitions:
        """Plan ``files`` (``list_files`` finds them) as partitions; empty files are skipped.

        Args:
            files: the input files, in reading order.
            schema: the columns to convert to; ``None``: ``infer_files_schema(files)``.
            partitions: how many partitions, ``>= 1``.
            batch_rows: records per batch at most, ``>= 1`` (default 4,096).
            options: null text and timestamp forms, for inference and conversion.

        Raises:
            ValueError: ``partitions`` or ``batch_rows`` is below 1.
            OSError: a file cannot be examined.
            FormatError: a file cannot be read as its format.
            pyarrow.ArrowException: a Parquet file is not valid.
        """
        check_positive("partitions", partitions)
        check_positive("batch_rows", batch_rows)
        files = [item for item in files if item.path.stat().st_size]
        if schema is None:
            schema = infer_files_schema(files, options)
        return cls(
            plan_splits(files),
            schema,
            partitions=partitions,
            batch_rows=batch_rows,
            options=options,
        )

    def pieces(self, partition: int) -> tuple[PartitionPiece, ...]:
        """The pieces of ``partition``, in order.

        Raises:
            ValueError: there is no such partition.
        """
        if type(partition) is not int or not 0 <= partition < self.partitions:
            raise ValueError(
                f"no partition {partition!r}: there are {self.partitions} (0 to "
                f"{self.partitions - 1})"
            )
        return self._pieces[partition]

    def size(self, partition: int) -> int:
        """The records of ``partition``, as planned (no file is checked).

        Raises:
            ValueError: there is no such partition.
        """
        return sum(piece.records for piece in self.pieces(partition))

    def high_water(self, partition: int) -> int:
        """The records of ``partition``, once its files are checked to be unchanged.

        Raises:
            ValueError: there is no such partition.
            FileNotFoundError: one of its files disappeared since it was planned.
            FileChangedError: one of its files changed since it was planned.
        """
        for piece in self.pieces(partition):
            count_records(piece.split)
        return self.size(partition)

    def final(self, partition: int) -> bool:
        """``True``: a file partition never grows.

        Raises:
            ValueError: there is no such partition.
        """
        self.pieces(partition)
        return True

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
        return _PartitionPublisher(self._pieces[partition], start, self._reader)

    def commit(self, partition: int, offset: int) -> None:
        """Nothing to release: files can always be read again.

        Raises:
            ValueError: there is no such partition.
        """
        self.pieces(partition)

    def __repr__(self) -> str:
        return (
            f"FilePartitions(partitions={self.partitions}, records={self.records:,}, "
            f"batch_rows={self.batch_rows})"
        )


class _PartitionPublisher(Publisher["pa.RecordBatch"]):
    """One partition from one position: each subscriber reads it on its own (Rule 1.11)."""

    __slots__ = ("_pieces", "_reader", "_start")

    def __init__(self, pieces: Sequence[PartitionPiece], start: int, reader: SplitReader) -> None:
        self._pieces = tuple(pieces)
        self._start = start
        self._reader = reader

    def subscribe(self, subscriber: Subscriber[pa.RecordBatch]) -> None:
        """Start reading for ``subscriber`` (Rule 1.9).

        Raises:
            TypeError: ``subscriber`` is ``None`` (Rule 1.9).
        """
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe() requires a subscriber, got None")
        _PartitionSubscription(subscriber, self._pieces, self._start, self._reader).start()


class _PartitionSubscription(EmitLoopSubscription["pa.RecordBatch"]):
    """Reads the pieces in order; one ``next`` of a ``SplitReader`` per requested batch.

    ``_index`` is the piece being read and ``_offset`` the next record of it (from the
    piece's start); the end is known from the plan, so nothing is read ahead to find it.
    """

    __slots__ = ("_batches", "_error", "_index", "_offset", "_pieces", "_reader", "_start")

    def __init__(
        self,
        subscriber: Subscriber[pa.RecordBatch],
        pieces: tuple[PartitionPiece, ...],
        start: int,
        reader: SplitReader,
    ) -> None:
        super().__init__(subscriber, batch_size=MAX_DEMAND)
        self._pieces = pieces
        self._start = start
        self._reader = reader
        self._index = 0
        self._offset = 0
        self._batches: Iterator[pa.RecordBatch] | None = None
        self._error: Exception | None = None

    def _open(self) -> None:
        skip = self._start
        while self._index < len(self._pieces) and skip >= self._pieces[self._index].records:
            skip -= self._pieces[self._index].records
            self._index += 1
        self._offset = skip

    def _next_batch(self) -> pa.RecordBatch | None:
        """The next batch of the current piece (moving to the next piece after its last)."""
        piece = self._pieces[self._index]
        if self._batches is None:
            self._batches = self._reader.batches(
                piece.split, piece.start + self._offset, piece.stop
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
            self._offset = 0
        return batch if batch.num_rows else None

    def _emit(self, subscriber: Subscriber[pa.RecordBatch], count: int) -> int:
        emitted = 0
        election = self._election
        while emitted < count and not self._exhausted() and not election.cancelled:
            try:
                batch = self._next_batch()
            except Exception as exc:  # a file gone, changed or unreadable: Rule 1.4
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
        return self._error is not None or self._index >= len(self._pieces)

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
