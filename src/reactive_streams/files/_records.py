r"""Where each record of a CSV or JSON Lines file begins and ends.

One scanner decides the record boundaries of text files for everything that needs them:
the planner, which counts a file's records and notes byte offsets where a split may
start, and the readers, which parse the records from such an offset. Because both use the
same scanner, a reader opened at a planned offset finds exactly the records the planner
counted there (a record is never lost or read twice at a split's edge).

What a record is:

* **CSV** (RFC 4180, as pyarrow's parser reads it): fields separated by the dialect's
  delimiter; a field that starts with the quote character is quoted until the next lone
  quote (a doubled quote is a quote in the value), and may hold delimiters and line ends;
  a quote anywhere else in a field is an ordinary character. A record ends at a line end
  outside quotes: ``\\n`` or ``\\r\\n``. A lone ``\\r`` (one not followed by
  ``\\n``) is data, quoted or not, as Spark's CSV reader with ``multiLine`` reads a file
  whose lines end in ``\\n`` or ``\\r\\n`` (pandas writes text with carriage returns
  that way, unquoted). A file whose lines end in a lone ``\\r`` (old Mac style) is
  refused at its header (``read_csv_header``). A blank line (a line end alone) is not a
  record, as in pandas, Spark and pyarrow.
* **JSON Lines**: one non-blank line (ending in ``\\n``); blank lines are not records.

Bounds, so one bad byte never costs more than one record and memory stays bounded:

* a record longer than ``MAX_RECORD_BYTES`` is refused without being held whole, and
  scanning goes on after its line;
* a quoted value may run over at most ``CsvDialect.max_record_lines`` lines. A record
  whose quote does not close within that bound, or whose quoted line break is followed by
  a quote that does not end its field (RFC 4180: a closing quote is followed by the
  delimiter or the end of the record), is taken for a line with an unbalanced quote: that
  one line is refused and scanning resumes on the next line.

A scan started at any record boundary gives the same records as a scan from the start of
the file: every decision depends only on the bytes from the record's start up to the
bound, never on where a read happened to end.

Line numbers count ``\\n`` (as ``wc -l`` and ``sed -n 'Np'`` do): a record's line is the
line it starts on, 1-based.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import IO, Final, Literal

__all__ = [
    "BLOCK_BYTES",
    "MAX_RECORD_BYTES",
    "Checkpoint",
    "CsvDialect",
    "RecordIndex",
    "RecordScanner",
    "Refused",
    "TextBlock",
    "TextKind",
    "index_records",
]

TextKind = Literal["csv", "jsonl"]
"""The text formats whose records the scanner finds."""

BLOCK_BYTES: Final = 1 << 20
"""Bytes read from the file at a time; a ``TextBlock`` covers about this many."""

MAX_RECORD_BYTES: Final = 16 << 20
"""The longest record read; a longer one is refused without being held whole."""

_PREVIEW_BYTES: Final = 800
"""Bytes of a refused record kept for its dead letter."""


@dataclass(frozen=True, slots=True)
class CsvDialect:
    r"""How a CSV file separates and quotes its fields.

    Attributes:
        delimiter: the field separator, one ASCII character (``","``; ``"\\t"`` for TSV).
        quote: the quote character, one ASCII character, or ``None`` when values are
            never quoted (then a quote is an ordinary character and every line end ends a
            record).
        max_record_lines: the most lines one record may span through quoted line breaks
            (``1``: quoted values never hold line breaks).

    Raises:
        ValueError: a character is not one ASCII character, is a line end, or the
            delimiter and the quote are the same; ``max_record_lines < 1``.
    """

    delimiter: str = ","
    quote: str | None = '"'
    max_record_lines: int = 1_000

    def __post_init__(self) -> None:
        for name, value in (("delimiter", self.delimiter), ("quote", self.quote)):
            if value is None and name == "quote":
                continue
            if not isinstance(value, str) or len(value) != 1 or not value.isascii():
                raise ValueError(f"the CSV {name} must be one ASCII character, got {value!r}")
            if value in "\r\n":
                raise ValueError(f"the CSV {name} cannot be a line end ({value!r})")
        if self.delimiter == self.quote:
            raise ValueError(f"the CSV delimiter and quote are the same ({self.delimiter!r})")
        if isinstance(self.max_record_lines, bool) or not isinstance(self.max_record_lines, int):
            raise TypeError("max_record_lines must be an int")
        if self.max_record_lines < 1:
            raise ValueError(f"max_record_lines must be >= 1, got {self.max_record_lines}")


@dataclass(frozen=True, slots=True)
class Refused:
    """A record the scanner refused: it is counted, never parsed.

    Attributes:
        index: the record's number in the file (0-based, data records only).
        line: the line it starts on (1-based).
        reason: why, in one line.
        head: its first bytes (at most 800), for the dead letter.
    """

    index: int
    line: int
    reason: str
    head: bytes


@dataclass(slots=True)
class TextBlock:
    """Consecutive records of a text file, in order: those to parse, and those refused.

    Attributes:
        first: the number of the block's first record in the file (0-based).
        count: the records in the block, parsed or refused.
        data: the records to parse, in order, each ending in a line end (CSV), or the
            block's lines, blank ones included (JSON Lines).
        lines: the line each record of ``data`` starts on (CSV; JSON Lines: the first
            line of ``data`` only).
        refused: the refused records, in order.
        multiline: whether a record of ``data`` spans lines (a quoted line break).
    """

    first: int
    count: int = 0
    data: bytes = b""
    lines: list[int] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    multiline: bool = False


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A record boundary: where a reader may start without scanning from the file's start.

    Attributes:
        offset: the byte offset of the record in the file.
        record: its number (0-based, data records only).
        line: the line it starts on (1-based).
    """

    offset: int
    record: int
    line: int


