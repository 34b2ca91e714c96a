"""The streaming data source behind ``from_splits``: planned on the driver, read on executors.

Three kinds of process run this module, none of them the user's:

* Spark's **streaming source runner** (one per query, started by the driver JVM on the
  driver host) calls ``initialOffset``, ``latestOffset(start, limit)`` and
  ``partitions(start, end)``: it counts the rows of each split (``count``) and spreads the
  micro-batch's row budget over the splits that still have rows;
* Spark's **data source planner** builds the reader once and pickles it into the read
  function;
* each **executor's Python worker** runs ``read(partition)``: it calls the split's opener
  at the partition's start offset, requests rows in bounded chunks, yields each chunk as
  one ``pyarrow.RecordBatch`` and cancels the publisher at the partition's end offset.

So no row passes through the user's Python process, nor through the driver's, and no
executor connects back to the user's process. What the user passes (splits, opener,
counter, transform) travels inside one data source option, ``plan``: a base64 cloudpickle
of a ``SplitPlan``. The format name is the same for every stream
(``reactive_streams_splits``), registered once per session.

Offsets are ``{"rows": [n_0, n_1, ...]}``: for each split (in the order given), how many of
its elements were planned into micro-batches before.
"""

from __future__ import annotations

import base64
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final, Literal

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from .._core import accept_subscription
from ..api import Publisher, Subscriber, Subscription
from ._errors import SplitReadError
from ._window import EncodeError, conform_batch

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql.types import StructType

__all__ = [
    "FORMAT_NAME",
    "SplitDataSource",
    "SplitGroup",
    "SplitPartition",
    "SplitPlan",
    "SplitStreamReader",
    "align",
    "cut_shares",
    "SECRET_OPTION_PREFIX",
    "bind_secrets",
    "decode_plan",
    "encode_plan",
    "plan_secrets",
    "group_shares",
    "read_partition",
    "sequential",
    "spread",
]

FORMAT_NAME: Final = "reactive_streams_splits"

Opener = Callable[[Any, int], Publisher[Any]]
"""``opener(split, start)``: a publisher of the split's elements from element ``start`` on."""

Counter = Callable[[Any], int]
"""``count(split)``: how many elements the split has (or has available so far)."""

Transform = Callable[[pa.RecordBatch], pa.RecordBatch]
"""Applied to every chunk in the executor, before it is cast to the stream's schema."""

OnCommit = Callable[[Any, int], None]
"""``on_commit(split, offset)``: the split's elements below ``offset`` are committed."""

