"""``_late`` without Spark: tallies in row order, matched with micro-batches, counted once."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams.pipeline._late import (
    NO_KEY,
    BatchRange,
    LateRows,
    LateRule,
    LateTally,
    SequenceTally,
)

if TYPE_CHECKING:
    from pathlib import Path

MINUTE = 60_000_000


def _keys(*values: int | None) -> np.ndarray[Any, np.dtype[np.int64]]:
    return np.array([NO_KEY if value is None else value for value in values], dtype=np.int64)


def test_a_chunk_split_between_micro_batches_is_judged_by_each_ones_watermark(
    tmp_path: Path,
) -> None:
    tally = LateTally(LateRule("t"), str(tmp_path))
    # Positions 10..15; the micro-batch boundary falls at 13.
    tally.record("", 10, _keys(5, 5, 20, 5, None, 30))
    counter = LateRows(tmp_path, {"": 0})
    first = {3: BatchRange((10,), (13,), 0)}
    # Micro-batch 3's threshold is micro-batch 2's watermark: not seen yet, nothing counted.
    assert counter.count(first) == 0
    batches = {2: BatchRange((0,), (10,), 0), **first}  # threshold 0: nothing late
    assert counter.count(batches) == 0
    batches[4] = BatchRange((13,), (16,), 0)
    batches[3] = BatchRange((10,), (13,), 1)  # watermark 1 ms = 1,000 us
    # Micro-batch 4 (positions 13..15) by micro-batch 3's watermark (1 ms): 5 is late, the
    # null (NO_KEY) never is, 30 is late too (30 us <= 1,000 us).
    assert counter.count(batches) == 2
    assert counter.count(batches) == 2  # counted once, however often asked


def test_lanes_map_files_to_split_offsets_and_unknown_lanes_are_ignored(tmp_path: Path) -> None:
    tally = LateTally(LateRule("t"), str(tmp_path))
    tally.record("b.csv", 0, _keys(1, 1, 1))
    tally.record("a.csv", 0, _keys(1, 2))
    tally.record("gone.csv", 0, _keys(1))
    counter = LateRows(tmp_path, {"a.csv": 0, "b.csv": 1})
    batches = {
        0: BatchRange((0, 0), (0, 0), 5),
        1: BatchRange((0, 0), (2, 1), 5),  # a.csv rows 0-1, b.csv row 0
        2: BatchRange((2, 1), (2, 3), 5),  # b.csv rows 1-2
    }
    assert counter.count(batches) == 5  # keys 1 and 2 us <= 5 ms


def test_the_first_micro_batch_after_a_restart_reads_the_offset_log(tmp_path: Path) -> None:
    tallies, offsets = tmp_path / "late", tmp_path / "offsets"
    offsets.mkdir()
    (offsets / "6").write_text(
        'v1\n{"batchWatermarkMs":2,"batchTimestampMs":0,"conf":{}}\n{"seq":40}\n',
        encoding="utf-8",
    )
    LateTally(LateRule("t"), str(tallies)).record("", 40, _keys(1_000, 2_000, 3_000))
    counter = LateRows(tallies, {"": 0}, offsets)
    assert counter.count({7: BatchRange((40,), (43,), 9)}) == 2  # <= 2 ms


def test_a_replayed_chunk_writes_the_same_file_and_counts_once(tmp_path: Path) -> None:
    tally = LateTally(LateRule("t"), str(tmp_path))
    for _ in range(3):
        tally.record("", 0, _keys(1, 1, 2))
    assert len(list(tmp_path.glob("*.json"))) == 1
    text = next(tmp_path.glob("*.json")).read_text(encoding="utf-8")
    assert json.loads(text) == {"lane": "", "first": 0, "keys": [1, 2], "runs": [2, 1]}
    assert LateRows(tmp_path, {"": 0}).count({0: BatchRange((0,), (3,), 0)}) == 0


def test_sequence_tally_numbers_the_rows_sent_to_spark(tmp_path: Path) -> None:
    rule = LateRule("t", 5 * MINUTE, 5 * MINUTE)
    tally = SequenceTally(LateTally(rule, str(tmp_path)), start=100)
    times = pa.array([0, 4 * MINUTE, None], pa.timestamp("us", tz="UTC"))
    batch = pa.RecordBatch.from_arrays([times], names=["t"])
    assert tally(batch) is batch
    assert tally(batch) is batch
    firsts = sorted(
        json.loads(path.read_text(encoding="utf-8"))["first"] for path in tmp_path.glob("*.json")
    )
    assert firsts == [100, 103]


def test_a_timestamp_is_required() -> None:
    with pytest.raises(TypeError, match="not a timestamp"):
        LateRule("t").keys(pa.array([1, 2]))
