"""``--sink delta:PATH``: the result as a Delta Lake table, each micro-batch exactly once.

Written with ``deltalake`` (delta-rs: no JVM, no jars; the ``delta`` extra), read by any
Delta reader (Spark, DuckDB's ``delta_scan``, Polars' ``read_delta``, delta-rs itself).
``delta:///abs/path`` and ``delta:relative/path`` name a directory on this machine.

Each micro-batch is one Delta commit that carries the stream's application transaction
(``txn`` action: ``appId`` = the stream's id, ``version`` = the batch id), so the log
records which micro-batches the table holds, in the same atomic commit as their rows:

* ``append``: the rows are appended;
* ``update``: the rows are merged on the key columns (``MERGE``: a key present is
  updated, a new one inserted; null keys match null keys, as Spark groups them);
* ``complete``: the table is overwritten with the rows.

Before each write the table's transaction version for the stream is read back: a batch id
at or below it is a replay (Spark re-running a micro-batch after a restart from
``--checkpoint``) and nothing is written. One writer per table is assumed (delta-rs'
commits are atomic on a local file system).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

from ._errors import PipelineUsageError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._target import OutputMode

__all__ = ["DeltaTarget"]


def _deltalake() -> Any:
    """deltalake, or a one-line ``PipelineUsageError`` naming the extra to install."""
    try:
        import deltalake  # noqa: PLC0415
    except ImportError:
        raise PipelineUsageError(
            "--sink delta: needs deltalake: pip install 'reactive-streams-py[delta]'"
        ) from None
    return deltalake


class DeltaTarget:
    """A Delta Lake table as the result (see the module docstring).

    Args:
        path: the table's directory.
        shown: the URL as given, for messages.
        stream: the stream's id: the application id of its transactions.
    """

    def __init__(self, path: Path, *, shown: str, stream: str) -> None:
        self._path = path
        self._shown = shown
        self._stream = stream
        self._mode: OutputMode = "append"
        self._keys: tuple[str, ...] = ()
        self._delta = _deltalake()

    @classmethod
    def from_url(cls, url: str, *, stream: str) -> DeltaTarget:
        """Read ``delta:///abs/path`` or ``delta:relative/path``.

        Raises:
            PipelineUsageError: no path, or a remote location (``delta://host/...``).
        """
        rest = url.split(":", 1)[1]
        if rest.startswith("//"):
            host, _, path = rest[2:].partition("/")
            if host:
                raise PipelineUsageError(
                    f"--sink {url}: a Delta table on this machine is delta:///ABSOLUTE/PATH "
                    "or delta:RELATIVE/PATH"
                )
            rest = "/" + path
        if not rest.strip():
            raise PipelineUsageError(f"--sink {url}: name the table's directory: delta:PATH")
        return cls(Path(rest).expanduser().absolute(), shown=url, stream=stream)

    @property
    def description(self) -> str:
        """The URL as given."""
        return self._shown

    @property
    def retries(self) -> int:
        """Always 0: a local table has no connection to lose."""
        return 0

    def check(
        self, *, mode: OutputMode, keys: Sequence[str], columns: Sequence[str] | None
    ) -> None:
        """Refuse a path that cannot hold the table, or a table with other columns.

        Raises:
            PipelineUsageError: the directory cannot be created or written, holds files
                that are not a Delta table, or the table's columns differ from
                ``columns`` (when known).
        """
        self._mode = mode
        self._keys = tuple(keys)
        try:
            self._path.mkdir(parents=True, exist_ok=True)
            probe = self._path / ".reactive-streams-write-test"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            self._refuse(f"cannot write the directory: {exc.strerror or exc}")
        table = self._table()
        if table is None:
            if any(self._path.iterdir()):
                self._refuse(
                    "the directory holds files that are not a Delta table; use an empty "
                    "or new directory"
                )
            return
        found = pa.schema(table.schema().to_arrow()).names
        if columns is not None and set(found) != set(columns):
            self._refuse(
                f"the table exists with other columns ({', '.join(found)}); the result has "
                f"({', '.join(columns)}): use another path"
            )

    def prepare(self, schema: pa.Schema, *, mode: OutputMode, keys: Sequence[str]) -> None:
        """Check an existing table's columns and types against ``schema``, or create it.

        Raises:
            PipelineUsageError: the table's columns differ, or it cannot be created.
        """
        self._mode = mode
        self._keys = tuple(keys)
        table = self._table()
        if table is None:
            try:
                self._delta.DeltaTable.create(str(self._path), schema=schema)
            except Exception as exc:
                self._refuse(f"cannot create the table: {exc}")
            return
        found = pa.schema(table.schema().to_arrow())  # delta-rs gives an arro3 schema
        wanted = {field.name: str(field.type) for field in schema}
        has = {field.name: str(field.type) for field in found}
        if {name: _plain(kind) for name, kind in has.items()} != {
            name: _plain(kind) for name, kind in wanted.items()
        }:
            self._refuse(
                f"the table exists with other columns ({_columns(has)}); the result has "
                f"({_columns(wanted)}): use another path"
            )

    def write(self, batch_id: int, table: pa.Table) -> bool:
        """Commit micro-batch ``batch_id`` with its transaction; ``False`` for a replay.

        Raises:
            Exception: delta-rs failed to write or commit.
        """
        delta = self._delta
        current = self._table()
        if current is not None:
            version = current.transaction_version(self._stream)
            if version is not None and version >= batch_id:
                return False
        commit = delta.CommitProperties(
            app_transactions=[delta.Transaction(app_id=self._stream, version=batch_id)]
        )
        if self._mode == "update" and current is not None and table.num_rows:
            from ._sink import latest_per_key  # noqa: PLC0415

            source = latest_per_key(None, table, self._keys)
            predicate = " AND ".join(
                f'(target."{key}" IS NOT DISTINCT FROM source."{key}")' for key in self._keys
            )
            (
                current.merge(
                    source,
                    predicate,
                    source_alias="source",
                    target_alias="target",
                    commit_properties=commit,
                )
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
            return True
        mode = "overwrite" if self._mode == "complete" else "append"
        delta.write_deltalake(str(self._path), table, mode=mode, commit_properties=commit)
        return True

    def close(self) -> None:
        """Nothing to release (each write opens the table's log afresh)."""

    def _table(self) -> Any:
        if not self._delta.DeltaTable.is_deltatable(str(self._path)):
            return None
        return self._delta.DeltaTable(str(self._path))

    def _refuse(self, why: str) -> NoReturn:
        raise PipelineUsageError(f"--sink {self._shown}: {why}")


def _plain(kind: str) -> str:
    """An Arrow type's text with the string and view variants made one (Delta's string)."""
    return {"large_string": "string", "string_view": "string"}.get(kind, kind)


def _columns(columns: dict[str, str]) -> str:
    return ", ".join(f"{name} {kind}" for name, kind in columns.items())
