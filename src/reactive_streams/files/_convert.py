"""Validation and conversion of raw records to the stream's schema.

Each chunk is converted column by column with pyarrow (the fast path: one vectorised cast
per column). When a column of a chunk does not convert, the chunk is converted again
record by record, and every record that does not fit becomes a dead letter naming the
column, the value and the expected type; the other records go on. So a malformed record
costs one slow chunk, never the stream, and is never lost.

Conversion rules (text from CSV, JSON values, or typed Parquet columns):

* a missing value, JSON ``null``, or text in ``NULL_TEXT`` (for a column that is not text)
  is null;
* ``BIGINT`` takes integers, and floats or text with an integral value;
* ``DOUBLE`` takes numbers and numeric text; ``BOOLEAN`` takes booleans and
  ``true``/``false`` text (any case);
* ``TIMESTAMP`` takes ISO 8601 text or datetimes; without an offset the time is UTC;
* ``DATE`` takes ISO dates; ``STRING`` takes text (and numbers or booleans, as text);
* a JSON object with a field that is not a column is refused.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from .._arrow_literals import null_scalar, string_array
from ._dead_letter import DeadLetter
from ._formats import sample

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ._formats import InputFile, RawChunk

__all__ = [
    "DEAD_LETTER_COLUMN",
    "NULL_TEXT",
    "ConversionError",
    "Converted",
    "Validator",
    "aligned_batch",
    "infer_file_schema",
    "infer_schema",
    "infer_type",
    "validate",
]

NULL_TEXT = frozenset(
    {"", "NA", "N/A", "n/a", "NaN", "nan", "-NaN", "-nan", "NULL", "null", "None", "<NA>", "#N/A"}
)
"""Text read as null in a column that is not text (pyarrow's CSV defaults)."""

_NULL_TEXT_VALUES = string_array(sorted(NULL_TEXT))  # no pandas import (_arrow_literals)

_TRUE = frozenset({"true", "t", "yes", "1"})
_FALSE = frozenset({"false", "f", "no", "0"})
_CAST_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError)


class ConversionError(ValueError):
    """One value does not fit its column's type."""


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _to_int(value: object) -> int:
    number = _to_any_int(value)
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise ConversionError("out of the BIGINT range")
    return number


def _to_any_int(value: object) -> int:
    if isinstance(value, bool):
        raise ConversionError("a boolean is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise ConversionError("not an integral number")
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            number = float(text)  # "12.0" is 12; "abc" raises ValueError
            if number.is_integer():
                return int(number)
            raise ConversionError("not an integral number") from None
    raise ConversionError(f"a {type(value).__name__} is not an integer")


def _to_float(value: object) -> float:
    if isinstance(value, bool):
        raise ConversionError("a boolean is not a number")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return float(value.strip())
    raise ConversionError(f"a {type(value).__name__} is not a number")


def _to_str(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return str(value)
    raise ConversionError(f"a {type(value).__name__} is not text")


def _to_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ConversionError("not a boolean")


def _to_timestamp(value: object) -> dt.datetime:
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, str):
        moment = dt.datetime.fromisoformat(value.strip())
    else:
        raise ConversionError(f"a {type(value).__name__} is not a timestamp")
    if moment.tzinfo is None:
        return moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC)


def _to_date(value: object) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        return dt.date.fromisoformat(value.strip())
    raise ConversionError(f"a {type(value).__name__} is not a date")


def _converter(data_type: pa.DataType) -> Callable[[object], object]:
    if pa.types.is_int64(data_type):
        return _to_int
    if pa.types.is_float64(data_type):
        return _to_float
    if pa.types.is_string(data_type):
        return _to_str
    if pa.types.is_boolean(data_type):
        return _to_bool
    if pa.types.is_timestamp(data_type):
        return _to_timestamp
    if pa.types.is_date32(data_type):
        return _to_date
    return lambda value: pa.scalar(value, type=data_type).as_py()


