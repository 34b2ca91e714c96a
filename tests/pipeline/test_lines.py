"""``_Lines``: lines, blocks and skipped lines of a file, against a plain ``split``.

Property tests with small blocks and a small record bound, so that lines cross blocks,
over-long lines occur and the cursor meets every boundary.
"""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams.pipeline import _formats
from reactive_streams.pipeline._formats import _Lines, _Overlong

MAX = 12  # the record bound in these tests
BLOCK = 7  # the read size in these tests


def _reference(data: bytes) -> list[bytes | int]:
    """What ``next_line`` returns for ``data``: each line, or an over-long line's length."""
    lines: list[bytes | int] = []
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):  # the last line, without a newline
            lines.append(len(line) if len(line) > MAX else line)
        elif len(line) - 1 >= MAX:
            lines.append(len(line))
        else:
            lines.append(line)
    return lines


def _shown(item: bytes | _Overlong | None) -> bytes | int | None:
    return item.length if isinstance(item, _Overlong) else item


files = st.lists(
    st.sampled_from([b"", b"a", b"bb", b"x" * 5, b"y" * 11, b"z" * 12, b"w" * 30]),
    max_size=12,
).flatmap(
    lambda parts: st.tuples(st.just(b"\n".join(parts)), st.booleans()).map(
        lambda pair: pair[0] + (b"\n" if pair[1] and pair[0] else b"")
    )
)


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_formats, "CSV_BLOCK_BYTES", BLOCK)


@settings(max_examples=300, deadline=None)
@given(data=files, skip=st.integers(min_value=0, max_value=15))
def test_skipping_then_reading_gives_the_lines_after_the_skipped_ones(
    data: bytes, skip: int
) -> None:
    expected = _reference(data)
    lines = _Lines(io.BytesIO(data), max_record=MAX)
    assert lines.skip_lines(skip) == min(skip, len(expected))
    got = []
    while (item := lines.next_line()) is not None:
        got.append(_shown(item))
    assert got == expected[skip:]


@settings(max_examples=300, deadline=None)
@given(data=files, steps=st.lists(st.sampled_from(["line", "block", "skip2"]), max_size=20))
def test_lines_blocks_and_skips_interleaved_cover_the_file_once(
    data: bytes, steps: list[str]
) -> None:
    expected = _reference(data)
    lines = _Lines(io.BytesIO(data), max_record=MAX)
    got: list[bytes | int | str] = []  # "skipped" for each line skip_lines passed
    for step in [*steps, *["line"] * (len(expected) + 1)]:
        if step == "skip2":
            got.extend(["skipped"] * lines.skip_lines(2))
            continue
        item = lines.next_line() if step == "line" else lines.next_block(BLOCK)
        if item is None:
            continue
        if isinstance(item, _Overlong):
            got.append(item.length)
        else:  # a block is whole lines: compare it line by line
            got.extend(item.splitlines(keepends=True))
    flat = [entry for entry in got if entry != "skipped"]
    assert len(got) == len(expected)
    assert flat == [line for line, seen in zip(expected, got, strict=True) if seen != "skipped"]
