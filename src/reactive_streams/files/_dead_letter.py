"""A dead letter: a record that was refused, where it came from and why.

A record that cannot be parsed or converted to the schema never stops a stream by itself
and never vanishes: it becomes one dead letter, written as one JSON object per line::

    {"source": "data/a.csv", "line": 17, "record": 15, "reason": "column 'dep_delay': ...",
     "raw": "..."}

``line`` is the line a record of a CSV or JSON Lines file starts on (1-based; the header
is line 1 of a CSV); Parquet files and in-memory tables have ``row`` instead (0-based).
``record`` is the record's number in its file (0-based, data records only, the header is
no record): it tells apart records that start on the same line, so a file and a record
number name exactly one dead letter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

__all__ = ["RAW_LIMIT", "DeadLetter", "cut_raw", "quoted"]

RAW_LIMIT = 1 << 16
"""Characters of a refused record kept in its dead letter, at most."""


def cut_raw(text: str, limit: int = RAW_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when it was longer."""
    return text if len(text) <= limit else text[:limit] + "…"


def quoted(values: object, limit: int = 40, most: int = 8) -> str:
    r"""File content for a message: escaped, each value cut to ``limit`` characters.

    A message printed to a terminal or a log must not carry a file's content whole (a
    link to a secret, control characters): strings are shown as ``repr`` of at most
    ``limit`` characters, lists by their first ``most`` items.

    >>> print(quoted(["id", "x" * 50, "bell" + chr(7)], limit=5))
    ['id', 'xxxxx…', 'bell\x07']
    """
    if isinstance(values, str):
        text = repr(values[:limit])
        return text[:-1] + "…" + text[-1] if len(values) > limit else text
    if isinstance(values, list | tuple):
        shown = [quoted(value, limit, most) for value in values[:most]]
        more = f", … ({len(values) - most:,} more)" if len(values) > most else ""
        return "[" + ", ".join(shown) + more + "]"
    return quoted(str(values), limit, most)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter:
    """One refused record.

    Attributes:
        source: the file it came from (or the name of the in-memory table).
        position: its line number (1-based, CSV and JSON Lines) or row number (0-based,
            Parquet and tables), as said by ``position_kind``.
        position_kind: ``"line"`` or ``"row"``.
        reason: why it was refused, in one line.
        raw: the record as read: its text, or the row as a ``dict``.
        record: its number in the file (0-based, data records only), or ``None`` when
            not known (a dead letter written before record numbers were kept).
    """

    source: str
    position: int
    position_kind: Literal["line", "row"]
    reason: str
    raw: object
    record: int | None = None

    @property
    def key(self) -> tuple[str, str, int, int]:
        """What names this record: its source, position and record number.

        A dead letter without a record number is named by its position alone.

        Two dead letters with the same key are the same record refused twice (a retried
        task, a replayed micro-batch).
        """
        record = self.position if self.record is None else self.record
        return (self.source, self.position_kind, self.position, record)

    def to_json(self) -> str:
        """The record as one line of JSON (values JSON cannot hold are written as text)."""
        fields: dict[str, object] = {"source": self.source, self.position_kind: self.position}
        if self.record is not None:
            fields["record"] = self.record
        fields["reason"] = self.reason
        fields["raw"] = self.raw
        return json.dumps(fields, default=str, ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> DeadLetter:
        """The dead letter ``to_json`` wrote.

        Raises:
            ValueError: ``line`` is not such a JSON object.
        """
        record = json.loads(line)
        if not isinstance(record, dict) or "reason" not in record:
            raise ValueError(f"not a dead letter: {line[:200]!r}")
        kind: Literal["line", "row"] = "line" if "line" in record else "row"
        return cls(
            source=str(record["source"]),
            position=int(record[kind]),
            position_kind=kind,
            reason=str(record["reason"]),
            raw=record.get("raw"),
            record=None if record.get("record") is None else int(record["record"]),
        )
