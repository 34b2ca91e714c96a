"""The executors' read of Parquet and CSV splits without dead letters imports no pandas.

pyarrow imports pandas (when it is installed) the first time a Python value is turned into
Arrow, which costs each of Spark's Python workers about 0.2 to 0.45 s of CPU
(``_arrow_literals``). The read runs here as an executor runs it: the plan pickled on the
driver side, then decoded and read in a fresh interpreter.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reactive_streams._arrow_literals import (
    bool_scalar,
    int8_scalar,
    int64_range,
    null_scalar,
    string_array,
    string_scalar,
)
from reactive_streams.files import SplitReader, count_records, plan_splits, split_boundaries
from reactive_streams.pipeline._inputs import plan_inputs
from reactive_streams.pipeline._splits import DeadLetterSplitter
from reactive_streams.spark._splits_source import SplitPlan, encode_plan
from reactive_streams.spark.splits import FileOpener, file_splits

if TYPE_CHECKING:
    from pathlib import Path

READ_IN_A_FRESH_PROCESS = r"""
import base64, sys
import pyarrow as pa
from reactive_streams.spark._splits_source import SplitPartition, decode_plan, read_partition

plan = decode_plan(sys.stdin.read())
schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(sys.argv[1])))
rows = 0
for index, split in enumerate(plan.splits):
    share = SplitPartition(index, split, plan.names[index], 0, plan.count(split))
    rows += sum(batch.num_rows for batch in read_partition(plan, share, schema))
print(rows, "pandas" in sys.modules)
"""


def _write(tmp_path: Path, kind: str) -> Path:
    stamps = [f"2013-01-0{day} 0{hour}:00:00" for day in range(1, 4) for hour in range(3)]
    table = pa.table(
        {
            "origin": ["EWR", "JFK", "LGA"] * 3,
            "delay": [float(n) for n in range(9)],
            "flights": list(range(9)),
            "time_hour": stamps,  # text, so that it needs converting to a timestamp
        }
    )
    if kind == "parquet":
        path = tmp_path / "flights.parquet"
        pq.write_table(table, path, row_group_size=4)
    else:
        path = tmp_path / "flights.csv"
        lines = ["origin,delay,flights,time_hour"]
        lines += [",".join(str(v) for v in row.values()) for row in table.to_pylist()]
        path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_reading_splits_imports_no_pandas(tmp_path: Path, kind: str) -> None:
    path = _write(tmp_path, kind)
    inputs = plan_inputs([path])
    splits = plan_splits(inputs.files)
    kept = ("origin", "delay", "time_hour")
    reader = SplitReader(inputs.schema, 4, keep=kept)
    plan = SplitPlan(
        splits=splits,
        names=tuple(str(split) for split in splits),
        opener=FileOpener(reader),
        count=count_records,
        transform=DeadLetterSplitter(str(tmp_path / "dead"), kept),
        arrow=True,
        chunk_rows=4,
        max_records_per_trigger=100,
        read_timeout=30.0,
        stream_id="no-pandas",
        boundaries=split_boundaries,
        max_partitions=1,
    )
    assert _read_in_a_fresh_process(plan, reader.kept_schema) == 9
    assert not (tmp_path / "dead").exists()  # no dead letter: the path measured is the fast one


def test_file_splits_with_row_and_file_columns_import_no_pandas(tmp_path: Path) -> None:
    found = file_splits(_write(tmp_path, "parquet"), row_column="row", file_column="file")
    plan = SplitPlan(
        splits=found.splits,
        names=tuple(str(split) for split in found.splits),
        opener=found.opener,
        count=found.count,
        arrow=True,
        stream_id="no-pandas-files",
    )
    extra = [pa.field("row", pa.int64()), pa.field("file", pa.string())]
    assert _read_in_a_fresh_process(plan, pa.schema([*found.schema, *extra])) == 9


def _read_in_a_fresh_process(plan: SplitPlan, schema: pa.Schema) -> int:
    """Rows read from every split by a fresh interpreter, which must not import pandas."""
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            READ_IN_A_FRESH_PROCESS,
            base64.b64encode(schema.serialize().to_pybytes()).decode(),
        ],
        input=encode_plan(plan),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    rows, imported = completed.stdout.split()
    assert imported == "False", "reading the splits imported pandas"
    return int(rows)


@given(st.lists(st.text()))
def test_string_array_equals_pyarrows_own(values: list[str]) -> None:
    built = string_array(values)
    built.validate(full=True)
    assert built.equals(pa.array(values, pa.string()))


@pytest.mark.parametrize("value", [-128, -1, 0, 1, 2, 127])
def test_int8_scalar_equals_pyarrows_own(value: int) -> None:
    assert int8_scalar(value).equals(pa.scalar(value, pa.int8()))


def test_int8_scalar_refuses_what_does_not_fit() -> None:
    with pytest.raises(OverflowError):
        int8_scalar(128)


def test_the_other_literals_equal_pyarrows_own() -> None:
    assert bool_scalar(True).equals(pa.scalar(True))
    assert bool_scalar(False).equals(pa.scalar(False))
    assert string_scalar("é").equals(pa.scalar("é", pa.string()))
    assert null_scalar(pa.timestamp("us")).equals(pa.scalar(None, pa.timestamp("us")))


@pytest.mark.parametrize(("start", "stop"), [(0, 0), (5, 3), (0, 4), (-2, 3), (2**40, 2**40 + 3)])
def test_int64_range_equals_pyarrows_own(start: int, stop: int) -> None:
    built = int64_range(start, stop)
    built.validate(full=True)
    assert built.equals(pa.array(range(start, stop), pa.int64()))
