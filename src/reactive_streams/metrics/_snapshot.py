"""The elements of a metrics stream: per-stage figures, SLA breaches, and the snapshot."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["MetricsSnapshot", "SLABreach", "StageMetrics"]

Rule = Literal["min_throughput", "max_buffered", "max_backpressured_ms_per_s"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StageMetrics:
    """One stage over one period of a metrics stream.

    Attributes:
        stage: the stage's key in ``Flow.metrics()``, ``"<index>:<operator name>"``.
        operator: the operator's name, e.g. ``"publish_on"`` or ``"range|map"``.
        elements_in: elements the stage received so far (what its upstream stages
            delivered; for a source, what it produced, which equals ``elements_out``).
        elements_out: elements delivered downstream so far (``on_next`` signals).
        demand_outstanding: requested by downstream and not yet delivered, right now
            (``MAX_DEMAND`` means unbounded).
        buffered: elements held right now.
        high_water_mark: the most elements the stage ever held.
        dropped: elements the stage discarded on purpose so far (overflow strategies).
        throughput: ``elements_out`` per second over the period.
        busy_ms_per_s, idle_ms_per_s, backpressured_ms_per_s: how the period split, in
            milliseconds per second (they add up to 1000, as Flink's task metrics do):
            backpressured while downstream demand was 0 (the stage could not emit), busy
            while demand was open and elements went out, idle while demand was open and
            nothing came (waiting for input). Estimated by sampling, see ``metrics_stream``.
        terminated: the stage sent (or gave up) its terminal signal.
        upstreams: the keys of the stages it subscribes to (empty for a source).
    """

    stage: str
    operator: str
    elements_in: int
    elements_out: int
    demand_outstanding: int
    buffered: int
    high_water_mark: int
    dropped: int
    throughput: float
    busy_ms_per_s: float
    idle_ms_per_s: float
    backpressured_ms_per_s: float
    terminated: bool
    upstreams: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SLABreach:
    """An SLA rule broken by one stage in one period.

    Attributes:
        stage: the stage's key (``"<index>:<operator name>"``).
        rule: which limit: ``"min_throughput"`` (elements per second),
            ``"max_buffered"`` (elements) or ``"max_backpressured_ms_per_s"``.
        limit: the SLA's figure.
        observed: the stage's figure in that period.
        time: the scheduler's time of the snapshot, in seconds.
    """

    stage: str
    rule: Rule
    limit: float
    observed: float
    time: float

    def __str__(self) -> str:
        return (
            f"{self.stage}: {self.rule} breached (limit {self.limit:g}, observed {self.observed:g})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsSnapshot:
    """One element of a metrics stream: every stage of a flow at the end of a period.

    Attributes:
        sequence: 0 for the first snapshot, then 1, 2, ...
        time: the scheduler's time at the end of the period, in seconds.
        period: seconds the period lasted (the scheduler's clock).
        stages: one ``StageMetrics`` per stage, sources first (``Flow.metrics()`` order).
        breaches: the SLA breaches of this period (and of snapshots a slow subscriber
            did not take in time, which are folded into the next one).
        skipped: snapshots replaced by this one because the subscriber had no demand.
    """

    sequence: int
    time: float
    period: float
    stages: tuple[StageMetrics, ...]
    breaches: tuple[SLABreach, ...] = ()
    skipped: int = 0

    def stage(self, name: str) -> StageMetrics:
        """The figures of the stage whose key or operator name is ``name``.

        Raises:
            KeyError: no such stage.
        """
        for stage in self.stages:
            if name in (stage.stage, stage.operator):
                return stage
        raise KeyError(name)

    def bottleneck(self) -> StageMetrics | None:
        """The stage that held the flow back in this period, if any.

        That is the stage busy while its upstream was backpressured: the one with the
        largest ``min(busy_ms_per_s, upstream backpressured_ms_per_s)``. ``None`` when no
        stage was both (the flow waits on its source, or nothing ran).
        """
        by_key = {stage.stage: stage for stage in self.stages}
        best: StageMetrics | None = None
        best_score = 0.0
        for stage in self.stages:
            pressure = max(
                (by_key[key].backpressured_ms_per_s for key in stage.upstreams if key in by_key),
                default=0.0,
            )
            score = min(stage.busy_ms_per_s, pressure)
            if score > best_score:
                best, best_score = stage, score
        return best
