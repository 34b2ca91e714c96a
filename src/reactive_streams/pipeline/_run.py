"""Wiring the pipeline: source -> ``to_spark_stream`` -> SQL -> ``from_streaming_query`` -> sink.

``Pipeline`` does the work in three steps, so the command can report each kind of failure
the right way:

1. ``prepare()``: everything that can be checked without Spark: the inputs and their
   schema, the reference tables' files (``--table``, ``_tables``), the output directory,
   the Spark master (``--remote`` cannot work: both bridges need a classic session),
   Java 17+. Failures are ``PipelineUsageError`` (exit 2). With ``start_spark=True`` (the
   command) the JVM starts meanwhile, once the checks that need no input passed.
2. ``start()``: the session, then ``--sql`` parsed with Spark's own parser before
   anything else (a statement that does not parse, or is not a query, is a
   ``PipelineUsageError``: nothing is run), the reference tables (read, cached,
   registered as views; one that does not load is a ``PipelineUsageError``), where a
   ``--checkpoint`` resumes (``_checkpoint``), the ``events`` view, the query (one that
   does not resolve or does not read ``events`` is a ``PipelineUsageError``), the
   subscription of the sink.
3. ``wait()`` / ``progress()`` while it runs, ``stop()`` on Ctrl-C or SIGTERM, then
   ``finish()``.

Stopping on a signal: a signal handler calls ``interrupt(signum)``, which only records the
signal (no lock, no call into Spark: a ``KeyboardInterrupt`` raised inside a py4j call
would leave the connection to the JVM unusable, and stopping needs it). Before the stream
runs, ``start`` raises ``PipelineInterruptedError`` at its next step (it checks while it
waits for Spark's session too); once it runs, the caller sees ``interrupt_signal`` and
calls ``stop()``, and the result is ``interrupted``, with exit status ``128 + signum``.

Demand, end to end: the sink requests one micro-batch at a time; ``from_streaming_query``
holds Spark's ``foreachBatch`` until then; each trigger asks ``to_spark_stream`` for at most
``max_records_per_trigger`` records; the bridge holds at most two triggers (the running
one and the next, read ahead) and asks the source for one chunk of ``chunk_rows`` records
at a time while it holds fewer. Records travel as Arrow record batches. So the driver
holds at most about two triggers' records and one micro-batch's output whatever the
input size. That is ``--read-on driver`` (and ``--rate``); by default the files are read on
the executors instead (``reactive_streams.spark.splits``: ``from_splits`` over the files'
splits, in input order), and the driver holds no record at all.

Each way of reading is its own object behind ``_read_mode.ReadMode`` (``ExecutorsRead``,
``DriverRead``, ``RemoteRead`` for ``--input rsocket://...``): the stream ``events``, the
read figures, the dead letters and their limit, and what to stop and remove at the end.
``Pipeline`` holds one and never asks which.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

from ..files import ConversionOptions, FileSplit, FormatError, plan_splits
from ._checkpoint import check_fingerprint, fingerprint
from ._dead_letter import DeadLetterLimit, DeadLetterWriter
from ._diagnostics import (
    PipelineProgress,
    PipelineResult,
    QueryProgress,
    Status,
    causes,
    first_line,
    log4j_config,
    peak_memory_bytes,
    summarize_error,
    top_rows,
)
from ._errors import (
    PipelineFailedError,
    PipelineInterruptedError,
    PipelineUsageError,
    signal_name,
)
from ._follow import FollowedFiles, plan_file_partitions
from ._inputs import (
    ColumnChanges,
    InputPlan,
    RemoteInput,
    cached_default_input,
    check_default_input,
    check_time_casts,
    default_input,
    plan_inputs,
    remote_input_plan,
    time_text_columns,
)
from ._metrics import PipelineMetrics, StageStreams
from ._output import check_output_dir, created_dirs, remove_if_empty, result_path
from ._query import (
    DEFAULT_COLUMNS,
    DEFAULT_REQUIRED_COLUMNS,
    DEFAULT_SQL,
    EVENTS_VIEW,
    QueryPlan,
    aggregates,
    check_query,
    choose_mode,
)
from ._read_driver import DriverRead
from ._read_executors import ExecutorsRead
from ._read_mode import ReadCounts, ReadMode
from ._read_parts import PartsRead
from ._read_remote import RemoteRead
from ._schema import UTC_TIMESTAMP, describe_schema, schema_from_ddl
from ._session_starter import SparkSessionStarter, spark_is_running
from ._sink import ResultSink
from ._sink_url import parse_sink
from ._spark_driver import DriverProcess, quiet_accumulator_server, quiet_query_context_logs
from ._tables import ReferenceTable, check_table_names, load_tables, plan_tables
from ._target import stream_id

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from pyspark.sql import DataFrame, SparkSession

    from ..spark import StreamingQueryPublisher
    from ._config import PipelineConfig
    from ._target import SinkTarget

__all__ = ["Pipeline"]


def _refuse(options: Iterable[tuple[str, object]], why: str) -> None:
    """Refuse, in one line, the ``(option, value)`` pairs whose value is set.

    Raises:
        PipelineUsageError: ``"--a, --b: why"`` for the options given.
    """
    given = [option for option, value in options if value]
    if given:
        raise PipelineUsageError(f"{', '.join(given)}: {why}")


_FOLDED_PROGRESS_WAIT = 10.0
"""Seconds a stop of a live run waits for Spark to report the micro-batch just folded."""

_STOP_WAIT = 30.0
"""Seconds ``close`` waits for a query that is stopping before it stops the session."""

_DEATH_GRACE = 2.0
"""Seconds ``finish`` lets a failing driver JVM take to exit, to name its death as the cause."""

_REMOTE_TIMEOUT = 30.0
"""Seconds ``prepare`` waits for a remote input's server to connect and to answer."""

