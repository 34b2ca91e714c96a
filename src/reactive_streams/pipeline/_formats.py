"""Everything the pipeline knows about each input format, in one place.

Per format (CSV, JSON Lines, Parquet, and the in-memory table of the default input):

* ``FORMATS``: the file extensions it reads;
* ``header(item)``: the column names and whether the file has a record, read cheaply
  (for the checks made before Spark starts);
* ``sample(item, columns)``: the records the schema is inferred from;
* ``open_reader(item, columns, start=...)``: a ``ChunkReader`` over the records, from
  record ``start`` on, in bounded chunks (``RawChunk``).

A reader is deterministic: opened twice at the same ``start``, it returns the same
records with the same positions. ``start`` counts records as the reader numbers them:
data lines after the header for CSV (``line - 2``), lines for JSON Lines (``line - 1``),
rows for Parquet and tables. This is what a reader running elsewhere (on a Spark
executor, from a split and an offset) needs.

Records are not converted here (``_validate`` does that): a CSV chunk holds strings, a
JSON Lines chunk the decoded objects, a Parquet chunk the file's own types. A record that
cannot be parsed comes back as a dead letter in the chunk, with its file, line and
reason, and the reader goes on at the next line:

* a line that is not valid text in the file's ``encoding`` (``--encoding``, UTF-8 by
  default);
* a CSV line with the wrong number of fields, or with an unbalanced quote (records never
  span lines: a quote left open ends at the end of its line, it never swallows the rest
  of the file);
* a record longer than ``MAX_RECORD_BYTES`` (a file with no line breaks, say): it is
  refused without being held in memory whole, and reading goes on after it; a long but
  valid record under that bound goes through;
* a JSON line that does not parse or is not an object.

Read-ahead: a CSV reader holds one block of ``CSV_BLOCK_BYTES`` (plus the partial line at
its end, at most ``MAX_RECORD_BYTES``); a Parquet reader one batch of at most the rows
asked for; a JSON Lines reader one line.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Literal, Protocol

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
import pyarrow.csv as pa_csv  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from .._arrow_literals import bool_scalar, string_scalar
from ._dead_letter import DeadLetter

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

__all__ = [
    "CSV_BLOCK_BYTES",
    "DEFAULT_ENCODING",
    "FORMATS",
    "MAX_RECORD_BYTES",
    "SAMPLE_BYTES",
    "ChunkReader",
    "Format",
    "FormatError",
    "InputFile",
    "RawChunk",
    "TableReader",
    "header",
    "open_reader",
    "sample",
]

Format = Literal["csv", "jsonl", "parquet"]

FORMATS: dict[str, Format] = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
"""File extensions the pipeline reads, and the format of each."""

CSV_BLOCK_BYTES = 1 << 20
"""Bytes a CSV reader reads at a time (about 10k rows): its read-ahead bound."""

MAX_RECORD_BYTES = 16 << 20
"""The longest record (line) read; a longer one is a dead letter, never held whole."""

SAMPLE_BYTES = 4 << 20
"""How much of the first CSV or JSON Lines file the schema is inferred from."""

DEFAULT_ENCODING = "utf-8"
"""The text encoding of CSV and JSON Lines files unless ``--encoding`` says otherwise."""

_RAW_PREVIEW = 200
"""Characters of a refused over-long or undecodable line kept in its dead letter."""

_EMPTY_TEXT, _TRUE = string_scalar(""), bool_scalar(True)  # no pandas import (_arrow_literals)


class FormatError(ValueError):
    """A file cannot be read as its format at all (not text, no header): one line."""


@dataclass(frozen=True, slots=True)
class InputFile:
    """One input file.

    Attributes:
        path: the file.
        format: ``"csv"``, ``"jsonl"`` or ``"parquet"``.
        encoding: the text encoding of a CSV or JSON Lines file (any codec Python knows).
    """

    path: Path
    format: Format
    encoding: str = DEFAULT_ENCODING


@dataclass(slots=True, kw_only=True)
class RawChunk:
    """Records as read, before validation (picklable: plain data and Arrow tables).

    Attributes:
        source: the file (or table) they came from.
        position_kind: ``"line"`` (1-based physical line) or ``"row"`` (0-based row).
        positions: one position per record of ``table`` or ``records``.
        table: the records as columns (CSV: all strings; Parquet and tables: typed), or
            ``None`` for JSON Lines.
        records: the decoded JSON objects (JSON Lines only).
        rejects: records that could not be parsed at all.
        consumed: records of the input this chunk covers, parsed or not (what a reader
            opened at ``start`` has consumed after it is ``start + consumed``).
    """

    source: str
    position_kind: Literal["line", "row"]
    positions: list[int]
    table: pa.Table | None = None
    records: list[dict[str, object]] | None = None
    rejects: list[DeadLetter] = field(default_factory=list)
    consumed: int = 0

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


def _preview(raw: bytes, encoding: str) -> str:
    text = raw[: _RAW_PREVIEW * 4].decode(encoding, errors="replace").rstrip("\r\n")
    return text[:_RAW_PREVIEW] + ("…" if len(raw) > _RAW_PREVIEW else "")


_RAW_LIMIT = 1 << 16
"""Characters of a refused record kept in its dead letter, at most."""


def _cut(text: str) -> str:
    return text if len(text) <= _RAW_LIMIT else text[:_RAW_LIMIT] + "…"


def _raw_text(raw: bytes) -> str:
    """A refused line as text for its dead letter (cut at ``_RAW_LIMIT`` characters)."""
    return _cut(raw.decode("utf-8", errors="replace").rstrip("\r\n"))


def _decode_error(error: UnicodeDecodeError, encoding: str) -> str:
    byte = error.object[error.start : error.start + 1].hex()
    hint = "; pass --encoding if the file is not UTF-8" if _is_utf8(encoding) else ""
    return f"not valid {encoding} text (byte 0x{byte} at offset {error.start} of the line){hint}"


def _is_utf8(encoding: str) -> bool:
    return codecs.lookup(encoding).name in ("utf-8", "utf-8-sig")


class _Lines:
    """A binary file as lines, each at most ``MAX_RECORD_BYTES``: longer ones are cut out.

    ``next_block`` returns complete lines (ending in a newline, except at the end of the
    file) of about ``CSV_BLOCK_BYTES`` in one ``bytes``; ``next_line`` one line;
    ``skip_lines`` passes over lines without returning them. A line longer than the bound
    is returned as ``_Overlong`` (its first bytes and its length), after the reader skipped
    to the next newline.

    The bytes read and not yet returned are ``_carry[_pos:]``: taking a line moves the
    cursor instead of copying the rest of the block, so a line costs its own length (a
    copy of the rest per line made reading a block of short lines quadratic: 16 us a line
    for the flights as CSV, against well under 1 us now).
    """

    def __init__(self, handle: IO[bytes], max_record: int = MAX_RECORD_BYTES) -> None:
        self._handle = handle
        self._max = max_record
        self._carry = b""
        self._pos = 0
        self._eof = False

    def _fill(self, size: int) -> None:
        """Append up to ``size`` more bytes (dropping what was taken); at the end, ``_eof``."""
        piece = self._handle.read(size)
        if piece:
            self._carry = self._carry[self._pos :] + piece
            self._pos = 0
        else:
            self._eof = True

    def _take_rest(self) -> bytes:
        rest = self._carry[self._pos :]
        self._carry, self._pos = b"", 0
        return rest

    def _skip_line(self) -> int:
        """Skip to just after the next newline; the bytes skipped."""
        skipped = 0
        while True:
            piece = self._handle.read(CSV_BLOCK_BYTES)
            if not piece:
                self._eof = True
                self._carry, self._pos = b"", 0
                return skipped
            end = piece.find(b"\n")
            if end >= 0:
                self._carry, self._pos = piece, end + 1
                return skipped + end + 1
            skipped += len(piece)

    def _overlong_at(self, end: int) -> bool:
        """Whether the line at the cursor (its newline at ``end``, or none yet) is too long."""
        if end < 0:
            return len(self._carry) - self._pos > self._max
        return end - self._pos >= self._max

    def _cut_overlong(self, end: int) -> _Overlong:
        """Take the line at the cursor, longer than the bound, out of the carry (and file)."""
        head = self._carry[self._pos : self._pos + _RAW_PREVIEW * 4]
        if end < 0:
            end = self._carry.find(b"\n", self._pos)
        if end >= 0:
            length = end + 1 - self._pos
            self._pos = end + 1
            return _Overlong(head, length)
        length = len(self._take_rest())
        return _Overlong(head, length + self._skip_line())

    def next_block(self, size: int = CSV_BLOCK_BYTES) -> bytes | _Overlong | None:
        """About ``size`` bytes of whole lines, one over-long line, or ``None`` at the end."""
        while True:
            if len(self._carry) - self._pos >= size or self._eof:
                first = self._carry.find(b"\n", self._pos, self._pos + self._max + 1)
                if self._overlong_at(first):
                    return self._cut_overlong(first)
                end = self._carry.rfind(b"\n", self._pos)
                if end >= 0:
                    block = self._carry[self._pos : end + 1]
                    self._pos = end + 1
                    return block
                if self._eof:  # the last line, with no newline at its end
                    return self._take_rest() or None
            self._fill(size)

    def next_line(self) -> bytes | _Overlong | None:
        """One line, one over-long line, or ``None`` at the end of the file."""
        while True:
            end = self._carry.find(b"\n", self._pos, self._pos + self._max + 1)
            if self._overlong_at(end):
                return self._cut_overlong(end)
            if end >= 0:
                line = self._carry[self._pos : end + 1]
                self._pos = end + 1
                return line
            if self._eof:
                return self._take_rest() or None
            self._fill(CSV_BLOCK_BYTES)

    def skip_lines(self, count: int) -> int:
        """Pass over ``count`` lines (fewer at the end of the file); how many were passed.

        Counts as ``next_line`` does (an over-long line is one line; so is a last line
        without a newline), but finds the newlines block by block and never holds more
        than a block.
        """
        skipped = 0
        while skipped < count:
            found = self._carry.count(b"\n", self._pos)
            if found >= count - skipped:
                for _ in range(count - skipped):
                    self._pos = self._carry.find(b"\n", self._pos) + 1
                return count
            skipped += found
            # Every line of the carry is passed; a partial last line ends in a later block.
            partial = self._carry.rfind(b"\n", self._pos) + 1
            partial = max(partial, self._pos) < len(self._carry)
            piece = b"" if self._eof else self._handle.read(CSV_BLOCK_BYTES)
            if not piece:
                self._eof = True
                self._carry, self._pos = b"", 0
                return skipped + (1 if partial else 0)
            self._carry, self._pos = piece, 0
        return skipped


@dataclass(frozen=True, slots=True)
class _Overlong:
    """A line longer than ``MAX_RECORD_BYTES``: its first bytes and its length."""

    head: bytes
    length: int


def _overlong_letter(source: str, line: int, item: _Overlong, encoding: str) -> DeadLetter:
    return DeadLetter(
        source=source,
        position=line,
        position_kind="line",
        reason=f"record too long: {item.length:,} bytes (at most {MAX_RECORD_BYTES:,})",
        raw=_preview(item.head, encoding),
    )


# -- CSV ---------------------------------------------------------------------------------


def _csv_header(item: InputFile, lines: _Lines) -> list[str] | None:
    """The header's column names, or ``None`` for an empty file.

    Raises:
        FormatError: the first line is not text in the file's encoding, or too long.
    """
    first = lines.next_line()
    if first is None:
        return None
    if isinstance(first, _Overlong):
        raise FormatError(
            f"{item.path} does not look like a CSV file: its first line is "
            f"{first.length:,} bytes long"
        )
    encoding = "utf-8-sig" if _is_utf8(item.encoding) else item.encoding
    try:
        text = first.decode(encoding)
    except UnicodeDecodeError:
        hint = " (pass --encoding if it is text in another encoding)"
        raise FormatError(
            f"{item.path} does not look like a CSV file: its header is not {item.encoding} "
            f"text{hint if _is_utf8(item.encoding) else ''}"
        ) from None
    if "\x00" in text:
        raise FormatError(f"{item.path} does not look like a CSV file: it holds binary data")
    text = text.rstrip("\r\n")
    if "\r" in text:
        raise FormatError(
            f"{item.path}: lines end in a carriage return alone (old Mac style); convert "
            "the file to \\n or \\r\\n line ends"
        )
    if not text.strip():
        return []
    try:
        return next(csv.reader([text]))
    except csv.Error as exc:
        raise FormatError(f"{item.path}: the CSV header cannot be read: {exc}") from None


class CsvReader:
    """Reads a CSV file in blocks of whole lines, every column as text.

    Each line is one record (a quoted value never spans lines). Lines are checked before
    pyarrow parses a block: a line that does not decode, an over-long line or one with an
    unbalanced quote becomes a dead letter and is left out, so it cannot affect the lines
    after it. Positions are physical line numbers (the header is line 1).

    Args:
        item: the file.
        columns: the stream's column names (the first file's), in order.
        start: data records (lines after the header) to skip first.

    Raises:
        OSError: the file cannot be opened.
        FormatError: the header cannot be read.
    """

    def __init__(self, item: InputFile, columns: list[str], *, start: int = 0) -> None:
        self._name = str(item.path)
        self._columns = columns
        self._encoding = item.encoding
        self._utf8 = _is_utf8(item.encoding)
        self._file = item.path.open("rb")
        try:
            self._lines = _Lines(self._file)
            _csv_header(item, self._lines)
            self._next_line = 2
            self._pending: list[tuple[pa.Table, list[int]]] = []
            self._offset = 0  # into the first pending table
            self._rejects: list[DeadLetter] = []
            self._consumed = 0
            self.bytes_read = 0
            self._skip(start)
        except BaseException:
            self._file.close()
            raise

    def _skip(self, count: int) -> None:
        self._next_line += self._lines.skip_lines(count)

    def _letter(self, line: int, reason: str, raw: object) -> DeadLetter:
        return DeadLetter(
            source=self._name, position=line, position_kind="line", reason=reason, raw=raw
        )

    def _check_lines(self, block: bytes, first: int) -> tuple[bytes, list[int]]:
        """Drop the lines that cannot be parsed (dead letters); the rest and their numbers."""
        kept: list[bytes] = []
        numbers: list[int] = []
        for number, line in enumerate(block.splitlines(keepends=True), start=first):
            try:
                text = line.decode(self._encoding)
            except UnicodeDecodeError as exc:
                reason = _decode_error(exc, self._encoding)
                self._rejects.append(self._letter(number, reason, _raw_text(line)))
                continue
            stripped = text.rstrip("\r\n")
            if not stripped.strip(" \t,"):
                self._rejects.append(
                    self._letter(number, "empty record (a blank line, or every field empty)", "")
                )
                continue
            if text.count('"') % 2 and _unbalanced(stripped, len(self._columns)):
                reason = "unbalanced quote: a quoted value is not closed on its line"
                self._rejects.append(self._letter(number, reason, _cut(stripped)))
                continue
            kept.append(line if self._utf8 else text.encode("utf-8"))
            numbers.append(number)
        if kept and not kept[-1].endswith(b"\n"):
            kept[-1] += b"\n"
        return b"".join(kept), numbers

    def _parse(self, block: bytes, first: int) -> None:
        """Parse one block of whole lines starting at line ``first`` into ``_pending``."""
        # The fast path (nearly every block): UTF-8 text, no quote, "\n" or "\r\n" line
        # ends: pyarrow's rows are the block's lines, in order (a blank line is a row
        # of empty fields, refused by _drop_empty). Otherwise each line is checked first.
        clean = (
            self._utf8
            and b'"' not in block
            and block.count(b"\r") == block.count(b"\r\n")
            and _decodes(block)
        )
        if clean:
            lines = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
            numbers = list(range(first, first + lines))
        else:
            block, numbers = self._check_lines(block, first)
        if not numbers:
            return
        invalid: set[int] = set()

        def on_invalid(row: pa_csv.InvalidRow) -> str:
            index = -1 if row.number is None else int(row.number) - 1
            line = numbers[index] if 0 <= index < len(numbers) else -1
            invalid.add(line)
            self._rejects.append(
                self._letter(
                    line,
                    f"expected {row.expected_columns} fields, found {row.actual_columns}",
                    _cut(row.text),
                )
            )
            return "skip"

        table = pa_csv.read_csv(
            io.BytesIO(block),
            read_options=pa_csv.ReadOptions(
                column_names=self._columns, use_threads=False, block_size=len(block) + 1
            ),
            parse_options=pa_csv.ParseOptions(
                invalid_row_handler=on_invalid, ignore_empty_lines=False
            ),
            convert_options=pa_csv.ConvertOptions(
                column_types=dict.fromkeys(self._columns, pa.string()),
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                auto_dict_encode=False,
            ),
        )
        if invalid:
            numbers = [number for number in numbers if number not in invalid]
        table, numbers = self._drop_empty(table, numbers)
        if table.num_rows:
            self._pending.append((table, numbers))

    def _drop_empty(self, table: pa.Table, numbers: list[int]) -> tuple[pa.Table, list[int]]:
        """Records whose fields are all empty carry nothing: dead letters, never dropped."""
        empty = None
        for column in table.columns:
            is_empty = pc.fill_null(pc.equal(column, _EMPTY_TEXT), fill_value=_TRUE)
            empty = is_empty if empty is None else pc.and_(empty, is_empty)
        if empty is None or not pc.any(empty).as_py():
            return table, numbers
        flags = empty.to_pylist()
        for flag, number in zip(flags, numbers, strict=True):
            if flag:
                self._rejects.append(
                    self._letter(number, "empty record (a blank line, or every field empty)", "")
                )
        kept = [number for flag, number in zip(flags, numbers, strict=True) if not flag]
        return table.filter(pc.invert(empty)), kept

    def _fill(self) -> bool:
        """Parse the next block; ``False`` at the end of the file."""
        item = self._lines.next_block()
        if item is None:
            return False
        if isinstance(item, _Overlong):
            self._rejects.append(_overlong_letter(self._name, self._next_line, item, "utf-8"))
            self.bytes_read += item.length
            self._next_line += 1
            self._consumed += 1
            return True
        first = self._next_line
        self.bytes_read += len(item)
        lines = (
            len(item.splitlines())
            if b"\r" in item
            else item.count(b"\n") + (0 if item.endswith(b"\n") else 1)
        )
        self._next_line += lines
        self._consumed += lines
        self._parse(item, first)
        return True

    def read(self, max_rows: int) -> RawChunk | None:
        """The next at most ``max_rows`` records, with the malformed lines met on the way."""
        while not self._pending:
            if not self._fill():
                break
        if not self._pending:
            if not self._rejects:
                return None
            rejects, self._rejects = self._rejects, []
            return RawChunk(
                source=self._name,
                position_kind="line",
                positions=[],
                rejects=rejects,
                consumed=len(rejects),
            )
        table, numbers = self._pending[0]
        start = self._offset
        piece = table.slice(start, max_rows)
        positions = numbers[start : start + piece.num_rows]
        self._offset += piece.num_rows
        if self._offset >= table.num_rows:
            self._pending.pop(0)
            self._offset = 0
        end = positions[-1] + 1
        rejects = [letter for letter in self._rejects if letter.position < end]
        self._rejects = [letter for letter in self._rejects if letter.position >= end]
        return RawChunk(
            source=self._name,
            position_kind="line",
            positions=positions,
            table=piece,
            rejects=rejects,
            consumed=len(positions) + len(rejects),
        )

    def close(self) -> None:
        """Close the file."""
        self._file.close()


def _decodes(block: bytes) -> bool:
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _unbalanced(line: str, columns: int) -> bool:
    """Whether a line with an odd number of quotes leaves a quoted value open.

    A quote inside an unquoted value (``5" pipe``) is literal, and such a line is fine;
    only a value that starts with a quote and never closes it is refused.
    """
    try:
        fields = next(csv.reader([line], strict=True))
    except csv.Error:
        return True
    return len(fields) != columns and line.count('"') % 2 == 1


# -- JSON Lines --------------------------------------------------------------------------


class JsonLinesReader:
    """Reads a JSON Lines file line by line; positions are physical line numbers.

    Blank lines are skipped (they are not records). A line that does not decode, is not
    valid JSON, is not a JSON object or is longer than ``MAX_RECORD_BYTES`` becomes a dead
    letter.

    Args:
        item: the file.
        start: lines to skip first.
    """

    def __init__(self, item: InputFile, *, start: int = 0) -> None:
        self._name = str(item.path)
        self._encoding = item.encoding
        self._file: IO[bytes] = item.path.open("rb")
        self._lines = _Lines(self._file)
        self._line = self._lines.skip_lines(start)

    def read(self, max_rows: int) -> RawChunk | None:
        """The next at most ``max_rows`` records (blank lines not counted)."""
        records: list[dict[str, object]] = []
        positions: list[int] = []
        rejects: list[DeadLetter] = []
        consumed = 0
        while len(records) + len(rejects) < max_rows:
            raw = self._lines.next_line()
            if raw is None:
                break
            self._line += 1
            consumed += 1
            if isinstance(raw, _Overlong):
                rejects.append(_overlong_letter(self._name, self._line, raw, "utf-8"))
                continue
            if not raw.strip():
                continue
            reason: str | None = None
            try:
                text = raw.decode(self._encoding)
            except UnicodeDecodeError as exc:
                reason = _decode_error(exc, self._encoding)
            else:
                try:
                    record = json.loads(text)
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
                    raw=_raw_text(raw),
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
            consumed=consumed,
        )

    def close(self) -> None:
        """Close the file."""
        self._file.close()


def _json_records(item: InputFile, limit_bytes: int) -> Iterator[dict[str, object] | None]:
    """The file's JSON objects up to ``limit_bytes``; ``None`` for a line that is not one."""
    size = 0
    with item.path.open("rb") as handle:
        lines = _Lines(handle)
        while size < limit_bytes and (raw := lines.next_line()) is not None:
            if isinstance(raw, _Overlong):
                size += raw.length
                yield None
                continue
            size += len(raw)
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode(item.encoding))
            except ValueError:  # UnicodeDecodeError included
                yield None
                continue
            yield record if isinstance(record, dict) else None


