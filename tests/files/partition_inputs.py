"""Input files for the partition tests: CSV, JSON Lines and Parquet, with bad records."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from reactive_streams.files import InputFile, SplitReader, list_files, plan_splits

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
CSV_RECORDS = 30
JSONL_RECORDS = 20
PARQUET_RECORDS = 25
RECORDS = CSV_RECORDS + JSONL_RECORDS + PARQUET_RECORDS


def write_inputs(directory: Path) -> list[InputFile]:
    """``a.csv`` (a quoted line break, a bad score), ``b.jsonl`` (a line that is not JSON),
    ``c.parquet`` (row groups of 10): 75 records in all, ids 0 to 74, in this order."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = ["id,name,score"]
    for number in range(CSV_RECORDS):
        name = '"two\nlines"' if number == 3 else f"n{number}"
        score = "oops" if number == 7 else f"{number}.5"
        lines.append(f"{number},{name},{score}")
    (directory / "a.csv").write_text("\n".join(lines) + "\n")
    rows = []
    for number in range(CSV_RECORDS, CSV_RECORDS + JSONL_RECORDS):
        if number == CSV_RECORDS + 5:
            rows.append("{not json")
        else:
            rows.append(json.dumps({"id": number, "name": f"n{number}", "score": number}))
    (directory / "b.jsonl").write_text("\n".join(rows) + "\n")
    first = CSV_RECORDS + JSONL_RECORDS
    ids = list(range(first, first + PARQUET_RECORDS))
    table = pa.table({"id": ids, "name": [f"n{i}" for i in ids], "score": [float(i) for i in ids]})
    pq.write_table(table, directory / "c.parquet", row_group_size=10)
    return list_files([directory / "a.csv", directory / "b.jsonl", directory / "c.parquet"])


def local_rows(files: list[InputFile], schema: pa.Schema = SCHEMA) -> list[dict[str, object]]:
    """Every record of ``files``, read from the start by ``SplitReader``: the reference."""
    reader = SplitReader(schema)
    rows: list[dict[str, object]] = []
    for split in plan_splits(files):
        for batch in reader.batches(split):
            rows.extend(batch.to_pylist())
    return rows
