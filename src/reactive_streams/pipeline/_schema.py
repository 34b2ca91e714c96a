"""The stream's schema: normalising what was inferred, and its Spark forms (types and DDL).

The schema is inferred from the input files (``reactive_streams.files.infer_files_schema``:
Parquet footers, the head of each text file, widened across files) or given as Spark DDL
(``--schema``, ``schema_from_ddl``), and then normalised so that every later record can be
checked against it and Spark can take it:

* every timestamp becomes ``timestamp[us, tz=UTC]`` (a time without an offset is read as
  UTC), which Spark maps to ``TIMESTAMP``;
* integers become ``int64``, floats and decimals ``float64``, text ``string``; a column
  with no value in the sample (pyarrow's ``null`` type) becomes ``string``;
* dictionary-encoded columns are decoded; large types become their normal counterparts;
* structs, lists and maps keep their shape, with these rules applied to their fields,
  elements, keys and values (Spark's ``STRUCT``, ``ARRAY`` and ``MAP``).

``spark_ddl`` writes a normalised schema as Spark DDL and ``schema_from_ddl`` reads it back
(and any DDL of the types above, as Spark writes it) without starting Spark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

__all__ = [
    "SUPPORTED_TYPES",
    "describe_schema",
    "is_nested",
    "normalize_schema",
    "schema_from_ddl",
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

    ``schema`` must be normalised (``normalize_schema``); ``schema_from_ddl`` reads it back.
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


# -- Spark DDL, read without Spark ---------------------------------------------------------

_DDL_TYPES: Final[dict[str, pa.DataType]] = {
    "BIGINT": pa.int64(),
    "LONG": pa.int64(),
    "INT": pa.int64(),
    "INTEGER": pa.int64(),
    "SMALLINT": pa.int64(),
    "SHORT": pa.int64(),
    "TINYINT": pa.int64(),
    "BYTE": pa.int64(),
    "DOUBLE": pa.float64(),
    "FLOAT": pa.float64(),
    "REAL": pa.float64(),
    "DECIMAL": pa.float64(),
    "DEC": pa.float64(),
    "NUMERIC": pa.float64(),
    "STRING": pa.string(),
    "VARCHAR": pa.string(),
    "CHAR": pa.string(),
    "BOOLEAN": pa.bool_(),
    "DATE": pa.date32(),
    "TIMESTAMP": UTC_TIMESTAMP,
    "TIMESTAMP_LTZ": UTC_TIMESTAMP,
}
"""Spark's type names and the stream type each is read as (``INT`` is a ``BIGINT`` here,
``FLOAT`` and ``DECIMAL`` a ``DOUBLE``, ``VARCHAR(n)`` a ``STRING``)."""

_DDL_SUPPORTED: Final = (
    "BIGINT (INT, SMALLINT, TINYINT), DOUBLE (FLOAT, DECIMAL), STRING (VARCHAR, CHAR), "
    "BOOLEAN, DATE, TIMESTAMP, ARRAY<type>, MAP<type, type>, STRUCT<name: type, ...>"
)

_TOKEN: Final = re.compile(
    r"\s*(?:(?P<quoted>`(?:[^`]|``)*`)|(?P<word>[A-Za-z0-9_]+)|(?P<text>'(?:[^'\\]|\\.)*')"
    r"|(?P<mark>[<>(),:]))"
)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "quoted", "word", "text", "mark" or "end"
    text: str
    at: int  # its offset in the DDL


class _DdlParser:
    """A recursive-descent reader of Spark's column-list DDL (``StructType.fromDDL``).

    Grammar (keywords in any case)::

        schema  = column ("," column)*
        column  = name [":"] type ["NOT" "NULL"] ["COMMENT" 'text']
        type    = NAME ["(" number ["," number] ")"] | "ARRAY" "<" type ">"
                | "MAP" "<" type "," type ">" | "STRUCT" "<" [column ("," column)*] ">"
        name    = word | `quoted`
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens = self._tokenize(text)
        self._index = 0

    def _tokenize(self, text: str) -> list[_Token]:
        tokens: list[_Token] = []
        position = 0
        while position < len(text):
            if text[position:].strip() == "":
                break
            found = _TOKEN.match(text, position)
            if found is None or found.lastgroup is None:
                at = len(text) - len(text[position:].lstrip())
                raise self._error(f"unexpected character {text[at]!r}", at)
            tokens.append(
                _Token(found.lastgroup, found.group(found.lastgroup), found.start(found.lastgroup))
            )
            position = found.end()
        tokens.append(_Token("end", "", len(text)))
        return tokens

    def _error(self, message: str, at: int, hint: str = "") -> ValueError:
        return ValueError(f"{message} at character {at + 1} of {self._text!r}{hint}")

    def _peek(self) -> _Token:
        return self._tokens[self._index]

    def _next(self) -> _Token:
        token = self._tokens[self._index]
        self._index += 1
        return token

    def _expect(self, mark: str, after: str) -> None:
        token = self._next()
        if token.kind != "mark" or token.text != mark:
            shown = "the end" if token.kind == "end" else repr(token.text)
            raise self._error(f"expected {mark!r} {after}, found {shown}", token.at)

    def _keyword(self, word: str) -> bool:
        token = self._peek()
        if token.kind == "word" and token.text.upper() == word:
            self._index += 1
            return True
        return False

    def schema(self) -> pa.Schema:
        if self._peek().kind == "end":
            raise self._error("expected a column", 0)
        fields = self._columns(end="end")
        names = [field.name for field in fields]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"duplicate column name(s): {', '.join(duplicates)}")
        return pa.schema(fields)

    def _columns(self, end: str) -> list[pa.Field]:
        fields = [self._column()]
        while self._peek().kind == "mark" and self._peek().text == ",":
            self._next()
            fields.append(self._column())
        token = self._peek()
        if end == "end" and token.kind != "end":
            raise self._error(f"expected ',' or the end, found {token.text!r}", token.at)
        return fields

    def _column(self) -> pa.Field:
        token = self._next()
        if token.kind == "quoted":
            name = token.text[1:-1].replace("``", "`")
        elif token.kind == "word":
            name = token.text
        else:
            shown = "the end" if token.kind == "end" else repr(token.text)
            raise self._error(f"expected a column name, found {shown}", token.at)
        if self._peek().kind == "mark" and self._peek().text == ":":
            self._next()
        data_type = self._type(name)
        if self._keyword("NOT") and not self._keyword("NULL"):
            raise self._error("expected NULL after NOT", self._peek().at)
        if self._keyword("COMMENT"):
            token = self._next()
            if token.kind != "text":
                raise self._error("expected a quoted comment after COMMENT", token.at)
        return pa.field(name, data_type)

    def _type(self, name: str) -> pa.DataType:
        token = self._next()
        if token.kind != "word":
            shown = "the end" if token.kind == "end" else repr(token.text)
            raise self._error(f"expected the type of {name!r}, found {shown}", token.at)
        word = token.text.upper()
        if word == "ARRAY":
            self._expect("<", "after ARRAY")
            item = self._type(f"{name}'s elements")
            self._expect(">", "to close ARRAY<")
            return pa.list_(item)
        if word == "MAP":
            self._expect("<", "after MAP")
            key = self._type(f"{name}'s keys")
            if is_nested(key):
                raise self._error(f"the keys of {name!r} must have a flat type", token.at)
            self._expect(",", "between a MAP's key and value types")
            item = self._type(f"{name}'s values")
            self._expect(">", "to close MAP<")
            return pa.map_(key, item)
        if word == "STRUCT":
            self._expect("<", "after STRUCT")
            fields: list[pa.Field] = []
            if not (self._peek().kind == "mark" and self._peek().text == ">"):
                fields = self._columns(end=">")
            self._expect(">", "to close STRUCT<")
            names = [field.name for field in fields]
            duplicates = sorted({field for field in names if names.count(field) > 1})
            if duplicates:
                raise self._error(
                    f"duplicate field name(s) in {name!r}: {', '.join(duplicates)}", token.at
                )
            return pa.struct(fields)
        data_type = _DDL_TYPES.get(word)
        if data_type is None:
            raise self._error(
                f"type {token.text} of {name!r} is not supported",
                token.at,
                f" (supported: {_DDL_SUPPORTED})",
            )
        if self._peek().kind == "mark" and self._peek().text == "(":  # DECIMAL(10, 2)...
            self._next()
            while not (self._peek().kind == "mark" and self._peek().text == ")"):
                part = self._next()
                if not (part.kind == "word" and part.text.isdigit()) and not (
                    part.kind == "mark" and part.text == ","
                ):
                    raise self._error(f"expected ')' to close {token.text}(", part.at)
            self._next()
        return data_type


def schema_from_ddl(text: str) -> pa.Schema:
    """A schema from Spark DDL (``"id BIGINT, rating DOUBLE, ts TIMESTAMP"``), without Spark.

    Reads what Spark's ``StructType.fromDDL`` reads for the stream's types: column names
    plain or backquoted, type names in any case, ``ARRAY<...>``, ``MAP<..., ...>``,
    ``STRUCT<name: type, ...>`` nested at will, a ``:`` between a name and its type, and
    ``NOT NULL`` and ``COMMENT '...'``, which are accepted and ignored (every column of
    the stream may be null). Spark's narrower types are read as the stream's (``INT`` as
    ``BIGINT``, ``FLOAT`` and ``DECIMAL(p, s)`` as ``DOUBLE``, ``VARCHAR(n)`` as
    ``STRING``).

    Returns:
        A normalised schema (``normalize_schema``).

    Raises:
        ValueError: the text is not such DDL, names a type the stream cannot carry
            (``BINARY``, ``TIMESTAMP_NTZ``, ``INTERVAL``...), or names a column twice; the
            message says where.
    """
    return normalize_schema(_DdlParser(text).schema())
