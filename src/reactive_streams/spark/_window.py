"""The rows ``to_spark_stream`` holds: a window over the stream's sequence numbers.

Offsets of a ``to_spark_stream`` are row sequence numbers. The window holds the rows from
``base`` on: first the rows handed to Spark and not yet acknowledged (a later ``read``
acknowledges them), then the rows not yet handed over. Two layouts, one per element type:

* ``RowWindow``: one ``Mapping`` per element, one row each (``to_spark_stream(arrow=False)``);
* ``BatchWindow``: one ``pyarrow.RecordBatch`` per element, any number of rows each
  (``to_spark_stream(arrow=True)``); a batch is sliced when a micro-batch ends inside it.

``take`` copies a range of rows out (under the bridge's lock: it is cheap, references only)
and ``to_batches`` converts what was taken into Arrow record batches in the bridge's schema
(outside the lock: it is the expensive part). The windows are not thread-safe: the bridge
guards them with its condition.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Mapping
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

__all__ = ["BatchWindow", "EncodeError", "RowWindow", "Window", "conform_batch"]


class EncodeError(Exception):
    """Rows that do not fit the stream's schema (the message says which and why)."""


class Window:
    """Rows from sequence number ``base`` on; see the module docstring.

    Attributes:
        base: the sequence number of the first row held.
        held: how many rows are held.
    """

    def __init__(self, base: int = 0) -> None:
        self.base = base
        self.held = 0

    @property
    def end(self) -> int:
        """The sequence number after the last row held."""
        return self.base + self.held

    def append(self, element: Any) -> int:
        """Hold ``element``; return how many rows it added.

        Raises:
            TypeError: ``element`` is not of this window's element type.
        """
        raise NotImplementedError

    def acknowledge(self, upto: int) -> None:
        """Drop the rows below sequence number ``upto`` (``base <= upto <= end``)."""
        raise NotImplementedError

    def take(self, start: int, count: int) -> list[Any]:
        """The ``count`` rows from sequence number ``start`` (``base <= start``), uncopied."""
        raise NotImplementedError

    def to_batches(self, taken: list[Any], schema: pa.Schema) -> list[pa.RecordBatch]:
        """What ``take`` returned, as record batches in ``schema``.

        Raises:
            EncodeError: the rows do not convert to ``schema``.
        """
        raise NotImplementedError


class RowWindow(Window):
    """A window of ``Mapping`` rows (column name to value; missing keys are null)."""

    def __init__(self, base: int = 0) -> None:
        super().__init__(base)
        self._rows: deque[Mapping[str, Any]] = deque()

    def append(self, element: Any) -> int:
        """Hold one row."""
        if not isinstance(element, Mapping):
            raise TypeError(
                f"to_spark_stream expects Mapping elements (one row each), got "
                f"{type(element).__name__}; pass arrow=True for pyarrow.RecordBatch elements"
            )
        self._rows.append(element)
        self.held += 1
        return 1

    def acknowledge(self, upto: int) -> None:
        """Drop the rows below ``upto``."""
        for _ in range(upto - self.base):
            self._rows.popleft()
        self.held -= upto - self.base
        self.base = upto

    def take(self, start: int, count: int) -> list[Any]:
        """The rows themselves (a list of the mappings)."""
        offset = start - self.base
        return list(itertools.islice(self._rows, offset, offset + count))

    def to_batches(self, taken: list[Any], schema: pa.Schema) -> list[pa.RecordBatch]:
        """Convert the rows with ``RecordBatch.from_pylist``."""
        try:
            return [pa.RecordBatch.from_pylist(taken, schema=schema)]
        except Exception as exc:
            raise EncodeError(f"{type(exc).__name__}: {exc}") from exc


class BatchWindow(Window):
    """A window of ``pyarrow.RecordBatch`` elements (rows in order, batch by batch)."""

    def __init__(self, base: int = 0) -> None:
        super().__init__(base)
        self._batches: deque[pa.RecordBatch] = deque()

    def append(self, element: Any) -> int:
        """Hold one batch; empty batches add nothing."""
        if not isinstance(element, pa.RecordBatch):
            raise TypeError(
                f"to_spark_stream(arrow=True) expects pyarrow.RecordBatch elements, got "
                f"{type(element).__name__}"
            )
        if element.num_rows:
            self._batches.append(element)
            self.held += element.num_rows
        return int(element.num_rows)

    def acknowledge(self, upto: int) -> None:
        """Drop the rows below ``upto``, slicing the first batch kept if needed."""
        drop = upto - self.base
        self.held -= drop
        self.base = upto
        while drop:
            first = self._batches[0]
            if first.num_rows <= drop:
                self._batches.popleft()
                drop -= first.num_rows
            else:
                self._batches[0] = first.slice(drop)
                drop = 0

    def take(self, start: int, count: int) -> list[Any]:
        """Zero-copy slices of the held batches covering the rows."""
        skip = start - self.base
        out: list[pa.RecordBatch] = []
        for batch in self._batches:
            if count == 0:
                break
            if skip >= batch.num_rows:
                skip -= batch.num_rows
                continue
            part = batch.slice(skip, count)
            skip = 0
            count -= part.num_rows
            out.append(part)
        return out

    def to_batches(self, taken: list[Any], schema: pa.Schema) -> list[pa.RecordBatch]:
        """The slices, cast to ``schema`` where their types differ."""
        return [
            batch if batch.schema.equals(schema) else conform_batch(batch, schema)
            for batch in taken
        ]


def conform_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with ``schema``'s columns, in its order, cast to its types.

    Raises:
        EncodeError: a column is missing or does not cast (the message says which).
    """
    missing = [name for name in schema.names if name not in batch.schema.names]
    if missing:
        raise EncodeError(f"the batch has no column(s) {', '.join(missing)}")
    try:
        columns = [batch.column(field.name).cast(field.type, safe=True) for field in schema]
        return pa.RecordBatch.from_arrays(columns, schema=schema)
    except Exception as exc:
        raise EncodeError(f"{type(exc).__name__}: {exc}") from exc
