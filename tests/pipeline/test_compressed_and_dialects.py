"""gzip and zstd inputs, and CSV dialects (``--delimiter``, ``--quote``, ``.tsv``)."""

from __future__ import annotations

import gzip
import json
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

from .conftest import SPARK_MARKS, sql_on_both_paths

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = SPARK_MARKS

SQL = "SELECT count(*) AS n, sum(id) AS s FROM events"


def test_gzip_and_zstd_files_read_exactly_on_both_paths(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    text = "id,text\n" + "".join(f'{i},"multi\nline {i}"\n' for i in range(3_000))
    (tmp_path / "in" / "a.csv.gz").write_bytes(gzip.compress(text.encode()))
    rows = "".join(json.dumps({"id": i, "text": f"t{i}"}) + "\n" for i in range(3_000, 5_000))
    with pa.output_stream(str(tmp_path / "in" / "b.jsonl.zst"), compression="zstd") as stream:
        stream.write(rows.encode())
    for read_on, found in sql_on_both_paths(tmp_path, [tmp_path / "in"], SQL).items():
        assert (found["n"], found["s"]) == (5_000, sum(range(5_000))), read_on
        assert (found["input_rows"], found["dead_letters"]) == (5_000, 0), read_on


def test_delimiter_and_quote_options(tmp_path: Path) -> None:
    data = tmp_path / "semi.csv"
    data.write_text(
        "id;text\n" + "".join(f"{i};'a;b\nc ''{i}'''\n" for i in range(1_000)), encoding="utf-8"
    )
    for read_on, found in sql_on_both_paths(
        tmp_path, [data], SQL, "--delimiter", ";", "--quote", "'"
    ).items():
        assert (found["n"], found["s"]) == (1_000, sum(range(1_000))), read_on
        assert found["dead_letters"] == 0, read_on
