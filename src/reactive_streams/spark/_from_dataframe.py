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

from .._core import (
    MAX_DEMAND,
    ProtocolViolationError,
    StreamStatistics,
    add_demand,
    report_undeliverable,
    signal_on_complete,
    signal_on_error,
    signal_on_next,
    signal_on_subscribe,
    validate_request,
)
from ..api import Publisher, Subscriber, Subscription
from ._dropped import DROPPED
from ._errors import SparkBridgeError
from ._pyspark_internals import arrow_batch_messages
from .session import is_connect_session

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame

__all__ = ["DataFramePublisher", "from_dataframe"]

_WAIT_SLICE: Final = 0.5
_CONNECT_ARROW_ROWS: Final = 10_000


class _DataFrameSubscription(Subscription):
    """One subscription: demand accounting and the dedicated puller thread."""

    def __init__(self, publisher: DataFramePublisher, subscriber: Subscriber[Any]) -> None:
        self._publisher = publisher
        self._subscriber = subscriber
        self._cond = threading.Condition()
        self._demand = 0
        self._requested = 0
        self._delivered = 0
        self._cancelled = False
        self._terminated = False
        self._error: ProtocolViolationError | None = None
        self._thread: threading.Thread | None = None
        self.job_group = f"reactive_streams.from_dataframe.{uuid.uuid4().hex}"
        """Spark job group of this subscription's jobs (for the status tracker)."""

    def request(self, n: int) -> None:
        """Add demand and wake the puller; start it on the first request (Rules 3.9, 3.17)."""
        try:
            count = validate_request(n)
        except ProtocolViolationError as error:
            with self._cond:
                if self._cancelled:
                    return
                if self._error is None:
                    self._error = error
                self._cond.notify_all()
            self._start()
            return
        with self._cond:
            if self._cancelled:
                return
            self._demand = add_demand(self._demand, count)
            self._requested = add_demand(self._requested, count)
            self._cond.notify_all()
        self._start()

    def cancel(self) -> None:
        """Stop pulling: the puller closes the iterator; running jobs are cancelled."""
        with self._cond:
            if self._cancelled:
                return
            self._cancelled = True
            started = self._thread is not None
            if not started:
                self._subscriber = DROPPED  # Rule 3.13: nothing else will signal it
            self._cond.notify_all()
        if started and not is_connect_session(self._publisher.dataframe):
            # Interrupt a partition job that is computing right now (cheap: one py4j call).
            try:
                self._publisher.dataframe.sparkSession.sparkContext.cancelJobGroup(self.job_group)
            except Exception as exc:
                report_undeliverable(exc)

    @property
    def finished(self) -> bool:
        """Whether the subscription was cancelled or has ended (nothing more will happen)."""
        with self._cond:
            return self._cancelled

    def statistics(self) -> StreamStatistics:
        """Elements requested and delivered; ``buffered`` is always 0 (one row at a time)."""
        with self._cond:
            return StreamStatistics(
                requested=self._requested,
                delivered=self._delivered,
                buffered=0,
                cancelled=self._cancelled,
                terminated=self._terminated,
            )

    def _start(self) -> None:
        with self._cond:
            if self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._run, name="rs-spark-from-dataframe", daemon=True
            )
        self._thread.start()

    def _take_demand(self) -> int:
        """Wait for demand; 0 means stop (cancelled). A parked Rule 3.9 error is raised."""
        with self._cond:
            while self._demand == 0 and not self._cancelled and self._error is None:
                self._cond.wait(_WAIT_SLICE)
            if self._error is not None:
                raise self._error
            if self._cancelled:
                return 0
            return self._demand

    def _run(self) -> None:
        elements: Iterator[Any] | None = None
        sent = 0  # delivered in the current round, not yet added to _delivered
        try:
            elements = self._publisher.open_iterator(self.job_group)
            while True:
                demand = self._take_demand()
                if demand == 0:
                    return
                for element in itertools.islice(elements, demand):
                    if not signal_on_next(self._subscriber, element):
                        self.cancel()  # Rule 2.13: treat as cancelled
                        return
                    sent += 1
                    # An unlocked read of a flag that only goes False -> True: a cancel seen
                    # one element late is allowed (Rules 2.8, 3.12), a lock per row is slow.
                    if self._cancelled:
                        return
                with self._cond:
                    self._delivered += sent
                    if self._demand != MAX_DEMAND:
                        self._demand -= sent
                    exhausted = sent < demand
                    sent = 0
                if exhausted:
                    self._terminate(None)
                    return
        except ProtocolViolationError as error:
            self._terminate(error)
        except Exception as exc:
            with self._cond:
                cancelled = self._cancelled
            if cancelled:  # e.g. the job we cancelled: nobody is listening any more
                return
            with self._cond:  # the rows of the round the failure interrupted count too
                self._delivered += sent
                delivered = self._delivered
            failure = SparkBridgeError(
                f"from_dataframe failed after {delivered} elements: {type(exc).__name__}: {exc}"
            )
            failure.__cause__ = exc
            self._terminate(failure)
        finally:
            self._subscriber = DROPPED  # Rule 3.13: the stream is over for the subscriber
            if elements is not None:
                _close(elements)

    def _terminate(self, error: Exception | None) -> None:
        with self._cond:
            if self._cancelled:
                return
            self._cancelled = True
            self._terminated = True
        if error is None:
            signal_on_complete(self._subscriber)
        else:
            signal_on_error(self._subscriber, error)


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

    Concurrency: every signal comes from the subscription's dedicated thread.
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
        if not signal_on_subscribe(subscriber, subscription):
            subscription.cancel()

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
        All signals come from the subscription's dedicated thread (named
        ``rs-spark-from-dataframe``); ``request``/``cancel`` may come from any thread.

    Raises:
        ValueError: ``dataframe`` is streaming.

    Signals:
        ``on_error(SparkBridgeError)`` naming Spark's error (``__cause__``) and how many
        elements were delivered before it, when a job fails.
    """
    return DataFramePublisher(dataframe, arrow=arrow, prefetch_partitions=prefetch_partitions)
