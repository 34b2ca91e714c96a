"""Starting Spark safely: a Java check, a quiet local session, and Spark Connect support.

``require_java`` turns "no Java" or "Java too old" into one clear exception with install
advice instead of a py4j stack trace. ``local_session`` builds the SparkSession the bridges
and their tests expect (UI off, 2 shuffle partitions, workers on this interpreter, quiet
logs). ``remote_session`` connects to a Spark Connect server; ``bridge_support`` and
``require_classic`` say which bridges can work on such a session.

Example::

    from reactive_streams.spark.session import local_session

    spark = local_session()            # raises JavaNotFoundError with advice if needed
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pyspark import SparkConf
from pyspark.sql import SparkSession

from ._errors import JavaNotFoundError, JavaVersionError, SparkConnectUnsupportedError
from ._pyspark_internals import (
    accumulator_server,
    active_context,
    gateway_process,
    query_context_loggers,
    start_context,
)
from ._worker_home import fast_worker_home

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = [
    "CLASSIC_ONLY_BRIDGES",
    "CONNECT_BRIDGES",
    "JavaInfo",
    "accumulator_server",
    "bridge_support",
    "gateway_process",
    "is_connect_session",
    "local_session",
    "query_context_loggers",
    "remote_session",
    "require_classic",
    "require_java",
    "spark_is_running",
]

_INSTALL_ADVICE: Final = (
    "install a Java runtime, version {minimum} or newer, e.g. "
    "`apt-get install openjdk-{minimum}-jre-headless` (Debian/Ubuntu), "
    "`brew install openjdk@{minimum}` (macOS) or `conda install -c conda-forge openjdk={minimum}`, "
    "then put it on PATH or set JAVA_HOME"
)

# `java -version` prints e.g. `openjdk version "17.0.15" 2025-04-15` or
# `java version "1.8.0_292"` (the old scheme: major 8) on stderr.
_VERSION_RE: Final = re.compile(r'version\s+"(?P<version>[^"]+)"')

CONNECT_BRIDGES: Final[frozenset[str]] = frozenset({"from_dataframe", "spark_processor"})
"""Bridges that work on a Spark Connect (``remote(...)``) session."""

CLASSIC_ONLY_BRIDGES: Final[frozenset[str]] = frozenset(
    {"to_spark_stream", "from_streaming_query", "from_splits"}
)
"""Bridges that need a classic session: their Python callbacks must run in this process."""

_WHY_CLASSIC: Final = {
    "to_spark_stream": (
        "its Python data source runs on the Connect server, which cannot reach the loopback "
        "bridge served from this process"
    ),
    "from_splits": (
        "it has not been tested on Spark Connect (its Python data source would be "
        "registered and planned on the server)"
    ),
    "from_streaming_query": (
        "foreachBatch runs on the Connect server, not in this process, so it cannot hand "
        "micro-batches to a subscriber here or wait for its demand"
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class JavaInfo:
    """The Java runtime that Spark will use.

    Attributes:
        path: absolute path of the ``java`` executable.
        major: the major version, e.g. ``17`` (``1.8`` counts as ``8``).
        version: the full version string, e.g. ``"17.0.15"``.
    """

    path: str
    major: int
    version: str


def _find_java() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = os.path.join(java_home, "bin", "java")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def parse_java_version(output: str) -> tuple[int, str]:
    """Parse the output of ``java -version`` into ``(major, full_version)``.

    Raises:
        ValueError: the output has no recognisable version.
    """
    match = _VERSION_RE.search(output)
    if match is None:
        raise ValueError(f"no version found in `java -version` output: {output.strip()[:200]!r}")
    version = match["version"]
    parts = re.split(r"[._+-]", version)
    try:
        major = int(parts[0])
        if major == 1 and len(parts) > 1:  # 1.8.0_292 is Java 8
            major = int(parts[1])
    except ValueError:
        raise ValueError(f"unparsable Java version {version!r}") from None
    return major, version


def require_java(minimum: int = 17, *, timeout: float = 30.0) -> JavaInfo:
    """Find ``java`` (``$JAVA_HOME/bin/java`` first, then ``PATH``) and check its version.

    Args:
        minimum: the lowest acceptable major version (Spark 4 needs 17).
        timeout: seconds to wait for ``java -version``.

    Returns:
        The runtime found.

    Raises:
        JavaNotFoundError: no ``java`` executable, or it could not be run; the message
            says how to install one.
        JavaVersionError: ``java`` is older than ``minimum`` (a ``JavaNotFoundError`` too).
    """
    advice = _INSTALL_ADVICE.format(minimum=minimum)
    path = _find_java()
    if path is None:
        raise JavaNotFoundError(
            f"Spark needs Java {minimum}+ but no `java` was found on PATH or in JAVA_HOME: {advice}"
        )
    try:
        completed = subprocess.run(
            [path, "-version"], capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaNotFoundError(f"could not run `{path} -version` ({exc}): {advice}") from exc
    try:
        major, version = parse_java_version(completed.stderr + completed.stdout)
    except ValueError as exc:
        raise JavaNotFoundError(f"could not tell the version of {path}: {exc}; {advice}") from exc
    if major < minimum:
        raise JavaVersionError(
            f"Spark needs Java {minimum}+ but {path} is Java {version}: {advice}",
            found=major,
            minimum=minimum,
        )
    return JavaInfo(path=path, major=major, version=version)


def local_session(
    master: str = "local[2]",
    *,
    app_name: str = "reactive-streams",
    conf: Mapping[str, str] | None = None,
    log_level: str = "ERROR",
    fast_workers: bool = True,
    jvm_stderr: Path | None = None,
    own_process_group: bool = False,
) -> SparkSession:
    """Build (or get) a classic SparkSession for local work and tests.

    Checks Java first (``require_java``), then sets: the Spark UI off, console progress off,
    ``spark.sql.shuffle.partitions=2``, Arrow for pandas conversions, the Kryo serializer,
    and ``PYSPARK_PYTHON``/``spark.pyspark.python`` to this interpreter so Python workers
    run the same environment. Entries of ``conf`` override these defaults.

    Fast Python workers (``fast_workers``, when this call starts the JVM and ``SPARK_HOME``
    is not set): Spark's Python processes import PySpark from the installed package
    instead of the pip package's uncompiled ``pyspark.zip``, through a ``SPARK_HOME`` of
    symbolic links in the cache directory (``reactive_streams.spark._worker_home``). That
    saves about 0.5 s per process, about 2 s on a streaming query's start.

    Kryo: Spark keeps the rows a Python streaming source (``to_spark_stream``) read for a
    micro-batch in its block manager, serialized with ``spark.serializer``; with Java's
    default serializer that costs about 30% of the driver JVM's time on the pipeline's
    micro-batches (measured with Java Flight Recorder), with Kryo a few percent.

    Args:
        master: the Spark master, e.g. ``"local[2]"`` or ``"local-cluster[2,1,1024]"``.
        app_name: the application name.
        conf: extra Spark configuration, applied last.
        log_level: the JVM log level set once the context is up.
        fast_workers: start Python workers from the installed PySpark (see above).
        jvm_stderr: when this call starts the driver JVM, append its standard error to
            this file, for good: its log lines, Java stack traces and own warnings, and
            the output of the Python workers it starts (which inherit it). This process's
            own stderr is left alone. ``None``: the JVM shares this process's stderr.
        own_process_group: when this call starts the driver JVM, start it in a process
            group (and session) of its own, so that a signal sent to this process's group
            (Ctrl-C in a terminal, ``kill -TERM -PGID``, an init that forwards signals to
            the group) reaches this process only, which can then stop Spark in order.
            The JVM still exits when this process ends.

    Returns:
        The session; like ``SparkSession.builder.getOrCreate()``, an existing session in
        this process is returned (and only ``conf`` that can change at runtime applies).

    Raises:
        JavaNotFoundError: Java is missing or too old (see ``require_java``).
    """
    require_java()
    if fast_workers and not spark_is_running():
        home = fast_worker_home()
        if home is not None:
            os.environ["SPARK_HOME"] = home
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings: dict[str, str] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    settings.update(conf or {})
    if (jvm_stderr is not None or own_process_group) and not spark_is_running():
        # The context is built first, on a JVM launched our way; the builder then uses it.
        spark_conf = SparkConf().setMaster(master).setAppName(app_name)
        spark_conf.setAll(list(settings.items()))
        with contextlib.ExitStack() as files:
            log = None if jvm_stderr is None else files.enter_context(jvm_stderr.open("ab"))
            start_context(spark_conf, stderr=log, own_process_group=own_process_group)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark


def spark_is_running() -> bool:
    """Whether this process has a SparkContext (whichever thread created it).

    Unlike ``SparkSession.getActiveSession()``, which follows the calling thread's JVM
    session, this sees a context started on any thread.
    """
    return active_context() is not None


def remote_session(url: str, *, app_name: str = "reactive-streams") -> SparkSession:
    """Connect to a Spark Connect server, e.g. ``remote_session("sc://localhost:15002")``.

    Only the bridges in ``CONNECT_BRIDGES`` work on the returned session; the others fail
    fast with ``SparkConnectUnsupportedError``.

    Raises:
        ImportError: the Spark Connect client dependencies (grpcio, ...) are missing; the
            message says ``pip install 'pyspark[connect]'``.
    """
    if importlib.util.find_spec("grpc") is None:
        raise ImportError(
            "Spark Connect needs its client dependencies: pip install 'pyspark[connect]'"
        )
    return SparkSession.builder.remote(url).appName(app_name).getOrCreate()


def is_connect_session(spark: object) -> bool:
    """Whether ``spark`` (a session, or a DataFrame) comes from the Spark Connect client."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def bridge_support(spark: object) -> dict[str, bool]:
    """Which bridges work on ``spark``: ``{"from_dataframe": True, "to_spark_stream": ...}``."""
    connect = is_connect_session(spark)
    names = sorted(CONNECT_BRIDGES | CLASSIC_ONLY_BRIDGES)
    return {name: (not connect) or name in CONNECT_BRIDGES for name in names}


def require_classic(spark: object, bridge: str) -> None:
    """Fail fast when ``bridge`` cannot work on ``spark`` (a session or a DataFrame).

    Raises:
        SparkConnectUnsupportedError: ``spark`` is a Spark Connect object and ``bridge`` is
            in ``CLASSIC_ONLY_BRIDGES``; the message says why and what to do.
    """
    if bridge in CLASSIC_ONLY_BRIDGES and is_connect_session(spark):
        raise SparkConnectUnsupportedError(
            f"{bridge} needs a classic SparkSession, not Spark Connect: "
            f"{_WHY_CLASSIC[bridge]}. Use reactive_streams.spark.session.local_session() or "
            "SparkSession.builder.master(...) in the driver process instead."
        )