def _looks_like_a_json_document(item: InputFile) -> bool:
    with item.path.open("rb") as handle:
        start = handle.read(4096).lstrip()
    return start.startswith((b"[", b"{")) and not start.split(b"\n", 1)[0].rstrip().endswith(b"}")


# -- Parquet and tables ------------------------------------------------------------------


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
    """Reads an in-memory ``pyarrow.Table`` (the default input) in slices; positions are rows.

    Args:
        table: the table.
        name: how dead letters name it.
        start: rows to skip first.
    """

    def __init__(self, table: pa.Table, name: str, *, start: int = 0) -> None:
        self._table = table
        self._name = name
        self._offset = start

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
            consumed=piece.num_rows,
        )

    def close(self) -> None:
        """Nothing to release."""


class ParquetReader:
    """Reads a Parquet file batch by batch; positions are rows (0-based).

    Args:
        item: the file.
        start: rows to skip first (whole row groups before it are not read at all).
        columns: the columns to read, by name (the others are not decoded at all);
            ``None``: every column.
    """

    def __init__(
        self, item: InputFile, *, start: int = 0, columns: Sequence[str] | None = None
    ) -> None:
        self._name = str(item.path)
        self._file = pq.ParquetFile(item.path)
        self._columns = None if columns is None else list(columns)
        self._slicer: _BatchSlicer | None = None
        self._start = start
        self._offset = start

    def read(self, max_rows: int) -> RawChunk | None:
        """The next at most ``max_rows`` rows."""
        if self._slicer is None:
            self._slicer = self._open(max(max_rows, 1))
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
            consumed=batch.num_rows,
        )

    def _open(self, batch_size: int) -> _BatchSlicer:
        metadata = self._file.metadata
        first_group, skip = 0, self._start
        while first_group < metadata.num_row_groups:
            rows = metadata.row_group(first_group).num_rows
            if skip < rows:
                break
            skip -= rows
            first_group += 1
        groups = list(range(first_group, metadata.num_row_groups))
        batches = self._file.iter_batches(
            batch_size=batch_size, row_groups=groups, columns=self._columns
        )
        slicer = _BatchSlicer(batches)
        while skip > 0:  # the rest of ``start`` lies inside the first row group read
            skipped = slicer.take(skip)
            if skipped is None:
                break
            skip -= skipped.num_rows
        return slicer

    def close(self) -> None:
        """Close the file."""
        self._file.close()


