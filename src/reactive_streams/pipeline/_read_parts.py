"""What reading on Spark's executors shares, whatever is read: dead-letter parts, figures.

``ExecutorsRead`` (files as splits) and ``RemoteRead`` (a partitioned RSocket route) both
read on the executors through ``from_splits``, with ``DeadLetterSplitter`` as the
transform: the driver holds no record, the counts come from the query's progress (rows
into Spark) and from the dead-letter part files the executors write, merged into the
dead-letter file at the end, each dead letter once. ``PartsRead`` is that shared half;
each mode adds its ``events`` and ``trigger``.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ._checkpoint import checkpoint_columns
from ._columns import stream_columns
from ._diagnostics import causes
from ._errors import PipelineUsageError
from ._read_mode import LateDirectory, ReadCounts
from ._splits import count_dead_letter_parts, merge_dead_letters

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import SparkSession

    from .._core import StreamStatistics
    from ..files import FileSplit
    from ._config import PipelineConfig
    from ._dead_letter import DeadLetterLimit
    from ._diagnostics import QueryProgress
    from ._inputs import InputPlan
    from ._late import LateRows

__all__ = ["PartsRead"]

_SPLIT_FAILURE: Final = re.compile(r"SplitReadError: (from_splits: [^\n]*)")
"""The line naming the split in a failure of a read on the executors (inside Spark's)."""


def _part_identities(directory: Path) -> dict[str, tuple[int, int]]:
    """Each dead-letter part file of ``directory`` by name: ``(inode, mtime in ns)``."""
    found: dict[str, tuple[int, int]] = {}
    with contextlib.suppress(OSError):
        for part in directory.glob("*.jsonl"):
            with contextlib.suppress(OSError):
                status = part.stat()
                found[part.name] = (status.st_ino, status.st_mtime_ns)
    return found


def _letters_written_since(directory: Path, before: Mapping[str, tuple[int, int]]) -> int:
    """Dead letters in the part files of ``directory`` written since ``before`` was taken.

    ``DeadLetterSplitter`` names a part file by its content (one dead letter per line)
    and writes it whole under a temporary name, then renames it: a part written again (a
    retried task, a micro-batch replayed after a restart) keeps its name, once, and gets
    a new inode, so it counts for the run that wrote it last.
    """
    total = 0
    for name, identity in _part_identities(directory).items():
        if before.get(name) != identity:
            with contextlib.suppress(OSError), (directory / name).open("rb") as handle:
                total += sum(1 for _ in handle)
    return total


class PartsRead:
    """The half of a ``ReadMode`` on the executors that dead-letter part files make.

    Args:
        config: the run's options.
        plan: the input (its schema and size).
        progress: the query's progress (rows into Spark, each split's share).
        notes: the run's notes (a resume is noted here).
        splits: how many splits (partitions) the input is read in.
        order: the files' splits, to merge dead letters in input order (empty: by
            source, then position).
    """

    on_executors = True

    def __init__(
        self,
        config: PipelineConfig,
        plan: InputPlan,
        progress: QueryProgress,
        notes: list[str],
        *,
        splits: int,
        order: Sequence[FileSplit] = (),
    ) -> None:
        self._config = config
        self._plan = plan
        self._progress = progress
        self._notes = notes
        self._split_count = splits
        self._order = tuple(order)
        self._parts: Path | None = None
        self._parts_temporary = False
        self._parts_before: dict[str, tuple[int, int]] = {}  # earlier runs' parts
        self._merged: int | None = None
        self._unconfirmed = -1  # a part count the exact merge did not confirm
        self._late_directory = LateDirectory()
        self.late: LateRows | None = None
        self.resumed = False
        # The input columns sent to Spark (the query's).
        self.stream_columns: tuple[str, ...] | None = None

    def _open_parts(self) -> Path:
        """Where the executors write dead-letter parts; note a resumed checkpoint."""
        config = self._config
        if config.checkpoint is not None:
            # Kept with the checkpoint: a restarted run merges the parts of both runs.
            self._parts = config.checkpoint / "dead-letters"
        else:
            self._parts = Path(tempfile.mkdtemp(prefix="reactive-streams-dead-letters-"))
            self._parts_temporary = True
        # What earlier runs wrote: this run's dead letters are in the parts written since.
        self._parts_before = _part_identities(self._parts)
        if config.checkpoint is not None:
            # Spark's offset log holds each split's offset: Spark resumes by itself.
            commits = config.checkpoint / "query" / "commits"
            done = list(commits.glob("[0-9]*")) if commits.is_dir() else []
            if done:
                self.resumed = True
                self._notes.append(
                    f"resumed from the checkpoint {config.checkpoint}: "
                    f"{len(done):,} micro-batches were committed before; Spark replays the "
                    "planned one from the same split offsets"
                )
        return self._parts

    def _kept_columns(self, spark: SparkSession) -> tuple[str, ...]:
        """The input columns the query uses (as the checkpoint recorded them, if any).

        Raises:
            PipelineUsageError: the checkpoint's column record cannot be read.
        """
        config, names = self._config, tuple(self._plan.schema.names)
        kept = stream_columns(spark, config.sql, self._plan.schema)
        if config.checkpoint is not None:
            try:
                kept = checkpoint_columns(config.checkpoint, kept, names)
            except OSError as exc:
                raise PipelineUsageError(
                    f"--checkpoint {config.checkpoint}: {exc.strerror or exc}"
                ) from None
        self.stream_columns = kept
        return kept

    # -- the figures ----------------------------------------------------------------------

    def counts(self, processed: int, *, done_at: float | None, started: float) -> ReadCounts:
        """From the query's progress and the part files.

        Records into Spark are the input rows of this run's finished micro-batches; the
        records read are those plus the dead letters of the part files this run wrote
        (its micro-batches', a replayed one's included). The dead letters earlier runs of
        the checkpoint found are ``dead_letters_before`` (exact once the dead letters were
        merged). The source's demand is what the last micro-batch planned, spread over the
        splits (``split_shares``).
        """
        dead = self._dead_letters_of_this_run()
        shares = self._progress.shares
        return ReadCounts(
            records_read=processed + dead,
            records_emitted=processed,
            dead_letters=dead,
            source_demand=sum(shares),
            reading=((done_at or time.monotonic()) - started) if started else 0.0,
            split_shares=shares,
            splits=self._split_count,
            dead_letters_before=max(0, self.dead_letters() - dead),
        )

    def dead_letters(self) -> int:
        """Every run's: merged at the end, else the part files' lines."""
        if self._merged is not None:
            return self._merged
        return 0 if self._parts is None else count_dead_letter_parts(self._parts)

    def _dead_letters_of_this_run(self) -> int:
        return 0 if self._parts is None else _letters_written_since(self._parts, self._parts_before)

    def limit_message(self, limit: DeadLetterLimit, processed: int, *, final: bool) -> str | None:
        """``--max-dead-letters`` against the part files (confirmed by a merge).

        The running micro-batch's dead letters are in the part files before its valid
        records are in Spark's progress, so a fraction is checked against the most
        records that can have been read: one micro-batch more (``--max-records-per-
        trigger``), or the whole input when its size is known. The part files' lines may
        count a retried task's dead letters twice, so a limit they exceed is confirmed by
        merging them (each dead letter once) first.
        """
        dead = self.dead_letters()
        message = limit.exceeded(
            dead, processed + dead, read_at_most=self._most_read(processed, dead, final)
        )
        if message is None or final or self._merged is not None:
            return message
        if dead == self._unconfirmed:
            return None  # the merge did not confirm this count; wait for more
        exact = self._exact_dead_letters()
        if exact is None:
            return message
        message = limit.exceeded(
            exact, processed + exact, read_at_most=self._most_read(processed, exact, final)
        )
        if message is None:
            self._unconfirmed = dead
        return message

    def _most_read(self, processed: int, dead: int, final: bool) -> int | None:
        """While running: at most this many records were read."""
        if final:
            return None
        if self._plan.total_rows is not None:
            return self._plan.total_rows
        return processed + dead + self._config.trigger_records

    def _exact_dead_letters(self) -> int | None:
        """The dead letters so far, each once (merged into a scratch file)."""
        if self._parts is None:
            return None
        with tempfile.TemporaryDirectory(prefix="reactive-streams-dead-count-") as scratch:
            try:
                return len(
                    merge_dead_letters(self._parts, Path(scratch) / "dead.jsonl", self._order)
                )
            except (OSError, ValueError):
                return None

    def streams(self) -> tuple[StreamStatistics | None, StreamStatistics | None]:
        """No source or bridge in this process."""
        return None, None

    def source_failure(self, error: BaseException) -> str | None:
        """The ``SplitReadError`` line inside Spark's failure, naming the split."""
        found = _SPLIT_FAILURE.search("\n".join(str(item) for item in causes(error)))
        return None if found is None else found.group(1).strip()

    # -- the end --------------------------------------------------------------------------

    def stop(self) -> None:
        """Nothing reads in this process: the query's end stops the executors."""

    def finish(self) -> list[str]:
        """The executors' dead letters into the dead-letter file, once each, in input order."""
        if self._parts is None or self._merged is not None:
            return []
        try:
            letters = merge_dead_letters(self._parts, self._config.dead_letter_path, self._order)
        except (OSError, ValueError) as exc:
            return [f"the dead letters could not be merged: {exc}"]
        self._merged = len(letters)
        return []

    def close(self) -> None:
        """Remove the temporary part and tally directories. Idempotent."""
        if self._parts_temporary and self._parts is not None:
            shutil.rmtree(self._parts, ignore_errors=True)
            self._parts_temporary = False
        self._late_directory.close()
