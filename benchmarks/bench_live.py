"""The main job over live network input: ``serve`` -> ``pipeline --input rsocket://``.

Four measurements, one subcommand each (every job a fresh process, the load average
printed before and after each run; the machine has 2 cores shared with others):

* ``throughput``: rows/s into Spark on the flights x10 (3,367,760 rows in 8 Parquet
  files), whole-process wall time of the Spark job, in alternating rounds of
  (a) ``reactive-streams serve`` on this machine read by ``reactive-streams pipeline
  --input rsocket://127.0.0.1:PORT/flights`` (the default query);
  (b) the same files read by ``reactive-streams pipeline --input DIR --read-on executors``;
  (c) Spark's own socket source (``spark.readStream.format("socket")``) fed the same rows as
  CSV lines by a small TCP server process, the lines parsed with ``split`` and the same
  aggregation (``DEFAULT_SQL``) in ``update`` mode, folded into the latest row per group
  as the pipeline's sink does, stopped when the folded counts add up to every row.
  Medians and best of each, and of the per-round ratios (a)/(b) and (a)/(c).
* ``scaling``: (a) with ``--master local-cluster[1,1,1024]`` and ``local-cluster[2,1,1024]``
  in alternating rounds, with every process's CPU seconds (``cpu_by_process.py``, plus the
  ``serve`` process).
* ``memory``: a live producer (this script's ``producer``: ``LivePartitions`` over an
  endless generator of the flights' batches, served on loopback) read by
  ``pipeline --input rsocket://...`` for ``--minutes`` minutes, then SIGTERM; the RSS of
  the producer, the pipeline's Python process and its driver JVM sampled every
  ``--sample`` seconds; growth after the warm-up (the first 60 s). The same run gives the
  live path's unthrottled rows/s (committed rows after the warm-up).
* ``latency``: the same with the producer rate-limited (``--rate`` rows/s, pushed from a
  thread through ``Flow.push_source``): p50 and p99 from a batch's arrival at the producer
  to the commit that released it (the route's ``R.stats``, as the pipeline's display
  shows), over the batches that arrived after the warm-up. Only here does the producer
  record every latency (its window replaced by a recording one, about 100 bytes a batch);
  the memory runs keep the route's own bounded window.

Usage::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_live.py throughput --rounds 3
    PYTHONPATH=src .venv/bin/python benchmarks/bench_live.py scaling --rounds 2
    PYTHONPATH=src .venv/bin/python benchmarks/bench_live.py memory --minutes 10
    PYTHONPATH=src .venv/bin/python benchmarks/bench_live.py latency --rate 60000 --minutes 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

import psutil
from bench_pipeline import compile_sources, write_files  # this folder: run as a script
from cpu_by_process import Accounting, run_accounted

HERE = Path(__file__).resolve()
SRC = HERE.parents[1] / "src"
DATA = Path(tempfile.gettempdir()) / "bench-live"
WARM_UP = 60.0


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    return env


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (5 min {five:.1f})"


def _flights(repeat: int) -> tuple[Path, int]:
    """The flights ``repeat`` times over as 8 Parquet files (written once, kept in /tmp)."""
    directory = DATA / f"flights-{repeat}x"
    count = DATA / f"flights-{repeat}x.rows"
    if not count.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        if directory.exists():
            for child in directory.iterdir():
                child.unlink()
            directory.rmdir()
        count.write_text(str(write_files(repeat, directory)))
    return directory, int(count.read_text())


# -- the peers ------------------------------------------------------------------------------


class Serve:
    """``reactive-streams serve`` over ``directory`` in a subprocess, until ``stop``."""

    def __init__(self, directory: Path, partitions: int, batch_rows: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reactive_streams", "serve", "--input", str(directory),
             "--port", "0", "--route", "flights", "--partitions", str(partitions),
             "--batch-rows", str(batch_rows)],
            env=_env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self.port = _port_from(self.process.stderr, r"on tcp://[^:]+:(\d+)", self.process)
        self.psutil = psutil.Process(self.process.pid)

    def cpu(self) -> float:
        times = self.psutil.cpu_times()
        return float(times.user + times.system)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


def _port_from(stream: IO[str] | None, pattern: str, process: subprocess.Popen[str]) -> int:
    """The port in the first line of ``stream`` matching ``pattern`` (60 s at most)."""
    assert stream is not None
    found: list[int] = []
    lines: list[str] = []

    def read() -> None:
        for line in stream:
            lines.append(line)
            match = re.search(pattern, line)
            if match:
                found.append(int(match.group(1)))
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=60)
    if not found:
        process.kill()
        raise SystemExit(f"no port from {process.args}:\n{''.join(lines)[-2000:]}")
    # Keep draining, so that the child never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in stream], daemon=True).start()
    return found[0]


def run_pipeline(
    source: str, out: Path, *extra: str, cpu: bool = False
) -> tuple[float, dict[str, Any], Accounting | None]:
    """Wall seconds, summary and (``cpu``) CPU accounting of ``reactive-streams pipeline``."""
    summary = out.with_suffix(".json")
    command = [sys.executable, "-m", "reactive_streams", "pipeline", "--quiet",
               "--input", source, "--output", str(out), "--summary-json", str(summary),
               *extra]  # fmt: skip
    started = time.monotonic()
    accounting: Accounting | None = None
    if cpu:
        accounting, completed = run_accounted(
            command, env=_env(), interval=0.25, timeout=1800, capture=True
        )
    else:
        completed = subprocess.run(
            command, capture_output=True, text=True, env=_env(), timeout=1800, check=False
        )
    wall = time.monotonic() - started
    if completed.returncode != 0:
        raise SystemExit(f"pipeline failed:\n{completed.stderr[-3000:]}")
    return wall, json.loads(summary.read_text()), accounting


FEEDER = r"""
import socket, sys
from pathlib import Path
import pyarrow.csv as csv, pyarrow.parquet as pq
directory = Path(sys.argv[1])
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
connection, _ = server.accept()
options = csv.WriteOptions(include_header=False, quoting_style="none")
sent = 0
with connection:
    for path in sorted(directory.glob("*.parquet")):
        for group in pq.ParquetFile(path).iter_batches(batch_size=50_000):
            sink = __import__("io").BytesIO()
            csv.write_csv(group, sink, options)
            connection.sendall(sink.getvalue())
            sent += group.num_rows
    # Spark's socket source never ends at EOF: keep the connection open until it goes.
    connection.shutdown(socket.SHUT_WR)
    connection.recv(1)
