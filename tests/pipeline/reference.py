"""The default query computed with pandas: what the pipeline's result must equal."""

from __future__ import annotations

import pandas as pd

from reactive_streams.pipeline import DEFAULT_KEYS


def default_query_with_pandas(flights: pd.DataFrame) -> pd.DataFrame:
    """Per origin and UTC hour of ``time_hour``: flights, cancelled, mean and max delay.

    Returns the rows sorted by ``DEFAULT_KEYS``, with UTC timestamps and a fresh index.
    """
    frame = pd.DataFrame(
        {
            "origin": flights["origin"],
            "window_start": pd.to_datetime(flights["time_hour"], utc=True).dt.floor("h"),
            "cancelled": flights["dep_time"].isna(),
            "dep_delay": flights["dep_delay"],
        }
    )
    grouped = frame.groupby(["origin", "window_start"], sort=True)
    result = grouped.agg(
        flights=("cancelled", "size"),
        cancelled=("cancelled", "sum"),
        avg_dep_delay=("dep_delay", "mean"),
        max_dep_delay=("dep_delay", "max"),
    ).reset_index()
    result["window_end"] = result["window_start"] + pd.Timedelta(hours=1)
    result["flights"] = result["flights"].astype("int64")
    result["cancelled"] = result["cancelled"].astype("int64")
    columns = [*DEFAULT_KEYS, "flights", "cancelled", "avg_dep_delay", "max_dep_delay"]
    return result[columns].sort_values(list(DEFAULT_KEYS)).reset_index(drop=True)


def assert_same_result(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Counts and keys exactly; means and maxima to 1e-9 (NaN where both have no value)."""
    actual = actual.sort_values(list(DEFAULT_KEYS)).reset_index(drop=True)
    assert list(actual.columns) == list(expected.columns)
    assert len(actual) == len(expected)
    for column in ("origin", "flights", "cancelled"):
        assert actual[column].tolist() == expected[column].tolist(), column
    for column in ("window_start", "window_end"):
        stamps = pd.to_datetime(actual[column], utc=True)
        assert (stamps == expected[column]).all(), column
    for column in ("avg_dep_delay", "max_dep_delay"):
        left = actual[column].astype("float64").to_numpy()
        right = expected[column].astype("float64").to_numpy()
        both_missing = pd.isna(left) & pd.isna(right)
        assert (pd.isna(left) == pd.isna(right)).all(), column
        diff = abs(left[~both_missing] - right[~both_missing])
        assert (diff <= 1e-9 * (1 + abs(right[~both_missing]))).all(), column
