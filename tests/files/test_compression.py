"""Compressed CSV and JSON Lines files (gzip, zstd): read through pyarrow's codecs."""

from __future__ import annotations

import gzip
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams.files import (
    InputFile,
    SplitReader,
    count_records,
    format_of,
    header,
    list_files,
    plan_splits,
    sample,
)

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = pa.schema([("id", pa.int64()), ("text", pa.string())])


def _write(path: Path, text: str) -> Path:
    data = text.encode()
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(data))
    else:  # .zst
        with pa.output_stream(str(path), compression="zstd") as stream:
            stream.write(data)
    return path


def _rows(count: int) -> str:
    return "id,text\n" + "".join(f'{i},"line {i}\nand more"\n' for i in range(count))


@pytest.mark.parametrize("name", ["in.csv.gz", "in.csv.zst", "in.tsv.gz", "in.jsonl.gz"])
def test_a_compressed_file_is_planned_and_read_from_any_offset(tmp_path: Path, name: str) -> None:
    if name.startswith("in.jsonl"):
        text = "".join(f'{{"id": {i}, "text": "t{i}"}}\n\n' for i in range(3_000))
    elif ".tsv" in name:
        text = "id\ttext\n" + "".join(f"{i}\tt{i}\n" for i in range(3_000))
    else:
        text = _rows(3_000)
    path = _write(tmp_path / name, text)
    (item,) = list_files([tmp_path])
    assert item.compression == ("gzip" if name.endswith(".gz") else "zstd")
    assert not item.seekable
    assert header(item) == (["id", "text"], True)
    (split,) = plan_splits([item], every=4_096)
    assert count_records(split) == 3_000
    assert split.boundaries == ()  # nothing to seek to: micro-batches end anywhere
    reader = SplitReader(SCHEMA, chunk_rows=500)
    for start in (0, 1, 1_499, 2_999):
        table = pa.Table.from_batches(list(reader.batches(split, start)))
        assert table.column("id").to_pylist() == list(range(start, 3_000))
    del path


def test_the_schema_is_inferred_from_a_compressed_sample(tmp_path: Path) -> None:
    path = _write(tmp_path / "in.csv.gz", _rows(10))
    names, records = sample(InputFile.of(path))
    assert names == ["id", "text"]
    assert records[0] == {"id": "0", "text": "line 0\nand more"}


def test_extensions() -> None:
    from pathlib import Path

    assert format_of(Path("a.csv.zstd")) == ("csv", "zstd")
    assert format_of(Path("a.JSONL.GZ")) == ("jsonl", "gzip")
    assert format_of(Path("a.gz")) is None
    with pytest.raises(ValueError, match=r"Parquet file compressed as a whole"):
        InputFile.of(Path("a.parquet.gz"))