print(sent, flush=True)
"""

SOCKET_JOB = r"""
import sys, time, resource
import pyarrow as pa
from reactive_streams.pipeline import DEFAULT_KEYS, DEFAULT_SQL
from reactive_streams.pipeline._diagnostics import log4j_config as _log4j_config
from reactive_streams.spark.session import local_session

port, rows, names, slices = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4]
spark = local_session("local[2]", app_name="bench", log_level="OFF", conf={
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_log4j_config('OFF')}",
})
lines = (spark.readStream.format("socket").option("host", "127.0.0.1").option("port", port)
         .option("numPartitions", slices).load())
def column(name, kind):  # ANSI mode: an empty field is null, not an error
    return f"try_cast(split(value, ',')[{names.index(name)}] AS {kind}) AS {name}"
events = lines.selectExpr(
    column("origin", "STRING"), column("time_hour", "TIMESTAMP"),
    column("dep_time", "DOUBLE"), column("dep_delay", "DOUBLE"),
)
events.createOrReplaceTempView("events")
latest = None
counted = 0
def fold(batch, batch_id):  # the latest row per group, vectorised (as the pipeline's sink)
    global latest, counted
    table = batch.toArrow()
    if latest is not None:
        table = pa.concat_tables([latest, table])
    table = table.append_column("_row", pa.array(range(table.num_rows), pa.int64()))
    last = table.group_by(list(DEFAULT_KEYS)).aggregate([("_row", "max")])
    latest = table.take(last["_row_max"]).drop_columns(["_row"])
    counted = pa.compute.sum(latest["flights"]).as_py() or 0
query = spark.sql(DEFAULT_SQL).writeStream.outputMode("update").foreachBatch(fold).start()
deadline = time.monotonic() + 1500
while counted < rows and time.monotonic() < deadline and query.exception() is None:
    time.sleep(0.1)
query.stop()
if counted != rows:
    raise SystemExit(f"counted {counted} of {rows} rows: {query.exception()}")
