"""CPU seconds of a command's whole process tree, by kind of process (Linux).

Usage::

    PYTHONPATH=src python benchmarks/cpu_by_process.py -- \\
        python -m reactive_streams pipeline --quiet --input DIR

On two shared cores a Spark job keeps both busy from its start to its end, so its wall time
follows the CPU seconds every process of it spends: the driver's JVM (and, in it, the JIT
compiler, the garbage collector and the executor task threads), the Python workers forked
from ``pyspark.daemon``, and the short Python processes Spark starts to plan a Python data
source. This tool runs a command and says where those seconds went.

How: psutil lists the command's descendants every ``--interval`` seconds and keeps the
last CPU times (user + system) seen for each process, and, for a JVM, for each of its
threads by name (name and CPU ticks from ``/proc/<pid>/task/<tid>/stat``). A process
that lives less than one interval is missed, and up to one interval of each process's
last CPU is too, so the totals are lower bounds (at 0.1 s, a few hundredths of a second per
process). The polling itself costs a few percent of one core, which the command's figures
do not include.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

_PLANNERS = {
    "pyspark.sql.worker.lookup_data_sources": "planner: look up data sources",
    "pyspark.sql.worker.create_data_source": "planner: create the data source",
    "pyspark.sql.worker.plan_data_source_read": "planner: plan the read",
    "pyspark.sql.streaming.python_streaming_source_runner": "streaming source runner",
}


@dataclass
class Accounting:
    """What one command cost: wall seconds, CPU seconds by kind, JVM threads' CPU by kind."""

    wall: float
    returncode: int
    polling: float = 0.0  # CPU seconds of the polling itself (this process)
    by_kind: dict[str, float] = field(default_factory=dict)
    processes: Counter[str] = field(default_factory=Counter)
    jvm_threads: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        """CPU seconds of every process seen."""
        return sum(self.by_kind.values())

    def lines(self) -> list[str]:
        """The accounting as indented lines, largest first."""
        out = [
            f"wall {self.wall:.1f} s, CPU {self.total:.1f} s in all "
            f"(the polling took {self.polling:.1f} s more)"
        ]
        for kind, seconds in _largest_first(self.by_kind):
            if seconds >= 0.01:
                out.append(f"  {seconds:6.2f} s  {kind} ({self.processes[kind]} processes)")
        if self.jvm_threads:
            threads = ", ".join(f"{k} {v:.1f} s" for k, v in _largest_first(self.jvm_threads))
            out.append(f"  JVM threads: {threads}")
        return out

    def one_line(self) -> str:
        """The accounting on one line: CPU in all, by kind, and the JVM's threads."""
        kinds = ", ".join(f"{k} {v:.1f}" for k, v in _largest_first(self.by_kind) if v >= 0.05)
        line = f"{self.total:.1f} s CPU ({kinds})"
        if self.jvm_threads:
            threads = ", ".join(f"{k} {v:.1f}" for k, v in _largest_first(self.jvm_threads))
            line += f"; JVM threads: {threads}"
        return line


def _largest_first(seconds: Mapping[str, float]) -> list[tuple[str, float]]:
    return sorted(seconds.items(), key=lambda item: -item[1])


def kind_of(command_line: Sequence[str], *, root: bool) -> str:
    """The kind of a process, from its command line (``root``: the command itself)."""
    if root:
        return "the command (Python driver)"
    words = list(command_line)
    if words and Path(words[0]).name == "java":
        if "org.apache.spark.launcher.Main" in words:
            return "JVM: spark-submit's launcher"
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in words:
            return "JVM: executor (local-cluster)"
        return "JVM"
    if "pyspark.daemon" in words:  # "-m pyspark.daemon <worker module>": daemon and forks
        module = words[-1] if words[-1] != "pyspark.daemon" else "pyspark.worker"
        return _PLANNERS.get(module, "Python workers (pyspark.worker)")
    for module, kind in _PLANNERS.items():
        if module in words:
            return kind
    return "other: " + (Path(words[0]).name if words else "?")


def thread_kind(name: str) -> str:
    """The kind of a JVM thread, from its name as ``/proc`` has it (15 characters)."""
    if "Compiler" in name:
        return "JIT compiler"
    if name.startswith(("GC ", "G1 ")):
        return "GC"
    if name.startswith("Executor task"):
        return "executor tasks"
    return "other"


def _jvm_threads(pid: int) -> dict[int, tuple[str, float]]:
    """Each thread of ``pid``: its name and CPU seconds (empty once the process is gone)."""
    ticks = os.sysconf("SC_CLK_TCK")
    threads: dict[int, tuple[str, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return threads
    for tid in tids:
        try:
            text = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = text[text.find("(") + 1 : text.rfind(")")]
        fields = text[text.rfind(")") + 2 :].split()
        seconds = (int(fields[11]) + int(fields[12])) / ticks
        threads[int(tid)] = (name, seconds)
    return threads


def run_accounted(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    interval: float = 0.1,
    timeout: float = 1800.0,
    capture: bool = False,
) -> tuple[Accounting, subprocess.CompletedProcess[str]]:
    """Run ``command`` to its end, polling its process tree every ``interval`` seconds.

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout`` seconds (it is killed).
    """
    started = time.monotonic()
    own = resource.getrusage(resource.RUSAGE_SELF)
    pipe = subprocess.PIPE if capture else None
    child = subprocess.Popen(command, env=env, stdout=pipe, stderr=pipe, text=True)
    root = psutil.Process(child.pid)
    seen: dict[int, tuple[str, float]] = {}
    threads: dict[tuple[int, int], tuple[str, float]] = {}
    while child.poll() is None:
        if time.monotonic() - started > timeout:
            child.kill()
            child.communicate()
            raise subprocess.TimeoutExpired(list(command), timeout)
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for process in tree:
            try:
                with process.oneshot():
                    times = process.cpu_times()
                    words = process.cmdline() or [process.name()]
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            kind = kind_of(words, root=process.pid == child.pid)
            if process.pid in seen and words == [process.name()]:
                # An exiting process's command line reads empty: keep the kind it had.
                kind = seen[process.pid][0]
            seen[process.pid] = (kind, times.user + times.system)
            if kind == "JVM":
                for tid, value in _jvm_threads(process.pid).items():
                    threads[(process.pid, tid)] = value
        time.sleep(interval)
    out, err = child.communicate()
    after = resource.getrusage(resource.RUSAGE_SELF)
    polling = after.ru_utime + after.ru_stime - own.ru_utime - own.ru_stime
    accounting = Accounting(
        wall=time.monotonic() - started, returncode=child.returncode, polling=polling
    )
    for kind, seconds in seen.values():
        accounting.by_kind[kind] = accounting.by_kind.get(kind, 0.0) + seconds
        accounting.processes[kind] += 1
    for name, seconds in threads.values():
        kind = thread_kind(name)
        accounting.jvm_threads[kind] = accounting.jvm_threads.get(kind, 0.0) + seconds
    completed = subprocess.CompletedProcess(list(command), child.returncode, out, err)
    return accounting, completed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between polls")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    accounting, _ = run_accounted(command, interval=args.interval)
    print("\n".join(accounting.lines()), file=sys.stderr)
    raise SystemExit(accounting.returncode)


if __name__ == "__main__":
    main()
