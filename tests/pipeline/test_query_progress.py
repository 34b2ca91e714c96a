"""QueryProgress: input rows per micro-batch and the splits' shares, from fake progress."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from reactive_streams.pipeline._diagnostics import QueryProgress


def _progress(batch: int, rows: int, start: list[int] | None, end: list[int]) -> Any:
    """A progress as PySpark 4.3 gives it: a first micro-batch's start is the text "null"."""
    source = SimpleNamespace(
        startOffset=json.dumps(None if start is None else {"rows": start}),
        endOffset=json.dumps({"rows": end}),
    )
    return SimpleNamespace(batchId=batch, numInputRows=rows, stateOperators=[], sources=[source])


def test_the_shares_are_those_of_the_last_micro_batch_that_read_rows() -> None:
    first = _progress(0, 30, None, [10, 20])
    idle = _progress(1, 0, [10, 20], [10, 20])  # a trigger that found nothing new
    progress = QueryProgress()

    progress.poll(SimpleNamespace(recentProgress=[first]))
    assert progress.shares == (10, 20)
    progress.poll(SimpleNamespace(recentProgress=[first, idle]))
    assert progress.shares == (10, 20)  # not (0, 0): the display would say "none read"
    assert progress.totals() == (30, 0)


def test_a_later_micro_batch_replaces_the_shares() -> None:
    progress = QueryProgress()
    progress.poll(
        SimpleNamespace(
            recentProgress=[_progress(0, 30, None, [10, 20]), _progress(1, 5, [10, 20], [15, 20])]
        )
    )
    assert progress.shares == (5, 0)
    assert progress.totals() == (35, 0)


def test_a_poll_that_first_sees_the_idle_trigger_still_finds_the_shares() -> None:
    progress = QueryProgress()
    progress.poll(
        SimpleNamespace(
            recentProgress=[_progress(0, 30, None, [10, 20]), _progress(1, 0, [10, 20], [10, 20])]
        )
    )
    assert progress.shares == (10, 20)
