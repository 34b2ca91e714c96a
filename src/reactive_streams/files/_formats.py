"""Everything the file layer knows about each input format, in one place.

Per format (CSV, JSON Lines, Parquet, and an in-memory table):

* ``FORMATS``: the file extensions read, and the format and CSV dialect of each;
* ``header(item)``: the column names and whether the file has a record, read cheaply;
* ``sample(item)``: the records a schema is inferred from;
* ``open_reader(item, columns, start=..., at=...)``: a ``ChunkReader`` over the records,
  from record ``start`` on, in bounded chunks (``RawChunk``).

A reader is deterministic: opened twice at the same ``start``, it returns the same records
with the same positions. ``start`` counts records as ``_records`` finds them (for CSV, the
records after the header; for JSON Lines, the non-blank lines; for Parquet and tables,
rows), and ``at`` (a ``Checkpoint`` the planner noted) lets a reader seek to a record
boundary instead of scanning from the start: this is what a reader running elsewhere (a
Spark executor, from a split and an offset) needs.

Records are not converted here (``_convert`` does that): a CSV chunk holds strings, a JSON
Lines chunk the decoded objects, a Parquet chunk the file's own types. A record that cannot
be parsed comes back as a dead letter in the chunk, with its file, line and reason, and
the reader goes on with the next record:

* a CSV record with an unbalanced quote, or longer than ``MAX_RECORD_BYTES``
  (``_records`` decides: such a record costs one line);
* a record that is not valid text in the file's ``encoding`` (UTF-8 by default);
* a CSV record with the wrong number of fields;
* a JSON line that does not parse or is not an object.

Read-ahead: a text reader holds one block of ``BLOCK_BYTES`` (plus at most one record of
``MAX_RECORD_BYTES``); a Parquet reader one batch of at most the rows asked for.
"""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import json
import os
import re
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, BinaryIO, Final, Literal, Protocol

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
import pyarrow.csv as pa_csv  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from .._arrow_literals import bool_scalar, string_scalar
from ._dead_letter import DeadLetter, cut_raw, quoted
from ._identity import open_file
from ._records import (
    BLOCK_BYTES,
    MAX_RECORD_BYTES,
    Checkpoint,
    CsvDialect,
    RecordScanner,
    TextBlock,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

__all__ = [
    "COMPRESSIONS",
    "DEFAULT_ENCODING",
    "FORMATS",
    "SAMPLE_BYTES",
    "ChunkReader",
    "Compression",
    "CsvReader",
    "Format",
    "FormatError",
    "InputFile",
    "JsonLinesReader",
    "ParquetReader",
    "RawChunk",
    "TableReader",
    "csv_header",
    "format_of",
    "header",
    "open_reader",
    "read_csv_header",
    "sample",
    "split_records",
]

Format = Literal["csv", "jsonl", "parquet"]

Compression = Literal["gzip", "zstd"]
"""How a CSV or JSON Lines file may be compressed (read through pyarrow's codecs)."""

COMPRESSIONS: dict[str, Compression] = {
    ".gz": "gzip",
    ".gzip": "gzip",
    ".zst": "zstd",
    ".zstd": "zstd",
}
"""Extensions of compressed files, after the format's (``events.csv.gz``)."""

FORMATS: dict[str, Format] = {
    ".csv": "csv",
    ".tsv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
"""File extensions read, and the format of each (``.tsv``: CSV with a tab delimiter)."""

SAMPLE_BYTES = 4 << 20
"""How much of a CSV or JSON Lines file a schema is inferred from."""

DEFAULT_ENCODING = "utf-8"
"""The text encoding of CSV and JSON Lines files unless one is given."""

_RAW_PREVIEW = 200
"""Characters of a refused over-long or undecodable record kept in its dead letter."""

_EMPTY_TEXT, _TRUE = string_scalar(""), bool_scalar(True)  # no pandas import (_arrow_literals)


class FormatError(ValueError):
    """A file cannot be read as its format at all (not text, no header): one line."""


def format_of(path: Path) -> tuple[Format, Compression | None] | None:
    """The format and compression a file's extensions say, or ``None`` for neither.

    >>> from pathlib import Path
    >>> format_of(Path("a.csv.gz")), format_of(Path("b.TSV")), format_of(Path("c.txt"))
    (('csv', 'gzip'), ('csv', None), None)
    """
    suffixes = [suffix.lower() for suffix in path.suffixes]
    compression = COMPRESSIONS.get(suffixes[-1]) if suffixes else None
    if compression is not None:
        suffixes.pop()
    if not suffixes or suffixes[-1] not in FORMATS:
        return None
    return FORMATS[suffixes[-1]], compression


def _is_tsv(path: Path) -> bool:
    suffixes = [suffix.lower() for suffix in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSIONS:
        suffixes.pop()
    return bool(suffixes) and suffixes[-1] == ".tsv"


@dataclass(frozen=True, slots=True)
class InputFile:
    """One input file.

    A compressed file (gzip or zstd) is read through pyarrow's codecs, from its start: it
    cannot be sought in, so a reader opened at a record skips the records before it.

    Attributes:
        path: the file.
        format: ``"csv"``, ``"jsonl"`` or ``"parquet"``.
        encoding: the text encoding of a CSV or JSON Lines file (any codec Python knows
            that writes ASCII as ASCII).
        dialect: how a CSV file separates and quotes its fields.
        compression: how a CSV or JSON Lines file is compressed, or ``None``.
        follow_symlink: whether ``path`` may be read through a symbolic link; ``False``
            (a file a directory listing found as a regular file): it is opened with
            ``O_NOFOLLOW``, so a link put in its place is refused, never read.
    """

    path: Path
    format: Format
    encoding: str = DEFAULT_ENCODING
    dialect: CsvDialect = field(default_factory=CsvDialect)
    compression: Compression | None = None
    follow_symlink: bool = True

    @classmethod
    def of(
        cls,
        path: Path,
        *,
        format: Format | None = None,
        encoding: str = DEFAULT_ENCODING,
        dialect: CsvDialect | None = None,
        delimiter: str | None = None,
        quote: str | None = '"',
        follow_symlink: bool = True,
    ) -> InputFile:
        """``path`` with the format and compression its extensions say.

        ``.tsv`` is tab-delimited CSV; ``.gz`` or ``.zst`` after the format's extension
        (``events.csv.gz``) is a compressed file.

        Args:
            path: the file.
            format: its format; ``None``: its extension says.
            encoding: the text encoding of a CSV or JSON Lines file.
            dialect: the CSV dialect, whole; ``None``: from ``delimiter`` and ``quote``.
            delimiter: the CSV delimiter; ``None``: a tab for ``.tsv``, else a comma.
            quote: the CSV quote character, or ``None`` for none.
            follow_symlink: whether ``path`` may be read through a symbolic link.

        Raises:
            ValueError: the extensions name no format of ``FORMATS`` and none is given,
                or a Parquet file is compressed as a whole.
        """
        found = format_of(path)
        if found is None and format is None:
            raise ValueError(
                f"cannot tell the format of {path} from its extension (expected one of "
                f"{', '.join(sorted(FORMATS))}, optionally followed by "
                f"{', '.join(sorted(COMPRESSIONS))})"
            )
        kind = format or (found[0] if found else "csv")
        compression = found[1] if found else None
        if kind == "parquet" and compression is not None:
            raise ValueError(
                f"{path}: a Parquet file compressed as a whole is not read (Parquet "
                "compresses its own pages): decompress it first"
            )
        if dialect is None:
            default = "\t" if _is_tsv(path) else ","
            dialect = CsvDialect(delimiter=delimiter or default, quote=quote)
        return cls(path, kind, encoding, dialect, compression, follow_symlink)

    @property
    def seekable(self) -> bool:
        """Whether a reader can seek to a byte offset (not in a compressed file)."""
        return self.compression is None

    def open_raw(self) -> tuple[BinaryIO, os.stat_result]:
        """The file's bytes as stored (not decompressed), and the opened descriptor's ``fstat``.

        Opened with ``O_NOFOLLOW`` unless ``follow_symlink``; only a regular file opens.

        Raises:
            FileNotFoundError: the file is not there.
            FileChangedError: a symbolic link is there instead (without
                ``follow_symlink``), or something that is not a regular file.
            OSError: the file cannot be opened.
        """
        fd, status = open_file(self.path, follow_symlink=self.follow_symlink)
        return os.fdopen(fd, "rb"), status

    def open(self, raw: BinaryIO | None = None) -> IO[bytes]:
        """The file opened for binary reading, decompressed when it is compressed.

        Args:
            raw: the file already opened (``open_raw``; it is closed with the result);
                ``None``: open it now, as ``open_raw`` does.

        Raises:
            OSError: the file cannot be opened (``open_raw``).
        """
        if raw is None:
            raw = self.open_raw()[0]
        if self.compression is None:
            return raw
        stream: IO[bytes] = pa.input_stream(raw, compression=self.compression)
        return stream


@dataclass(slots=True, kw_only=True)
class RawChunk:
    """Consecutive records as read, before conversion (picklable: plain data and Arrow).

    Its records are numbered by ``slot``, ``0 .. count - 1`` (the file's records
    ``first .. first + count - 1``); each is either parsed (a row of ``table`` or an item
    of ``records``) or refused (in ``rejects``).

    Attributes:
        source: how dead letters name the file (or table).
        position_kind: ``"line"`` (1-based, the line a record starts on) or ``"row"``
            (0-based row).
        first: the number of its first record in the file.
        count: the records it covers, parsed or refused.
        positions: the position of each parsed record.
        slots: the slot of each parsed record, ascending; ``None``: every record was
            parsed (slot ``i`` is parsed record ``i``).
        table: the parsed records as columns (CSV: all strings; Parquet and tables:
            typed), or ``None`` for JSON Lines.
        records: the decoded JSON objects (JSON Lines only).
        rejects: the refused records, as ``(slot, dead letter)`` in slot order.
    """

    source: str
    position_kind: Literal["line", "row"]
    first: int
    count: int
    positions: list[int]
    slots: list[int] | None = None
    table: pa.Table | None = None
    records: list[dict[str, object]] | None = None
    rejects: list[tuple[int, DeadLetter]] = field(default_factory=list)

    @property
    def parsed_slots(self) -> list[int]:
        """The slot of each parsed record (``slots``, made explicit)."""
        return list(range(len(self.positions))) if self.slots is None else self.slots


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
    return text[:_RAW_PREVIEW] + ("…" if len(text) > _RAW_PREVIEW else "")


def _raw_text(raw: bytes, encoding: str = "utf-8") -> str:
    """A refused record as text for its dead letter (cut at ``RAW_LIMIT`` characters)."""
    return cut_raw(raw.decode(encoding, errors="replace").rstrip("\r\n"))


def _decode_error(error: UnicodeDecodeError, encoding: str) -> str:
    byte = error.object[error.start : error.start + 1].hex()
    hint = "; pass --encoding if the file is not UTF-8" if _is_utf8(encoding) else ""
    return f"not valid {encoding} text (byte 0x{byte} at offset {error.start} of the record){hint}"


def _is_utf8(encoding: str) -> bool:
    return codecs.lookup(encoding).name in ("utf-8", "utf-8-sig")


def _decodes(block: bytes) -> bool:
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _has_lone_cr(data: bytes) -> bool:
    r"""Whether ``data`` holds a carriage return not followed by ``\\n``."""
    returns = data.count(b"\r")
    return bool(returns) and returns != data.count(b"\r\n") + data.endswith(b"\r")


_CR_STAND_INS: Final = tuple(chr(code).encode("utf-8") for code in range(0xE000, 0xE100))
"""Characters of Unicode's private use area that stand in for a lone carriage return while
pyarrow parses (it ends a row at one, where the scanner and Spark read it as data)."""


def _stand_in(data: bytes) -> bytes | None:
    """A private-use character ``data`` does not hold, or ``None`` if it holds them all."""
    return next((code for code in _CR_STAND_INS if code not in data), None)


_LONE_CR: Final = re.compile(rb"\r(?!\n)")


def _put_back_cr(
    table: pa.Table, rejects: list[tuple[int, DeadLetter]], stand_in: bytes
) -> tuple[pa.Table, list[tuple[int, DeadLetter]]]:
    """The lone carriage returns ``stand_in`` stood for, back in the values and dead letters."""
    text = stand_in.decode("utf-8")
    columns = [pc.replace_substring(column, text, "\r") for column in table.columns]
    letters = [
        (slot, replace(letter, raw=letter.raw.replace(text, "\r")))
        if isinstance(letter.raw, str)
        else (slot, letter)
        for slot, letter in rejects
    ]
    return pa.Table.from_arrays(columns, schema=table.schema), letters


def split_records(data: bytes, dialect: CsvDialect) -> list[bytes]:
    """The records of a CSV ``TextBlock.data`` (whole records, as the scanner took them)."""
    scanner = RecordScanner(
        io.BytesIO(data),
        "csv",
        CsvDialect(dialect.delimiter, dialect.quote, max_record_lines=2**31),
        max_record_bytes=len(data) + 1,
    )
    records: list[bytes] = []
    position = 0
    while scanner.next_block(1) is not None:
        records.append(data[position : scanner.offset])
        position = scanner.offset
    return records


# -- CSV ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CsvHeader:
    """A CSV file's header record.

    Attributes:
        names: the column names, in the file's order (empty for a blank header line).
        data: where the first data record starts.
    """

    names: list[str]
    data: Checkpoint


def read_csv_header(item: InputFile, scanner: RecordScanner) -> CsvHeader | None:
    """The header of a CSV file, read from a scanner at the file's start.

    The scanner is left at the first data record, numbered 0.

    Returns:
        The header, or ``None`` for an empty file.

    Raises:
        FormatError: the header is not text in the file's encoding, not CSV, or too long,
            or lines end in a lone carriage return.
    """
    block = scanner.next_block(1)
    scanner.record = 0
    if block is None:
        return None
    first = block.refused[0].head if block.refused else block.data
    if _has_lone_cr(first):  # a lone CR is data: the whole file read as its header
        raise FormatError(
            f"{item.path}: lines end in a carriage return alone (old Mac style); convert "
            "the file to \\n or \\r\\n line ends"
        )
    if block.refused:
        raise FormatError(f"{item.path} does not look like a CSV file: its header is "
                          f"{block.refused[0].reason}")  # fmt: skip
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
    start = Checkpoint(scanner.offset, 0, scanner.line)
    if not text.strip():
        return CsvHeader([], start)
    dialect = item.dialect
    try:
        names = next(
            csv.reader(
                [text],
                delimiter=dialect.delimiter,
                quotechar=dialect.quote or '"',
                quoting=csv.QUOTE_MINIMAL if dialect.quote else csv.QUOTE_NONE,
            )
        )
    except csv.Error as exc:
        raise FormatError(f"{item.path}: the CSV header cannot be read: {exc}") from None
    return CsvHeader(names, start)


def csv_header(item: InputFile) -> CsvHeader | None:
    """The header of a CSV file (``read_csv_header`` on the file opened here).

    Raises:
        OSError: the file cannot be opened.
        FormatError: see ``read_csv_header``.
    """
    with item.open() as handle:
        return read_csv_header(item, RecordScanner(handle, "csv", item.dialect))


@dataclass(slots=True)
class _Parsed:
    """A block's records after parsing: rows, their slots and lines, and the refused."""

    table: pa.Table
    slots: list[int]
    lines: list[int]
    rejects: list[tuple[int, DeadLetter]]


class _TextReader:
    """What the CSV and JSON Lines readers share: the file, and a scanner at ``start``.

    A subclass reads what comes before the records (``_header``) from the scanner at the
    file's start; then the scanner seeks to ``at`` when the file allows (``_seek``) and
    passes over the records up to ``start``.

    Raises:
        OSError: the file cannot be opened.
        ValueError: ``at`` is after ``start``.
    """

    def __init__(
        self,
        item: InputFile,
        *,
        start: int,
        at: Checkpoint | None,
        source: str | None,
        raw: BinaryIO | None = None,
    ) -> None:
        self._name = source or str(item.path)
        self._item = item
        self._encoding = item.encoding
        self._file: IO[bytes] = item.open(raw)
        try:
            kind: Literal["csv", "jsonl"] = "csv" if item.format == "csv" else "jsonl"
            scanner = RecordScanner(self._file, kind, item.dialect)
            self._header(scanner)
            self._scanner = _seek(self._file, item, scanner, at=at, start=start)
        except BaseException:
            self._file.close()
            raise

    def _header(self, scanner: RecordScanner) -> None:
        """Read what comes before the first record (nothing, unless overridden)."""

    @property
    def bytes_read(self) -> int:
        """The byte offset of the next record."""
        return self._scanner.offset

    def close(self) -> None:
        """Close the file."""
        self._file.close()


class CsvReader(_TextReader):
    """Reads a CSV file record by record (in blocks), every column as text.

    Records are found by ``_records`` (quoted values may hold delimiters and line breaks,
    within a bound) and parsed by pyarrow. A record that does not decode, has an
    unbalanced quote, is over-long or has the wrong number of fields becomes a dead letter
    and cannot affect the records after it. Positions are the lines records start on
    (the header is line 1).

    Args:
        item: the file.
        columns: the stream's column names, in order; the file's header names some or
            all of them, in any order. The chunks' tables hold the columns the header
            names, in ``columns``' order; a column it does not name is null in every
            record (``Validator``), as Spark's ``unionByName(allowMissingColumns=True)``
            reads files that gained or dropped a column.
        start: the record to start at (0: the first after the header).
        at: a record boundary at or before ``start`` to seek to first (a planner's
            ``Checkpoint``); ``None``: the first record after the header.
        source: how dead letters name the file; ``None``: its path.

    Raises:
        OSError: the file cannot be opened.
        FormatError: the header cannot be read, or names a column not in ``columns``.
    """

    def __init__(
        self,
        item: InputFile,
        columns: list[str],
        *,
        start: int = 0,
        at: Checkpoint | None = None,
        source: str | None = None,
        raw: BinaryIO | None = None,
    ) -> None:
        self._columns = columns
        self._utf8 = _is_utf8(item.encoding)
        self._names: list[str] = []
        super().__init__(item, start=start, at=at, source=source, raw=raw)

    def _header(self, scanner: RecordScanner) -> None:
        head = read_csv_header(self._item, scanner)
        names = [] if head is None else head.names
        known = set(self._columns)
        if (not names and known) or len(set(names)) != len(names) or not known.issuperset(names):
            raise FormatError(
                f"{self._item.path}: the header names {quoted(names)}, expected some of the "
                f"columns {quoted(self._columns)}"
            )
        self._names = names
        self._present = [name for name in self._columns if name in names]

    def _letter(self, line: int, reason: str, raw: object) -> DeadLetter:
        return DeadLetter(
            source=self._name, position=line, position_kind="line", reason=reason, raw=raw
        )

    def read(self, max_rows: int) -> RawChunk | None:
        """The next at most ``max_rows`` records, with the refused ones among them."""
        block = self._scanner.next_block(max_rows)
        if block is None:
            return None
        parsed = self._parse(block)
        every = len(parsed.slots) == block.count
        return RawChunk(
            source=self._name,
            position_kind="line",
            first=block.first,
            count=block.count,
            positions=parsed.lines,
            slots=None if every else parsed.slots,
            table=parsed.table,
            rejects=parsed.rejects,
        )

    def _parse(self, block: TextBlock) -> _Parsed:
        """Parse ``block``'s records; the refused ones become dead letters."""
        rejects = [
            (
                refused.index - block.first,
                self._letter(refused.line, refused.reason, _preview(refused.head, self._encoding)),
            )
            for refused in block.refused
        ]
        taken = {slot for slot, _ in rejects}
        slots = [slot for slot in range(block.count) if slot not in taken] if rejects else None
        lines = block.lines
        data = block.data
        if self._utf8 and _decodes(data):
            pass
        elif not self._utf8 and self._transcodes(data):
            data = data.decode(self._encoding).encode("utf-8")
        else:  # a record that does not decode: checked one by one
            data, slots, lines = self._decode_each(data, slots, block, lines, rejects)
        if slots is None:
            slots = list(range(block.count))
        stand_in = _stand_in(data) if _has_lone_cr(data) else None
        if stand_in is not None:  # pyarrow would end a row at a lone CR: hide it
            data = _LONE_CR.sub(stand_in, data)
        refused = len(rejects)
        table, slots, lines = self._arrow(data, slots, lines, block.multiline, rejects)
        if stand_in is not None:
            table, rejects[refused:] = _put_back_cr(table, rejects[refused:], stand_in)
        table, slots, lines = self._drop_empty(table, slots, lines, rejects)
        rejects.sort(key=lambda entry: entry[0])
        if self._names != self._present:
            table = table.select(self._present)
        return _Parsed(table, slots, lines, rejects)

    def _transcodes(self, data: bytes) -> bool:
        try:
            data.decode(self._encoding)
        except UnicodeDecodeError:
            return False
        return True

    def _decode_each(
        self,
        data: bytes,
        slots: list[int] | None,
        block: TextBlock,
        lines: list[int],
        rejects: list[tuple[int, DeadLetter]],
    ) -> tuple[bytes, list[int], list[int]]:
        """Keep the records that decode; the others are dead letters."""
        if slots is None:
            slots = list(range(block.count))
        kept: list[bytes] = []
        kept_slots: list[int] = []
        kept_lines: list[int] = []
        for raw, slot, line in zip(
            split_records(data, self._item.dialect), slots, lines, strict=True
        ):
            try:
                text = raw.decode(self._encoding)
            except UnicodeDecodeError as exc:
                reason = _decode_error(exc, self._encoding)
                rejects.append((slot, self._letter(line, reason, _raw_text(raw))))
                continue
            kept.append(raw if self._utf8 else text.encode("utf-8"))
            kept_slots.append(slot)
            kept_lines.append(line)
        return b"".join(kept), kept_slots, kept_lines

    def _arrow(
        self,
        data: bytes,
        slots: list[int],
        lines: list[int],
        multiline: bool,
        rejects: list[tuple[int, DeadLetter]],
    ) -> tuple[pa.Table, list[int], list[int]]:
        """Pyarrow's parse of whole records: one row each, or a dead letter each."""
        if not slots:
            return self._empty(), [], []
        invalid: dict[int, tuple[int, int, str]] = {}

        def on_invalid(row: pa_csv.InvalidRow) -> str:
            number = -1 if row.number is None else int(row.number) - 1
            invalid[number] = (row.expected_columns, row.actual_columns, row.text)
            return "skip"

        table = self._read_csv(data, on_invalid, multiline)
        if table.num_rows + len(invalid) != len(slots) or -1 in invalid:
            # pyarrow read the records otherwise than the scanner did: one at a time.
            return self._arrow_each(data, slots, lines, rejects)
        if invalid:
            keep = []
            for index, (slot, line) in enumerate(zip(slots, lines, strict=True)):
                found = invalid.get(index)
                if found is None:
                    keep.append(index)
                    continue
                expected, actual, text = found
                rejects.append(
                    (slot, self._letter(line, f"expected {expected} fields, found {actual}",
                                        cut_raw(text)))
                )  # fmt: skip
            slots = [slots[index] for index in keep]
            lines = [lines[index] for index in keep]
        return table, slots, lines

    def _arrow_each(
        self,
        data: bytes,
        slots: list[int],
        lines: list[int],
        rejects: list[tuple[int, DeadLetter]],
    ) -> tuple[pa.Table, list[int], list[int]]:
        """The slow path: each record parsed on its own."""
        tables: list[pa.Table] = []
        kept_slots: list[int] = []
        kept_lines: list[int] = []
        records = split_records(data, self._item.dialect)
        for raw, slot, line in zip(records, slots, lines, strict=True):
            invalid: list[tuple[int, int]] = []

            def on_invalid(row: pa_csv.InvalidRow, found: list[tuple[int, int]] = invalid) -> str:
                found.append((row.expected_columns, row.actual_columns))
                return "skip"

            one = self._read_csv(raw, on_invalid, True)
            if one.num_rows == 1:
                tables.append(one)
                kept_slots.append(slot)
                kept_lines.append(line)
                continue
            reason = (
                f"expected {invalid[0][0]} fields, found {invalid[0][1]}"
                if invalid
                else "not one CSV record"
            )
            rejects.append((slot, self._letter(line, reason, _raw_text(raw))))
        if not tables:
            return self._empty(), [], []
        return pa.concat_tables(tables), kept_slots, kept_lines

    def _read_csv(self, data: bytes, on_invalid: object, multiline: bool) -> pa.Table:
        dialect = self._item.dialect
        return pa_csv.read_csv(
            io.BytesIO(data),
            read_options=pa_csv.ReadOptions(
                column_names=self._names, use_threads=False, block_size=len(data) + 1
            ),
            parse_options=pa_csv.ParseOptions(
                delimiter=dialect.delimiter,
                quote_char=dialect.quote or False,
                newlines_in_values=multiline,
                invalid_row_handler=on_invalid,
                ignore_empty_lines=True,  # blank lines are not records (_records)
            ),
            convert_options=pa_csv.ConvertOptions(
                column_types=dict.fromkeys(self._names, pa.string()),
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                auto_dict_encode=False,
            ),
        )

    def _empty(self) -> pa.Table:
        return pa.table({name: pa.array([], pa.string()) for name in self._names})

    def _drop_empty(
        self,
        table: pa.Table,
        slots: list[int],
        lines: list[int],
        rejects: list[tuple[int, DeadLetter]],
    ) -> tuple[pa.Table, list[int], list[int]]:
        """Records whose fields are all empty carry nothing: dead letters, never dropped."""
        empty = None
        for column in table.columns:
            is_empty = pc.fill_null(pc.equal(column, _EMPTY_TEXT), fill_value=_TRUE)
            empty = is_empty if empty is None else pc.and_(empty, is_empty)
        if empty is None or not pc.any(empty).as_py():
            return table, slots, lines
        flags = empty.to_pylist()
        reason = "empty record (a blank line, or every field empty)"
        for flag, slot, line in zip(flags, slots, lines, strict=True):
            if flag:
                rejects.append((slot, self._letter(line, reason, "")))
        kept = [index for index, flag in enumerate(flags) if not flag]
        return (
            table.filter(pc.invert(empty)),
            [slots[index] for index in kept],
            [lines[index] for index in kept],
        )


def _seek(
    handle: IO[bytes],
    item: InputFile,
    scanner: RecordScanner,
    *,
    at: Checkpoint | None,
    start: int,
) -> RecordScanner:
    """A scanner at record ``start``: sought to ``at`` when the file allows, then skipping.

    ``scanner`` is at the file's first record (after a CSV's header).

    Raises:
        ValueError: ``at`` is after ``start``.
    """
    if at is not None and at.record > start:
        raise ValueError(f"checkpoint at record {at.record} is after start {start}")
    if at is not None and item.seekable and at.record > scanner.record:
        handle.seek(at.offset)
        kind: Literal["csv", "jsonl"] = "csv" if item.format == "csv" else "jsonl"
        scanner = RecordScanner(
            handle, kind, item.dialect, record=at.record, line=at.line, offset=at.offset
        )
    scanner.skip(start - scanner.record)
    return scanner


# -- JSON Lines --------------------------------------------------------------------------


class JsonLinesReader(_TextReader):
    """Reads a JSON Lines file; records are its non-blank lines, positions their lines.

    A line that does not decode, is not valid JSON, is not a JSON object or is longer than
    ``MAX_RECORD_BYTES`` becomes a dead letter.

    Args:
        item: the file.
        start: the record to start at (blank lines are not records).
        at: a record boundary at or before ``start`` to seek to first (a planner's
            ``Checkpoint``); ``None``: the start of the file.
        source: how dead letters name the file; ``None``: its path.
    """

    def __init__(
        self,
        item: InputFile,
        *,
        start: int = 0,
        at: Checkpoint | None = None,
        source: str | None = None,
        raw: BinaryIO | None = None,
    ) -> None:
        super().__init__(item, start=start, at=at, source=source, raw=raw)

    def read(self, max_rows: int) -> RawChunk | None:
        """The next at most ``max_rows`` records."""
        block = self._scanner.next_block(max_rows)
        if block is None:
            return None
        records: list[dict[str, object]] = []
        positions: list[int] = []
        slots: list[int] = []
        rejects = [
            (
                item.index - block.first,
                DeadLetter(
                    source=self._name,
                    position=item.line,
                    position_kind="line",
                    reason=item.reason,
                    raw=_preview(item.head, self._encoding),
                ),
            )
            for item in block.refused
        ]
        slot = len(rejects)  # a block with refused lines has no data (see _records)
        line = block.lines[0] if block.lines else 0
        for raw in block.data.split(b"\n")[:-1]:
            if not raw.strip(b" \t\r\f\v"):
                line += 1
                continue
            reason = self._parse(raw, records)
            if reason is None:
                positions.append(line)
                slots.append(slot)
            else:
                rejects.append(
                    (
                        slot,
                        DeadLetter(
                            source=self._name,
                            position=line,
                            position_kind="line",
                            reason=reason,
                            raw=_raw_text(raw, self._encoding),
                        ),
                    )
                )
            slot += 1
            line += 1
        return RawChunk(
            source=self._name,
            position_kind="line",
            first=block.first,
            count=block.count,
            positions=positions,
            slots=None if len(slots) == block.count else slots,
            records=records,
            rejects=rejects,
        )

    def _parse(self, raw: bytes, records: list[dict[str, object]]) -> str | None:
        """Append the line's object to ``records``; else the reason it is refused."""
        try:
            text = raw.decode(self._encoding)
        except UnicodeDecodeError as exc:
            return _decode_error(exc, self._encoding)
        try:
            record = json.loads(text)
        except ValueError as exc:
            return f"malformed JSON: {exc}"
        if not isinstance(record, dict):
            return f"not a JSON object: {type(record).__name__}"
        records.append(record)
        return None


def _json_records(item: InputFile, limit_bytes: int) -> Iterator[dict[str, object] | None]:
    """The file's JSON objects up to ``limit_bytes``; ``None`` for a record that is not one."""
    reader = JsonLinesReader(item)
    try:
        while reader.bytes_read < limit_bytes and (chunk := reader.read(1_000)) is not None:
            found = iter(chunk.records or [])
            taken = set(chunk.parsed_slots)
            for slot in range(chunk.count):
                yield next(found) if slot in taken else None
    finally:
        reader.close()


def _looks_like_a_json_document(item: InputFile) -> bool:
    with item.open() as handle:
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


def _row_chunk(source: str, start: int, table: pa.Table) -> RawChunk:
    return RawChunk(
        source=source,
        position_kind="row",
        first=start,
        count=table.num_rows,
        positions=list(range(start, start + table.num_rows)),
        table=table,
    )


class TableReader:
    """Reads an in-memory ``pyarrow.Table`` in slices; positions are rows.

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
        return _row_chunk(self._name, start, piece)

    def close(self) -> None:
        """Nothing to release."""


class ParquetReader:
    """Reads a Parquet file batch by batch; positions are rows (0-based).

    Args:
        item: the file.
        start: rows to skip first (whole row groups before it are not read at all).
        columns: the columns to read, by name (the others are not decoded at all; one
            the file lacks is left out: ``Validator`` makes it null); ``None``: every
            column.
        source: how dead letters name the file; ``None``: its path.
        raw: the file already opened (``InputFile.open_raw``; the caller closes it);
            ``None``: open it now, as ``open_raw`` does.
    """

    def __init__(
        self,
        item: InputFile,
        *,
        start: int = 0,
        columns: Sequence[str] | None = None,
        source: str | None = None,
        raw: BinaryIO | None = None,
    ) -> None:
        self._name = source or str(item.path)
        self._raw = item.open_raw()[0] if raw is None else None  # ours to close
        try:
            self._file = pq.ParquetFile(raw if raw is not None else self._raw)
        except BaseException:
            if self._raw is not None:
                self._raw.close()
            raise
        stored = set(self._file.schema_arrow.names)
        # A column the file lacks is null in every row (``Validator``).
        self._columns = None if columns is None else [name for name in columns if name in stored]
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
        return _row_chunk(self._name, start, pa.Table.from_batches([batch]))

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
        if self._raw is not None:
            self._raw.close()


# -- per format ----------------------------------------------------------------------------


def header(item: InputFile) -> tuple[list[str], bool | None]:
    """A file's column names and whether it has a record (``None``: not known yet).

    Cheap: Parquet's footer, a CSV's header and first record, a JSON Lines file's first
    object.

    Raises:
        OSError: the file cannot be read.
        FormatError: it cannot be read as its format.
        pyarrow.ArrowException: a Parquet file is not valid.
    """
    if item.format == "parquet":
        metadata = pq.read_metadata(item.path)
        return list(metadata.schema.to_arrow_schema().names), metadata.num_rows > 0
    if item.format == "csv":
        with item.open() as handle:
            scanner = RecordScanner(handle, "csv", item.dialect)
            head = read_csv_header(item, scanner)
            if head is None:
                return [], False
            while (block := scanner.next_block(1)) is not None:
                if block.refused or block.data.strip():
                    return head.names, True
            return head.names, False
    for record in _json_records(item, SAMPLE_BYTES):
        return ([], None) if record is None else (list(record), True)
    return [], False


def sample(
    item: InputFile, columns: list[str] | None = None, *, max_records: int | None = None
) -> tuple[list[str], list[dict[str, object]]]:
    """The columns and the first records of a CSV or JSON Lines file.

    At most ``SAMPLE_BYTES`` of the file are read, and at most ``max_records`` records
    kept (``None``: no bound but the bytes). CSV values are strings; malformed records are
    left out (they become dead letters when the file is read).

    Raises:
        FormatError: a JSON Lines file has no object in that range (the message says
            when the file looks like one JSON document instead of JSON Lines), or a CSV
            file cannot be read as CSV.
    """
    del columns
    limit = max_records if max_records is not None else 2**62
    if item.format == "csv":
        names, _ = header(item)
        reader = CsvReader(item, names)
        records: list[dict[str, object]] = []
        try:
            while (
                len(records) < limit
                and (chunk := reader.read(min(10_000, limit - len(records)))) is not None
            ):
                if chunk.table is not None:
                    records.extend(chunk.table.to_pylist())
                if reader.bytes_read >= SAMPLE_BYTES:
                    break
        finally:
            reader.close()
        return names, records
    objects = (record for record in _json_records(item, SAMPLE_BYTES) if record is not None)
    found = list(itertools.islice(objects, limit))
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
    at: Checkpoint | None = None,
    parquet_columns: Sequence[str] | None = None,
    source: str | None = None,
    raw: BinaryIO | None = None,
) -> ChunkReader:
    """Open the reader for ``item``'s format at record ``start``.

    Args:
        item: the file.
        columns: the stream's column names.
        start: the record to start at, as the reader counts them (see the module doc).
        at: a record boundary at or before ``start`` (text formats; see ``CsvReader``).
        parquet_columns: for a Parquet file, the only columns to read (``None``: all);
            ignored for text formats, whose records are parsed whole.
        source: how dead letters name the file; ``None``: its path.
        raw: the file already opened (``InputFile.open_raw``): read from that descriptor,
            whatever its path names now; a text reader closes it, a Parquet reader leaves
            it to the caller. ``None``: open the path now.

    Raises:
        OSError: the file cannot be opened.
        FormatError: the file cannot be read as its format.
        pyarrow.ArrowException: a Parquet file is not valid.
    """
    if item.format == "csv":
        return CsvReader(item, columns, start=start, at=at, source=source, raw=raw)
    if item.format == "parquet":
        return ParquetReader(item, start=start, columns=parquet_columns, source=source, raw=raw)
    return JsonLinesReader(item, start=start, at=at, source=source, raw=raw)


__all__ += ["BLOCK_BYTES", "MAX_RECORD_BYTES", "CsvHeader"]
