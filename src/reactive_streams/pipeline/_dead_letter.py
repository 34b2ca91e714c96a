"""The dead-letter file: every malformed record, where it came from and why it was refused.

A record that cannot be parsed or converted to the schema never stops the stream and never
vanishes: it is written here as one JSON object per line::

    {"source": "data/a.csv", "line": 17, "reason": "column 'dep_delay': ...", "raw": "..."}

``line`` is the physical line of the record in a CSV or JSON Lines file (the header is
line 1 of a CSV); Parquet files and in-memory tables have ``row`` instead (0-based).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["DeadLetter", "DeadLetterWriter"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter:
    """One refused record.

    Attributes:
        source: the file it came from (or the name of the in-memory table).
        position: its line number (1-based, CSV and JSON Lines) or row number (0-based,
            Parquet and tables), as said by ``position_kind``.
        position_kind: ``"line"`` or ``"row"``.
        reason: why it was refused, in one line.
        raw: the record as read: the text of the line, or the row as a ``dict``.
    """

    source: str
    position: int
    position_kind: Literal["line", "row"]
    reason: str
    raw: object

    def to_json(self) -> str:
        """The record as one line of JSON (values JSON cannot hold are written as text)."""
        return json.dumps(
            {
                "source": self.source,
                self.position_kind: self.position,
                "reason": self.reason,
                "raw": self.raw,
            },
            default=str,
            ensure_ascii=False,
        )


class DeadLetterWriter:
    """Appends dead letters to a JSON Lines file, opened lazily on the first one.

    Args:
        path: the file to write; ``None`` counts dead letters without writing them (the
            command always passes a path: ``--dead-letter``, by default
            ``<output>/dead-letters.jsonl``).

    Concurrency: ``write`` and ``close`` are thread-safe.
    """

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._count = 0
        self._closed = False

    @property
    def path(self) -> Path | None:
        """Where the dead letters go."""
        return self._path

    @property
    def count(self) -> int:
        """How many records were refused so far."""
        with self._lock:
            return self._count

    def write(self, letters: list[DeadLetter]) -> None:
        """Append ``letters`` and flush, so the file is complete even if the run dies.

        Raises:
            OSError: the file cannot be created or written.
        """
        if not letters:
            return
        text = "".join(letter.to_json() + "\n" for letter in letters)
        with self._lock:
            self._count += len(letters)
            if self._path is None or self._closed:
                return
            if self._file is None:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self._path.open("w", encoding="utf-8")
            self._file.write(text)
            self._file.flush()

    def close(self) -> None:
        """Close the file; later letters are only counted. Idempotent."""
        with self._lock:
            self._closed = True
            if self._file is not None:
                self._file.close()
                self._file = None
