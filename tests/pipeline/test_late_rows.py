"""A ``--sql`` query with a watermark: the rows it drops as late are counted and reported.

The input is made so that some records reach Spark in a micro-batch whose watermark has
already passed their window: ``--max-records-per-trigger`` is small, and the bridge serves
full triggers (one trigger of read-ahead), so micro-batch ``k`` holds records
``k * N ... (k + 1) * N - 1`` of the file. Which records are late is computed here from the
data; the summary must report exactly that many, and the result must equal a pandas
computation over the other records.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest
from click.testing import CliRunner

from reactive_streams.cli import main

from .conftest import SPARK_MARKS

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

pytestmark = SPARK_MARKS

PER_TRIGGER = 4
DELAY = dt.timedelta(minutes=10)
WINDOW = dt.timedelta(minutes=5)
START = dt.datetime(2024, 1, 1, 10, 0, tzinfo=dt.UTC)

SQL = """\
SELECT sensor,
       window.start AS window_start,
       window.end AS window_end,
       count(*) AS readings,
       sum(value) AS total
FROM events WATERMARK event_time DELAY OF INTERVAL 10 MINUTES
GROUP BY sensor, window(event_time, '5 minutes')"""

KEYS = ("sensor", "window_start", "window_end")

# (sensor, minutes after START), in stream order; PER_TRIGGER records per micro-batch.
READINGS: list[tuple[str, int]] = [
    ("a", 0), ("a", 1), ("b", 6), ("a", 31),  # batch 0: max 10:31
    ("a", 32), ("b", 33), ("a", 41), ("b", 34),  # batch 1: watermark 10:21 behind it
    ("a", 2), ("a", 3), ("b", 7), ("a", 42),  # batch 2: 10:02, 10:03 and 10:07 are late
    ("b", 12), ("a", 26), ("a", 50), ("b", 47),  # batch 3: 10:12 and 10:26 are late
    ("a", 22), ("b", 55),  # batch 4 (short): 10:22 is late
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Reading:
    sensor: str
    event_time: dt.datetime
    value: float
    batch: int

    @property
    def window_start(self) -> dt.datetime:
        return START + (self.event_time - START) // WINDOW * WINDOW

    @property
    def window_end(self) -> dt.datetime:
        return self.window_start + WINDOW


def _readings() -> list[Reading]:
    return [
        Reading(
            sensor, START + dt.timedelta(minutes=minute), float(index + 1), index // PER_TRIGGER
        )
        for index, (sensor, minute) in enumerate(READINGS)
    ]


def _late(readings: list[Reading]) -> list[bool]:
    """Which readings a windowed aggregation with a ``DELAY`` watermark drops as late.

    Spark drops a row of micro-batch ``k`` when its window ends at or before the watermark
    that applies to late rows in ``k``: the maximum event time seen in earlier batches minus
    the delay, taken either after batch ``k - 1`` (the freshest value) or after batch
    ``k - 2`` (Spark 3.5+ judges late rows by the previous batch's watermark). The data is
    chosen so that both give the same answer for every reading, so the expectation does
    not depend on that detail (nor on an empty micro-batch Spark may run in between).
    """
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

    def watermark_after(batch: int) -> dt.datetime:
        seen = [reading.event_time for reading in readings if reading.batch <= batch]
        return max(seen) - DELAY if seen else epoch

    late = []
    for reading in readings:
        freshest = watermark_after(reading.batch - 1)
        lagging = watermark_after(reading.batch - 2)
        assert (reading.window_end <= freshest) == (reading.window_end <= lagging), (
            f"the test data is ambiguous at {reading}"
        )
        late.append(reading.window_end <= lagging)
    return late


@pytest.mark.parametrize("read_on", ["executors", "driver"])
def test_rows_dropped_by_a_watermark_are_counted_and_left_out(
    spark: SparkSession, tmp_path: Path, read_on: str
) -> None:
    readings = _readings()
    late = _late(readings)
    dropped = [reading for reading, is_late in zip(readings, late, strict=True) if is_late]
    kept = [reading for reading, is_late in zip(readings, late, strict=True) if not is_late]
    assert len(dropped) >= 3  # the data does exercise the watermark
    # Spark counts late rows at the stateful operator, after the partial aggregation: the
    # two late readings of one group in batch 2 count once there. The summary counts rows.
    late_groups = {(r.batch, r.sensor, r.window_start) for r in dropped}
    assert len(late_groups) < len(dropped)
    # Some late readings fall in a group that has on-time readings too: the result shows
    # whether they were left out of it, not only whether their group is missing.
    kept_groups = {(r.sensor, r.window_start) for r in kept}
    assert any((r.sensor, r.window_start) in kept_groups for r in dropped)
    assert any((r.sensor, r.window_start) not in kept_groups for r in dropped)

    data = tmp_path / "readings.csv"
    data.write_text(
        "sensor,event_time,value\n"
        + "".join(f"{r.sensor},{r.event_time:%Y-%m-%dT%H:%M:%SZ},{r.value}\n" for r in readings),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    summary_file = tmp_path / "summary.json"
    key_options = [option for key in KEYS for option in ("--key", key)]
    run = CliRunner().invoke(
        main,
        ["pipeline", "--input", str(data), "--sql", SQL, "--output", str(out),
         "--max-records-per-trigger", str(PER_TRIGGER), "--output-mode", "update",
         *key_options, "--summary-json", str(summary_file), "--read-on", read_on],
    )  # fmt: skip
    assert run.exit_code == 0, (run.stdout, run.stderr)

    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    assert summary["status"] == "completed"
    assert summary["input_rows"] == summary["rows_into_spark"] == len(readings)
    assert summary["late_rows"] == len(dropped)
    assert summary["late_rows_counted_as"] == "input rows"
    assert re.search(rf"late rows dropped\s*│\s*{len(dropped)}\s*│", run.stdout), run.stdout

    frame = pd.DataFrame(
        {
            "sensor": [r.sensor for r in kept],
            "window_start": [r.window_start for r in kept],
            "value": [r.value for r in kept],
        }
    )
    expected = (
        frame.groupby(["sensor", "window_start"], sort=True)
        .agg(readings=("value", "size"), total=("value", "sum"))
        .reset_index()
    )
    expected["window_end"] = expected["window_start"] + WINDOW
    expected = expected[[*KEYS, "readings", "total"]]

    actual = pq.read_table(out / "result.parquet").to_pandas()
    actual = actual.sort_values(list(KEYS)).reset_index(drop=True)
    assert list(actual.columns) == list(expected.columns)
    assert summary["output_groups"] == len(actual) == len(expected)
    assert actual["sensor"].tolist() == expected["sensor"].tolist()
    for column in ("window_start", "window_end"):
        stamps = pd.to_datetime(actual[column], utc=True)
        assert stamps.tolist() == pd.to_datetime(expected[column], utc=True).tolist(), column
    assert actual["readings"].tolist() == expected["readings"].tolist()
    assert actual["total"].tolist() == expected["total"].tolist()  # small integers: exact


SORTED_SQL = """\
SELECT sensor,
       window.start AS window_start,
       window.end AS window_end,
       count(*) AS readings,
       sum(value) AS total
FROM events WATERMARK event_time DELAY OF INTERVAL 10 MINUTES
GROUP BY sensor, window(event_time, '1 hour')"""


def _sorted_readings(directory: Path) -> pd.DataFrame:
    """3,000 readings sorted by event time (a minute apart), in three files in order."""
    directory.mkdir()
    frame = pd.DataFrame(
        {
            "sensor": [("a", "b", "c")[index % 3] for index in range(3_000)],
            "event_time": [START + dt.timedelta(minutes=index) for index in range(3_000)],
            "value": [float(index % 17) for index in range(3_000)],
        }
    )
    for part in range(3):  # each file a contiguous stretch of time
        piece = frame.iloc[part * 1_000 : (part + 1) * 1_000]
        lines = [
            f"{r.sensor},{r.event_time:%Y-%m-%dT%H:%M:%SZ},{r.value}" for r in piece.itertuples()
        ]
        (directory / f"part-{part}.csv").write_text(
            "sensor,event_time,value\n" + "\n".join(lines) + "\n", encoding="utf-8"
        )
    return frame


@pytest.mark.parametrize("per_trigger", [400, 1_100, 5_000])
def test_input_sorted_by_event_time_loses_no_row_to_the_watermark_on_either_path(
    spark: SparkSession, tmp_path: Path, per_trigger: int
) -> None:
    frame = _sorted_readings(tmp_path / "in")
    frame["window_start"] = frame["event_time"].dt.floor("1h")
    expected = (
        frame.groupby(["sensor", "window_start"], sort=True)
        .agg(readings=("value", "size"), total=("value", "sum"))
        .reset_index()
    )
    key_options = [option for key in KEYS for option in ("--key", key)]
    results = {}
    for read_on in ("executors", "driver"):
        out = tmp_path / f"out-{read_on}"
        summary_file = tmp_path / f"summary-{read_on}.json"
        run = CliRunner().invoke(
            main,
            ["pipeline", "--input", str(tmp_path / "in"), "--sql", SORTED_SQL,
             "--output", str(out), "--max-records-per-trigger", str(per_trigger),
             "--output-mode", "update", *key_options, "--read-on", read_on,
             "--summary-json", str(summary_file), "--quiet"],
        )  # fmt: skip
        assert run.exit_code == 0, (run.stdout, run.stderr)
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
        assert summary["rows_into_spark"] == 3_000
        assert summary["late_rows"] == 0, read_on  # in order: nothing is late
        actual = pq.read_table(out / "result.parquet").to_pandas()
        results[read_on] = actual.sort_values(list(KEYS)).reset_index(drop=True)
    assert results["executors"].equals(results["driver"])
    actual = results["executors"]
    assert actual["readings"].tolist() == expected["readings"].tolist()
    assert actual["total"].tolist() == expected["total"].tolist()
    starts = pd.to_datetime(actual["window_start"], utc=True)
    assert starts.tolist() == pd.to_datetime(expected["window_start"], utc=True).tolist()


@pytest.mark.parametrize(
    "window",
    [("5 minutes", None, None), ("10 minutes", "5 minutes", None), ("1 hour", None, "7 minutes")],
)
def test_late_keys_are_the_end_of_the_last_window_spark_puts_a_row_in(
    spark: SparkSession, window: tuple[str, str | None, str | None]
) -> None:
    from pyspark.sql import functions as F

    from reactive_streams.pipeline._late import NO_KEY, LateRule

    duration, slide, start = window
    arguments = [duration, slide or duration, start or "0 seconds"]
    random = np.random.default_rng(7)
    # Around the epoch too: Spark's window arithmetic keeps a negative time's windows.
    micros = random.integers(-3 * 3_600_000_000, 30 * 3_600_000_000, size=400)
    micros[:3] = [0, -1, 300_000_000]
    frame = spark.createDataFrame([(int(value),) for value in micros], "m long")
    windows = (
        frame.select(F.timestamp_micros("m").alias("t"))
        .select(F.col("t"), F.window("t", *arguments).alias("w"))
        .groupBy("t")
        .agg(F.max("w.end").alias("last_end"))
        .select(F.unix_micros("t").alias("t"), F.unix_micros("last_end").alias("end"))
        .collect()
    )
    expected = {int(row["t"]): int(row["end"]) for row in windows}
    minute = 60_000_000
    sizes = {"5 minutes": 5, "10 minutes": 10, "1 hour": 60, "7 minutes": 7}
    rule = LateRule(
        "t",
        sizes[duration] * minute,
        sizes[slide or duration] * minute,
        sizes[start] * minute if start else 0,
    )
    times = pa.array([*micros.tolist(), None], pa.timestamp("us", tz="UTC"))
    keys = rule.keys(times)
    assert keys[-1] == NO_KEY
    assert {int(t): int(key) for t, key in zip(micros, keys, strict=False)} == expected


def test_late_rows_add_up_with_the_rows_the_result_holds_on_both_paths(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Out-of-order input: every input row is in the result's counts or counted late.

    The figure is checked against Spark's own result, not against a model of Spark's
    rule: whichever watermark Spark judges each micro-batch by, the rows it left out of
    the groups are the late rows the summary must report.
    """
    random = np.random.default_rng(11)
    minutes = np.sort(random.integers(0, 180, size=300)) + random.integers(-40, 1, size=300)
    stamps = [START + dt.timedelta(minutes=int(minute)) for minute in minutes]
    lines = [
        f"{('a', 'b', 'c')[index % 3]},{stamp:%Y-%m-%dT%H:%M:%SZ},1"
        for index, stamp in enumerate(stamps)
    ]
    data = tmp_path / "readings.csv"
    data.write_text("sensor,event_time,value\n" + "\n".join(lines) + "\n", encoding="utf-8")
    key_options = [option for key in KEYS for option in ("--key", key)]
    late = {}
    for read_on in ("executors", "driver"):
        out = tmp_path / f"out-{read_on}"
        summary_file = tmp_path / f"summary-{read_on}.json"
        run = CliRunner().invoke(
            main,
            ["pipeline", "--input", str(data), "--sql", SQL, "--output", str(out),
             "--max-records-per-trigger", "25", "--output-mode", "update", *key_options,
             "--read-on", read_on, "--summary-json", str(summary_file), "--quiet"],
        )  # fmt: skip
        assert run.exit_code == 0, (run.stdout, run.stderr)
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
        assert summary["rows_into_spark"] == len(lines)
        assert summary["late_rows_counted_as"] == "input rows"
        kept = int(pq.read_table(out / "result.parquet").column("readings").to_numpy().sum())
        assert kept + summary["late_rows"] == len(lines), read_on
        late[read_on] = summary["late_rows"]
    assert late["executors"] > 0  # the data does exercise the watermark
    assert late["executors"] == late["driver"]
