"""``from_dataframe``: a batch DataFrame as a ``Publisher``, one partition per Spark job.

Each subscription owns a dedicated thread that pulls from a local iterator over the
DataFrame. Spark runs one job per partition, and only when the iterator is asked for a
row past the end of the previous partition; the thread asks only while the subscriber has
demand. So a subscriber that stops requesting stops Spark from starting further jobs, and
``cancel`` closes the iterator and cancels the subscription's job group (interrupting a
partition job that is running).
"""

from __future__ import annotations

import itertools
import threading
import uuid
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import ArrayType, MapType, StructType

from .._core import DaemonThreadPool, EmitLoopSubscription, report_undeliverable
from ..api import Publisher, Subscriber
from ._errors import SparkBridgeError
from ._pyspark_internals import arrow_batch_messages
from .session import is_connect_session

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame

__all__ = ["DataFramePublisher", "from_dataframe"]

_BATCH: Final = 1024
"""Elements per pass of the emit loop at most (then the next pass, on the same thread)."""
_CONNECT_ARROW_ROWS: Final = 10_000


class _DataFrameSubscription(EmitLoopSubscription[Any]):
    """One subscription: the kit's emit loop on a dedicated thread, over a local iterator.

    ``on_subscribe`` comes from ``subscribe``'s thread; every other signal from the
    subscription's one thread (a single-worker ``DaemonThreadPool``), which is started by
    the first ``request`` and opens the iterator there, so the job group applies to every
    pull. Rows are pulled only within demand: ``_emit`` takes at most ``count`` from the
    iterator, and Spark starts a partition's job only when a row of it is asked for.
    """

    __slots__ = (
        "_elements",
        "_ended",
        "_error",
        "_lock",
        "_pool",
        "_publisher",
        "_pulling",
        "job_group",
    )

    def __init__(self, publisher: DataFramePublisher, subscriber: Subscriber[Any]) -> None:
        pool = DaemonThreadPool(1, thread_name_prefix="rs-spark-from-dataframe")
        super().__init__(subscriber, executor=pool, batch_size=_BATCH, subscribe_on_caller=True)
        self._publisher = publisher
        self._pool = pool
        self._lock = threading.Lock()
        self._pulling = False  # the iterator is (being) opened: cancel interrupts its jobs
        self._elements: Iterator[Any] | None = None
        self._ended = False
        self._error: SparkBridgeError | None = None
        self.job_group = f"reactive_streams.from_dataframe.{uuid.uuid4().hex}"
        """Spark job group of this subscription's jobs (for the status tracker)."""

    def cancel(self) -> None:
        """Stop pulling: the loop closes the iterator; a running partition job is cancelled.

        Idempotent and quick (Rules 3.5, 3.7): one py4j call at most, besides the
        election's bookkeeping.
        """
        if self._election.cancelled:
            return
        super().cancel()
        self._interrupt()

    @property
    def finished(self) -> bool:
        """Whether the subscription was cancelled or has ended (nothing more will happen)."""
        return self._election.cancelled

    def _interrupt(self) -> None:
        """Cancel the job group, so a partition job computing right now stops."""
        with self._lock:
            pulling = self._pulling
        if pulling and not is_connect_session(self._publisher.dataframe):
            try:
                self._publisher.dataframe.sparkSession.sparkContext.cancelJobGroup(self.job_group)
            except Exception as exc:
                report_undeliverable(exc)

    # -- the source of the emit loop (runs on the subscription's thread) ------------------

    def _open(self) -> None:
        """Nothing to do yet: the iterator opens at the first ``_emit``, when demand came."""

    def _emit(self, subscriber: Subscriber[Any], count: int) -> int:
        elements = self._elements
        if elements is None:
            with self._lock:
                self._pulling = True
            if self._election.cancelled:  # a cancel that did not see _pulling: stop here
                return 0
            try:
                elements = self._elements = self._publisher.open_iterator(self.job_group)
            except Exception as exc:
                self._fail(exc, 0)
                return 0
        source_error: list[Exception] = []
        sent = self._deliver_each(subscriber, _rows(elements, count, source_error))
        if source_error:  # the rows of the round the failure interrupted count too
            self._fail(source_error[0], self._election.delivered + sent)
        elif sent < count and not self._election.cancelled:
            self._ended = True
        return sent

    def _deliver_failed(self, subscriber: Subscriber[Any], error: Exception) -> None:
        super()._deliver_failed(subscriber, error)  # Rule 2.13: treat as cancelled
        self._interrupt()

    def _fail(self, exc: Exception, delivered: int) -> None:
        failure = SparkBridgeError(
            f"from_dataframe failed after {delivered} elements: {type(exc).__name__}: {exc}"
        )
        failure.__cause__ = exc
        self._error = failure
        self._ended = True

    def _exhausted(self) -> bool:
        return self._ended

    def _failure(self) -> Exception | None:
        # A failure after a cancel (the job we cancelled, say) is nobody's business: the
        # loop checks the cancel first and ends without a signal.
        return self._error

    def _close(self) -> None:
        elements, self._elements = self._elements, None
        if elements is not None:
            _close(elements)
        self._pool.shutdown(wait=False)  # the thread ends once this pass returns


