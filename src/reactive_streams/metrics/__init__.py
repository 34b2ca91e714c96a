"""Metrics as a stream: every stage's counters on a period, SLA checks, Prometheus export.

* ``metrics_stream(flow, period, *, scheduler=None, sla=())``: a
  ``Publisher[MetricsSnapshot]``, one snapshot per period with each stage's elements in
  and out, demand outstanding, buffered, dropped, throughput, and the time busy, idle
  and backpressured per second (Flink's split).
* ``SLA``: limits (minimum throughput, maximum buffered, maximum backpressured time per
  second); a broken one is an ``SLABreach`` in the snapshot of that period.
* ``PrometheusExporter``: a subscriber of that stream that serves the latest snapshot to
  ``prometheus_client`` (the ``metrics`` extra).
* ``Scheduler``: the two-method protocol (``now``, ``call_later``) a stream runs on, so a
  fake clock or a virtual-time scheduler can drive it in tests.
"""

from __future__ import annotations

from ._prometheus import PrometheusExporter
from ._scheduler import Cancellable, Scheduler, ThreadScheduler
from ._sla import SLA
from ._snapshot import MetricsSnapshot, SLABreach, StageMetrics
from ._stream import MetricsPublisher, metrics_stream

__all__ = [
    "SLA",
    "Cancellable",
    "MetricsPublisher",
    "MetricsSnapshot",
    "PrometheusExporter",
    "SLABreach",
    "Scheduler",
    "StageMetrics",
    "ThreadScheduler",
    "metrics_stream",
]

for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
