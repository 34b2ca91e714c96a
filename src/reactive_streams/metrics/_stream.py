"""``metrics_stream``: a flow's per-stage counters on a period, as a publisher."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .._core import (
    MAX_DEMAND,
    DownstreamStage,
    Operator,
    Scheduler,
    check_positive,
    check_subscriber,
    default_scheduler,
    signal_on_complete,
    signal_on_error,
    signal_on_subscribe,
    walk,
)
from ..api import Publisher, Subscriber
from ._snapshot import MetricsSnapshot, SLABreach, StageMetrics
from ._stage_clock import StageClock, StageState, outstanding_demand

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .._core import PeriodicTask, StageStatistics
    from ._sla import SLA

__all__ = ["MetricsPublisher", "metrics_stream"]


@dataclass(slots=True)
class _Accumulator:
    """One stage's sampled state within the current period."""

    last_delivered: int = 0
    period_start_delivered: int = 0
    clock: StageClock = field(default_factory=StageClock)


class _Sampler:
    """Reads every stage's ``statistics()`` and classifies the time since the last sample.

    Owned by one subscription; ``sample`` and ``snapshot`` run on the scheduler's thread,
    one at a time (a periodic series schedules a run when the previous one starts, and
    the built-in schedulers run one action at a time).
    """

    def __init__(self, flow: Publisher[Any], sla: tuple[SLA, ...], scheduler: Scheduler) -> None:
        # a flow's operator graph never changes: walk it once, sample it many times
        self._operators = [
            (f"{index}:{operator.name}", operator) for index, operator in enumerate(walk(flow))
        ]
        self._sla = sla
        self._scheduler = scheduler
        self._accumulators: dict[str, _Accumulator] = {}
        self._last_sample = scheduler.now()
        self._period_start = self._last_sample
        self._sequence = 0

    def _stages(self) -> list[tuple[str, Operator[Any], StageStatistics]]:
        stages = []
        for key, operator in self._operators:
            stats = operator.last_statistics()
            if stats is not None:
                stages.append((key, operator, stats))
        return stages

    def sample(self) -> None:
        """Charge the time since the last sample to each stage's current state."""
        now = self._scheduler.now()
        elapsed = max(0.0, now - self._last_sample)
        self._last_sample = now
        for key, _operator, stats in self._stages():
            accumulator = self._accumulators.get(key)
            if accumulator is None:
                accumulator = self._accumulators[key] = _Accumulator()
            delivered = stats.delivered
            state: StageState
            if stats.terminated:
                state = "idle"
            elif _outstanding(stats) == 0:
                state = "backpressured"
            elif delivered != accumulator.last_delivered:
                state = "busy"
            else:
                state = "idle"
            accumulator.clock.charge(state, elapsed)
            accumulator.last_delivered = delivered

    def snapshot(self) -> MetricsSnapshot:
        """Close the period: a snapshot with every stage's figures and the SLA breaches."""
        self.sample()
        now = self._last_sample
        period = now - self._period_start
        self._period_start = now
        stages = self._stages()
        delivered_by: dict[int, int] = {
            id(operator): stats.delivered for _, operator, stats in stages
        }
        key_of = {id(operator): key for key, operator in self._operators}
        figures: list[StageMetrics] = []
        for key, operator, stats in stages:
            accumulator = self._accumulators.setdefault(key, _Accumulator())
            upstreams = [id(getattr(up, "_node", up)) for up in operator.upstreams]
            elements_in = (
                sum(delivered_by.get(up, 0) for up in upstreams) if upstreams else stats.delivered
            )
            busy, idle, backpressured = accumulator.clock.per_second()
            throughput = (
                (stats.delivered - accumulator.period_start_delivered) / period
                if period > 0
                else 0.0
            )
            figures.append(
                StageMetrics(
                    stage=key,
                    operator=operator.name,
                    elements_in=elements_in,
                    elements_out=stats.delivered,
                    demand_outstanding=_outstanding(stats),
                    buffered=stats.buffered,
                    high_water_mark=stats.high_water_mark,
                    dropped=stats.dropped,
                    throughput=throughput,
                    busy_ms_per_s=busy,
                    idle_ms_per_s=idle,
                    backpressured_ms_per_s=backpressured,
                    terminated=stats.terminated,
                    upstreams=tuple(key_of[up] for up in upstreams if up in key_of),
                )
            )
            accumulator.clock.reset()
            accumulator.period_start_delivered = stats.delivered
        breaches: list[SLABreach] = []
        for stage in figures:
            for rule in self._sla:
                breaches.extend(rule.check(stage, now))
        snapshot = MetricsSnapshot(
            sequence=self._sequence,
            time=now,
            period=period,
            stages=tuple(figures),
            breaches=tuple(breaches),
        )
        self._sequence += 1
        return snapshot