@dataclass(frozen=True, slots=True)
class RecordIndex:
    """What ``index_records`` found: the records and where a reader may start.

    Attributes:
        records: the data records of the file.
        checkpoints: record boundaries about every ``BLOCK_BYTES``, ascending; the first
            is the first data record (after a CSV's header), the last is the end of the
            file (``record == records``).
    """

    records: int
    checkpoints: tuple[Checkpoint, ...]


def _csv_patterns(dialect: CsvDialect) -> tuple[re.Pattern[bytes], ...]:
    """Regexes for a run of one-line records, one record, and one strictly quoted record.

    Every quantifier is possessive, so a pattern reads a record the way a parser's state
    machine does (pyarrow's): a doubled quote inside a quoted value is always a quote in
    the value, never a closing quote followed by an ordinary one. Without that, a regex
    could back off into a shorter record that no CSV parser would read.
    """
    d = re.escape(dialect.delimiter.encode("ascii"))
    end = rb"\r?\n"  # a lone CR is data (the plain and quoted patterns take it)
    if dialect.quote is None:
        plain = rb"[^" + d + rb"\n]*+"
        record = plain + rb"(?:" + d + plain + rb")*+" + end
        return re.compile(rb"(?:" + record + rb")*+"), re.compile(record), re.compile(record)
    q = re.escape(dialect.quote.encode("ascii"))
    plain = rb"[^" + d + q + rb"\n][^" + d + rb"\n]*+"
    rest = rb"[^" + d + rb"\n]*+"  # after a closing quote, an ordinary field goes on
    quoted = q + rb"[^" + q + rb"]*+(?:" + q + q + rb"[^" + q + rb"]*+)*+" + q
    quoted1 = q + rb"[^" + q + rb"\n]*+(?:" + q + q + rb"[^" + q + rb"\n]*+)*+" + q
    loose = rb"(?:" + quoted + rest + rb"|" + plain + rb")?+"
    strict = rb"(?:" + quoted + rb"|" + plain + rb")?+"
    one_line = rb"(?:" + quoted1 + rest + rb"|" + plain + rb")?+"
    run = rb"(?:" + one_line + rb"(?:" + d + one_line + rb")*+" + end + rb")*+"
    return (
        re.compile(run),
        re.compile(loose + rb"(?:" + d + loose + rb")*+" + end),
        re.compile(strict + rb"(?:" + d + strict + rb")*+" + end),
    )


