"""The pipeline's per-stage metrics: sampled, named bottleneck, served to Prometheus.

The job's stages are ``source -> bridge -> spark -> sink`` with ``--read-on driver``
(``FileSource`` into ``to_spark_stream``) and ``source -> spark -> sink`` with ``--read-on
executors`` (``from_splits`` reads on the executors, inside each micro-batch). None of
them is a ``Flow`` operator, so ``metrics_stream`` cannot walk them: ``PipelineMetrics``
samples them the same way (each stage's state, ``samples_per_period`` times a period,
charged with the time since the previous sample) and builds the same public
``MetricsSnapshot``, which feeds a ``PrometheusExporter`` through a
``Flow.interval`` stream and names the bottleneck with ``MetricsSnapshot.bottleneck``.

A stage's state at a sample (``StageState``), with what "downstream demand" is for each:

* source (driver): backpressured while the bridge asks nothing of it, else busy reading;
* source (executors): reading is part of each micro-batch: as the ``spark`` stage;
* bridge: backpressured while it holds rows and asks the source for none (Spark is not
  taking them), busy while rows move through it, else idle (waiting for the source);
* spark: backpressured while the sink has no demand (``foreachBatch`` waits), busy while a
  trigger runs (``StreamingQuery.status``) past getting its offsets, else idle;
* sink: busy while it folds a micro-batch (its demand is 0), else idle (waiting for Spark).
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from .._core import StreamStatistics
from ..metrics import (
    MetricsServer,
    MetricsSnapshot,
    PrometheusExporter,
    StageClock,
    StageMetrics,
    StageState,
    outstanding_demand,
    serve_metrics,
)
from ..operators import Flow
from ._diagnostics import Bottleneck
from ._errors import PipelineUsageError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from ._diagnostics import PipelineProgress

__all__ = [
    "MeteredRun",
    "StageStreams",
    "Figures",
    "PipelineMetrics",
    "SparkBatch",
    "bottleneck_of",
    "bridge_state",
    "sink_state",
    "source_state",
    "spark_batch",
    "spark_state",
]

_log = logging.getLogger(__name__)


NAMESPACE = "reactive_streams"
"""The prefix of every metric name (as ``PrometheusExporter``'s default)."""

_INSTALL_HINT = (
    "--metrics-port needs prometheus_client: pip install 'reactive-streams-py[metrics]' "
    "(the spark extra includes it)"
)

_SOURCE_BUSY_SHARE = 500.0
"""ms per second a source must be busy to be named when no stage waits on another."""


# -- the state of each stage at one sample ------------------------------------------------


def _outstanding(stats: StreamStatistics) -> int:
    return outstanding_demand(stats.requested, stats.delivered)


def source_state(stats: StreamStatistics) -> StageState:
    """The driver-side source: busy while the bridge has demand open, else backpressured."""
    if stats.terminated or stats.cancelled or stats.requested == 0:
        return "idle"  # done, or not subscribed yet
    return "busy" if _outstanding(stats) > 0 else "backpressured"


def bridge_state(stats: StreamStatistics, *, moved: bool) -> StageState:
    """The ``to_spark_stream`` bridge: ``moved`` says rows came in since the last sample."""
    if stats.terminated or stats.cancelled:
        return "idle"
    if stats.buffered > 0 and _outstanding(stats) == 0:
        return "backpressured"  # full: Spark is not taking what it holds
    return "busy" if moved else "idle"


def spark_state(sink: StreamStatistics, status: Mapping[str, Any]) -> StageState:
    """Spark's micro-batches: ``sink`` is the demand of its downstream.

    ``status`` is ``StreamingQuery.status``: a trigger runs while ``isTriggerActive``,
    except while it gets offsets (it waits for its source to say what it has).
    """
    if sink.terminated or sink.cancelled:
        return "idle"
    if sink.requested > 0 and _outstanding(sink) == 0:
        return "backpressured"  # foreachBatch waits for the sink
    waiting = str(status.get("message") or "").startswith("Getting offsets")
    return "busy" if status.get("isTriggerActive") and not waiting else "idle"


def sink_state(sink: StreamStatistics) -> StageState:
    """The result sink: busy while it folds a micro-batch in (its demand is then 0)."""
    if sink.terminated or sink.cancelled or sink.requested == 0:
        return "idle"
    return "busy" if _outstanding(sink) == 0 else "idle"


# -- the bottleneck ------------------------------------------------------------------------


def bottleneck_of(snapshot: MetricsSnapshot | None) -> Bottleneck | None:
    """The stage holding the pipeline back in ``snapshot``, or ``None``.

    ``MetricsSnapshot.bottleneck()``: the busy stage whose upstream is backpressured. When
    none is, the first stage (the source) if it was busy at least half the period: then
    nothing after it is backpressured because everything waits for its records.
    """
    if snapshot is None or not snapshot.stages:
        return None
    stage = snapshot.bottleneck()
    if stage is not None:
        by_key = {item.stage: item for item in snapshot.stages}
        upstream = max(
            (by_key[key] for key in stage.upstreams if key in by_key),
            key=lambda item: item.backpressured_ms_per_s,
        )
        return Bottleneck(
            stage.stage, stage.busy_ms_per_s, upstream.stage, upstream.backpressured_ms_per_s
        )
    source = snapshot.stages[0]
    if source.busy_ms_per_s >= _SOURCE_BUSY_SHARE:
        return Bottleneck(source.stage, source.busy_ms_per_s)
    return None


# -- sampling ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SparkBatch:
    """The last micro-batch Spark reported (``StreamingQuery.lastProgress``).

    Attributes:
        batch_id: Spark's id of the batch.
        input_rows: rows it read.
        input_rows_per_second: rows/s that arrived, as Spark measures it.
        processed_rows_per_second: rows/s it processed.
        duration: seconds the trigger took (``durationMs.triggerExecution``).
    """

    batch_id: int
    input_rows: int
    input_rows_per_second: float
    processed_rows_per_second: float
    duration: float


def spark_batch(progress: Mapping[str, Any] | None) -> SparkBatch | None:
    """The figures of one ``StreamingQueryProgress`` (as a dict), or ``None``."""
    if not progress:
        return None
    try:
        return SparkBatch(
            batch_id=int(progress["batchId"]),
            input_rows=int(progress.get("numInputRows") or 0),
            input_rows_per_second=float(progress.get("inputRowsPerSecond") or 0.0),
            processed_rows_per_second=float(progress.get("processedRowsPerSecond") or 0.0),
            duration=float((progress.get("durationMs") or {}).get("triggerExecution", 0)) / 1e3,
        )
    except (KeyError, TypeError, ValueError):
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class StageStreams:
    """What a run's stages report at one sample (``None``: the stage does not exist yet).

    Attributes:
        source: the driver-side source's stream (``--read-on driver``).
        bridge: the ``to_spark_stream`` bridge's stream (``--read-on driver``).
        sink: the result sink's stream.
        sink_rows: rows the sink received.
        sink_done: the sink has ended (the run is over).
        query_status: ``StreamingQuery.status`` (empty before the query runs).
        last_progress: ``StreamingQuery.lastProgress`` when asked for, else ``None``.
    """

    source: StreamStatistics | None = None
    bridge: StreamStatistics | None = None
    sink: StreamStatistics | None = None
    sink_rows: int = 0
    sink_done: bool = False
    query_status: Mapping[str, Any] = field(default_factory=dict)
    last_progress: Any = None


class MeteredRun(Protocol):
    """What ``PipelineMetrics`` reads of a run, and nothing else."""

    @property
    def reads_on_executors(self) -> bool:
        """The input is read on Spark's executors (no driver-side source or bridge)."""
        ...

    def stage_streams(self, *, last_progress: bool = False) -> StageStreams:
        """The stages' statistics now (Spark's last progress too if asked).

        May raise (the JVM died): the sample counts every stage as idle.
        """
        ...

    def progress(self) -> PipelineProgress:
        """The run's counters now; may raise: the last period is shown again."""
        ...


class PipelineMetrics:
    """Samples a running ``Pipeline``'s stages: the latest snapshot and its bottleneck.

    ``start`` runs a stream of ``MetricsSnapshot`` built on
    ``Flow.interval(period / samples_per_period)``: each tick samples every stage's state,
    each ``samples_per_period``-th tick closes the period. With ``prometheus_client``
    installed a ``PrometheusExporter`` on ``registry`` (its own, not the default one)
    consumes it, next to a collector of the pipeline's own figures; ``serve`` puts that
    registry on an HTTP port.

    Args:
        pipeline: the run (what it reads of it: ``MeteredRun``); ``start`` is called
            once its stages exist.
        period: seconds per snapshot, ``> 0``.
        samples_per_period: state samples per period, ``>= 1``.
        clock: seconds, for the busy/idle/backpressured split (a fake one in tests).

    Concurrency: sampling runs on the interval's timer thread, one tick at a time;
    ``latest``, ``bottleneck`` and ``figures`` may be read from any thread. A failed
    reading (the JVM died, the session stopped) counts as idle: metrics never fail a run.
    Sampling ends with one last snapshot once the sink has ended, or at ``close``; the
    server serves that snapshot until ``close``.
    """

    def __init__(
        self,
        pipeline: MeteredRun,
        *,
        period: float = 1.0,
        samples_per_period: int = 10,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pipeline = pipeline
        self._clock = clock
        self._period = period
        self._samples = samples_per_period
        self.registry: Any = None
        self._exporter: PrometheusExporter | None = None
        self._server: MetricsServer | None = None
        self.url: str | None = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._latest: MetricsSnapshot | None = None
        self._figures: Figures | None = None
        self._times: dict[str, StageClock] = {}
        self._high_water: dict[str, int] = {}
        self._last_out: dict[str, int] = {}
        self._last_bridge_received = 0
        self._last_sample = 0.0
        self._period_start = 0.0
        self._sequence = 0
        self._ticks = 0
        self._started = False
        self._ending = False  # the run is over: one last snapshot, then the stream ends
        self._ended = False

    # -- control ------------------------------------------------------------------------

    def serve(self, port: int, host: str = "127.0.0.1") -> str:
        """Serve the metrics on ``host:port`` (``0``: a free port); return the URL.

        Raises:
            PipelineUsageError: prometheus_client is missing, or the port cannot be bound
                (in use, not allowed).
        """
        try:
            prometheus = importlib.import_module("prometheus_client")
        except ImportError:
            raise PipelineUsageError(_INSTALL_HINT) from None
        self.registry = prometheus.CollectorRegistry()
        self._exporter = PrometheusExporter(self.registry, namespace=NAMESPACE)
        self.registry.register(_PipelineCollector(self))
        try:
            self._server = serve_metrics(port, host, registry=self.registry)
        except OSError as exc:
            self._exporter.close()
            raise PipelineUsageError(
                f"--metrics-port {port}: cannot serve metrics on {host}:{port} "
                f"({exc.strerror or exc}); choose another port, or 0 for a free one"
            ) from None
        self.url = self._server.url
        return self.url

    def start(self) -> None:
        """Start sampling (idempotent; after the pipeline's stages exist)."""
        if self._started or self._closed.is_set():
            return
        self._started = True
        self._last_sample = self._period_start = self._clock()
        snapshots = (
            Flow.interval(self._period / self._samples)
            .take_while(lambda _tick: not (self._closed.is_set() or self._ended))
            .filter(self._tick)
            .map(lambda _tick: self._snapshot())
            .on_backpressure_latest()
        )
        if self._exporter is not None:
            snapshots.subscribe(self._exporter)
        else:  # nothing to serve: the display still names the bottleneck
            snapshots.subscribe(on_next=lambda _snapshot: None)

    def close(self) -> None:
        """Stop sampling and serving. Idempotent."""
        self._closed.set()
        if self._exporter is not None:
            self._exporter.close()
        server, self._server = self._server, None
        if server is not None:
            server.close()

    # -- what it saw --------------------------------------------------------------------

    @property
    def stages(self) -> tuple[str, ...]:
        """The stage names of this run, sources first."""
        if self._pipeline.reads_on_executors:
            return ("source", "spark", "sink")
        return ("source", "bridge", "spark", "sink")

    def latest(self) -> MetricsSnapshot | None:
        """The last period's snapshot, or ``None`` before the first period ended."""
        with self._lock:
            return self._latest

    def bottleneck(self) -> Bottleneck | None:
        """The stage that held the pipeline back in the last period (``bottleneck_of``)."""
        with self._lock:
            figures = self._figures
        return None if figures is None else figures.bottleneck

    def figures(self) -> Figures | None:
        """The pipeline's own figures at the end of the last period."""
        with self._lock:
            return self._figures

    # -- on the timer thread ------------------------------------------------------------

    def _tick(self, _index: int) -> bool:
        """Sample every stage's state; ``True`` at the end of a period."""
        now = self._clock()
        elapsed, self._last_sample = max(0.0, now - self._last_sample), now
        try:
            states = self._states()
        except Exception:  # the JVM died, the session stopped: never fail the run
            _log.debug("a metrics sample failed", exc_info=True)
            states = dict.fromkeys(self.stages, "idle")
        for name, state in states.items():
            self._times.setdefault(name, StageClock()).charge(state, elapsed)
        self._ticks += 1
        if self._sink_done():
            self._ending = True  # the last snapshot shows the final counts
        return self._ending or self._ticks % self._samples == 0

    def _sink_done(self) -> bool:
        try:
            return self._pipeline.stage_streams().sink_done
        except Exception:  # the JVM died: the run's own wait ends it
            return False

    def _states(self) -> dict[str, StageState]:
        streams = self._pipeline.stage_streams()
        sink = streams.sink or _NOTHING
        spark = spark_state(sink, streams.query_status)
        states: dict[str, StageState] = {}
        if self._pipeline.reads_on_executors:
            states["source"] = spark  # read inside each micro-batch, on the executors
        else:
            source = streams.source or _NOTHING
            bridge = streams.bridge or _NOTHING
            moved = bridge.delivered != self._last_bridge_received
            self._last_bridge_received = bridge.delivered
            states["source"] = source_state(source)
            states["bridge"] = bridge_state(bridge, moved=moved)
        states["spark"] = spark
        states["sink"] = sink_state(sink)
        return states

    def _snapshot(self) -> MetricsSnapshot:
        """Close the period: every stage's figures, the Spark batch, the bottleneck."""
        now = self._last_sample
        period, self._period_start = now - self._period_start, now
        try:
            progress = self._pipeline.progress()
        except Exception:  # never fail the run: keep showing the last period
            _log.debug("reading the pipeline's progress failed", exc_info=True)
            with self._lock:
                latest = self._latest
            self._ended = self._ending
            return latest or MetricsSnapshot(sequence=0, time=now, period=period, stages=())
        batch, rows_received = None, 0
        try:
            streams = self._pipeline.stage_streams(last_progress=True)
            rows_received = streams.sink_rows
            if streams.last_progress is not None:
                batch = spark_batch(streams.last_progress)
        except Exception:  # the JVM died, the session stopped
            _log.debug("reading the query's last progress failed", exc_info=True)
        if batch is None and self._figures is not None:
            batch = self._figures.batch
        stages = self._stage_figures(progress, rows_received, period)
        snapshot = MetricsSnapshot(
            sequence=self._sequence, time=now, period=period, stages=tuple(stages)
        )
        self._sequence += 1
        held_back = None if self._ending else bottleneck_of(snapshot)
        figures = Figures(progress=progress, batch=batch, bottleneck=held_back)
        with self._lock:
            self._latest = snapshot
            self._figures = figures
        self._ended = self._ending
        return snapshot

    def _stage_figures(
        self, progress: PipelineProgress, rows_received: int, period: float
    ) -> list[StageMetrics]:
        executors = self._pipeline.reads_on_executors
        into_spark = (
            progress.records_processed
            if executors
            else max(0, progress.records_emitted - progress.bridge_held)
        )
        sink_demand = progress.sink_demand
        # name, operator, elements in, out, demand outstanding, buffered, upstream
        rows: list[tuple[str, str, int, int, int, int, str | None]] = [
            ("source", "from_splits" if executors else "read_files", progress.records_read,
             progress.records_emitted, progress.source_demand, 0, None),
        ]  # fmt: skip
        if not executors:
            room = max(0, progress.bridge_bound - progress.bridge_held)
            rows.append(("bridge", "to_spark_stream", progress.records_emitted, into_spark,
                         room, progress.bridge_held, "source"))  # fmt: skip
        rows.append(("spark", "micro_batches", into_spark, progress.records_processed,
                     sink_demand, max(0, progress.in_flight - progress.bridge_held),
                     "source" if executors else "bridge"))  # fmt: skip
        rows.append(("sink", "result_sink", rows_received, rows_received, sink_demand, 0,
                     "spark"))  # fmt: skip
        figures = []
        for name, operator, elements_in, elements_out, demand, buffered, upstream in rows:
            times = self._times.pop(name, StageClock())
            busy, idle, backpressured = times.per_second()
            previous = self._last_out.get(name, 0)
            self._last_out[name] = elements_out
            high = self._high_water[name] = max(self._high_water.get(name, 0), buffered)
            figures.append(
                StageMetrics(
                    stage=name,
                    operator=operator,
                    elements_in=elements_in,
                    elements_out=elements_out,
                    demand_outstanding=demand,
                    buffered=buffered,
                    high_water_mark=high,
                    dropped=0,
                    throughput=(elements_out - previous) / period if period > 0 else 0.0,
                    busy_ms_per_s=busy,
                    idle_ms_per_s=idle if times.total > 0 else 1000.0,
                    backpressured_ms_per_s=backpressured,
                    terminated=self._ending or progress.phase == "done",
                    upstreams=() if upstream is None else (upstream,),
                )
            )
        return figures


_NOTHING: Final = StreamStatistics(
    requested=0, delivered=0, buffered=0, cancelled=False, terminated=False
)
"""The statistics of a stage that does not exist yet."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    """The pipeline's own figures at the end of a period (besides the snapshot).

    Attributes:
        progress: the pipeline's counters (``Pipeline.progress()``).
        batch: Spark's last micro-batch, or ``None`` before the first.
        bottleneck: the stage that held the pipeline back in the period, if any.
    """

    progress: PipelineProgress
    batch: SparkBatch | None
    bottleneck: Bottleneck | None


class _PipelineCollector:
    """``reactive_streams_pipeline_*``: what only the pipeline knows, labelled ``stage``."""

    def __init__(self, metrics: PipelineMetrics) -> None:
        self._metrics = metrics
        self._core = importlib.import_module("prometheus_client.core")

    def describe(self) -> list[Any]:
        """No fixed description: the families depend on the read path."""
        return []

    def collect(self) -> Iterator[Any]:
        """Render the last period's figures (called on each scrape)."""
        figures = self._metrics.figures()
        if figures is None:
            return
        progress, batch = figures.progress, figures.batch
        executors = progress.split_shares is not None
        core, prefix = self._core, f"{NAMESPACE}_pipeline"
        samples: list[tuple[str, str, str, str, float]] = [
            ("counter", "records_read", "source", "Records read from the input, valid or not.",
             progress.records_read),
            ("counter", "records_valid", "source", "Valid records handed on to Spark.",
             progress.records_emitted),
            ("counter", "dead_letters", "source", "Records refused (the dead-letter file).",
             progress.dead_letters),
            ("counter", "spark_input_rows", "spark",
             "Input rows of the micro-batches Spark finished.", progress.records_processed),
            ("counter", "spark_late_rows", "spark", "Rows dropped as late by a watermark.",
             progress.late_rows),
            ("counter", "sink_micro_batches", "sink", "Micro-batches folded into the result.",
             progress.batches),
            ("gauge", "sink_result_rows", "sink",
             "Rows in the result so far (groups, or rows appended).", progress.groups),
        ]  # fmt: skip
        if progress.total_rows is not None:  # a finite input of known size
            samples.append(
                ("gauge", "input_records_expected", "source",
                 "Records in the input, known up front (Parquet footers, the splits planned "
                 "on the executors, a finite route).", progress.total_rows)
            )  # fmt: skip
        if progress.total_bytes is not None and progress.bytes_read is not None:
            samples += [
                ("gauge", "input_bytes_expected", "source",
                 "Bytes of the input's CSV and JSON Lines files.", progress.total_bytes),
                ("counter", "input_bytes_read", "source",
                 "Bytes of the input read so far.", progress.bytes_read),
            ]  # fmt: skip
        eta = progress.eta
        if eta is not None:
            samples.append(
                ("gauge", "input_seconds_left", "source",
                 "Seconds until the input is read, at the rate so far.", eta)
            )  # fmt: skip
        if not executors:
            samples += [
                ("gauge", "bridge_rows_held", "bridge",
                 "Rows the to_spark_stream bridge holds (read, not yet acknowledged by Spark).",
                 progress.bridge_held),
                ("gauge", "bridge_rows_bound", "bridge", "The most rows the bridge may hold.",
                 progress.bridge_bound),
            ]  # fmt: skip
        if batch is not None:
            samples += [
                ("gauge", "spark_batch_id", "spark", "Id of Spark's last micro-batch.",
                 batch.batch_id),
                ("gauge", "spark_batch_input_rows", "spark",
                 "Input rows of Spark's last micro-batch.", batch.input_rows),
                ("gauge", "spark_input_rows_per_second", "spark",
                 "Rows per second that arrived in the last micro-batch.",
                 batch.input_rows_per_second),
                ("gauge", "spark_processed_rows_per_second", "spark",
                 "Rows per second Spark processed in the last micro-batch.",
                 batch.processed_rows_per_second),
                ("gauge", "spark_batch_duration_seconds", "spark",
                 "Seconds the last micro-batch's trigger took.", batch.duration),
            ]  # fmt: skip
        producer = progress.producer
        if producer is not None:
            samples += [
                ("gauge", "producer_outstanding_batches", "producer",
                 "Batches the executors requested of the rsocket:// producer, not sent yet.",
                 producer.outstanding_batches),
                ("gauge", "producer_streams", "producer",
                 "Streams open at the rsocket:// producer.", producer.streams),
                ("counter", "producer_sent_batches", "producer",
                 "Batches the rsocket:// producer sent since it started.",
                 producer.sent_batches),
            ]  # fmt: skip
            if producer.latency_p50 is not None and producer.latency_p99 is not None:
                latency = core.GaugeMetricFamily(
                    f"{prefix}_producer_latency_seconds",
                    "Seconds from a record's arrival at the producer to the commit of its "
                    "micro-batch (over the producer's last 10,000 batches).",
                    labels=["stage", "quantile"],
                )
                latency.add_metric(["producer", "0.5"], producer.latency_p50)
                latency.add_metric(["producer", "0.99"], producer.latency_p99)
                yield latency
        for kind, name, stage, documentation, value in samples:
            family_type = core.CounterMetricFamily if kind == "counter" else core.GaugeMetricFamily
            family = family_type(f"{prefix}_{name}", documentation, labels=["stage"])
            family.add_metric([stage], value)
            yield family
        bottleneck = figures.bottleneck
        family = core.GaugeMetricFamily(
            f"{prefix}_bottleneck",
            "1 for the stage that held the pipeline back in the last period, else 0.",
            labels=["stage"],
        )
        for stage in self._metrics.stages:
            family.add_metric([stage], 1.0 if bottleneck and bottleneck.stage == stage else 0.0)
        yield family
