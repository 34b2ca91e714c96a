"""The dead-letter file: every refused record (``reactive_streams.files.DeadLetter``).

Dead letters are written as one JSON object per line (``DeadLetter.to_json``)::

    {"source": "data/a.csv", "line": 17, "reason": "column 'dep_delay': ...", "raw": "..."}

``DeadLetterLimit`` (``--max-dead-letters``) says when there are too many: more than a
number of them, or more than a fraction of the records read.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from fractions import Fraction
from typing import IO, TYPE_CHECKING

from ..files import DeadLetter
from ._errors import PipelineUsageError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["FRACTION_MIN_RECORDS", "DeadLetter", "DeadLetterLimit", "DeadLetterWriter"]

FRACTION_MIN_RECORDS = 1_000
"""Records read before a fraction limit is checked while the run goes.

Until then the fraction rests on too few records (the first record, refused, is 100%). At
the end of the run the fraction is checked over every record read, however few.
"""

_COUNT = re.compile(r"[0-9]+")
_FRACTION = re.compile(r"[0-9]*\.[0-9]+|[0-9]+\.[0-9]*")
_PERCENT = re.compile(r"([0-9]*\.?[0-9]+)%")


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


@dataclass(frozen=True, slots=True)
class DeadLetterLimit:
    """How many dead letters a run may have (``--max-dead-letters``): a count or a fraction.

    Attributes:
        text: the limit as given (``"1000"``, ``"0.01"``, ``"1%"``), for messages.
        count: at most this many dead letters, or ``None`` for a fraction.
        fraction: at most this fraction of the records read (exact, ``0 <= f < 1``), or
            ``None`` for a count.
    """

    text: str
    count: int | None = None
    fraction: Fraction | None = None

    @classmethod
    def parse(cls, text: str) -> DeadLetterLimit:
        """A count (``"1000"``), or a fraction of the records read (``"0.01"``, ``"1%"``).

        Raises:
            PipelineUsageError: anything else, or a fraction of 1 or more (one line).
        """
        value = text.strip()
        if _COUNT.fullmatch(value):
            return cls(value, count=int(value))
        percent = _PERCENT.fullmatch(value)
        fraction = None
        if percent is not None:
            fraction = Fraction(percent.group(1)) / 100
        elif _FRACTION.fullmatch(value):
            fraction = Fraction(value)
        if fraction is None or fraction >= 1:
            raise PipelineUsageError(
                f"--max-dead-letters {text}: expected a number of dead letters (1000) or a "
                "fraction of the records read below 1 (0.01, or 1%)"
            )
        return cls(value, fraction=fraction)

    def exceeded(self, dead: int, read: int, *, read_at_most: int | None = None) -> str | None:
        """Why ``dead`` dead letters are too many, or ``None`` while they are not.

        A count trips once ``dead`` is more than it. A fraction trips once ``dead`` is more
        than that fraction of the records read; while the run goes, pass ``read_at_most``
        (an upper bound of the records read when some are still being counted) and the
        fraction is checked only once ``read`` reached ``FRACTION_MIN_RECORDS``, against
        ``read_at_most``, so it never trips early; at the end, pass only ``read``.

        Args:
            dead: dead letters so far.
            read: records read so far, valid or not (at least this many).
            read_at_most: while running: at most this many records were read.

        Returns:
            One line with the figures, e.g. ``"3,279 dead letters, more than
            --max-dead-letters 1000"``, or ``None``.
        """
        if self.count is not None:
            if dead <= self.count:
                return None
            return f"{dead:,} dead letters, more than --max-dead-letters {self.text}"
        assert self.fraction is not None
        if read_at_most is not None and read < FRACTION_MIN_RECORDS:
            return None
        total = read if read_at_most is None else max(read, read_at_most)
        if dead <= self.fraction * total:
            return None
        share = f"{100 * dead / total:.3g}%" if total else "100%"
        if total > read:  # some records of the running micro-batch are not counted yet
            figures = f"in at most {total:,} records read (at least {share})"
        else:
            figures = f"in {total:,} records read ({share})"
        return (
            f"{dead:,} dead letters {figures}, more than --max-dead-letters {self.text} "
            f"({float(self.fraction) * 100:.3g}% of the records read)"
        )