_LINE_END = re.compile(rb"\r?\n")
_BLANK_LINE = re.compile(rb"^[ \t\r\f\v]*\n", re.MULTILINE)


class RecordScanner:
    """Reads the records of a text file block by block, from a record boundary.

    Args:
        handle: the file, positioned at a record boundary (its start, the end of a CSV's
            header, or a ``Checkpoint.offset``).
        kind: ``"csv"`` or ``"jsonl"``.
        dialect: the CSV dialect (ignored for JSON Lines).
        record: the number of the record at the handle's position.
        line: the line it starts on.
        offset: the handle's position in bytes (for ``offset``, ``Checkpoint``).
        max_record_bytes: the longest record read (``MAX_RECORD_BYTES``).

    Memory: one block plus at most one record of ``max_record_bytes``; an over-long line
    is dropped as it is read.

    Concurrency: one scanner per thread.
    """

    def __init__(
        self,
        handle: IO[bytes],
        kind: TextKind,
        dialect: CsvDialect | None = None,
        *,
        record: int = 0,
        line: int = 1,
        offset: int = 0,
        max_record_bytes: int = MAX_RECORD_BYTES,
    ) -> None:
        self._handle = handle
        self._kind = kind
        self._dialect = dialect if dialect is not None else CsvDialect()
        self._max_bytes = max_record_bytes
        self._max_lines = self._dialect.max_record_lines
        self._run, self._record, self._strict = _csv_patterns(self._dialect)
        quote = self._dialect.quote
        self._quote = None if quote is None else quote.encode("ascii")
        self._buf = b""
        self._pos = 0
        self._eof = False
        self._padded = False  # a "\n" was added after the file's last byte
        self._base = offset  # the file offset of _buf[0]
        self.record = record
        """The number of the next record."""
        self.line = line
        """The line the next record starts on."""

    @property
    def offset(self) -> int:
        """The byte offset of the next record in the file."""
        return self._base + min(self._pos, len(self._buf) - self._padded)

    def _fill(self, size: int = BLOCK_BYTES) -> bool:
        """Append up to ``size`` bytes (dropping what was taken); ``False`` at the end."""
        if self._eof:
            return False
        piece = self._handle.read(size)
        self._base += self._pos
        rest = self._buf[self._pos :]
        self._pos = 0
        if not piece:
            self._eof = True
            if rest and not rest.endswith(b"\n"):
                rest += b"\n"  # the last record ends at the end of the file
                self._padded = True
            self._buf = rest
            return False
        self._buf = rest + piece if rest else piece
        return True

    def next_block(
        self, max_records: int | None = None, size: int = BLOCK_BYTES
    ) -> TextBlock | None:
        """The next records: those decided by about ``size`` bytes, at most ``max_records``.

        Returns:
            A block of at least one record, or ``None`` at the end of the file.
        """
        block = TextBlock(first=self.record)
        pieces: list[bytes] = []
        limit = max_records if max_records is not None else 2**62
        while not block.count:
            if len(self._buf) - self._pos < size and not self._eof:
                self._fill(size)
                continue
            if self._pos >= len(self._buf):  # the end of the file
                return None
            if self._take(limit, block, pieces, self._pos + size):
                break
            self._fill(size)  # nothing decided yet: the record needs more bytes
        block.data = b"".join(pieces)
        return block

    def skip(self, count: int) -> int:
        """Pass over ``count`` records (fewer at the end of the file); how many were passed."""
        passed = 0
        while passed < count:
            block = self.next_block(count - passed)
            if block is None:
                break
            passed += block.count
        return passed

    def _take(self, limit: int, block: TextBlock, pieces: list[bytes], budget: int) -> int:
        """Take up to ``limit`` records that the buffer decides; how many were taken.

        Records are taken up to the buffer offset ``budget`` (at least one record).
        """
        if self._kind == "jsonl":
            return self._take_lines(limit, block, pieces, budget)
        taken = 0
        while taken < limit and (not taken or self._pos < budget):
            buf, pos = self._buf, self._pos
            end = len(buf)
            if not self._eof and buf.endswith(b"\r"):
                end -= 1  # the CR may start a CRLF: wait for the next byte
            if pos >= end:
                break
            window = min(end, pos + self._max_bytes)
            if window < end and buf[window - 1] == 13:  # b"\r": keep a CRLF whole
                window -= 1
            cut = min(window, budget)
            if cut < window and buf[cut - 1] == 13:  # b"\r": keep a CRLF whole
                cut -= 1
            stop = self._run_end(buf, pos, cut)
            wanted = limit - taken
            if stop == pos and cut < window:  # no record fits the budget
                if taken:
                    break
                stop, wanted = self._run_end(buf, pos, window), 1  # at least one record
            if stop > pos:
                taken += self._take_run(pos, stop, wanted, block, pieces)
                continue
            if not self._take_one(pos, end, window, block, pieces):
                break
            taken += 1
        return taken

    def _run_end(self, buf: bytes, pos: int, end: int) -> int:
        """The end of the one-line records from ``pos``, within ``buf[:end]``."""
        if self._quote is None or buf.find(self._quote, pos, end) < 0:
            # No quote: every line end ends a record (the regex's answer, faster).
            stop = buf.rfind(b"\n", pos, end) + 1
            return max(stop, pos)
        return self._run.match(buf, pos, end).end()  # type: ignore[union-attr]

    def _take_run(
        self, pos: int, stop: int, limit: int, block: TextBlock, pieces: list[bytes]
    ) -> int:
        """Take the one-line records of ``buf[pos:stop]`` (at most ``limit``).

        A blank line (a line end alone) is not a record: its line is counted, nothing
        else.
        """
        buf = self._buf
        blank = (
            buf[pos] in b"\r\n"
            or buf.find(b"\n\n", pos, stop) >= 0
            or buf.find(b"\n\r\n", pos, stop) >= 0
        )
        if not blank:  # every record ends in "\n": one line each
            count = buf.count(b"\n", pos, stop)
            if count > limit:
                stop = _after_nth(buf, pos, limit)
                count = limit
            block.lines.extend(range(self.line, self.line + count))
            self.line += count
        else:  # blank lines among them
            count = 0
            line = self.line
            at = pos
            for match in _LINE_END.finditer(buf, pos, stop):
                if match.start() != at:
                    block.lines.append(line)
                    count += 1
                line += 1
                at = match.end()
                if count == limit:
                    break
            stop = at
            self.line = line
        pieces.append(buf[pos:stop])
        block.count += count
        self.record += count
        self._pos = stop
        return count

    def _take_one(
        self, pos: int, end: int, window: int, block: TextBlock, pieces: list[bytes]
    ) -> bool:
        """Decide the record at ``pos``, which is not a one-line record; ``False``: wait."""
        buf = self._buf
        match = self._record.match(buf, pos, window)
        if match is not None:  # its quoted value spans lines
            stop = match.end()
            spanned = buf.count(b"\n", pos, stop - 1) + 1
            if spanned > self._max_lines:
                return self._refuse_line(
                    pos,
                    block,
                    f"unbalanced quote: a quoted value runs over {spanned:,} lines (at most "
                    f"{self._max_lines:,})",
                )
            strict = self._strict.match(buf, pos, window)
            if strict is None or strict.end() != stop:
                return self._refuse_line(
                    pos,
                    block,
                    "unbalanced quote: a quoted value spans lines but a closing quote is not "
                    "followed by a delimiter or the end of the record",
                )
            pieces.append(buf[pos:stop])
            block.lines.append(self.line)
            block.multiline = True
            block.count += 1
            self.record += 1
            self.line += buf.count(b"\n", pos, stop)
            self._pos = stop
            return True
        if window == end and not self._eof and buf.count(b"\n", pos, end) <= self._max_lines:
            return False  # the record may still end in the bytes to come
        if _LINE_END.search(buf, pos, window) is None:
            return self._refuse_overlong(pos, block)
        return self._refuse_line(
            pos,
            block,
            f"unbalanced quote: a quoted value is not closed within {self._max_lines:,} lines",
        )

    def _refuse_line(self, pos: int, block: TextBlock, reason: str) -> bool:
        """Refuse the line at ``pos`` as one record; scanning resumes on the next line."""
        first = _LINE_END.search(self._buf, pos)
        assert first is not None  # the callers saw a line end
        stop = first.end()
        self._refused(block, reason, self._buf[pos : min(stop, pos + _PREVIEW_BYTES)])
        self.line += 1
        self._pos = stop
        return True

    def _refuse_overlong(self, pos: int, block: TextBlock) -> bool:
        """Refuse the over-long line at ``pos``, dropping its bytes as they are read."""
        head = self._buf[pos : pos + _PREVIEW_BYTES]
        size = 0
        self._pos = pos
        while True:
            newline = self._buf.find(b"\n", self._pos)
            if newline >= 0:
                size += newline + 1 - self._pos
                self._pos = newline + 1
                break
            size += len(self._buf) - self._pos
            self._pos = len(self._buf)
            if not self._fill():
                break
        if self._padded and self._pos >= len(self._buf):
            size -= 1
        self._refused(block, f"record too long: {size:,} bytes (at most {self._max_bytes:,})", head)
        self.line += 1
        return True

    def _refused(self, block: TextBlock, reason: str, head: bytes) -> None:
        block.refused.append(Refused(self.record, self.line, reason, head))
        block.count += 1
        self.record += 1

    # -- JSON Lines ----------------------------------------------------------------------

    def _take_lines(self, limit: int, block: TextBlock, pieces: list[bytes], budget: int) -> int:
        """Take up to ``limit`` non-blank lines and the blank lines among them.

        An over-long line is refused in a block of its own, so a block's ``data`` is
        consecutive lines from ``lines[0]``.
        """
        buf, pos = self._buf, self._pos
        window = min(len(buf), pos + self._max_bytes)
        stop = buf.rfind(b"\n", pos, min(window, budget)) + 1
        if stop <= pos:  # no line within the budget: take one, if it ends within the bound
            stop = buf.find(b"\n", pos, window) + 1
        if stop <= pos:  # no line ends within the bound (or in the buffer yet)
            return self._refuse_overlong(pos, block) if window < len(buf) else 0
        lines = buf.count(b"\n", pos, stop)
        count = lines - len(_BLANK_LINE.findall(buf, pos, stop))
        if count > limit:
            stop, lines = _after_nth_record(buf, pos, stop, limit)
            count = limit
        block.lines.append(self.line)
        pieces.append(buf[pos:stop])
        block.count += count
        self.record += count
        self.line += lines
        self._pos = stop
        if not count:  # only blank lines: nothing to hand out, go on
            block.lines.clear()
            pieces.clear()
            return self._take_lines(limit, block, pieces, budget) if self._pos < len(buf) else 0
        return count


