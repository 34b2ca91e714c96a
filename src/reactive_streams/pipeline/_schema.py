"""The stream's schema: normalising what was inferred, and its Spark forms (types and DDL).

The schema is inferred from the input files (``reactive_streams.files.infer_files_schema``:
Parquet footers, the head of each text file, widened across files), and then normalised so
that every later record can be checked against it and Spark can take it:

* every timestamp becomes ``timestamp[us, tz=UTC]`` (a time without an offset is read as
  UTC), which Spark maps to ``TIMESTAMP``;
* integers become ``int64``, floats and decimals ``float64``, text ``string``; a column
  with no value in the sample (pyarrow's ``null`` type) becomes ``string``;
* dictionary-encoded columns are decoded; large types become their normal counterparts;
* structs, lists and maps keep their shape, with these rules applied to their fields,
  elements, keys and values (Spark's ``STRUCT``, ``ARRAY`` and ``MAP``).
"""

from __future__ import annotations

import re
from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

__all__ = [
    "SUPPORTED_TYPES",
    "describe_schema",
    "is_nested",
    "normalize_schema",
    "spark_ddl",
    "spark_schema",
    "sql_type",
]

UTC_TIMESTAMP = pa.timestamp("us", tz="UTC")

SUPPORTED_TYPES: dict[pa.DataType, str] = {
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.string(): "STRING",
    pa.bool_(): "BOOLEAN",
    pa.date32(): "DATE",
    UTC_TIMESTAMP: "TIMESTAMP",
}
"""The flat column types a stream may have, with their Spark SQL names (besides them:
``STRUCT``, ``ARRAY`` and ``MAP`` of these)."""


def _normalize_type(data_type: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(data_type):
        return _normalize_type(data_type.value_type)
    if pa.types.is_integer(data_type):
        return pa.int64()
    if pa.types.is_floating(data_type) or pa.types.is_decimal(data_type):
        return pa.float64()
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return pa.string()
    if pa.types.is_null(data_type):
        return pa.string()
    if pa.types.is_boolean(data_type):
        return pa.bool_()
    if pa.types.is_timestamp(data_type):
        return UTC_TIMESTAMP
    if pa.types.is_date(data_type):
        return pa.date32()
    if pa.types.is_struct(data_type):
        names = [field.name for field in data_type]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"duplicate field name(s) in {data_type}: {', '.join(duplicates)}")
        return pa.struct([_normalize_field(field) for field in data_type])
    if pa.types.is_map(data_type):
        key = _normalize_type(data_type.key_type)
        if is_nested(key):
            raise ValueError(f"unsupported map key type {data_type.key_type}")
        return pa.map_(key, _normalize_type(data_type.item_type))
    if (
        pa.types.is_list(data_type)
        or pa.types.is_large_list(data_type)
        or pa.types.is_fixed_size_list(data_type)
    ):
        return pa.list_(_normalize_type(data_type.value_type))
    raise ValueError(f"unsupported column type {data_type}")


def _normalize_field(field: pa.Field) -> pa.Field:
    try:
        return pa.field(field.name, _normalize_type(field.type), nullable=True)
    except ValueError as exc:
        raise ValueError(f"field {field.name!r}: {exc}") from None


def is_nested(data_type: pa.DataType) -> bool:
    """Whether a normalised type is a ``STRUCT``, an ``ARRAY`` or a ``MAP``."""
    return bool(
        pa.types.is_struct(data_type) or pa.types.is_list(data_type) or pa.types.is_map(data_type)
    )


def normalize_schema(schema: pa.Schema) -> pa.Schema:
    """Return ``schema`` with every column mapped to the stream's types (module doc).

    Raises:
        ValueError: a column has a type the stream cannot carry (a binary column, a map
            keyed by structs...), or two columns (or two fields of a struct) have the same
            name; the message names it.
    """
    names = schema.names
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"duplicate column name(s): {', '.join(duplicates)}")
    fields = []
    for field in schema:
        try:
            fields.append(pa.field(field.name, _normalize_type(field.type), nullable=True))
        except ValueError as exc:
            raise ValueError(f"column {field.name!r}: {exc}") from None
    return pa.schema(fields)


_PLAIN_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _quote(name: str, *, always: bool) -> str:
    if not always and _PLAIN_NAME.fullmatch(name):
        return name
    return "`" + name.replace("`", "``") + "`"


def sql_type(data_type: pa.DataType, *, quote: bool = False) -> str:
    """A normalised type as Spark SQL writes it: ``BIGINT``, ``STRUCT<name: STRING>``...

    Args:
        data_type: a type of a normalised schema (``normalize_schema``).
        quote: backquote every field name (DDL); else only names that need it.
    """
    if pa.types.is_struct(data_type):
        fields = ", ".join(
            f"{_quote(field.name, always=quote)}: {sql_type(field.type, quote=quote)}"
            for field in data_type
        )
        return f"STRUCT<{fields}>"
    if pa.types.is_map(data_type):
        key = sql_type(data_type.key_type, quote=quote)
        return f"MAP<{key}, {sql_type(data_type.item_type, quote=quote)}>"
    if pa.types.is_list(data_type):
        return f"ARRAY<{sql_type(data_type.value_type, quote=quote)}>"
    return SUPPORTED_TYPES[data_type]


def spark_ddl(schema: pa.Schema) -> str:
    """The schema as a Spark DDL string, e.g. ``"`origin` STRING, `flights` BIGINT"``.

    ``schema`` must be normalised (``normalize_schema``).
    """
    return ", ".join(
        f"{_quote(field.name, always=True)} {sql_type(field.type, quote=True)}" for field in schema
    )


def describe_schema(schema: pa.Schema) -> list[tuple[str, str]]:
    """``(column, Spark type)`` pairs, for showing the input schema to the user."""
    return [(field.name, sql_type(field.type)) for field in schema]


def _spark_type(data_type: pa.DataType) -> Any:
    from pyspark.sql import types as T  # noqa: PLC0415

    if pa.types.is_int64(data_type):
        return T.LongType()
    if pa.types.is_float64(data_type):
        return T.DoubleType()
    if pa.types.is_boolean(data_type):
        return T.BooleanType()
    if pa.types.is_timestamp(data_type):
        return T.TimestampType()
    if pa.types.is_date32(data_type):
        return T.DateType()
    if pa.types.is_struct(data_type):
        return T.StructType(
            [
                T.StructField(field.name, _spark_type(field.type), nullable=True)
                for field in data_type
            ]
        )
    if pa.types.is_map(data_type):
        return T.MapType(
            _spark_type(data_type.key_type),
            _spark_type(data_type.item_type),
            valueContainsNull=True,
        )
    if pa.types.is_list(data_type):
        return T.ArrayType(_spark_type(data_type.value_type), containsNull=True)
    return T.StringType()


def spark_schema(schema: pa.Schema) -> Any:
    """The normalised schema as a ``pyspark.sql.types.StructType`` (nested types nested)."""
    from pyspark.sql import types as T  # noqa: PLC0415

    return T.StructType(
        [T.StructField(field.name, _spark_type(field.type), nullable=True) for field in schema]
    )
