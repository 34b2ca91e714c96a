"""Start the Python workers of a ``from_splits`` stream before its first micro-batch.

A query over a Python data source meets cold Python workers at its first micro-batch: the
executor forks them, and each imports PySpark's worker, pyarrow and the modules the
user's opener lives in, then unpickles the plan, while every core waits (the cost is
measured in ``benchmarks/README.md``).

``WorkerWarmUp`` runs one small Spark job in the background instead, while the query is
still being analysed and started: one task per core, each a ``mapInArrow`` that decodes the
stream's plan (so its worker imports everything the opener, counter and transform need)
and returns no row. ``mapInArrow`` runs in the same pool of Python workers as a Python data
source's reads (Spark keys the pool by interpreter, worker module and environment, and
both are SQL Arrow evaluations), and Spark keeps idle workers for reuse
(``spark.python.worker.reuse``, on by default), so the first micro-batch's reads find
them started. A plain RDD job would not help: RDD workers form another pool.

The warm-up is best effort: the function run in the workers never raises (a plan that does
not decode there fails the query itself, with the split named), and a failed or
interrupted job (for example, the session stopping) is logged at debug level only.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    from pyspark.sql import SparkSession

__all__ = ["WARM_UP_JOB_GROUP", "WorkerWarmUp"]

logger = logging.getLogger("reactive_streams.spark")

WARM_UP_JOB_GROUP: Final = "reactive-streams-warm-up"
"""The Spark job group of the warm-up job (the Spark UI lists it under this name)."""


def _warm(encoded_plan: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: decode the plan, return no row, never raise."""

    def warm(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from ._splits_source import decode_plan  # noqa: PLC0415  (runs in the worker)

        # A plan that does not decode here fails the query itself, naming the split.
        with contextlib.suppress(Exception):
            decode_plan(encoded_plan)
        for _ in batches:
            pass
        return iter(())

    return warm


class WorkerWarmUp:
    """One background job that starts ``tasks`` Python workers with the plan's modules.

    Args:
        spark: the classic session the stream runs in.
        encoded_plan: the stream's plan, as ``encode_plan`` wrote it.
        tasks: how many workers to start (one task each, run at the same time when there
            are as many cores); ``None``: Spark's default parallelism.

    Concurrency: the job runs on a daemon thread of its own; ``wait`` may be called from
    any thread.
    """

    def __init__(self, spark: SparkSession, encoded_plan: str, tasks: int | None = None) -> None:
        self._spark = spark
        self._encoded = encoded_plan
        self._tasks = tasks
        self._done = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name="reactive-streams-warm-up", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            spark = self._spark
            context = spark.sparkContext
            tasks = self._tasks or max(1, int(context.defaultParallelism))
            context.setJobGroup(
                WARM_UP_JOB_GROUP, "start the Python workers of a from_splits stream"
            )
            frame = spark.range(0, tasks, 1, tasks).mapInArrow(_warm(self._encoded), "id long")
            frame.collect()
        except Exception as exc:  # best effort: the query itself reports real failures
            self.error = exc
            logger.debug("warming the Python workers of from_splits failed: %s", exc)
        finally:
            self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the job has ended; ``False`` if ``timeout`` seconds passed first."""
        return self._done.wait(timeout)
