"""What the user sees: the schema, the live progress, the summary and the top groups (rich)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from rich.console import Group
from rich.filesize import decimal
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import RenderableType

    from ..pipeline import PipelineProgress, PipelineResult, RouteStats

__all__ = [
    "bottleneck_line",
    "input_progress",
    "render_progress",
    "render_schema",
    "render_summary",
    "render_top",
    "spark_output_line",
]


def _count(value: int) -> str:
    return f"{value:,}"


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return _count(value)
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    return str(value)


def render_schema(
    columns: list[tuple[str, str]], source: str, *, given: bool = False
) -> RenderableType:
    """The input schema, as a compact two-column table (nested types in Spark's notation).

    Args:
        columns: ``(column, Spark type)`` pairs (``describe_schema``).
        source: the input, as the title names it.
        given: the schema was given (``--schema``) rather than inferred.
    """
    table = Table(show_edge=False)
    table.add_column("column")
    table.add_column("type", overflow="fold")
    for name, kind in columns:
        table.add_row(name, kind)
    if given:
        title = f"Input schema of {source} (--schema):"
    else:
        title = f"Input schema, inferred from {source}:"
    return Group(Text(title, style="bold"), table)


def render_progress(progress: PipelineProgress, *, title: str) -> RenderableType:
    """The live display: one row per stage with what it did and the demand it holds."""
    table = Table(show_edge=False, expand=False)
    table.add_column("stage")
    table.add_column("done", justify="right")
    table.add_column("demand", justify="right")
    table.add_column("detail")
    producer = progress.producer
    if producer is not None:
        table.add_row(
            "producer",
            f"{_count(producer.sent_batches)} batches sent",
            _plural(producer.outstanding_batches, "batch", "batches"),
            _producer_detail(producer, progress.producer_reconnects),
            style="yellow" if progress.producer_reconnects else None,
        )
    read = _count(progress.records_read)
    if progress.total_rows:
        share = 100.0 * progress.records_read / progress.total_rows
        read += f" / {_count(progress.total_rows)} ({share:.0f}%)"
    if progress.split_shares is not None:
        _split_rows(table, progress, read)
    else:
        table.add_row(
            "source",
            f"{read} read",
            _plural(progress.source_demand, "batch", "batches"),
            f"{progress.rate:,.0f} rec/s, {_count(progress.dead_letters)} dead letters",
            style=_row_style(progress, "source"),
        )
        table.add_row(
            "spark",
            f"{_count(progress.records_processed)} processed",
            "",
            f"{_count(progress.in_flight)} in flight, {_count(progress.bridge_held)} held "
            f"(at most {_count(progress.bridge_bound)}), "
            f"{_plural(progress.batches, 'micro-batch', 'micro-batches')}",
            style=_row_style(progress, "spark", "bridge"),
        )
    table.add_row(
        "sink",
        f"{_count(progress.groups)} {_result_unit(progress)}",
        _plural(progress.sink_demand, "micro-batch", "micro-batches"),
        f"{_count(progress.late_rows)} late rows dropped",
        style=_row_style(progress, "sink"),
    )
    status = Text(f"{progress.phase} · {progress.elapsed:,.1f} s", style="dim")
    parts: list[RenderableType] = [table]
    bar = input_progress(progress)
    if bar is not None:
        parts.append(bar)
    held_back = bottleneck_line(progress)
    if held_back is not None:
        parts.append(held_back)
    parts.append(status)
    return Panel(Group(*parts), title=title, title_align="left", expand=False)


_BAR_WIDTH = 30


def _eta(seconds: float | None) -> str:
    """``H:MM:SS`` as ``rich.progress.TimeRemainingColumn`` shows it; ``-:--:--`` unknown."""
    if seconds is None:
        return "-:--:--"
    return str(dt.timedelta(seconds=int(seconds + 0.5)))


def input_progress(progress: PipelineProgress) -> RenderableType | None:
    """How far the input is read, as ``rich.progress`` shows a task, for a finite input.

    A bar, the share done, bytes read of the input's bytes (CSV and JSON Lines files,
    uncompressed) or else records of its records, the rate since the first record and the
    time left at that rate (``PipelineProgress.eta``). ``None`` when the input's size is
    not known (a live input, compressed text read on the driver).
    """
    if progress.total_bytes is not None and progress.bytes_read is not None:
        done, total = progress.bytes_read, progress.total_bytes
        rate = progress.byte_rate or 0.0
        amount = f"{decimal(done)} / {decimal(total)}"
        speed = f"{decimal(int(rate))}/s"
    elif progress.total_rows:
        done, total = progress.records_read, progress.total_rows
        amount = f"{_count(done)} / {_count(total)} records"
        speed = f"{_rate(progress.rate)} rec/s"
    else:
        return None
    done = min(done, total)
    share = 100.0 * done / total if total else 100.0
    line = Table.grid(padding=(0, 1))
    line.add_row(
        Text("input", style="bold"),
        ProgressBar(total=float(total or 1), completed=float(done), width=_BAR_WIDTH),
        Text(f"{share:3.0f}%", style="progress.percentage"),
        Text(amount, style="progress.download"),
        Text(speed, style="progress.data.speed"),
        Text(f"eta {_eta(progress.eta)}", style="progress.remaining"),
    )
    return line


def _spark_starting(progress: PipelineProgress) -> bool:
    """The query runs but Spark has not finished a micro-batch yet (its JVM, its plan)."""
    return progress.phase == "running" and progress.batches == 0 and not progress.records_processed


def _producer_detail(producer: RouteStats, reconnects: int = 0) -> str:
    """An ``rsocket://`` input's producer: open streams, latency, drops outlived.

    The arrival-to-commit latency when the producer timestamps arrivals, and how many
    times it dropped and was reached again.
    """
    detail = f"{_plural(producer.streams, 'stream', 'streams')} open"
    if producer.latency_p50 is not None and producer.latency_p99 is not None:
        detail += (
            f", arrival to commit p50 {producer.latency_p50:,.2f} s, "
            f"p99 {producer.latency_p99:,.2f} s"
        )
    if reconnects:
        detail += f"; dropped, reconnected {_plural(reconnects, 'time', 'times')}"
    return detail


def _row_style(progress: PipelineProgress, *stages: str) -> str | None:
    """Bold yellow for the row of the stage that holds the run back (``bottleneck_line``)."""
    held_back = progress.bottleneck
    if held_back is None or progress.phase != "running" or held_back.stage not in stages:
        return None
    return None if _spark_starting(progress) else "bold yellow"


def bottleneck_line(progress: PipelineProgress) -> Text | None:
    """``bottleneck: <stage> (why)`` while the run goes and a stage holds it back, else ``None``.

    The stage is the one busy while its upstream was backpressured in the last metrics
    period (``PipelineMetrics``), or a source everything after it waits for. Until Spark
    finished its first micro-batch, the source reads ahead while Spark starts: the line
    says ``starting Spark`` then, not that the source is busy.
    """
    bottleneck = progress.bottleneck
    if bottleneck is None or progress.phase != "running":
        return None
    if _spark_starting(progress):
        line = Text("bottleneck: ", style="bold")
        line.append("starting Spark", style="bold yellow")
        line.append(" (no micro-batch has finished yet)", style="yellow")
        return line
    line = Text("bottleneck: ", style="bold")
    line.append(bottleneck.stage, style="bold yellow")
    detail = str(bottleneck).removeprefix(bottleneck.stage).strip()
    if detail:
        line.append(f" {detail}", style="yellow")
    return line


def _split_rows(table: Table, progress: PipelineProgress, read: str) -> None:
    """``--read-on executors``: the splits' demand in the last micro-batch, in one row.

    The demand column is the last micro-batch's records; the detail says over how many
    splits it was spread and the smallest and largest share (what each executor task
    asked of its split).
    """
    shares = [share for share in progress.split_shares or () if share > 0]
    if not shares:
        spread = f"{_plural(progress.splits, 'split', 'splits')}, none read yet"
    else:
        least, most = min(shares), max(shares)
        each = _count(most) if least == most else f"{_count(least)}-{_count(most)}"
        spread = (
            f"{len(shares)} of {_plural(progress.splits, 'split', 'splits')} read, "
            f"{each} records each"
        )
    table.add_row(
        "executors",
        f"{read} read",
        f"{_count(sum(shares))} records",
        f"last micro-batch: {spread}; {_count(progress.dead_letters)} dead letters",
        style=_row_style(progress, "source"),
    )
    table.add_row(
        "spark",
        f"{_count(progress.records_processed)} processed",
        "",
        _plural(progress.batches, "micro-batch", "micro-batches"),
        style=_row_style(progress, "spark"),
    )


def _rate(per_second: float) -> str:
    """A rate with thousands separators, or two significant digits below 10.

    A tiny input read over a run of several seconds then shows as 0.22 rows/s, not 0.
    """
    return f"{per_second:,.0f}" if per_second >= 10 or per_second == 0 else f"{per_second:.2g}"


def render_summary(result: PipelineResult) -> RenderableType:
    """The final summary table; a value too long for its cell is folded, never cut.

    Paths are folded too: ``spark_output_line`` gives the one a user copies as one line.
    """
    progress = result.progress
    table = Table(title=f"Pipeline {result.status}", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right", overflow="fold")
    # After a resume, say which figures are this run's and which are every run's.
    run = ", this run" if progress.resumed else ""
    table.add_row(f"input rows{run}", _count(progress.records_read))
    if progress.records_skipped:
        table.add_row("  skipped: committed before", _count(progress.records_skipped))
    table.add_row(f"rows into Spark{run}", _count(progress.records_emitted))
    table.add_row(f"micro-batches{run}", _count(progress.batches))
    table.add_row(f"output {_result_unit(progress)}", _count(progress.groups))  # all runs'
    table.add_row(f"dead letters{run}", _count(progress.dead_letters))
    spark_count = (
        "" if progress.late_rows_of_input or not progress.late_rows else " (Spark's count)"
    )
    table.add_row(f"late rows dropped{run}{spark_count}", _count(progress.late_rows))
    if progress.producer is not None or progress.producer_reconnects:
        table.add_row("producer reconnects", _count(progress.producer_reconnects))
    if progress.resumed:
        table.add_row("micro-batches, all runs", _count(progress.all_runs_batches))
        table.add_row("dead letters, all runs", _count(progress.all_runs_dead_letters))
    table.add_row("wall time", f"{result.wall_time:,.1f} s")
    table.add_row("rows/s", _rate(result.rows_per_second))
    table.add_row("Python driver peak memory", _mib(result.peak_memory))
    if result.spark_peak_memory is not None:
        table.add_row("Spark driver JVM peak memory", _mib(result.spark_peak_memory))
    if result.output_path is not None:
        table.add_row("output", str(result.output_path))
    if result.sink is not None:
        table.add_row("sink", result.sink)
    if result.dead_letter_path is not None:
        table.add_row("dead-letter file", str(result.dead_letter_path))
    if result.error:
        table.add_row("error", result.error)
    for change in result.column_changes:
        table.add_row("columns", change.describe())
    for note in result.notes:
        table.add_row("note", note)
    return table


def spark_output_line(result: PipelineResult) -> str | None:
    """The line naming Spark's output file of a failed run (print it unwrapped), or ``None``."""
    if result.spark_output is None:
        return None
    return f"Spark's own output (logs, Java stack traces): {result.spark_output}"


