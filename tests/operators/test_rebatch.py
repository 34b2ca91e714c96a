"""``rebatch``: bounds never exceeded, same rows in the same order, demand-driven."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import MAX_DEMAND, Publisher
from reactive_streams.operators import Flow
from reactive_streams.tck import PublisherVerification
from reactive_streams.testing import RecordingSubscriber


def _batch(values: list[int | None], texts: list[str]) -> pa.RecordBatch:
    return pa.record_batch({"n": pa.array(values, pa.int64()), "s": pa.array(texts)})


_rows = st.tuples(st.one_of(st.none(), st.integers(-(2**40), 2**40)), st.text(max_size=12))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=40), max_size=20),
    st.one_of(st.none(), st.integers(1, 30)),
    st.integers(1, 30),
)
def test_bytes_same_bytes_same_order_and_bounded(
    chunks: list[bytes], max_rows: int | None, max_bytes: int
) -> None:
    out = Flow.from_iterable(chunks).rebatch(max_rows=max_rows, max_bytes=max_bytes).to_list()
    assert b"".join(out) == b"".join(chunks)
    bound = max_bytes if max_rows is None else min(max_rows, max_bytes)
    assert all(0 < len(piece) <= bound for piece in out)
    assert all(isinstance(piece, bytes) for piece in out)
    # greedy: no two neighbours could have been one output
    assert all(len(a) + len(b) > bound for a, b in itertools.pairwise(out))


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.lists(_rows, max_size=15), max_size=8),
    st.one_of(st.none(), st.integers(1, 20)),
    st.one_of(st.none(), st.integers(200, 2_000)),
)
def test_record_batches_same_rows_same_order_and_bounded(
    batches: list[list[tuple[int | None, str]]], max_rows: int | None, max_bytes: int | None
) -> None:
    if max_rows is None and max_bytes is None:
        max_rows = 7
    inputs = [_batch([r[0] for r in rows], [r[1] for r in rows]) for rows in batches]
    out = Flow.from_iterable(inputs).rebatch(max_rows=max_rows, max_bytes=max_bytes).to_list()
    rows_in = [row for batch in inputs for row in batch.to_pylist()]
    rows_out = [row for batch in out for row in batch.to_pylist()]
    assert rows_out == rows_in
    for batch in out:
        assert batch.num_rows > 0
        if max_rows is not None:
            assert batch.num_rows <= max_rows
        if max_bytes is not None:
            assert batch.nbytes <= max_bytes


def test_large_batches_are_sliced_without_copying() -> None:
    source = pa.record_batch({"n": pa.array(range(1_000), pa.int64())})
    out = Flow.just(source).rebatch(max_rows=100).to_list()
    assert [batch.num_rows for batch in out] == [100] * 10
    base = source.column(0).buffers()[1].address
    assert [batch.column(0).buffers()[1].address for batch in out] == [base] * 10


def test_demand_bounds_what_is_read() -> None:
    pulled: list[int] = []

    def source() -> Any:
        for index in range(100):
            pulled.append(index)
            yield b"x" * 10

    recorder = RecordingSubscriber[bytes](initial_request=2)
    Flow.from_iterable(source()).rebatch(max_bytes=25).subscribe(recorder)
    assert recorder.elements == [b"x" * 25, b"x" * 25]
    assert len(pulled) == 5  # 2 x 25 bytes need 5 inputs, not one more
    recorder.cancel()


def test_a_row_larger_than_max_bytes_is_an_error() -> None:
    wide = _batch([1], ["y" * 500])
    recorder = RecordingSubscriber[Any](initial_request=10)
    Flow.just(wide).rebatch(max_bytes=100).subscribe(recorder)
    assert isinstance(recorder.error, ValueError)
    assert str(recorder.error).startswith("rebatch(max_bytes=100): a single row of ")


def test_mixed_elements_are_an_error() -> None:
    recorder = RecordingSubscriber[Any](initial_request=10)
    Flow.just(b"ab", _batch([1], ["a"])).rebatch(max_rows=10).subscribe(recorder)
    assert isinstance(recorder.error, TypeError)
    assert str(recorder.error) == (
        "rebatch() cannot mix bytes and RecordBatch elements in one stream"
    )


def test_other_elements_are_an_error() -> None:
    recorder = RecordingSubscriber[Any](initial_request=10)
    Flow.just(1).rebatch(max_rows=10).subscribe(recorder)
    assert isinstance(recorder.error, TypeError)
    assert str(recorder.error) == "rebatch() takes pyarrow.RecordBatch or bytes elements, got int"


def test_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match=r"^rebatch\(\) needs max_rows=, max_bytes= or both$"):
        Flow.just(b"a").rebatch()
    with pytest.raises(ValueError, match=r"^max_bytes must be positive, got 0$"):
        Flow.just(b"a").rebatch(max_bytes=0)


class _Chunks:
    """``count`` times ``b"abc"`` then ``tail``, re-iterable and lazy (the TCK asks for 2**31)."""

    def __init__(self, count: int, tail: bytes) -> None:
        self._count = count
        self._tail = tail

    def __iter__(self) -> Iterator[bytes]:
        yield from itertools.repeat(b"abc", self._count)
        if self._tail:
            yield self._tail


class TestRebatchTck(PublisherVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        if elements == MAX_DEMAND:
            return Flow.from_iterable(itertools.repeat(b"abc")).rebatch(max_bytes=2)
        # 3 bytes per input, 2 per output: 2 * elements bytes make exactly ``elements``
        full, rest = divmod(2 * elements, 3)
        return Flow.from_iterable(_Chunks(full, b"ab"[:rest])).rebatch(max_bytes=2)

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return Flow.error(RuntimeError("TCK: failed publisher")).rebatch(max_rows=2)


def test_a_subscriber_cancelling_from_inside_on_next_gets_no_further_piece() -> None:
    subscriber = _CancelOnFirst()
    Flow.just(b"abcdef").rebatch(max_bytes=2).subscribe(subscriber)
    subscriber.request(3)  # one input cut into three pieces: the first on_next cancels
    assert subscriber.elements == [b"ab"]
    assert not subscriber.terminated


class _CancelOnFirst(RecordingSubscriber[Any]):
    """Cancels from inside its first ``on_next``."""

    def on_next(self, element: Any) -> None:
        super().on_next(element)
        self.cancel()
