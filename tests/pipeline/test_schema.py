"""The stream's schema and its Spark forms: nested types, and ``--schema`` DDL read without Spark.

``spark_ddl`` writes what ``schema_from_ddl`` reads back (a round trip over generated
schemas); ``tests/pipeline/test_schema_end_to_end.py`` checks the reader against Spark's
own parser.
"""

from __future__ import annotations

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reactive_streams.pipeline._schema import (
    describe_schema,
    normalize_schema,
    schema_from_ddl,
    spark_ddl,
    spark_schema,
)

UTC_TIMESTAMP = pa.timestamp("us", tz="UTC")


@pytest.mark.parametrize(
    ("ddl", "expected"),
    [
        (
            "id BIGINT, rating DOUBLE, ts TIMESTAMP",
            [("id", pa.int64()), ("rating", pa.float64()), ("ts", UTC_TIMESTAMP)],
        ),
        (
            "id int NOT NULL COMMENT 'the key', d date, ok boolean, name varchar(20), "
            "price decimal(10, 2), small tinyint, f float",
            [
                ("id", pa.int64()),
                ("d", pa.date32()),
                ("ok", pa.bool_()),
                ("name", pa.string()),
                ("price", pa.float64()),
                ("small", pa.int64()),
                ("f", pa.float64()),
            ],
        ),
        (
            "`user id`: long, user STRUCT<name: STRING, `the age` INT>, "
            "tags ARRAY<STRING>, scores MAP<STRING, ARRAY<DOUBLE>>",
            [
                ("user id", pa.int64()),
                ("user", pa.struct([("name", pa.string()), ("the age", pa.int64())])),
                ("tags", pa.list_(pa.string())),
                ("scores", pa.map_(pa.string(), pa.list_(pa.float64()))),
            ],
        ),
        ("`a``b` string", [("a`b", pa.string())]),
    ],
)
def test_ddl_is_read_without_spark(ddl: str, expected: list[tuple[str, pa.DataType]]) -> None:
    assert schema_from_ddl(ddl) == pa.schema(expected)


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("", r"^expected a column at character 1 of ''$"),
        ("id", r"^expected the type of 'id', found the end at character 3 of 'id'$"),
        ("id BIGINT,", r"^expected a column name, found the end at character 11 "),
        ("id BIGINT rating DOUBLE", r"^expected ',' or the end, found 'rating' at character 11 "),
        ("id BIGIN", r"^type BIGIN of 'id' is not supported at character 4 of 'id BIGIN' "
                     r"\(supported: BIGINT \(INT, SMALLINT, TINYINT\), DOUBLE"),
        ("b BINARY", r"^type BINARY of 'b' is not supported "),
        ("t TIMESTAMP_NTZ", r"^type TIMESTAMP_NTZ of 't' is not supported "),
        ("tags ARRAY<STRING", r"^expected '>' to close ARRAY<, found the end at character 18 "),
        ("m MAP<STRING>", r"^expected ',' between a MAP's key and value types, found '>' "),
        ("m MAP<ARRAY<INT>, INT>", r"^the keys of 'm' must have a flat type "),
        ("s STRUCT<a INT, a INT>", r"^duplicate field name\(s\) in 's': a "),
        ("a INT, a STRING", r"^duplicate column name\(s\): a$"),
        ("a INT; DROP TABLE x", r"^unexpected character ';' at character 6 "),
        ("a INT NOT", r"^expected NULL after NOT at character 10 "),
        ("a DECIMAL(10, x)", r"^expected '\)' to close DECIMAL\( at character 15 "),
    ],
)  # fmt: skip
def test_bad_ddl_is_refused_saying_where(ddl: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        schema_from_ddl(ddl)


NAMES = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1)
FLAT = st.sampled_from(
    [pa.int64(), pa.float64(), pa.string(), pa.bool_(), pa.date32(), UTC_TIMESTAMP]
)
TYPES = st.recursive(
    FLAT,
    lambda inner: st.one_of(
        st.builds(pa.list_, inner),
        st.builds(pa.map_, FLAT, inner),
        st.lists(st.tuples(NAMES, inner), min_size=1, max_size=4, unique_by=lambda f: f[0]).map(
            pa.struct
        ),
    ),
    max_leaves=8,
)
SCHEMAS = st.lists(st.tuples(NAMES, TYPES), min_size=1, max_size=5, unique_by=lambda f: f[0]).map(
    pa.schema
)


@given(SCHEMAS)
def test_every_normalised_schema_round_trips_through_ddl(schema: pa.Schema) -> None:
    schema = normalize_schema(schema)
    assert schema_from_ddl(spark_ddl(schema)) == schema


def test_nested_types_are_shown_and_given_to_spark_as_spark_writes_them() -> None:
    pytest.importorskip("pyspark")
    schema = normalize_schema(
        pa.schema(
            [
                ("id", pa.int32()),
                ("user", pa.struct([("name", pa.large_string()), ("a b", pa.int8())])),
                ("tags", pa.large_list(pa.string())),
                ("m", pa.map_(pa.string(), pa.list_(pa.timestamp("ms")))),
            ]
        )
    )
    assert describe_schema(schema) == [
        ("id", "BIGINT"),
        ("user", "STRUCT<name: STRING, `a b`: BIGINT>"),
        ("tags", "ARRAY<STRING>"),
        ("m", "MAP<STRING, ARRAY<TIMESTAMP>>"),
    ]
    assert spark_ddl(schema) == (
        "`id` BIGINT, `user` STRUCT<`name`: STRING, `a b`: BIGINT>, `tags` ARRAY<STRING>, "
        "`m` MAP<STRING, ARRAY<TIMESTAMP>>"
    )
    assert spark_schema(schema).simpleString() == (
        "struct<id:bigint,user:struct<name:string,a b:bigint>,tags:array<string>,"
        "m:map<string,array<timestamp>>>"
    )


def test_unsupported_nested_types_are_named() -> None:
    with pytest.raises(
        ValueError, match=r"^column 's': field 'b': unsupported column type binary$"
    ):
        normalize_schema(pa.schema([("s", pa.struct([("a", pa.int64()), ("b", pa.binary())]))]))