def _cast_column(column: pa.ChunkedArray | pa.Array, target: pa.DataType) -> pa.ChunkedArray:
    """Vectorised conversion; raises an Arrow error when any value does not fit."""
    if column.type == target:
        return column
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        if not pa.types.is_string(target):
            column = pc.if_else(
                pc.is_in(column, value_set=_NULL_TEXT_VALUES),
                null_scalar(column.type),
                column,
            )
            if pa.types.is_boolean(target):
                column = pc.utf8_lower(pc.utf8_trim_whitespace(column))
            elif not pa.types.is_timestamp(target):
                column = pc.utf8_trim_whitespace(column)
        if pa.types.is_timestamp(target):
            try:
                return pc.cast(column, target)
            except _CAST_ERRORS:
                naive = pc.cast(column, pa.timestamp(target.unit))
                return pc.assume_timezone(naive, timezone="UTC")
    if pa.types.is_timestamp(column.type) and pa.types.is_timestamp(target):
        if column.type.tz is None:
            column = pc.assume_timezone(column, timezone="UTC")
        return pc.cast(column, target)
    return pc.cast(column, target, safe=True)


@dataclass(slots=True)
class Converted:
    """A chunk converted to a schema: the records that fit, and the refused ones.

    Attributes:
        table: the records that fit, with exactly the schema, in order.
        slots: the chunk slot of each row of ``table``; ``None``: every record of the
            chunk fit, row ``i`` being slot ``i``.
        rejects: every refused record (not parsed, or not converted) as ``(slot, dead
            letter)``, in slot order.
        count: the records of the chunk.
    """

    table: pa.Table
    slots: list[int] | None
    rejects: list[tuple[int, DeadLetter]]
    count: int

    @property
    def dead_letters(self) -> list[DeadLetter]:
        """The refused records' dead letters, in order."""
        return [letter for _, letter in self.rejects]