Boundaries = Callable[[Any], Sequence[int]]
"""``boundaries(split)``: the offsets inside the split where a micro-batch may end cheaply
(for Parquet, where each row group starts), ascending."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SplitPlan:
    """Everything a runner, planner or executor needs to know about one ``from_splits``.

    Attributes:
        splits: the user's splits, in order (offsets index them).
        names: ``str(split)`` of each, as errors name them.
        opener: see ``Opener``.
        count: see ``Counter``.
        transform: optional, see ``Transform``.
        arrow: the opener's elements are ``pyarrow.RecordBatch`` (demand counts batches);
            otherwise they are ``Mapping`` rows (demand counts rows).
        chunk_rows: the most rows requested from a split's publisher at once (rows mode),
            and so the most rows a worker holds.
        max_records_per_trigger: the default row budget of a micro-batch.
        read_timeout: seconds a worker waits for a requested chunk before failing.
        boundaries: optional, see ``Boundaries``; each share is rounded to them (``align``).
        max_partitions: the most Spark partitions (tasks) a micro-batch is planned into;
            when more splits have a share, the shares are grouped (``group_shares``) and
            a task reads its group's shares one after the other. ``None``: one partition
            per split with a share.
        order: ``"spread"``: each micro-batch's budget is spread over every split with
            elements (``spread``); ``"sequential"``: it takes the next elements in split
            order (``sequential``), and with ``max_partitions`` its shares are cut at
            boundaries into about that many tasks (``cut_shares``).
        on_commit: optional, see ``OnCommit``; called by ``SplitStreamReader.commit``.
    """

    splits: tuple[Any, ...]
    names: tuple[str, ...]
    opener: Opener
    count: Counter
    transform: Transform | None = None
    arrow: bool = False
    chunk_rows: int = 10_000
    max_records_per_trigger: int = 100_000
    read_timeout: float = 300.0
    stream_id: str = field(default="")
    boundaries: Boundaries | None = None
    max_partitions: int | None = None
    order: Literal["spread", "sequential"] = "spread"
    on_commit: OnCommit | None = None


SECRET_OPTION_PREFIX: Final = "secret."
"""Data source options ``secret.NAME`` carry ``from_splits``' secrets beside the plan:
Spark's ``spark.redaction.regex`` (by default it matches ``secret``) hides their values
wherever it prints options (plans, the UI), which it cannot do inside the pickled plan."""


def bind_secrets(plan: SplitPlan, secrets: Mapping[str, str]) -> SplitPlan:
    """``plan`` with ``secrets`` given to every callable of it that takes them.

    A callable takes secrets when it is a method of an object with
    ``with_secrets(secrets) -> object``: the method of that call's result replaces it (a
    reader that holds a token in a field, pickled without it). Others are kept as they are.
    """
    if not secrets:
        return plan
    changes: dict[str, Any] = {}
    for field_name in ("opener", "count", "transform", "boundaries", "on_commit"):
        function = getattr(plan, field_name)
        owner = getattr(function, "__self__", None)
        given = getattr(owner, "with_secrets", None)
        if callable(given):
            changes[field_name] = getattr(given(dict(secrets)), function.__name__)
    return replace(plan, **changes)


def plan_secrets(options: Mapping[str, str]) -> dict[str, str]:
    """The secrets among a data source's options (``secret.NAME``), by ``NAME``."""
    return {
        key[len(SECRET_OPTION_PREFIX) :]: value
        for key, value in options.items()
        if key.lower().startswith(SECRET_OPTION_PREFIX)
    }


def encode_plan(plan: SplitPlan) -> str:
    """``plan`` as the text of the data source option ``plan`` (cloudpickle, base64)."""
    return base64.b64encode(cloudpickle.dumps(plan)).decode("ascii")  # type: ignore[no-untyped-call,unused-ignore]


def decode_plan(text: str) -> SplitPlan:
    """The inverse of ``encode_plan``."""
    plan = cloudpickle.loads(base64.b64decode(text.encode("ascii")))
    if not isinstance(plan, SplitPlan):
        raise TypeError(f"the option 'plan' holds a {type(plan).__name__}, not a SplitPlan")
    return plan


def spread(available: Sequence[int], budget: int | None) -> list[int]:
    """Share ``budget`` rows over the splits that still have rows (``available[i] > 0``).

    Every split with rows gets an equal share, capped at what it has; what a small split
    leaves is shared again among the others. ``budget=None`` takes everything. When the
    budget is smaller than the number of splits, the first splits with rows get one each.

    >>> spread([10, 0, 3, 10], 12)
    [5, 0, 3, 4]
    >>> spread([5, 5], None)
    [5, 5]
    """
    if budget is None:
        return list(available)
    shares = [0] * len(available)
    active = [index for index, rows in enumerate(available) if rows > 0]
    while budget > 0 and active:
        each = budget // len(active)
        if each == 0:
            for index in active[:budget]:
                shares[index] += 1
            break
        remaining = []
        for index in active:
            take = min(each, available[index] - shares[index])
            shares[index] += take
            budget -= take
            if shares[index] < available[index]:
                remaining.append(index)
        active = remaining
    return shares


