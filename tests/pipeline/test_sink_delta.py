"""``--sink delta:PATH``: a Delta Lake table, exactly once, read back by DuckDB."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest
from click.testing import CliRunner

from reactive_streams.cli import main
from reactive_streams.pipeline import PipelineUsageError

from .conftest import BRIDGES
from .sinks import APPENDED, GROUPED, flights, parquet_rows, run, same

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

deltalake = pytest.importorskip("deltalake")
duckdb = pytest.importorskip("duckdb")

UTC = dt.UTC
SCHEMA = pa.schema(
    [("origin", pa.string()), ("hour", pa.timestamp("us", tz="UTC")), ("n", pa.int64())]
)


def _batch(*rows: tuple[str | None, int, int]) -> pa.Table:
    return pa.table(
        {
            "origin": [row[0] for row in rows],
            "hour": [dt.datetime(2013, 1, 1, row[1], tzinfo=UTC) for row in rows],
            "n": [row[2] for row in rows],
        },
        schema=SCHEMA,
    )


def _read(path: Path, order: str) -> list[tuple[Any, ...]]:
    """The table's rows as DuckDB reads them (the files delta-rs lists from the log)."""
    dataset = deltalake.DeltaTable(str(path)).to_pyarrow_dataset()
    connection = duckdb.connect()
    connection.register("result", dataset)
    return list(connection.execute(f"SELECT * FROM result ORDER BY {order}").fetchall())


def _target(path: Path, stream: str = "s") -> Any:
    from reactive_streams.pipeline._delta import DeltaTarget

    return DeltaTarget.from_url(f"delta://{path}", stream=stream)


@pytest.mark.parametrize("mode", ["append", "update", "complete"])
def test_each_micro_batch_is_committed_once_with_its_batch_id(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "table"
    keys = ("origin", "hour") if mode == "update" else ()
    target = _target(path)
    target.check(mode=mode, keys=keys, columns=None)
    target.prepare(SCHEMA, mode=mode, keys=keys)
    assert target.write(0, _batch(("EWR", 1, 1), (None, 1, 2)))
    assert target.write(1, _batch(("EWR", 1, 3)))
    assert not target.write(1, _batch(("EWR", 1, 99)))  # a replay: nothing
    assert not target.write(0, _batch(("LGA", 1, 99)))
    # a new target on the same stream (a restart) still knows what was committed
    again = _target(path)
    again.check(mode=mode, keys=keys, columns=None)
    again.prepare(SCHEMA, mode=mode, keys=keys)
    assert not again.write(1, _batch(("EWR", 1, 99)))
    hour = dt.datetime(2013, 1, 1, 1, tzinfo=UTC)
    expected = {
        "append": [("EWR", hour, 1), ("EWR", hour, 3), (None, hour, 2)],
        "update": [("EWR", hour, 3), (None, hour, 2)],
        "complete": [("EWR", hour, 3)],
    }[mode]
    assert _read(path, "origin NULLS LAST, n") == expected
    assert deltalake.DeltaTable(str(path)).transaction_version("s") == 1


def test_a_table_with_other_columns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "table"
    deltalake.write_deltalake(str(path), pa.table({"origin": ["EWR"], "other": [1]}))
    result = CliRunner().invoke(
        main, ["pipeline", "--quiet", "--sink", f"delta:{path}", "--output", str(tmp_path / "o")]
    )
    assert result.exit_code == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"Error: --sink delta:{path}: the table exists with other columns (origin, other); the "
        "result has (origin, window_start, window_end, flights, cancelled, avg_dep_delay, "
        "max_dep_delay): use another path"
    ]


def test_a_directory_of_other_files_and_a_remote_url_are_refused(tmp_path: Path) -> None:
    (tmp_path / "stuff.txt").write_text("x")
    with pytest.raises(PipelineUsageError, match=r"not a Delta table; use an empty"):
        _target(tmp_path).check(mode="append", keys=(), columns=None)
    from reactive_streams.pipeline._delta import DeltaTarget

    with pytest.raises(PipelineUsageError, match=r"delta:///ABSOLUTE/PATH"):
        DeltaTarget.from_url("delta://host/x", stream="s")


@pytest.mark.parametrize(
    ("mode", "sql", "keys", "order"),
    [
        ("update", GROUPED, ("origin", "hour"), ["origin", "hour"]),
        ("append", APPENDED, (), ["id"]),
    ],
)
@pytest.mark.spark
@pytest.mark.timeout(400)
@pytest.mark.skipif(not BRIDGES, reason="needs pyspark (the spark extra)")
def test_the_delta_table_equals_the_parquet_result_of_the_same_query(
    spark: SparkSession, tmp_path: Path, *,
    mode: str, sql: str, keys: tuple[str, ...], order: list[str],
) -> None:  # fmt: skip
    data = flights(tmp_path / "flights.csv")
    run(spark, tmp_path, "file", sql, mode=mode, sink=None, keys=keys, data=data)
    table = tmp_path / "delta"
    result = run(
        spark, tmp_path, "sink", sql, mode=mode, sink=f"delta:{table}", keys=keys, data=data
    )
    assert result.sink == f"delta:{table}"
    columns = ", ".join(f"{name} NULLS LAST" for name in order)
    same(_read(table, columns), parquet_rows(tmp_path / "file" / "result.parquet", order))


def test_a_checkpoint_resumes_only_into_the_sink_it_was_written_with(tmp_path: Path) -> None:
    from reactive_streams.pipeline import Pipeline, PipelineConfig

    data = tmp_path / "a.csv"
    data.write_text("x,y\n1,2\n")
    checkpoint = tmp_path / "checkpoint"

    def prepare(sink: str | None) -> None:
        config = PipelineConfig(
            inputs=(data,), sql="SELECT x FROM events", output=tmp_path / "out",
            checkpoint=checkpoint, sink=sink,
        )  # fmt: skip
        Pipeline(config).prepare()

    prepare(f"delta:{tmp_path / 'one'}")
    offsets = checkpoint / "query" / "offsets"  # as Spark leaves a run that started
    offsets.mkdir(parents=True)
    (offsets / "0").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n{"seq":1}')
    prepare(f"delta:{tmp_path / 'one'}")  # the same sink: resumed
    stream = (checkpoint / "sink-id").read_text()
    for other in (f"delta:{tmp_path / 'two'}", None):
        with pytest.raises(PipelineUsageError, match=r"another run: the sink \(--sink\) changed"):
            prepare(other)
    assert (checkpoint / "sink-id").read_text() == stream  # one stream id per checkpoint
