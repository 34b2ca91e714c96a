"""Pipeline.wait reads the query's progress while it waits (Spark keeps only the last 100)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from reactive_streams.pipeline import Pipeline, PipelineConfig


class _RollingQuery:
    """A query whose ``recentProgress`` keeps only the last 2 batches, like Spark's last 100."""

    def __init__(self) -> None:
        self.batch = -1

    def advance(self) -> None:
        self.batch += 1

    @property
    def recentProgress(self) -> list[Any]:
        first = max(0, self.batch - 1)
        return [
            SimpleNamespace(
                batchId=batch_id,
                numInputRows=10,
                stateOperators=[SimpleNamespace(numRowsDroppedByWatermark=1)],
            )
            for batch_id in range(first, self.batch + 1)
        ]


class _Sink:
    """Ends the stream after ``batches`` waits; each wait lets the query run one batch."""

    def __init__(self, query: _RollingQuery, batches: int) -> None:
        self.query = query
        self.batches = batches

    def wait(self, timeout: float | None) -> bool:
        if self.query.batch + 1 >= self.batches:
            return True
        self.query.advance()
        return False


def test_wait_counts_every_micro_batch_even_beyond_what_spark_keeps(tmp_path: Path) -> None:
    pipe = Pipeline(PipelineConfig(output=tmp_path / "out"))
    query = _RollingQuery()
    pipe._sink = _Sink(query, batches=7)  # type: ignore[assignment]
    pipe._publisher = SimpleNamespace(  # type: ignore[assignment]
        subscriptions=[SimpleNamespace(query=query)]
    )
    assert pipe.wait()
    rows, late = pipe._query_progress.totals()
    # 7 batches ran; Spark's progress never showed more than 2 at a time.
    assert (rows, late) == (70, 7)
