"""What the sink tests share: a small flights CSV, queries, runs, exact comparisons."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from .conftest import run_to_end

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

FLIGHTS = 1_200


def flights(path: Path) -> Path:
    origins = ["EWR", "JFK", "LGA", ""]
    lines = ["id,origin,hour,delay"]
    for index in range(FLIGHTS):
        delay = "" if index % 17 == 0 else f"{(index * 7919) % 301 - 50}.{index % 10}"
        lines.append(f"{index},{origins[index % 4]},{index % 24},{delay}")
    path.write_text("\n".join(lines) + "\n")
    return path


GROUPED = (
    "SELECT origin, hour, count(*) AS flights, avg(delay) AS avg_delay, max(delay) AS max_delay "
    "FROM events GROUP BY origin, hour"
)
APPENDED = "SELECT id, origin, delay FROM events WHERE delay IS NOT NULL"


def run(
    spark: SparkSession,
    tmp_path: Path,
    name: str,
    sql: str,
    *,
    mode: str,
    sink: str | None,
    keys: tuple[str, ...] = (),
    data: Path,
) -> Any:
    from reactive_streams.pipeline import Pipeline, PipelineConfig

    config = PipelineConfig(
        inputs=(data,), sql=sql, output=tmp_path / name, output_mode=mode,  # type: ignore[arg-type]
        keys=keys, sink=sink, max_records_per_trigger=100, read_on="driver",
    )  # fmt: skip
    pipe = Pipeline(config)
    try:
        run_to_end(pipe, spark)
        result = pipe.finish()
    finally:
        pipe.close()
    assert result.status == "completed", result.error
    return result


def parquet_rows(path: Path, order: list[str]) -> list[tuple[Any, ...]]:
    table = pq.read_table(path).sort_by([(name, "ascending") for name in order])
    return [tuple(row.values()) for row in table.to_pylist()]


def same(actual: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]) -> None:
    """Exactly equal, NaN equal to NaN (float values compared bit for bit)."""
    assert len(actual) == len(expected)
    for mine, theirs in zip(actual, expected, strict=True):
        assert len(mine) == len(theirs)
        for a, b in zip(mine, theirs, strict=True):
            if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
                assert math.isnan(b)
            else:
                assert a == b, (mine, theirs)


def expected_appended(data: Path) -> list[tuple[int]]:
    rows = []
    for line in data.read_text().splitlines()[1:]:
        index, _, _, delay = line.split(",")
        if delay:
            rows.append((int(index),))
    return rows
