"""The dead-letter file: every refused record (``reactive_streams.files.DeadLetter``).

Dead letters are written as one JSON object per line (``DeadLetter.to_json``)::

    {"source": "data/a.csv", "line": 17, "reason": "column 'dep_delay': ...", "raw": "..."}
"""

from __future__ import annotations

import threading
from typing import IO, TYPE_CHECKING

from ..files import DeadLetter

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["DeadLetter", "DeadLetterWriter"]


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
