"""Schema inference: a type for each column from a sample of every file, widened across them.

Each file gives a schema: a Parquet file its own (its footer), a CSV or JSON Lines file one
inferred from the records at its head (``infer_schema``), within a budget:

* per file, its first ``INFERENCE_SAMPLE`` records (10,000), and at most ``SAMPLE_BYTES``
  (4 MiB) of it;
* in total about ``SAMPLE_TOTAL_RECORDS`` (100,000): with more than 10 text files, each
  gives an equal share of them, but never fewer than its first ``SAMPLE_MIN_RECORDS``
  (100).

The files' schemas are then merged column by column, by name (columns may come in any
order in each file; a column new in a later file comes after the others), each column
taking the narrowest type every file's values fit (``widen_type``): ``BIGINT`` and
``DOUBLE`` make ``DOUBLE``, ``DATE`` and ``TIMESTAMP`` make ``TIMESTAMP``, two
``STRUCT`` types make one with the fields of both, and any other two types make
``STRING`` (the last resort: every value converts to text). A column with no value in any
sample is ``STRING``.

Within one sample a column takes the most specific type that at least ``INFERENCE_SHARE``
(90%) of its values fit, widened so that no value that fits the wider type of the same
family is refused (one ``4.5`` among integers makes a ``DOUBLE``; one ``2024-01-31
10:00`` among dates a ``TIMESTAMP``): so a few malformed values become dead letters
instead of turning the column into text. The ladder, most specific first: ``BIGINT``
(integer literals only: ``12.0`` makes a ``DOUBLE``), ``DOUBLE``, ``DATE`` (ISO 8601 or
``YYYY/MM/DD``), ``TIMESTAMP`` (ISO 8601, ``TIMESTAMP_FORMATS``, or the format of the
options), ``BOOLEAN`` (``true``/``false``), else ``STRING``.

Inference never changes a JSON value's type, as Spark's JSON reader keeps it: a JSON
string stays text however it looks (``"00037"`` and ``"0612345678"`` are ``STRING``, never
``BIGINT``), and only JSON numbers make ``BIGINT`` or ``DOUBLE``, only JSON booleans
``BOOLEAN``. JSON has no type for time, so a JSON string may still make a ``DATE`` or
``TIMESTAMP`` column when its text is one (it reads back as the same instant).

JSON values may nest. An array is an ``ARRAY`` of the type inferred from all its elements.
An object is a ``STRUCT`` with one field per key seen at that place in the sample (in the
order first seen; each field inferred on its own), unless the sample shows more than
``MAP_MIN_KEYS`` (50) distinct keys there and their values all widen to one type that is
not ``STRING`` (or are all text): then it is a ``MAP<STRING, type>`` (ids or dates as
keys, say, rather than field names). Nesting deeper than ``MAX_DEPTH`` levels is
``STRING`` (the JSON text).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from typing import TYPE_CHECKING, Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from ._convert import (
    ConversionError,
    ConversionOptions,
    _Rules,
    _to_bool,
    _to_date,
    _to_float,
    _to_int,
    _to_timestamp,
)
from ._dead_letter import quoted
from ._formats import SAMPLE_BYTES, FormatError, header, sample

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from ._formats import InputFile

__all__ = [
    "INFERENCE_SAMPLE",
    "INFERENCE_SHARE",
    "MAP_MIN_KEYS",
    "MAX_DEPTH",
    "SAMPLE_MIN_RECORDS",
    "SAMPLE_TOTAL_RECORDS",
    "infer_file_schema",
    "infer_files_schema",
    "infer_schema",
    "infer_type",
    "widen_type",
]

INFERENCE_SHARE: Final = 0.9
"""A column gets a type when at least this share of its sampled non-null values fit it."""

INFERENCE_SAMPLE: Final = 10_000
"""Records of one file (and values of one nested place) looked at to infer types, at most."""

SAMPLE_TOTAL_RECORDS: Final = 100_000
"""Records of all the text files together looked at, about (shared evenly among them)."""

SAMPLE_MIN_RECORDS: Final = 100
"""Records of each text file looked at, at least, however many files there are."""

MAP_MIN_KEYS: Final = 50
"""An object with more distinct keys than this in the sample may be a ``MAP`` (see above)."""

MAX_DEPTH: Final = 32
"""Levels of nesting inferred; deeper values are ``STRING`` (their JSON text)."""


def _to_int_strict(value: object) -> object:
    # For inference only: "12.0" or 12.0 makes a DOUBLE column, or a later "12.5" would be
    # refused; conversion itself still accepts integral floats in a BIGINT column.
    if isinstance(value, str):
        text = value.strip()
        if not text.lstrip("+-").isdigit():
            raise ConversionError("not an integer literal")
        value = int(text)
    elif isinstance(value, float):
        raise ConversionError("not an integer literal")
    return _to_int(value)


def _to_bool_strict(value: object) -> object:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return _to_bool(value)
    raise ConversionError("not a boolean")


def _to_date_strict(value: object) -> object:
    # Inference wants a bare date (10 characters), read as conversion reads it.
    if isinstance(value, str) and len(value.strip()) == 10:
        return _to_date(value)
    raise ConversionError("not a date")


_UTC_TIMESTAMP: Final = pa.timestamp("us", tz="UTC")


def _is_integer_literal(value: object) -> bool:
    """An integer however large (one out of the ``BIGINT`` range is refused, not widened)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (
        isinstance(value, str) and value.strip().lstrip("+-").isdigit()
    )


