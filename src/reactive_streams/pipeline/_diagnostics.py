"""What the pipeline tells the user about a run: progress, the result, errors, memory.

* ``PipelineProgress``: a snapshot while the run goes; ``PipelineResult``: how it ended;
* ``summarize_error``: one line naming a failure and its root cause (Spark's errors are
  long and wrapped);
* ``QueryProgress``: input and late rows per micro-batch, from the query's own progress;
* ``peak_memory_bytes``: the driver's Python process; the JVM's is read by
  ``_spark_driver``;
* the log4j configuration that keeps the JVM quiet from its first line.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

from ..files import guess_timestamp_format
from ..spark import RouteStats
from ._errors import first_line, signal_exit_code, signal_name
from ._late import BatchRange, batch_range

if TYPE_CHECKING:
    from ._checkpoint import ResumePoint
    from ._inputs import ColumnChanges

__all__ = [
    "Bottleneck",
    "RouteStats",
    "PipelineProgress",
    "PipelineResult",
    "QueryProgress",
    "Status",
    "cast_hint",
    "causes",
    "first_line",
    "log4j_config",
    "peak_memory_bytes",
    "resumed_note",
    "summarize_error",
    "top_rows",
]

Status = Literal["completed", "failed", "interrupted"]


def peak_memory_bytes() -> int:
    """Peak resident memory of this (the driver's Python) process so far, in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


@dataclass(frozen=True, slots=True)
class Bottleneck:
    """The stage that held the pipeline back in the last period.

    Attributes:
        stage: its name (``"source"``, ``"bridge"``, ``"spark"``, ``"sink"``).
        busy_ms_per_s: how busy it was, ms per second.
        upstream: the stage before it, backpressured meanwhile; ``None`` for a source that
            every stage after it waits on.
        backpressured_ms_per_s: how long that upstream was backpressured, ms per second.
    """

    stage: str
    busy_ms_per_s: float
    upstream: str | None = None
    backpressured_ms_per_s: float = 0.0

    def __str__(self) -> str:
        if self.upstream is None:
            return f"{self.stage} (busy {self.busy_ms_per_s:.0f} ms/s; the stages after it wait)"
        return (
            f"{self.stage} (busy {self.busy_ms_per_s:.0f} ms/s while {self.upstream} is "
            f"backpressured {self.backpressured_ms_per_s:.0f} ms/s)"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineProgress:
    """A snapshot while the pipeline runs (all counts in records unless said otherwise).

    Every count is this run's. After a resume from a ``--checkpoint`` (``resumed``), what
    earlier runs did is in the ``*_before`` fields, and the ``all_runs_*`` properties add
    both up; the result (``groups``) is always the whole result. So, for this run,
    ``records_read == records_skipped + records_emitted + dead_letters`` once the source
    is done (with ``--read-on driver``; on the executors ``records_read`` is defined so).

    Attributes:
        phase: ``"starting"`` (Spark is starting), ``"running"``, ``"finishing"``.
        elapsed: seconds since ``start``.
        records_read: records read from the input, valid or not.
        records_emitted: records the source handed to Spark's stream.
        records_processed: input records in the micro-batches Spark finished.
        dead_letters: records refused so far. After a resume on the driver the input is
            read again from its start, so every dead letter is found again (the
            dead-letter file is whole); on the executors, the dead letters of the
            micro-batches this run read (a replayed one included).
        batches: micro-batches the sink folded in.
        source_demand: demand outstanding at the source (asked by the Spark stream).
        sink_demand: micro-batches the sink has asked for and not received.
        groups: rows in the result so far (one per group in update and complete mode;
            the rows written in append mode).
        late_rows: rows dropped as late by a watermark: input rows when
            ``late_rows_of_input``, else Spark's count (``numRowsDroppedByWatermark``),
            taken after the partial aggregation (late rows of one group in one micro-batch
            count once).
        late_rows_of_input: ``late_rows`` counts input rows (``_late``: the query's rule
            was followed), not Spark's partial aggregates.
        total_rows: records in the input when known up front (Parquet footers, the
            splits planned on the executors, a finite route), else ``None``.
        bridge_held: records held in the ``to_spark_stream`` bridge: read from the source
            and not yet acknowledged by Spark (the micro-batch running and the next ones).
        output_mode: the query's output mode (``"append"``: ``groups`` counts rows).
        bridge_bound: the most records the bridge may hold (its row budget, two triggers,
            plus one chunk of the source).
        reading: seconds since the source read its first record (``0.0`` before).
        split_shares: ``--read-on executors``: the records the last planned micro-batch
            asked of each split (its demand per split), else ``None``.
        splits: ``--read-on executors``: how many splits the input has, else ``0``.
        bottleneck: the stage that held the pipeline back in the last metrics period
            (busy while its upstream was backpressured), else ``None``.
        resumed: the run resumed from a ``--checkpoint`` that earlier runs wrote to.
        records_skipped: valid records read again and not sent to Spark, because an
            earlier run's micro-batches hold them (a resume with ``--read-on driver``).
        batches_before: micro-batches earlier runs folded in (the sink's journal).
        producer: an ``rsocket://`` input's producer, as it last answered ``R.stats``
            (its open streams, the batches requested of it and not sent yet, and the
            arrival-to-commit latency), else ``None``.
        dead_letters_before: dead letters earlier runs found that this run did not find
            again (on the executors; on the driver every one is found again: 0).
        bytes_read: bytes of the input read so far, when ``total_bytes`` is known.
        total_bytes: bytes of the input when every file is an uncompressed CSV or JSON
            Lines file (progress by bytes), else ``None``.
        producer_reconnects: how many times an ``rsocket://`` input's producer dropped
            and was reached again (``--reconnect-for``): the run outlived each drop,
            every partition resuming from the record it reached.
    """

    phase: str
    elapsed: float
    records_read: int
    records_emitted: int
    records_processed: int
    dead_letters: int
    batches: int
    source_demand: int
    sink_demand: int
    groups: int
    late_rows: int
    total_rows: int | None
    output_mode: str = "update"
    bridge_held: int = 0
    bridge_bound: int = 0
    reading: float = 0.0
    split_shares: tuple[int, ...] | None = None
    splits: int = 0
    bottleneck: Bottleneck | None = None
    resumed: bool = False
    records_skipped: int = 0
    batches_before: int = 0
    producer: RouteStats | None = None
    dead_letters_before: int = 0
    producer_reconnects: int = 0
    bytes_read: int | None = None
    total_bytes: int | None = None
    late_rows_of_input: bool = False

    @property
    def all_runs_batches(self) -> int:
        """Micro-batches folded in by this run and the earlier runs of its checkpoint."""
        return self.batches + self.batches_before

    @property
    def all_runs_dead_letters(self) -> int:
        """Dead letters of this run and the earlier runs: what the dead-letter file holds."""
        return self.dead_letters + self.dead_letters_before

    @property
    def in_flight(self) -> int:
        """Records handed to Spark and not yet in a finished micro-batch."""
        return max(self.records_emitted - self.records_processed, 0)

    @property
    def rate(self) -> float:
        """Records read per second since the first one (Spark's start excluded)."""
        return self.records_read / self.reading if self.reading > 0 else 0.0

    @property
    def byte_rate(self) -> float | None:
        """Bytes read per second since the first record, when the bytes are counted."""
        if self.bytes_read is None or self.reading <= 0:
            return None
        return self.bytes_read / self.reading

    @property
    def eta(self) -> float | None:
        """Seconds until the input is read at the rate so far, for a finite input.

        By bytes when they are counted, else by records when their total is known;
        ``None`` before the first record, or when the size is not known.
        """
        if self.total_bytes is not None and self.bytes_read is not None:
            done, total, rate = self.bytes_read, self.total_bytes, self.byte_rate or 0.0
        elif self.total_rows is not None:
            done, total, rate = self.records_read, self.total_rows, self.rate
        else:
            return None
        if done >= total:
            return 0.0
        return (total - done) / rate if rate > 0 else None


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineResult:
    """How a run ended.

    Attributes:
        status: ``"completed"``, ``"failed"`` or ``"interrupted"``.
        progress: the last progress snapshot (how far it got).
        wall_time: seconds from ``start`` to the end, Spark's start included.
        peak_memory: peak resident memory of the driver's Python process, bytes.
        spark_peak_memory: peak resident memory of the Spark driver's JVM, bytes, when
            it is known (a JVM this process started, on Linux), else ``None``.
        output_path: the result file (completed runs only).
        sink: the ``--sink`` target the result went to (its URL without password), or
            ``None`` for a result file.
        dead_letter_path: the dead-letter file, if any record was refused.
        result: the result table when it was kept in memory (update/complete modes).
        top: up to 10 rows of the result, largest first by its first measure.
        error: a one-line summary of what failed, or ``""``.
        exception: the failure itself, for ``--debug``.
        rejected: Spark refused the query as a stream (a usage error: exit status 2).
        notes: things the user should know about the run (e.g. that it resumed from a
            checkpoint).
        signal: the signal that stopped an ``"interrupted"`` run, or a run over a live
            input (``"completed"``: a stop is how it ends) (``signal.SIGINT`` for Ctrl-C,
            ``signal.SIGTERM`` for ``docker stop`` or Kubernetes), else ``None``.
        spark_output: the file of Spark's own output (``PipelineConfig.spark_output``)
            when the run failed and Spark wrote something there (logs, Java stack
            traces), else ``None``.
        live_input: the input never ends (a live route): a stop signal is how the run
            ends, and the run is ``"completed"`` with the result of what it read.
        column_changes: the input files that added columns or lack some of the
            stream's (``InputPlan.column_changes``), in reading order.
    """

    status: Status
    progress: PipelineProgress
    wall_time: float
    peak_memory: int
    output_path: Path | None
    dead_letter_path: Path | None
    result: pa.Table | None
    top: list[dict[str, object]] = field(default_factory=list)
    error: str = ""
    exception: BaseException | None = None
    rejected: bool = False
    notes: tuple[str, ...] = ()
    spark_peak_memory: int | None = None
    signal: int | None = None
    spark_output: Path | None = None
    live_input: bool = False
    column_changes: tuple[ColumnChanges, ...] = ()
    sink: str | None = None

    @property
    def exit_code(self) -> int:
        """The command's exit status for this end (``signal_exit_code`` when interrupted).

        ``0`` completed, ``1`` failed, ``2`` the query was rejected, and ``128 +`` the
        signal's number when interrupted (130 for Ctrl-C, 143 for SIGTERM). A run over a
        live input that is stopped is ``"completed"``: a stop is how such a run ends.
        """
        if self.rejected:
            return 2
        if self.status == "interrupted":
            return signal_exit_code(self.signal or signal.SIGINT)
        return {"completed": 0, "failed": 1}[self.status]

    def to_json(self) -> dict[str, object]:
        """The summary as JSON-ready values (``--summary-json``).

        The counts are this run's (``PipelineProgress``); the output is the whole result;
        ``all_runs`` adds the earlier runs of a resumed checkpoint (``None`` otherwise).
        """
        progress = self.progress
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            # This run's figures, then the result (all runs'), then all runs' (or None).
            "input_rows": progress.records_read,
            "input_rows_expected": progress.total_rows,
            "input_bytes": progress.bytes_read,
            "input_bytes_expected": progress.total_bytes,
            "skipped_rows": progress.records_skipped,
            "rows_into_spark": progress.records_emitted,
            "micro_batches": progress.batches,
            "dead_letters": progress.dead_letters,
            "late_rows": progress.late_rows,
            "producer_reconnects": progress.producer_reconnects,
            "late_rows_counted_as": (
                "input rows" if progress.late_rows_of_input else "Spark's partial aggregates"
            ),
            "output_rows" if progress.output_mode == "append" else "output_groups": (
                progress.groups
            ),
            "all_runs": {
                "micro_batches": progress.all_runs_batches,
                "dead_letters": progress.all_runs_dead_letters,
            }
            if progress.resumed
            else None,
            "wall_time_s": round(self.wall_time, 3),
            "rows_per_s": round(self.rows_per_second, 1),
            "python_driver_peak_memory_bytes": self.peak_memory,
            "spark_driver_jvm_peak_memory_bytes": self.spark_peak_memory,
            "output": None if self.output_path is None else str(self.output_path),
            "sink": self.sink,
            "dead_letter_file": (
                None if self.dead_letter_path is None else str(self.dead_letter_path)
            ),
            "error": self.error or None,
            "signal": None if self.signal is None else signal_name(self.signal),
            "live_input": self.live_input,
            "spark_output": None if self.spark_output is None else str(self.spark_output),
            "column_changes": [change.to_json() for change in self.column_changes],
            "notes": list(self.notes),
        }

    @property
    def rows_per_second(self) -> float:
        """Input records per second of wall time."""
        return self.progress.records_read / self.wall_time if self.wall_time > 0 else 0.0


_LOG4J_TEMPLATE = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = {level}
"""
# The logger of the class that starts logging in a PySpark JVM, at the root's level:
# otherwise Spark prints "Setting default log level to WARN" and how to change it.


def log4j_config(level: str) -> Path:
    """A log4j2 configuration at ``level``, so the JVM is quiet from its first line."""
    directory = Path(tempfile.gettempdir()) / "reactive-streams-pipeline"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"log4j2-{level.lower()}-v3.properties"
    if not path.exists():
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(_LOG4J_TEMPLATE.format(level=level.lower()), encoding="utf-8")
        temporary.replace(path)
    return path


def causes(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


_SPARK_ERROR_CLASS = re.compile(r"\[[A-Z][A-Z0-9_.]+\][^\n]*")
_PYTHON_ERROR_LINE = re.compile(r"^\s*([\w.]+(?:Error|Exception)): (.+)$", re.MULTILINE)


def summarize_error(error: BaseException) -> str:
    """One line naming a failure and its root cause (Spark's errors are long).

    Spark wraps errors in errors whose first line says little ("An exception was raised by
    the Python Proxy. Return Message: Traceback..."): the root cause is the first error
    class (``[USER_RAISED_EXCEPTION] ...``) found anywhere in the chain, else the last
    ``SomethingError: message`` line.
    """
    head = first_line(error).split(" Return Message:", 1)[0].rstrip(": ")
    summary = f"{type(error).__name__}: {head}"
    texts = "\n".join(str(cause) for cause in causes(error))
    match = _SPARK_ERROR_CLASS.search(texts)
    if match is not None:
        root = match.group(0).strip()
    else:
        lines = _PYTHON_ERROR_LINE.findall(texts)
        root = f"{lines[-1][0]}: {lines[-1][1].strip()}" if lines else ""
    hint = cast_hint(texts)
    if hint is not None:  # Spark's advice (try_cast, ANSI mode off) gives way to ours
        root = root.split(" Correct the value", 1)[0]
    if root and root not in summary:
        summary += f" (cause: {root})"
    return summary if hint is None else f"{summary}; {hint}"


_CAST_INVALID = re.compile(
    r"\[CAST_INVALID_INPUT\] The value '((?:[^']|'')*)' of the type \"STRING\" cannot be "
    r"cast to \"(TIMESTAMP(?:_NTZ)?|DATE)\""
)


def cast_hint(text: str) -> str | None:
    """What to do about Spark's ``CAST_INVALID_INPUT`` of text to a time, or ``None``.

    A query that casts a text column to ``TIMESTAMP`` or ``DATE`` fails on the first value
    Spark cannot read (``31/01/2024 10:00``); the pipeline reads such text itself when
    given its form, so the hint names ``--timestamp-format`` and the form the value shows
    (``guess_timestamp_format``).

    Args:
        text: an error's text (its causes' too).
    """
    match = _CAST_INVALID.search(text)
    if match is None:
        return None
    value = match.group(1).replace("''", "'")
    form = guess_timestamp_format([value])
    shown = f"'{form}'" if form is not None else "FORMAT (a strptime format)"
    return (
        f"the input's time text ({value!r}) is read as {match.group(2)} with "
        f"--timestamp-format {shown}"
    )


def top_rows(table: pa.Table, keys: tuple[str, ...], limit: int = 10) -> list[dict[str, object]]:
    """The ``limit`` largest rows by the first numeric column that is not a key."""
    measure = next(
        (
            field.name
            for field in table.schema
            if field.name not in keys
            and (pa.types.is_integer(field.type) or pa.types.is_floating(field.type))
        ),
        None,
    )
    if measure is None:
        rows: list[dict[str, object]] = table.slice(0, limit).to_pylist()
        return rows
    order = [(measure, "descending"), *((key, "ascending") for key in keys)]
    top: list[dict[str, object]] = table.sort_by(order).slice(0, limit).to_pylist()
    return top


def resumed_note(checkpoint: Path, resume: ResumePoint) -> str:
    """The summary's note for a run resumed from ``checkpoint``."""
    note = (
        f"resumed from the checkpoint {checkpoint}: {resume.committed:,} "
        f"{'micro-batch was' if resume.committed == 1 else 'micro-batches were'} committed "
        f"before ({resume.offset:,} records)"
    )
    if resume.replay is not None:
        first, end = resume.replay
        note += f"; Spark replays the uncommitted micro-batch (records {first:,}..{end - 1:,})"
    return note


class QueryProgress:
    """Input rows and late rows per finished micro-batch, from the query's own progress.

    Polls ``StreamingQuery.recentProgress`` (kept by the JVM, exact once a batch is done;
    still readable after the query ended) rather than a listener, whose events reach
    Python late. Batches are keyed by id, so a poll that sees one twice counts it once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: dict[int, tuple[int, int]] = {}
        self._ranges: dict[int, BatchRange] = {}
        self._shares: tuple[int, ...] = ()
        self._shares_batch = -1

    def poll(self, query: Any) -> None:
        try:
            recent = query.recentProgress
        except Exception:  # the session is gone: keep what was seen
            return
        seen: dict[int, tuple[int, int]] = {}
        ranges: dict[int, BatchRange] = {}
        for progress in recent:
            late = sum(
                int(state.numRowsDroppedByWatermark or 0) for state in progress.stateOperators
            )
            seen[int(progress.batchId)] = (int(progress.numInputRows), late)
            found_range = batch_range(progress)
            if found_range is not None:
                ranges[int(progress.batchId)] = found_range
        # The newest micro-batch that read rows: a trigger that found nothing new reports
        # empty shares, and may be all a poll sees after the last real micro-batch.
        shares, batch = None, -1
        for batch_id in sorted(ranges, reverse=True):
            found = ranges[batch_id]
            if found.per_split and any(found.shares):
                shares, batch = found.shares, batch_id
                break
        with self._lock:
            self._batches.update(seen)
            self._ranges.update(ranges)
            if shares is not None and batch >= self._shares_batch:
                self._shares, self._shares_batch = shares, batch

    def last_batch_id(self) -> int:
        """The highest id of a finished micro-batch seen, or ``-1``."""
        with self._lock:
            return max(self._batches, default=-1)

    @property
    def shares(self) -> tuple[int, ...]:
        """Per split, what the last micro-batch that read rows planned (``from_splits`` only)."""
        with self._lock:
            return self._shares

    def ranges(self) -> dict[int, BatchRange]:
        """What each finished micro-batch seen read, and its watermark, by batch id."""
        with self._lock:
            return dict(self._ranges)

    def totals(self) -> tuple[int, int]:
        """``(input rows, late rows)`` over the finished micro-batches seen.

        The late rows are Spark's count (``numRowsDroppedByWatermark``), taken after the
        partial aggregation; ``LateRows`` counts input rows where it can.
        """
        with self._lock:
            rows = sum(value[0] for value in self._batches.values())
            late = sum(value[1] for value in self._batches.values())
        return rows, late
