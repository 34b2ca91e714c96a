"""A live publisher of record batches as a partitioned source, with bounded retention.

``LivePartitions(publisher, schema)`` subscribes to a ``Publisher[pyarrow.RecordBatch]``
that never has to end (a sensor, a message handler behind a push source) and serves what
it sends as the partitions of a *live* partitioned route (``partitioned_routes``):

* each batch that arrives is cut into batches of at most ``batch_rows`` rows and appended,
  batch by batch, round-robin to the partitions; a record's position is fixed when it
  arrives, so every reader of a range gets the same records;
* everything appended stays in the **retention buffer** until a reader's ``commit`` says
  positions below an offset will not be asked for again (Spark's
  ``DataSourceStreamReader.commit`` after a micro-batch); so a pipeline restarted from its
  checkpoint re-reads exactly what it had not committed;
* the buffer's bound is the backpressure on the live publisher: batches are requested only
  while fewer than ``retention_rows`` rows are retained, at most ``request_batches`` at a
  time, so the buffer holds at most ``retention_rows`` plus the rows of
  ``request_batches`` batches. A live publisher that cannot wait chooses its own overflow
  strategy upstream (a push source's, or an ``on_backpressure_*`` operator).

* readers belong to a **consumer group** (a name a reader gives when it opens a stream:
  ``open_for``; the pipeline uses its checkpoint's identity). A group's commit
  (``commit_for``) moves only its own position, and at most to what its readers were sent;
  retention is released below the least position over the groups that have a reader
  subscribed or were heard from within ``group_grace`` seconds. So a token holder that
  commits for a group it never read with releases nothing, and cannot release what another
  group has not read. A group that never returns stops holding retention once its grace
  has passed; if it comes back after its records were released, its reader gets
  ``ReleasedOffsetError``. ``commit`` (no group) is the owner's own release, for every
  group.

Guarantee: exact (no record lost or repeated) across restarts of the reading pipeline while
the producer lives and the pipeline comes back within ``group_grace``; what was retained
and not committed is lost if the producer's process dies (a route of files,
``FilePartitions``, is exact across any restart).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Final

from .._core import (
    EmitLoopSubscription,
    LatencyWindow,
    ProtocolViolationError,
    accept_subscription,
    cancel_quietly,
    check_positive,
    check_subscriber,
    report_undeliverable,
)
from ..api import Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

__all__ = ["DEFAULT_GROUP", "MAX_GROUPS", "LivePartitions", "ReleasedOffsetError"]

logger = logging.getLogger("reactive_streams.rsocket")

_READER_BATCH: Final = 64
"""Batches a reader's pass delivers at most before it yields (Rule 3.4's bound)."""


class ReleasedOffsetError(LookupError):
    """A reader asked for records that a ``commit`` already released from retention."""


DEFAULT_GROUP: Final = ""
"""The consumer group of a reader that names none."""

MAX_GROUPS: Final = 1024
"""Consumer groups a live source keeps at most; a reader of one more is refused."""


class _Group:
    """One consumer group's books, per partition (the source's lock)."""

    __slots__ = ("committed", "readers", "seen", "sent")

    def __init__(self, bases: list[int], now: float) -> None:
        self.committed = list(bases)  # positions below are committed by this group
        self.sent = list(bases)  # the furthest position its readers were sent
        self.readers = 0  # its readers subscribed now
        self.seen = now  # when it last opened, closed or committed

    def holds(self, now: float, grace: float) -> bool:
        """Whether its position holds retention: a reader subscribed, or heard of lately."""
        return self.readers > 0 or now - self.seen <= grace


class _Partition:
    """One partition's retained batches: ``(first position, batch)`` in order."""

    __slots__ = ("arrived", "base", "batches", "high_water", "readers")

    def __init__(self) -> None:
        self.batches: deque[tuple[int, pa.RecordBatch]] = deque()
        self.arrived: deque[float] = deque()  # each retained batch's arrival (monotonic)
        self.base = 0  # positions below were released (committed)
        self.high_water = 0  # the position the next record gets
        self.readers: set[_LiveReader] = set()  # readers waiting for more