def render_top(result: PipelineResult, width: int | None = None) -> RenderableType | None:
    """The top 10 rows of the result, or ``None`` when there is none to show.

    Values are never cut: at ``width`` columns (the terminal's), the columns that do not
    fit whole are left out, from the right, and named under the table.
    """
    if not result.top:
        return None
    columns = list(result.top[0])
    cells = {name: [_cell(row[name]) for row in result.top] for name in columns}
    needed = {name: max(len(name), *(len(cell) for cell in cells[name])) for name in columns}
    shown: list[str] = []
    used = 1  # the table's left edge
    for name in columns:
        cost = needed[name] + 3  # one space each side, and the edge on the right
        if width is not None and shown and used + cost > width:
            break
        shown.append(name)
        used += cost
    hidden = columns[len(shown) :]
    caption = None
    if hidden:
        more = "1 more column" if len(hidden) == 1 else f"{len(hidden)} more columns"
        caption = f"{more} in the result file: {', '.join(hidden)}"
    unit = _result_unit(result.progress)
    table = Table(
        title=f"Top {len(result.top)} {unit}",
        title_justify="left",
        caption=caption,
        caption_justify="left",
    )
    for name in shown:
        text = isinstance(result.top[0][name], str)
        table.add_column(
            name, justify="left" if text else "right", no_wrap=True, min_width=needed[name]
        )
    for index in range(len(result.top)):
        table.add_row(*(cells[name][index] for name in shown))
    return table


def _mib(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB"


def _result_unit(progress: PipelineProgress) -> str:
    """What the result's rows are: groups of an aggregation, or rows appended."""
    return "rows" if progress.output_mode == "append" else "groups"


def _plural(count: int, one: str, many: str) -> str:
    return f"{_count(count)} {one if count == 1 else many}"
