"""``reactive-streams pipeline`` refuses bad input with one line and exit status 2."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from reactive_streams.cli import main

if TYPE_CHECKING:
    from pathlib import Path


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["pipeline", "--quiet", *args])
    return result.exit_code, result.stdout, result.stderr


def _csv(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _assert_one_line_error(code: int, stdout: str, stderr: str, pattern: str) -> None:
    assert code == 2, (code, stdout, stderr)
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    assert re.match(pattern, lines[0]), lines[0]


def test_missing_input(tmp_path: Path) -> None:
    code, out, err = _run("--input", str(tmp_path / "nope.csv"), "--output", str(tmp_path / "o"))
    _assert_one_line_error(code, out, err, r"^Error: input not found: .*nope\.csv$")


def test_unreadable_file(tmp_path: Path) -> None:
    bad = _csv(tmp_path / "broken.parquet", "this is not parquet")
    code, out, err = _run("--input", str(bad), "--output", str(tmp_path / "o"))
    _assert_one_line_error(code, out, err, r"^Error: cannot read .*broken\.parquet: ")


def test_empty_input(tmp_path: Path) -> None:
    empty = _csv(tmp_path / "empty.csv", "origin,time_hour\n")
    code, out, err = _run("--input", str(empty), "--output", str(tmp_path / "o"))
    _assert_one_line_error(code, out, err, r"^Error: the input is empty: no records in ")


def test_output_directory_not_writable(tmp_path: Path) -> None:
    blocker = _csv(tmp_path / "a-file", "x")  # a directory cannot be made under a file
    code, out, err = _run("--output", str(blocker / "out"))
    _assert_one_line_error(
        code, out, err, r"^Error: output directory is not writable: .*a-file/out \(.+\)$"
    )


def test_default_query_needs_its_columns(tmp_path: Path) -> None:
    data = _csv(tmp_path / "a.csv", "x,y\n1,2\n")
    code, out, err = _run("--input", str(data), "--output", str(tmp_path / "o"))
    _assert_one_line_error(
        code, out, err, r"^Error: the default query needs the column\(s\) origin, time_hour"
    )


def test_remote_is_refused_clearly(tmp_path: Path) -> None:
    code, out, err = _run("--remote", "sc://localhost:15002", "--output", str(tmp_path / "o"))
    _assert_one_line_error(
        code, out, err, r"^Error: --remote sc://localhost:15002: the pipeline needs a classic"
    )


def test_master_and_remote_together(tmp_path: Path) -> None:
    code, out, err = _run("--master", "local[1]", "--remote", "sc://x", "--output", str(tmp_path))
    _assert_one_line_error(
        code, out, err, r"^Error: --master and --remote cannot be used together$"
    )


def test_update_mode_without_keys(tmp_path: Path) -> None:
    data = _csv(tmp_path / "a.csv", "x,y\n1,2\n")
    code, out, err = _run(
        "--input", str(data), "--sql", "SELECT x FROM events", "--output-mode", "update",
        "--output", str(tmp_path / "o"),
    )  # fmt: skip
    _assert_one_line_error(
        code, out, err, r"^Error: --output-mode update needs the result's key columns: "
    )


def test_missing_java_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java here
    code, out, err = _run("--output", str(tmp_path / "o"))
    _assert_one_line_error(code, out, err, r"^Error: Spark needs Java 17\+ .*install")


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    code, _, err = _run("--debug", "--input", str(tmp_path / "nope.csv"))
    assert code == 2
    assert "Traceback" in err
    assert err.rstrip().splitlines()[-1].startswith("Error: input not found: ")


def test_bad_option_value_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = _run("--format", "xml")
    assert code == 2
    assert "Invalid value for '--format'" in err


def test_input_errors_are_found_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[object] = []
    monkeypatch.setattr(
        "reactive_streams.pipeline._run.SparkSessionStarter", lambda factory: started.append(1)
    )
    _csv(tmp_path / "a.csv", "origin,x\nJFK,1\n")
    _csv(tmp_path / "b.csv", "origin,y\nJFK,1\n")
    for args in (("--input", str(tmp_path / "nope.csv")), ("--input", str(tmp_path))):
        code, _, _ = _run(*args, "--output", str(tmp_path / "o"))
        assert code == 2
    assert started == []  # the JVM (seconds to start) was never asked for


def test_summary_json_is_written_on_a_usage_error(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    code, _, _ = _run("--input", str(tmp_path / "nope.csv"), "--summary-json", str(summary))
    assert code == 2
    assert json.loads(summary.read_text()) == {
        "status": "error",
        "exit_code": 2,
        "error": f"input not found: {tmp_path / 'nope.csv'}",
    }


def test_partition_by_needs_parquet(tmp_path: Path) -> None:
    for fmt in ("csv", "jsonl"):
        code, out, err = _run(
            "--partition-by", "origin", "--format", fmt, "--output", str(tmp_path / "o")
        )
        _assert_one_line_error(
            code,
            out,
            err,
            r"^Error: --partition-by writes a partitioned Parquet dataset: use --format parquet "
            rf"\(not {fmt}\)$",
        )
    code, out, err = _run("--partition-by", "origin", "--partition-by", "origin")
    _assert_one_line_error(code, out, err, r"^Error: --partition-by origin: given twice$")


def test_the_help_names_partition_by() -> None:
    result = CliRunner().invoke(main, ["pipeline", "--help"])
    assert result.exit_code == 0
    assert re.search(r"--partition-by COL\s+Write the result as a Parquet dataset", result.stdout)


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (("--schema", "id BIGIN"), r"^Error: --schema: type BIGIN of 'id' is not supported at "),
        (("--schema", "id BIGINT,"), r"^Error: --schema: expected a column name, found the end "),
        (
            ("--timestamp-format", "YYYY-MM-DD"),
            r"^Error: --timestamp-format: timestamp format 'YYYY-MM-DD' has no strptime "
            r"directive",
        ),
        (
            ("--schema", "id BIGINT, x DOUBLE"),
            r"^Error: columns of .*a\.csv do not match --schema: expected \['id', 'x'\], "
            r"found \['origin', 'x'\]$",
        ),
    ],
)
def test_bad_schema_and_formats_are_refused_before_spark(
    tmp_path: Path, args: tuple[str, ...], pattern: str
) -> None:
    data = _csv(tmp_path / "a.csv", "origin,x\nJFK,1\n")
    code, out, err = _run("--input", str(data), *args, "--output", str(tmp_path / "o"))
    _assert_one_line_error(code, out, err, pattern)


def test_schema_options_are_for_input_files() -> None:
    code, out, err = _run("--schema", "a BIGINT", "--null-value", "-")
    _assert_one_line_error(
        code,
        out,
        err,
        r"^Error: --schema, --null-value: only for --input files \(the default input has its "
        r"own schema\)$",
    )


def test_the_help_names_the_schema_options() -> None:
    result = CliRunner().invoke(main, ["pipeline", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "--schema DDL The input's schema as Spark DDL" in text
    assert "--null-value TEXT[,TEXT...] Text read as null in every column" in text
    assert "--timestamp-format FORMAT strptime format of timestamp text" in text


def test_chunk_rows_reaches_the_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    import reactive_streams.pipeline as pipeline_package
    from reactive_streams.pipeline import DEFAULT_CHUNK_ROWS, PipelineConfig, PipelineUsageError

    seen: list[PipelineConfig] = []

    class Recorded:
        def __init__(self, config: PipelineConfig) -> None:
            seen.append(config)
            raise PipelineUsageError("recorded")

    monkeypatch.setattr(pipeline_package, "Pipeline", Recorded)
    assert _run("--chunk-rows", "7")[0] == 2
    assert _run()[0] == 2
    assert [config.chunk_rows for config in seen] == [7, DEFAULT_CHUNK_ROWS]
    help_text = CliRunner().invoke(main, ["pipeline", "--help"]).output
    assert f"[default: {DEFAULT_CHUNK_ROWS}]" in " ".join(help_text.split())


def test_chunk_rows_must_be_positive(tmp_path: Path) -> None:
    code, _, err = _run("--chunk-rows", "0", "--output", str(tmp_path))
    assert code == 2
    assert "Invalid value for '--chunk-rows': 0 is not in the range x>=1." in err


def test_an_rsocket_input_nobody_serves_and_a_token_without_one(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = str(tmp_path / "o")
    code, stdout, stderr = _run("--input", f"rsocket://127.0.0.1:{port}/flights", "--output", out)
    _assert_one_line_error(
        code,
        stdout,
        stderr,
        rf"^Error: --input rsocket://127.0.0.1:{port}/flights: tcp://127.0.0.1:{port} route "
        r"'flights': cannot connect: .*Connect call failed",
    )
    code, stdout, stderr = _run("--input", str(tmp_path), "--token", "t", "--output", out)
    _assert_one_line_error(code, stdout, stderr, r"^Error: --token is for an rsocket:// --input$")
    code, stdout, stderr = _run("--input", "rsocket://127.0.0.1/flights", "--output", out)
    _assert_one_line_error(code, stdout, stderr, r"^Error: --input rsocket://127.0.0.1/flights: ")


def test_the_token_comes_from_a_file_or_the_environment_and_argv_is_warned_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = str(tmp_path / "o")
    token_file = tmp_path / "token"
    token_file.write_text("t\n")
    token_file.chmod(0o600)
    # A token read from a file is a token: refused with a file input like --token.
    code, stdout, stderr = _run("--input", str(tmp_path), "--token-file", str(token_file),
                                "--output", out)  # fmt: skip
    _assert_one_line_error(code, stdout, stderr, r"^Error: --token is for an rsocket:// --input$")
    code, stdout, stderr = _run("--input", str(tmp_path), "--token", "t", "--token-file",
                                str(token_file), "--output", out)  # fmt: skip
    _assert_one_line_error(
        code, stdout, stderr, r"^Error: give the token once: --token or --token-file, not both$"
    )
    # REACTIVE_STREAMS_TOKEN, set for other runs, is no error for a run that reads files.
    monkeypatch.setenv("REACTIVE_STREAMS_TOKEN", "from-the-environment")
    code, stdout, stderr = _run("--input", str(tmp_path / "missing.csv"), "--output", out)
    _assert_one_line_error(code, stdout, stderr, r"^Error: input not found: ")


def test_credentials_in_a_route_url_are_dropped_and_never_printed(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"rsocket://reader:hunter2@127.0.0.1:{port}/flights"
    result = CliRunner().invoke(
        main, ["pipeline", "--quiet", "--input", url, "--output", str(tmp_path / "o")]
    )
    assert result.exit_code == 2
    assert "hunter2" not in result.output
    warning, error = result.stderr.splitlines()
    assert warning.startswith("Warning: the credentials in the --input URL are not used")
    assert error.startswith(f"Error: --input rsocket://127.0.0.1:{port}/flights: ")


@pytest.mark.parametrize(
    ("route", "message"),
    [
        ("r" * 248, r"^Error: --input: the route name is 248 UTF-8 bytes long, over the 247"),
        ("", r"^Error: --input rsocket://127.0.0.1:7000/: expected rsocket://HOST:PORT/ROUTE"),
    ],
)
def test_a_route_name_no_server_can_serve_is_refused(
    tmp_path: Path, route: str, message: str
) -> None:
    code, stdout, stderr = _run(
        "--input", f"rsocket://127.0.0.1:7000/{route}", "--output", str(tmp_path / "o")
    )
    _assert_one_line_error(code, stdout, stderr, message)


def test_a_url_of_another_scheme_names_the_supported_ones(tmp_path: Path) -> None:
    code, out, err = _run("--input", "kafka://broker:9092/events", "--output", str(tmp_path / "o"))
    _assert_one_line_error(
        code,
        out,
        err,
        r"^Error: --input kafka://broker:9092/events: the scheme kafka:// is not supported; "
        r".*rsocket://, rsocket\+ws://, rsocket\+wss://\)$",
    )


@pytest.mark.parametrize(("separator", "shown"), [(";", ";"), ("|", "|"), ("\t", "tab")])
def test_a_csv_separated_otherwise_names_the_delimiter_option(
    tmp_path: Path, separator: str, shown: str
) -> None:
    rows = ["id;city;amount", "1;Lyon;2.5", "2;Nice;3.0"]
    data = _csv(tmp_path / "sales.csv", "\n".join(rows).replace(";", separator) + "\n")
    code, out, err = _run("--input", str(data), "--output", str(tmp_path / "o"))
    _assert_one_line_error(
        code,
        out,
        err,
        rf"^Error: .*sales\.csv: the header is one column, .* --delimiter '{shown}'$",
    )
    assert not (tmp_path / "o").exists()


def test_a_delimiter_given_is_taken_at_its_word(tmp_path: Path) -> None:
    from reactive_streams.pipeline._inputs import plan_inputs

    data = _csv(tmp_path / "notes.csv", "a;b\nx;y\n")
    assert plan_inputs([data], delimiter=",").schema.names == ["a;b"]


def test_time_text_that_needs_a_format_is_named_at_planning(tmp_path: Path) -> None:
    from reactive_streams.pipeline._inputs import plan_inputs, time_text_notes

    rows = "".join(f"{i},{i + 10:02d}/01/2024 10:{i:02d}\n" for i in range(20))
    data = _csv(tmp_path / "t.csv", "id,ts\n" + rows)
    notes = time_text_notes(plan_inputs([data]))
    assert notes == [
        "column 'ts' holds time text ('10/01/2024 10:00') read as STRING; to read it as "
        "TIMESTAMP, add --timestamp-format '%d/%m/%Y %H:%M'"
    ]
    from reactive_streams.files import ConversionOptions

    given = ConversionOptions(timestamp_format="%d/%m/%Y %H:%M")
    plan = plan_inputs([data], options=given)
    assert str(plan.schema.field("ts").type).startswith("timestamp")
    assert time_text_notes(plan) == []


def test_spark_failing_to_cast_time_text_ends_with_the_option_to_use() -> None:
    from reactive_streams.pipeline._diagnostics import summarize_error

    message = (
        "An exception was raised by the Python Proxy. Return Message: Traceback (most recent "
        "call last):\n  ...\npyspark.errors.exceptions.captured.NumberFormatException: "
        "[CAST_INVALID_INPUT] The value '31/01/2024 10:00' of the type \"STRING\" cannot be "
        'cast to "TIMESTAMP" because it is malformed. Correct the value as per the syntax, '
        "or change its target type. Use `try_cast` to tolerate malformed input and return "
        "NULL instead. SQLSTATE: 22018"
    )
    line = summarize_error(RuntimeError(message))
    assert "\n" not in line
    assert "try_cast" not in line
    assert line.endswith(
        "; the input's time text ('31/01/2024 10:00') is read as TIMESTAMP with "
        "--timestamp-format '%d/%m/%Y %H:%M'"
    )


def test_a_failed_run_leaves_no_output_directory_it_created(tmp_path: Path) -> None:
    output = tmp_path / "new" / "out"
    code, out, err = _run("--input", str(tmp_path / "nope.csv"), "--output", str(output))
    assert code == 2, (out, err)
    assert not (tmp_path / "new").exists()  # nothing written: nothing left behind
    kept = tmp_path / "kept"
    kept.mkdir()
    code, out, err = _run("--input", str(tmp_path / "nope.csv"), "--output", str(kept))
    assert code == 2, (out, err)
    assert kept.is_dir()  # it was there before the run


@pytest.mark.parametrize(
    "expression",
    ["CAST(ts AS TIMESTAMP)", "ts::timestamp", "to_timestamp(`ts`)", "window(ts, '1 hour').start"],
)
def test_a_query_that_casts_time_text_spark_cannot_read_fails_before_spark(
    tmp_path: Path, expression: str
) -> None:
    rows = "".join(f"{i},{i + 10:02d}/01/2024 10:{i:02d}\n" for i in range(20))
    data = _csv(tmp_path / "t.csv", "id,ts\n" + rows)
    sql = f"SELECT {expression} AS t, count(*) AS n FROM events GROUP BY 1"
    code, out, err = _run("--input", str(data), "--sql", sql, "--output", str(tmp_path / "o"))
    _assert_one_line_error(
        code,
        out,
        err,
        r"^Error: --sql reads column 'ts' as a time, but its text \('10/01/2024 10:00'\) is "
        r"not a form Spark reads; to read it as TIMESTAMP, add --timestamp-format "
        r"'%d/%m/%Y %H:%M'$",
    )


def test_a_query_that_names_its_own_time_format_is_left_alone() -> None:
    from reactive_streams.pipeline._inputs import TimeText, check_time_casts

    found = [TimeText("ts", "10/01/2024 10:00", "%d/%m/%Y %H:%M")]
    check_time_casts("SELECT to_timestamp(ts, 'dd/MM/yyyy HH:mm') AS t FROM events", found)
    check_time_casts("SELECT CAST(tsx AS TIMESTAMP) FROM events", found)  # another column
    check_time_casts(None, found)
