"""The source ``Publisher``: records from files (or the default table), on demand only.

Each subscription reads its own pass over the input (unicast, Rule 1.11) on a dedicated
thread. Nothing is read until there is demand; then the reader is asked for at most
``min(chunk_rows, demand)`` records, which are validated and converted to the schema
(``Validator``), malformed ones going to the dead-letter file, and the rest emitted as
``dict`` rows (column name to Python value: ``int``, ``float``, ``str``, ``bool``,
``datetime.date``, UTC ``datetime.datetime``, or ``None``), or with ``arrow=True`` as one
``pyarrow.RecordBatch`` per chunk (no per-row Python objects at all; demand then counts
batches of at most ``chunk_rows`` records).

Backpressure:
    Reads ahead only as far as demand allows: at most one chunk of converted rows
    (``chunk_rows``) is held, plus one CSV block or Parquet batch inside the reader. With
    ``rate``, records are also spaced to that many per second.

    ::

        file:     [chunk of min(chunk_rows, demand)]...[ ]|
        request:  (3)            (2)
        result:   -1-2-3---------4-5-|

Concurrency:
    ``request`` and ``cancel`` may be called from any thread; signals come from the
    subscription's own thread (``pipeline-source``), serially (Rule 1.3), through the
    emitter election of the core (Rules 3.3, 3.9, 3.17).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._core import (
    DrainLoop,
    EmitterElection,
    StreamStatistics,
    signal_on_complete,
    signal_on_error,
    signal_on_next,
    signal_on_subscribe,
)
from ..api import Publisher, Subscriber, Subscription
from ..files import ChunkReader, TableReader, Validator, open_reader
from ._errors import PipelineFailedError
from ._inputs import DEFAULT_SOURCE_NAME

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    from .._core import ExecutorRejectedError
    from ._dead_letter import DeadLetterWriter
    from ._inputs import InputPlan

__all__ = ["FileSource", "Record", "SourceStatistics"]

Record = dict[str, object]
"""One row of the stream: column name to value."""

DEFAULT_CHUNK_ROWS = 10_000
"""Records read and converted at a time, at most (bounded further by demand)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceStatistics:
    """A snapshot of the source's latest subscription.

    Attributes:
        stream: demand and delivery counters (``StreamStatistics``).
        records_read: records read from the input so far, valid or not.
        dead_letters: records refused so far (``records_read - dead_letters`` were, or are
            about to be, emitted).
        current: the file being read, or ``""``.
        files_done: input files read to the end.
        first_read_at: ``time.monotonic()`` when the first record was read, or ``None``.
        records_emitted: valid records emitted so far (rows, whatever the element type).
        records_skipped: valid records not emitted because of ``skip`` (a resume).
        bytes_read: bytes of the CSV and JSON Lines files read so far (a compressed
            file's decompressed bytes); Parquet files and tables count none.
        failure: the error the source failed with (its ``on_error``), else ``None``.
    """

    stream: StreamStatistics
    records_read: int
    dead_letters: int
    current: str
    files_done: int
    first_read_at: float | None = None
    records_emitted: int = 0
    records_skipped: int = 0
    failure: Exception | None = None
    bytes_read: int = 0


class FileSource(Publisher[Any]):
    """Streams an ``InputPlan``'s records, validated against its schema.

    Elements are ``dict`` rows (``Record``), or with ``arrow=True`` ``pyarrow.RecordBatch``
    chunks of at most ``chunk_rows`` valid records in the plan's schema.

    Args:
        plan: the checked input (``plan_inputs`` or ``default_input``).
        dead_letters: where malformed records go; shared by all subscriptions.
        chunk_rows: records read and converted at a time, at most; ``> 0``.
        rate: if given, at most this many records per second (``> 0``), for a live demo
            (with ``arrow=True``, chunks shrink to a tenth of a second of records).
        arrow: emit record batches instead of ``dict`` rows.
        skip: valid records to read but not emit first, ``>= 0`` (to resume a stream at a
            known position: the input's order is deterministic). They are still validated,
            so the dead-letter file is the same as a run from the start.

    Raises:
        ValueError: ``chunk_rows <= 0``, ``rate <= 0`` or ``skip < 0``.
    """

    def __init__(
        self,
        plan: InputPlan,
        *,
        dead_letters: DeadLetterWriter,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
        rate: float | None = None,
        arrow: bool = False,
        skip: int = 0,
    ) -> None:
        if chunk_rows <= 0:
            raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
        if rate is not None and rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        if skip < 0:
            raise ValueError(f"skip must be >= 0, got {skip}")
        if arrow and rate is not None:
            chunk_rows = min(chunk_rows, max(1, int(rate / 10)))
        self._plan = plan
        self._dead_letters = dead_letters
        self._chunk_rows = chunk_rows
        self._rate = rate
        self._arrow = arrow
        self._skip = skip
        self._latest: _FileSubscription | None = None

    @property
    def schema(self) -> pa.Schema:
        """The schema every emitted row conforms to."""
        return self._plan.schema

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        """Start a new pass over the input for ``subscriber`` (Rules 1.9, 1.11).

        Raises:
            TypeError: ``subscriber`` is ``None`` (Rule 1.9).
        """
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe(None) is not allowed")
        subscription = _FileSubscription(self, subscriber)
        self._latest = subscription
        subscription.start(subscriber)

    def stop(self) -> None:
        """Cancel the latest subscription on its subscriber's behalf (Ctrl-C, failures).

        The reading thread stops and the file is closed; no further signal is sent.
        """
        latest = self._latest
        if latest is not None:
            latest.cancel()

    def statistics(self) -> SourceStatistics:
        """Counters of the latest subscription (all zero before the first one)."""
        latest = self._latest
        if latest is None:
            return SourceStatistics(
                stream=StreamStatistics(
                    requested=0, delivered=0, buffered=0, cancelled=False, terminated=False
                ),
                records_read=0,
                dead_letters=self._dead_letters.count,
                current="",
                files_done=0,
            )
        return latest.statistics()


