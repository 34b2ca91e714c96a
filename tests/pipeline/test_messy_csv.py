"""Messy CSV as people write it: lone carriage returns, CRLF, quotes, line breaks in
values, files that gained or dropped a column. Every record written is a result row or a
dead letter, and the dead-letter file holds every dead letter the summary counts."""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactive_streams.cli import main
from reactive_streams.files import (
    DEAD_LETTER_COLUMN,
    DeadLetter,
    FormatError,
    SplitReader,
    open_reader,
    plan_splits,
)
from reactive_streams.pipeline import DeadLetterLimit, PipelineConfig
from reactive_streams.pipeline._diagnostics import QueryProgress
from reactive_streams.pipeline._inputs import ColumnChanges, plan_inputs
from reactive_streams.pipeline._read_parts import PartsRead
from reactive_streams.pipeline._splits import DeadLetterSplitter, merge_dead_letters

from .conftest import SPARK_MARKS

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession


def _read_all(paths: list[Path]) -> tuple[list[dict[str, object]], list[DeadLetter]]:
    """Every file of ``paths`` read whole as the executors read it: rows, dead letters."""
    plan = plan_inputs(paths)
    rows: list[dict[str, object]] = []
    letters: list[DeadLetter] = []
    for split in plan_splits(plan.files):
        for batch in SplitReader(plan.schema, chunk_rows=3).batches(split):
            dead = batch.column(DEAD_LETTER_COLUMN)
            rows.extend(
                batch.filter(pc.is_null(dead)).drop_columns([DEAD_LETTER_COLUMN]).to_pylist()
            )
            letters.extend(DeadLetter.from_json(text) for text in dead.drop_null().to_pylist())
    return rows, letters


# -- a lone CR inside a value is data (as Spark's multiLine CSV reader reads it) ------------

TWEETS = (
    b"id,text,n\n"
    b"1,hello,1\n"
    b"2,one\rtwo\rthree\rfour,2\n"  # what pandas writes for text with carriage returns
    b'3,"quoted\rand, a comma",3\n'
    b"4,x\ry,4\n"
    b"5,ok,5\n"
)


def test_a_lone_cr_in_an_unquoted_value_is_part_of_the_value(tmp_path: Path) -> None:
    path = tmp_path / "tweets.csv"
    path.write_bytes(TWEETS)
    rows, letters = _read_all([path])
    assert letters == []
    assert rows == [
        {"id": 1, "text": "hello", "n": 1},
        {"id": 2, "text": "one\rtwo\rthree\rfour", "n": 2},
        {"id": 3, "text": "quoted\rand, a comma", "n": 3},
        {"id": 4, "text": "x\ry", "n": 4},
        {"id": 5, "text": "ok", "n": 5},
    ]


