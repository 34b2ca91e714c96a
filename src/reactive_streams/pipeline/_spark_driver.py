"""The Spark driver's JVM as the pipeline sees it: alive or not, how much memory, how it died.

PySpark starts the driver's JVM as a child process of this one (``spark-submit`` execs
``java``) and keeps its ``subprocess.Popen`` (a private attribute, read through
``reactive_streams.spark._pyspark_internals.gateway_process`` with the other private
PySpark reads and their tests). When the JVM was started some other way
(``PYSPARK_GATEWAY_PORT``), there is no process to watch and every function here answers
"unknown" (``None``), so the pipeline then relies on py4j's errors alone.
"""

from __future__ import annotations

import logging
import signal
import subprocess
from typing import Any

__all__ = [
    "DriverProcess",
    "describe_exit",
    "quiet_accumulator_server",
    "quiet_query_context_logs",
]

logger = logging.getLogger("reactive_streams.pipeline")


def describe_exit(returncode: int) -> str:
    """How a process ended, in words: ``"killed by SIGKILL"``, ``"exit status 1"``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        text = f"killed by {name}"
        if name == "SIGKILL":
            text += ", as the kernel's out-of-memory killer does"
        return text
    return f"exit status {returncode}"


class DriverProcess:
    """The driver JVM of this process's ``SparkContext`` (a child process), if there is one.

    Args:
        process: the JVM's ``Popen``; ``None`` when unknown.
    """

    def __init__(self, process: subprocess.Popen[bytes] | None) -> None:
        self._process = process

    @classmethod
    def of_active_context(cls) -> DriverProcess:
        """The JVM behind the running ``SparkContext`` (``process`` ``None`` if unknown)."""
        try:
            from ..spark.session import gateway_process  # noqa: PLC0415
        except ImportError:
            return cls(None)
        return cls(gateway_process())

    @property
    def pid(self) -> int | None:
        """The JVM's process id, or ``None`` when unknown."""
        return None if self._process is None else self._process.pid

    def death(self, grace: float = 0.0) -> str | None:
        """``None`` while the JVM runs (or is unknown); else a sentence saying it died.

        Args:
            grace: seconds to wait for the process to end first (py4j may notice a dying
                JVM's closed socket a moment before the process is gone).
        """
        process = self._process
        if process is None:
            return None
        try:
            returncode = process.wait(grace) if grace > 0 else process.poll()
        except subprocess.TimeoutExpired:
            return None
        if returncode is None:
            return None
        return f"the Spark driver process died (JVM pid {process.pid}, {describe_exit(returncode)})"

    def peak_memory(self) -> int | None:
        """The JVM's peak resident memory in bytes (Linux ``VmHWM``), or ``None``."""
        if self._process is None:
            return None
        try:
            with open(f"/proc/{self._process.pid}/status", encoding="ascii") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            return None
        return None


def quiet_accumulator_server() -> None:
    """Send the accumulator server's connection errors to the log, not to stderr.

    PySpark's accumulator server (a ``socketserver`` in this process) prints a traceback
    to stderr when the JVM's connection to it breaks, e.g. when the JVM dies; the pipeline
    reports that death itself, in one line. The traceback goes to the
    ``reactive_streams.pipeline`` logger at DEBUG level instead.
    """
    try:
        from ..spark.session import accumulator_server  # noqa: PLC0415
    except ImportError:
        return
    server: Any = accumulator_server()
    if server is None:
        return

    def handle_error(_request: object, client_address: object) -> None:
        logger.debug(
            "accumulator server: a connection from %s broke", client_address, exc_info=True
        )

    server.handle_error = handle_error


_FORWARDER_NAME = "reactive-streams-query-context"


class _Forward(logging.Handler):
    """Hands each record to ``logger`` (and so to its handlers and its parents')."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self.set_name(_FORWARDER_NAME)
        self._logger = logger

    def emit(self, record: logging.LogRecord) -> None:
        self._logger.handle(record)


def quiet_query_context_logs() -> None:
    """Send PySpark's logs of errors with a query context to the log, not to stderr.

    PySpark logs each JVM error with a query context (a query that does not resolve, an
    ANSI error such as a failed cast in a running query) as it converts it, with the whole
    Java stack trace: 13 KB or more on stderr per error, once more for each time the error
    is converted again. The pipeline reports such an error itself, in one line; the
    records go to the ``reactive_streams.pipeline.spark`` logger instead (at their own
    level, ERROR), which the command sends to Spark's output file. Idempotent.
    """
    try:
        from ..spark.session import query_context_loggers  # noqa: PLC0415
    except ImportError:
        return
    target = logging.getLogger("reactive_streams.pipeline.spark")
    for pyspark_logger in query_context_loggers():
        for handler in list(pyspark_logger.handlers):
            pyspark_logger.removeHandler(handler)
        pyspark_logger.addHandler(_Forward(target))
