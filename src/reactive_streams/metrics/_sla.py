"""Service-level rules checked on every period of a metrics stream."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._snapshot import SLABreach

if TYPE_CHECKING:
    from ._snapshot import StageMetrics

__all__ = ["SLA"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SLA:
    """Limits a stage must keep in every period; each broken limit is an ``SLABreach``.

    Args:
        stage: the stage the rule is for: its key (``"2:publish_on"``) or operator name
            (``"publish_on"``); ``None`` applies it to every stage.
        min_throughput: the fewest elements per second the stage must deliver while it
            runs (a terminated stage is exempt).
        max_buffered: the most elements the stage may hold at the end of a period.
        max_backpressured_ms_per_s: the most milliseconds per second the stage may spend
            without downstream demand.

    Raises:
        ValueError: a limit is negative, or no limit is given.
    """

    stage: str | None = None
    min_throughput: float | None = None
    max_buffered: int | None = None
    max_backpressured_ms_per_s: float | None = None

    def __post_init__(self) -> None:
        limits = (self.min_throughput, self.max_buffered, self.max_backpressured_ms_per_s)
        if all(limit is None for limit in limits):
            raise ValueError("an SLA needs at least one limit")
        if any(limit is not None and limit < 0 for limit in limits):
            raise ValueError(f"SLA limits must be >= 0, got {limits}")

    def applies_to(self, stage: StageMetrics) -> bool:
        """Whether the rule is about ``stage``."""
        return self.stage is None or self.stage in (stage.stage, stage.operator)

    def check(self, stage: StageMetrics, time: float) -> list[SLABreach]:
        """The limits ``stage`` broke in its period (empty if none, or not about it)."""
        if not self.applies_to(stage):
            return []
        breaches: list[SLABreach] = []
        if (
            self.min_throughput is not None
            and not stage.terminated
            and stage.throughput < self.min_throughput
        ):
            breaches.append(
                SLABreach(
                    stage=stage.stage,
                    rule="min_throughput",
                    limit=self.min_throughput,
                    observed=stage.throughput,
                    time=time,
                )
            )
        if self.max_buffered is not None and stage.buffered > self.max_buffered:
            breaches.append(
                SLABreach(
                    stage=stage.stage,
                    rule="max_buffered",
                    limit=self.max_buffered,
                    observed=stage.buffered,
                    time=time,
                )
            )
        if (
            self.max_backpressured_ms_per_s is not None
            and stage.backpressured_ms_per_s > self.max_backpressured_ms_per_s
        ):
            breaches.append(
                SLABreach(
                    stage=stage.stage,
                    rule="max_backpressured_ms_per_s",
                    limit=self.max_backpressured_ms_per_s,
                    observed=stage.backpressured_ms_per_s,
                    time=time,
                )
            )
        return breaches