def _is_date(value: object) -> bool:
    try:
        _to_date_strict(value)
    except ConversionError:
        return False
    return True


_WIDER: Final = {
    pa.int64(): (pa.float64(), _is_integer_literal),
    pa.date32(): (_UTC_TIMESTAMP, _is_date),
}
"""The wider type of the same family, which a column takes when a value fits it but is not
of the narrower type's form (``4.5`` among integers), with that form."""


def _not_text(convert: Callable[[object], object]) -> Callable[[object], object]:
    """``convert`` refusing text: a JSON string never makes a number or a boolean."""

    def strict(value: object) -> object:
        if isinstance(value, str):
            raise ConversionError("a JSON string stays text")
        return convert(value)

    return strict


def _ladder(
    options: ConversionOptions, json_values: bool
) -> tuple[tuple[pa.DataType, Callable[[object], object]], ...]:
    formats = options.timestamp_formats
    first = options.timestamp_format is not None
    ladder: tuple[tuple[pa.DataType, Callable[[object], object]], ...] = (
        (pa.int64(), _to_int_strict),
        (pa.float64(), _to_float),
        (pa.date32(), _to_date_strict),
        (_UTC_TIMESTAMP, lambda value: _to_timestamp(value, formats, first)),
        (pa.bool_(), _to_bool_strict),
    )
    if not json_values:
        return ladder
    textual = (pa.date32(), _UTC_TIMESTAMP)
    return tuple(
        (kind, convert if kind in textual else _not_text(convert)) for kind, convert in ladder
    )


def _misfits(
    counted: dict[tuple[type, object], int], convert: Callable[[object], object], needed: int
) -> list[object] | None:
    """The distinct values that do not convert, or ``None`` when fewer than ``needed`` do.

    Stops as soon as too many values failed to convert.

    Args:
        counted: each distinct value (keyed with its type: ``1``, ``1.0`` and ``True``
            differ) and how many times it occurs.
        convert: the conversion to try.
        needed: how many values must convert.
    """
    misses_allowed = sum(counted.values()) - needed
    if misses_allowed < 0:
        return None
    misses: list[object] = []
    missed = 0
    for (_, value), count in counted.items():
        try:
            convert(value)
        except (ValueError, TypeError, OverflowError):
            misses.append(value)
            missed += count
            if missed > misses_allowed:
                return None
    return misses


def _count(values: Iterable[object]) -> dict[tuple[type, object], int]:
    return Counter((type(value), value) for value in values)