def _outstanding(stats: StageStatistics) -> int:
    return outstanding_demand(stats.requested, stats.delivered)


class _MetricsSubscription(DownstreamStage):
    """One subscriber's metrics stream: a periodic sampling task and a one-snapshot slot.

    Samples are due at ``start + k * interval`` (``Scheduler.schedule_periodic``): every
    ``period_ticks``-th one closes a period with a snapshot, so periods do not drift.

    The slot conflates: a snapshot that finds the previous one still undelivered (no
    demand) replaces it, carrying its breaches over, and ``skipped``/``dropped`` count it.
    Counters are cumulative, so a skipped snapshot loses resolution, never a count or a
    breach.
    """

    __slots__ = (
        "_dropped",
        "_finished",
        "_interval",
        "_pending",
        "_period_ticks",
        "_sampler",
        "_scheduler",
        "_task",
        "_ticks",
        "_until_done",
    )

    def __init__(
        self,
        downstream: Subscriber[MetricsSnapshot],
        sampler: _Sampler,
        *,
        scheduler: Scheduler,
        interval: float,
        period_ticks: int,
        until_done: bool,
    ) -> None:
        super().__init__(downstream)
        self._sampler = sampler
        self._scheduler = scheduler
        self._interval = interval
        self._period_ticks = period_ticks
        self._until_done = until_done
        self._ticks = 0
        self._pending: MetricsSnapshot | None = None
        self._dropped = 0
        self._finished = False
        self._task: PeriodicTask | None = None

    def _buffered_now(self) -> int:
        return 0 if self._pending is None else 1

    def _dropped_now(self) -> int:
        return self._dropped

    def start(self) -> None:
        """Start sampling: every ``interval`` seconds, the first ``interval`` from now."""
        task = self._scheduler.schedule_periodic(self._interval, self._tick)
        with self._lock:
            alive = not (self._cancelled or self._terminated or self._finished)
            if alive:
                self._task = task
        if not alive:
            task.cancel()

    def _tick(self) -> None:
        """On the scheduler: sample; at the end of a period, offer a snapshot."""
        with self._lock:
            if self._cancelled or self._terminated or self._finished:
                return
        try:
            self._ticks += 1
            if self._ticks % self._period_ticks:
                self._sampler.sample()
                return
            finished = self._offer(self._sampler.snapshot())
        except Exception as exc:  # a stage's statistics() broke: end the stream with it
            self.fail(exc)
            return
        if finished:
            with self._lock:
                task = self._task
            if task is not None:
                task.cancel()  # the last snapshot is taken: no more samples

    def _offer(self, snapshot: MetricsSnapshot) -> bool:
        """Put ``snapshot`` in the slot; return whether it is the last one."""
        finished = (
            self._until_done
            and bool(snapshot.stages)
            and all(stage.terminated for stage in snapshot.stages)
        )
        with self._lock:
            previous = self._pending
            if previous is not None:
                self._dropped += 1
                snapshot = replace(
                    snapshot,
                    breaches=previous.breaches + snapshot.breaches,
                    skipped=previous.skipped + 1,
                )
            self._pending = snapshot
            self._high_water = max(self._high_water, 1)
            self._finished = self._finished or finished
        self._schedule()
        return finished

    def _drain(self) -> None:
        while True:
            with self._lock:
                if self._terminated:
                    return
                downstream = self._downstream
                snapshot: MetricsSnapshot | None = None
                error: Exception | None = None
                complete = False
                ended = True
                if self._cancelled or downstream is None:
                    self._terminate_locked()
                    self._pending = None
                    downstream = None  # cancelled: nothing more goes downstream
                else:
                    error = self._error
                    if error is None and self._pending is not None and self._demand > 0:
                        snapshot, self._pending = self._pending, None
                        if self._demand != MAX_DEMAND:
                            self._demand -= 1
                    complete = error is None and self._finished and self._pending is None
                    ended = error is not None or complete
                    if ended:
                        self._terminate_locked()
                    elif snapshot is None:
                        if self._guard.release_locked():
                            continue  # work arrived while this pass ran
                        return
                task = self._task if ended else None
            if task is not None:
                task.cancel()  # stop sampling
            if downstream is None:
                return
            if snapshot is not None:
                self._deliver(downstream, (snapshot,))
            if error is not None:
                signal_on_error(downstream, error)
                return
            if complete:
                signal_on_complete(downstream)
                return