class _FileSubscription(Subscription):
    """One pass over the input; all reading and signalling happen on its own thread."""

    def __init__(self, parent: FileSource, subscriber: Subscriber[Any]) -> None:
        self._plan = parent._plan
        self._dead_letters = parent._dead_letters
        self._chunk_rows = parent._chunk_rows
        self._rate = parent._rate
        self._arrow = parent._arrow
        self._to_skip = parent._skip
        self._skipped = 0
        self._subscriber: Subscriber[Any] | None = subscriber
        self._validator = Validator(self._plan.schema, self._plan.options)
        self._election = EmitterElection()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pipeline-source")
        self._loop = DrainLoop(
            self._drain, executor=self._executor, guard=self._election, on_rejected=self._rejected
        )
        self._cancelled = threading.Event()
        self._buffer: deque[Any] = deque()  # dict rows, or record batches with arrow
        self._reader: ChunkReader | None = None
        self._next_file = 0
        self._files_done = 0
        self._current = ""
        self._records_read = 0
        self._bytes_read = 0  # written by the drain loop only, as the counts above
        self._bytes_before = 0  # the bytes of the files read to the end
        self._started: float | None = None
        self._first_read_at: float | None = None
        self._rows_emitted = 0
        self._closed = False
        self._startup_error: PipelineFailedError | None = None
        self._failure: Exception | None = None
        self._last_position = ""  # "line 17" / "row 3": the last record read

    def start(self, subscriber: Subscriber[Any]) -> None:
        """Signal ``on_subscribe``, then let the reading thread serve the demand.

        The election is owned while ``on_subscribe`` runs, so a ``request`` made from
        inside it only adds demand: no ``on_next`` can overlap ``on_subscribe`` (Rule 1.3),
        and the reading thread starts once it has returned.
        """
        self._startup_error = self._check_inputs()
        self._election.acquire()
        if not signal_on_subscribe(subscriber, self):
            self._cancelled.set()  # Rule 2.13: treat as cancelled
            self._election.cancel()
        self._loop.start_owned()

    def _check_inputs(self) -> PipelineFailedError | None:
        """A file that went missing since the plan was made fails the stream at once.

        Signalled right after ``on_subscribe``, without waiting for demand (Rules 1.4,
        1.9): a publisher that cannot serve says so.
        """
        for item in self._plan.files:
            if not os.access(item.path, os.R_OK):
                return PipelineFailedError(f"cannot read input {item.path}")
        return None

    # -- Subscription -------------------------------------------------------------------

    def request(self, n: int) -> None:
        """Add demand (Rules 3.8, 3.9, 3.17); the reading thread does the rest."""
        if self._election.request(n):
            self._loop.start_owned()

    def cancel(self) -> None:
        """Stop reading and close the file (Rules 3.5, 3.7, 3.13)."""
        self._cancelled.set()  # also interrupts a --rate wait
        if self._election.cancel():
            self._loop.start_owned()

    # -- the reading thread -------------------------------------------------------------

    def _rejected(self, error: ExecutorRejectedError) -> None:
        self._finish(error)

    def _finish(self, error: Exception | None) -> None:
        """Owner only: terminal signal (or none, when cancelled) and cleanup."""
        self._failure = error
        subscriber = self._subscriber
        self._election.terminate()
        self._close()
        self._subscriber = None  # Rule 3.13
        if subscriber is not None and not self._cancelled.is_set():
            if error is None:
                signal_on_complete(subscriber)
            else:
                signal_on_error(subscriber, error)
        self._executor.shutdown(wait=False)

    def _close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._buffer.clear()
        self._closed = True

    def _open_next(self) -> ChunkReader | None:
        if self._plan.table is not None:
            if self._next_file > 0:
                return None
            self._next_file = 1
            self._current = self._plan.description or DEFAULT_SOURCE_NAME
            return TableReader(self._plan.table, DEFAULT_SOURCE_NAME)
        while self._next_file < len(self._plan.files):
            item = self._plan.files[self._next_file]
            self._next_file += 1
            if item.path.stat().st_size == 0:
                self._files_done += 1
                continue
            self._current = str(item.path)
            return open_reader(item, list(self._plan.schema.names))
        return None

    def _fill(self, wanted: int) -> bool:
        """Read and convert up to ``wanted`` records; ``False`` at the end of the input."""
        while not self._buffer:
            if self._reader is None:
                self._reader = self._open_next()
                if self._reader is None:
                    self._current = ""
                    return False
            if self._first_read_at is None:
                self._first_read_at = time.monotonic()
            # Demand counts rows, or with arrow whole chunks.
            rows = self._chunk_rows if self._arrow else min(self._chunk_rows, wanted)
            chunk = self._reader.read(rows)
            self._bytes_read = self._bytes_before + int(getattr(self._reader, "bytes_read", 0))
            if chunk is None:
                self._bytes_before = self._bytes_read
                self._reader.close()
                self._reader = None
                self._files_done += 1
                continue
            last = max([*chunk.positions[-1:], *(letter.position for _, letter in chunk.rejects)],
                       default=None)  # fmt: skip
            if last is not None:
                self._last_position = f"{chunk.position_kind} {last:,}"
            converted = self._validator.convert(chunk)
            self._dead_letters.write(converted.dead_letters)
            table = converted.table
            self._records_read += chunk.count
            if self._to_skip:
                dropped = min(self._to_skip, table.num_rows)
                table = table.slice(dropped)
                self._to_skip -= dropped
                self._skipped += dropped
            if not table.num_rows:
                continue
            if self._arrow:
                self._buffer.extend(table.combine_chunks().to_batches())
            else:
                self._buffer.extend(table.to_pylist())
        return True

    def _throttle(self) -> None:
        if self._rate is None:
            return
        now = time.monotonic()
        if self._started is None:
            self._started = now
        due = self._started + self._rows_emitted / self._rate
        if due > now:
            self._cancelled.wait(due - now)

    def _is_cancelled(self) -> bool:
        # A method, not the property, so that type checkers do not narrow it across calls.
        return self._election.cancelled

    def _drain(self) -> bool:
        election = self._election
        subscriber = self._subscriber
        if election.terminated:
            return False
        if election.cancelled or subscriber is None:
            self._close()
            self._subscriber = None
            self._executor.shutdown(wait=False)
            return False
        if self._startup_error is not None:  # Rules 1.4, 1.9: the input cannot be read
            self._finish(self._startup_error)
            return False
        error = election.take_error()
        if error is not None:  # Rule 3.9: signal the bad request and stop
            self._finish(error)
            return False
        while True:
            demand = election.demand
            if demand == 0:
                return False  # the loop releases the guard, or runs again if work was missed
            try:
                more = self._fill(demand)
            except Exception as exc:  # a file that became unreadable mid-stream
                where = f" after {self._last_position}" if self._last_position else ""
                reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
                failure = PipelineFailedError(f"reading {self._current} failed{where}: {reason}")
                failure.__cause__ = exc
                self._finish(failure)
                return False
            if not more:
                self._finish(None)
                return False
            emitted = 0
            while self._buffer and emitted < demand:
                if self._is_cancelled():
                    break
                self._throttle()
                if self._cancelled.is_set():
                    break
                element = self._buffer.popleft()
                emitted += 1
                self._rows_emitted += element.num_rows if self._arrow else 1
                if not signal_on_next(subscriber, element):
                    election.produced(emitted)
                    election.cancel()  # Rule 2.13: the subscriber broke; treat as cancelled
                    self._close()
                    self._subscriber = None
                    self._executor.shutdown(wait=False)
                    return False
            election.produced(emitted)
            if self._is_cancelled():
                self._close()
                self._subscriber = None
                self._executor.shutdown(wait=False)
                return False

    def statistics(self) -> SourceStatistics:
        """A snapshot of this subscription's counters."""
        election = self._election
        return SourceStatistics(
            stream=StreamStatistics(
                requested=election.requested,
                delivered=election.delivered,
                buffered=len(self._buffer),
                cancelled=election.cancelled,
                terminated=election.terminated,
            ),
            records_read=self._records_read,
            dead_letters=self._dead_letters.count,
            current=self._current,
            files_done=self._files_done,
            first_read_at=self._first_read_at,
            records_emitted=self._rows_emitted,
            records_skipped=self._skipped,
            failure=self._failure,
            bytes_read=self._bytes_read,
        )