class _Inference:
    """Infers types with one set of options; ``pa.null()`` stands for "no value seen".

    ``json_values``: the values are decoded JSON (a string stays text, see the module doc);
    else text (CSV), which may read as any type.
    """

    def __init__(self, options: ConversionOptions, json_values: bool = False) -> None:
        self._rules = _Rules(options)
        self._ladder = _ladder(options, json_values)

    def infer(self, values: Sequence[object], depth: int = 0) -> pa.DataType:
        present = [
            value
            for value in values[:INFERENCE_SAMPLE]
            if value is not None
            and not (isinstance(value, str) and value.strip() in self._rules.null_text)
        ]
        if not present:
            return pa.null()
        total = len(present)
        objects = [value for value in present if isinstance(value, dict)]
        arrays = [value for value in present if isinstance(value, list)]
        if objects or arrays:
            if depth >= MAX_DEPTH:
                return pa.string()
            if len(objects) >= INFERENCE_SHARE * total:
                return self._object(objects, depth)
            if len(arrays) >= INFERENCE_SHARE * total:
                items = [item for array in arrays for item in array]
                return pa.list_(self.infer(items, depth + 1))
            present = [value for value in present if not isinstance(value, dict | list)]
        return self._scalar(present, total)

    def _scalar(self, values: list[object], total: int) -> pa.DataType:
        """The ladder's type that ``INFERENCE_SHARE`` of ``total`` values fit, widened."""
        ladder = dict(self._ladder)
        needed = math.ceil(INFERENCE_SHARE * total)
        counted = _count(values)  # each distinct value is tried once
        for data_type, convert in self._ladder:
            misses = _misfits(counted, convert, needed)
            if misses is None:
                continue
            wider = _WIDER.get(data_type)
            if wider is not None:
                wider_type, narrow_form = wider
                others = _count(value for value in misses if not narrow_form(value))
                if _misfits(others, ladder[wider_type], 1) is not None:
                    return wider_type
            return data_type
        return pa.string()

    def _object(self, objects: list[dict[str, object]], depth: int) -> pa.DataType:
        keys: dict[str, None] = {}
        for value in objects:
            keys.update(dict.fromkeys(value))
        types = {key: self.infer([value.get(key) for value in objects], depth + 1) for key in keys}
        if len(keys) > MAP_MIN_KEYS:
            item = pa.null()
            for data_type in types.values():
                item = widen_type(item, data_type)
            seen = {data_type for data_type in types.values() if not pa.types.is_null(data_type)}
            if not pa.types.is_string(item) or seen == {pa.string()}:
                return pa.map_(pa.string(), item)
        return pa.struct([pa.field(key, data_type) for key, data_type in types.items()])


