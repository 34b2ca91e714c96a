"""The sink ``Subscriber``: micro-batches in, one exact result file out.

It takes the ``MicroBatch`` elements of ``from_streaming_query`` (``batch_id: int``,
``table: pyarrow.Table``) one at a time and folds them into the result according to the
query's output mode:

* ``"update"``: each batch holds the groups that changed; the sink keeps the latest row
  per key (the ``keys`` columns), so the result has exactly one row per group;
* ``"complete"``: each batch holds the whole result; the sink keeps the last one;
* ``"append"``: each batch holds new rows; they are written through to the result file.

A ``batch_id`` seen before is a replay (Spark re-runs an uncommitted batch after a
restart: at-least-once) and is skipped, so the result stays exact. With a ``journal``
directory (the run's checkpoint) every batch is also saved there before the next one is
requested, and a new sink starts from what the journal holds: a rerun after a crash
resumes with the same state.

With a ``target`` (``--sink``, ``_target.SinkTarget``) each distinct micro-batch goes to
the target as it comes instead, and the target commits it with its batch id (a database
transaction, a table-format commit), so the target, not a journal, knows which
micro-batches it has: a replay it already committed is skipped there. No file is written
then; the update and complete results are still folded in memory for the summary.

Otherwise the result is written when the stream completes, under a temporary name renamed at the end
(``ResultWriter``): one file, or with ``partition_by`` a partitioned Parquet dataset (the
directory ``result/``). A ``before_commit`` check may veto it at that point (the pipeline's
``--max-dead-letters``). After ``on_error``, a cancel or a veto nothing is written.

Backpressure:
    Requests one batch at a time: the next only after the previous one was folded in (and
    journaled), which holds Spark's next trigger back while the sink is busy.

    ::

        batches:  -b0-------b1----b1'---b2-|
        request:  (1)  (1)       (1)   (1)
        result:   ------------------------[file]

Concurrency:
    Signals may come from any thread, serially (Rule 1.3); ``wait`` and ``statistics``
    may be called from any thread.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from .._core import StreamStatistics, accept_subscription
from ..api import Subscriber, Subscription
from ._output import OutputFormat, ResultWriter
from ._target import OutputMode

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from ._target import SinkTarget

__all__ = ["MicroBatchLike", "OutputMode", "ResultSink", "SinkStatistics"]


class MicroBatchLike(Protocol):
    """What the sink needs of a micro-batch (``reactive_streams.spark.MicroBatch``)."""

    @property
    def batch_id(self) -> int:
        """Spark's batch id; the same id again is a replay."""
        ...

    @property
    def table(self) -> pa.Table:
        """The batch's output rows."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkStatistics:
    """A snapshot of the sink.

    Attributes:
        stream: demand and delivery counters; ``requested - delivered`` is the demand the
            sink has outstanding.
        batches: distinct micro-batches folded in, ``journaled`` included.
        journaled: of those, the micro-batches restored from the journal when the sink
            was made (folded in by earlier runs of a ``--checkpoint``).
        replayed: micro-batches skipped because their ``batch_id`` was seen before.
        rows_received: output rows received in the distinct batches.
        groups: rows in the result so far (one per key in update mode).
        last_batch_id: the highest ``batch_id`` seen, or ``-1``.
        last_folded_id: the highest ``batch_id`` folded from the stream by this sink (not
            restored from the journal), or ``-1``.
    """

    stream: StreamStatistics
    batches: int
    journaled: int
    replayed: int
    rows_received: int
    groups: int
    last_batch_id: int
    last_folded_id: int = -1


def latest_per_key(previous: pa.Table | None, table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """``previous`` updated with ``table``: one row per distinct ``keys``, the latest one.

    A row of ``table`` replaces the row of ``previous`` with the same key values (nulls
    are equal to nulls, as in Spark's grouping), and later rows of ``table`` replace
    earlier ones. The row order is unspecified (the sink sorts the final result by key).
    Vectorised (one Arrow hash grouping): a dict of Python rows cost about 10 us per row
    on the driver's ``foreachBatch`` thread, 0.2 s for each of the flights' micro-batches
    of 19,486 groups, against about 20 ms this way.

    Raises:
        ValueError: ``table``'s columns do not match ``previous``'s (name and order).
        pyarrow.ArrowInvalid: a column of ``table`` does not convert to ``previous``'s type.
    """
    if previous is not None and not table.schema.equals(previous.schema):
        table = table.cast(previous.schema)
    merged = table if previous is None else pa.concat_tables([previous, table])
    index = "__row"
    while index in merged.schema.names:
        index += "_"
    numbered = merged.append_column(index, pa.array(range(merged.num_rows), pa.int64()))
    # The largest row number of a group is its latest row. One thread: a micro-batch's
    # groups are few, and Arrow's thread pool would add about 10 MiB to the peak memory.
    last = numbered.group_by(list(keys), use_threads=False).aggregate([(index, "max")])
    return merged.take(last[f"{index}_max"])


APPEND_REWRITE_SPACING = 10.0
"""A growing ``append`` result is rewritten after a micro-batch once this many times its
last rewrite's duration has passed since that rewrite (``commit_each_batch``)."""


class ResultSink(Subscriber[MicroBatchLike]):
    """Folds micro-batches into the final result and writes it at completion.

    Args:
        directory: the output directory (checked with ``check_output_dir``).
        fmt: the result's format.
        mode: the query's output mode.
        keys: in update mode, the columns that identify a group (all required).
        journal: a directory to save batches in and resume from (``--checkpoint``).
        partition_by: columns to partition the result by (``--partition-by``, Parquet
            only): the result is the directory ``result/`` (``ResultWriter``).
        before_commit: called once the stream completed, before the result is written;
            an exception it raises fails the stream instead (``error``) and nothing is
            written.
        commit_each_batch: write the result so far under its final name after every
            micro-batch (a live input, which never completes). An ``append`` result
            with a ``journal`` grows without end and is rewritten whole each time, so it
            is rewritten only once the time since its last rewrite is at least
            ``APPEND_REWRITE_SPACING`` times what that rewrite took: at most about a
            tenth of the run goes to it however long the run, and the file lags the
            journal by that much at most. A streamed ``append`` result (no journal) is
            written at the end only.
        target: write each micro-batch there (``--sink``) instead of a result file; the
            target skips the micro-batches it committed before (``journal`` must be
            ``None``: the target is the record). A write that fails fails the stream.

    Raises:
        ValueError: update mode without ``keys``, ``partition_by`` with another
            format than Parquet, or ``target`` with ``journal`` or ``partition_by``.
    """

    def __init__(
        self,
        directory: Path,
        fmt: OutputFormat,
        *,
        mode: OutputMode,
        keys: Sequence[str] = (),
        journal: Path | None = None,
        partition_by: Sequence[str] = (),
        before_commit: Callable[[], None] | None = None,
        commit_each_batch: bool = False,
        target: SinkTarget | None = None,
    ) -> None:
        if target is not None and (journal is not None or partition_by):
            raise ValueError("a sink target keeps its own record: no journal, no partitions")
        self._target = target
        if mode == "update" and not keys:
            raise ValueError("update mode needs the key columns of the result")
        if partition_by and fmt != "parquet":
            raise ValueError(f"a partitioned result is written as Parquet, not {fmt}")
        self._partition_by = tuple(partition_by)
        self._before_commit = before_commit
        self._directory = directory
        self._fmt: OutputFormat = fmt
        self._mode: OutputMode = mode
        self._keys = tuple(keys)
        self._journal = journal
        self._lock = threading.Lock()
        # Held while a micro-batch is folded and while a result is written: ``finish``
        # comes from another thread than the stream's signals.
        self._write_lock = threading.Lock()
        self._commit_each_batch = commit_each_batch
        # A growing append result: when its last rewrite ended, and how long it took.
        self._rewritten_at = float("-inf")
        self._rewrite_took = 0.0
        self._done = threading.Event()
        self._subscription: Subscription | None = None
        self._seen: set[int] = set()
        self._latest: pa.Table | None = None
        self._complete_table: pa.Table | None = None
        self._schema: pa.Schema | None = None
        self._writer: ResultWriter | None = None
        self._requested = 0
        self._delivered = 0
        self._replayed = 0
        self._rows = 0
        self._appended = 0
        self._last_batch_id = -1
        self._last_folded_id = -1
        self._error: BaseException | None = None
        self._cancelled = False
        self._completed = False
        self._result: pa.Table | None = None
        self._result_path: Path | None = None
        if journal is not None:
            self._replay_journal(journal)
        self._journaled = len(self._seen)

    # -- Subscriber ---------------------------------------------------------------------

    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep the subscription and ask for the first batch (Rules 2.1, 2.5)."""
        if not accept_subscription(subscription, self._claim):
            return
        self._request_one(subscription)

    def _claim(self, subscription: Subscription) -> bool:
        with self._lock:
            if self._subscription is not None or self._done.is_set():
                return False
            self._subscription = subscription
            return True

    def on_next(self, element: MicroBatchLike) -> None:
        """Fold one micro-batch in, then ask for the next (Rule 2.13: never raises)."""
        if element is None:
            raise TypeError("Rule 2.13: on_next(None) is not allowed")
        with self._lock:
            self._delivered += 1
            subscription = self._subscription
            if self._done.is_set():
                return  # after a cancel, batches under way may still arrive (Rule 2.8)
        try:
            with self._write_lock:
                if self._fold(element) and self._commit_each_batch:
                    self._commit_now()
        except Exception as exc:  # a write failed: stop the stream, never raise (Rule 2.13)
            self._fail(exc)
            if subscription is not None:
                subscription.cancel()
            return
        if subscription is not None:
            self._request_one(subscription)

    def on_error(self, error: Exception) -> None:
        """The stream failed: nothing is written; ``wait`` returns and ``error`` is set."""
        if error is None:
            raise TypeError("Rule 2.13: on_error(None) is not allowed")
        self._fail(error)

    def on_complete(self) -> None:
        """The stream ended: write the result under its final name (unless vetoed)."""
        try:
            if self._before_commit is not None:
                self._before_commit()
            with self._write_lock:
                self._write_result()
        except Exception as exc:
            self._fail(exc)
            return
        with self._lock:
            self._completed = True
            self._subscription = None
        self._done.set()

    # -- control ------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the stream (Ctrl-C): cancel upstream, write nothing, release ``wait``."""
        with self._lock:
            subscription, self._subscription = self._subscription, None
            if not self._done.is_set():
                self._cancelled = True
        if subscription is not None:
            subscription.cancel()
        self._abort_writer()
        self._close_target()
        self._done.set()

    def finish(self) -> None:
        """End a stream that never ends on its own (a live input): stop it, keep the result.

        Cancels upstream, then writes the result of every micro-batch folded so far under
        its final name, as ``on_complete`` does, and marks the sink completed. A micro-batch
        being folded meanwhile finishes first (one lock); one that arrives later is not
        folded (Rule 2.8). A failure to write ends the sink with that error.
        """
        with self._lock:
            subscription, self._subscription = self._subscription, None
            ended = self._done.is_set()
        if subscription is not None:
            subscription.cancel()
        if ended:
            return
        with self._write_lock:
            with self._lock:
                if self._done.is_set():
                    return
                self._done.set()  # nothing is folded from now on
            try:
                self._write_result()
            except Exception as exc:
                with self._lock:
                    self._error = exc
                self._abort_writer()
                return
        with self._lock:
            self._completed = True

    def abort(self, error: BaseException) -> None:
        """End the stream from outside with ``error``: cancel upstream, write nothing.

        For failures no signal can report, such as the Spark driver's JVM dying (then
        ``from_streaming_query`` may never be able to signal): ``wait`` returns and
        ``error`` is set, unless the stream had already ended (the first end wins).
        """
        with self._lock:
            subscription, self._subscription = self._subscription, None
        if subscription is not None:
            subscription.cancel()
        self._fail(error)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the stream ended (any way); ``True`` if it did within ``timeout``."""
        return self._done.wait(timeout)

    @property
    def error(self) -> BaseException | None:
        """Why the stream failed (``on_error``, or a failure to write), else ``None``."""
        return self._error

    @property
    def completed(self) -> bool:
        """Whether the stream completed and the result was written."""
        return self._completed

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel`` stopped the stream before it ended."""
        return self._cancelled

    @property
    def result(self) -> pa.Table | None:
        """The final result (the file's content) once completed.

        ``None`` for an ``append`` result, which is streamed to disk a micro-batch at a
        time and never held whole.
        """
        return self._result

    @property
    def result_path(self) -> Path | None:
        """The final result file (or ``result/`` directory, partitioned) once completed."""
        return self._result_path

    def statistics(self) -> SinkStatistics:
        """A snapshot of the sink's counters."""
        with self._lock:
            if self._mode == "update":
                latest = self._latest
                groups = 0 if latest is None else latest.num_rows
            elif self._mode == "complete":
                table = self._complete_table
                groups = 0 if table is None else table.num_rows
            else:
                groups = self._appended
            return SinkStatistics(
                stream=StreamStatistics(
                    requested=self._requested,
                    delivered=self._delivered,
                    buffered=0,
                    cancelled=self._cancelled or self._done.is_set(),
                    terminated=self._done.is_set() and not self._cancelled,
                ),
                batches=len(self._seen),
                journaled=self._journaled,
                replayed=self._replayed,
                rows_received=self._rows,
                groups=groups,
                last_batch_id=self._last_batch_id,
                last_folded_id=self._last_folded_id,
            )

    # -- internals ----------------------------------------------------------------------

    def _request_one(self, subscription: Subscription) -> None:
        with self._lock:
            self._requested += 1
        subscription.request(1)

    def _fail(self, error: BaseException) -> None:
        with self._lock:
            if self._error is None and not self._completed:
                self._error = error
            self._subscription = None
        self._abort_writer()
        self._close_target()
        self._done.set()

    def _close_target(self) -> None:
        """End a target's wait to retry (the stream is over); its writes stop."""
        if self._target is not None:
            self._target.close()

    def _abort_writer(self) -> None:
        with self._lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.abort()

    def _fold(self, batch: MicroBatchLike) -> bool:
        """Fold ``batch`` in; ``False`` for one folded before (a replay)."""
        batch_id = int(batch.batch_id)
        with self._lock:
            if batch_id in self._seen or self._done.is_set():
                self._replayed += batch_id in self._seen
                return False
        table = batch.table
        if self._target is not None and not self._target.write(batch_id, table):
            with self._lock:  # committed by an earlier run: a replay
                self._seen.add(batch_id)
                self._replayed += 1
                self._last_batch_id = max(self._last_batch_id, batch_id)
            return False
        if self._journal is not None:
            self._save(batch_id, table)
        self._apply(batch_id, table)
        with self._lock:
            self._last_folded_id = max(self._last_folded_id, batch_id)
        return True

    def _commit_now(self) -> None:
        """Write the result so far under its final name (``commit_each_batch``).

        For ``update`` and ``complete`` results, and ``append`` ones with a journal (a
        checkpoint), spaced by ``APPEND_REWRITE_SPACING``; a streamed ``append`` result is
        written once, at the end.
        """
        if self._mode != "append":
            self._write_result()
            return
        if self._journal is None:
            return
        started = monotonic()
        if started - self._rewritten_at < APPEND_REWRITE_SPACING * self._rewrite_took:
            return  # the next micro-batch's commit, or the end, writes it
        self._write_result()
        self._rewritten_at = monotonic()
        self._rewrite_took = self._rewritten_at - started

    def _apply(self, batch_id: int, table: pa.Table) -> None:
        if self._schema is None:
            self._schema = table.schema
            missing = [key for key in self._keys if key not in table.schema.names]
            if missing:
                raise ValueError(f"the query's result has no key column(s) {missing}")
        if self._mode == "update":
            merged = latest_per_key(self._latest, table, self._keys)
            with self._lock:
                self._latest = merged
        elif self._mode == "complete":
            with self._lock:
                self._complete_table = table
        elif self._journal is None and self._target is None:
            # append: write through (the journal, or the target, keeps it otherwise)
            if self._writer is None:
                self._writer = self._new_writer()
            self._writer.write(table)
        with self._lock:
            self._seen.add(batch_id)
            self._rows += table.num_rows
            if self._mode == "append":
                self._appended += table.num_rows
            self._last_batch_id = max(self._last_batch_id, batch_id)

    def _save(self, batch_id: int, table: pa.Table) -> None:
        assert self._journal is not None
        self._journal.mkdir(parents=True, exist_ok=True)
        final = self._journal / f"batch-{batch_id:012d}.parquet"
        temporary = self._journal / f".batch-{batch_id:012d}.{uuid.uuid4().hex}.tmp"
        pq.write_table(table, temporary)
        temporary.replace(final)

    def _journal_files(self) -> list[tuple[int, Path]]:
        assert self._journal is not None
        found = []
        for path in self._journal.glob("batch-*.parquet"):
            try:
                found.append((int(path.stem.split("-", 1)[1]), path))
            except ValueError:
                continue
        return sorted(found)

    def _replay_journal(self, journal: Path) -> None:
        if not journal.is_dir():
            return
        for batch_id, path in self._journal_files():
            self._apply(batch_id, pq.read_table(path))

    def _final_table(self) -> pa.Table:
        if self._mode == "update":
            if self._latest is None:
                return pa.table({})
            return self._latest.sort_by([(key, "ascending") for key in self._keys])
        return self._complete_table if self._complete_table is not None else pa.table({})

    def _new_writer(self) -> ResultWriter:
        return ResultWriter(self._directory, self._fmt, partition_by=self._partition_by)

    def _write_result(self) -> None:
        if self._target is not None:  # every micro-batch is in the target already
            self._result = None if self._mode == "append" else self._final_table()
            return
        if self._mode == "append" and self._journal is None:
            writer = self._writer or self._new_writer()
            self._writer = None
            self._result_path = writer.commit(self._schema)
            self._result = None  # streamed to disk, not kept in memory
            return
        if self._mode == "append":  # from the journal, a micro-batch at a time
            writer = self._new_writer()
            for _, path in self._journal_files():
                writer.write(pq.read_table(path))
            self._result_path = writer.commit(self._schema)
            self._result = None  # as large as the input may be: never held whole
            return
        table = self._final_table()
        writer = self._new_writer()
        writer.write(table)
        self._result_path = writer.commit(table.schema)
        self._result = table