class MetricsPublisher(Publisher[MetricsSnapshot]):
    """The publisher ``metrics_stream`` returns: each subscriber gets its own sampling task."""

    __slots__ = ("_flow", "_interval", "_period_ticks", "_scheduler", "_sla", "_until_done")

    def __init__(
        self,
        flow: Publisher[Any],
        *,
        interval: float,
        period_ticks: int,
        scheduler: Scheduler | None,
        sla: tuple[SLA, ...],
        until_done: bool,
    ) -> None:
        self._flow = flow
        self._interval = interval
        self._period_ticks = period_ticks
        self._scheduler = scheduler
        self._sla = sla
        self._until_done = until_done

    def subscribe(self, subscriber: Subscriber[MetricsSnapshot]) -> None:
        """Start sampling for ``subscriber`` (Rule 1.9); snapshots wait for its demand."""
        check_subscriber(subscriber)
        scheduler = default_scheduler() if self._scheduler is None else self._scheduler
        sampler = _Sampler(self._flow, self._sla, scheduler)
        subscription = _MetricsSubscription(
            subscriber,
            sampler,
            scheduler=scheduler,
            interval=self._interval,
            period_ticks=self._period_ticks,
            until_done=self._until_done,
        )
        if signal_on_subscribe(subscriber, subscription):
            subscription.start()
        else:
            subscription.cancel()


def metrics_stream(
    flow: Publisher[Any],
    period: float,
    *,
    scheduler: Scheduler | None = None,
    sla: Iterable[SLA] = (),
    samples_per_period: int = 10,
    until_done: bool = True,
) -> MetricsPublisher:
    """Every stage's counters of ``flow``, one ``MetricsSnapshot`` per ``period``.

    Marble (``period=1``; the subscriber requests one at a time)::

        time:      ----1s----2s----3s----(flow done)
        snapshots: -----s0----s1----s2----s3|

    Args:
        flow: a ``Flow`` (or any operator publisher); the stages of its most recent run
            are read, as ``Flow.metrics()`` reads them.
        period: seconds between snapshots, on the scheduler's clock.
        scheduler: the ``reactive_streams.schedulers.Scheduler`` whose clock and
            periodic tasks drive the samples (``schedule_periodic``: sample ``n`` is due
            at ``start + n * (period / samples_per_period)``, so periods do not drift);
            ``reactive_streams.testing.VirtualTimeScheduler`` makes tests exact. By
            default ``default_scheduler()``, the daemon timer thread the time operators
            share.
        sla: rules checked on every stage at the end of each period; a broken limit is
            an ``SLABreach`` in that snapshot's ``breaches``.
        samples_per_period: how often per period each stage's state is sampled to split
            the period into busy, idle and backpressured time, ``>= 1``. Keep the
            interval between samples at 10 ms or more: each sample wakes a thread that
            competes for the GIL (``benchmarks/bench_metrics.py``).
        until_done: complete the stream after the first snapshot in which every stage
            has terminated; otherwise it runs until cancelled.

    Returns:
        A ``Publisher[MetricsSnapshot]``; each subscriber gets its own samples.

    Raises:
        TypeError, ValueError: ``period`` is not a positive finite number, or
            ``samples_per_period`` is not a positive ``int``.
        TypeError: ``scheduler`` is not a ``Scheduler``.

    Backpressure:
        One snapshot per unit of demand. A snapshot due while the subscriber has no
        demand replaces the undelivered one (its SLA breaches are carried over, and
        ``skipped`` counts it): counters are cumulative, so a slow subscriber sees
        coarser periods but never loses a count or a breach.

    Concurrency:
        Sampling runs on the scheduler's thread and reads each stage's ``statistics()``
        (one short lock per stage); stages are not instrumented, so metrics off costs
        nothing and metrics on costs one sample per stage per ``period /
        samples_per_period``. Busy, idle and backpressured times are sampled estimates,
        as Flink's first back-pressure monitor sampled task threads: the state at each
        sample is charged with the time since the previous one.
    """
    if isinstance(period, bool) or not isinstance(period, int | float):
        raise TypeError(f"period must be a number of seconds, got {type(period).__qualname__}")
    if not (period > 0 and math.isfinite(period)):
        raise ValueError(f"period must be positive and finite, got {period}")
    check_positive("samples_per_period", samples_per_period)
    if scheduler is not None and not isinstance(scheduler, Scheduler):
        raise TypeError(
            "metrics_stream(scheduler=) takes a reactive_streams.schedulers.Scheduler, got "
            f"{type(scheduler).__qualname__}"
        )
    return MetricsPublisher(
        flow,
        interval=period / samples_per_period,
        period_ticks=samples_per_period,
        scheduler=scheduler,
        sla=tuple(sla),
        until_done=until_done,
    )
