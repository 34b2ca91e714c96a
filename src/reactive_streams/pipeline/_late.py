"""Late rows counted as input rows, not as Spark's partial aggregates.

Spark reports the rows a watermark dropped (``numRowsDroppedByWatermark``) at the stateful
operator, after the partial aggregation: three late readings of one group in one
micro-batch count as one. The summary counts input rows instead, for the queries where
Spark's rule is simple to follow (``late_rule``): one watermark on a column of ``events``
and one aggregation grouped by that event time, the column itself or a ``window(...)``
over it. Spark drops a row of micro-batch ``b`` when its group's event time (the column,
or the window's end) is at or before the watermark of micro-batch ``b - 1`` (the
watermark a stateful operator judges late rows by; see ``LateRows``).

Three pieces:

* ``LateRule``: the query's rule: each row's **late key**, the event time that decides
  (the column's value, or the end of the row's last window), in microseconds;
* ``LateTally``: where the rows are read (the executors' transform, or this process with
  ``--read-on driver``), each chunk of records is written as a tally: where it starts in
  the stream and how many of its rows have each late key;
* ``LateRows``: on the driver, each tally is matched with the micro-batch that read it
  (the query's progress: each micro-batch's offsets) and counted against the watermark
  before that micro-batch.

For a sliding window (``window(t, '10 minutes', '5 minutes')``) a row is in several
windows, and Spark drops it from those already closed: the count is the rows dropped from
every window (their last window closed too).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]

from ._parts import write_part

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from pyspark.sql import SparkSession

__all__ = [
    "BatchRange",
    "LateRows",
    "LateRule",
    "LateTally",
    "NO_KEY",
    "SequenceTally",
    "batch_range",
    "late_rule",
    "watermark_ms",
]

logger = logging.getLogger("reactive_streams.pipeline")

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class LateRule:
    """How a query's aggregation judges a row late, as a key per row.

    Attributes:
        column: the event-time column of ``events`` (a timestamp).
        duration: the window's length in microseconds; ``None``: the query groups by the
            event time itself.
        slide: how far apart windows start, in microseconds (``duration`` for a tumbling
            window).
        start: the windows' offset from the epoch, in microseconds (``window``'s
            ``startTime``).
    """

    column: str
    duration: int | None = None
    slide: int = 0
    start: int = 0

    def keys(self, times: pa.Array | pa.ChunkedArray) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The late key of each row, in microseconds since the epoch; ``NO_KEY`` for null.

        A row is late when its key is at or before the watermark. For a window, the key
        is the end of the last window that holds the row (Spark's windows start at
        ``start + k * slide`` and hold ``[window start, window start + duration)``). A
        null time has no key: Spark's window leaves such a row out, and it is never late.

        Raises:
            TypeError: ``times`` is not a timestamp array.
        """
        if not pa.types.is_timestamp(times.type):
            raise TypeError(f"the event-time column {self.column} is {times.type}, not a timestamp")
        micros = times.cast(pa.timestamp("us", tz=times.type.tz)).cast(pa.int64())
        if isinstance(micros, pa.ChunkedArray):
            micros = micros.combine_chunks()
        filled = pc.fill_null(micros, NO_KEY).to_numpy(zero_copy_only=False)
        values: np.ndarray[Any, np.dtype[np.int64]] = np.array(filled, dtype=np.int64)
        if self.duration is not None:
            # The last window holding t starts at t - ((t - start) mod slide); numpy's mod
            # of a positive divisor is never negative, as Spark's window arithmetic makes it.
            keys = values - np.mod(values - self.start, self.slide) + self.duration
            values = np.where(values == NO_KEY, NO_KEY, keys)
        return values


NO_KEY: Final = int(np.iinfo(np.int64).min)
"""The late key of a row that is never late (a null time, or a dead letter)."""


def late_rule(spark: SparkSession, sql: str, schema: pa.Schema, view: str) -> LateRule | None:
    """The rule by which ``sql``'s aggregation drops late rows, if it is a simple one.

    ``sql`` is analysed (never run) over a stand-in for ``view``: a streaming read of an
    empty directory with ``schema``, as the query's own stream will be; the stand-in is
    dropped afterwards. A query with no ``WATERMARK`` is not analysed.

    Returns:
        The rule; ``None`` when the query has no watermark, or judges late rows in a way
        ``late_rule`` does not follow (a join, a deduplication, a session window, two
        aggregations, a watermark on a computed column, a window with a computed length,
        any failure of the analysis): the summary then reports Spark's own count.
    """
    if "watermark" not in sql.lower():
        return None
    from reactive_streams.spark.plans import (  # noqa: PLC0415
        query_dataframe,
        watermark_grouping,
        window_calls,
    )

    from ._schema import spark_schema  # noqa: PLC0415

    try:
        with tempfile.TemporaryDirectory(prefix="reactive-streams-late-") as empty:
            frame = spark.readStream.schema(spark_schema(schema)).parquet(empty)
            frame.createOrReplaceTempView(view)
            try:
                grouping = watermark_grouping(query_dataframe(spark, sql), view)
            finally:
                spark.catalog.dropTempView(view)
        if grouping is None:
            return None
        column, kind = grouping
        if column not in schema.names or not pa.types.is_timestamp(schema.field(column).type):
            return None
        if kind == "time":
            return LateRule(column)
        calls = window_calls(spark, sql)
    except Exception as exc:  # the figure falls back to Spark's; never fail the run
        logger.info("late rows are counted as Spark counts them: %s", exc)
        return None
    if len(calls) != 1 or calls[0] is None or calls[0][0] != column:
        return None
    _, duration, slide, start = calls[0]
    if duration <= 0 or slide <= 0 or slide > duration:
        return None
    return LateRule(column, duration, slide, start)