def test_a_refused_record_with_a_lone_cr_is_one_dead_letter_with_its_text(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tweets.csv"
    path.write_bytes(b"id,text\n1,a\rb,extra\n2,c\r\n")
    rows, letters = _read_all([path])
    assert rows == [{"id": 2, "text": "c"}]  # a CRLF still ends a record
    assert [(letter.position, letter.record, letter.reason, letter.raw) for letter in letters] == [
        (2, 0, "expected 2 fields, found 3", "1,a\rb,extra")
    ]


def test_a_file_whose_lines_end_in_a_lone_cr_is_refused_at_its_header(tmp_path: Path) -> None:
    from reactive_streams.pipeline import PipelineUsageError

    path = tmp_path / "mac.csv"
    path.write_bytes(b"a,b\r1,2\r3,4\r")
    with pytest.raises(PipelineUsageError, match=r"carriage return alone \(old Mac style\)"):
        plan_inputs([path])


# -- every dead letter is kept, each with its record number -------------------------------


def _same_line_letters(source: str) -> list[DeadLetter]:
    """Five refused records that start on one line (each its own record number)."""
    return [
        DeadLetter(
            source=source,
            position=2,
            position_kind="line",
            reason="expected 3 fields, found 1",
            raw=f"piece {index}",
            record=index,
        )
        for index in range(5)
    ]


def test_a_dead_letter_carries_its_record_number() -> None:
    letter = _same_line_letters("a.csv")[3]
    text = letter.to_json()
    assert json.loads(text) == {
        "source": "a.csv",
        "line": 2,
        "record": 3,
        "reason": "expected 3 fields, found 1",
        "raw": "piece 3",
    }
    assert DeadLetter.from_json(text) == letter


def test_the_merge_keeps_every_record_refused_on_one_line(tmp_path: Path) -> None:
    parts = tmp_path / "parts"
    parts.mkdir()
    letters = _same_line_letters("a.csv")
    (parts / "one.jsonl").write_text("".join(letter.to_json() + "\n" for letter in letters[:3]))
    # A retried task wrote two of them again, with the other two.
    (parts / "two.jsonl").write_text("".join(letter.to_json() + "\n" for letter in letters[1:]))
    target = tmp_path / "dead-letters.jsonl"
    assert merge_dead_letters(parts, target, ()) == letters
    assert [json.loads(line)["record"] for line in target.read_text().splitlines()] == [
        0,
        1,
        2,
        3,
        4,
    ]


def test_the_limit_on_the_executors_counts_every_record_refused_on_one_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes(b"id,text\n1,a\n")
    plan = plan_inputs([path])
    config = PipelineConfig(inputs=(path,), output=tmp_path / "out", checkpoint=tmp_path / "ck")
    read = PartsRead(config, plan, QueryProgress(), [], splits=1, order=plan_splits(plan.files))
    parts = read._open_parts()  # what the read on the executors opens first
    parts.mkdir(parents=True)
    letters = _same_line_letters(str(path))
    (parts / "part.jsonl").write_text("".join(letter.to_json() + "\n" for letter in letters))
    limit = DeadLetterLimit.parse("3")
    assert read.limit_message(limit, 1, final=False) == (
        "5 dead letters, more than --max-dead-letters 3"
    )
    assert read.finish() == []
    assert read.limit_message(limit, 1, final=True) == (
        "5 dead letters, more than --max-dead-letters 3"
    )
    assert len(config.dead_letter_path.read_text().splitlines()) == 5


# -- files that gained or dropped a column --------------------------------------------------


def test_files_are_read_by_column_name_with_nulls_for_missing_columns(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("id,v\n1,10\n2,20\n")
    (tmp_path / "b.csv").write_text("w,id,v\nx,3,30\n")  # a new column, in another order
    (tmp_path / "c.csv").write_text("id,w\n4,y\n")  # drops v
    plan = plan_inputs([tmp_path])
    assert plan.schema.names == ["id", "v", "w"]
    assert plan.column_changes == (
        ColumnChanges(str(tmp_path / "a.csv"), (), ("w",)),
        ColumnChanges(str(tmp_path / "b.csv"), ("w",), ()),
        ColumnChanges(str(tmp_path / "c.csv"), (), ("v",)),
    )
    assert (
        plan.column_changes[2].describe()
        == f"{tmp_path / 'c.csv'}: no column(s) ['v'] (read as null)"
    )
    rows, letters = _read_all([tmp_path])
    assert letters == []
    assert rows == [
        {"id": 1, "v": 10, "w": None},
        {"id": 2, "v": 20, "w": None},
        {"id": 3, "v": 30, "w": "x"},
        {"id": 4, "v": None, "w": "y"},
    ]


def test_a_value_that_does_not_fit_the_widened_type_is_still_a_dead_letter(
    tmp_path: Path,
) -> None:
    lines = "\n".join(f"{index},{index}" for index in range(20))
    (tmp_path / "a.csv").write_text(f"id,v\n{lines}\n")
    lines = "\n".join(f"{index},w{index}" for index in range(19))
    (tmp_path / "b.csv").write_text(f"id,w\n{lines}\nnot a number,x\n")
    rows, letters = _read_all([tmp_path])
    assert len(rows) == 39
    assert [
        (letter.source, letter.position, letter.reason.split(":")[0]) for letter in letters
    ] == [(str(tmp_path / "b.csv"), 21, "column 'id'")]


def test_a_parquet_file_without_a_column_reads_it_as_null(tmp_path: Path) -> None:
    pq.write_table(pa.table({"id": [1, 2], "v": [1.5, 2.5]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": [3]}), tmp_path / "b.parquet")
    plan = plan_inputs([tmp_path])
    assert plan.column_changes == (ColumnChanges(str(tmp_path / "b.parquet"), (), ("v",)),)
    rows, letters = _read_all([tmp_path])
    assert letters == []
    assert rows == [{"id": 1, "v": 1.5}, {"id": 2, "v": 2.5}, {"id": 3, "v": None}]
    kept = SplitReader(plan.schema, keep=("id",))  # reads only what it must
    (split,) = [split for split in plan_splits(plan.files) if split.path.name == "b.parquet"]
    assert pa.Table.from_batches(list(kept.batches(split))).to_pylist() == [
        {"id": 3, DEAD_LETTER_COLUMN: None}
    ]


def test_a_header_naming_a_column_the_stream_lacks_is_refused(tmp_path: Path) -> None:
    from reactive_streams.files import InputFile

    path = tmp_path / "a.csv"
    path.write_text("id,surprise\n1,2\n")
    with pytest.raises(
        FormatError,
        match=r"a\.csv: the header names \['id', 'surprise'\], expected some of the columns "
        r"\['id', 'v'\]$",
    ):
        open_reader(InputFile.of(path), ["id", "v"])


# -- the property: records written = rows + dead letters = the dead-letter file ------------

_PIECES = ["a", "1", " ", ",", '"', "\n", "\r", "\r\n", "x"]


def _field(text: str) -> str:
    """As pandas (Python's csv module) writes it: quoted when it holds a delimiter, a quote
    or a line feed; a lone carriage return is left unquoted."""
    if any(char in text for char in ',"\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


@st.composite
def _messy_files(draw: st.DrawFn) -> tuple[list[tuple[str, bytes]], int]:
    """CSV files (name, bytes) of random messy records, and how many records they hold."""
    values = st.lists(st.sampled_from(_PIECES), max_size=5).map("".join)
    columns = ["id", "text"]
    files: list[tuple[str, bytes]] = []
    written = 0
    for number in range(draw(st.integers(1, 3))):
        if number and draw(st.booleans()):  # a column added, or one dropped
            if "extra" not in columns:
                columns = [*columns, "extra"]
            elif len(columns) > 2:
                columns = [name for name in columns if name != "text"]
        ordered = draw(st.permutations(columns))
        end = draw(st.sampled_from(["\n", "\r\n"]))
        lines = [",".join(ordered)]
        for index in range(draw(st.integers(0, 12))):
            kind = draw(st.sampled_from(["good", "good", "good", "short", "long", "bad id"]))
            if kind == "short":  # too few fields (never a blank line)
                record = ["short"]
            else:
                record = [str(index) if name == "id" else _field(draw(values)) for name in ordered]
                if kind == "long":
                    record.append("one too many")
                elif kind == "bad id":
                    record[ordered.index("id")] = "not a number"
            lines.append(",".join(record))
            written += 1
        files.append((f"part-{number}.csv", (end.join(lines) + end).encode()))
    return files, written


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(_messy_files(), st.integers(1, 4), st.integers(8, 64))
def test_every_record_written_is_a_row_or_a_dead_letter_in_the_file(
    tmp_path_factory: pytest.TempPathFactory,
    messy: tuple[list[tuple[str, bytes]], int],
    chunk_rows: int,
    every: int,
) -> None:
    files, written = messy
    directory = tmp_path_factory.mktemp("messy")
    for name, data in files:
        (directory / name).write_bytes(data)
    if not written:
        return
    plan = plan_inputs([directory])
    # Checkpoints every few bytes: a split read from each boundary, as the executors do.
    splits = plan_splits(plan.files, every=every)
    parts = directory / "parts"
    splitter = DeadLetterSplitter(str(parts), tuple(plan.schema.names))
    reader = SplitReader(plan.schema, chunk_rows=chunk_rows)
    rows = dead = 0
    for split in splits:
        edges = [0, *split.boundaries, split.records]
        for start, stop in itertools.pairwise(edges):
            for _ in range(2):  # each piece read twice: a retried task
                for batch in reader.batches(split, start, stop):
                    kept = splitter(batch).num_rows
                    rows += kept
                    dead += batch.num_rows - kept
    assert rows + dead == 2 * written
    target = directory / "dead-letters.jsonl"
    letters = merge_dead_letters(parts, target, splits)
    assert 2 * len(letters) == dead
    assert (len(target.read_text().splitlines()) if letters else 0) == len(letters)


# -- the whole run, on both read paths -------------------------------------------------------

MESSY_FILES = {
    "a.csv": (
        b"id,text\n"
        b"1,plain\n"
        b'2,"quoted, with a comma"\n'
        b"3,pandas\rlone\rcr\n"
        b"4,bad,one too many\n"
        b'5,"a line\nbreak"\n'
        b'6,"a crlf\r\ninside"\n'
    ),
    "b.csv": b"id,text,extra\r\n7,t,e\r\n8,u\rv,f\r\n9,short\r\n",
    "c.csv": b"text,id\nw,10\n",
}
MESSY_RECORDS = 10
MESSY_DEAD = 2  # 4 (a field too many) and 9 (a field too few)


def _run_messy(tmp_path: Path, read_on: str, limit: str) -> tuple[int, str, dict[str, object]]:
    data = tmp_path / "in"
    data.mkdir(exist_ok=True)
    for name, content in MESSY_FILES.items():
        (data / name).write_bytes(content)
    out = tmp_path / f"out-{read_on}-{limit}"
    summary = tmp_path / f"summary-{read_on}-{limit}.json"
    result = CliRunner().invoke(
        main,
        ["pipeline", "--quiet", "--input", str(data), "--output", str(out), "--read-on", read_on,
         "--sql", "SELECT id, text, extra FROM events", "--max-dead-letters", limit,
         "--summary-json", str(summary)],
    )  # fmt: skip
    return result.exit_code, result.stderr, json.loads(summary.read_text())


@pytest.mark.parametrize("read_on", ["executors", "driver"])
def test_a_messy_input_is_read_whole_on_both_paths(
    spark: SparkSession, tmp_path: Path, read_on: str
) -> None:
    del spark  # the command shares the session of the test process
    code, err, summary = _run_messy(tmp_path, read_on, str(MESSY_DEAD))
    assert code == 0, err
    assert summary["input_rows"] == MESSY_RECORDS
    assert summary["dead_letters"] == MESSY_DEAD
    assert summary["rows_into_spark"] == MESSY_RECORDS - MESSY_DEAD
    dead_file = tmp_path / f"out-{read_on}-{MESSY_DEAD}" / "dead-letters.jsonl"
    letters = [json.loads(line) for line in dead_file.read_text().splitlines()]
    assert [(letter["line"], letter["record"]) for letter in letters] == [(5, 3), (4, 2)]
    assert summary["column_changes"] == [
        {"file": str(tmp_path / "in" / "a.csv"), "added": [], "missing": ["extra"]},
        {"file": str(tmp_path / "in" / "b.csv"), "added": ["extra"], "missing": []},
        {"file": str(tmp_path / "in" / "c.csv"), "added": [], "missing": ["extra"]},
    ]
    result = pq.read_table(tmp_path / f"out-{read_on}-{MESSY_DEAD}" / "result.parquet")
    by_id = {row["id"]: row for row in result.to_pylist()}
    assert sorted(by_id) == [1, 2, 3, 5, 6, 7, 8, 10]
    assert by_id[3]["text"] == "pandas\rlone\rcr"
    assert (by_id[8]["text"], by_id[8]["extra"]) == ("u\rv", "f")
    assert (by_id[10]["text"], by_id[10]["extra"]) == ("w", None)


def test_one_dead_letter_more_than_the_limit_fails_the_default_path(
    spark: SparkSession, tmp_path: Path
) -> None:
    del spark
    code, err, summary = _run_messy(tmp_path, "executors", str(MESSY_DEAD - 1))
    assert code == 1
    assert err.splitlines() == [
        f"Error: the pipeline failed: {MESSY_DEAD} dead letters, more than --max-dead-letters "
        f"{MESSY_DEAD - 1}"
    ]
    assert summary["dead_letters"] == MESSY_DEAD


for _mark in SPARK_MARKS:
    test_a_messy_input_is_read_whole_on_both_paths = _mark(
        test_a_messy_input_is_read_whole_on_both_paths
    )
    test_one_dead_letter_more_than_the_limit_fails_the_default_path = _mark(
        test_one_dead_letter_more_than_the_limit_fails_the_default_path
    )


def test_a_messy_input_over_rsocket_keeps_every_dead_letter(
    spark: SparkSession, tmp_path: Path
) -> None:
    from reactive_streams.pipeline import Pipeline
    from reactive_streams.rsocket import serve

    from .conftest import run_to_end
    from .test_read_remote import _producer

    data = tmp_path / "in"
    data.mkdir()
    for name, content in MESSY_FILES.items():
        (data / name).write_bytes(content)
    route = _producer(data, 2, "SELECT id, text, extra FROM events")
    with serve(route.routes()) as server:
        pipe = Pipeline(
            PipelineConfig(
                input_url=f"rsocket://127.0.0.1:{server.port}/flights",
                output=tmp_path / "out",
                sql="SELECT id, text, extra FROM events",
            )
        )
        run_to_end(pipe, spark)
        result = pipe.finish()
        pipe.close()
    assert result.status == "completed", result.error
    progress = result.progress
    assert (progress.records_read, progress.dead_letters) == (MESSY_RECORDS, MESSY_DEAD)
    lines = (tmp_path / "out" / "dead-letters.jsonl").read_text().splitlines()
    assert [(json.loads(line)["line"], json.loads(line)["record"]) for line in lines] == [
        (5, 3),
        (4, 2),
    ]
    texts = {
        row["id"]: row["text"]
        for row in pq.read_table(tmp_path / "out" / "result.parquet").to_pylist()
    }
    assert texts[3] == "pandas\rlone\rcr"


for _mark in SPARK_MARKS:
    test_a_messy_input_over_rsocket_keeps_every_dead_letter = _mark(
        test_a_messy_input_over_rsocket_keeps_every_dead_letter
    )