def sequential(available: Sequence[int], budget: int | None) -> list[int]:
    """Take ``budget`` elements in split order: the next elements of the input.

    Each split with elements gives all it has before the next gives any, so a micro-batch
    is one contiguous stretch of the input (splits in order): an input sorted by event
    time keeps its event time rising from one micro-batch to the next. ``budget=None``
    takes everything.

    >>> sequential([10, 0, 3, 10], 12)
    [10, 0, 2, 0]
    >>> sequential([5, 5], None)
    [5, 5]
    """
    if budget is None:
        return list(available)
    shares = []
    for rows in available:
        take = min(rows, budget)
        shares.append(take)
        budget -= take
    return shares


def align(begin: int, end: int, count: int, boundaries: Sequence[int]) -> int:
    """``end`` moved to a boundary: the last one in ``begin + 1 .. end``, else the next one.

    A share that would end inside a row group ends at the row group's start instead (or,
    when that would leave the split nothing this micro-batch, at its end: at most one row
    group over the budget), so the next micro-batch starts at a row group and nothing is
    decoded twice. ``count`` (the split's end) is always a boundary; ``end == begin``
    (no share) stays, and so does every end of a split without boundaries.

    >>> align(0, 70, 200, [50, 100, 150])
    50
    >>> align(100, 120, 200, [50, 100, 150])
    150
    >>> align(150, 180, 200, [50, 100, 150])
    200
    >>> align(10, 30, 200, [])
    30
    """
    if end <= begin or end >= count or not boundaries:
        return end
    below = [edge for edge in boundaries if begin < edge <= end]
    if below:
        return max(below)
    return min([edge for edge in boundaries if end < edge < count] + [count])


class SplitPartition(InputPartition):
    """Elements ``start..end - 1`` of split number ``index`` (one Spark task).

    Attributes:
        index: the split's position in the plan.
        split: the split itself (picklable).
        name: ``str(split)``, for errors.
        start: the first element to read.
        end: one past the last element to read.
    """

    def __init__(self, index: int, split: Any, name: str, start: int, end: int) -> None:
        super().__init__((index, start, end))
        self.index = index
        self.split = split
        self.name = name
        self.start = start
        self.end = end


class SplitGroup(InputPartition):
    """Several splits' shares read by one Spark task, one after the other, in split order.

    Attributes:
        parts: the shares, ordered by split index.
    """

    def __init__(self, parts: Sequence[SplitPartition]) -> None:
        super().__init__(tuple((part.index, part.start, part.end) for part in parts))
        self.parts = tuple(parts)

    @property
    def rows(self) -> int:
        """The elements the group reads."""
        return sum(part.end - part.start for part in self.parts)


def cut_shares(
    shares: Sequence[SplitPartition], parts: int, edges: Callable[[int], Sequence[int]]
) -> list[SplitPartition]:
    """``shares`` cut at split boundaries into about ``parts`` pieces of equal rows.

    A share gets pieces in proportion to its rows, each cut at the boundary
    (``edges(split index)``, offsets in the split) nearest its ideal place; a share with
    no boundary inside stays whole (so a Parquet row group is never read by two tasks).
    Deterministic: the same shares give the same pieces, so a replayed micro-batch reads
    exactly as before.

    >>> shares = [SplitPartition(0, "a", "a", 0, 100)]
    >>> [(p.start, p.end) for p in cut_shares(shares, 2, lambda _: [25, 50, 75])]
    [(0, 50), (50, 100)]
    >>> [(p.start, p.end) for p in cut_shares(shares, 3, lambda _: [])]
    [(0, 100)]
    """
    total = sum(part.end - part.start for part in shares)
    if parts <= 1 or total == 0:
        return list(shares)
    pieces: list[SplitPartition] = []
    for part in shares:
        rows = part.end - part.start
        wanted = max(1, round(parts * rows / total))
        inside = [edge for edge in edges(part.index) if part.start < edge < part.end]
        cuts: list[int] = []
        for number in range(1, wanted):
            if not inside:
                break
            ideal = part.start + rows * number / wanted
            nearest = min(inside, key=lambda edge: (abs(edge - ideal), edge))
            if not cuts or nearest > cuts[-1]:
                cuts.append(nearest)
        bounds = [part.start, *cuts, part.end]
        pieces.extend(
            SplitPartition(part.index, part.split, part.name, low, high)
            for low, high in itertools.pairwise(bounds)
        )
    return pieces