print(latest.num_rows, counted, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
spark.stop()
"""


def run_socket(directory: Path, rows: int, slices: int) -> tuple[float, int, int]:
    """Spark's socket source fed ``directory``'s rows as CSV: wall seconds, groups, peak RSS."""
    import pyarrow.parquet as pq

    names = pq.read_schema(next(iter(sorted(directory.glob("*.parquet"))))).names
    feeder = subprocess.Popen(
        [sys.executable, "-c", FEEDER, str(directory)],
        env=_env(), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert feeder.stdout is not None
        port = int(feeder.stdout.readline())
        started = time.monotonic()
        completed = subprocess.run(
            [sys.executable, "-c", SOCKET_JOB, str(port), str(rows), ",".join(names), str(slices)],
            capture_output=True, text=True, env=_env(), timeout=1800, check=False,
        )  # fmt: skip
        wall = time.monotonic() - started
        if completed.returncode != 0:
            raise SystemExit(f"socket job failed:\n{completed.stderr[-3000:]}")
        groups, counted, peak = (int(x) for x in completed.stdout.split()[-3:])
        assert counted == rows, (counted, rows)
    finally:
        feeder.kill()
        feeder.wait(timeout=30)
    return wall, groups, peak


def run_served(
    directory: Path, work: Path, tag: str, *, partitions: int, batch_rows: int,
    master: str | None = None, cpu: bool = False,
) -> tuple[float, dict[str, Any], float, Accounting | None]:  # fmt: skip
    """(a): ``serve`` up first, then the timed pipeline; wall, summary, serve's CPU s."""
    served = Serve(directory, partitions, batch_rows)
    try:
        before = served.cpu()
        extra = ["--master", master] if master else []
        wall, summary, accounting = run_pipeline(
            f"rsocket://127.0.0.1:{served.port}/flights", work / f"served-{tag}", *extra, cpu=cpu
        )
        serve_cpu = served.cpu() - before
    finally:
        served.stop()
    return wall, summary, serve_cpu, accounting


# -- throughput -------------------------------------------------------------------------------


def _stats(values: list[float]) -> str:
    return f"median {statistics.median(values):,.0f}, best {max(values):,.0f}"


def throughput(args: argparse.Namespace) -> None:
    directory, rows = _flights(args.repeat)
    print(f"flights x{args.repeat}: {rows:,} rows in 8 Parquet files; {_load()}; 2 cores shared")
    print(f"serve: --partitions {args.partitions} --batch-rows {args.batch_rows}")
    rates: dict[str, list[float]] = {"a": [], "b": [], "c": []}
    ratios_ab: list[float] = []
    ratios_ac: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-live-") as tmp:
        work = Path(tmp)
        for round_ in range(args.rounds):
            order = [peer for peer in "abc" if peer in args.only]
            order = order[round_ % len(order) :] + order[: round_ % len(order)]  # rotate
            walls: dict[str, float] = {}
            groups: dict[str, int] = {}
            notes: list[str] = []
            for peer in order:
                load = _load()
                if peer == "a":
                    wall, summary, serve_cpu, _ = run_served(
                        directory, work, f"{round_}", partitions=args.partitions,
                        batch_rows=args.batch_rows,
                    )  # fmt: skip
                    groups[peer] = int(summary["output_groups"])
                    assert summary["input_rows"] == rows, summary
                    notes.append(
                        f"(a) {summary['micro_batches']} micro-batches, serve CPU {serve_cpu:.1f} s"
                    )
                elif peer == "b":
                    wall, summary, _ = run_pipeline(
                        str(directory), work / f"local-{round_}", "--read-on", "executors"
                    )
                    groups[peer] = int(summary["output_groups"])
                    assert summary["input_rows"] == rows, summary
                    notes.append(f"(b) {summary['micro_batches']} micro-batches")
                else:
                    wall, groups[peer], peak = run_socket(directory, rows, args.socket_partitions)
                    notes.append(f"(c) driver peak RSS {peak / 2**20:.0f} MiB")
                walls[peer] = wall
                rates[peer].append(rows / wall)
                print(
                    f"  round {round_ + 1} ({peer}) {wall:6.1f} s  {rows / wall:>9,.0f} rows/s"
                    f"  {groups[peer]:,} groups  [{load} before]",
                    flush=True,
                )
            assert len(set(groups.values())) == 1, groups
            line = f"  round {round_ + 1}:"
            if "a" in walls and "b" in walls:
                ratios_ab.append(walls["b"] / walls["a"])
                line += f" (a)/(b) {ratios_ab[-1]:.2f}x,"
            if "a" in walls and "c" in walls:
                ratios_ac.append(walls["c"] / walls["a"])
                line += f" (a)/(c) {ratios_ac[-1]:.2f}x,"
            print(f"{line} {'; '.join(notes)}; {_load()} after", flush=True)
    print()
    print("| peer | rows/s (median, best) | wall median |")
    print("| --- | ---: | ---: |")
    labels = {
        "a": "(a) serve -> pipeline --input rsocket://",
        "b": "(b) pipeline --input DIR --read-on executors",
        "c": "(c) Spark's socket source, CSV lines",
    }
    for peer, label in labels.items():
        if rates[peer]:
            wall = rows / statistics.median(rates[peer])
            print(f"| {label} | {_stats(rates[peer])} | {wall:.1f} s |")
    for name, ratios in (("(a)/(b) (goal >= 0.8)", ratios_ab), ("(a)/(c)", ratios_ac)):
        if ratios:
            print(
                f"ratio {name}: median {statistics.median(ratios):.2f}x, "
                f"best {max(ratios):.2f}x, all {', '.join(f'{r:.2f}' for r in ratios)}"
            )
    print(f"{_load()} at the end")


# -- scaling ----------------------------------------------------------------------------------


def scaling(args: argparse.Namespace) -> None:
    directory, rows = _flights(args.repeat)
    print(f"flights x{args.repeat}: {rows:,} rows; {_load()}; 2 cores shared")
    rates: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="bench-live-") as tmp:
        work = Path(tmp)
        for round_ in range(args.rounds):
            for executors in (1, 2) if round_ % 2 == 0 else (2, 1):
                load = _load()
                master = f"local-cluster[{executors},1,1024]"
                wall, summary, serve_cpu, accounting = run_served(
                    directory, work, f"{executors}-{round_}", partitions=args.partitions,
                    batch_rows=args.batch_rows, master=master, cpu=True,
                )  # fmt: skip
                assert summary["input_rows"] == rows, summary
                rates[executors].append(rows / wall)
                print(
                    f"  round {round_ + 1} {master}: {wall:6.1f} s {rows / wall:>9,.0f} rows/s,"
                    f" {summary['micro_batches']} micro-batches, {summary['output_groups']:,}"
                    f" groups [{load} before, {_load()} after]",
                    flush=True,
                )
                assert accounting is not None
                print(f"      CPU: serve {serve_cpu:.1f} s; pipeline {accounting.one_line()}")
    print()
    for executors, values in rates.items():
        print(f"{executors} executor(s): rows/s {_stats(values)}")
    ratio = statistics.median(rates[2]) / statistics.median(rates[1])
    print(f"2 / 1 executors: {ratio:.2f}x (medians); {_load()} at the end")


