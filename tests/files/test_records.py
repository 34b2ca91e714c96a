"""The record scanner against a character-by-character model, pyarrow, and itself.

The model reads a CSV the way a parser's state machine does (one byte at a time); the
scanner uses regexes over blocks. They must agree on every record, for any bytes, any
block size and any record boundary the scan starts from.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.csv as pa_csv  # type: ignore[import-untyped,unused-ignore]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams.files._records import (
    Checkpoint,
    CsvDialect,
    RecordScanner,
    TextBlock,
    index_records,
)

MAX_LINES = 3
MAX_BYTES = 40

Record = tuple[str, int, int, bytes]
"""``("ok" | "refused", index, line, bytes)``: bytes of an accepted record, or b"" ."""


def _parse(data: bytes, pos: int, delim: int, quote: int | None) -> tuple[int | None, bool, bool]:
    """One record from ``pos``: its end (``None``: a quote open at the end), multi, strict."""
    i, n = pos, len(data)
    field_start, multi, strict = True, False, True
    while i < n:
        c = data[i]
        if field_start and quote is not None and c == quote:
            i += 1
            while True:
                if i >= n:
                    return None, multi, strict
                c = data[i]
                if c == quote:
                    if i + 1 < n and data[i + 1] == quote:
                        i += 2
                        continue
                    i += 1
                    break
                if c == 10:
                    multi = True
                i += 1
            if i < n and data[i] not in (delim, 10) and data[i : i + 2] != b"\r\n":
                strict = False
            field_start = False
            continue
        if c == delim:
            field_start = True
        elif c == 13 and data[i + 1 : i + 2] == b"\n":
            return i + 2, multi, strict
        elif c == 10:
            return i + 1, multi, strict
        else:
            field_start = False
        i += 1
    return None, multi, strict


def _first_line_end(data: bytes, pos: int) -> int:
    """After the first line end from ``pos`` (a lone CR is data, not a line end)."""
    newline = data.find(b"\n", pos)
    return len(data) if newline < 0 else newline + 1


def _blank(data: bytes, pos: int) -> bool:
    return data[pos : pos + 1] == b"\n" or data[pos : pos + 2] == b"\r\n"


def model_csv(data: bytes, dialect: CsvDialect, max_bytes: int) -> list[Record]:
    """The records of ``data`` (no header), decided byte by byte."""
    if data and not data.endswith(b"\n"):
        data += b"\n"
    delim = ord(dialect.delimiter)
    quote = None if dialect.quote is None else ord(dialect.quote)
    out: list[Record] = []
    pos, line = 0, 1
    while pos < len(data):
        index = len(out)
        if _blank(data, pos):  # a blank line: not a record
            first = _first_line_end(data, pos)
            line += data.count(b"\n", pos, first)
            pos = first
            continue
        end, multi, strict = _parse(data, pos, delim, quote)
        first = _first_line_end(data, pos)
        if end is not None and not multi and end - pos <= max_bytes:
            out.append(("ok", index, line, _body(data[pos:end])))
            line += data.count(b"\n", pos, end)
            pos = end
            continue
        if end is not None and not multi:  # one line, too long: dropped to its "\n"
            newline = data.find(b"\n", pos)
            out.append(("refused", index, line, b""))
            line += 1
            pos = len(data) if newline < 0 else newline + 1
            continue
        if first - pos > max_bytes and data.find(b"\n", pos, pos + max_bytes) < 0:
            # no line end within the bound: an over-long line
            newline = data.find(b"\n", pos)
            out.append(("refused", index, line, b""))
            line += 1
            pos = len(data) if newline < 0 else newline + 1
            continue
        if (
            end is not None
            and end - pos <= max_bytes
            and data.count(b"\n", pos, end - 1) + 1 <= dialect.max_record_lines
            and strict
        ):
            out.append(("ok", index, line, _body(data[pos:end])))
            line += data.count(b"\n", pos, end)
            pos = end
            continue
        out.append(("refused", index, line, b""))
        line += 1
        pos = first
    return out


def model_jsonl(data: bytes, max_bytes: int) -> list[Record]:
    if data and not data.endswith(b"\n"):
        data += b"\n"
    out: list[Record] = []
    line = 1
    for raw in data.split(b"\n")[:-1]:
        if len(raw) + 1 > max_bytes:
            out.append(("refused", len(out), line, b""))
        elif raw.strip(b" \t\r\f\v"):
            out.append(("ok", len(out), line, _body(raw)))
        line += 1
    return out


def _split_csv_data(block: TextBlock, dialect: CsvDialect) -> list[bytes]:
    """The records of a CSV block's ``data``, cut with the model (it has whole records)."""
    pieces, pos = [], 0
    quote = None if dialect.quote is None else ord(dialect.quote)
    while pos < len(block.data):
        if _blank(block.data, pos):  # a blank line: not a record
            pos = _first_line_end(block.data, pos)
            continue
        end, _, _ = _parse(block.data, pos, ord(dialect.delimiter), quote)
        assert end is not None
        pieces.append(block.data[pos:end])
        pos = end
    return pieces