def _after_nth(buf: bytes, pos: int, n: int) -> int:
    r"""The position just after the ``n``-th ``\\n`` from ``pos`` (``n >= 1``)."""
    for _ in range(n):
        pos = buf.index(b"\n", pos) + 1
    return pos


def _after_nth_record(buf: bytes, pos: int, stop: int, n: int) -> tuple[int, int]:
    """Just after the ``n``-th non-blank line in ``buf[pos:stop]``, and the lines passed."""
    lines = 0
    seen = 0
    while seen < n:
        end = buf.index(b"\n", pos, stop) + 1
        if buf[pos:end].strip(b" \t\r\n\f\v"):
            seen += 1
        lines += 1
        pos = end
    return pos, lines


def index_records(scanner: RecordScanner, every: int = BLOCK_BYTES) -> RecordIndex:
    """Count the records from the scanner's place on, noting a boundary about every ``every`` bytes.

    Args:
        scanner: at the first data record (a CSV: after its header, ``read_csv_header``).
        every: bytes between checkpoints, about.

    Returns:
        The records counted and the checkpoints (the first is where the scanner was).
    """
    first = scanner.record
    checkpoints = [Checkpoint(scanner.offset, scanner.record, scanner.line)]
    while scanner.next_block(size=every) is not None:
        checkpoints.append(Checkpoint(scanner.offset, scanner.record, scanner.line))
    return RecordIndex(scanner.record - first, tuple(checkpoints))
