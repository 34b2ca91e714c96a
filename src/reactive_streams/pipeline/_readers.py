"""Reading the input in bounded chunks: one reader per format, all with the same shape.

``reader.read(max_rows)`` returns the next chunk of at most ``max_rows`` records, or
``None`` at the end. Nothing is read before it is asked for, except what the format reads
as one unit: a CSV block (``block_size`` bytes, about 10k rows by default) or a Parquet
batch (``max_rows`` rows). That is the read-ahead bound of the source.

Records are not converted here: a CSV chunk holds strings, a JSON Lines chunk holds the
decoded objects, a Parquet chunk holds the file's own types. Records that cannot even be
parsed (a CSV line with the wrong number of fields, a line that is not JSON) come back as
dead letters in the chunk, with their line numbers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Literal, Protocol

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
import pyarrow.csv as pa_csv  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from ._dead_letter import DeadLetter

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._inputs import InputFile

__all__ = ["ChunkReader", "RawChunk", "open_reader", "TableReader"]

CSV_BLOCK_BYTES = 1 << 20
"""The CSV block size: the most the CSV reader reads ahead of demand (about 10k rows)."""


@dataclass(slots=True, kw_only=True)
class RawChunk:
    """Records as read, before validation.

    Attributes:
        source: the file (or table) they came from.
        position_kind: ``"line"`` (1-based physical line) or ``"row"`` (0-based row).
        positions: one position per record of ``table`` or ``records``.
        table: the records as columns (CSV: all strings; Parquet and tables: typed), or
            ``None`` for JSON Lines.
        records: the decoded JSON objects (JSON Lines only).
        rejects: records that could not be parsed at all.
    """

    source: str
    position_kind: Literal["line", "row"]
    positions: list[int]
    table: pa.Table | None = None
    records: list[dict[str, object]] | None = None
    rejects: list[DeadLetter] = field(default_factory=list)

    @property
    def size(self) -> int:
        """Records read, parsed or not."""
        return len(self.positions) + len(self.rejects)


class ChunkReader(Protocol):
    """Reads one input in chunks."""

    def read(self, max_rows: int) -> RawChunk | None:
        """The next at most ``max_rows`` records, or ``None`` when the input is exhausted."""
        ...

    def close(self) -> None:
        """Release the file. Idempotent."""
        ...


class _BatchSlicer:
    """Cuts a stream of record batches into slices of at most ``max_rows`` rows."""

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self._batches = batches
        self._current: pa.RecordBatch | None = None
        self._offset = 0

    def take(self, max_rows: int) -> pa.RecordBatch | None:
        while self._current is None or self._offset >= self._current.num_rows:
            try:
                self._current = next(self._batches)
            except StopIteration:
                self._current = None
                return None
            self._offset = 0
        rows = min(max_rows, self._current.num_rows - self._offset)
        batch = self._current.slice(self._offset, rows)
        self._offset += rows
        return batch


class TableReader:
    """Reads an in-memory ``pyarrow.Table`` (the default input) in slices; positions are rows."""

    def __init__(self, table: pa.Table, name: str) -> None:
        self._table = table
        self._name = name
        self._offset = 0

    def read(self, max_rows: int) -> RawChunk | None:
        """The next at most ``max_rows`` rows (a zero-copy slice)."""
        if self._offset >= self._table.num_rows:
            return None
        start = self._offset
        piece = self._table.slice(start, max_rows)
        self._offset += piece.num_rows
        return RawChunk(
            source=self._name,
            position_kind="row",
            positions=list(range(start, start + piece.num_rows)),
            table=piece,
        )

    def close(self) -> None:
        """Nothing to release."""


class ParquetReader:
    """Reads a Parquet file batch by batch (``iter_batches``); positions are rows."""

    def __init__(self, item: InputFile) -> None:
        self._name = str(item.path)
        self._file = pq.ParquetFile(item.path)
        self._batches: Iterator[pa.RecordBatch] | None = None
        self._batch_rows = 0
        self._slicer: _BatchSlicer | None = None
        self._offset = 0

    def read(self, max_rows: int) -> RawChunk | None:
        """The next at most ``max_rows`` rows."""
        if self._slicer is None:
            self._slicer = _BatchSlicer(self._file.iter_batches(batch_size=max(max_rows, 1)))
        batch = self._slicer.take(max_rows)
        if batch is None:
            return None
        start = self._offset
        self._offset += batch.num_rows
        return RawChunk(
            source=self._name,
            position_kind="row",
            positions=list(range(start, start + batch.num_rows)),
            table=pa.Table.from_batches([batch]),
        )

    def close(self) -> None:
        """Close the file."""
        self._file.close()


class CsvReader:
    """Streams a CSV file with ``pyarrow.csv.open_csv``, every column as text.

    Positions are physical line numbers (the header is line 1). A line with the wrong
    number of fields becomes a dead letter (through pyarrow's invalid-row handler, which
    knows its line number); the line numbers of the other records are the lines that are
    left, in order, so a record's line is exact as long as no quoted value spans lines
    (pyarrow's default, ``newlines_in_values=False``, refuses those anyway).
    """

    def __init__(self, item: InputFile, columns: list[str]) -> None:
        self._name = str(item.path)
        self._columns = columns
        self._invalid: set[int] = set()
        self._pending: list[DeadLetter] = []
        self._next_line = 2
        self._reader = pa_csv.open_csv(
            item.path,
            read_options=pa_csv.ReadOptions(use_threads=False, block_size=CSV_BLOCK_BYTES),
            parse_options=pa_csv.ParseOptions(
                invalid_row_handler=self._on_invalid_row, ignore_empty_lines=False
            ),
            convert_options=pa_csv.ConvertOptions(
                column_types={name: pa.string() for name in columns},
                strings_can_be_null=False,
                auto_dict_encode=False,
            ),
        )
        self._slicer = _BatchSlicer(iter(self._reader))

    def _on_invalid_row(self, row: pa_csv.InvalidRow) -> str:
        line = -1 if row.number is None else int(row.number)
        self._invalid.add(line)
        self._pending.append(
            DeadLetter(
                source=self._name,
                position=line,
                position_kind="line",
                reason=f"expected {row.expected_columns} fields, found {row.actual_columns}",
                raw=row.text,
            )
        )
        return "skip"

    def read(self, max_rows: int) -> RawChunk | None:
        """The next at most ``max_rows`` records, with the malformed lines met on the way."""
        batch = self._slicer.take(max_rows)
        if batch is None:
            if not self._pending:
                return None
            rejects, self._pending = self._pending, []
            return RawChunk(
                source=self._name, position_kind="line", positions=[], table=None, rejects=rejects
            )
        positions = []
        line = self._next_line
        for _ in range(batch.num_rows):
            while line in self._invalid:
                self._invalid.discard(line)
                line += 1
            positions.append(line)
            line += 1
        self._next_line = line
        # Dead letters found while parsing lines up to here belong with this chunk.
        rejects = [letter for letter in self._pending if letter.position < line]
        self._pending = [letter for letter in self._pending if letter.position >= line]
        table = pa.Table.from_batches([batch])
        # pyarrow reads a blank line as a record whose fields are all empty (as ",,"):
        # such a record carries nothing, but it is reported, never dropped silently.
        empty = None
        for column in table.columns:
            is_empty = pc.fill_null(pc.equal(column, ""), fill_value=True)
            empty = is_empty if empty is None else pc.and_(empty, is_empty)
        if empty is not None and pc.any(empty).as_py():
            flags = empty.to_pylist()
            for flag, position in zip(flags, positions, strict=True):
                if flag:
                    rejects.append(
                        DeadLetter(
                            source=self._name,
                            position=position,
                            position_kind="line",
                            reason="empty record (a blank line, or every field empty)",
                            raw="",
                        )
                    )
            positions = [pos for flag, pos in zip(flags, positions, strict=True) if not flag]
            table = table.filter(pc.invert(empty))
        return RawChunk(
            source=self._name,
            position_kind="line",
            positions=positions,
            table=table,
            rejects=rejects,
        )

    def close(self) -> None:
        """Close the file."""
        self._reader.close()


class JsonLinesReader:
    """Reads a JSON Lines file line by line; positions are physical line numbers.

    Blank lines are skipped (they are not records). A line that is not valid JSON, or not
    a JSON object, becomes a dead letter.
    """

    def __init__(self, item: InputFile) -> None:
        self._name = str(item.path)
        self._file: IO[bytes] = item.path.open("rb")
        self._line = 0

    def read(self, max_rows: int) -> RawChunk | None:
        """The next at most ``max_rows`` records (blank lines not counted)."""
        records: list[dict[str, object]] = []
        positions: list[int] = []
        rejects: list[DeadLetter] = []
        while len(records) + len(rejects) < max_rows:
            raw = self._file.readline()
            if not raw:
                break
            self._line += 1
            if not raw.strip():
                continue
            reason: str | None = None
            try:
                record = json.loads(raw)
            except ValueError as exc:
                reason = f"malformed JSON: {exc}"
            else:
                if isinstance(record, dict):
                    records.append(record)
                    positions.append(self._line)
                    continue
                reason = f"not a JSON object: {type(record).__name__}"
            rejects.append(
                DeadLetter(
                    source=self._name,
                    position=self._line,
                    position_kind="line",
                    reason=reason,
                    raw=raw.decode("utf-8", errors="replace").rstrip("\r\n"),
                )
            )
        if not records and not rejects:
            return None
        return RawChunk(
            source=self._name,
            position_kind="line",
            positions=positions,
            records=records,
            rejects=rejects,
        )

    def close(self) -> None:
        """Close the file."""
        self._file.close()


def open_reader(item: InputFile, columns: list[str]) -> ChunkReader:
    """Open the reader for ``item``'s format.

    Args:
        item: the file.
        columns: the stream's column names (the first file's).

    Raises:
        OSError: the file cannot be opened.
        pyarrow.ArrowException: the file is not valid for its format.
    """
    if item.format == "csv":
        return CsvReader(item, columns)
    if item.format == "parquet":
        return ParquetReader(item)
    return JsonLinesReader(item)
