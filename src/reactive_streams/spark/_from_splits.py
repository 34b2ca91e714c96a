"""``from_splits``: a partitioned source as a streaming DataFrame read on the executors."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .._core import check_positive
from ._to_spark_stream import as_struct
from .session import require_classic

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from ..api import Publisher

__all__ = ["from_splits"]

S = TypeVar("S")


def from_splits(
    splits: Iterable[S],
    opener: Callable[[S, int], Publisher[Mapping[str, Any]] | Publisher[pa.RecordBatch]],
    spark: SparkSession,
    schema: StructType | str,
    *,
    count: Callable[[S], int],
    arrow: bool = False,
    transform: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
    max_records_per_trigger: int = 100_000,
    chunk_rows: int = 10_000,
    read_timeout: float = 300.0,
    name: Callable[[S], str] = str,
    boundaries: Callable[[S], Sequence[int]] | None = None,
    warm_workers: bool = False,
    max_partitions: int | None = None,
    order: Literal["spread", "sequential"] = "spread",
    on_commit: Callable[[S, int], None] | None = None,
    secrets: Mapping[str, str] | None = None,
) -> DataFrame:
    """A streaming DataFrame whose micro-batches are read from ``splits`` on the executors.

    A *split* is a picklable description of one part of the input (a file, a row group, a
    shard, a partition of a live system). Offsets count elements per split. For each
    micro-batch, Spark's streaming source runner (on the driver host) calls ``count`` on
    every split and spreads the micro-batch's row budget (``max_records_per_trigger``, or
    everything with ``Trigger.AvailableNow`` and ``ReadAllAvailable``) over the splits
    that still have elements; each split's share becomes one Spark partition (or, with
    ``max_partitions``, shares are grouped into that many partitions at most). On an
    executor's Python worker, ``opener(split, start)`` returns a publisher positioned at
    element ``start``; the worker requests the share in chunks, yields each chunk to Spark
    as one Arrow record batch, and cancels the publisher at the share's end. No element
    passes through this process or the driver's Python process, and executors never
    connect to this process.

    The contract for ``opener`` and ``count`` (they run in Spark's processes, so they and
    the splits must pickle; ``cloudpickle`` handles lambdas and local functions):

    * ``opener(split, start)`` must be **deterministic from an offset**: it publishes the
      same elements, in the same order, each time it is opened at ``start``. Spark replays
      an uncommitted micro-batch after a failure or a restart from a checkpoint by reading
      the same splits between the same offsets, and that is exact only if the opener is.
    * ``count(split)`` says how many elements the split has *now*. It is called for every
      micro-batch, so a live split may **grow** (its new elements go into later
      micro-batches); a split that **shrinks** below what was already read fails the
      query. Keep it cheap: Parquet footers, a line count, a live system's high-water mark.
    * These **fail the query**, with a ``SplitReadError`` message naming the split and the
      element (inside Spark's ``StreamingQueryException``): ``opener`` raising (for
      example a file deleted or moved since planning); the publisher signalling
      ``on_error``, completing before the elements ``count`` promised, sending more than
      requested (Rule 1.1), or sending nothing for ``read_timeout`` seconds; ``count``
      raising; ``transform`` raising; elements that do not fit ``schema``. Spark may
      retry the task first (``spark.task.maxFailures``; 1 attempt on ``local[*]``).

    Args:
        splits: the splits, in a fixed order (offsets are per position, so a restarted
            query needs the same list).
        opener: ``(split, start) -> Publisher`` of ``Mapping`` rows (``arrow=False``) or of
            ``pyarrow.RecordBatch`` (``arrow=True``), from element ``start`` on.
        spark: a classic SparkSession.
        schema: the rows' schema (``StructType`` or DDL); each batch is cast to it
            (columns matched by name).
        count: ``split -> int``, the elements the split has so far (see above).
        arrow: the opener publishes record batches; demand then counts batches and one
            is requested at a time (a batch is sliced where the share ends).
        transform: applied in the executor to every chunk (a ``pyarrow.RecordBatch`` of
            the opener's rows) before it is cast to ``schema``; for validation or
            enrichment next to the data. It may drop rows (offsets count input elements).
        max_records_per_trigger: each micro-batch's default row budget, ``>= 1``.
        chunk_rows: the most rows requested from a publisher at once (``arrow=False``),
            so the most rows one worker holds, ``>= 1``.
        read_timeout: seconds a worker waits for requested elements before failing.
        name: how errors name a split (``str`` by default).
        boundaries: optional ``split -> offsets``, ascending: where in the split a
            micro-batch may end cheaply (for Parquet, the first row of each row group).
            Each split's share is then rounded down to a boundary, or up to the next one
            when rounding down leaves it nothing (a micro-batch may exceed its budget by
            less than one row group per split), so no micro-batch starts inside a row
            group and nothing is decoded twice. Called once per split and query, in the
            streaming source runner.
        warm_workers: start the executors' Python workers now, in the background, with
            one task per core that imports what the opener, counter and transform need
            (it decodes the plan) and returns no row; Spark keeps them for the first
            micro-batch's reads, which then skip the workers' start (measured in
            ``benchmarks/README.md``). Best effort: a failed warm-up is logged at debug
            level and changes nothing else. It costs one short Spark job while the query
            starts (``_warm_up``).
        max_partitions: the most Spark partitions (tasks) a micro-batch is planned into,
            ``>= 1``. When more splits have a share, the shares are grouped into groups of
            about equal rows, each read by one task, share after share (the same shares
            always give the same groups, so a replayed micro-batch reads exactly the same).
            Each task has a fixed cost (scheduling, a Python worker round, opening the
            split), so with many splits and few cores, as many partitions as cores is
            faster (``spark.sparkContext.defaultParallelism``; ``benchmarks/SPARK.md``
            has the measurements);
            ``None`` (the default): one partition per split, which keeps every split's
            share its own task as executors are added.
        order: how a micro-batch's budget is taken from the splits. ``"spread"`` (the
            default): an equal share from every split with elements, so every split
            advances together (partitions of a live system). ``"sequential"``: the next
            elements in split order, so each micro-batch is one stretch of the input and
            an input sorted by event time keeps its watermark rising (a watermark query
            over files drops no row that is not late); with ``boundaries`` and
            ``max_partitions``, a micro-batch's stretch is cut at boundaries into about
            ``max_partitions`` tasks, so it is still read in parallel.
        on_commit: ``(split, offset) -> None``, called in the streaming source runner
            after each micro-batch is committed (``DataSourceStreamReader.commit``), for
            every split in order with its committed offset (elements below it will not be
            read again by this query): a live source may release what it kept for a
            replay. Raising fails the query (``SplitReadError`` naming the split); it must
            pickle, like ``count``.
        secrets: ``NAME -> value`` (a bearer token, a password) kept out of the pickled
            plan: each travels as the data source option ``secret.NAME``, which Spark
            redacts wherever it prints options (``spark.redaction.regex`` matches
            ``secret`` by default), and is handed to the opener, counter and commit
            callback in Spark's processes through ``with_secrets`` (a method of an object
            with ``with_secrets(secrets) -> object`` gets the same method of the result).
            Names are lower-case letters, digits and ``_``.

    Returns:
        A streaming DataFrame. Any number of queries may read it (each has its own
        offsets), and a query restarted from its checkpoint resumes exactly.

    Backpressure:
        A micro-batch's budget is the demand: each split's share is requested from its
        publisher, ``chunk_rows`` rows (or one batch) at a time, the next chunk only when
        Spark took the previous one; the publisher is cancelled at the share's end.

    Concurrency:
        ``opener``, ``count`` and ``transform`` run in Spark's Python processes, one task
        per split and micro-batch; a publisher may signal from any thread.

    Raises:
        SparkConnectUnsupportedError: ``spark`` is a Spark Connect session.
        ImportError: PySpark is older than 4.2.
        ValueError: a non-positive ``max_records_per_trigger``, ``chunk_rows`` or
            ``read_timeout``, or no splits.
        TypeError: ``schema`` is not a struct, or the splits, ``opener``, ``count`` or
            ``transform`` do not pickle, or ``max_records_per_trigger`` or ``chunk_rows``
            is not an int.

    Needs Spark 4.2 or newer (admission control for Python streaming sources,
    SPARK-55304); PySpark 4.3 is what the project tests with.
    """
    require_classic(spark, "from_splits")
    try:  # imported here: on PySpark 4.0/4.1 the other bridges still import fine
        from ._splits_source import (  # noqa: PLC0415
            FORMAT_NAME,
            SECRET_OPTION_PREFIX,
            SplitDataSource,
            SplitPlan,
            encode_plan,
        )
    except ImportError as exc:
        import pyspark  # noqa: PLC0415

        raise ImportError(
            "from_splits needs PySpark 4.2 or newer (admission control for Python streaming "
            f"sources, SPARK-55304); this is PySpark {pyspark.__version__}"
        ) from exc
    check_positive("max_records_per_trigger", max_records_per_trigger)
    check_positive("chunk_rows", chunk_rows)
    if max_partitions is not None:
        check_positive("max_partitions", max_partitions)
    if not read_timeout > 0:
        raise ValueError(f"read_timeout must be > 0, got {read_timeout!r}")
    if order not in ("spread", "sequential"):
        raise ValueError(f"order must be 'spread' or 'sequential', got {order!r}")
    items = tuple(splits)
    if not items:
        raise ValueError("from_splits needs at least one split")
    given_secrets = dict(secrets or {})
    for secret_name in given_secrets:
        if not secret_name or not all(
            char.isascii() and (char.islower() or char.isdigit() or char == "_")
            for char in secret_name
        ):
            raise ValueError(
                f"a secret's name is lower-case letters, digits and '_', got {secret_name!r}"
            )
    struct = as_struct(spark, schema)
    plan = SplitPlan(
        splits=items,
        names=tuple(name(split) for split in items),
        opener=opener,
        count=count,
        transform=transform,
        arrow=bool(arrow),
        chunk_rows=chunk_rows,
        max_records_per_trigger=max_records_per_trigger,
        read_timeout=float(read_timeout),
        stream_id=uuid.uuid4().hex,
        boundaries=boundaries,
        max_partitions=max_partitions,
        order=order,
        on_commit=on_commit,
    )
    try:
        encoded = encode_plan(plan)
    except Exception as exc:
        raise TypeError(
            f"from_splits: the splits, opener, count, transform, boundaries and on_commit "
            "must pickle "
            f"(they run in Spark's processes): {type(exc).__name__}: {exc}"
        ) from exc
    # One registration for every from_splits stream: the option says which stream this is,
    # so registering again replaces the entry with the same class instead of adding one.
    if warm_workers:  # first: it needs no registration, and overlaps all that follows
        from ._warm_up import WorkerWarmUp  # noqa: PLC0415

        WorkerWarmUp(spark, encoded)
    spark.dataSource.register(SplitDataSource)
    reader = spark.readStream.format(FORMAT_NAME).schema(struct).option("plan", encoded)
    for secret_name, value in given_secrets.items():
        reader = reader.option(SECRET_OPTION_PREFIX + secret_name, value)
    return reader.load()