# -- the live producer ------------------------------------------------------------------------


def producer(args: argparse.Namespace) -> None:
    """A live route: ``LivePartitions`` over the flights' batches, cycled forever.

    Prints ``port N``, then every ``--report`` seconds one JSON line: rows produced,
    retained, the route's latency quantiles and those of the batches that arrived after
    ``--warm-up`` seconds from the first commit. Unthrottled (``--rate 0``) the publisher
    is a generator (``Flow.from_iterable``), as fast as the retention asks; with a rate a
    thread pushes batches at that pace through ``Flow.push_source`` (``offer`` waits).
    """

    from reactive_streams import Flow
    from reactive_streams._core import LatencyWindow
    from reactive_streams.files import FilePartitions, list_files
    from reactive_streams.rsocket import LivePartitions, partitioned_routes, serve
    from reactive_streams.testing import collect

    directory, _ = _flights(1)
    planned = FilePartitions.plan(list_files(directory), partitions=1, batch_rows=args.batch_rows)
    batches: list[Any] = collect(planned.open(0, 0), timeout=300)
    schema = planned.schema
    produced = [0]
    lock = threading.Lock()

    def counted(batch: Any) -> Any:  # a pyarrow.RecordBatch
        with lock:
            produced[0] += batch.num_rows
        return batch

    def endless() -> Any:
        while True:
            yield from batches

    # How fast the generator alone produces (no serving): the "could produce" rate.
    started = time.perf_counter()
    generated = 0
    for batch, _ in zip(endless(), range(2000), strict=False):
        generated += batch.num_rows
    raw_rate = generated / (time.perf_counter() - started)

    first_commit: list[float] = []

    class Recording(LatencyWindow):
        """The route's window, also keeping (commit time, latency) for the post-warm-up cut."""

        def __init__(self) -> None:
            super().__init__()
            self.all: list[tuple[float, float]] = []

        def add(self, seconds: float) -> None:
            super().add(seconds)
            now = time.monotonic()
            if not first_commit:
                first_commit.append(now)
            self.all.append((now - seconds, seconds))  # (arrival, latency)

    if args.rate > 0:
        source, publisher = Flow.push_source(4)

        def push() -> None:
            pace = args.batch_rows / args.rate
            due = time.monotonic()
            for batch in endless():
                due += pace
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                else:
                    due = time.monotonic()  # behind: do not burst to catch up
                if source.offer(batch, timeout=60).name != "ENQUEUED":
                    return

        live = LivePartitions(
            publisher.map(counted), schema, partitions=args.partitions,
            batch_rows=args.batch_rows, retention_rows=args.retention,
        )  # fmt: skip
    else:
        live = LivePartitions(
            Flow.from_iterable(endless()).map(counted), schema, partitions=args.partitions,
            batch_rows=args.batch_rows, retention_rows=args.retention,
        )  # fmt: skip
    window = Recording()
    if args.rate > 0:  # latency runs only: the recording grows (about 100 bytes a batch)
        live._latency = window  # a measurement hook: the route's own window, recorded too
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with serve(partitioned_routes("live", live)) as server:
        print(f"port {server.port} raw_rows_per_s {raw_rate:.0f}", flush=True)
        if args.rate > 0:
            # From now on: what arrives while Spark starts waits in retention (a backlog
            # the first micro-batches clear); the latency cut starts after the warm-up.
            threading.Thread(target=push, daemon=True).start()
        while not stop.wait(args.report):
            with lock:
                rows = produced[0]
            quantiles = live.commit_latencies()
            after = []
            if first_commit:
                cut = first_commit[0] + args.warm_up
                after = sorted(latency for arrival, latency in window.all if arrival >= cut)
            report = {
                "t": time.monotonic(),
                "produced": rows,
                "retained": live.retained_rows,
                "high_retained": live.high_retained_rows,
                "route_latency": quantiles,
                "after_warm_up": _quantiles(after),
            }
            print(json.dumps(report), flush=True)