@dataclass(frozen=True, slots=True)
class LateTally:
    """Writes, per chunk of records read, how many rows have each late key.

    One JSON file per chunk, named by a hash of its content and written whole (a
    temporary file renamed), so a retried task or a replayed micro-batch writes the same
    file again. A chunk's rows are consecutive records of one lane of the stream: a split
    (``--read-on executors``: the lane is the file's path, positions count its records) or
    the one stream of ``--read-on driver`` (lane ``""``, positions count the rows sent to
    Spark).

    Attributes:
        rule: the query's rule.
        directory: where the tallies go (a path every executor can write).
    """

    rule: LateRule
    directory: str

    def record(self, lane: str, first: int, keys: np.ndarray[Any, np.dtype[np.int64]]) -> None:
        """Tally the chunk of ``lane`` whose rows hold positions ``first, first + 1, ...``.

        ``keys`` has one late key per row (``LateRule.keys``; ``NO_KEY`` for a row that
        is never late, a dead letter among them). They are kept in row order, run-length
        encoded (input sorted by event time makes long runs), so the micro-batch each row
        went to can be told even when a micro-batch ends inside the chunk.

        Raises:
            OSError: the tally cannot be written (the read fails, as for a dead letter).
        """
        if len(keys) == 0 or bool(np.all(keys == NO_KEY)):
            return
        changes = np.flatnonzero(np.diff(keys)) + 1
        starts = np.concatenate(([0], changes))
        lengths = np.diff(np.concatenate((starts, [len(keys)])))
        text = json.dumps(
            {
                "lane": lane,
                "first": first,
                "keys": [None if key == NO_KEY else int(key) for key in keys[starts]],
                "runs": [int(length) for length in lengths],
            },
            separators=(",", ":"),
        )
        write_part(self.directory, text, ".json")


@dataclass(frozen=True, slots=True)
class BatchRange:
    """What one finished micro-batch read, from the query's progress.

    Attributes:
        start: per lane, the first position read (``from_splits``: per split, its
            record offset; the driver's bridge: one lane, the row sequence number).
        end: per lane, one past the last position read.
        watermark_ms: the micro-batch's watermark (``eventTime.watermark``), in
            milliseconds since the epoch; ``None`` when the query has none.
        per_split: the lanes are ``from_splits``' splits (``{"rows": [...]}`` offsets),
            not the one lane of the driver's bridge.
    """

    start: tuple[int, ...]
    end: tuple[int, ...]
    watermark_ms: int | None
    per_split: bool = False

    @property
    def shares(self) -> tuple[int, ...]:
        """Per lane, the positions the micro-batch read (``end - start``)."""
        return tuple(last - first for first, last in zip(self.start, self.end, strict=True))


def watermark_ms(progress: Any) -> int | None:
    """A ``StreamingQueryProgress``'s watermark in milliseconds, if it reports one."""
    try:
        text = progress.eventTime.get("watermark")
    except Exception:
        return None
    if not text:
        return None
    stamp = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return (stamp - _EPOCH) // dt.timedelta(milliseconds=1)


def batch_range(progress: Any) -> BatchRange | None:
    """The offsets a progress's one source read, as lanes; ``None`` for another source."""
    try:
        source = progress.sources[0]
        end = json.loads(source.endOffset)
        begin = json.loads(source.startOffset) if source.startOffset else None
    except Exception:  # no source or no offsets yet
        return None
    if isinstance(end, dict) and "rows" in end:  # from_splits: per split
        last = tuple(int(value) for value in end["rows"])
        first = (
            tuple(int(v) for v in begin["rows"]) if isinstance(begin, dict) else (0,) * len(last)
        )
    elif isinstance(end, dict) and "seq" in end:  # the driver's bridge: one lane
        last = (int(end["seq"]),)
        first = (int(begin["seq"]),) if isinstance(begin, dict) else (0,)
    else:
        return None
    if len(first) != len(last):
        return None
    return BatchRange(first, last, watermark_ms(progress), per_split="rows" in end)


