"""Start the pipeline's Spark session in the background, while the input is planned."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from ._errors import PipelineFailedError

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

__all__ = ["CHECK_INTERVAL", "START_TIMEOUT", "SparkSessionStarter", "spark_is_running"]

START_TIMEOUT = 600.0
"""Seconds to wait for Spark's session to start (a JVM on a loaded machine can take long;
PySpark's own launcher gives up sooner when the JVM exits)."""

CHECK_INTERVAL = 0.1
"""Seconds between calls of ``get``'s ``check`` while it waits."""


def spark_is_running() -> bool:
    """Whether this process already has a SparkContext (``False`` without pyspark).

    Imports the Spark side lazily: importing the pipeline package does not import pyspark.
    """
    try:
        from reactive_streams.spark.session import spark_is_running as running  # noqa: PLC0415
    except ImportError:  # no Spark here at all: start() reports it
        return False
    return running()


class SparkSessionStarter:
    """Runs ``factory`` (which starts a session) on a daemon thread; ``get`` waits for it.

    A daemon thread, so a command that fails on bad input meanwhile exits at once (the
    JVM, whose standard input is this process, exits with it).
    """

    def __init__(self, factory: Callable[[], tuple[SparkSession, bool]]) -> None:
        self._done = threading.Event()
        self._result: tuple[SparkSession, bool] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(factory,), name="pipeline-spark-start", daemon=True
        )
        self._thread.start()

    def _run(self, factory: Callable[[], tuple[SparkSession, bool]]) -> None:
        try:
            self._result = factory()
        except BaseException as exc:  # handed to the thread that calls get
            self._error = exc
        finally:
            self._done.set()

    def get(
        self, timeout: float = START_TIMEOUT, *, check: Callable[[], None] | None = None
    ) -> tuple[SparkSession, bool]:
        """The session and whether it was started here; re-raises the factory's error.

        Args:
            timeout: seconds to wait for the session.
            check: called every ``CHECK_INTERVAL`` seconds while waiting; what it raises
                ends the wait (the session goes on starting: ``get_quietly`` it to stop
                it). E.g. ``Pipeline``'s check for a stop asked by a signal.

        Raises:
            PipelineFailedError: the session did not start within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while not self._done.wait(max(0.0, min(CHECK_INTERVAL, deadline - time.monotonic()))):
            if check is not None:
                check()
            if time.monotonic() >= deadline:
                raise PipelineFailedError(f"Spark did not start within {timeout:.0f} s")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def get_quietly(self, timeout: float = START_TIMEOUT) -> tuple[SparkSession | None, bool]:
        """Like ``get``, but ``(None, False)`` when the session did not start in time."""
        try:
            return self.get(timeout)
        except Exception:
            return None, False
