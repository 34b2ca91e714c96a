"""The stream's schema: normalising what pyarrow inferred, and describing it for Spark.

The schema is inferred from the first input (pyarrow's own inference on the first block of
a CSV or JSON Lines file, the Parquet schema, or the default table's types) and then
normalised so that every later record can be checked against it and Spark can take it:

* every timestamp becomes ``timestamp[us, tz=UTC]`` (a time without an offset is read as
  UTC), which Spark maps to ``TIMESTAMP``;
* integers become ``int64``, floats ``float64``, text ``string``; a column that was empty in
  the first block (pyarrow's ``null`` type) becomes ``string``;
* dictionary-encoded columns are decoded; large types become their normal counterparts.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

__all__ = [
    "SUPPORTED_TYPES",
    "describe_schema",
    "normalize_schema",
    "spark_ddl",
    "spark_schema",
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
"""The column types a stream may have, with their Spark SQL names."""


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
    raise ValueError(f"unsupported column type {data_type}")


def normalize_schema(schema: pa.Schema) -> pa.Schema:
    """Return ``schema`` with every column mapped to one of ``SUPPORTED_TYPES``.

    Raises:
        ValueError: a column has a type the stream cannot carry (a list, a struct, a
            binary column...), or two columns have the same name; the message names it.
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


def spark_ddl(schema: pa.Schema) -> str:
    """The schema as a Spark DDL string, e.g. ``"`origin` STRING, `flights` BIGINT"``.

    ``schema`` must be normalised (``normalize_schema``).
    """
    parts = []
    for field in schema:
        name = field.name.replace("`", "``")
        parts.append(f"`{name}` {SUPPORTED_TYPES[field.type]}")
    return ", ".join(parts)


def describe_schema(schema: pa.Schema) -> list[tuple[str, str]]:
    """``(column, Spark type)`` pairs, for showing the inferred schema to the user."""
    return [(field.name, SUPPORTED_TYPES[field.type]) for field in schema]


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
    return T.StringType()


def spark_schema(schema: pa.Schema) -> Any:
    """The normalised schema as a ``pyspark.sql.types.StructType``."""
    from pyspark.sql import types as T  # noqa: PLC0415

    return T.StructType(
        [T.StructField(field.name, _spark_type(field.type), nullable=True) for field in schema]
    )