class _Chunk:
    """One tally on the driver: its rows' keys as runs, and which rows were counted."""

    def __init__(self, lane: int, first: int, keys: list[int | None], runs: list[int]) -> None:
        self.lane = lane
        self.first = first
        self.keys = np.array([NO_KEY if key is None else key for key in keys], dtype=np.int64)
        self.ends = np.cumsum(np.array(runs, dtype=np.int64)) + first
        self.starts = self.ends - np.array(runs, dtype=np.int64)
        self.size = int(self.ends[-1] - first) if len(runs) else 0
        self.counted: set[int] = set()  # micro-batches counted
        self.covered = 0  # rows counted

    def late(self, begin: int, end: int, threshold: int) -> tuple[int, int]:
        """``(late rows, rows)`` of this chunk among positions ``[begin, end)``."""
        overlap = np.clip(np.minimum(self.ends, end) - np.maximum(self.starts, begin), 0, None)
        late = (self.keys != NO_KEY) & (self.keys <= threshold)
        return int(overlap[late].sum()), int(overlap.sum())


@dataclass
class LateRows:
    """Counts the late input rows of this run's micro-batches, on the driver.

    Each tally (``LateTally``) is matched with the micro-batches whose offsets hold its
    rows, and a row is late when its key is at or before the watermark of the micro-batch
    before its own (the watermark a stateful operator judges late rows by since Spark
    3.5). That watermark comes from the previous micro-batch's progress or, for the first
    micro-batch after a restart, from the checkpoint's offset log (``batchWatermarkMs``);
    the first micro-batch of a query judges by the epoch. Rows whose micro-batch has not
    been seen (yet) are not counted; a tally is let go once all its rows were counted, so
    memory holds only the rows read and not yet in a finished micro-batch.

    Attributes:
        directory: where the tallies are written.
        lanes: a tally's lane (``LateTally``) to its index in the offsets.
        offsets: the query checkpoint's ``offsets`` directory, if it has one.
    """

    directory: Path
    lanes: Mapping[str, int]
    offsets: Path | None = None
    _open: dict[str, _Chunk] = field(default_factory=dict)
    _done: set[str] = field(default_factory=set)
    _late: int = 0

    def _read_new(self) -> None:
        with contextlib.suppress(OSError):
            for path in self.directory.glob("*.json"):
                if path.name in self._open or path.name in self._done:
                    continue
                try:
                    data = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue  # being replaced: read it at the next count
                lane = self.lanes.get(str(data["lane"]))
                if lane is None:
                    self._done.add(path.name)
                    continue
                self._open[path.name] = _Chunk(
                    lane, int(data["first"]), list(data["keys"]), list(data["runs"])
                )

    def _logged_watermark(self, batch: int) -> int | None:
        """``batchWatermarkMs`` of ``batch`` in the checkpoint's offset log, if there."""
        if self.offsets is None:
            return None
        try:
            lines = (self.offsets / str(batch)).read_text(encoding="utf-8").splitlines()
            return int(json.loads(lines[1])["batchWatermarkMs"])
        except (OSError, ValueError, IndexError, KeyError, TypeError):
            return None

    def _threshold_us(self, batch: int, batches: Mapping[int, BatchRange]) -> int | None:
        if batch == 0:
            return 0
        before = batches.get(batch - 1)
        if before is not None and before.watermark_ms is not None:
            return before.watermark_ms * 1000
        logged = self._logged_watermark(batch - 1)
        return None if logged is None else logged * 1000

    def count(self, batches: Mapping[int, BatchRange]) -> int:
        """Late input rows so far, given the finished micro-batches seen (by id)."""
        self._read_new()
        thresholds: dict[int, int | None] = {}
        for name, chunk in list(self._open.items()):
            for batch, window in batches.items():
                if batch in chunk.counted or chunk.lane >= len(window.end):
                    continue
                begin, end = window.start[chunk.lane], window.end[chunk.lane]
                if end <= chunk.first or begin >= chunk.first + chunk.size:
                    continue
                if batch not in thresholds:
                    thresholds[batch] = self._threshold_us(batch, batches)
                threshold = thresholds[batch]
                if threshold is None:
                    continue
                late, rows = chunk.late(begin, end, threshold)
                self._late += late
                chunk.covered += rows
                chunk.counted.add(batch)
            if chunk.covered >= chunk.size:
                del self._open[name]
                self._done.add(name)
        return self._late


class SequenceTally:
    """``--read-on driver``: tallies each record batch on its way to the bridge.

    A mapping function for the stream of Arrow record batches sent to Spark: it returns
    each batch unchanged and tallies it in lane ``""`` at its row sequence number (the
    bridge's offsets), counting from ``start`` (the rows an earlier run's micro-batches
    hold). Called once per element, in order (Rule 1.3 serializes ``on_next``).
    """

    def __init__(self, tally: LateTally, start: int) -> None:
        self._tally = tally
        self._position = start

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch``, tallied.

        Raises:
            OSError: the tally cannot be written (the stream fails with it).
        """
        rule = self._tally.rule
        self._tally.record("", self._position, rule.keys(batch.column(rule.column)))
        self._position += batch.num_rows
        return batch