class Validator:
    """Converts raw chunks to ``schema``, splitting off the records that do not fit.

    Args:
        schema: the target schema; a chunk's table holds these columns (as text, or
            typed). Text converts to ``BIGINT``, ``DOUBLE``, ``STRING``, ``BOOLEAN``,
            ``DATE`` and ``TIMESTAMP`` columns; a column of another type takes values of
            that type.

    Concurrency: one validator per reading thread.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self._schema = schema
        self._names = list(schema.names)
        self._converters = [_converter(field.type) for field in schema]
        self._fast_chunks = 0
        self._slow_chunks = 0

    @property
    def schema(self) -> pa.Schema:
        """The target schema."""
        return self._schema

    def convert(self, chunk: RawChunk) -> Converted:
        """Convert one chunk.

        Returns:
            The records that fit, and every refused record (the chunk's parse rejects
            plus every record that did not convert), each with its slot: together they
            are the chunk's ``count`` records.
        """
        rejects = list(chunk.rejects)
        slots = chunk.parsed_slots
        if chunk.table is not None:
            table, kept = self._convert_table(chunk, slots, rejects)
        elif chunk.records is not None:
            table, kept = self._convert_records(chunk, slots, rejects)
        else:
            table, kept = self._schema.empty_table(), []
        rejects.sort(key=lambda entry: entry[0])
        every = not rejects and len(kept) == chunk.count
        return Converted(table, None if every else kept, rejects, chunk.count)

    def _convert_table(
        self, chunk: RawChunk, slots: list[int], rejects: list[tuple[int, DeadLetter]]
    ) -> tuple[pa.Table, list[int]]:
        table = chunk.table
        assert table is not None
        try:
            columns = [
                _cast_column(table.column(name), field.type)
                for name, field in zip(self._names, self._schema, strict=True)
            ]
        except _CAST_ERRORS:
            self._slow_chunks += 1
            return self._convert_rows(chunk, table.to_pylist(), slots, chunk.positions, rejects)
        self._fast_chunks += 1
        return pa.Table.from_arrays(columns, schema=self._schema), slots

    def _convert_records(
        self, chunk: RawChunk, slots: list[int], rejects: list[tuple[int, DeadLetter]]
    ) -> tuple[pa.Table, list[int]]:
        records = chunk.records
        assert records is not None
        known = set(self._names)
        kept: list[dict[str, object]] = []
        kept_slots: list[int] = []
        positions: list[int] = []
        for record, slot, position in zip(records, slots, chunk.positions, strict=True):
            extra = [key for key in record if key not in known]
            if extra:
                reason = f"unexpected field(s): {', '.join(extra)}"
                rejects.append((slot, self._letter(chunk, position, reason, record)))
                continue
            kept.append(record)
            kept_slots.append(slot)
            positions.append(position)
        try:
            columns = [
                _cast_column(pa.array([record.get(name) for record in kept]), field.type)
                for name, field in zip(self._names, self._schema, strict=True)
            ]
        except _CAST_ERRORS:
            self._slow_chunks += 1
            return self._convert_rows(chunk, kept, kept_slots, positions, rejects)
        self._fast_chunks += 1
        return pa.Table.from_arrays(columns, schema=self._schema), kept_slots

    def _letter(self, chunk: RawChunk, position: int, reason: str, raw: object) -> DeadLetter:
        return DeadLetter(
            source=chunk.source,
            position=position,
            position_kind=chunk.position_kind,
            reason=reason,
            raw=raw,
        )

    def _convert_rows(
        self,
        chunk: RawChunk,
        rows: list[dict[str, object]],
        slots: list[int],
        positions: list[int],
        rejects: list[tuple[int, DeadLetter]],
    ) -> tuple[pa.Table, list[int]]:
        """The slow path: convert record by record, refusing the ones that do not fit."""
        good: list[dict[str, object]] = []
        kept: list[int] = []
        fields = list(zip(self._names, self._schema, self._converters, strict=True))
        for row, slot, position in zip(rows, slots, positions, strict=True):
            converted: dict[str, object] = {}
            reason: str | None = None
            for name, field, convert in fields:
                value = row.get(name)
                if value is None or (
                    isinstance(value, str)
                    and not pa.types.is_string(field.type)
                    and value.strip() in NULL_TEXT
                ):
                    converted[name] = None
                    continue
                if isinstance(value, float) and math.isnan(value):
                    converted[name] = value if pa.types.is_float64(field.type) else None
                    continue
                try:
                    converted[name] = convert(value)
                except (ValueError, TypeError, OverflowError) as exc:
                    reason = f"column {name!r}: cannot convert {value!r} to {field.type}: {exc}"
                    break
            if reason is None:
                good.append(converted)
                kept.append(slot)
            else:
                rejects.append((slot, self._letter(chunk, position, reason, row)))
        return pa.Table.from_pylist(good, schema=self._schema), kept

    @property
    def slow_chunks(self) -> int:
        """Chunks that needed the record-by-record path (they held malformed records)."""
        return self._slow_chunks


DEAD_LETTER_COLUMN: Final = "_dead_letter"
"""The column ``validate`` adds: a refused record's dead letter as JSON, else null."""


def aligned_batch(
    converted: Converted,
    keep: Sequence[str] | None = None,
    *,
    dead_column: str = DEAD_LETTER_COLUMN,
) -> pa.RecordBatch:
    """One row per record of the chunk: its converted columns, or nulls and its dead letter.

    Args:
        converted: a chunk as ``Validator.convert`` returned it.
        keep: the columns to carry, in the schema's order (``None``: all of them).
        dead_column: the name of the dead-letter column (string: the dead letter as one
            line of JSON for a refused record, null for the others).

    Returns:
        A batch of ``converted.count`` rows: so an offset into a split counts records,
        whether they fit or not.
    """
    table = converted.table if keep is None else converted.table.select(list(keep))
    size = converted.count
    if converted.slots is None:
        columns = [column.combine_chunks() for column in table.columns]
        dead = pa.nulls(size, pa.string())
    else:
        index: list[int | None] = [None] * size
        for row, slot in enumerate(converted.slots):
            index[slot] = row
        taken = table.take(pa.array(index, pa.int64()))
        columns = [column.combine_chunks() for column in taken.columns]
        texts: list[str | None] = [None] * size
        for slot, letter in converted.rejects:
            texts[slot] = letter.to_json()
        dead = pa.array(texts, pa.string())
    schema = table.schema.append(pa.field(dead_column, pa.string()))
    return pa.RecordBatch.from_arrays([*columns, dead], schema=schema)


