"""Reading where a rerun resumes from Spark's offset and commit logs (no Spark needed)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from reactive_streams.pipeline._checkpoint import ResumePoint, resume_point
from reactive_streams.pipeline._errors import PipelineUsageError

if TYPE_CHECKING:
    from pathlib import Path


def _offsets(query: Path, batch_id: int, source_line: str) -> None:
    (query / "offsets").mkdir(parents=True, exist_ok=True)
    metadata = '{"batchWatermarkMs":0,"batchTimestampMs":1}'
    (query / "offsets" / str(batch_id)).write_text(f"v1\n{metadata}\n{source_line}")


def _commit(query: Path, batch_id: int) -> None:
    (query / "commits").mkdir(parents=True, exist_ok=True)
    (query / "commits" / str(batch_id)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_a_new_checkpoint_has_no_resume_point(tmp_path: Path) -> None:
    assert resume_point(tmp_path / "query") is None


def test_resume_after_the_last_committed_batch_and_replay_the_planned_one(
    tmp_path: Path,
) -> None:
    query = tmp_path / "query"
    for batch_id, end in enumerate((400, 800, 1_200)):
        _offsets(query, batch_id, f'{{"seq":{end}}}')
    _commit(query, 0)
    _commit(query, 1)
    (query / "offsets" / ".2.crc").write_text("ignored")  # Hadoop's checksum files
    assert resume_point(query) == ResumePoint(offset=800, committed=2, replay=(800, 1_200))


def test_everything_committed_means_nothing_to_replay(tmp_path: Path) -> None:
    query = tmp_path / "query"
    _offsets(query, 0, '{"seq":10}')
    _commit(query, 0)
    assert resume_point(query) == ResumePoint(offset=10, committed=1, replay=None)


def test_nothing_committed_replays_from_the_first_record(tmp_path: Path) -> None:
    query = tmp_path / "query"
    _offsets(query, 0, '{"seq":10}')
    assert resume_point(query) == ResumePoint(offset=0, committed=0, replay=(0, 10))


def test_a_checkpoint_of_another_query_is_refused_in_one_line(tmp_path: Path) -> None:
    query = tmp_path / "query"
    _offsets(query, 0, '{"logOffset":3}')
    _commit(query, 0)
    with pytest.raises(PipelineUsageError, match=r"is not an offset log of this pipeline"):
        resume_point(query)


def _started_run(tmp_path: Path, *, sql: str | None, data: Path) -> Path:
    """A checkpoint whose first run planned a micro-batch, as Spark leaves it."""
    from reactive_streams.pipeline import Pipeline, PipelineConfig

    checkpoint = tmp_path / "checkpoint"
    config = PipelineConfig(inputs=(data,), sql=sql, output=tmp_path / "out", checkpoint=checkpoint)
    Pipeline(config).prepare()
    _offsets(checkpoint / "query", 0, '{"seq":1}')
    return checkpoint


def _prepare(tmp_path: Path, *, sql: str | None, data: Path, checkpoint: Path) -> None:
    from reactive_streams.pipeline import Pipeline, PipelineConfig

    config = PipelineConfig(inputs=(data,), sql=sql, output=tmp_path / "out", checkpoint=checkpoint)
    Pipeline(config).prepare()


def test_a_checkpoint_resumes_only_the_run_that_wrote_it(tmp_path: Path) -> None:
    data = tmp_path / "a.csv"
    data.write_text("x,y\n1,2\n3,4\n")
    other = tmp_path / "b.csv"
    other.write_text("x,y\n5,6\n")
    checkpoint = _started_run(tmp_path, sql="SELECT x FROM events", data=data)
    _prepare(tmp_path, sql="SELECT x FROM events", data=data, checkpoint=checkpoint)  # same run
    with pytest.raises(
        PipelineUsageError,
        match=r"^--checkpoint .*checkpoint was written by another run: the query \(--sql\) "
        r"changed since; .* use a new checkpoint directory",
    ):
        _prepare(tmp_path, sql="SELECT y FROM events", data=data, checkpoint=checkpoint)
    with pytest.raises(PipelineUsageError, match=r"another run: the input files \(paths"):
        _prepare(tmp_path, sql="SELECT x FROM events", data=other, checkpoint=checkpoint)
    data.write_text("x,y\n1,2\n3,4\n5,6\n")  # the same file, grown since
    with pytest.raises(PipelineUsageError, match=r"another run: the input files"):
        _prepare(tmp_path, sql="SELECT x FROM events", data=data, checkpoint=checkpoint)


def test_a_checkpoint_that_never_started_is_taken_over(tmp_path: Path) -> None:
    data = tmp_path / "a.csv"
    data.write_text("x,y\n1,2\n")
    checkpoint = tmp_path / "checkpoint"
    _prepare(tmp_path, sql="SELECT x FROM events", data=data, checkpoint=checkpoint)
    _prepare(tmp_path, sql="SELECT y FROM events", data=data, checkpoint=checkpoint)


def test_the_command_refuses_a_checkpoint_of_another_query_with_exit_2(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from reactive_streams.cli import main

    data = tmp_path / "a.csv"
    data.write_text("x,y\n1,2\n")
    checkpoint = _started_run(tmp_path, sql="SELECT x FROM events", data=data)
    summary = tmp_path / "summary.json"
    result = CliRunner().invoke(
        main,
        ["pipeline", "--quiet", "--input", str(data), "--sql", "SELECT y FROM events",
         "--checkpoint", str(checkpoint), "--output", str(tmp_path / "out"),
         "--summary-json", str(summary)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error: --checkpoint ") and "written by another run" in line
    assert json.loads(summary.read_text())["exit_code"] == 2


def test_a_checkpoint_keeps_the_input_columns_it_was_written_with(tmp_path: Path) -> None:
    from reactive_streams.pipeline._checkpoint import checkpoint_columns

    names = ("a", "b", "c", "d")
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "pipeline.json").write_text('{"sql": "q"}')
    # New: the query's columns are recorded next to the fingerprint.
    assert checkpoint_columns(checkpoint, ("a", "c"), names) == ("a", "c")
    recorded = json.loads((checkpoint / "pipeline.json").read_text())
    assert recorded == {"sql": "q", "columns": ["a", "c"]}
    _offsets(checkpoint / "query", 0, '{"seq": 0}')
    # Started: resumed with the recorded columns, whatever this run's analysis found.
    assert checkpoint_columns(checkpoint, ("a",), names) == ("a", "c")
    with pytest.raises(PipelineUsageError, match="other input columns"):
        checkpoint_columns(checkpoint, ("a", "b"), names)  # b was never sent
    # Written before the columns were recorded: every column was sent.
    (checkpoint / "pipeline.json").write_text('{"sql": "q"}')
    assert checkpoint_columns(checkpoint, ("a",), names) == names


def test_a_checkpoint_resumes_only_with_the_tables_it_was_written_with(tmp_path: Path) -> None:
    from reactive_streams.pipeline import Pipeline, PipelineConfig, TableSpec

    data = tmp_path / "a.csv"
    data.write_text("carrier,x\nAA,1\n")
    airlines = tmp_path / "airlines.csv"
    airlines.write_text("carrier,name\nAA,American\n")
    other = tmp_path / "other.csv"
    other.write_text("carrier,name\nAA,American\n")
    checkpoint = tmp_path / "checkpoint"
    sql = "SELECT name FROM events JOIN airlines USING (carrier)"

    def prepare(*tables: TableSpec) -> None:
        config = PipelineConfig(
            inputs=(data,), sql=sql, output=tmp_path / "out", checkpoint=checkpoint, tables=tables
        )
        Pipeline(config).prepare()

    prepare(TableSpec("airlines", airlines))
    _offsets(checkpoint / "query", 0, '{"seq":1}')
    prepare(TableSpec("airlines", airlines))  # the same run
    refused = r"^--checkpoint .* was written by another run: the reference tables \(--table "
    with pytest.raises(PipelineUsageError, match=refused):
        prepare(TableSpec("airlines", other))  # another file
    with pytest.raises(PipelineUsageError, match=refused):
        prepare(TableSpec("carriers", airlines))  # another name
    with pytest.raises(PipelineUsageError, match=refused):
        prepare()  # no table
    airlines.write_text("carrier,name\nAA,American Airlines\n")  # the same file, edited
    with pytest.raises(PipelineUsageError, match=refused):
        prepare(TableSpec("airlines", airlines))
