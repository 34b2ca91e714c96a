"""``--max-dead-letters``: too many dead letters fail the run with exit status 1."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from typing import TYPE_CHECKING, TypeVar

import pytest
from click.testing import CliRunner

from reactive_streams.cli import main
from reactive_streams.pipeline import DeadLetterLimit, Pipeline, PipelineConfig, PipelineUsageError
from reactive_streams.pipeline._dead_letter import FRACTION_MIN_RECORDS

from .conftest import PIPELINE_TIMEOUT, SPARK_MARKS

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from pyspark.sql import SparkSession

F = TypeVar("F", bound="Callable[..., None]")


def _on_spark(test: F) -> F:
    """``SPARK_MARKS`` on one test (the module's other tests need no Spark)."""
    for mark in SPARK_MARKS:
        test = mark(test)
    return test


# -- the limit itself --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "count", "fraction"),
    [
        ("1000", 1000, None),
        ("0", 0, None),
        ("0.01", None, Fraction(1, 100)),
        (".5", None, Fraction(1, 2)),
        ("1%", None, Fraction(1, 100)),
        ("0.5%", None, Fraction(1, 200)),
    ],
)
def test_a_limit_is_a_count_or_a_fraction(
    text: str, count: int | None, fraction: Fraction | None
) -> None:
    limit = DeadLetterLimit.parse(text)
    assert (limit.text, limit.count, limit.fraction) == (text, count, fraction)


@pytest.mark.parametrize("text", ["-1", "1.0", "2.5", "100%", "1e3", "ten", "", "5."])
def test_anything_else_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(
        PipelineUsageError,
        match=rf"^--max-dead-letters {re.escape(text)}: expected a number of dead letters "
        r"\(1000\) or a fraction of the records read below 1 \(0\.01, or 1%\)$",
    ):
        DeadLetterLimit.parse(text)


def test_a_count_trips_above_it_not_at_it() -> None:
    limit = DeadLetterLimit.parse("1000")
    assert limit.exceeded(1000, 5000) is None
    assert limit.exceeded(1001, 5000) == "1,001 dead letters, more than --max-dead-letters 1000"
    assert limit.exceeded(3279, 3279) == "3,279 dead letters, more than --max-dead-letters 1000"


def test_a_fraction_trips_above_it_not_at_it() -> None:
    limit = DeadLetterLimit.parse("0.01")
    assert limit.exceeded(30, 3000) is None  # exactly 1%: exact arithmetic, no rounding
    assert limit.exceeded(31, 3000) == (
        "31 dead letters in 3,000 records read (1.03%), more than --max-dead-letters 0.01 "
        "(1% of the records read)"
    )


def test_while_running_a_fraction_waits_for_enough_records() -> None:
    limit = DeadLetterLimit.parse("1%")
    # The first record refused is 100% of one record: not a reason to stop yet.
    assert limit.exceeded(1, 1, read_at_most=1) is None
    assert limit.exceeded(500, FRACTION_MIN_RECORDS - 1, read_at_most=2000) is None
    # At the end every record read counts, however few.
    assert limit.exceeded(1, 1) is not None


def test_while_running_a_fraction_is_taken_of_the_most_records_read() -> None:
    limit = DeadLetterLimit.parse("0.25")
    # 600 dead letters in at least 1,000 records and at most 3,000: 20% or more, not
    # certainly more than 25%.
    assert limit.exceeded(600, 1000, read_at_most=3000) is None
    assert limit.exceeded(800, 1000, read_at_most=3000) == (
        "800 dead letters in at most 3,000 records read (at least 26.7%), more than "
        "--max-dead-letters 0.25 (25% of the records read)"
    )


