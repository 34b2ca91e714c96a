"""``--sink postgresql://...``: the result in a PostgreSQL table, each micro-batch exactly once.

The URL is libpq's (``postgresql://user[:password]@host[:port]/database``) with one more
parameter, ``table=[schema.]name``; the others (``sslmode=...``) go to libpq as they are.
A password left out of the URL comes from ``PGPASSWORD`` or ``~/.pgpass``, as libpq reads
them. Driver: psycopg 3 (the ``postgresql`` extra), imported only when such a sink is used.

Each micro-batch is one transaction:

1. the stream's row of the progress table ``reactive_streams_progress`` (in the target's
   schema: ``stream_id``, ``target`` (the table's name), ``batch_id``, ``committed_at``;
   keyed by the first two) is read and locked;
   a batch id at or below the one recorded there is a replay, and nothing is written;
2. the rows are sent with ``COPY ... FROM STDIN (FORMAT csv)`` (Arrow's CSV writer makes
   the text; no row goes through Python):
   * ``append``: straight into the table;
   * ``update``: into a temporary table, then ``INSERT ... SELECT ... ON CONFLICT (keys)
     DO UPDATE`` into the table (one row per key; the key columns need a unique index,
     which a table created here has, with ``NULLS NOT DISTINCT`` as Spark groups nulls);
   * ``complete``: the table's rows are deleted, then the new ones copied in (readers see
     the old contents until the commit, never an empty or half-filled table);
3. the batch id is recorded in the progress row, and the transaction commits.

So the table and the progress row always agree: a restart from ``--checkpoint`` that
replays a micro-batch writes nothing twice and misses nothing. A lost connection (the
server restarted) is retried with ``Backoff`` for ``retry_for`` seconds: the transaction
either committed (the progress row says so, the retry skips it) or did not (it is sent
again).
"""

from __future__ import annotations

import io
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.csv as pa_csv  # type: ignore[import-untyped,unused-ignore]

from .._core import Backoff
from ._errors import PipelineFailedError, PipelineUsageError
from ._sink import latest_per_key

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._target import OutputMode

__all__ = ["PROGRESS_TABLE", "PostgresTarget", "postgres_type"]

PROGRESS_TABLE = "reactive_streams_progress"
"""The table, in the target table's schema, that records each stream's last batch id."""

CONNECT_TIMEOUT = 10
"""Seconds a connection attempt may take (libpq's ``connect_timeout``)."""

_RIGHTS = {"append": "INSERT", "update": "INSERT,UPDATE", "complete": "INSERT,DELETE"}
"""The rights on an existing table each output mode needs."""

_log = logging.getLogger("reactive_streams.pipeline.sink")


def postgres_type(arrow_type: pa.DataType) -> str | None:
    """The PostgreSQL column type an Arrow type is stored as; ``None``: not supported.

    Integers, floats, booleans, strings, decimals, dates and timestamps (``timestamp
    with time zone`` when the Arrow type has a time zone) are; nested and binary types are
    not (the CSV that ``COPY`` reads cannot carry them).
    """
    simple = {
        pa.int8(): "smallint",
        pa.int16(): "smallint",
        pa.int32(): "integer",
        pa.int64(): "bigint",
        pa.uint8(): "smallint",
        pa.uint16(): "integer",
        pa.uint32(): "bigint",
        pa.float32(): "real",
        pa.float64(): "double precision",
        pa.bool_(): "boolean",
        pa.string(): "text",
        pa.large_string(): "text",
        pa.date32(): "date",
    }
    if arrow_type in simple:
        return simple[arrow_type]
    if pa.types.is_timestamp(arrow_type):
        zoned = arrow_type.tz is not None
        return "timestamp with time zone" if zoned else "timestamp without time zone"
    if pa.types.is_decimal(arrow_type):
        return f"numeric({arrow_type.precision},{arrow_type.scale})"
    return None


def _same_type(found: str, expected: str) -> bool:
    """Whether an existing column of type ``found`` takes values of type ``expected``."""
    if found == expected:
        return True
    return expected == "text" and found.startswith("character varying")


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else type(error).__name__
    return text.removeprefix("connection failed: ")


