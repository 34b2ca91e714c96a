"""Reading where a rerun resumes from Spark's offset and commit logs (no Spark needed)."""

from __future__ import annotations

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