def _body(raw: bytes) -> bytes:
    """A record without its line end (``\\n`` or ``\\r\\n``; a lone CR before it is data)."""
    raw = raw.removesuffix(b"\n")
    return raw.removesuffix(b"\r")


def scan(
    data: bytes,
    kind: str = "csv",
    *,
    dialect: CsvDialect | None = None,
    size: int = 1 << 20,
    start: Checkpoint | None = None,
    max_records: int | None = None,
) -> list[Record]:
    """Every record the scanner finds, as the model lists them."""
    handle = io.BytesIO(data)
    at = start or Checkpoint(0, 0, 1)
    handle.seek(at.offset)
    dialect = dialect or CsvDialect(max_record_lines=MAX_LINES)
    scanner = RecordScanner(
        handle,
        kind,  # type: ignore[arg-type]
        dialect,
        record=at.record,
        line=at.line,
        offset=at.offset,
        max_record_bytes=MAX_BYTES,
    )
    out: list[Record] = []
    while (block := scanner.next_block(max_records, size=size)) is not None:
        refused = {item.index: item for item in block.refused}
        good: Iterator[tuple[bytes, int]]
        if kind == "csv":
            good = iter(zip(_split_csv_data(block, dialect), block.lines, strict=True))
        else:
            lines = block.data.split(b"\n")[:-1]
            numbered = [
                (raw + b"\n", block.lines[0] + offset)
                for offset, raw in enumerate(lines)
                if raw.strip(b" \t\r\f\v")
            ]
            good = iter(numbered)
        for index in range(block.first, block.first + block.count):
            if index in refused:
                out.append(("refused", index, refused[index].line, b""))
            else:
                raw, line = next(good)
                out.append(("ok", index, line, _body(raw)))
        assert next(good, None) is None
    return out


csv_bytes = st.lists(
    st.sampled_from([b"a", b"1", b",", b'"', b'""', b"\n", b"\r\n", b"\r", b" ", b"xyz"]),
    max_size=60,
).map(b"".join)
jsonl_bytes = st.lists(
    st.sampled_from([b'{"a":1}', b"\n", b"  ", b"\r\n", b"[", b"x" * 30, b'"']), max_size=40
).map(b"".join)


@settings(max_examples=600, deadline=None)
@given(csv_bytes, st.integers(min_value=1, max_value=64))
def test_csv_records_are_the_models_for_any_bytes_and_block_size(data: bytes, size: int) -> None:
    expected = model_csv(data, CsvDialect(max_record_lines=MAX_LINES), MAX_BYTES)
    assert scan(data, size=size) == expected


@settings(max_examples=300, deadline=None)
@given(jsonl_bytes, st.integers(min_value=1, max_value=64))
def test_jsonl_records_are_the_models_for_any_bytes_and_block_size(data: bytes, size: int) -> None:
    assert scan(data, "jsonl", size=size) == model_jsonl(data, MAX_BYTES)


@settings(max_examples=300, deadline=None)
@given(csv_bytes, st.integers(min_value=1, max_value=64), st.integers(min_value=1, max_value=5))
def test_a_scan_from_any_record_boundary_gives_the_same_records(
    data: bytes, size: int, limit: int
) -> None:
    whole = scan(data, size=size)
    handle = io.BytesIO(data)
    scanner = RecordScanner(
        handle, "csv", CsvDialect(max_record_lines=MAX_LINES), max_record_bytes=MAX_BYTES
    )
    starts = [Checkpoint(0, 0, 1)]
    while scanner.next_block(limit, size=size) is not None:
        starts.append(Checkpoint(scanner.offset, scanner.record, scanner.line))
    for start in starts:
        assert scan(data, size=size, start=start) == whole[start.record :]


@settings(max_examples=200, deadline=None)
@given(csv_bytes, st.integers(min_value=0, max_value=20))
def test_skip_passes_over_exactly_the_records_it_says(data: bytes, count: int) -> None:
    whole = scan(data)
    handle = io.BytesIO(data)
    scanner = RecordScanner(
        handle, "csv", CsvDialect(max_record_lines=MAX_LINES), max_record_bytes=MAX_BYTES
    )
    passed = scanner.skip(count)
    assert passed == min(count, len(whole))
    rest = scan(data, start=Checkpoint(scanner.offset, scanner.record, scanner.line))
    assert rest == whole[passed:]