def _final(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every "no value seen" (``null``) made ``STRING``."""
    if pa.types.is_null(data_type):
        return pa.string()
    if pa.types.is_struct(data_type):
        return pa.struct([field.with_type(_final(field.type)) for field in data_type])
    if pa.types.is_map(data_type):
        return pa.map_(_final(data_type.key_type), _final(data_type.item_type))
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return pa.list_(_final(data_type.value_type))
    return data_type


def _final_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([field.with_type(_final(field.type)) for field in schema])


def infer_type(
    values: Sequence[object],
    options: ConversionOptions | None = None,
    *,
    json_values: bool = False,
) -> pa.DataType:
    """The most specific type that most of ``values`` fit (text when none does).

    Null values and null text (``NULL_TEXT``, and the options' ``null_values``) are
    ignored; JSON objects and arrays give nested types (see the module doc). A scalar type
    is chosen when at least ``INFERENCE_SHARE`` of the rest convert to it, so a few
    malformed values in the sample do not turn a numeric column into text: they become
    dead letters instead.

    Args:
        values: sample values of one column: text (CSV) or decoded JSON values.
        options: null text and the timestamp format; ``None``: the defaults.
        json_values: the values are decoded JSON: a JSON string stays text (or a date or
            timestamp), never a number or a boolean; ``False``: text, as CSV gives it.

    >>> infer_type(["00037", "0612345678"])
    DataType(int64)
    >>> infer_type(["00037", "0612345678"], json_values=True)
    DataType(string)
    """
    inference = _Inference(options or ConversionOptions(), json_values)
    return _final(inference.infer(values))


def _infer_raw(
    names: Sequence[str],
    rows: Sequence[dict[str, object]],
    options: ConversionOptions,
    json_values: bool = False,
) -> pa.Schema:
    inference = _Inference(options, json_values)
    return pa.schema(
        [pa.field(name, inference.infer([row.get(name) for row in rows])) for name in names]
    )


def infer_schema(
    names: Sequence[str],
    rows: Sequence[dict[str, object]],
    options: ConversionOptions | None = None,
    *,
    json_values: bool = False,
) -> pa.Schema:
    """Infer each column's type from sample ``rows`` (``infer_type``), columns by name.

    ``json_values``: the rows are decoded JSON records (a JSON string stays text).
    """
    return _final_schema(_infer_raw(names, rows, options or ConversionOptions(), json_values))


def _file_schema(item: InputFile, options: ConversionOptions, max_records: int) -> pa.Schema | None:
    """One file's schema, "no value seen" left as ``null``; ``None``: it has no record."""
    if item.format == "parquet":
        schema = pq.read_schema(item.path).remove_metadata()
        _check_unique(item, schema.names)
        return schema
    names, has_records = header(item)
    if has_records is False and not names:
        return None
    names, records = sample(item, max_records=max_records)
    _check_unique(item, names)
    return _infer_raw(names, records, options, json_values=item.format == "jsonl")


def _check_unique(item: InputFile, names: Sequence[str]) -> None:
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise FormatError(f"{item.path}: duplicate column name(s): {quoted(duplicates)}")


def infer_file_schema(item: InputFile, options: ConversionOptions | None = None) -> pa.Schema:
    """The schema of one file: Parquet's own, or inferred from a sample of its records.

    CSV and JSON Lines types come from the first ``INFERENCE_SAMPLE`` records (at most
    ``SAMPLE_BYTES``) of the file (``infer_schema``).

    Raises:
        OSError: the file cannot be read.
        FormatError: it cannot be read as its format, or names a column twice.
        pyarrow.ArrowException: a Parquet file is not valid.
    """
    found = _file_schema(item, options or ConversionOptions(), INFERENCE_SAMPLE)
    return pa.schema([]) if found is None else _final_schema(found)


def sample_records(files: int) -> int:
    """Records sampled from each of ``files`` text files (see the module doc)."""
    share = SAMPLE_TOTAL_RECORDS // max(files, 1)
    return max(SAMPLE_MIN_RECORDS, min(INFERENCE_SAMPLE, share))


def infer_files_schema(
    files: Sequence[InputFile], options: ConversionOptions | None = None
) -> pa.Schema:
    """One schema for all ``files``: each file's, merged by column name and widened.

    Parquet files give their own schema (their footer); CSV and JSON Lines files a schema
    inferred from their head, within the budget of the module doc (``sample_records``
    per file, at most ``SAMPLE_BYTES`` each). Files without a record are passed over.

    Args:
        files: the input files, in order (the first file's columns come first).
        options: null text and the timestamp format; ``None``: the defaults.

    Returns:
        The merged schema (empty when no file has a record).

    Raises:
        OSError: a file cannot be read.
        FormatError: a file cannot be read as its format, or names a column twice.
        pyarrow.ArrowException: a Parquet file is not valid.
    """
    options = options or ConversionOptions()
    per_file = sample_records(sum(1 for item in files if item.format != "parquet"))
    merged: dict[str, pa.DataType] = {}
    for item in files:
        schema = _file_schema(item, options, per_file)
        if schema is None:
            continue
        for field in schema:
            known = merged.get(field.name)
            merged[field.name] = field.type if known is None else widen_type(known, field.type)
    return _final_schema(pa.schema([pa.field(name, kind) for name, kind in merged.items()]))


def _plain(data_type: pa.DataType) -> pa.DataType:
    """Dictionaries decoded, large and fixed-size types as their plain counterparts."""
    if pa.types.is_dictionary(data_type):
        return _plain(data_type.value_type)
    if pa.types.is_large_string(data_type):
        return pa.string()
    if (
        pa.types.is_large_list(data_type)
        or pa.types.is_fixed_size_list(data_type)
        or pa.types.is_list(data_type)
    ):
        return pa.list_(data_type.value_type)
    return data_type


def _is_number(data_type: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(data_type)
        or pa.types.is_floating(data_type)
        or pa.types.is_decimal(data_type)
    )


def _is_moment(data_type: pa.DataType) -> bool:
    return bool(pa.types.is_date(data_type) or pa.types.is_timestamp(data_type))


def widen_type(first: pa.DataType, second: pa.DataType) -> pa.DataType:
    """The narrowest type that values of both types fit (``STRING`` as the last resort).

    ``null`` (no value seen) takes the other type; integers of any width make ``int64``;
    integers, floats and decimals ``float64``; dates and timestamps
    ``timestamp[us, tz=UTC]``; two structs one with the fields of both (in order, each
    widened); two lists or maps a list or map of the widened types; a struct and a map
    with text keys a map of every value type widened; anything else ``string``.

    >>> widen_type(pa.int64(), pa.float64())
    DataType(double)
    >>> widen_type(pa.list_(pa.int32()), pa.list_(pa.string()))
    ListType(list<item: string>)
    """
    if first == second:
        return first
    if pa.types.is_null(first):
        return second
    if pa.types.is_null(second):
        return first
    first, second = _plain(first), _plain(second)
    if first == second:
        return first
    if pa.types.is_integer(first) and pa.types.is_integer(second):
        return pa.int64()
    if _is_number(first) and _is_number(second):
        return pa.float64()
    if _is_moment(first) and _is_moment(second):
        return _UTC_TIMESTAMP
    if pa.types.is_struct(first) and pa.types.is_struct(second):
        fields: dict[str, pa.DataType] = {field.name: field.type for field in first}
        for field in second:
            known = fields.get(field.name)
            fields[field.name] = field.type if known is None else widen_type(known, field.type)
        return pa.struct([pa.field(name, kind) for name, kind in fields.items()])
    if pa.types.is_list(first) and pa.types.is_list(second):
        return pa.list_(widen_type(first.value_type, second.value_type))
    if pa.types.is_map(first) and pa.types.is_map(second):
        key = widen_type(first.key_type, second.key_type)
        return pa.map_(key, widen_type(first.item_type, second.item_type))
    if pa.types.is_map(second) and pa.types.is_struct(first):
        first, second = second, first
    if pa.types.is_map(first) and pa.types.is_struct(second) and pa.types.is_string(first.key_type):
        item = first.item_type
        for field in second:
            item = widen_type(item, field.type)
        return pa.map_(first.key_type, item)
    return pa.string()


_DAY_FIRST: Final = ("%d/%m/%Y", "%d.%m.%Y", "%d-%m-%Y", "%d/%m/%y", "%d.%m.%y")
_MONTH_FIRST: Final = ("%m/%d/%Y", "%m-%d-%Y", "%m/%d/%y")
_NAMED: Final = ("%d %b %Y", "%b %d %Y", "%d %B %Y", "%B %d %Y", "%b %d, %Y", "%Y.%m.%d")
_TIMES: Final = (" %H:%M:%S", " %H:%M", " %I:%M:%S %p", " %I:%M %p", "T%H:%M:%S", "")
_GUESSES: Final = tuple(
    f"{day}{time}" for day in (*_DAY_FIRST, *_MONTH_FIRST, *_NAMED) for time in _TIMES
)
"""``strptime`` forms of time text that ``guess_timestamp_format`` tries, in order."""


def guess_timestamp_format(values: Iterable[str]) -> str | None:
    """A ``strptime`` format that reads every one of ``values``, or ``None``.

    For ``--timestamp-format``: the common forms of dates (day first, then month first,
    then with month names) with or without a time of day are tried in order, the first
    that reads them all wins (``31/01/2024`` and ``01/02/2024`` are day first;
    ``01/31/2024`` is month first). Text that ISO 8601 or ``TIMESTAMP_FORMATS`` read
    needs no format: ``None``.

    >>> guess_timestamp_format(["31/01/2024 10:00", "01/02/2024 11:30"])
    '%d/%m/%Y %H:%M'
    >>> guess_timestamp_format(["2024-01-31 10:00"]) is None
    True
    """
    texts = [value.strip() for value in values if value.strip()]
    if not texts:
        return None
    try:
        for text in texts:
            _to_timestamp(text, ConversionOptions().timestamp_formats)
    except ConversionError:
        pass
    else:
        return None  # read without a format
    for form in _GUESSES:
        try:
            for text in texts:
                dt.datetime.strptime(text, form)  # a form, not a moment
        except ValueError:
            continue
        return form
    return None


__all__ += ["SAMPLE_BYTES", "guess_timestamp_format", "sample_records"]