def group_shares(shares: Sequence[SplitPartition], limit: int) -> list[SplitGroup]:
    """``shares`` in at most ``limit`` groups of about equal rows, deterministically.

    The largest share goes first to the group with the fewest rows so far (the lowest
    numbered on a tie); each group reads its shares in split order, and the groups come
    in the order of their first split. The same shares always give the same groups, so a
    replayed micro-batch is read exactly as before.

    >>> shares = [SplitPartition(i, str(i), str(i), 0, rows)
    ...           for i, rows in enumerate([100, 100, 100, 100, 50])]
    >>> [[part.index for part in group.parts] for group in group_shares(shares, 2)]
    [[0, 2, 4], [1, 3]]
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    bins: list[list[SplitPartition]] = [[] for _ in range(min(limit, len(shares)))]
    loads = [0] * len(bins)
    for part in sorted(shares, key=lambda part: (-(part.end - part.start), part.index)):
        target = min(range(len(bins)), key=lambda number: (loads[number], number))
        bins[target].append(part)
        loads[target] += part.end - part.start
    groups = [sorted(parts, key=lambda part: part.index) for parts in bins if parts]
    groups.sort(key=lambda parts: parts[0].index)
    return [SplitGroup(parts) for parts in groups]


class SplitStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches over the splits (runner) and reads partitions (executors).

    Admission control (Spark 4.2+): ``getDefaultReadLimit`` is ``ReadMaxRows`` of
    ``max_records_per_trigger``; ``latestOffset(start, limit)`` spreads the limit's rows
    over the splits that still have rows. ``Trigger.AvailableNow`` reads what the splits
    had when the query started (``prepareForTriggerAvailableNow``).
    """

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        lowered = {key.lower(): value for key, value in options.items()}
        self._plan = bind_secrets(decode_plan(lowered["plan"]), plan_secrets(lowered))
        self._schema = schema
        self._targets: list[int] | None = None
        self._boundaries_cache: dict[int, list[int]] = {}

    # ------------------------------------------------------- the driver side (runner)
    def initialOffset(self) -> dict[str, list[int]]:
        """No element of any split read yet."""
        return {"rows": [0] * len(self._plan.splits)}

    def _counts(self) -> list[int]:
        counts = []
        for split, name in zip(self._plan.splits, self._plan.names, strict=True):
            try:
                rows = int(self._plan.count(split))
            except Exception as exc:
                raise SplitReadError(
                    f"from_splits: counting the rows of split {name} failed: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            counts.append(rows)
        return counts

    def _start_rows(self, start: Mapping[str, Any]) -> list[int]:
        rows = [int(value) for value in start["rows"]]
        if len(rows) != len(self._plan.splits):
            raise SplitReadError(
                f"from_splits: the offset has {len(rows)} splits, this stream has "
                f"{len(self._plan.splits)} (a checkpoint of another stream?)"
            )
        return rows

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(max_records_per_trigger)``."""
        return ReadMaxRows(self._plan.max_records_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the rows each split has now as the end of an ``availableNow`` query."""
        self._targets = self._counts()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, list[int]]:
        """The end of the next micro-batch: ``start`` plus each split's share of ``limit``.

        Raises:
            SplitReadError: a counter raised, or a split now has fewer elements than were
                already planned (splits may grow, never shrink).
        """
        begin = self._start_rows(start)
        counts = self._counts()
        if self._targets is not None:
            counts = [
                min(count, target) for count, target in zip(counts, self._targets, strict=True)
            ]
        for name, count, done in zip(self._plan.names, counts, begin, strict=True):
            if count < done and (self._targets is None):
                raise SplitReadError(
                    f"from_splits: split {name} has {count} elements now, but {done} were "
                    "already read: a split may grow, never shrink"
                )
        available = [max(0, count - done) for count, done in zip(counts, begin, strict=True)]
        if isinstance(limit, ReadMaxRows):
            budget: int | None = int(limit.max_rows)
        elif isinstance(limit, ReadMinRows):
            budget = None if sum(available) >= int(limit.min_rows) else 0
        elif isinstance(limit, ReadAllAvailable):
            budget = None
        else:  # a limit that does not count rows: keep to the stream's own
            budget = self._plan.max_records_per_trigger
        choose = sequential if self._plan.order == "sequential" else spread
        shares = choose(available, budget)
        ends = [done + share for done, share in zip(begin, shares, strict=True)]
        if self._plan.boundaries is not None:
            ends = [
                align(done, end, count, self._edges(index))
                for index, (done, end, count) in enumerate(zip(begin, ends, counts, strict=True))
            ]
        return {"rows": ends}

    def _edges(self, index: int) -> Sequence[int]:
        """The split's boundaries (``SplitPlan.boundaries``), asked once per split."""
        cache = self._boundaries_cache
        if index not in cache:
            assert self._plan.boundaries is not None
            split, name = self._plan.splits[index], self._plan.names[index]
            try:
                cache[index] = sorted(int(edge) for edge in self._plan.boundaries(split))
            except Exception as exc:
                raise SplitReadError(
                    f"from_splits: the boundaries of split {name} failed: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
        return cache[index]

    def partitions(
        self, start: dict[str, Any], end: dict[str, Any]
    ) -> list[SplitPartition] | list[SplitGroup]:
        """One partition per split with elements between ``start`` and ``end``.

        With ``order="sequential"`` and ``max_partitions``, shares are first cut at their
        boundaries into about ``max_partitions`` pieces (``cut_shares``), so a micro-batch
        that is one stretch of one split still keeps every core busy. With more pieces than
        ``max_partitions``, they are grouped (``group_shares``): fewer, longer tasks, each
        reading several pieces in turn.
        """
        begin, finish = self._start_rows(start), self._start_rows(end)
        plan = self._plan
        shares = [
            SplitPartition(index, plan.splits[index], plan.names[index], first, last)
            for index, (first, last) in enumerate(zip(begin, finish, strict=True))
            if last > first
        ]
        if (
            plan.order == "sequential"
            and plan.max_partitions is not None
            and plan.boundaries is not None
        ):
            shares = cut_shares(shares, plan.max_partitions, self._edges)
        if plan.max_partitions is None or len(shares) <= plan.max_partitions:
            return shares
        return group_shares(shares, plan.max_partitions)

    def commit(self, end: dict[str, Any]) -> None:
        """A micro-batch ending at ``end`` is committed: tell ``on_commit``, if given.

        Reading needs nothing released (every read opens its split anew at its start
        offset); ``on_commit(split, offset)`` is called for every split, in order, so a
        live source may release what it kept for a replay.

        Raises:
            SplitReadError: ``on_commit`` raised (the query fails), naming the split.
        """
        on_commit = self._plan.on_commit
        if on_commit is None:
            return
        for split, name, offset in zip(
            self._plan.splits, self._plan.names, self._start_rows(end), strict=True
        ):
            try:
                on_commit(split, offset)
            except Exception as exc:
                raise SplitReadError(
                    f"from_splits: committing split {name} at element {offset} failed: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc

    # ------------------------------------------------------------ the executor side
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The partition's elements as record batches in the stream's schema (executor).

        Raises:
            SplitReadError: the opener raised, the publisher failed, ended early or sent
                nothing for ``read_timeout`` seconds; the message names the split.
        """
        schema = to_arrow_schema(self._schema, timezone="UTC")
        if isinstance(partition, SplitGroup):
            return _read_group(self._plan, partition, schema)
        assert isinstance(partition, SplitPartition)
        return read_partition(self._plan, partition, schema)


class SplitDataSource(DataSource):
    """The data source of every ``from_splits`` stream; the option ``plan`` says which."""

    @classmethod
    def name(cls) -> str:
        """``reactive_streams_splits``."""
        return FORMAT_NAME

    def schema(self) -> str:
        """Never used: ``from_splits`` always passes the schema."""
        raise SplitReadError("from_splits always passes the schema explicitly")

    def streamReader(self, schema: StructType) -> SplitStreamReader:
        """The reader planned in the runner and run on the executors."""
        return SplitStreamReader(dict(self.options), schema)


# ------------------------------------------------------------------ reading a split
class _ChunkSubscriber(Subscriber[Any]):
    """Receives one split's elements on a worker; the reading generator waits on it.

    Holds at most what was requested (one chunk). Signals may come from any thread; the
    condition guards the state and is never held while the publisher is called.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.subscription: Subscription | None = None
        self.items: deque[Any] = deque()
        self.outstanding = 0
        self.error: BaseException | None = None
        self.completed = False
        self.overflow = False

    def on_subscribe(self, subscription: Subscription) -> None:
        accept_subscription(subscription, self._claim)

    def _claim(self, subscription: Subscription) -> bool:
        with self._cond:
            duplicate = self.subscription is not None
            if not duplicate:
                self.subscription = subscription
            self._cond.notify_all()
        return not duplicate

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        with self._cond:
            if self.outstanding == 0:
                self.overflow = True  # Rule 1.1 broken: the reader fails the task
            else:
                self.outstanding -= 1
                self.items.append(element)
            self._cond.notify_all()

    def on_error(self, error: Exception) -> None:
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")
        with self._cond:
            self.error = error
            self._cond.notify_all()

    def on_complete(self) -> None:
        with self._cond:
            self.completed = True
            self._cond.notify_all()

    def request(self, n: int) -> None:
        """Ask the publisher for ``n`` more elements (no lock held while calling it)."""
        with self._cond:
            self.outstanding += n
            subscription = self.subscription
        assert subscription is not None
        subscription.request(n)

    def wait_subscribed(self, timeout: float) -> bool:
        """Wait for ``on_subscribe`` (a publisher may call it from another thread)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.subscription is not None, timeout)

    def wait(self, wanted: int, timeout: float) -> list[Any]:
        """Wait until ``wanted`` elements arrived or the stream ended; take what arrived."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while (
                len(self.items) < wanted
                and self.error is None
                and not self.completed
                and not self.overflow
            ):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            taken = list(self.items)
            self.items.clear()
            return taken

    def cancel(self) -> None:
        with self._cond:
            subscription = self.subscription
        if subscription is not None:
            subscription.cancel()


def _read_group(plan: SplitPlan, group: SplitGroup, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Each share of ``group`` in turn (closing this closes the share being read)."""
    for part in group.parts:
        yield from read_partition(plan, part, schema)


def _fail(partition: SplitPartition, at: int, what: str) -> SplitReadError:
    return SplitReadError(f"from_splits: split {partition.name} (element {at}): {what}")


def read_partition(
    plan: SplitPlan, partition: SplitPartition, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """Read elements ``partition.start..partition.end - 1`` of one split, chunk by chunk.

    Demand: with ``Mapping`` elements, at most ``plan.chunk_rows`` rows are requested at a
    time (and never beyond ``partition.end``), and the next chunk only once the previous
    one was handed to Spark; with ``RecordBatch`` elements, one batch at a time (sliced
    at ``partition.end``). The publisher is cancelled once ``partition.end`` is reached,
    or when Spark stops reading (the generator is closed).

    Raises:
        SplitReadError: see ``SplitStreamReader.read``.
    """
    position = partition.start
    try:
        publisher = plan.opener(partition.split, position)
    except Exception as exc:
        raise _fail(partition, position, f"the opener raised {type(exc).__name__}: {exc}") from exc
    consumer = _ChunkSubscriber()
    try:
        publisher.subscribe(consumer)
    except Exception as exc:
        raise _fail(partition, position, f"subscribe raised {type(exc).__name__}: {exc}") from exc
    try:
        while position < partition.end:
            wanted = 1 if plan.arrow else min(plan.chunk_rows, partition.end - position)
            if not consumer.wait_subscribed(plan.read_timeout):
                raise _fail(
                    partition,
                    position,
                    f"the publisher did not call on_subscribe within {plan.read_timeout:.0f} s",
                )
            try:
                consumer.request(wanted)
            except Exception as exc:  # Rule 3.16 broken by the publisher: fail, naming it
                raise _fail(
                    partition, position, f"request({wanted}) raised {type(exc).__name__}: {exc}"
                ) from exc
            taken = consumer.wait(wanted, plan.read_timeout)
            if consumer.overflow:
                raise _fail(partition, position, "Rule 1.1: the publisher sent more than requested")
            if taken:
                batch = _to_batch(plan, partition, position, taken, schema)
                rows = int(batch.num_rows)
                if rows > partition.end - position:
                    batch = batch.slice(0, partition.end - position)
                    rows = int(batch.num_rows)
                position += rows
                if rows:
                    yield _finish(plan, partition, position - rows, batch, schema)
                continue
            if consumer.error is not None:
                error = consumer.error
                raise _fail(
                    partition, position, f"the publisher failed: {type(error).__name__}: {error}"
                ) from error
            if consumer.completed:
                raise _fail(
                    partition,
                    position,
                    f"the publisher completed before element {partition.end - 1}, which "
                    "planning counted (did the split shrink, or is its opener not "
                    "deterministic from an offset?)",
                )
            raise _fail(
                partition,
                position,
                f"the publisher sent nothing for {plan.read_timeout:.0f} s after a request "
                f"of {wanted}",
            )
    finally:
        consumer.cancel()


def _to_batch(
    plan: SplitPlan, partition: SplitPartition, position: int, taken: list[Any], schema: pa.Schema
) -> pa.RecordBatch:
    if plan.arrow:
        (batch,) = taken
        if not isinstance(batch, pa.RecordBatch):
            raise _fail(
                partition,
                position,
                f"expected pyarrow.RecordBatch elements (arrow=True), got {type(batch).__name__}",
            )
        return batch
    for row in taken:
        if not isinstance(row, Mapping):
            raise _fail(
                partition,
                position,
                f"expected Mapping elements (one row each), got {type(row).__name__}; pass "
                "arrow=True for pyarrow.RecordBatch elements",
            )
    try:
        if plan.transform is None:
            return pa.RecordBatch.from_pylist(taken, schema=schema)
        return pa.RecordBatch.from_pylist(taken)
    except Exception as exc:
        raise _fail(
            partition,
            position,
            f"rows {position}..{position + len(taken) - 1} do not convert to Arrow: "
            f"{type(exc).__name__}: {exc}",
        ) from exc


def _finish(
    plan: SplitPlan,
    partition: SplitPartition,
    position: int,
    batch: pa.RecordBatch,
    schema: pa.Schema,
) -> pa.RecordBatch:
    """Apply the transform, then conform to the stream's schema."""
    last = position + int(batch.num_rows) - 1
    if plan.transform is not None:
        try:
            batch = plan.transform(batch)
        except Exception as exc:
            raise _fail(
                partition,
                position,
                f"the transform raised on elements {position}..{last}: {type(exc).__name__}: {exc}",
            ) from exc
        if not isinstance(batch, pa.RecordBatch):
            raise _fail(
                partition,
                position,
                f"the transform returned {type(batch).__name__}, not a pyarrow.RecordBatch",
            )
    if batch.schema.equals(schema):
        return batch
    try:
        return conform_batch(batch, schema)
    except EncodeError as exc:
        raise _fail(
            partition, position, f"elements {position}..{last} do not fit the schema: {exc}"
        ) from exc