_PROGRESS_POLL = 1.0

"""Seconds between reads of the query's progress while ``Pipeline.wait`` waits."""


def _forget_dead_session(spark: SparkSession) -> None:
    """Release the Python side of a session whose JVM died (its calls into the JVM fail)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PySpark warns it could not shut the JVM down
        with contextlib.suppress(Exception):
            spark.stop()


class Pipeline:
    """One run of the pipeline (see the module docstring for the steps).

    Args:
        config: the options.

    Concurrency: ``progress`` and ``stop`` may be called from any thread while
    ``wait`` runs; the other methods from one thread, in order.
    """

    def __init__(self, config: PipelineConfig) -> None:
        if config.trigger_records <= 0:
            raise PipelineUsageError(
                f"--max-records-per-trigger must be positive, got {config.trigger_records}"
            )
        if config.chunk_rows <= 0:
            raise PipelineUsageError(f"--chunk-rows must be positive, got {config.chunk_rows}")
        if config.rate is not None and config.rate <= 0:
            raise PipelineUsageError(f"--rate must be positive, got {config.rate}")
        if config.rate is not None and config.read_on == "executors":
            raise PipelineUsageError(
                "--rate paces a reader in this process, so it reads on the driver: drop "
                "--read-on executors (or use --read-on driver)"
            )
        check_table_names(config.tables)
        if config.partition_by and config.fmt != "parquet":
            raise PipelineUsageError(
                "--partition-by writes a partitioned Parquet dataset: use --format parquet "
                f"(not {config.fmt})"
            )
        twice = sorted(
            {name for name in config.partition_by if config.partition_by.count(name) > 1}
        )
        if twice:
            raise PipelineUsageError(f"--partition-by {', '.join(twice)}: given twice")
        if config.sink is not None and config.partition_by:
            raise PipelineUsageError(
                "--partition-by is for the result file; a --sink table is one table"
            )
        self.config = config
        self.plan: InputPlan | None = None
        # --table: the reference tables, checked by prepare, loaded (cached) by start.
        self.tables: tuple[ReferenceTable, ...] = ()
        self._table_frames: list[DataFrame] = []
        self.query: QueryPlan | None = None
        self.spark: SparkSession | None = None
        self._dead = DeadLetterWriter(config.dead_letter_path)
        self._sink: ResultSink | None = None
        self._query_progress = QueryProgress()
        self._publisher: StreamingQueryPublisher | None = None
        self._started = 0.0
        self._phase = "starting"
        self._stopped = False
        self._stop_signal: int | None = None
        self._interrupt_signal: int | None = None  # written by a signal handler only
        self._own_session = False
        self._source_done_at: float | None = None
        self._starter: SparkSessionStarter | None = None
        self._driver = DriverProcess(None)
        self._jvm_peak: int | None = None
        self.notes: list[str] = []
        # The files that added or lack columns (``InputPlan.column_changes``).
        self._column_changes: tuple[ColumnChanges, ...] = ()
        self._created: list[Path | None] = []  # directories prepare made (close: if empty)
        # How the input is read (``_read_mode``): set by ``prepare``.
        self._read: ReadMode | None = None
        # --input rsocket://...: the route, and what it said of itself (``prepare``).
        self._remote: tuple[RemoteInput, Any] | None = None
        # --input DIR --follow: the files served on loopback for the run (``prepare``).
        self._followed: FollowedFiles | None = None
        # Per-stage metrics: the display's bottleneck, and --metrics-port (see _metrics).
        self.metrics = PipelineMetrics(self)
        # --max-dead-letters: why the run was failed for its dead letters (set once).
        self._limit_lock = threading.Lock()
        self._limit_error: str | None = None
        # --sink: where the result goes instead of a file (checked by ``prepare``).
        self.target: SinkTarget | None = None

    # -- step 1 -------------------------------------------------------------------------

    def prepare(self, *, start_spark: bool = False) -> InputPlan:
        """Check inputs, tables, output, master and Java; return the input plan (with schema).

        With ``start_spark``, once every check has passed, Spark's own session starts in
        the background (the command does this: the JVM takes seconds to start); for the
        default input it starts while the table loads. ``start`` then uses it.

        Raises:
            PipelineUsageError: any of those cannot work (one line, exit status 2).
        """
        config = self.config
        if config.remote is not None:
            raise PipelineUsageError(
                f"--remote {config.remote}: the pipeline needs a classic Spark session, not "
                "Spark Connect (to_spark_stream's data source and from_streaming_query's "
                "foreachBatch would run on the Connect server, which cannot reach this "
                "process); use --master instead"
            )
        if config.metrics_port is not None:  # a busy port fails before Spark starts
            self.metrics.serve(config.metrics_port, config.metrics_host)
        self._check_output_and_java()
        self._check_sink()
        self.tables = plan_tables(config.tables)
        start_now = start_spark and not spark_is_running()
        if config.input_url is not None:
            plan = self._remote_plan(config.input_url)
            if start_now:
                self._start_spark_in_background()
        elif config.follow:
            plan = self._followed_plan()
            if start_now:
                self._start_spark_in_background()
        elif config.inputs:
            # Every input problem is reported before the JVM starts (it takes seconds).
            schema, options = self._schema_and_options()
            plan = self._checked(
                plan_inputs(
                    config.inputs,
                    encoding=config.encoding,
                    delimiter=config.delimiter,
                    quote=config.quote,
                    follow_symlinks=config.follow_symlinks,
                    schema=schema,
                    options=options,
                )
            )
            self._column_changes = plan.column_changes
            times = time_text_columns(plan)
            check_time_casts(config.sql, times)  # before the JVM's seconds, not after them
            self.notes.extend(found.note for found in times)
            if plan.skipped:
                links = ", ".join(str(path) for path in plan.skipped[:3])
                more = f" and {len(plan.skipped) - 3:,} more" if len(plan.skipped) > 3 else ""
                self.notes.append(
                    f"left out {len(plan.skipped):,} symbolic link(s) pointing outside the "
                    f"input directory: {links}{more} (--follow-symlinks reads them)"
                )
            if start_now:
                self._start_spark_in_background()
        else:
            _refuse(
                self._file_only_options(),
                "only for --input files (the default input has its own schema)",
            )
            check_default_input()
            if start_now:  # the JVM starts while the default input is planned
                self._start_spark_in_background()
            plan = self._checked(self._default_input())
        self.plan = plan
        return plan

    def _check_sink(self) -> None:
        """``--sink``: connect and check the target before Spark starts (``SinkTarget.check``).

        The output mode and keys are the query's as far as they are known without Spark;
        an aggregating ``--sql`` in ``auto`` mode, and the result's column types, are
        checked again once Spark analysed the query (``SinkTarget.prepare``).

        Raises:
            PipelineUsageError: the URL, the server, the rights or the table cannot work.
        """
        config = self.config
        if config.sink is None:
            return
        guess = choose_mode(
            config.sql,
            requested=config.output_mode,
            keys=config.keys,
            aggregates=None,
            columns=DEFAULT_REQUIRED_COLUMNS,  # the input's own columns are checked later
        )
        target = parse_sink(
            config.sink, stream=stream_id(config.checkpoint), retry_for=config.sink_retry_for
        )
        try:
            target.check(
                mode=guess.mode,
                keys=guess.keys,
                columns=DEFAULT_COLUMNS if config.sql is None else None,
            )
        except BaseException:
            target.close()
            raise
        self.target = target

    def _remote_plan(self, text: str) -> InputPlan:
        """The plan of ``--input rsocket://...``: the route's schema, asked over the network.

        Raises:
            PipelineUsageError: options that only files take, or the route cannot be
                reached or described (one line naming the URL and the route).
        """
        config = self.config
        remote = RemoteInput.parse(text)
        if remote is None:
            raise PipelineUsageError(f"--input {text}: not an rsocket:// URL")
        if config.inputs:
            raise PipelineUsageError(
                f"--input {text}: a route is the whole input; it cannot be mixed with files"
            )
        _refuse(
            [*self._file_only_options(), *self._driver_read_options()],
            f"not for --input {text} (the route gives the schema and its records are read on "
            "the executors)",
        )
        return self._checked(self._route_plan(remote, config.token))

    def _route_plan(self, remote: RemoteInput, token: str | None) -> InputPlan:
        """What the route says of itself (``remote_input_plan``), kept for ``start``."""
        plan, info = remote_input_plan(remote, token=token, timeout=_REMOTE_TIMEOUT)
        self._remote = (remote, info)
        return plan

    def _file_only_options(self) -> list[tuple[str, object]]:
        """The options only local files take, with their values (``_refuse``)."""
        config = self.config
        return [
            ("--schema", config.schema),
            ("--null-value", config.null_values),
            ("--timestamp-format", config.timestamp_format),
        ]

    def _driver_read_options(self) -> list[tuple[str, object]]:
        """The options only a read on the driver takes, with their values (``_refuse``)."""
        config = self.config
        return [("--rate", config.rate), ("--read-on driver", config.read_on == "driver")]

    def _followed_plan(self) -> InputPlan:
        """The plan of ``--input DIR --follow``: the files served on loopback as a live route.

        The files there now are planned into live partitions (one per core of this host,
        at least 2), served for the run (``FollowedFiles``) and read as a route: the same
        path, demand and offsets as ``--input rsocket://`` to ``serve --follow``.

        Raises:
            PipelineUsageError: no ``--input``, options that only a driver-side read takes,
                a master whose executors may run on other hosts (they could not reach this
                host's loopback), or the files cannot be planned.
        """
        config = self.config
        if not config.inputs:
            raise PipelineUsageError("--follow needs --input files or directories to follow")
        _refuse(
            self._driver_read_options(),
            "not with --follow (followed files are read on the executors, as fast as Spark asks)",
        )
        if not config.master.startswith("local"):
            raise PipelineUsageError(
                f"--follow with --master {config.master}: the followed files are served on "
                "this host's loopback, which executors on other hosts cannot reach; run "
                "`reactive-streams serve --follow` here and --input rsocket://HOST:PORT/ROUTE"
            )
        schema, options = self._schema_and_options()
        try:
            partitions, list_inputs, files = plan_file_partitions(
                config.inputs,
                encoding=config.encoding,
                delimiter=config.delimiter,
                quote=config.quote,
                follow_symlinks=config.follow_symlinks,
                schema=schema,
                options=options,
                partitions=max(2, os.cpu_count() or 1),
                batch_rows=config.chunk_rows,
                follow=True,
            )
        except PipelineUsageError:
            raise
        except (FormatError, ValueError, OSError, pa.ArrowException) as exc:
            raise PipelineUsageError(f"cannot plan the input: {exc}") from None
        self._followed = FollowedFiles(
            partitions, list_inputs, known=files, interval=config.poll_interval
        )
        remote = RemoteInput.parse(self._followed.url)
        assert remote is not None
        plan = self._route_plan(remote, self._followed.token)
        names = ", ".join(str(path) for path in config.inputs)
        return self._checked(dataclasses.replace(plan, description=f"following {names}"))

    def _schema_and_options(self) -> tuple[pa.Schema | None, ConversionOptions]:
        """``--schema`` read, and ``--null-value`` and ``--timestamp-format`` checked.

        Raises:
            PipelineUsageError: the DDL or the format is not valid.
        """
        config = self.config
        schema = None
        if config.schema is not None:
            try:
                schema = schema_from_ddl(config.schema)
            except ValueError as exc:
                raise PipelineUsageError(f"--schema: {exc}") from None
        try:
            options = ConversionOptions(
                null_values=frozenset(value.strip() for value in config.null_values),
                timestamp_format=config.timestamp_format,
            )
        except ValueError as exc:
            raise PipelineUsageError(f"--timestamp-format: {exc}") from None
        return schema, options

    def _default_input(self) -> InputPlan:
        """The flights: their cached Parquet files on the executors, else the table.

        Raises:
            PipelineUsageError: the cache cannot be read or written.
        """
        if self.config.reads_on != "executors":
            return default_input()
        try:
            return cached_default_input()
        except (OSError, pa.ArrowException) as exc:
            raise PipelineUsageError(
                "cannot cache the default input as Parquet files: "
                f"{getattr(exc, 'strerror', None) or exc}"
            ) from None

    def _split_plan(self, plan: InputPlan) -> tuple[FileSplit, ...]:
        """The splits of ``--read-on executors``: one per file, every record counted.

        Raises:
            PipelineUsageError: a file cannot be examined.
        """
        files = [item for item in plan.files if item.path.stat().st_size]
        labels = None
        if plan.label is not None:  # the default input's cached files carry its name
            labels = [f"{plan.label} (part {index + 1})" for index in range(len(files))]
        try:
            return plan_splits(files, labels=labels)
        except FormatError as exc:
            raise PipelineUsageError(str(exc)) from None
        except (OSError, pa.ArrowException) as exc:
            raise PipelineUsageError(
                f"cannot plan the splits of the input: {getattr(exc, 'strerror', None) or exc}"
            ) from None

    def _start_spark_in_background(self) -> None:
        self._starter = SparkSessionStarter(self._new_session)
        self._started = time.monotonic()

    def _checked(self, plan: InputPlan) -> InputPlan:
        """``plan`` with the default query's types, checked against the mode and checkpoint.

        Raises:
            PipelineUsageError: the mode or keys cannot work with these columns, or the
                checkpoint was written by another run.
        """
        config = self.config
        if config.sql is None and "time_hour" in plan.schema.names:
            # The default query reads time_hour as a UTC timestamp, whatever the file holds
            # (text such as "2013-01-01T10:00:00Z" is converted; a bad value is a dead letter).
            index = plan.schema.get_field_index("time_hour")
            if plan.schema.field(index).type != UTC_TIMESTAMP:
                schema = plan.schema.set(index, pa.field("time_hour", UTC_TIMESTAMP))
                plan = dataclasses.replace(plan, schema=schema)
        # Mode and key problems that do not depend on the query's plan fail here, early.
        choose_mode(config.sql, requested=config.output_mode, keys=config.keys,
                    aggregates=None, columns=plan.schema.names)  # fmt: skip
        remote = self._remote
        splits = (
            self._split_plan(plan) if config.reads_on == "executors" and remote is None else None
        )
        if config.checkpoint is not None:
            try:
                expected = fingerprint(
                    sql=config.sql if config.sql is not None else DEFAULT_SQL,
                    output_mode=config.output_mode,
                    inputs=[item.path for item in plan.files],
                    default_input=plan.description
                    if plan.table is not None or plan.label is not None or remote is not None
                    else None,
                    schema=str(plan.schema)
                    + ("" if plan.options == ConversionOptions() else f"\n{plan.options}"),
                    splits=None if splits is None else [split.path for split in splits],
                    tables=[(table.name, table.files) for table in self.tables],
                    sink=None if self.target is None else self.target.description,
                )
                check_fingerprint(config.checkpoint, expected)
            except OSError as exc:
                raise PipelineUsageError(
                    f"--checkpoint {config.checkpoint}: {exc.strerror or exc}"
                ) from None
        if remote is not None:
            self._read = RemoteRead(
                config
                if self._followed is None
                else dataclasses.replace(config, token=self._followed.token),
                plan,
                remote=remote[0],
                info=remote[1],
                progress=self._query_progress,
                notes=self.notes,
            )
        elif splits is not None:
            self._read = ExecutorsRead(config, plan, splits, self._query_progress, self.notes)
        else:
            self._read = DriverRead(config, plan, self._dead, self.notes)
        return plan

    @property
    def splits(self) -> tuple[FileSplit, ...] | None:
        """``--read-on executors``: the planned splits, in input order (after ``prepare``)."""
        return self._read.splits if isinstance(self._read, ExecutorsRead) else None

    @property
    def stream_columns(self) -> tuple[str, ...] | None:
        """The input columns sent to Spark on the executors (``None`` on the driver).

        Set once ``start`` planned them (the query's columns).
        """
        return self._read.stream_columns if isinstance(self._read, PartsRead) else None

    def _check_output_and_java(self) -> None:
        """The checks of ``prepare`` that need no input: output, checkpoint, Java."""
        config = self.config
        self._created.append(check_output_dir(config.output))
        if config.checkpoint is not None:
            self._created.append(check_output_dir(config.checkpoint))
        dead = config.dead_letter_path
        try:
            self._created.append(created_dirs(dead.parent))
            dead.unlink(missing_ok=True)  # a stale file from an earlier run would mislead
        except OSError as exc:
            raise PipelineUsageError(
                f"dead-letter file is not writable: {dead} ({exc.strerror or exc})"
            ) from None
        try:
            from reactive_streams.spark.session import require_java  # noqa: PLC0415
        except ImportError as exc:
            raise PipelineUsageError(str(exc)) from None
        try:
            require_java()
        except Exception as exc:  # JavaNotFoundError / JavaVersionError: advice inside
            raise PipelineUsageError(first_line(exc)) from None

    def describe_schema(self) -> list[tuple[str, str]]:
        """The input schema as ``(column, Spark type)`` pairs (after ``prepare``)."""
        assert self.plan is not None
        return describe_schema(self.plan.schema)

    # -- step 2 -------------------------------------------------------------------------

    def start(self, spark: SparkSession | None = None) -> None:
        """Start Spark (unless ``spark`` is given), the query and the stream.

        Raises:
            PipelineUsageError: the bridges are missing, ``--sql`` does not parse or is
                not a query (found before anything is read or run), a reference table does
                not load, or the query does not resolve against ``events`` or does not
                read it.
            PipelineFailedError: Spark could not start.
            PipelineInterruptedError: ``interrupt`` was called before the query started
                (checked between the steps and while Spark starts).
        """
        assert self.plan is not None, "prepare() first"
        self._started = self._started or time.monotonic()
        try:
            import reactive_streams.spark  # noqa: F401, PLC0415
        except ImportError as exc:
            raise PipelineUsageError(
                f"the Spark bridges are not available in this installation: {exc}"
            ) from None
        self._check_interrupted()
        if spark is None:
            starter = self._starter
            if starter is not None:
                # Interrupted meanwhile, the session goes on starting: close() stops it.
                spark, self._own_session = starter.get(check=self._check_interrupted)
                self._starter = None
            else:
                spark, self._own_session = self._new_session()
        self.spark = spark
        self._driver = DriverProcess.of_active_context()
        spark.conf.set("spark.sql.session.timeZone", "UTC")  # before parsing: literals
        if self.config.sql is not None:
            # Before anything is read, created or run: only a query goes on.
            check_query(
                spark,
                self.config.sql,
                views=[table.name for table in self.config.tables],
                allow_unsafe=self.config.allow_unsafe_sql,
            )
        self._check_interrupted()
        # Before events: the query's column analysis (--read-on executors) resolves them.
        self._table_frames = load_tables(spark, self.tables)
        assert self._read is not None
        events = self._read.events(spark)
        events.createOrReplaceTempView(EVENTS_VIEW)
        self._check_interrupted()
        self._start_query(spark)
        self.metrics.start()

    def _start_query(self, spark: SparkSession) -> None:
        """The query over ``events``, its mode, the sink and the subscription.

        The query is analysed once here (``query_dataframe``: parsed as a query, so no
        other statement can run) and then runs only as the stream.
        """
        from pyspark.errors import AnalysisException  # noqa: PLC0415

        from reactive_streams.spark import from_streaming_query  # noqa: PLC0415
        from reactive_streams.spark.plans import (  # noqa: PLC0415
            query_dataframe,
            result_arrow_schema,
        )

        assert self.plan is not None
        config = self.config
        try:
            result = query_dataframe(spark, DEFAULT_SQL if config.sql is None else config.sql)
        except AnalysisException as exc:  # ParseException is one too (check_query ran)
            raise PipelineUsageError(
                f"the query does not resolve over `{EVENTS_VIEW}`: {first_line(exc)}"
            ) from None
        if not result.isStreaming:
            raise PipelineUsageError(
                f"the query does not read the view `{EVENTS_VIEW}`, the input stream, so it "
                f"is not a streaming query: read FROM {EVENTS_VIEW}"
            )
        self.query = choose_mode(
            config.sql,
            requested=config.output_mode,
            keys=config.keys,
            aggregates=None if config.sql is None else aggregates(result),
            columns=self.plan.schema.names,
        )
        missing = [key for key in self.query.keys if key not in result.columns]
        if missing:
            raise PipelineUsageError(
                f"--key column(s) {', '.join(missing)} not in the query's result "
                f"(columns: {', '.join(result.columns)})"
            )
        self._check_partition_columns(result.columns)
        target = self.target
        if target is not None:  # the table checked, or created, before any micro-batch
            target.prepare(result_arrow_schema(result), mode=self.query.mode, keys=self.query.keys)
        journal = None if config.checkpoint is None or target else config.checkpoint / "sink"
        self._sink = ResultSink(
            config.output,
            config.fmt,
            mode=self.query.mode,
            keys=self.query.keys,
            journal=journal,
            partition_by=config.partition_by,
            before_commit=None if config.max_dead_letters is None else self._check_limit_at_end,
            commit_each_batch=self.live_input and target is None,
            target=target,
        )
        publisher = from_streaming_query(
            result,
            output_mode=self.query.mode,
            checkpoint_location=None
            if config.checkpoint is None
            else str(config.checkpoint / "query"),
            trigger=self._read.trigger if self._read is not None else None,
        )
        self._publisher = publisher
        self._phase = "running"
        publisher.subscribe(self._sink)

    def _check_partition_columns(self, columns: list[str]) -> None:
        """``--partition-by``: every column in the query's result, and not all of them.

        Raises:
            PipelineUsageError: a column is missing, or every column would be a partition.
        """
        partition_by = self.config.partition_by
        missing = [name for name in partition_by if name not in columns]
        if missing:
            raise PipelineUsageError(
                f"--partition-by column(s) {', '.join(missing)} not in the query's result "
                f"(columns: {', '.join(columns)})"
            )
        if partition_by and set(columns) <= set(partition_by):
            raise PipelineUsageError(
                "--partition-by takes every column of the query's result: the files would "
                "hold none; leave at least one column out"
            )

    def _new_session(self) -> tuple[SparkSession, bool]:
        """A ``local_session`` for this run, and whether this run started it.

        Raises:
            PipelineFailedError: Spark did not start.
        """
        from reactive_streams.spark.session import local_session  # noqa: PLC0415

        config = self.config
        existing = spark_is_running()
        try:
            spark = local_session(
                config.master,
                app_name="reactive-streams-pipeline",
                conf={
                    "spark.sql.session.timeZone": "UTC",
                    "spark.driver.extraJavaOptions": (
                        f"-Dlog4j2.configurationFile=file:{log4j_config(config.spark_log_level)}"
                    ),
                },
                log_level=config.spark_log_level,
                # The JVM's stderr (and its Python workers') goes to the file from its first
                # line; this process's stderr stays the terminal's, whatever thread writes.
                jvm_stderr=config.spark_output,
                # Ctrl-C or a SIGTERM sent to the whole process group reaches this process
                # only, which stops the query and then Spark (see cli._pipeline).
                own_process_group=True,
            )
        except Exception as exc:
            death = DriverProcess.of_active_context().death(grace=_DEATH_GRACE)
            raise PipelineFailedError(
                f"Spark did not start: {death or summarize_error(exc)}"
            ) from exc
        if config.spark_output is not None:
            quiet_accumulator_server()
            quiet_query_context_logs()
        return spark, not existing  # never stop a session we did not start

    # -- step 3 -------------------------------------------------------------------------

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the stream ended (``True``) or ``timeout`` seconds passed.

        While it waits, the query's progress is read every second: Spark keeps only the
        last 100 micro-batches' progress, and the counts of input and late rows are summed
        from it. Each time, ``--max-dead-letters`` is checked too: past it, the query is
        stopped through the sink (``abort``), which ends the wait with the run failed.
        """
        sink = self._sink
        assert sink is not None, "start() first"
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = _PROGRESS_POLL if deadline is None else deadline - time.monotonic()
            if sink.wait(max(0.0, min(left, _PROGRESS_POLL))):
                return True
            self._spark_peak_memory()
            death = self._driver.death()
            if death is not None:  # nothing in Spark can signal any more: end it here
                sink.abort(PipelineFailedError(death))
                return True
            query = self._query()
            if query is not None:
                self._query_progress.poll(query)
            message = self._dead_letter_limit_exceeded(final=False)
            if message is not None:  # stop the query: the run fails with the figures
                sink.abort(PipelineFailedError(message))
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def interrupt(self, signum: int = signal.SIGINT) -> None:
        """Ask the run to stop; safe in a signal handler (it only records ``signum``).

        Takes no lock and calls nothing (see the module docstring): ``start`` raises
        ``PipelineInterruptedError`` at its next step, and once the stream runs the thread
        that waits for it reads ``interrupt_signal`` and calls ``stop``. The first signal
        is kept.
        """
        if self._interrupt_signal is None:
            self._interrupt_signal = signum

    @property
    def interrupt_signal(self) -> int | None:
        """The signal ``interrupt`` recorded, or ``None``."""
        return self._interrupt_signal

    def _check_interrupted(self) -> None:
        """Raise ``PipelineInterruptedError`` if ``interrupt`` was called."""
        signum = self._interrupt_signal
        if signum is not None:
            raise PipelineInterruptedError(signum)

    def stop(self, signum: int | None = None) -> None:
        """Stop early: cancel the query through the sink, and the source.

        Args:
            signum: the signal that asked (the result's ``signal``; its exit status is
                ``128 + signum``); ``None``: ``interrupt_signal``, if any (else the
                result names no signal, and its exit status is 130, as for Ctrl-C).
        """
        self._stop_signal = signum if signum is not None else self._interrupt_signal
        self._stopped = True
        if self._sink is not None:
            if self.live_input:  # a stop is how it ends: keep what was read
                self._await_folded_progress(_FOLDED_PROGRESS_WAIT)
                self._sink.finish()
            else:
                self._sink.cancel()
        if self._read is not None:
            self._read.stop()

    def _await_folded_progress(self, timeout: float) -> None:
        """Wait until Spark reported every micro-batch the sink folded, ``timeout`` at most.

        The sink folds a micro-batch inside Spark's ``foreachBatch``; Spark commits it to
        the checkpoint and reports its progress (its input rows) just after. Stopping in
        between would leave rows in the result that the run's figures do not count, and
        a micro-batch the checkpoint does not have.
        """
        sink, query = self._sink, self._query()
        if sink is None or query is None:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._query_progress.poll(query)
            if self._query_progress.last_batch_id() >= sink.statistics().last_folded_id:
                return
            time.sleep(0.05)

    @property
    def live_input(self) -> bool:
        """Whether the input never ends on its own (a live route): it runs until stopped.

        Such a run commits its result after every micro-batch (``update`` and ``complete``
        results; an ``append`` one with ``--checkpoint``), and a stop ends it as completed,
        with the result of what it read.
        """
        return self._read is not None and self._read.live

    def progress(self) -> PipelineProgress:
        """A snapshot of the counters: the run's, and its read mode's (``ReadCounts``)."""
        sink = self._sink.statistics() if self._sink is not None else None
        query = self._query()
        if query is not None:
            self._query_progress.poll(query)
        processed, late = self._query_progress.totals()
        read = self._read
        late_counter = read.late if read is not None else None
        if late_counter is not None:
            late = late_counter.count(self._query_progress.ranges())
        counts = (
            read.counts(processed, done_at=self._source_done_at, started=self._started)
            if read is not None
            else ReadCounts(
                records_read=0, records_emitted=0, dead_letters=0, source_demand=0, reading=0.0
            )
        )
        return PipelineProgress(
            phase=self._phase,
            elapsed=time.monotonic() - self._started if self._started else 0.0,
            records_read=counts.records_read,
            records_emitted=counts.records_emitted,
            records_processed=processed,
            dead_letters=counts.dead_letters,
            batches=sink.batches - sink.journaled if sink is not None else 0,
            source_demand=counts.source_demand,
            sink_demand=(sink.stream.requested - sink.stream.delivered if sink is not None else 0),
            groups=sink.groups if sink is not None else 0,
            output_mode=self.query.mode if self.query is not None else "update",
            late_rows=late,
            total_rows=(
                self.plan.total_rows
                if self.plan is not None and self.plan.total_rows is not None
                else counts.total_records
            ),
            bridge_held=counts.bridge_held,
            bridge_bound=counts.bridge_bound,
            reading=counts.reading,
            split_shares=counts.split_shares,
            splits=counts.splits,
            bottleneck=self.metrics.bottleneck(),
            resumed=read is not None and read.resumed,
            records_skipped=counts.records_skipped,
            producer=counts.producer,
            producer_reconnects=counts.producer_reconnects,
            bytes_read=counts.bytes_read,
            total_bytes=counts.total_bytes,
            batches_before=sink.journaled if sink is not None else 0,
            dead_letters_before=counts.dead_letters_before,
            late_rows_of_input=late_counter is not None,
        )

    def _dead_letter_limit_exceeded(self, *, final: bool) -> str | None:
        """``--max-dead-letters``: why the run has too many dead letters, else ``None``.

        Checked by ``wait`` every poll while the run goes (``final=False``) and by the
        sink before it writes the result (``final=True``). The first message found is
        kept (``_limit_error``) and returned again.

        While the run goes the figures may lag: on the driver, a chunk's dead letters are
        counted a moment before its records; on the executors, the running micro-batch's
        dead letters are in the part files before its valid records are in Spark's
        progress. So a fraction is checked against the most records that can have been
        read: on the driver, one chunk more; on the executors, one micro-batch more
        (``--max-records-per-trigger``), or the whole input when its size is known (a
        Parquet micro-batch may exceed its budget by part of a row group). On the
        executors the part files' lines may count a retried task's dead letters twice, so
        a limit they exceed is confirmed by merging them (each dead letter once) first.
        """
        limit = self.config.max_dead_letters
        if limit is None:
            return None
        with self._limit_lock:
            if self._limit_error is not None:
                return self._limit_error
        message = self._limit_message(limit, final=final)
        if message is None:
            return None
        with self._limit_lock:
            if self._limit_error is None:
                self._limit_error = message
            return self._limit_error

    def _limit_message(self, limit: DeadLetterLimit, *, final: bool) -> str | None:
        if self._read is None:
            return None
        processed, _ = self._query_progress.totals()
        return self._read.limit_message(limit, processed, final=final)

    def _check_limit_at_end(self) -> None:
        """The sink's ``before_commit``: the final figures against ``--max-dead-letters``.

        Raises:
            PipelineFailedError: too many dead letters (the result is not written).
        """
        if self._read is not None:  # the executors' parts, each dead letter once
            self.notes.extend(self._read.finish())
        query = self._query()
        if query is not None:
            self._query_progress.poll(query)
        message = self._dead_letter_limit_exceeded(final=True)
        if message is not None:
            raise PipelineFailedError(message)

    def _spark_peak_memory(self) -> int | None:
        """The driver JVM's peak memory, sampled while it ran (it is gone once it died)."""
        now = self._driver.peak_memory()
        if now is not None:
            self._jvm_peak = max(self._jvm_peak or 0, now)
        return self._jvm_peak

    @property
    def reads_on_executors(self) -> bool:
        """``--read-on executors``: the input is read on Spark's executors (``MeteredRun``)."""
        return self.config.reads_on == "executors"

    def stage_streams(self, *, last_progress: bool = False) -> StageStreams:
        """What each stage reports now, for the metrics (``MeteredRun``).

        ``last_progress``: read Spark's last progress too (a call into the JVM that
        parses its JSON; each period's snapshot needs it, not each sample).

        Raises:
            Exception: reading Spark's status failed (the JVM died, the session stopped).
        """
        sink = self._sink.statistics() if self._sink is not None else None
        query = self._query()
        source, bridge = self._read.streams() if self._read is not None else (None, None)
        return StageStreams(
            source=source,
            bridge=bridge,
            sink=None if sink is None else sink.stream,
            sink_rows=0 if sink is None else sink.rows_received,
            sink_done=self._sink is not None and self._sink.wait(0),
            query_status={} if query is None else query.status,
            last_progress=None if query is None or not last_progress else query.lastProgress,
        )

    def _query(self) -> Any:
        """The running (or ended) ``StreamingQuery``, once ``from_streaming_query`` has one."""
        publisher = self._publisher
        if publisher is None or not publisher.subscriptions:
            return None
        return getattr(publisher.subscriptions[-1], "query", None)

    def finish(self) -> PipelineResult:
        """Close everything and say how the run ended (after ``wait`` returned ``True``)."""
        sink = self._sink
        self._phase = "finishing"
        if self._read is not None:
            self._read.stop()
        self._dead.close()
        if self._limit_error is not None and self._publisher is not None:
            # Stopped for its dead letters: the executors' tasks stop writing parts first.
            for subscription in self._publisher.subscriptions:
                subscription.wait_stopped(_STOP_WAIT)
        query = self._query()
        if query is not None:  # the last micro-batch's range, for the read's finish
            self._query_progress.poll(query)
        if self._read is not None:
            self.notes.extend(self._read.finish())
        wall = time.monotonic() - self._started if self._started else 0.0
        self._source_done_at = time.monotonic()
        self._phase = "done"
        progress = self.progress()
        dead_path = (
            self.config.dead_letter_path
            if self._read is not None and self._read.dead_letters()
            else None
        )
        if self.target is not None and self.target.retries:
            self.notes.append(
                f"{self.target.retries} write(s) to the sink tried again after a lost connection"
            )
        if sink is not None and sink.completed:
            table = sink.result
            keys = self.query.keys if self.query is not None else ()
            if self._stopped and self._stop_signal is not None:
                self.notes.append(
                    f"stopped by {signal_name(self._stop_signal)}: a live input ends when stopped"
                )
            return PipelineResult(
                live_input=self.live_input,
                status="completed",
                progress=progress,
                wall_time=wall,
                peak_memory=peak_memory_bytes(),
                spark_peak_memory=self._spark_peak_memory(),
                output_path=sink.result_path,
                sink=None if self.target is None else self.target.description,
                dead_letter_path=dead_path,
                result=table,
                top=top_rows(table, keys) if table is not None else [],
                notes=tuple(self.notes),
                column_changes=self._column_changes,
                # A live input ends when stopped: completed, and the signal that stopped it.
                signal=self._stop_signal if self._stopped else None,
            )
        error = sink.error if sink is not None else None
        status: Status = "interrupted" if self._stopped and error is None else "failed"
        stop_signal = self._stop_signal if status == "interrupted" else None
        if stop_signal is not None:
            self.notes.append(f"stopped by {signal_name(stop_signal)}")
        # Name the cause, not Spark's wrapper of it: a dead driver JVM fails every py4j
        # call, and a source that failed makes Spark's data source fail.
        cause = self._limit_error  # --max-dead-letters: the figures say it all
        if cause is None and error is not None:
            cause = self._driver.death(grace=_DEATH_GRACE)
        if cause is None and error is not None and self._read is not None:
            cause = self._read.source_failure(error)
        # Spark refusing the query as a stream (an AnalysisException when it starts, before
        # any batch) is a problem with the query, not a failure of the run.
        rejected = (
            error is not None
            and progress.batches == 0
            and any(type(cause).__name__ == "AnalysisException" for cause in causes(error))
        )
        # Spark's output is worth keeping when the run failed (not for a query refused:
        # the one line says it all), and the command keeps it then.
        output = self.config.spark_output
        worth_keeping = status == "failed" and not rejected
        if not worth_keeping or output is None or not output.is_file() or not output.stat().st_size:
            output = None
        return PipelineResult(
            rejected=rejected,
            status=status,
            progress=progress,
            wall_time=wall,
            peak_memory=peak_memory_bytes(),
            spark_peak_memory=self._spark_peak_memory(),
            output_path=None,
            dead_letter_path=dead_path,
            result=None,
            error=cause or ("" if error is None else summarize_error(error)),
            exception=error,
            notes=tuple(self.notes),
            signal=stop_signal,
            spark_output=output,
            column_changes=self._column_changes,
        )

    def close(self) -> None:
        """Stop the source and, if ``start`` created it, the Spark session. Idempotent.

        The directories ``prepare`` created (output, checkpoint, the dead-letter file's)
        are removed again when the run wrote nothing in them (a run that failed).
        """
        try:
            self._close()
        finally:
            created, self._created = self._created, []
            for top in created:
                if top is not None:
                    remove_if_empty(top)

    def _close(self) -> None:
        self.metrics.close()
        if self._read is not None:
            self._read.close()
        followed, self._followed = self._followed, None
        if followed is not None:
            followed.close()
        self._dead.close()
        if self.target is not None:
            self.target.close()
        spark, self.spark = self.spark, None
        starter, self._starter = self._starter, None
        if starter is not None:  # prepared with start_spark, never started: stop it
            spark, self._own_session = starter.get_quietly()
        if self._driver.death() is not None:  # no JVM to stop anything in
            if spark is not None and self._own_session:
                _forget_dead_session(spark)
            return
        if self._publisher is not None:
            for subscription in self._publisher.subscriptions:
                subscription.wait_stopped(_STOP_WAIT)
        self._release_tables(spark)
        if spark is not None and self._own_session:
            for query in spark.streams.active:
                query.stop()
            spark.stop()

    def _release_tables(self, spark: SparkSession | None) -> None:
        """Drop the reference tables' views and cached rows (a shared session lives on)."""
        frames, self._table_frames = self._table_frames, []
        if spark is None:
            return
        with contextlib.suppress(Exception):  # a session already stopped: nothing to free
            for frame in frames:
                frame.unpersist()
            for table in self.tables:
                spark.catalog.dropTempView(table.name)

    @property
    def output_path(self) -> Path | str:
        """Where the result goes: a file, ``result/`` when partitioned, or the ``--sink``.

        The sink is named by its URL without password.
        """
        config = self.config
        if self.target is not None:
            return self.target.description
        return result_path(config.output, config.fmt, partitioned=bool(config.partition_by))