def _psycopg() -> Any:
    """psycopg, or a one-line ``PipelineUsageError`` naming the extra to install."""
    try:
        import psycopg  # noqa: PLC0415
    except ImportError:
        raise PipelineUsageError(
            "--sink postgresql:// needs psycopg: pip install 'reactive-streams-py[postgresql]'"
        ) from None
    return psycopg


class PostgresTarget:
    """A PostgreSQL table as the result (see the module docstring).

    Args:
        conninfo: libpq's connection URI, without ``table``.
        schema: the table's schema; ``None``: the connection's ``current_schema()``.
        table: the table's name.
        shown: the URL as messages show it (no password).
        stream: the stream's id in the progress table (``stream_id``).
        retry_for: seconds to keep trying again after a lost connection.
    """

    def __init__(
        self,
        *,
        conninfo: str,
        schema: str | None,
        table: str,
        shown: str,
        stream: str,
        retry_for: float,
    ) -> None:
        self._conninfo = conninfo
        self._schema = schema
        self._table = table
        self._shown = shown
        self._stream = stream
        self._backoff = Backoff(
            min_backoff=0.2, max_backoff=5.0, jitter=0.5, deadline=max(retry_for, 0.2)
        )
        self._mode: OutputMode = "append"
        self._keys: tuple[str, ...] = ()
        self._columns: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._connection: Any = None
        self._retries = 0
        self._psycopg = _psycopg()

    @classmethod
    def from_url(cls, url: str, *, stream: str, retry_for: float) -> PostgresTarget:
        """Read ``postgresql://user[:password]@host[:port]/db?table=[schema.]name``.

        Raises:
            PipelineUsageError: no ``table``, or no database in the URL.
        """
        parts = urlsplit(url)
        shown_netloc = parts.netloc
        if parts.password is not None:
            user = parts.username or ""
            host = shown_netloc.rsplit("@", 1)[1]
            shown_netloc = f"{user}:***@{host}"
        query = parse_qsl(parts.query, keep_blank_values=True)
        tables = [value for name, value in query if name == "table"]
        others = [(name, value) for name, value in query if name != "table"]
        hidden = [(name, "***" if name == "password" else value) for name, value in query]
        shown_query = "&".join(f"{name}={value}" for name, value in hidden)
        shown = urlunsplit((parts.scheme, shown_netloc, parts.path, shown_query, ""))
        if len(tables) != 1 or not tables[0].strip():
            raise PipelineUsageError(
                f"--sink {shown}: name the table, as in postgresql://USER@HOST/DB?table=NAME"
            )
        if not unquote(parts.path).strip("/"):
            raise PipelineUsageError(
                f"--sink {shown}: name the database, as in postgresql://USER@HOST/DB?table=NAME"
            )
        schema, _, name = tables[0].strip().rpartition(".")
        conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(others), ""))
        return cls(
            conninfo=conninfo,
            schema=schema or None,
            table=name,
            shown=shown,
            stream=stream,
            retry_for=retry_for,
        )

    # -- SinkTarget ---------------------------------------------------------------------

    @property
    def description(self) -> str:
        """The URL without its password."""
        return self._shown

    @property
    def retries(self) -> int:
        """Writes tried again after a lost connection, so far."""
        return self._retries

    def check(
        self, *, mode: OutputMode, keys: Sequence[str], columns: Sequence[str] | None
    ) -> None:
        """Connect, and refuse what cannot work, in one line (see ``SinkTarget.check``).

        Refused: a server that cannot be reached, a wrong password, a database that does
        not exist, missing rights (to create the tables, or to insert, update or delete in
        an existing one, as the mode needs), an existing table whose column names differ
        from ``columns`` (when known).

        Raises:
            PipelineUsageError: any of those.
        """
        self._mode = mode
        self._keys = tuple(keys)
        connection = self._connect_or_refuse()
        sql = self._psycopg.sql
        with connection.cursor() as cursor:
            if self._schema is None:
                self._schema = cursor.execute("SELECT current_schema()").fetchone()[0]
                if self._schema is None:
                    self._refuse("the connection has no current schema; use table=SCHEMA.NAME")
            exists = cursor.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname = %s", (self._schema,)
            ).fetchone()
            if exists is None:
                self._refuse(f'schema "{self._schema}" does not exist')
            progress = self._oid(cursor, PROGRESS_TABLE)
            if progress is None:
                self._require_create(cursor)
                try:
                    cursor.execute(
                        sql.SQL(
                            "CREATE TABLE IF NOT EXISTS {} (stream_id text NOT NULL, "
                            "target text NOT NULL, batch_id bigint NOT NULL, "
                            "committed_at timestamp with time zone NOT NULL DEFAULT now(), "
                            "PRIMARY KEY (stream_id, target))"
                        ).format(self._name(PROGRESS_TABLE))
                    )
                except self._psycopg.Error as exc:
                    self._refuse(f"cannot create {PROGRESS_TABLE}: {_first_line(exc)}")
            else:
                self._require_rights(cursor, progress, PROGRESS_TABLE, "SELECT,INSERT,UPDATE")
            table = self._oid(cursor, self._table)
            if table is None:
                self._require_create(cursor)
            else:
                self._require_rights(cursor, table, self._table, _RIGHTS[mode])
                if columns is not None:
                    found = self._found_columns(cursor, table)
                    if list(found) != list(columns) and set(found) != set(columns):
                        self._refuse(
                            f'table "{self._table}" exists with other columns '
                            f"({', '.join(found)}); the result has ({', '.join(columns)}): "
                            "drop it, or choose another table="
                        )

    def prepare(self, schema: pa.Schema, *, mode: OutputMode, keys: Sequence[str]) -> None:
        """Check the existing table against ``schema``, or create it (with its unique key).

        ``mode`` and ``keys`` are the query's as Spark analysed it (``check`` may have
        been given a guess); an existing table's rights are checked again for them.

        Raises:
            PipelineUsageError: the table's columns, key or rights do not fit, or it
                cannot be created.
        """
        self._mode = mode
        self._keys = tuple(keys)
        connection = self._connect_or_refuse()
        sql = self._psycopg.sql
        columns = self._expected(schema)
        self._columns = tuple(name for name, _ in columns)
        with connection.cursor() as cursor:
            table = self._oid(cursor, self._table)
            if table is not None:
                self._require_rights(cursor, table, self._table, _RIGHTS[mode])
                self._check_columns(cursor, table, schema)
                return
            definition = sql.SQL(", ").join(
                sql.SQL("{} {}").format(sql.Identifier(name), sql.SQL(kind))
                for name, kind in columns
            )
            try:
                with connection.transaction():
                    cursor.execute(
                        sql.SQL("CREATE TABLE {} ({})").format(self._name(self._table), definition)
                    )
                    if self._mode == "update":
                        distinct = (
                            " NULLS NOT DISTINCT"
                            if connection.info.server_version >= 150000
                            else ""
                        )
                        cursor.execute(
                            sql.SQL("CREATE UNIQUE INDEX {} ON {} ({})" + distinct).format(
                                sql.Identifier(f"{self._table}_key"),
                                self._name(self._table),
                                sql.SQL(", ").join(map(sql.Identifier, self._keys)),
                            )
                        )
            except self._psycopg.Error as exc:
                self._refuse(f"cannot create the table: {_first_line(exc)}")

    def write(self, batch_id: int, table: pa.Table) -> bool:
        """Write one micro-batch and its id in one transaction (see the module docstring).

        A lost connection is retried with ``Backoff`` within ``retry_for`` seconds; a
        ``close`` meanwhile ends the wait.

        Returns:
            ``False`` for a replay (the batch id was committed before): nothing written.

        Raises:
            PipelineFailedError: the connection did not come back in time, or ``close``
                was called meanwhile.
            psycopg.Error: the server refused the write (not retried).
        """
        if not self._columns:  # not prepared: the table's columns as they come
            self._columns = tuple(table.schema.names)
        if self._mode == "update" and table.num_rows:
            table = latest_per_key(None, table, self._keys)  # one row per key (ON CONFLICT)
        payload = self._csv(table)
        attempt = 0
        first_failure: float | None = None
        while True:
            if self._closed.is_set():
                raise PipelineFailedError(f"{self._shown}: the sink was closed")
            try:
                return self._write_once(batch_id, payload)
            except self._psycopg.OperationalError as exc:
                self._drop_connection()
                now = time.monotonic()
                first_failure = now if first_failure is None else first_failure
                delay = self._backoff.delay(attempt)
                if not self._backoff.allows(attempt, now - first_failure, delay):
                    raise PipelineFailedError(
                        f"{self._shown}: the connection was lost and did not come back within "
                        f"{self._backoff.describe()}: {_first_line(exc)}"
                    ) from exc
                _log.warning(
                    "%s: micro-batch %d: %s; trying again in %.1f s",
                    self._shown, batch_id, _first_line(exc), delay,
                )  # fmt: skip
                self._retries += 1
                attempt += 1
                if self._closed.wait(delay):
                    raise PipelineFailedError(f"{self._shown}: the sink was closed") from exc

    def close(self) -> None:
        """Close the connection; a write waiting to retry gives up. Idempotent."""
        self._closed.set()
        self._drop_connection()

    # -- internals ----------------------------------------------------------------------

    def _name(self, table: str) -> Any:
        sql = self._psycopg.sql
        return sql.Identifier(self._schema, table) if self._schema else sql.Identifier(table)

    def _connect(self) -> Any:
        with self._lock:
            connection = self._connection
        if connection is not None and not connection.closed:
            return connection
        connection = self._psycopg.connect(
            self._conninfo,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT,
            application_name="reactive-streams pipeline",
        )
        with self._lock:
            self._connection = connection
        return connection

    def _connect_or_refuse(self) -> Any:
        try:
            return self._connect()
        except self._psycopg.Error as exc:
            self._refuse(f"cannot connect: {_first_line(exc)}")

    def _drop_connection(self) -> None:
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception as exc:  # a broken connection may fail to close; it is gone
                _log.debug("closing a lost connection: %s", exc)

    def _refuse(self, why: str) -> NoReturn:
        raise PipelineUsageError(f"--sink {self._shown}: {why}")

    def _oid(self, cursor: Any, table: str) -> int | None:
        qualified = self._name(table).as_string(cursor.connection)
        row = cursor.execute("SELECT to_regclass(%s)::oid", (qualified,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def _require_create(self, cursor: Any) -> None:
        row = cursor.execute(
            "SELECT has_schema_privilege(%s, 'CREATE')", (self._schema,)
        ).fetchone()
        if not row[0]:
            self._refuse(
                f'no permission to create tables in schema "{self._schema}" (GRANT CREATE ON '
                f"SCHEMA {self._schema}, or create the table beforehand)"
            )

    def _require_rights(self, cursor: Any, oid: int, name: str, rights: str) -> None:
        missing = [
            right
            for right in rights.split(",")
            if not cursor.execute("SELECT has_table_privilege(%s, %s)", (oid, right)).fetchone()[0]
        ]
        if missing:
            self._refuse(f'no {", ".join(missing)} permission on table "{name}"')

    def _expected(self, schema: pa.Schema) -> list[tuple[str, str]]:
        columns: list[tuple[str, str]] = []
        for field in schema:
            kind = postgres_type(field.type)
            if kind is None:
                self._refuse(
                    f"the result's column {field.name} is {field.type}, which this sink does "
                    "not store; cast it in --sql (to a string, say)"
                )
            columns.append((field.name, kind))
        return columns

    def _found_columns(self, cursor: Any, oid: int) -> dict[str, str]:
        """An existing table's columns and their types, in order."""
        rows = cursor.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (oid,),
        ).fetchall()
        return dict(rows)

    def _check_columns(self, cursor: Any, oid: int, schema: pa.Schema) -> None:
        """Refuse a table without the result's columns and types, or without a key.

        In update mode the key is a unique index on exactly the key columns.
        """
        expected = dict(self._expected(schema))
        found = self._found_columns(cursor, oid)
        fits = found.keys() == expected.keys() and all(
            _same_type(found[name], kind) for name, kind in expected.items()
        )
        if not fits:
            has = ", ".join(f"{name} {kind}" for name, kind in found.items())
            wants = ", ".join(f"{name} {kind}" for name, kind in expected.items())
            self._refuse(
                f'table "{self._table}" exists with other columns ({has}); the result has '
                f"({wants}): drop it, or choose another table="
            )
        if self._mode != "update":
            return
        unique = cursor.execute(
            "SELECT 1 FROM pg_index i WHERE i.indrelid = %s AND i.indisunique "
            "AND i.indpred IS NULL AND i.indexprs IS NULL AND (SELECT array_agg(a.attname::text "
            "ORDER BY a.attname) FROM pg_attribute a WHERE a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey)) = %s::text[]",
            (oid, sorted(self._keys)),
        ).fetchone()
        if unique is None:
            keys = ", ".join(self._keys)
            self._refuse(
                f'table "{self._table}" has no unique index on the key ({keys}), which update '
                f"mode upserts on: CREATE UNIQUE INDEX ON {self._table} ({keys})"
            )

    def _csv(self, table: pa.Table) -> bytes:
        """``table``'s rows as the CSV ``COPY`` reads: nulls unquoted and empty, values quoted."""
        if self._columns:
            table = table.select(list(self._columns))
        out = io.BytesIO()
        if table.num_rows:
            options = pa_csv.WriteOptions(include_header=False, quoting_style="all_valid")
            pa_csv.write_csv(table, out, options)
        return out.getvalue()

    def _copy(self, cursor: Any, into: Any, payload: bytes) -> None:
        sql = self._psycopg.sql
        statement = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(
            into, sql.SQL(", ").join(map(sql.Identifier, self._columns))
        )
        with cursor.copy(statement) as copy:
            view = memoryview(payload)
            for start in range(0, len(payload), 1 << 20):
                copy.write(view[start : start + (1 << 20)])

    def _write_once(self, batch_id: int, payload: bytes) -> bool:
        sql = self._psycopg.sql
        connection = self._connect()
        target = self._name(self._table)
        with connection.transaction(), connection.cursor() as cursor:
            row = cursor.execute(
                sql.SQL(
                    "SELECT batch_id FROM {} WHERE stream_id = %s AND target = %s FOR UPDATE"
                ).format(self._name(PROGRESS_TABLE)),
                (self._stream, self._table),
            ).fetchone()
            if row is not None and row[0] >= batch_id:
                return False
            if self._mode == "complete":
                cursor.execute(sql.SQL("DELETE FROM {}").format(target))
            if self._mode == "update" and payload:
                staging = sql.Identifier("reactive_streams_staging")
                cursor.execute(
                    sql.SQL("CREATE TEMPORARY TABLE {} (LIKE {}) ON COMMIT DROP").format(
                        staging, target
                    )
                )
                self._copy(cursor, staging, payload)
                cursor.execute(self._upsert(target, staging))
            elif payload:
                self._copy(cursor, target, payload)
            cursor.execute(
                sql.SQL(
                    "INSERT INTO {} (stream_id, target, batch_id) VALUES (%s, %s, %s) "
                    "ON CONFLICT (stream_id, target) DO UPDATE SET batch_id = EXCLUDED.batch_id, "
                    "committed_at = now()"
                ).format(self._name(PROGRESS_TABLE)),
                (self._stream, self._table, batch_id),
            )
        return True

    def _upsert(self, target: Any, staging: Any) -> Any:
        sql = self._psycopg.sql
        columns = sql.SQL(", ").join(map(sql.Identifier, self._columns))
        keys = sql.SQL(", ").join(map(sql.Identifier, self._keys))
        others = [name for name in self._columns if name not in self._keys]
        if others:
            action = sql.SQL("DO UPDATE SET {}").format(
                sql.SQL(", ").join(
                    sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(name)) for name in others
                )
            )
        else:
            action = sql.SQL("DO NOTHING")
        return sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} ON CONFLICT ({}) {}").format(
            target, columns, columns, staging, keys, action
        )