def validate(
    chunk: RawChunk,
    schema: pa.Schema,
    *,
    keep: Sequence[str] | None = None,
    dead_column: str = DEAD_LETTER_COLUMN,
) -> pa.RecordBatch:
    """Convert one chunk to ``schema``: a pure function, to run wherever the chunk is read.

    Everything it takes and returns pickles and it keeps no state, so it can run in a
    Spark executor's Python worker on the chunks of a split.

    Args:
        chunk: records as read.
        schema: the columns ``chunk`` holds, with their target types.
        keep: the columns the batch carries (``None``: all of ``schema``'s).
        dead_column: the name of the dead-letter column.

    Returns:
        ``aligned_batch``: one row per record of the chunk, in order.
    """
    return aligned_batch(Validator(schema).convert(chunk), keep, dead_column=dead_column)


INFERENCE_SHARE = 0.9
"""A column gets a type when at least this share of its sampled non-null values fit it."""

INFERENCE_SAMPLE = 10_000
"""Values per column looked at to infer its type."""


def _to_int_strict(value: object) -> int:
    # For inference only: "12.0" or 12.0 makes a DOUBLE column, or a later "12.5" would be
    # refused; conversion itself still accepts integral floats in a BIGINT column.
    if isinstance(value, float) or (
        isinstance(value, str) and not value.strip().lstrip("+-").isdigit()
    ):
        raise ConversionError("not an integer literal")
    return _to_int(value)


def _to_bool_strict(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConversionError("not a boolean")


def _to_date_strict(value: object) -> dt.date:
    if isinstance(value, str) and len(value.strip()) == 10:
        return dt.date.fromisoformat(value.strip())
    raise ConversionError("not a date")


_LADDER: tuple[tuple[pa.DataType, Callable[[object], object]], ...] = (
    (pa.int64(), _to_int_strict),
    (pa.float64(), _to_float),
    (pa.date32(), _to_date_strict),
    (pa.timestamp("us", tz="UTC"), _to_timestamp),
    (pa.bool_(), _to_bool_strict),
)


def infer_type(values: list[object]) -> pa.DataType:
    """The most specific type that most of ``values`` fit (text when none does).

    Null values and null text (``NULL_TEXT``) are ignored. A type is chosen when at least
    ``INFERENCE_SHARE`` of the rest convert to it, so a few malformed values in the sample
    do not turn a numeric column into text: they become dead letters instead.
    """
    present = [
        value
        for value in values[:INFERENCE_SAMPLE]
        if value is not None and not (isinstance(value, str) and value.strip() in NULL_TEXT)
    ]
    if not present:
        return pa.string()
    for data_type, convert in _LADDER:
        fits = 0
        for value in present:
            try:
                convert(value)
            except (ValueError, TypeError, OverflowError):
                continue
            fits += 1
        if fits >= INFERENCE_SHARE * len(present):
            return data_type
    return pa.string()


def infer_schema(names: list[str], rows: list[dict[str, object]]) -> pa.Schema:
    """Infer each column's type from sample ``rows`` (``infer_type``)."""
    return pa.schema(
        [pa.field(name, infer_type([row.get(name) for row in rows])) for name in names]
    )


def infer_file_schema(item: InputFile) -> pa.Schema:
    """The schema of one file: Parquet's own, or inferred from a sample of its records.

    CSV and JSON Lines types come from the first ``SAMPLE_BYTES`` of the file
    (``infer_schema``): a column takes the most specific type that nearly all its values
    fit, so a few malformed values become dead letters instead of turning the column into
    text.

    Raises:
        OSError: the file cannot be read.
        FormatError: it cannot be read as its format.
        pyarrow.ArrowException: a Parquet file is not valid.
    """
    if item.format == "parquet":
        return pq.read_schema(item.path).remove_metadata()
    names, records = sample(item)
    return infer_schema(names, records)
