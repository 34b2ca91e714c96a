"""``reactive-streams serve``: files served as a partitioned, replayable RSocket route.

The files are planned once (the same checks, schema inference and ``--schema`` as
``reactive-streams pipeline``), cut into ``--partitions`` contiguous ranges of records
(``reactive_streams.files.FilePartitions``), and served as the partitioned route
``--route`` (``reactive_streams.rsocket.partitioned_routes``) until SIGINT or SIGTERM.

Exit status: 0 stopped by SIGINT or SIGTERM (after closing the server), 2 bad input or
options, or the address cannot be bound (one line, no traceback unless ``--debug``).
"""

# ruff: noqa: PLC0415

from __future__ import annotations

import signal
import sys
import threading
import time
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
from ._token_options import resolve_token, token_options, warn_token_in_argv

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]


__all__ = ["serve"]

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_CLOSE_TIMEOUT = 5.0
_POLL = 0.2


def _fail(message: str, error: BaseException | None, *, debug: bool) -> NoReturn:
    if debug and error is not None:
        traceback.print_exception(error, file=sys.stderr)
    click.echo(f"Error: {message}", err=True)
    sys.exit(2)


def _describe(schema: pa.Schema) -> str:
    return ", ".join(f"{field.name} {field.type}" for field in schema)


@click.command("serve")
@click.option(
    "--input",
    "inputs",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path),
    help="CSV, JSON Lines or Parquet file, or a directory of them (repeatable), read in order.",
)
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    required=True,
    help="Port to listen on (0: a free port, shown in the 'serving' line).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--transport",
    type=click.Choice(["tcp", "ws"]),
    default="tcp",
    show_default=True,
    help="tcp: RSocket over TCP (clients connect to tcp://HOST:PORT); ws: RSocket over "
    "WebSocket, any path (ws://HOST:PORT; needs the rsocket-ws extra).",
)
@click.option(
    "--route",
    default="events",
    show_default=True,
    help="The route's name (also NAME.meta, NAME.offsets and NAME.commit).",
)
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Contiguous ranges of records, of nearly equal size, that readers read in "
    "parallel. Give the same value on a restart so that offsets mean the same records.",
)
@token_options("Require this bearer token from clients.")
@click.option(
    "--batch-rows",
    type=click.IntRange(min=1),
    default=4096,
    show_default=True,
    help="Records per batch (one PAYLOAD frame) at most.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=None,
    help="Client connections served at once.  [default: 1024]",
)
@click.option(
    "--max-streams",
    type=click.IntRange(min=1),
    default=None,
    help="Streams open at once on one connection.  [default: 128]",
)
@follow_options(
    "Keep serving: files that land later in the --input directories are appended to the "
    "partitions (a live route: readers wait at the end instead of completing)."
)
@file_options
@click.option("--debug", is_flag=True, help="Tracebacks on errors.")
def serve(
    *,
    inputs: tuple[Path, ...],
    port: int,
    host: str,
    transport: str,
    route: str,
    partitions: int,
    token: str | None,
    token_file: Path | None,
    batch_rows: int,
    schema: str | None,
    encoding: str,
    delimiter: str | None,
    quote: str,
    null_values: tuple[str, ...],
    timestamp_format: str | None,
    follow_symlinks: bool,
    max_connections: int | None,
    max_streams: int | None,
    follow: bool,
    poll_interval: float,
    debug: bool,
) -> None:
    """Serve files as a partitioned, replayable RSocket route, read only on demand.

    The records of the files (CSV, JSON Lines, Parquet; in order, file by file) are cut
    into --partitions contiguous ranges; a reader asks for a partition from any position
    and gets Arrow record batches, read from the files only as fast as it requests them.
    Records that do not fit the schema are sent too, with their dead letter in the
    _dead_letter column.

    Guarantee: replayable. A position always means the same record, across any restart
    of the reader or of this server (same files, same --partitions), so a reader that
    checkpoints its offsets reads every record exactly once. The files must not change
    while served (a changed or missing file ends the stream that reads it with an error
    naming it). With --follow, files that land later are appended, in the order they are
    found; a restarted server appends the files found at its start in listing order, so
    offsets stay exact across its restarts only if the files sort in arrival order (name
    them by time, e.g. events-20261126T1700.csv).

    Prints one line, 'serving ROUTE (...) on tcp://HOST:PORT' (ws://HOST:PORT with
    --transport ws), on stderr, then serves
    until Ctrl-C or SIGTERM. Exit status: 0 after a stop signal, 2 bad input or options.
    """
    try:
        from ..files import ConversionOptions, FileFollower, FormatError
        from ..pipeline import PipelineUsageError, plan_file_partitions, schema_from_ddl
        from ..rsocket import ServerLimits, check_route_name, partitioned_routes
        from ..rsocket import serve as serve_routes
    except ModuleNotFoundError as exc:  # pyarrow: the spark extra
        _fail(
            f"reactive-streams serve needs the pipeline extra (no module named {exc.name!r}): "
            "pip install 'reactive-streams-py[pipeline]'",
            exc,
            debug=debug,
        )
    import pyarrow as pa

    given = None
    try:
        if schema is not None:
            given = schema_from_ddl(schema)
    except ValueError as exc:
        _fail(f"--schema: {exc}", exc, debug=debug)
    try:
        options = ConversionOptions(
            null_values=frozenset(part.strip() for part in null_value_list(null_values)),
            timestamp_format=timestamp_format,
        )
    except ValueError as exc:
        _fail(f"--timestamp-format: {exc}", exc, debug=debug)
    try:
        check_route_name(route)
    except ValueError as exc:
        _fail(f"--route: {exc}", exc, debug=debug)
    try:
        token = resolve_token(token, token_file)
    except ValueError as exc:
        _fail(str(exc), exc, debug=debug)
    try:
        limits = ServerLimits(
            **{
                name: value
                for name, value in (
                    ("max_connections", max_connections),
                    ("max_streams", max_streams),
                )
                if value is not None
            }
        )
        source, listed, files = plan_file_partitions(
            inputs,
            encoding=encoding,
            delimiter=character(delimiter),
            quote=quote_character(quote),
            follow_symlinks=follow_symlinks,
            schema=given,
            options=options,
            partitions=partitions,
            batch_rows=batch_rows,
            follow=follow,
        )
    except (PipelineUsageError, FormatError, ValueError) as exc:
        _fail(str(exc), exc, debug=debug)
    except (OSError, pa.ArrowException) as exc:
        _fail(f"cannot plan the input: {getattr(exc, 'strerror', None) or exc}", exc, debug=debug)

    warn_token_in_argv()
    # A stop signal only records itself (a handler that took a lock could deadlock the
    # thread it interrupts); the loop below sees it within _POLL seconds.
    stopped: list[int] = []
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {
            signum: signal.signal(signum, lambda signum, _frame: stopped.append(signum))
            for signum in _STOP_SIGNALS
        }
    try:
        try:
            server = serve_routes(
                partitioned_routes(route, source),
                host,
                port,
                token=token,
                limits=limits,
                transport=transport,
            )
        except ImportError as exc:  # aiohttp: the rsocket-ws extra
            _fail(f"--transport ws: {exc}", exc, debug=debug)
        except OSError as exc:
            _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", exc, debug=debug)
        follower = None
        if follow:
            follower = FileFollower(
                source,
                listed,
                interval=poll_interval,
                known=[item.path for item in files],
            ).start()
        try:
            click.echo(
                f"serving {route} ({source.partitions} partitions, {source.records:,} "
                f"records{', following the input' if follow else ''}, schema "
                f"{_describe(source.schema)}) on {transport}://{host}:{server.port}",
                err=True,
            )
            while not stopped:
                time.sleep(_POLL)
        finally:
            if follower is not None:
                follower.stop()
            server.close(_CLOSE_TIMEOUT)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    click.echo(f"stopped serving {route}", err=True)
