"""The exceptions of the Spark bridges.

Hierarchy::

    ReactiveStreamsError
    └── SparkBridgeError                   base of everything reactive_streams.spark raises
        ├── JavaNotFoundError              no ``java`` executable (install advice in the message)
        │   └── JavaVersionError           ``java`` is there but older than required
        ├── SparkConnectUnsupportedError   the bridge needs a classic session, got Spark Connect
        ├── StreamingQueryFailedError      a streaming query failed; ``__cause__`` is Spark's error
        ├── SparkTransformError            ``spark_processor``'s transform or its Spark job failed
        ├── BridgeClosedError              the loopback bridge of ``to_spark_stream`` went away
        ├── SplitReadError                 ``from_splits`` could not plan or read a split (named)
        └── RemoteRouteError               ``from_rsocket``'s route could not be reached or read

This module imports nothing from pyspark, so it is safe to import anywhere.
"""

from __future__ import annotations

from .._core import ReactiveStreamsError

__all__ = [
    "BridgeClosedError",
    "JavaNotFoundError",
    "JavaVersionError",
    "RemoteRouteError",
    "SparkBridgeError",
    "SparkConnectUnsupportedError",
    "SparkTransformError",
    "SplitReadError",
    "StreamingQueryFailedError",
]


class SparkBridgeError(ReactiveStreamsError):
    """Base class of the errors raised or signalled by ``reactive_streams.spark``."""


class JavaNotFoundError(SparkBridgeError):
    """No usable ``java`` executable: Spark cannot start. The message says how to install one."""


class JavaVersionError(JavaNotFoundError):
    """A ``java`` executable exists but is older than the version Spark needs.

    Attributes:
        found: the major version found, e.g. ``11``.
        minimum: the major version required, e.g. ``17``.
    """

    def __init__(self, message: str, *, found: int, minimum: int) -> None:
        super().__init__(message)
        self.found = found
        self.minimum = minimum


class SparkConnectUnsupportedError(SparkBridgeError):
    """The bridge needs a classic (py4j) SparkSession and was given a Spark Connect one."""


class StreamingQueryFailedError(SparkBridgeError):
    """A Spark streaming query ended with an error; ``__cause__`` holds Spark's exception."""


class SparkTransformError(SparkBridgeError):
    """The transform of ``spark_processor`` raised, or the Spark job it built failed."""


class BridgeClosedError(SparkBridgeError):
    """The loopback bridge between a publisher and a Spark stream failed or was closed."""


class SplitReadError(SparkBridgeError):
    """``from_splits`` could not count or read a split; the message names the split.

    Raised in Spark's processes (the streaming source runner, or an executor's Python
    worker), so it reaches the user inside Spark's own error (``StreamingQueryException``
    or ``StreamingQueryFailedError``), with this message in its text.
    """


class RemoteRouteError(SparkBridgeError):
    """``from_rsocket`` could not reach, or read, its partitioned route.

    The message names the URL and the route, and says what happened: the connection
    refused or dropped, the route unknown, the token refused, no answer in time, or an
    answer that does not follow the partitioned-route protocol.

    Attributes:
        refused: ``True`` when the server itself refused the request (``REJECTED``: an
            unknown route, or ``REJECTED_SETUP``: a wrong token), so asking again gets the
            same answer; ``False`` for a dropped connection, a timeout or a bad answer.
    """

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused
