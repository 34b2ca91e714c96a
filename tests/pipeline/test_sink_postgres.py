"""``--sink postgresql://...``: exactly once into a real PostgreSQL, checked against Parquet.

The server is a throwaway cluster started by the ``postgres`` fixture (``postgres.py``);
without PostgreSQL's binaries these tests skip, except under ``CI=true``.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest
from click.testing import CliRunner

from reactive_streams.cli import main
from reactive_streams.pipeline import PipelineUsageError

from .conftest import BRIDGES, PIPELINE_TIMEOUT
from .postgres import PostgresServer, start_server, wait_until
from .sinks import (
    APPENDED,
    GROUPED,
    expected_appended,
    flights,
    parquet_rows,
    run,
    same,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession

SOURCE = str(Path(__file__).resolve().parents[2] / "src")
UTC = dt.UTC


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    server = start_server()
    try:
        yield server
    finally:
        server.remove()


def _table() -> str:
    return f"t_{uuid.uuid4().hex[:10]}"


def _target(
    server: PostgresServer, table: str, *, stream: str = "s", retry_for: float = 5.0
) -> Any:
    from reactive_streams.pipeline._postgres import PostgresTarget

    return PostgresTarget.from_url(server.url(table), stream=stream, retry_for=retry_for)


def _rows(server: PostgresServer, table: str, order: str) -> list[tuple[Any, ...]]:
    return server.execute(f"SELECT * FROM {table} ORDER BY {order}")


SCHEMA = pa.schema(
    [("origin", pa.string()), ("hour", pa.timestamp("us", tz="UTC")), ("n", pa.int64()),
     ("delay", pa.float64())]
)  # fmt: skip


def _batch(*rows: tuple[str | None, int, int, float | None]) -> pa.Table:
    return pa.table(
        {
            "origin": [row[0] for row in rows],
            "hour": [dt.datetime(2013, 1, 1, row[1], tzinfo=UTC) for row in rows],
            "n": [row[2] for row in rows],
            "delay": [row[3] for row in rows],
        },
        schema=SCHEMA,
    )


# -- the target alone ----------------------------------------------------------------------


def test_update_mode_upserts_on_the_keys_and_a_replay_writes_nothing(
    postgres: PostgresServer,
) -> None:
    table = _table()
    target = _target(postgres, table)
    try:
        target.check(mode="update", keys=("origin", "hour"), columns=None)
        target.prepare(SCHEMA, mode="update", keys=("origin", "hour"))
        assert target.write(0, _batch(("EWR", 5, 1, 1.5), (None, 5, 2, None), ("JFK", 5, 3, 0.1)))
        # the next micro-batch changes two groups; a null key is one group, as in Spark
        assert target.write(1, _batch(("EWR", 5, 4, -2.0), (None, 5, 5, math.inf)))
        assert not target.write(1, _batch(("EWR", 5, 99, 0.0)))  # a replay: nothing
        assert not target.write(0, _batch(("LGA", 5, 99, 0.0)))
    finally:
        target.close()
    hour = dt.datetime(2013, 1, 1, 5, tzinfo=UTC)
    assert _rows(postgres, table, "origin NULLS FIRST") == [
        (None, hour, 5, math.inf),
        ("EWR", hour, 4, -2.0),
        ("JFK", hour, 3, 0.1),
    ]
    assert postgres.execute(
        "SELECT target, batch_id FROM reactive_streams_progress WHERE stream_id = 's' "
        "AND target = %s",
        table,
    ) == [(table, 1)]


def test_complete_mode_replaces_the_contents_and_append_mode_adds_rows(
    postgres: PostgresServer,
) -> None:
    complete, append = _table(), _table()
    for table, mode in ((complete, "complete"), (append, "append")):
        target = _target(postgres, table, stream=f"s-{table}")
        try:
            target.check(mode=mode, keys=(), columns=None)
            target.prepare(SCHEMA, mode=mode, keys=())
            assert target.write(0, _batch(("EWR", 1, 1, 0.5), ("JFK", 1, 2, 0.25)))
            assert target.write(1, _batch(("EWR", 1, 3, 1.0)))
            assert not target.write(1, _batch(("EWR", 1, 3, 1.0)))  # replayed: not twice
            assert target.write(2, _batch())  # an empty micro-batch is one too
        finally:
            target.close()
    hour = dt.datetime(2013, 1, 1, 1, tzinfo=UTC)
    assert _rows(postgres, complete, "origin") == []  # the last (empty) result
    assert _rows(postgres, append, "origin, n") == [
        ("EWR", hour, 1, 0.5), ("EWR", hour, 3, 1.0), ("JFK", hour, 2, 0.25),
    ]  # fmt: skip


def test_strings_that_need_quoting_and_empty_strings_arrive_as_they_are(
    postgres: PostgresServer,
) -> None:
    table = _table()
    schema = pa.schema([("text", pa.string()), ("flag", pa.bool_()), ("day", pa.date32())])
    values = ['a "quoted", text\nwith a newline', "", None, "\\N", "  spaced  "]
    batch = pa.table(
        {"text": values, "flag": [True, False, None, True, False],
         "day": [dt.date(2013, 1, day) for day in range(1, 6)]},
        schema=schema,
    )  # fmt: skip
    target = _target(postgres, table)
    try:
        target.check(mode="append", keys=(), columns=None)
        target.prepare(schema, mode="append", keys=())
        target.write(0, batch)
    finally:
        target.close()
    assert [row[0] for row in _rows(postgres, table, "day")] == values


# -- refused before Spark starts -------------------------------------------------------------


def _refused(*options: str, env: dict[str, str] | None = None) -> str:
    """Run the command with the default query; it must exit 2 with one line."""
    result = CliRunner(env=env).invoke(main, ["pipeline", "--quiet", *options])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_wrong_password_is_refused_in_one_line(postgres: PostgresServer, tmp_path: Path) -> None:
    url = postgres.url(_table(), password="wrong")
    line = _refused("--sink", url, "--output", str(tmp_path / "out"))
    assert line.startswith(f"Error: --sink {url.replace(':wrong@', ':***@')}: cannot connect:")
    assert "password authentication failed" in line
    assert "wrong" not in line.split("@", 1)[0]  # the password is never shown


def test_a_password_in_the_query_is_hidden_too(postgres: PostgresServer, tmp_path: Path) -> None:
    url = postgres.url(_table(), password=None) + "&password=wrong"
    line = _refused("--sink", url, "--output", str(tmp_path / "out"))
    assert "password authentication failed" in line
    assert "password=***" in line
    assert "wrong" not in line


def test_an_unreachable_server_is_refused_in_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    line = _refused(
        "--sink", f"postgresql://rs@127.0.0.1:{port}/postgres?table=t",
        "--output", str(tmp_path / "out"),
    )  # fmt: skip
    assert "cannot connect" in line
    assert "Connection refused" in line


def test_a_table_with_other_columns_is_refused_before_spark(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    table = _table()
    postgres.execute(f"CREATE TABLE {table} (origin text, flights bigint)")
    line = _refused("--sink", postgres.url(table), "--output", str(tmp_path / "out"))
    assert f'table "{table}" exists with other columns (origin, flights)' in line
    assert "drop it, or choose another table=" in line


def test_no_permission_is_refused_in_one_line(postgres: PostgresServer, tmp_path: Path) -> None:
    table = _table()
    role = f"r_{uuid.uuid4().hex[:8]}"
    postgres.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw'")
    postgres.execute(f"CREATE SCHEMA {role}s")
    postgres.execute(f"GRANT USAGE ON SCHEMA {role}s TO {role}")  # usage, not create
    url = f"postgresql://{role}:pw@127.0.0.1:{postgres.port}/postgres?table={role}s.{table}"
    line = _refused("--sink", url, "--output", str(tmp_path / "out"))
    assert f'no permission to create tables in schema "{role}s"' in line
    # an existing table the role may only read
    postgres.execute(f"CREATE TABLE {role}s.{table} (a bigint)")
    postgres.execute(
        f"CREATE TABLE {role}s.reactive_streams_progress (stream_id text, target text, "
        "batch_id bigint NOT NULL, committed_at timestamptz, PRIMARY KEY (stream_id, target))"
    )
    postgres.execute(f"GRANT SELECT, INSERT, UPDATE ON {role}s.reactive_streams_progress TO {role}")
    postgres.execute(f"GRANT SELECT ON {role}s.{table} TO {role}")
    line = _refused("--sink", url, "--output", str(tmp_path / "out"))
    assert f'no INSERT, UPDATE permission on table "{table}"' in line


def test_a_url_without_a_table_is_refused(tmp_path: Path) -> None:
    line = _refused("--sink", "postgresql://rs@127.0.0.1/postgres", "--output", str(tmp_path))
    assert line == (
        "Error: --sink postgresql://rs@127.0.0.1/postgres: name the table, as in "
        "postgresql://USER@HOST/DB?table=NAME"
    )


def test_the_password_may_come_from_pgpassword(postgres: PostgresServer) -> None:
    from reactive_streams.pipeline._postgres import PostgresTarget

    url = postgres.url(_table(), password=None)
    target = PostgresTarget.from_url(url, stream="s", retry_for=1.0)
    with pytest.raises(PipelineUsageError, match="cannot connect"):
        target.check(mode="append", keys=(), columns=None)
    target.close()
    os.environ["PGPASSWORD"] = "s3cret-pw"
    try:
        target = PostgresTarget.from_url(url, stream="s", retry_for=1.0)
        target.check(mode="append", keys=(), columns=None)  # connects: no error
        target.close()
    finally:
        del os.environ["PGPASSWORD"]


# -- whole runs, against the Parquet result of the same query -----------------------------


@pytest.mark.parametrize(
    ("mode", "sql", "keys", "order"),
    [
        ("update", GROUPED, ("origin", "hour"), ["origin", "hour"]),
        ("complete", GROUPED, (), ["origin", "hour"]),
        ("append", APPENDED, (), ["id"]),
    ],
)
@pytest.mark.spark
@pytest.mark.timeout(400)
@pytest.mark.skipif(not BRIDGES, reason="needs pyspark (the spark extra)")
def test_each_mode_equals_the_parquet_result_of_the_same_query(
    postgres: PostgresServer, spark: SparkSession, tmp_path: Path, *,
    mode: str, sql: str, keys: tuple[str, ...], order: list[str],
) -> None:  # fmt: skip
    data = flights(tmp_path / "flights.csv")
    table = _table()
    run(spark, tmp_path, "file", sql, mode=mode, sink=None, keys=keys, data=data)
    result = run(
        spark, tmp_path, "sink", sql, mode=mode, sink=postgres.url(table), keys=keys, data=data
    )
    assert result.output_path is None
    assert result.sink is not None
    assert result.progress.batches >= 10  # 1,200 records, 100 per micro-batch
    assert not (tmp_path / "sink" / "result.parquet").exists()
    expected = parquet_rows(tmp_path / "file" / "result.parquet", order)
    columns = ", ".join(f"{name} NULLS LAST" for name in order)
    same(_rows(postgres, table, columns), expected)


@pytest.mark.spark
@pytest.mark.timeout(400)
@pytest.mark.skipif(not BRIDGES, reason="needs pyspark (the spark extra)")
def test_the_database_restarted_mid_run_is_waited_for_and_the_result_is_exact(
    postgres: PostgresServer, spark: SparkSession, tmp_path: Path
) -> None:
    from reactive_streams.pipeline import Pipeline, PipelineConfig

    data = flights(tmp_path / "flights.csv")
    table = _table()
    run(spark, tmp_path, "file", APPENDED, mode="append", sink=None, data=data)
    config = PipelineConfig(
        inputs=(data,), sql=APPENDED, output=tmp_path / "sink", sink=postgres.url(table),
        max_records_per_trigger=50, read_on="driver", sink_retry_for=120.0,
    )  # fmt: skip
    pipe = Pipeline(config)
    restarted = threading.Event()

    def restart() -> None:
        try:
            wait_until(lambda: postgres.committed(table) >= 0, 240, "a micro-batch")
            postgres.stop("fast")  # ends the pipeline's connection, as a restart does
            assert pipe.target is not None
            target = pipe.target
            wait_until(lambda: target.retries >= 1, 240, "a retry")
            postgres.start()
        finally:
            restarted.set()

    pipe.prepare()
    thread = threading.Thread(target=restart, daemon=True)
    thread.start()
    try:
        pipe.start(spark)
        assert pipe.wait(PIPELINE_TIMEOUT)
        result = pipe.finish()
    finally:
        pipe.close()
        assert restarted.wait(60)
    assert result.status == "completed", result.error
    assert any("tried again after a lost connection" in note for note in result.notes)
    same(_rows(postgres, table, "id"), parquet_rows(tmp_path / "file" / "result.parquet", ["id"]))


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(not BRIDGES, reason="needs pyspark (the spark extra)")
def test_the_pipeline_killed_and_run_again_on_its_checkpoint_has_no_duplicate_and_no_gap(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    data = flights(tmp_path / "flights.csv")
    table = _table()
    command = [
        sys.executable, "-m", "reactive_streams", "pipeline", "--input", str(data),
        "--sql", APPENDED, "--sink", postgres.url(table), "--output", str(tmp_path / "out"),
        "--checkpoint", str(tmp_path / "checkpoint"), "--max-records-per-trigger", "50",
        "--read-on", "driver", "--quiet",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": SOURCE}
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        wait_until(
            lambda: first.poll() is None and postgres.committed(table) >= 3,
            300,
            "three micro-batches in the table",
        )
        first.kill()  # SIGKILL: no clean stop, mid-stream
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=60)
        assert first.stderr is not None
        first.stderr.close()
    partial = postgres.execute(f"SELECT count(*) FROM {table}")[0][0]
    second = subprocess.run(
        command, check=False, capture_output=True, text=True, env=env, timeout=400
    )
    assert second.returncode == 0, second.stderr
    expected = expected_appended(data)
    rows = postgres.execute(f"SELECT id, count(*) FROM {table} GROUP BY id ORDER BY id")
    assert [row[0] for row in rows] == [row[0] for row in expected]  # nothing missing
    assert all(count == 1 for _, count in rows)  # nothing twice
    assert 0 < partial < len(expected)  # the kill really was mid-stream


def test_update_mode_needs_a_unique_index_on_the_keys_of_an_existing_table(
    postgres: PostgresServer,
) -> None:
    table = _table()
    postgres.execute(
        f"CREATE TABLE {table} (origin text, hour timestamptz, n bigint, delay float8)"
    )
    target = _target(postgres, table)
    try:
        target.check(mode="update", keys=("origin", "hour"), columns=SCHEMA.names)
        with pytest.raises(
            PipelineUsageError,
            match=rf'table "{table}" has no unique index on the key \(origin, hour\), which '
            rf"update mode upserts on: CREATE UNIQUE INDEX ON {table} \(origin, hour\)$",
        ):
            target.prepare(SCHEMA, mode="update", keys=("origin", "hour"))
        postgres.execute(f"CREATE UNIQUE INDEX ON {table} (hour, origin)")
        target.prepare(SCHEMA, mode="update", keys=("origin", "hour"))  # any column order
        assert target.write(0, _batch(("EWR", 5, 1, 1.5)))
    finally:
        target.close()


def test_a_schema_that_does_not_exist_is_refused(postgres: PostgresServer) -> None:
    from reactive_streams.pipeline._postgres import PostgresTarget

    url = postgres.url("nowhere.t")
    target = PostgresTarget.from_url(url, stream="s", retry_for=1.0)
    try:
        with pytest.raises(PipelineUsageError, match=r'schema "nowhere" does not exist$'):
            target.check(mode="append", keys=(), columns=None)
    finally:
        target.close()