def test_the_command_refuses_a_bad_limit_before_anything_runs(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["pipeline", "--quiet", "--max-dead-letters", "lots", "--output", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "Error: --max-dead-letters lots: expected a number of dead letters (1000) or a "
        "fraction of the records read below 1 (0.01, or 1%)"
    ]


def test_the_help_names_the_option() -> None:
    result = CliRunner().invoke(main, ["pipeline", "--help"])
    assert re.search(r"--max-dead-letters N\|FRACTION\s+Fail the run", result.stdout)


# -- on Spark, both read paths -------------------------------------------------------------

RECORDS = 3_000
BAD_EVERY = 20  # records 20, 40, ...: 150 dead letters, at most 5% of any prefix (few
# enough that the column is still inferred as a number: 90% of the values must fit)
DEAD = RECORDS // BAD_EVERY


def _many_bad_records(path: Path, records: int = RECORDS) -> Path:
    """``records`` flights-like records; every ``BAD_EVERY``-th has a delay that is text."""
    lines = ["origin,time_hour,dep_time,dep_delay"]
    for index in range(1, records + 1):
        delay = "soon" if index % BAD_EVERY == 0 else str(index % 60)
        lines.append(f"JFK,2013-01-01T{index % 24:02d}:00:00Z,{index},{delay}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(tmp_path: Path, read_on: str, limit: str) -> tuple[int, str, str, Path]:
    data = _many_bad_records(tmp_path / "flights.csv")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        ["pipeline", "--input", str(data), "--output", str(out), "--read-on", read_on,
         "--max-records-per-trigger", "500", "--max-dead-letters", limit],
        env={"COLUMNS": "300"},
    )  # fmt: skip
    return result.exit_code, result.stdout, result.stderr, out


@_on_spark
@pytest.mark.parametrize("read_on", ["driver", "executors"])
def test_more_dead_letters_than_the_count_fail_the_run(
    spark: SparkSession, tmp_path: Path, read_on: str
) -> None:
    code, out, err, directory = _run(tmp_path, read_on, str(DEAD - 1))
    assert code == 1, (out, err)
    # Only the last of the 150 dead letters exceeds 149: the message is the same whether
    # the limit tripped while the query ran or at its end.
    assert err.splitlines() == [
        f"Error: the pipeline failed: {DEAD:,} dead letters, more than --max-dead-letters "
        f"{DEAD - 1}"
    ]
    assert "Pipeline failed" in out  # the summary is printed
    assert re.search(rf"│ dead letters +│ +{DEAD} │", out)
    assert not list(directory.glob("result*")) and not list(directory.glob(".result*"))
    letters = (directory / "dead-letters.jsonl").read_text().splitlines()
    assert len(letters) == DEAD  # kept, whole
    assert json.loads(letters[0])["line"] == 1 + BAD_EVERY  # the header is line 1


@_on_spark
@pytest.mark.parametrize("read_on", ["driver", "executors"])
def test_more_dead_letters_than_the_fraction_fail_the_run(
    spark: SparkSession, tmp_path: Path, read_on: str
) -> None:
    code, out, err, directory = _run(tmp_path, read_on, "0.04")
    assert code == 1, (out, err)
    (line,) = err.splitlines()
    # While the query runs the figures are those of the moment, at the end the totals.
    assert re.fullmatch(
        r"Error: the pipeline failed: [0-9,]+ dead letters in (at most )?[0-9,]+ records read "
        r"\((at least )?[0-9.]+%\), more than --max-dead-letters 0\.04 \(4% of the records "
        r"read\)",
        line,
    ), line
    assert "Pipeline failed" in out
    assert not list(directory.glob("result*"))
    assert (directory / "dead-letters.jsonl").is_file()


@_on_spark
@pytest.mark.parametrize("read_on", ["driver", "executors"])
@pytest.mark.parametrize("limit", [str(DEAD), "0.05"])
def test_exactly_the_limit_does_not_fail_the_run(
    spark: SparkSession, tmp_path: Path, read_on: str, limit: str
) -> None:
    code, out, err, directory = _run(tmp_path, read_on, limit)
    assert code == 0, (out, err)
    assert (directory / "result.parquet").is_file()
    assert len((directory / "dead-letters.jsonl").read_text().splitlines()) == DEAD


@_on_spark
def test_the_limit_stops_the_query_while_it_runs(spark: SparkSession, tmp_path: Path) -> None:
    # Paced at 1,000 records/s, the 5,000 records take at least 5 s to read, and the
    # pipeline checks the limit every second while the query runs: it trips long before
    # the end (the 11th dead letter is record 220).
    data = _many_bad_records(tmp_path / "flights.csv", records=5_000)
    pipe = Pipeline(
        PipelineConfig(
            inputs=(data,),
            output=tmp_path / "out",
            rate=1_000,
            chunk_rows=200,
            max_records_per_trigger=500,
            max_dead_letters=DeadLetterLimit.parse("10"),
        )
    )
    pipe.prepare()
    try:
        pipe.start(spark)
        assert pipe.wait(PIPELINE_TIMEOUT)
    finally:
        result = pipe.finish()
        pipe.close()
    assert result.status == "failed"
    assert result.exit_code == 1
    assert re.fullmatch(r"[0-9]+ dead letters, more than --max-dead-letters 10", result.error)
    assert result.progress.records_read < 5_000  # stopped before the end
    assert result.dead_letter_path == tmp_path / "out" / "dead-letters.jsonl"
    assert len(result.dead_letter_path.read_text().splitlines()) == result.progress.dead_letters
    assert not (tmp_path / "out" / "result.parquet").exists()
