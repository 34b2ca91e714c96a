"""The pipeline's sinks on the flights x10: the Parquet file, PostgreSQL, Delta Lake.

Two measurements:

* ``pipeline``: ``reactive-streams pipeline`` with the default query (update mode) over
  the flights x10 (3,367,760 rows in 8 Parquet files, as ``bench_live.py`` builds them),
  once per sink: ``--output`` (the Parquet result file), ``--sink postgresql://...`` and
  ``--sink delta:PATH``; input rows per second of wall time, and the rows the sink was
  handed (the micro-batches' rows: each micro-batch holds the groups it changed);
* ``sink``: the sink alone, outside Spark: the result's rows (one per group) written again
  and again as micro-batches of ``--batch-rows`` rows with increasing batch ids, through
  the same ``SinkTarget.write`` the pipeline calls (PostgreSQL upserts, Delta merges), and
  the Parquet file written once with the same writer as the pipeline, as the reference.

PostgreSQL is a throwaway cluster started like the tests' (``tests/pipeline/postgres.py``:
Debian's binaries, ``fsync=off``), unless ``--postgres URL`` names one.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_sinks.py --runs 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench_live import _flights, _load, run_pipeline  # this folder: run as a script

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))


def sink_alone(target: Any, result: Any, batch_rows: int, rounds: int) -> tuple[float, int]:
    """Seconds and rows to write ``result`` ``rounds`` times in micro-batches."""
    rows = 0
    batch_id = 0
    started = time.monotonic()
    for _ in range(rounds):
        for start in range(0, result.num_rows, batch_rows):
            piece = result.slice(start, batch_rows)
            assert target.write(batch_id, piece)
            batch_id += 1
            rows += piece.num_rows
    return time.monotonic() - started, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="the flights this many times")
    parser.add_argument("--runs", type=int, default=2, help="pipeline runs per sink")
    parser.add_argument("--postgres", default=None, help="a server's URL (no table=)")
    parser.add_argument("--batch-rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-pipeline", action="store_true")
    args = parser.parse_args()

    import pyarrow.parquet as pq

    from reactive_streams.pipeline import DEFAULT_KEYS
    from reactive_streams.pipeline._sink_url import parse_sink

    server = None
    if args.postgres is None:
        from tests.pipeline.postgres import start_server

        server = start_server()
        base = server.url("t").split("?", 1)[0]
    else:
        base = args.postgres
    work = Path(tempfile.mkdtemp(prefix="bench-sinks-"))
    try:
        directory, rows = _flights(args.repeat)
        print(f"flights x{args.repeat}: {rows:,} rows; {_load()}")
        sinks = {
            "Parquet file (--output)": lambda run: (),
            "PostgreSQL (--sink postgresql://, update)": lambda run: (
                "--sink", f"{base}?table=bench_{run}_{uuid.uuid4().hex[:6]}"),
            "Delta Lake (--sink delta:, update)": lambda run: (
                "--sink", f"delta:{work / f'delta-{run}-{uuid.uuid4().hex[:6]}'}"),
        }  # fmt: skip
        result_file = None
        if not args.skip_pipeline:
            print("\n| sink | wall s (median) | input rows/s | result rows |")
            print("|---|---:|---:|---:|")
            for name, extra in sinks.items():
                walls, summary = [], {}
                for run in range(args.runs):
                    out = work / f"out-{len(walls)}-{uuid.uuid4().hex[:6]}"
                    wall, summary, _ = run_pipeline(str(directory), out, *extra(run))
                    walls.append(wall)
                    if result_file is None and (out / "result.parquet").exists():
                        result_file = out / "result.parquet"
                wall = statistics.median(walls)
                handed = summary.get("output_groups")
                print(f"| {name} | {wall:.1f} ({', '.join(f'{w:.1f}' for w in walls)}) | "
                      f"{rows / wall:,.0f} | {handed:,} |")  # fmt: skip
            print(f"\n{_load()}")
        if result_file is None:
            out = work / "reference"
            run_pipeline(str(directory), out)
            result_file = out / "result.parquet"
        result = pq.read_table(result_file)
        print(f"\nthe sink alone: the result ({result.num_rows:,} groups) written "
              f"{args.rounds} times in micro-batches of {args.batch_rows:,} rows")  # fmt: skip
        print("\n| sink | s | rows/s |")
        print("|---|---:|---:|")
        from reactive_streams.pipeline._output import ResultWriter

        started = time.monotonic()
        for _ in range(args.rounds):
            writer = ResultWriter(work, "parquet")
            writer.write(result)
            writer.commit()
        seconds = time.monotonic() - started
        print(f"| Parquet file (whole result rewritten) | {seconds:.2f} | "
              f"{result.num_rows * args.rounds / seconds:,.0f} |")  # fmt: skip
        targets = {
            "PostgreSQL upsert (COPY + INSERT ... ON CONFLICT)": f"{base}?table=alone_pg",
            "PostgreSQL append (COPY)": f"{base}?table=alone_pg_append",
            "Delta Lake merge": f"delta:{work / 'alone-delta'}",
            "Delta Lake append": f"delta:{work / 'alone-delta-append'}",
        }
        for name, url in targets.items():
            mode = "append" if "append" in name else "update"
            keys = DEFAULT_KEYS if mode == "update" else ()
            target = parse_sink(url, stream=uuid.uuid4().hex, retry_for=10)
            target.check(mode=mode, keys=keys, columns=result.schema.names)
            target.prepare(result.schema, mode=mode, keys=keys)
            try:
                seconds, written = sink_alone(target, result, args.batch_rows, args.rounds)
            finally:
                target.close()
            print(f"| {name} | {seconds:.2f} | {written / seconds:,.0f} |")
        print(f"\n{_load()}")
    finally:
        if server is not None:
            server.remove()


if __name__ == "__main__":
    main()