def _rows(elements: Iterator[Any], count: int, error: list[Exception]) -> Iterator[Any]:
    """Up to ``count`` elements; a failure of the iterator (a Spark job) ends them in ``error``."""
    try:
        yield from itertools.islice(elements, count)
    except Exception as exc:
        error.append(exc)


def _is_flat(schema: StructType) -> bool:
    """No struct, array or map columns: a row's values need no conversion."""
    nested = (StructType, ArrayType, MapType)
    return not any(isinstance(field.dataType, nested) for field in schema.fields)


def _chunks(rows: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    while chunk := list(itertools.islice(rows, size)):
        yield chunk


def _close(elements: Iterator[Any]) -> None:
    """Close the local iterator so Spark starts no further partition job."""
    close = getattr(elements, "close", None)
    if close is not None:
        try:
            close()  # GeneratorExit in PySpark's generator; its iterable tells the JVM to stop
        except Exception as exc:
            report_undeliverable(exc)


class DataFramePublisher(Publisher[Any]):
    """Publishes the rows of a batch DataFrame; each subscriber gets its own pass (unicast).

    Backpressure: the puller asks the local iterator for a row only while there is demand,
    so Spark starts the job of partition ``k + 1`` only when the subscriber has taken every
    row of partition ``k`` and requested one more.

    Concurrency: ``on_subscribe`` comes from ``subscribe``'s thread, every other signal
    from the subscription's dedicated thread.
    """

    def __init__(
        self, dataframe: DataFrame, *, arrow: bool = False, prefetch_partitions: bool = False
    ) -> None:
        if dataframe.isStreaming:
            raise ValueError("from_dataframe needs a batch DataFrame; use from_streaming_query")
        self.dataframe = dataframe
        self.arrow = arrow
        self.prefetch_partitions = prefetch_partitions
        self._lock = threading.Lock()
        self.subscriptions: list[_DataFrameSubscription] = []
        """The subscriptions that are live, or ended after the latest ``subscribe``."""

    def subscribe(self, subscriber: Subscriber[Any]) -> None:
        """Attach ``subscriber``; no Spark job runs before its first ``request``.

        Raises:
            TypeError: ``subscriber`` is ``None`` (Rule 1.9).
        """
        if subscriber is None:
            raise TypeError("Rule 1.9: subscribe(None)")
        subscription = _DataFrameSubscription(self, subscriber)
        with self._lock:
            # Finished subscriptions are dropped here, so the list holds the live ones (and
            # those that ended since the last subscribe), not every subscriber ever.
            self.subscriptions[:] = [
                *(old for old in self.subscriptions if not old.finished),
                subscription,
            ]
        subscription.start()  # on_subscribe here; the thread starts at the first request

    def open_iterator(self, job_group: str) -> Iterator[Any]:
        """Start the lazy iterator (on the puller thread, so the job group applies)."""
        df = self.dataframe
        if is_connect_session(df):
            rows = (row.asDict(recursive=True) for row in df.toLocalIterator())
            if not self.arrow:
                return rows
            schema = to_arrow_schema(df.schema, timezone="UTC")
            return (
                pa.RecordBatch.from_pylist(chunk, schema=schema)
                for chunk in _chunks(rows, _CONNECT_ARROW_ROWS)
            )
        context = df.sparkSession.sparkContext
        context.setJobGroup(job_group, "reactive_streams from_dataframe", interruptOnCancel=True)
        if not self.arrow:
            spark_rows = df.toLocalIterator(prefetchPartitions=self.prefetch_partitions)
            if _is_flat(df.schema):
                names = df.columns  # a Row is a tuple: zip is asDict without its checks
                return (dict(zip(names, row, strict=True)) for row in spark_rows)
            return (row.asDict(recursive=True) for row in spark_rows)
        schema = to_arrow_schema(df.schema, timezone="UTC")
        # One Arrow IPC record batch message per element, one job per partition, lazily.
        messages = arrow_batch_messages(df, prefetch_partitions=self.prefetch_partitions)
        return _ArrowBatches(messages, schema)


class _ArrowBatches:
    """Decode Spark's Arrow record batch messages; ``close`` closes the source iterator."""

    def __init__(self, messages: Iterator[bytes], schema: Any) -> None:
        self._messages = messages
        self._schema = schema

    def __iter__(self) -> _ArrowBatches:
        return self

    def __next__(self) -> Any:
        return pa.ipc.read_record_batch(pa.py_buffer(next(self._messages)), self._schema)

    def close(self) -> None:
        close = getattr(self._messages, "close", None)
        if close is not None:
            close()
        self._messages = iter(())


def from_dataframe(
    dataframe: DataFrame, *, arrow: bool = False, prefetch_partitions: bool = False
) -> DataFramePublisher:
    """The rows of a batch DataFrame as a ``Publisher``, pulled only as demand arrives.

    With ``arrow=False`` each element is a row as a ``dict`` (``Row.asDict(recursive=True)``);
    with ``arrow=True`` each element is a ``pyarrow.RecordBatch`` of up to
    ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows (10,000 by default), read from
    Spark's Arrow serialisation without Python row objects.

    A dedicated thread per subscription pulls from a local iterator: Spark runs one job per
    partition, only when the previous partition was consumed and more is demanded, so a
    subscriber that stops requesting stops Spark from starting jobs. ``cancel`` closes the
    iterator and cancels the subscription's job group (``subscription.job_group``).

    What it cannot bound:
        * Work before a shuffle (joins, aggregations, sorts) runs in full for the first
          partition's job: only the last stage is pulled partition by partition.
        * One partition is computed whole and held in the driver JVM while it is read;
          repartition a DataFrame whose partitions do not fit the driver.
        * On Spark Connect (supported), the server streams the whole result; demand only
          paces this process, and ``arrow=True`` rebuilds record batches from rows.

    Args:
        dataframe: a batch (not streaming) DataFrame.
        arrow: emit ``pyarrow.RecordBatch`` elements instead of dicts.
        prefetch_partitions: let Spark compute partition ``k + 1`` while partition ``k`` is
            read: faster (jobs overlap with this process's work), at the price of one job
            (and one partition held in the driver) beyond the demand.

    Returns:
        A unicast publisher: each subscriber gets its own pass over the DataFrame.

    Backpressure:
        Demand is counted in elements (rows, or record batches); no Spark job starts
        without outstanding demand.

    Concurrency:
        ``on_subscribe`` comes from ``subscribe``'s thread, every other signal from the
        subscription's dedicated thread (named ``rs-spark-from-dataframe_0``), started by
        the first ``request``; ``request``/``cancel`` may come from any thread.

    Raises:
        ValueError: ``dataframe`` is streaming.

    Signals:
        ``on_error(SparkBridgeError)`` naming Spark's error (``__cause__``) and how many
        elements were delivered before it, when a job fails.
    """
    return DataFramePublisher(dataframe, arrow=arrow, prefetch_partitions=prefetch_partitions)