def _quantiles(ordered: list[float]) -> list[float] | None:
    if not ordered:
        return None
    last = len(ordered) - 1
    return [ordered[round(0.5 * last)], ordered[round(0.99 * last)], len(ordered)]


# -- memory and latency: a live run ------------------------------------------------------------


def _descendant_jvm(process: psutil.Process) -> psutil.Process | None:
    try:
        for child in process.children(recursive=True):
            words = child.cmdline()
            launcher = "org.apache.spark.launcher.Main" in words
            if words and Path(words[0]).name == "java" and not launcher:
                return child
    except psutil.Error:
        return None
    return None


def _rss(process: psutil.Process | None) -> float | None:
    if process is None:
        return None
    try:
        return float(process.memory_info().rss) / 2**20
    except psutil.Error:
        return None


def live_run(seconds: float, rate: float, args: argparse.Namespace) -> dict[str, Any]:
    """One live run: producer up, pipeline for ``seconds``, SIGTERM; samples and reports."""
    _flights(1)
    producer_process = subprocess.Popen(
        [sys.executable, str(HERE), "producer", "--rate", str(rate), "--batch-rows",
         str(args.batch_rows), "--partitions", str(args.partitions), "--retention",
         str(args.retention), "--warm-up", str(WARM_UP)],
        env=_env(), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert producer_process.stdout is not None
    first = producer_process.stdout.readline()
    match = re.match(r"port (\d+) raw_rows_per_s (\d+)", first)
    if not match:
        producer_process.kill()
        raise SystemExit(f"producer did not start: {first!r}")
    port, raw_rate = int(match.group(1)), int(match.group(2))
    reports: list[dict[str, Any]] = []

    def read_reports() -> None:
        assert producer_process.stdout is not None
        for line in producer_process.stdout:
            reports.append(json.loads(line))

    threading.Thread(target=read_reports, daemon=True).start()
    out = Path(tempfile.mkdtemp(prefix="bench-live-run-"))
    summary_path = out / "summary.json"
    pipeline = subprocess.Popen(
        [sys.executable, "-m", "reactive_streams", "pipeline", "--quiet", "--input",
         f"rsocket://127.0.0.1:{port}/live", "--output", str(out / "out"),
         "--summary-json", str(summary_path), *args.pipeline_args],
        env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    errors: list[str] = []
    threading.Thread(target=lambda: errors.extend(pipeline.stderr or []), daemon=True).start()
    producer_ps, pipeline_ps = psutil.Process(producer_process.pid), psutil.Process(pipeline.pid)
    jvm: psutil.Process | None = None
    started = time.monotonic()
    samples: list[dict[str, Any]] = []
    print(f"  producer raw generator rate {raw_rate:,} rows/s; rate limit {rate or 'none'}; "
          f"{_load()}", flush=True)  # fmt: skip
    try:
        while (elapsed := time.monotonic() - started) < seconds:
            if pipeline.poll() is not None:
                raise SystemExit(f"pipeline ended early:\n{''.join(errors)[-3000:]}")
            jvm = jvm or _descendant_jvm(pipeline_ps)
            last = reports[-1] if reports else {}
            sample = {
                "t": elapsed,
                "producer": _rss(producer_ps),
                "driver": _rss(pipeline_ps),
                "jvm": _rss(jvm),
                "committed": last.get("produced", 0) - last.get("retained", 0),
                "retained": last.get("retained"),
                "load": os.getloadavg()[0],
                "cpu": _cpu_of([producer_ps, pipeline_ps]),
            }
            samples.append(sample)
            if len(samples) % max(1, round(30 / args.sample)) == 1:
                print(
                    f"  t={elapsed:5.0f} s RSS producer {sample['producer']:.1f} MiB, "
                    f"driver {sample['driver']:.1f} MiB, JVM {sample['jvm'] or 0:.0f} MiB; "
                    f"committed {sample['committed']:,} retained {sample['retained']}; "
                    f"latency {last.get('after_warm_up')}; load {sample['load']:.1f}",
                    flush=True,
                )
            time.sleep(args.sample)
        pipeline.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        code = pipeline.wait(timeout=300)
        stop_seconds = time.monotonic() - stopped
    finally:
        if pipeline.poll() is None:
            pipeline.kill()
        producer_process.send_signal(signal.SIGTERM)
        try:
            producer_process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            producer_process.kill()
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    return {
        "samples": samples, "reports": reports, "exit_code": code, "summary": summary,
        "stop_seconds": stop_seconds, "raw_rate": raw_rate, "stderr": "".join(errors),
    }  # fmt: skip


def _cpu_of(processes: list[psutil.Process]) -> list[float | None]:
    out: list[float | None] = []
    for process in processes:
        try:
            times = process.cpu_times()
            out.append(float(times.user + times.system))
        except psutil.Error:
            out.append(None)
    return out


def _growth(samples: list[dict[str, Any]], key: str) -> str:
    warm = [s for s in samples if s["t"] >= WARM_UP and s[key] is not None]
    if not warm:
        return f"| {key} | - | - | - | - |"
    base = warm[0][key]
    peak = max(s[key] for s in warm)
    overall = max(s[key] for s in samples if s[key] is not None)
    return (
        f"| {key} | {base:.1f} MiB | {peak:.1f} MiB | {peak - base:+.1f} MiB | {overall:.1f} MiB |"
    )


def _rate_after_warm_up(samples: list[dict[str, Any]]) -> float:
    warm = [s for s in samples if s["t"] >= WARM_UP]
    if len(warm) < 2:
        return 0.0
    return (warm[-1]["committed"] - warm[0]["committed"]) / (warm[-1]["t"] - warm[0]["t"])


def report_live(result: dict[str, Any]) -> float:
    samples = result["samples"]
    rate = _rate_after_warm_up(samples)
    summary = result["summary"]
    print(
        f"  pipeline exit {result['exit_code']} {result['stop_seconds']:.1f} s after SIGTERM "
        f"(status {summary.get('status')}, signal {summary.get('signal')}, "
        f"{summary.get('input_rows', 0):,} rows, {summary.get('micro_batches')} micro-batches, "
        f"{summary.get('output_groups')} groups); committed rows/s after the warm-up: "
        f"{rate:,.0f}"
    )
    if result["exit_code"] != 0:
        print(result["stderr"][-3000:])
    print("| process | RSS at 60 s | max after | growth | peak of the run |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for key in ("producer", "driver", "jvm"):
        print(_growth(samples, key))
    retained = [s["retained"] for s in samples if s["retained"] is not None]
    if retained:
        print(f"  producer's retained rows: max {max(retained):,}")
    if samples[-1]["cpu"][0] is not None and len(samples) > 1:
        span = samples[-1]["t"] - samples[0]["t"]
        cpus = [
            (b - a) / span if a is not None and b is not None else 0.0
            for a, b in zip(samples[0]["cpu"], samples[-1]["cpu"], strict=True)
        ]
        print(f"  CPU: producer {cpus[0]:.0%} of a core, pipeline's Python {cpus[1]:.0%}")
    loads = [s["load"] for s in samples]
    print(f"  load during the run: {min(loads):.1f} to {max(loads):.1f}")
    return rate


def memory(args: argparse.Namespace) -> None:
    print(f"memory: live producer unthrottled, {args.minutes} min; {_load()}", flush=True)
    result = live_run(args.minutes * 60, 0, args)
    report_live(result)
    last = result["reports"][-1] if result["reports"] else {}
    print(f"  producer's last report: {json.dumps(last)}")
    if args.samples_json:
        Path(args.samples_json).write_text(json.dumps(result["samples"]))


def latency(args: argparse.Namespace) -> None:
    print(f"latency: live producer at {args.rate:,.0f} rows/s, {args.minutes} min; {_load()}")
    result = live_run(args.minutes * 60, args.rate, args)
    report_live(result)
    last = result["reports"][-1] if result["reports"] else {}
    route = last.get("route_latency")
    after = last.get("after_warm_up")
    if route:
        print(
            f"  route's R.stats (last 10,000 batches): p50 {route[0]:.2f} s, "
            f"p99 {route[1]:.2f} s over {route[2]:,} batches"
        )
    if after:
        print(
            f"  batches that arrived after the warm-up: p50 {after[0]:.2f} s, "
            f"p99 {after[1]:.2f} s over {after[2]:,} batches"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("throughput", "scaling"):
        sub = commands.add_parser(name)
        sub.add_argument("--rounds", type=int, default=3)
        sub.add_argument("--repeat", type=int, default=10, help="flights x N (10)")
        sub.add_argument("--partitions", type=int, default=4, help="serve --partitions")
        sub.add_argument("--batch-rows", type=int, default=10_000, help="serve --batch-rows")
        sub.add_argument(
            "--socket-partitions", type=int, default=256,
            help="(c): the socket source's numPartitions (its cost per micro-batch of n rows "
            "grows as n * n / numPartitions)",
        )  # fmt: skip
        sub.add_argument("--only", default="abc", help="peers to run (abc)")
    for name in ("memory", "latency", "producer"):
        sub = commands.add_parser(name)
        sub.add_argument("--minutes", type=float, default=10.0)
        sub.add_argument("--rate", type=float, default=0.0, help="rows/s (0: unthrottled)")
        sub.add_argument("--batch-rows", type=int, default=5_000)
        sub.add_argument("--partitions", type=int, default=4)
        sub.add_argument("--retention", type=int, default=1_000_000)
        sub.add_argument("--sample", type=float, default=5.0, help="seconds between samples")
        sub.add_argument("--report", type=float, default=5.0)
        sub.add_argument("--warm-up", type=float, default=WARM_UP)
        sub.add_argument("--samples-json", default=None)
        sub.add_argument("pipeline_args", nargs="*", help="after --: more pipeline options")
    args = parser.parse_args()
    if args.command == "producer":
        producer(args)
        return
    compile_sources()
    {"throughput": throughput, "scaling": scaling, "memory": memory, "latency": latency}[
        args.command
    ](args)


if __name__ == "__main__":
    main()
