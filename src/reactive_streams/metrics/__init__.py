"""Metrics as a stream: every stage's counters on a period, SLA checks, Prometheus export.

* ``metrics_stream(flow, period, *, scheduler=None, sla=())``: a
  ``Publisher[MetricsSnapshot]``, one snapshot per period with each stage's elements in
  and out, demand outstanding, buffered, dropped, throughput, and the time busy, idle
  and backpressured per second (Flink's split).
* ``SLA``: limits (minimum throughput, maximum buffered, maximum backpressured time per
  second); a broken one is an ``SLABreach`` in the snapshot of that period.
* ``StageClock``, ``outstanding_demand``: the busy/idle/backpressured bookkeeping and the
  demand arithmetic a sampler of stages that are not ``Flow`` operators reuses (the main
  job's metrics do).
* ``PrometheusExporter``: a subscriber of that stream that serves the latest snapshot to
  ``prometheus_client`` (the ``metrics`` extra).
* ``serve_metrics(port, host, *, registry=None, ...)``: a ``MetricsServer``, the HTTP
  endpoint Prometheus scrapes, on a bounded pool of threads with a read timeout.

A stream runs on a ``reactive_streams.schedulers.Scheduler`` (``scheduler=``), the same
as the time operators: ``reactive_streams.testing.VirtualTimeScheduler`` drives it in
tests.
"""

from __future__ import annotations

from .._core import set_public_module
from ._prometheus import PrometheusExporter
from ._server import MetricsServer, serve_metrics
from ._sla import SLA
from ._snapshot import MetricsSnapshot, SLABreach, StageMetrics
from ._stage_clock import StageClock, StageState, outstanding_demand
from ._stream import MetricsPublisher, metrics_stream

__all__ = [
    "SLA",
    "MetricsPublisher",
    "MetricsServer",
    "MetricsSnapshot",
    "PrometheusExporter",
    "SLABreach",
    "StageClock",
    "StageMetrics",
    "StageState",
    "metrics_stream",
    "outstanding_demand",
    "serve_metrics",
]

set_public_module(__name__, globals())