class LivePartitions:
    """A live ``Publisher`` of record batches served as a live partitioned source.

    Satisfies ``PartitionedSource`` with ``live = True``: pass it to
    ``partitioned_routes(name, ...)`` and serve the routes (module docstring for the
    retention and the guarantee). It subscribes to ``publisher`` at once.

    Args:
        publisher: the live source; each element a ``pyarrow.RecordBatch`` with
            ``schema``'s columns (by name; cast to ``schema``). An empty batch adds no
            record (it still answers one batch of demand).
        schema: the route's Arrow schema.
        partitions: how many partitions, ``>= 1``; batches go round-robin.
        batch_rows: the most rows in one served batch (a larger one is sliced), ``>= 1``.
        retention_rows: request more from ``publisher`` only while fewer rows than this
            are retained (not yet committed), ``>= 1``.
        request_batches: batches requested from ``publisher`` at a time, ``>= 1``.
        group_grace: seconds a consumer group with no reader subscribed still holds
            retention at its position (a pipeline restarting), ``> 0``. Default 300.
        clock: seconds, monotonic (for tests).

    Raises:
        ValueError: a count below 1, or a ``group_grace`` not above 0.

    Backpressure:
        The publisher is asked for at most ``request_batches`` batches at once, and for
        more only while the retention buffer holds fewer than ``retention_rows`` rows; a
        ``commit`` that releases rows asks again. Readers get batches only within their
        own demand (Rule 1.1).

    Concurrency:
        One lock guards every partition; the publisher's signals, readers' requests and
        commits may come from any thread. A reader that reached the end of its partition
        waits (no thread held) and is woken by the next batch appended to it.

    A publisher error or a batch that does not fit ``schema`` ends the live source: readers
    get the records retained so far, then ``on_error`` with that error. Completion of the
    publisher makes every partition final: readers complete at the end.
    """

    def __init__(
        self,
        publisher: Publisher[pa.RecordBatch],
        schema: pa.Schema,
        *,
        partitions: int = 1,
        batch_rows: int = 4096,
        retention_rows: int = 1_000_000,
        request_batches: int = 4,
        group_grace: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not group_grace > 0:
            raise ValueError(f"group_grace must be above 0 seconds, got {group_grace!r}")
        self._grace = float(group_grace)
        self._clock = clock
        self._groups: dict[str, _Group] = {}
        self._schema = schema
        self._batch_rows = check_positive("batch_rows", batch_rows)
        self._retention = check_positive("retention_rows", retention_rows)
        self._request_batches = check_positive("request_batches", request_batches)
        self._partitions = [_Partition() for _ in range(check_positive("partitions", partitions))]
        self._lock = threading.Lock()
        self._retained = 0  # rows held across partitions
        self._high_retained = 0  # the most ever held
        self._outstanding = 0  # batches requested from the publisher, not yet received
        self._next = 0  # the partition the next batch goes to
        self._final = False  # the publisher completed
        self._error: Exception | None = None  # the publisher failed (or sent a bad batch)
        self._upstream: Subscription | None = None
        self._latency = LatencyWindow()
        publisher.subscribe(_Intake(self))

    # -- PartitionedSource ------------------------------------------------------------------

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of every served batch."""
        return self._schema

    @property
    def partitions(self) -> int:
        """How many partitions."""
        return len(self._partitions)

    @property
    def batch_rows(self) -> int:
        """The most rows in one served batch."""
        return self._batch_rows

    @property
    def live(self) -> bool:
        """Always ``True``: the partitions grow while the publisher sends."""
        return True

    @property
    def retained_rows(self) -> int:
        """Rows held now (appended and not yet released by a commit)."""
        with self._lock:
            return self._retained

    @property
    def high_retained_rows(self) -> int:
        """The most rows ever held at once (the retention buffer's high-water mark)."""
        with self._lock:
            return self._high_retained

    def commit_latencies(self) -> tuple[float, float, int] | None:
        """``(p50, p99, samples)``: seconds from a batch's arrival to the commit releasing it.

        Over the last 10,000 batches released; ``None`` before the first commit.
        """
        return self._latency.quantiles()

    def high_water(self, partition: int) -> int:
        """The position ``partition``'s next record will get (its end offset now)."""
        with self._lock:
            return self._partition(partition).high_water

    def final(self, partition: int) -> bool:
        """Whether the publisher completed (then ``high_water`` is all there will be)."""
        self._partition(partition)
        with self._lock:
            return self._final

    def open(self, partition: int, start: int) -> Publisher[pa.RecordBatch]:
        """``partition``'s batches from position ``start`` on: retained ones, then new ones.

        The stream completes at the end of a final partition; it waits for more otherwise.
        A ``start`` below what commits released ends it with ``ReleasedOffsetError``. The
        reader is of the default group (``open_for``).
        """
        return self.open_for(DEFAULT_GROUP, partition, start)

    def open_for(self, group: str, partition: int, start: int) -> Publisher[pa.RecordBatch]:
        """``open`` for a reader of consumer group ``group`` (module docstring).

        The group is created by its first reader (at most ``MAX_GROUPS``: a reader of one
        more ends with ``on_error``); its readers' deliveries bound what it may commit.
        """
        self._partition(partition)
        if start < 0:
            raise ValueError(f"start must be >= 0, got {start}")
        return _LivePublisher(self, partition, start, group)

    def commit(self, partition: int, offset: int) -> None:
        """Release ``partition``'s records below ``offset`` for every group (the owner's).

        An ``offset`` beyond the high-water mark is clamped to it (and logged); one below
        an earlier commit changes nothing. A consumer's commit is ``commit_for``.
        """
        part = self._partition(partition)
        with self._lock:
            if offset > part.high_water:
                logger.warning(
                    "live partition %d: commit at %d is beyond its %d records; clamped",
                    partition,
                    offset,
                    part.high_water,
                )
                offset = part.high_water
            for group in self._groups.values():
                group.committed[partition] = max(group.committed[partition], offset)
                group.sent[partition] = max(group.sent[partition], offset)
            more = self._release_locked(partition, offset)
        self._request(more)

    def commit_for(self, group: str, partition: int, offset: int) -> None:
        """Consumer group ``group`` read ``partition`` below ``offset`` and will not again.

        The group's position moves to ``offset``, clamped to what its readers were sent
        (a commit beyond it is logged); retention is then released below the least
        position of the groups that still hold it (module docstring). A group that never
        had a reader changes nothing (logged).
        """
        self._partition(partition)
        with self._lock:
            now = self._clock()
            books = self._groups.get(group)
            if books is None:
                logger.warning(
                    "live partition %d: commit at %d for group %r, which never read; ignored",
                    partition,
                    offset,
                    group,
                )
                return
            books.seen = now
            if offset > books.sent[partition]:
                logger.warning(
                    "live partition %d: commit at %d for group %r, beyond the %d it was sent; "
                    "clamped",
                    partition,
                    offset,
                    group,
                    books.sent[partition],
                )
                offset = books.sent[partition]
            books.committed[partition] = max(books.committed[partition], offset)
            self._expire_locked(now)
            holding = [g.committed[partition] for g in self._groups.values()]
            more = self._release_locked(partition, min(holding)) if holding else 0
        self._request(more)

    def _release_locked(self, partition: int, offset: int) -> int:
        """Release ``partition``'s batches wholly below ``offset`` (lock held); top up."""
        part = self._partitions[partition]
        if offset <= part.base:
            return 0
        part.base = offset
        batches = part.batches
        now = time.monotonic()
        while batches and batches[0][0] + batches[0][1].num_rows <= offset:
            _, batch = batches.popleft()
            self._latency.add(now - part.arrived.popleft())
            self._retained -= batch.num_rows
        return self._top_up_locked()

    def _expire_locked(self, now: float) -> None:
        """Forget the groups that no longer hold retention (lock held)."""
        for name in [n for n, g in self._groups.items() if not g.holds(now, self._grace)]:
            del self._groups[name]

    def __repr__(self) -> str:
        return (
            f"LivePartitions(partitions={len(self._partitions)}, "
            f"retention_rows={self._retention:,}, retained={self._retained:,})"
        )

    # -- the publisher's side ---------------------------------------------------------------

    def _partition(self, partition: int) -> _Partition:
        if not 0 <= partition < len(self._partitions):
            raise ValueError(
                f"no partition {partition}: there are {len(self._partitions)} "
                f"(0 to {len(self._partitions) - 1})"
            )
        return self._partitions[partition]

    def _top_up_locked(self) -> int:
        """How many batches to request now (lock held); counted as outstanding."""
        if self._final or self._error is not None or self._upstream is None:
            return 0
        if self._retained >= self._retention:
            return 0
        more = self._request_batches - self._outstanding
        if more <= 0:
            return 0
        self._outstanding += more
        return more

    def _request(self, count: int) -> None:
        upstream = self._upstream
        if count and upstream is not None:
            try:
                upstream.request(count)
            except Exception as exc:  # the publisher broke Rule 3.16
                self._end(exc)

    def _subscribed(self, subscription: Subscription) -> None:
        with self._lock:
            self._upstream = subscription
            more = self._top_up_locked()
        self._request(more)

    def _append(self, batch: pa.RecordBatch) -> None:
        try:
            batch = self._conform(batch)
        except Exception as exc:
            upstream = self._upstream
            if upstream is not None:
                cancel_quietly(upstream)
            self._end(exc)
            return
        woken: set[_LiveReader] = set()  # a reader of several pieces is woken once
        arrived = time.monotonic()
        with self._lock:
            if self._final or self._error is not None:
                return
            if self._outstanding > 0:
                self._outstanding -= 1
            else:  # Rule 1.1 broken: more than requested
                error = ProtocolViolationError(
                    "Rule 1.1: the live publisher sent more batches than LivePartitions requested",
                    rule="1.1",
                )
                self._error = error
                woken = self._all_readers_locked()
                batch = None
            if batch is not None:
                for offset in range(0, batch.num_rows, self._batch_rows):
                    piece = batch.slice(offset, self._batch_rows)
                    part = self._partitions[self._next]
                    self._next = (self._next + 1) % len(self._partitions)
                    part.batches.append((part.high_water, piece))
                    part.arrived.append(arrived)
                    part.high_water += piece.num_rows
                    self._retained += piece.num_rows
                    woken.update(part.readers)
                self._high_retained = max(self._high_retained, self._retained)
                more = self._top_up_locked()
            else:
                more = 0
        if batch is None and self._upstream is not None:
            cancel_quietly(self._upstream)
        for reader in woken:
            reader.wake()
        self._request(more)

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        import pyarrow as pa  # noqa: PLC0415  (the spark extra; rsocket itself does not need it)

        if not isinstance(batch, pa.RecordBatch):
            raise TypeError(
                f"a live partitioned source needs pyarrow.RecordBatch elements, got "
                f"{type(batch).__name__}"
            )
        if batch.schema.equals(self._schema):
            return batch
        missing = [name for name in self._schema.names if name not in batch.schema.names]
        if missing:
            raise ValueError(f"a batch lacks the route's columns {missing}")
        columns = [batch.column(name) for name in self._schema.names]
        return pa.RecordBatch.from_arrays(columns, names=self._schema.names).cast(self._schema)

    def _end(self, error: Exception | None) -> None:
        with self._lock:
            if self._final or self._error is not None:
                if error is not None:
                    report_undeliverable(error)
                return
            if error is None:
                self._final = True
            else:
                self._error = error
            woken = self._all_readers_locked()
        for reader in woken:
            reader.wake()

    def _all_readers_locked(self) -> set[_LiveReader]:
        woken: set[_LiveReader] = set()
        for part in self._partitions:
            woken.update(part.readers)
        return woken

    # -- the readers' side ------------------------------------------------------------------

    def _sent(self, group: str, partition: int, position: int) -> None:
        """A reader of ``group`` was sent ``partition``'s records below ``position``."""
        with self._lock:
            books = self._groups.get(group)
            if books is not None and position > books.sent[partition]:
                books.sent[partition] = position

    def _take(self, partition: int, position: int, count: int) -> list[pa.RecordBatch]:
        """Up to ``count`` retained batches of ``partition`` from ``position`` (any thread)."""
        part = self._partitions[partition]
        taken: list[pa.RecordBatch] = []
        with self._lock:
            if position < part.base:
                return taken  # released: the reader's end state says so
            for first, batch in part.batches:
                if len(taken) >= count:
                    break
                end = first + batch.num_rows
                if end <= position:
                    continue
                taken.append(batch.slice(position - first) if position > first else batch)
                position = end
        return taken

    def _end_state(self, partition: int, position: int) -> tuple[Exception | None, bool]:
        """``(error, ended)`` for a reader at ``position``: both unset while records remain.

        ``error``: the position was released by a commit, or the reader is at the end and
        the publisher failed; ``ended``: at the end of a final partition.
        """
        part = self._partitions[partition]
        with self._lock:
            if position < part.base:
                return (
                    ReleasedOffsetError(
                        f"live partition {partition}: position {position:,} was released "
                        f"(records below {part.base:,} were committed)"
                    ),
                    False,
                )
            if position < part.high_water:
                return None, False
            return self._error, self._final and self._error is None

    def _join(self, reader: _LiveReader, partition: int, group: str) -> Exception | None:
        """Register a reader of ``group``; the error that ends it, if the group is refused."""
        with self._lock:
            now = self._clock()
            books = self._groups.get(group)
            if books is None:
                self._expire_locked(now)
                if len(self._groups) >= MAX_GROUPS:
                    return ValueError(
                        f"the live source serves {MAX_GROUPS} consumer groups already; "
                        f"group {group!r} is refused"
                    )
                books = self._groups[group] = _Group([p.base for p in self._partitions], now)
            books.readers += 1
            books.seen = now
            self._partitions[partition].readers.add(reader)
            return None

    def _forget(self, reader: _LiveReader, partition: int, group: str) -> None:
        with self._lock:
            self._partitions[partition].readers.discard(reader)
            books = self._groups.get(group)
            if books is not None:
                books.readers -= 1
                books.seen = self._clock()


class _Intake(Subscriber["pa.RecordBatch"]):
    """The live publisher's subscriber: hands every signal to the ``LivePartitions``."""

    __slots__ = ("_source", "_subscribed")

    def __init__(self, source: LivePartitions) -> None:
        self._source = source
        self._subscribed = False

    def on_subscribe(self, subscription: Subscription) -> None:
        if not accept_subscription(subscription, not self._subscribed):
            return
        self._subscribed = True
        self._source._subscribed(subscription)

    def on_next(self, element: pa.RecordBatch) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        self._source._append(element)  # an empty batch adds no record, but counts (Rule 1.1)

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        self._source._end(error)

    def on_complete(self) -> None:
        self._source._end(None)


class _LivePublisher(Publisher["pa.RecordBatch"]):
    __slots__ = ("_group", "_partition", "_source", "_start")

    def __init__(
        self, source: LivePartitions, partition: int, start: int, group: str = DEFAULT_GROUP
    ) -> None:
        self._source = source
        self._partition = partition
        self._start = start
        self._group = group

    def subscribe(self, subscriber: Subscriber[pa.RecordBatch]) -> None:
        check_subscriber(subscriber)
        reader = _LiveReader(subscriber, self._source, self._partition, self._start, self._group)
        reader.start()


class _LiveReader(EmitLoopSubscription["pa.RecordBatch"]):
    """One reader of one partition: the kit's emit loop, woken by every append and the end.

    It is registered with its partition from its first pass to its close, so the end of
    the publisher reaches it with or without demand (Rules 1.4, 1.5).
    """

    __slots__ = ("_ended", "_error", "_group", "_joined", "_partition", "_position", "_source")

    def __init__(
        self,
        subscriber: Subscriber[pa.RecordBatch],
        source: LivePartitions,
        partition: int,
        start: int,
        group: str,
    ) -> None:
        super().__init__(subscriber, batch_size=_READER_BATCH)
        self._source = source
        self._partition = partition
        self._position = start
        self._group = group
        self._joined = False
        self._error: Exception | None = None
        self._ended = False

    def _open(self) -> None:
        self._error = self._source._join(self, self._partition, self._group)
        self._joined = self._error is None

    def _emit(self, subscriber: Subscriber[pa.RecordBatch], count: int) -> int:
        if self._error is not None:
            return 0
        batches = self._source._take(self._partition, self._position, count)
        sent = self._deliver_each(subscriber, batches)
        for batch in batches[:sent]:
            self._position += batch.num_rows
        if sent:
            self._source._sent(self._group, self._partition, self._position)
        return sent

    def _exhausted(self) -> bool:
        if self._error is None and not self._ended:
            self._error, self._ended = self._source._end_state(self._partition, self._position)
        return self._ended or self._error is not None

    def _failure(self) -> Exception | None:
        return self._error

    def _close(self) -> None:
        if self._joined:
            self._joined = False
            self._source._forget(self, self._partition, self._group)
