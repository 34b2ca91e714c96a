"""Validation and conversion of raw records to the stream's schema.

Each chunk is converted column by column with pyarrow (the fast path: one vectorised cast
per flat column; a nested column is cast field by field, element by element, still
vectorised). When a column of a chunk does not convert, the chunk is converted again
record by record, and every record that does not fit becomes a dead letter naming the
column (inside a nested column, the path to the value: ``user.age``, ``tags[2]``,
``scores['math']``), the value and the expected type; the other records go on. So a
malformed record costs one slow chunk, never the stream, and is never lost.

Conversion rules (text from CSV, JSON values, or typed Parquet columns):

* a missing value, JSON ``null``, or text in ``NULL_TEXT`` (for a column that is not
  text) is null; text in ``ConversionOptions.null_values`` is null in every column;
* ``BIGINT`` takes integers, and floats or text with an integral value;
* ``DOUBLE`` takes numbers and numeric text; ``BOOLEAN`` takes booleans and
  ``true``/``false`` text (any case);
* a JSON string stays text, as Spark's JSON reader keeps it: a top-level ``BIGINT``,
  ``DOUBLE`` or ``BOOLEAN`` column refuses it (``"00037"`` is not 37), unless it is null
  text;
* ``TIMESTAMP`` takes datetimes and text in ISO 8601 or one of ``TIMESTAMP_FORMATS`` (or
  ``ConversionOptions.timestamp_format``, tried first); without an offset the time is UTC;
* ``DATE`` takes dates and ISO (``2024-01-31``) or ``YYYY/MM/DD`` text;
* ``STRING`` takes text (numbers and booleans as text; JSON objects and arrays as their
  JSON text);
* ``STRUCT`` takes objects: each field converted by these rules, a missing field is null,
  and a field that is not in the ``STRUCT`` is refused unless it is null;
* ``ARRAY`` takes arrays, each element converted; ``MAP`` takes objects, each key and
  value converted;
* a JSON object with a field that is not a column is refused.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]

from .._arrow_literals import null_scalar, string_array
from ._dead_letter import DeadLetter

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from ._formats import RawChunk

__all__ = [
    "DEAD_LETTER_COLUMN",
    "NULL_TEXT",
    "TIMESTAMP_FORMATS",
    "ConversionError",
    "ConversionOptions",
    "Converted",
    "Validator",
    "aligned_batch",
    "validate",
]

NULL_TEXT = frozenset(
    {"", "NA", "N/A", "n/a", "NaN", "nan", "-NaN", "-nan", "NULL", "null", "None", "<NA>", "#N/A"}
)
"""Text read as null in a column that is not text (pyarrow's CSV defaults)."""

TIMESTAMP_FORMATS: Final = ("%Y/%m/%d %H:%M:%S", "%Y/%m/%d %H:%M", "%Y/%m/%d")
"""Timestamp text read besides ISO 8601, as ``strptime`` formats, tried in this order."""

DATE_FORMATS: Final = ("%Y/%m/%d",)
"""Date text read besides ISO 8601 (``2024-01-31``), as ``strptime`` formats."""

_TRUE = frozenset({"true", "t", "yes", "1"})
_FALSE = frozenset({"false", "f", "no", "0"})
_CAST_ERRORS = (
    pa.ArrowInvalid,
    pa.ArrowNotImplementedError,
    pa.ArrowTypeError,
    OverflowError,
    TypeError,
)
_VALUE_PREVIEW = 100
"""Characters of a value's ``repr`` a dead letter's reason shows, at most."""


class ConversionError(ValueError):
    """One value does not fit its column's type."""


@dataclass(frozen=True, slots=True)
class ConversionOptions:
    """How text becomes values, beyond the rules of the module (picklable, immutable).

    Attributes:
        null_values: more text read as null (compared after trimming spaces), in every
            column, text columns included; ``NULL_TEXT`` is null in the columns that are
            not text whatever this holds.
        timestamp_format: a ``strptime`` format (``"%d.%m.%Y %H:%M"``) tried first for
            ``TIMESTAMP`` text, before ISO 8601 and ``TIMESTAMP_FORMATS``: pyarrow parses
            it vectorised (``pyarrow.compute.strptime``, which knows every directive but
            ``%f``), and Python's ``datetime.strptime`` record by record where that fails.
            With ``%z`` the text carries its offset, else it is UTC. ``None``: ISO 8601
            and ``TIMESTAMP_FORMATS`` only.
    """

    null_values: frozenset[str] = frozenset()
    timestamp_format: str | None = None

    def __post_init__(self) -> None:
        if self.timestamp_format is not None:
            _check_format(self.timestamp_format)

    @property
    def timestamp_formats(self) -> tuple[str, ...]:
        """Every ``strptime`` format ``TIMESTAMP`` text is tried with, in order."""
        given = () if self.timestamp_format is None else (self.timestamp_format,)
        return given + TIMESTAMP_FORMATS


def _check_format(text: str) -> None:
    """Refuse a format that has no directive or that ``strptime`` cannot read back.

    Raises:
        ValueError: ``text`` is not a usable ``strptime`` format.
    """
    if "%" not in text:
        raise ValueError(
            f"timestamp format {text!r} has no strptime directive (write e.g. "
            "'%d/%m/%Y %H:%M:%S' for 31/01/2024 13:45:00)"
        )
    moment = dt.datetime(2024, 1, 31, 13, 45, 7, tzinfo=dt.UTC)
    try:
        dt.datetime.strptime(moment.strftime(text), text)
    except ValueError as exc:
        raise ValueError(
            f"timestamp format {text!r} is not a valid strptime format: {exc}"
        ) from None


class _Rules:
    """``ConversionOptions`` made ready: the null text, as sets and as Arrow arrays.

    Attributes:
        options: the options.
        null_text: text that is null in a column that is not text.
        text_null: text that is null in a text column too.
    """

    __slots__ = ("_null_array", "_text_null_array", "null_text", "options", "text_null")

    def __init__(self, options: ConversionOptions) -> None:
        self.options = options
        self.null_text = NULL_TEXT | options.null_values
        self.text_null = options.null_values
        self._null_array = string_array(sorted(self.null_text))  # no pandas (_arrow_literals)
        self._text_null_array = string_array(sorted(self.text_null)) if self.text_null else None

    def null_array(self, text: bool) -> pa.Array | None:
        """The null text of a text column (``None``: there is none) or of another column."""
        return self._text_null_array if text else self._null_array

    def is_null(self, value: object, data_type: pa.DataType) -> bool:
        """Whether ``value`` is null in a column of ``data_type`` (before conversion)."""
        if value is None:
            return True
        if isinstance(value, str):
            if _is_text(data_type):
                return bool(self.text_null) and value.strip() in self.text_null
            return value.strip() in self.null_text
        return isinstance(value, float) and math.isnan(value) and not _is_float(data_type)


def _is_text(data_type: pa.DataType) -> bool:
    return bool(pa.types.is_string(data_type) or pa.types.is_large_string(data_type))


def _is_float(data_type: pa.DataType) -> bool:
    return bool(pa.types.is_floating(data_type))


def _is_nested(data_type: pa.DataType) -> bool:
    return bool(
        pa.types.is_struct(data_type)
        or pa.types.is_list(data_type)
        or pa.types.is_large_list(data_type)
        or pa.types.is_fixed_size_list(data_type)
        or pa.types.is_map(data_type)
    )


def _has_map(data_type: pa.DataType) -> bool:
    if pa.types.is_map(data_type):
        return True
    if pa.types.is_struct(data_type):
        return any(_has_map(field.type) for field in data_type)
    if _is_nested(data_type):
        return _has_map(data_type.value_type)
    return False


def _has_text(data_type: pa.DataType) -> bool:
    if _is_text(data_type):
        return True
    if pa.types.is_struct(data_type):
        return any(_has_text(field.type) for field in data_type)
    if pa.types.is_map(data_type):
        return _has_text(data_type.key_type) or _has_text(data_type.item_type)
    if _is_nested(data_type):
        return _has_text(data_type.value_type)
    return False


# -- one value at a time (the slow path, and inference) ----------------------------------

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return "JSON object"
    if isinstance(value, list):
        return "JSON array"
    return type(value).__name__


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
            pass
        try:
            number = float(text)  # "12.0" and "1e3" are integers
        except ValueError:
            raise ConversionError("not an integer") from None
        if number.is_integer():
            return int(number)
        raise ConversionError("not an integral number") from None
    raise ConversionError(f"a {_kind(value)} is not an integer")


def _to_float(value: object) -> float:
    if isinstance(value, bool):
        raise ConversionError("a boolean is not a number")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return float(value.strip())
    raise ConversionError(f"a {_kind(value)} is not a number")


def _to_str(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"  # as pyarrow casts booleans, and as JSON writes them
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, default=str)
    if isinstance(value, dt.date):  # datetimes too
        return value.isoformat()
    raise ConversionError(f"a {_kind(value)} is not text")


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


def _to_timestamp(value: object, formats: Sequence[str] = (), first: bool = False) -> dt.datetime:
    """A UTC datetime from a datetime or text: ISO 8601, or one of ``formats``.

    Args:
        value: the value.
        formats: ``strptime`` formats tried after ISO 8601.
        first: try ``formats[0]`` before ISO 8601 (a format the user gave).

    Raises:
        ConversionError: ``value`` is not a timestamp in any of these forms.
    """
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, str):
        moment = _parse_moment(value.strip(), formats, first)
    else:
        raise ConversionError(f"a {_kind(value)} is not a timestamp")
    if moment.tzinfo is None:
        return moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC)


