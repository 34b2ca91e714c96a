"""Time ``run.py``'s cases on two source trees, in alternating runs, and print the ratios.

For a change that must not slow the library down (a refactor, a new kit piece): check out
the old revision beside the new one, then, from the repository root::

    git worktree add --detach /tmp/before 0436503
    python benchmarks/compare_trees.py /tmp/before/src src --cases a b c --runs 5

Each run is one ``run.py CASE`` process with ``PYTHONPATH`` set to one tree; the trees
take turns (before, after, before, after, ...), so a machine whose speed drifts slows both
alike. For every row of ``run.py``'s tables (each implementation, ours and the peers), the
median over the runs of its own median seconds is printed for both trees, with the ratio
after/before: a peer's ratio shows how much the machine itself drifted. Case (d) prints
seconds and peak RSS per row; its rows are compared on seconds.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

RUN = Path(__file__).with_name("run.py")
ROW = re.compile(r"^\| (?P<name>[^|]+?) \| (?P<cells>.+) \|$")


def _rows(output: str) -> dict[str, float]:
    """``{"<case title> / <implementation>": seconds}`` from ``run.py``'s markdown tables."""
    rows: dict[str, float] = {}
    title = ""
    seconds_column: int | None = None
    for line in output.splitlines():
        if line.startswith("## "):
            title, seconds_column = line[3:].split(":")[0], None
            continue
        match = ROW.match(line)
        if match is None or line.startswith("|---"):
            continue
        cells = [cell.strip() for cell in match["cells"].split("|")]
        if match["name"] == "implementation":
            headers = cells
            seconds_column = next(
                (i for i, header in enumerate(headers) if header in ("median s", "seconds")), None
            )
            continue
        if seconds_column is None:
            continue
        try:
            rows[f"{title} / {match['name']}"] = float(cells[seconds_column].replace(",", ""))
        except (IndexError, ValueError):
            continue
    return rows


def _run(tree: str, case: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()))
    done = subprocess.run(
        [sys.executable, str(RUN), case], env=env, capture_output=True, text=True, check=True
    )
    return _rows(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", help="the old tree's src directory")
    parser.add_argument("after", help="the new tree's src directory")
    parser.add_argument("--cases", nargs="+", default=["a", "b", "c"], choices="abcd")
    parser.add_argument("--runs", type=int, default=5, help="runs of each tree per case")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print("| case / implementation | before s | after s | after/before |")
    print("|---|---:|---:|---:|")
    for case in args.cases:
        before: dict[str, list[float]] = {}
        after: dict[str, list[float]] = {}
        for _ in range(args.runs):
            for tree, into in ((args.before, before), (args.after, after)):
                for name, seconds in _run(tree, case).items():
                    into.setdefault(name, []).append(seconds)
        for name, old in before.items():
            new = after.get(name)
            if not new:
                continue
            old_median, new_median = statistics.median(old), statistics.median(new)
            ratio = new_median / old_median if old_median else float("nan")
            print(f"| {name} | {old_median:.4f} | {new_median:.4f} | {ratio:.3f} |")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