# -- per format ----------------------------------------------------------------------------


def header(item: InputFile) -> tuple[list[str], bool | None]:
    """A file's column names and whether it has a record (``None``: not known yet).

    Cheap: Parquet's footer, a CSV's first two lines, a JSON Lines file's first object.

    Raises:
        OSError: the file cannot be read.
        FormatError: it cannot be read as its format.
        pyarrow.ArrowException: a Parquet file is not valid.
    """
    if item.format == "parquet":
        metadata = pq.read_metadata(item.path)
        return list(metadata.schema.to_arrow_schema().names), metadata.num_rows > 0
    if item.format == "csv":
        with item.path.open("rb") as handle:
            lines = _Lines(handle)
            names = _csv_header(item, lines)
            if names is None:
                return [], False
            while (line := lines.next_line()) is not None:
                if isinstance(line, _Overlong) or line.strip():
                    return names, True
            return names, False
    for record in _json_records(item, SAMPLE_BYTES):
        return ([], None) if record is None else (list(record), True)
    return [], False


def sample(
    item: InputFile, columns: list[str] | None = None
) -> tuple[list[str], list[dict[str, object]]]:
    """The columns and up to ``SAMPLE_BYTES`` of records of a CSV or JSON Lines file.

    CSV values are strings; malformed records are left out (they become dead letters when
    the file is read).

    Raises:
        FormatError: a JSON Lines file has no object in that range (the message says
            when the file looks like one JSON document instead of JSON Lines), or a CSV
            file cannot be read as CSV.
    """
    if item.format == "csv":
        names, _ = header(item)
        reader = CsvReader(item, names)
        records: list[dict[str, object]] = []
        try:
            while (chunk := reader.read(10_000)) is not None:
                if chunk.table is not None:
                    records.extend(chunk.table.to_pylist())
                if reader.bytes_read >= SAMPLE_BYTES:
                    break
        finally:
            reader.close()
        return names, records
    found = [record for record in _json_records(item, SAMPLE_BYTES) if record is not None]
    if not found:
        hint = ""
        if _looks_like_a_json_document(item):
            hint = (
                " (it looks like one JSON document, e.g. a pretty-printed array; the pipeline"
                " reads JSON Lines: one object per line, e.g. convert it with jq -c '.[]')"
            )
        raise FormatError(f"no JSON object in {item.path} to infer the schema from{hint}")
    return list(found[0]), found  # the first record's fields are the columns


def open_reader(
    item: InputFile,
    columns: list[str],
    *,
    start: int = 0,
    parquet_columns: Sequence[str] | None = None,
) -> ChunkReader:
    """Open the reader for ``item``'s format at record ``start``.

    Args:
        item: the file.
        columns: the stream's column names (the first file's).
        start: records to skip first, as the reader counts them (see the module doc).
        parquet_columns: for a Parquet file, the only columns to read (``None``: all);
            ignored for text formats, whose records are parsed whole.

    Raises:
        OSError: the file cannot be opened.
        FormatError: the file cannot be read as its format.
        pyarrow.ArrowException: a Parquet file is not valid.
    """
    if item.format == "csv":
        return CsvReader(item, columns, start=start)
    if item.format == "parquet":
        return ParquetReader(item, start=start, columns=parquet_columns)
    return JsonLinesReader(item, start=start)