@settings(max_examples=300, deadline=None)
@given(csv_bytes)
def test_pyarrow_reads_one_row_per_accepted_record(data: bytes) -> None:
    # pyarrow ends a row at a lone CR: the reader hides it behind a stand-in, as here.
    accepted = [
        re.sub(rb"\r(?!\n)", "\ue000".encode(), raw) + b"\n"
        for kind, _, _, raw in scan(data)
        if kind == "ok"
    ]
    if not accepted:
        return
    names = [f"c{i}" for i in range(3)]
    rows: list[object] = []

    def parse(raw: bytes) -> list[dict[str, str]]:
        found: list[dict[str, str]] = []
        invalid: list[int] = []

        def on_invalid(row: pa_csv.InvalidRow) -> str:
            invalid.append(row.number)
            return "skip"

        table = pa_csv.read_csv(
            io.BytesIO(raw),
            read_options=pa_csv.ReadOptions(column_names=names, use_threads=False),
            parse_options=pa_csv.ParseOptions(
                newlines_in_values=True,
                ignore_empty_lines=True,
                invalid_row_handler=on_invalid,
            ),
            convert_options=pa_csv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False
            ),
        )
        found.extend(table.to_pylist())
        return found + [{"invalid": str(number)} for number in invalid]

    for raw in accepted:
        one = parse(raw)
        assert len(one) == 1, (raw, one)
        rows.extend(one)
    together = parse(b"".join(accepted))
    assert len(together) == len(accepted)


def test_a_lone_cr_in_a_quoted_value_is_part_of_it() -> None:
    data = b'1,"a\rb"\n2,x\n3,y\n'
    assert [(kind, line, raw) for kind, _, line, raw in scan(data)] == [
        ("ok", 1, b'1,"a\rb"'),
        ("ok", 2, b"2,x"),
        ("ok", 3, b"3,y"),
    ]


def test_an_unbalanced_quote_costs_one_line() -> None:
    data = b'1,"abc\n2,"hello"\n3,w\n4,"z\nz"\n'
    assert [(kind, line) for kind, _, line, _ in scan(data)] == [
        ("refused", 1),
        ("ok", 2),
        ("ok", 3),
        ("ok", 4),
    ]


def test_a_quoted_value_may_span_at_most_max_record_lines() -> None:
    data = b'1,"a\nb\nc"\n2,x\n'
    assert [kind for kind, *_ in scan(data, dialect=CsvDialect(max_record_lines=3))] == [
        "ok",
        "ok",
    ]
    short = scan(data, dialect=CsvDialect(max_record_lines=2))
    assert [(kind, line) for kind, _, line, _ in short] == [
        ("refused", 1),
        ("ok", 2),
        ("ok", 3),
        ("ok", 4),
    ]


def test_the_index_counts_records_and_its_checkpoints_are_boundaries() -> None:
    rows = b"".join(b'%d,"v\n%d"\n' % (i, i) for i in range(500))
    data = b"id,v\n" + rows
    handle = io.BytesIO(data)
    handle.seek(5)
    index = index_records(RecordScanner(handle, "csv", offset=5, line=2), every=100)
    assert index.records == 500
    assert index.checkpoints[0] == Checkpoint(5, 0, 2)
    assert index.checkpoints[-1].record == 500
    for point in index.checkpoints:
        assert point.line == 2 + 2 * point.record
        assert data[point.offset :].startswith(b"%d," % point.record) or point.record == 500


@pytest.mark.parametrize(
    ("dialect", "data", "fields"),
    [
        (CsvDialect(delimiter="\t"), b'a\t"b\tc"\n', ["a", "b\tc"]),
        (CsvDialect(delimiter=";", quote="'"), b"a;'b;\nc'\n", ["a", "b;\nc"]),
        (CsvDialect(quote=None), b'a,"b\n', ["a", '"b']),
    ],
)
def test_dialects(dialect: CsvDialect, data: bytes, fields: list[str]) -> None:
    (record,) = scan(data, dialect=dialect)
    assert record[0] == "ok"
    assert record[3] == data.rstrip(b"\n")
    del fields


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delimiter": ",,"}, r"delimiter must be one ASCII character"),
        ({"quote": "é"}, r"quote must be one ASCII character"),
        ({"delimiter": "\n"}, r"cannot be a line end"),
        ({"delimiter": '"'}, r"delimiter and quote are the same"),
        ({"max_record_lines": 0}, r"max_record_lines must be >= 1"),
    ],
)
def test_bad_dialects_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CsvDialect(**kwargs)  # type: ignore[arg-type]
