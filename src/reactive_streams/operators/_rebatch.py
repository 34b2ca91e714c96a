"""``rebatch``: bound every element by rows and bytes (``pyarrow.RecordBatch`` or ``bytes``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core import MAX_DEMAND, BufferedStage, StageOperator, check_positive

if TYPE_CHECKING:
    from ..api import Publisher, Subscriber, Subscription

__all__ = ["RebatchOperator"]

_BYTES_TYPES = (bytes, bytearray, memoryview)


def _pyarrow() -> Any:
    try:
        import pyarrow  # noqa: PLC0415 - optional: only in the 'spark' extra
    except ImportError as exc:  # pragma: no cover - pyarrow is installed in the test env
        raise ImportError(
            "rebatch() of RecordBatch elements needs pyarrow: "
            "pip install 'reactive-streams-py[spark]' (or pip install pyarrow)"
        ) from exc
    return pyarrow


class RebatchOperator(StageOperator[Any]):
    """Re-cut a stream of ``RecordBatch`` or ``bytes`` so no element exceeds the bounds.

    ``max_rows`` bounds ``RecordBatch.num_rows`` (for ``bytes``, a row is a byte);
    ``max_bytes`` bounds ``RecordBatch.nbytes`` (``len`` for ``bytes``). A larger input is
    cut into slices (``RecordBatch.slice``: no copy); smaller inputs are concatenated until
    the next one would not fit. Rows keep their order. Outputs are ``RecordBatch`` for
    batch inputs and ``bytes`` for ``bytes``/``bytearray``/``memoryview`` inputs (a
    ``bytes`` slice is a copy; Arrow slices share the input's buffers).

    Marble (``max_rows=3``, batches shown by their rows)::

        source:  -[a b c d e]-[f]-[g h]-|
        result:  -[a b c]-----[d e f]---[g h]|

    An output is emitted as soon as it is full, or when the next input does not fit, or at
    completion. A single row larger than ``max_bytes`` cannot be bounded: the stream ends
    with ``ValueError`` naming the row's size. Mixing ``bytes`` and batches, another
    element type, or batches of different schemas is a ``TypeError``/Arrow error, also
    signalled with ``on_error`` (upstream cancelled).

    Backpressure:
        One input is requested at a time, and only when fewer outputs are ready than
        downstream asked for: at most one input beyond the demand is held, so demand
        bounds memory in bytes, not only in elements.

    Concurrency:
        Cutting and concatenating run on the upstream's thread; delivery is serial through
        the stage's drain loop.
    """

    __slots__ = ("_max_bytes", "_max_rows")

    def __init__(
        self, upstream: Publisher[Any], max_rows: int | None, max_bytes: int | None
    ) -> None:
        super().__init__(upstream)
        if max_rows is None and max_bytes is None:
            raise ValueError("rebatch() needs max_rows=, max_bytes= or both")
        self._max_rows = None if max_rows is None else check_positive("max_rows", max_rows)
        self._max_bytes = None if max_bytes is None else check_positive("max_bytes", max_bytes)

    @property
    def name(self) -> str:
        return "rebatch"

    def _new_stage(self, subscriber: Subscriber[Any]) -> Subscriber[Any]:
        return _Rebatch(subscriber, self._max_rows, self._max_bytes)


class _Cutter:
    """The accumulator, touched only by upstream signals (serial, Rule 1.3)."""

    __slots__ = ("arrow", "kind", "max_bytes", "max_rows", "pending", "pending_bytes", "rows")

    def __init__(self, max_rows: int | None, max_bytes: int | None) -> None:
        self.max_rows = MAX_DEMAND if max_rows is None else max_rows
        self.max_bytes = MAX_DEMAND if max_bytes is None else max_bytes
        self.pending: list[Any] = []
        self.rows = 0
        self.pending_bytes = 0
        self.kind: str | None = None
        self.arrow: Any = None

    # -- sizes ---------------------------------------------------------------------------
    def _size(self, element: Any) -> tuple[int, int]:
        if self.kind == "bytes":
            return len(element), len(element)
        return element.num_rows, element.nbytes

    def _slice(self, element: Any, start: int, stop: int | None = None) -> Any:
        if self.kind == "bytes":
            return element[start:stop]
        length = None if stop is None else stop - start
        return element.slice(start, length)

    def _check_kind(self, element: Any) -> None:
        if isinstance(element, _BYTES_TYPES):
            kind = "bytes"
        else:
            if self.arrow is None:
                self.arrow = _pyarrow()
            if not isinstance(element, self.arrow.RecordBatch):
                raise TypeError(
                    "rebatch() takes pyarrow.RecordBatch or bytes elements, got "
                    f"{type(element).__qualname__}"
                )
            kind = "arrow"
        if self.kind is None:
            self.kind = kind
        elif self.kind != kind:
            raise TypeError("rebatch() cannot mix bytes and RecordBatch elements in one stream")

    def _prefix_that_fits(self, element: Any, room_rows: int, room_bytes: int) -> int:
        """The most leading rows of ``element`` that fit in the room left."""
        rows, _ = self._size(element)
        limit = min(rows, room_rows)
        if self.kind == "bytes":
            return min(limit, room_bytes)
        low, high = 0, limit  # nbytes grows with the rows taken: binary search
        while low < high:
            middle = (low + high + 1) // 2
            if element.slice(0, middle).nbytes <= room_bytes:
                low = middle
            else:
                high = middle - 1
        return low

    # -- feeding -------------------------------------------------------------------------
    def feed(self, element: Any) -> list[Any]:
        """Take one input; return the outputs it completed, in order."""
        self._check_kind(element)
        if self.kind == "bytes" and not isinstance(element, bytes):
            element = bytes(element)
        out: list[Any] = []
        while True:
            rows, size = self._size(element)
            if rows == 0:
                return out
            room_rows = self.max_rows - self.rows
            room_bytes = self.max_bytes - self.pending_bytes
            if rows <= room_rows and size <= room_bytes:
                self._add(element, rows, size)
                if self.rows == self.max_rows or self.pending_bytes == self.max_bytes:
                    out.extend(self.flush())
                return out
            take = self._prefix_that_fits(element, room_rows, room_bytes)
            if take == 0:
                if self.pending:
                    out.extend(self.flush())
                    continue
                raise ValueError(
                    f"rebatch(max_bytes={self.max_bytes}): a single row of "
                    f"{self._slice(element, 0, 1).nbytes} bytes cannot fit"
                )
            head = self._slice(element, 0, take)
            head_rows, head_size = self._size(head)
            self._add(head, head_rows, head_size)
            out.extend(self.flush())
            element = self._slice(element, take)

    def _add(self, piece: Any, rows: int, size: int) -> None:
        self.pending.append(piece)
        self.rows += rows
        self.pending_bytes += size

    def flush(self) -> list[Any]:
        """Concatenate the pending pieces into outputs (normally one)."""
        pieces, self.pending = self.pending, []
        self.rows = self.pending_bytes = 0
        if not pieces:
            return []
        if len(pieces) == 1:
            return pieces
        if self.kind == "bytes":
            return [b"".join(pieces)]
        arrow = self.arrow
        if hasattr(arrow, "concat_batches"):
            joined = arrow.concat_batches(pieces)
        else:  # pragma: no cover - pyarrow < 19
            joined = arrow.Table.from_batches(pieces).combine_chunks().to_batches()[0]
        if joined.num_rows > self.max_rows or joined.nbytes > self.max_bytes:
            return pieces  # validity bitmaps rounded up: each piece is within the bound
        return [joined]


class _Rebatch(BufferedStage):
    __slots__ = ("__weakref__", "_asked", "_cutter")

    def __init__(
        self, downstream: Subscriber[Any], max_rows: int | None, max_bytes: int | None
    ) -> None:
        super().__init__(downstream)
        self._cutter = _Cutter(max_rows, max_bytes)
        self._asked = False  # one input requested and not yet received

    def _buffered_now(self) -> int:
        return len(self._ready) + len(self._cutter.pending)

    def on_subscribe(self, subscription: Subscription) -> None:
        if self._accept_upstream(subscription):
            self._pull()

    def _demand_added(self, count: int) -> None:
        self._pull()

    def _pull(self) -> None:
        """Request one input when fewer outputs are ready than downstream wants."""
        with self._lock:
            if self._asked or self._done or self._cancelled or self._upstream is None:
                return
            if len(self._ready) >= self._demand:
                return
            self._asked = True
            upstream = self._upstream
        self.request_upstream(upstream, 1)

    def on_next(self, element: Any) -> None:
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        with self._lock:
            if self._done or self._cancelled:
                return
        try:
            outputs = self._cutter.feed(element)
        except Exception as exc:  # a bad element: our error, upstream is still running
            self._fail_urgently(exc)
            self._schedule()
            return
        with self._lock:
            self._asked = False
            self._ready.extend(outputs)
            self._high_water = max(self._high_water, self._buffered_now())
        self._schedule()
        self._pull()

    def _upstream_completed(self) -> None:
        try:
            self._ready.extend(self._cutter.flush())
        except Exception as exc:  # e.g. batches of different schemas
            self._error = exc

    def _abandon_locked(self) -> list[Subscription]:
        self._cutter.pending = []
        return super()._abandon_locked()
