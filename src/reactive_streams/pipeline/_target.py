"""``--sink``: where the result goes instead of a file, and what such a place must do.

A ``SinkTarget`` takes each micro-batch of the result as it comes, with its batch id, and
writes it exactly once: the write and the batch id are committed together (one database
transaction, one table-format commit), so a micro-batch that Spark replays after a restart
from ``--checkpoint`` is recognised and skipped by the target itself. ``ResultSink`` hands
every distinct micro-batch to its target (``write``) instead of folding it into a file.

The URL forms (``_sink_url.parse_sink``):

* ``postgresql://user[:password]@host[:port]/database?table=[schema.]name`` (``_postgres``);
  a password left out comes from ``PGPASSWORD`` or ``~/.pgpass``, as libpq reads them;
* ``delta:PATH`` (``delta:///abs/path`` or ``delta:relative/path``): a Delta Lake table
  (``_delta``).

Every target is checked before Spark starts (``check``: reachable, the password right, the
rights to write, an existing table's columns), and again against the query's result schema
once Spark analysed the query (``prepare``), before any micro-batch runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

from ._errors import PipelineUsageError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

__all__ = ["OutputMode", "SinkTarget", "stream_id"]

OutputMode = Literal["append", "update", "complete"]


class SinkTarget(Protocol):
    """A place the result is written to a micro-batch at a time, exactly once.

    Concurrency: ``write`` is called from one thread at a time (the sink's); ``close`` may
    be called from any thread, also while ``write`` waits to retry, which it then ends.
    """

    @property
    def description(self) -> str:
        """The target for messages and the summary (no password)."""
        ...

    @property
    def retries(self) -> int:
        """Writes tried again after a lost connection, so far."""
        ...

    def check(
        self, *, mode: OutputMode, keys: Sequence[str], columns: Sequence[str] | None
    ) -> None:
        """Refuse, before Spark starts, a target that cannot take the result.

        Args:
            mode: the query's output mode as far as it is known without Spark (an
                aggregating ``--sql`` in ``auto`` mode is only known by ``prepare``).
            keys: the result's key columns (update mode).
            columns: the result's column names when they are known without Spark (the
                default query), else ``None`` (``prepare`` checks them with their types).

        Raises:
            PipelineUsageError: one line saying what is wrong and what to do.
        """
        ...

    def prepare(self, schema: pa.Schema, *, mode: OutputMode, keys: Sequence[str]) -> None:
        """Check an existing table against ``schema``, or create it, before any micro-batch.

        Args:
            schema: the result's schema, as Spark analysed the query.
            mode: the query's output mode.
            keys: the result's key columns (update mode).

        Raises:
            PipelineUsageError: the table exists with other columns, or cannot be created.
        """
        ...

    def write(self, batch_id: int, table: pa.Table) -> bool:
        """Write micro-batch ``batch_id`` and record its id, in one commit.

        Returns:
            ``False`` when ``batch_id`` was committed before (a replay): nothing written.

        Raises:
            Exception: the write failed for good (retries exhausted, or a failure that a
                retry cannot mend).
        """
        ...

    def close(self) -> None:
        """Release connections and end a wait to retry. Idempotent."""
        ...


def stream_id(checkpoint: Path | None) -> str:
    """The id under which a target records the batch ids of this stream.

    Spark's batch ids start again at 0 in a run without a checkpoint, so such a run gets
    a new id; with ``--checkpoint`` the id is kept in the checkpoint (``sink-id``), so a
    rerun on it continues the same stream and its replays are recognised.

    Raises:
        PipelineUsageError: the checkpoint's id cannot be read or written.
    """
    import uuid  # noqa: PLC0415

    if checkpoint is None:
        return uuid.uuid4().hex
    path = checkpoint / "sink-id"
    try:
        if path.is_file():
            text = path.read_text(encoding="utf-8").strip()
            if text:
                return text
        checkpoint.mkdir(parents=True, exist_ok=True)
        text = uuid.uuid4().hex
        temporary = checkpoint / f".sink-id.{text}.tmp"
        temporary.write_text(text + "\n", encoding="utf-8")
        temporary.replace(path)
    except OSError as exc:
        raise PipelineUsageError(f"--checkpoint {checkpoint}: {exc.strerror or exc}") from None
    return text