def _parse_moment(text: str, formats: Sequence[str], first: bool) -> dt.datetime:
    ordered = list(formats)
    if first and ordered:
        try:
            return dt.datetime.strptime(text, ordered.pop(0))
        except ValueError:
            pass
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        pass
    for form in ordered:
        try:
            return dt.datetime.strptime(text, form)
        except ValueError:
            continue
    shown = ", ".join(repr(form) for form in formats)
    raise ConversionError(f"not an ISO 8601 timestamp{' nor ' + shown if shown else ''}")


def _to_date(value: object) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return dt.date.fromisoformat(text)
        except ValueError:
            pass
        for form in DATE_FORMATS:
            try:
                return dt.datetime.strptime(text, form).date()
            except ValueError:
                continue
        raise ConversionError("not an ISO 8601 date nor YYYY/MM/DD")
    raise ConversionError(f"a {_kind(value)} is not a date")


class _Misfit(ValueError):
    """A value inside a nested column does not fit: where it is, what it is and why."""

    def __init__(self, path: str, value: object, data_type: pa.DataType, reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.value = value
        self.data_type = data_type
        self.reason = reason


def _preview(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _VALUE_PREVIEW else text[:_VALUE_PREVIEW] + "…"


def _inner(
    convert: Callable[[object], object],
    value: object,
    step: str,
    data_type: pa.DataType,
    rules: _Rules,
) -> object:
    """``convert(value)``, or null; a failure names the path to the value (``_Misfit``)."""
    if rules.is_null(value, data_type):
        return None
    try:
        return convert(value)
    except _Misfit as misfit:
        raise _Misfit(step + misfit.path, misfit.value, misfit.data_type, misfit.reason) from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise _Misfit(step, value, data_type, str(exc)) from None


def _struct_converter(data_type: pa.DataType, rules: _Rules) -> Callable[[object], object]:
    fields = [(field.name, field.type, _converter(field.type, rules)) for field in data_type]
    known = {field.name for field in data_type}

    def convert(value: object) -> dict[str, object]:
        if not isinstance(value, dict):
            raise ConversionError(f"a {_kind(value)} is not an object")
        extra = [str(key) for key, item in value.items() if key not in known and item is not None]
        if extra:
            raise ConversionError(f"unexpected field(s): {', '.join(extra)}")
        return {
            name: _inner(convert_field, value.get(name), f".{name}", field_type, rules)
            for name, field_type, convert_field in fields
        }

    return convert


def _list_converter(data_type: pa.DataType, rules: _Rules) -> Callable[[object], object]:
    item_type = data_type.value_type
    convert_item = _converter(item_type, rules)

    def convert(value: object) -> list[object]:
        if not isinstance(value, list | tuple):
            raise ConversionError(f"a {_kind(value)} is not an array")
        return [
            _inner(convert_item, item, f"[{index}]", item_type, rules)
            for index, item in enumerate(value)
        ]

    return convert


def _map_entries(value: object) -> Iterable[tuple[object, object]]:
    if isinstance(value, dict):
        return value.items()
    if isinstance(value, list) and all(
        isinstance(entry, tuple) and len(entry) == 2 for entry in value
    ):  # a map as pyarrow's to_pylist gives it
        return value
    raise ConversionError(f"a {_kind(value)} is not an object")


def _map_converter(data_type: pa.DataType, rules: _Rules) -> Callable[[object], object]:
    key_type, item_type = data_type.key_type, data_type.item_type
    convert_key = _converter(key_type, rules)
    convert_item = _converter(item_type, rules)

    def convert(value: object) -> list[tuple[object, object]]:
        entries = []
        for key, item in _map_entries(value):
            step = f"[{key!r}]"
            converted = _inner(convert_key, key, step, key_type, rules)
            if converted is None:
                raise _Misfit(step, key, key_type, "a map key cannot be null")
            entries.append((converted, _inner(convert_item, item, step, item_type, rules)))
        return entries

    return convert


def _json_string_refused(value: object) -> object:
    raise ConversionError("a JSON string stays text (the column would need STRING)")


def _json_converter(data_type: pa.DataType, rules: _Rules) -> Callable[[object], object]:
    """``_converter`` for a top-level JSON value: no JSON string becomes a number."""
    convert = _converter(data_type, rules)
    if not _refuses_json_strings(data_type):
        return convert
    return lambda value: _json_string_refused(value) if isinstance(value, str) else convert(value)


def _refuses_json_strings(data_type: pa.DataType) -> bool:
    return bool(
        pa.types.is_int64(data_type)
        or pa.types.is_float64(data_type)
        or pa.types.is_boolean(data_type)
    )


def _converter(data_type: pa.DataType, rules: _Rules) -> Callable[[object], object]:
    """Converts one non-null value to ``data_type`` as a Python value, or raises."""
    if pa.types.is_int64(data_type):
        return _to_int
    if pa.types.is_float64(data_type):
        return _to_float
    if _is_text(data_type):
        return _to_str
    if pa.types.is_boolean(data_type):
        return _to_bool
    if pa.types.is_timestamp(data_type):
        options = rules.options
        return functools.partial(
            _to_timestamp,
            formats=options.timestamp_formats,
            first=options.timestamp_format is not None,
        )
    if pa.types.is_date(data_type):
        return _to_date
    if pa.types.is_struct(data_type):
        return _struct_converter(data_type, rules)
    if pa.types.is_map(data_type):
        return _map_converter(data_type, rules)
    if _is_nested(data_type):
        return _list_converter(data_type, rules)
    return lambda value: pa.scalar(value, type=data_type).as_py()


# -- whole columns (the fast path) --------------------------------------------------------


def _cast_column(
    column: pa.ChunkedArray | pa.Array, target: pa.DataType, rules: _Rules
) -> pa.ChunkedArray | pa.Array:
    """Vectorised conversion; raises an Arrow error when any value does not fit.

    A flat column is cast whole; a nested one chunk by chunk, child by child.
    """
    if column.type == target and not (rules.text_null and _has_text(target)):
        return column
    if not _is_nested(target) and not _is_nested(column.type):
        return _cast_flat(column, target, rules)
    if isinstance(column, pa.ChunkedArray):
        return pa.chunked_array(
            [_cast_nested(chunk, target, rules) for chunk in column.chunks], type=target
        )
    return _cast_nested(column, target, rules)


def _cast_flat(
    column: pa.ChunkedArray | pa.Array, target: pa.DataType, rules: _Rules
) -> pa.ChunkedArray | pa.Array:
    source = column.type
    if _is_text(source):
        nulls = rules.null_array(_is_text(target))
        if _is_text(target):
            if nulls is not None:  # null text is compared trimmed; other text is kept as is
                null = pc.is_in(pc.utf8_trim_whitespace(column), value_set=nulls)
                column = pc.if_else(null, null_scalar(source), column)
            return column if source == target else pc.cast(column, target)
        column = pc.utf8_trim_whitespace(column)
        if nulls is not None:
            column = pc.if_else(pc.is_in(column, value_set=nulls), null_scalar(source), column)
        if pa.types.is_boolean(target):
            column = pc.utf8_lower(column)
        elif pa.types.is_timestamp(target):
            return _parse_timestamps(column, target, rules)
        elif pa.types.is_date(target):
            return _parse_dates(column, target)
    elif pa.types.is_boolean(source) != pa.types.is_boolean(target) and not _is_text(target):
        # pyarrow casts True to 1 and 2 to True; the rules refuse both (record by record).
        raise pa.ArrowInvalid(f"{source} does not convert to {target}")
    if pa.types.is_timestamp(source) and pa.types.is_timestamp(target):
        if source.tz is None:
            column = pc.assume_timezone(column, timezone="UTC")
        return pc.cast(column, target)
    return pc.cast(column, target, safe=True)


def _parse_timestamps(
    column: pa.ChunkedArray | pa.Array, target: pa.DataType, rules: _Rules
) -> pa.ChunkedArray | pa.Array:
    """Text to ``target`` in the first form every value has (else the error of the last)."""
    options = rules.options
    formats = list(options.timestamp_formats)
    attempts: list[Callable[[], pa.ChunkedArray | pa.Array]] = []
    if options.timestamp_format is not None:
        given = formats.pop(0)
        attempts.append(lambda: _strptime(column, given, target))
    attempts.append(lambda: pc.cast(column, target))  # ISO 8601 with an offset
    attempts.append(  # ISO 8601 without an offset: UTC
        lambda: pc.assume_timezone(pc.cast(column, pa.timestamp(target.unit)), timezone="UTC")
    )
    attempts += [functools.partial(_strptime, column, form, target) for form in formats]
    error: Exception | None = None
    for attempt in attempts:
        try:
            return attempt()
        except _CAST_ERRORS as exc:
            error = exc
    assert error is not None
    raise error


def _strptime(
    column: pa.ChunkedArray | pa.Array, form: str, target: pa.DataType
) -> pa.ChunkedArray | pa.Array:
    parsed = pc.strptime(column, format=form, unit=target.unit, error_is_null=False)
    if parsed.type.tz is None:
        parsed = pc.assume_timezone(parsed, timezone="UTC")
    return pc.cast(parsed, target)


def _parse_dates(
    column: pa.ChunkedArray | pa.Array, target: pa.DataType
) -> pa.ChunkedArray | pa.Array:
    try:
        return pc.cast(column, target)  # ISO 8601
    except _CAST_ERRORS as exc:
        error: Exception = exc
    for form in DATE_FORMATS:
        try:
            parsed = pc.strptime(column, format=form, unit="s", error_is_null=False)
        except _CAST_ERRORS as exc:
            error = exc
            continue
        return pc.cast(parsed, target)
    raise error


def _slice_values(array: pa.Array) -> tuple[pa.Array, pa.Array]:
    """A list or map array's offsets from 0 and the child values they point into."""
    offsets = array.offsets
    start = offsets[0]
    values = array.values.slice(start.as_py(), offsets[-1].as_py() - start.as_py())
    return pc.subtract(offsets, start), values


def _refuse(source: pa.DataType, target: pa.DataType) -> pa.ArrowInvalid:
    return pa.ArrowInvalid(f"{source} does not convert to {target}")


def _cast_nested(array: pa.Array, target: pa.DataType, rules: _Rules) -> pa.Array:
    source = array.type
    if pa.types.is_null(source):
        return pa.nulls(len(array), target)
    if pa.types.is_dictionary(source):
        return _cast_nested(array.dictionary_decode(), target, rules)
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(target):
        if not pa.types.is_struct(source):
            raise _refuse(source, target)
        children = {source.field(index).name: child for index, child in enumerate(array.flatten())}
        for name, child in children.items():
            if target.get_field_index(name) < 0 and child.null_count < len(child):
                raise pa.ArrowInvalid(f"field {name!r} is not in {target}")
        fields = list(target)
        converted = [
            _cast_column(children[field.name], field.type, rules)
            if field.name in children
            else pa.nulls(len(array), field.type)
            for field in fields
        ]
        return pa.StructArray.from_arrays(converted, fields=fields, mask=mask)
    if pa.types.is_map(target):
        if not pa.types.is_map(source):
            raise _refuse(source, target)
        offsets, entries = _slice_values(array)
        keys = _cast_column(entries.field(0), target.key_type, rules)
        items = _cast_column(entries.field(1), target.item_type, rules)
        if keys.null_count:
            raise pa.ArrowInvalid("a map key is null")
        return pa.MapArray.from_arrays(
            offsets.cast(pa.int32()), keys, items, type=target, mask=mask
        )
    if _is_nested(target):
        if pa.types.is_fixed_size_list(source):
            array = array.cast(pa.list_(source.value_field))
            source = array.type
        if not (pa.types.is_list(source) or pa.types.is_large_list(source)):
            raise _refuse(source, target)
        offsets, values = _slice_values(array)
        items = _cast_column(values, target.value_type, rules)
        return pa.ListArray.from_arrays(offsets.cast(pa.int32()), items, type=target, mask=mask)
    raise _refuse(source, target)  # a nested value for a flat column: record by record


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
            typed), or some of them: a column it lacks is null in every record (a file
            without that column, as Spark's ``unionByName(allowMissingColumns=True)``
            reads it). Text converts to ``BIGINT``, ``DOUBLE``, ``STRING``, ``BOOLEAN``,
            ``DATE`` and ``TIMESTAMP`` columns, JSON values to those and to ``STRUCT``,
            ``ARRAY`` and ``MAP`` columns; a column of another type takes values of that
            type.
        options: null text and timestamp forms (``ConversionOptions``); ``None``: the
            defaults.

    Pickles as its schema and options (what a Spark executor needs).

    Concurrency: one validator per reading thread.
    """

    def __init__(self, schema: pa.Schema, options: ConversionOptions | None = None) -> None:
        self._schema = schema
        self._options = options if options is not None else ConversionOptions()
        self._rules = _Rules(self._options)
        self._names = list(schema.names)
        self._converters = [_converter(field.type, self._rules) for field in schema]
        self._json_converters = [_json_converter(field.type, self._rules) for field in schema]
        self._fast_chunks = 0
        self._slow_chunks = 0

    def __reduce__(self) -> tuple[type[Validator], tuple[pa.Schema, ConversionOptions]]:
        return (Validator, (self._schema, self._options))

    @property
    def schema(self) -> pa.Schema:
        """The target schema."""
        return self._schema

    @property
    def options(self) -> ConversionOptions:
        """The null text and timestamp forms."""
        return self._options

    def convert(self, chunk: RawChunk) -> Converted:
        """Convert one chunk.

        Returns:
            The records that fit, and every refused record (the chunk's parse rejects
            plus every record that did not convert), each with its slot: together they
            are the chunk's ``count`` records. Each dead letter carries its record's
            number in the file (``DeadLetter.record``: ``chunk.first`` plus its slot).
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
        # Each dead letter carries its record's number: records may start on one line.
        rejects = [
            (
                slot,
                letter if letter.record is not None else replace(letter, record=chunk.first + slot),
            )
            for slot, letter in rejects
        ]
        every = not rejects and len(kept) == chunk.count
        return Converted(table, None if every else kept, rejects, chunk.count)

    def _convert_table(
        self, chunk: RawChunk, slots: list[int], rejects: list[tuple[int, DeadLetter]]
    ) -> tuple[pa.Table, list[int]]:
        table = chunk.table
        assert table is not None
        present = set(table.column_names)
        try:
            columns = [
                _cast_column(table.column(name), field.type, self._rules)
                if name in present
                else pa.nulls(table.num_rows, field.type)  # a file without the column
                for name, field in zip(self._names, self._schema, strict=True)
            ]
        except _CAST_ERRORS:
            self._slow_chunks += 1
            return self._convert_rows(chunk, table.to_pylist(), slots, chunk.positions, rejects)
        self._fast_chunks += 1
        return pa.Table.from_arrays(columns, schema=self._schema), slots

    def _json_column(self, values: list[object], target: pa.DataType) -> pa.Array:
        """A column of decoded JSON values as ``target`` (raises when one does not fit)."""
        if not _has_map(target):
            array = pa.array(values)
            if _refuses_json_strings(target) and pa.types.is_string(array.type):
                # JSON strings: refused (null text aside), record by record.
                raise ValueError("JSON strings in a column that is not text")
            return _cast_column(array, target, self._rules)
        # pyarrow reads an object as a STRUCT: a MAP is built from the Python values.
        convert = _converter(target, self._rules)
        return pa.array(
            [None if self._rules.is_null(value, target) else convert(value) for value in values],
            type=target,
        )

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
                self._json_column([record.get(name) for record in kept], field.type)
                for name, field in zip(self._names, self._schema, strict=True)
            ]
        except (*_CAST_ERRORS, ValueError):
            self._slow_chunks += 1
            return self._convert_rows(
                chunk, kept, kept_slots, positions, rejects, converters=self._json_converters
            )
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
        *,
        converters: list[Callable[[object], object]] | None = None,
    ) -> tuple[pa.Table, list[int]]:
        """The slow path: convert record by record, refusing the ones that do not fit.

        ``converters``: one per column (the JSON ones for decoded JSON records);
        ``None``: the text and typed columns' ones.
        """
        good: list[dict[str, object]] = []
        kept: list[int] = []
        rules = self._rules
        converters = self._converters if converters is None else converters
        fields = list(zip(self._names, self._schema, converters, strict=True))
        for row, slot, position in zip(rows, slots, positions, strict=True):
            converted: dict[str, object] = {}
            reason: str | None = None
            for name, field, convert in fields:
                value = row.get(name)
                if rules.is_null(value, field.type):
                    converted[name] = None
                    continue
                try:
                    converted[name] = convert(value)
                except _Misfit as misfit:
                    reason = (
                        f"column {name + misfit.path!r}: cannot convert "
                        f"{_preview(misfit.value)} to {misfit.data_type}: {misfit.reason}"
                    )
                    break
                except (ValueError, TypeError, OverflowError) as exc:
                    reason = (
                        f"column {name!r}: cannot convert {_preview(value)} to {field.type}: {exc}"
                    )
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
    options: ConversionOptions | None = None,
) -> pa.RecordBatch:
    """Convert one chunk to ``schema``: a pure function, to run wherever the chunk is read.

    Everything it takes and returns pickles and it keeps no state, so it can run in a
    Spark executor's Python worker on the chunks of a split.

    Args:
        chunk: records as read.
        schema: the columns ``chunk`` holds, with their target types.
        keep: the columns the batch carries (``None``: all of ``schema``'s).
        dead_column: the name of the dead-letter column.
        options: null text and timestamp forms; ``None``: the defaults.

    Returns:
        ``aligned_batch``: one row per record of the chunk, in order.
    """
    converted = Validator(schema, options).convert(chunk)
    return aligned_batch(converted, keep, dead_column=dead_column)
