"""Export a metrics stream to Prometheus through ``prometheus_client``."""

from __future__ import annotations

import contextlib
import importlib
import threading
from typing import TYPE_CHECKING, Any

from .._core import accept_subscription, cancel_quietly
from ..api import Subscriber, Subscription
from ._snapshot import MetricsSnapshot

if TYPE_CHECKING:
    from collections.abc import Iterator

    from prometheus_client.registry import CollectorRegistry

__all__ = ["PrometheusExporter"]

_INSTALL_HINT = (
    "reactive_streams.metrics.PrometheusExporter needs prometheus_client: "
    "pip install 'reactive-streams-py[metrics]'"
)

_COUNTERS = (
    ("stage_elements_in", "elements_in", "Elements a stage received."),
    ("stage_elements_out", "elements_out", "Elements a stage delivered downstream."),
    ("stage_dropped", "dropped", "Elements a stage discarded on purpose (overflow)."),
)
_GAUGES = (
    ("stage_demand_outstanding", "demand_outstanding", "Demand requested and not yet met."),
    ("stage_buffered", "buffered", "Elements a stage holds now."),
    ("stage_high_water_mark", "high_water_mark", "The most elements a stage ever held."),
    ("stage_throughput", "throughput", "Elements delivered per second in the last period."),
    ("stage_busy_ms_per_second", "busy_ms_per_s", "Milliseconds per second busy."),
    ("stage_idle_ms_per_second", "idle_ms_per_s", "Milliseconds per second idle."),
    (
        "stage_backpressured_ms_per_second",
        "backpressured_ms_per_s",
        "Milliseconds per second without downstream demand.",
    ),
)


class PrometheusExporter(Subscriber[MetricsSnapshot]):
    """Subscribe it to a metrics stream; every scrape shows the latest snapshot.

    It registers a collector in ``registry`` (the default registry by default) that
    renders the last snapshot received, one sample per stage labelled ``stage`` (the
    ``Flow.metrics()`` key) and ``operator``, plus ``<namespace>_sla_breaches_total`` per
    stage and rule. Serve it with ``serve_metrics`` (a bounded endpoint) or read it with
    ``generate_latest``; ``close()`` cancels the stream and unregisters.

    Args:
        registry: a ``prometheus_client.CollectorRegistry``; ``None`` for the default.
        namespace: the metric name prefix.

    Raises:
        ImportError: prometheus_client is not installed.

    Backpressure: requests one snapshot at a time, the next after storing the last.
    """

    def __init__(
        self, registry: CollectorRegistry | None = None, *, namespace: str = "reactive_streams"
    ) -> None:
        try:
            self._prometheus: Any = importlib.import_module("prometheus_client")
            self._core: Any = importlib.import_module("prometheus_client.core")
        except ImportError as exc:
            raise ImportError(_INSTALL_HINT) from exc
        self._registry = self._prometheus.REGISTRY if registry is None else registry
        self._namespace = namespace
        self._lock = threading.Lock()
        self._latest: MetricsSnapshot | None = None
        self._breaches: dict[tuple[str, str], int] = {}
        self._subscription: Subscription | None = None
        self._registry.register(self)

    # ------------------------------------------------------------------ the collector
    def describe(self) -> list[Any]:
        """No fixed description: the stages are only known at run time."""
        return []

    def collect(self) -> Iterator[Any]:
        """Render the latest snapshot (called by ``prometheus_client`` on each scrape)."""
        with self._lock:
            snapshot = self._latest
            breaches = dict(self._breaches)
        core = self._core
        prefix = self._namespace
        labels = ["stage", "operator"]
        stages = () if snapshot is None else snapshot.stages
        for name, attribute, documentation in _COUNTERS:
            family = core.CounterMetricFamily(f"{prefix}_{name}", documentation, labels=labels)
            for stage in stages:
                family.add_metric([stage.stage, stage.operator], getattr(stage, attribute))
            yield family
        for name, attribute, documentation in _GAUGES:
            family = core.GaugeMetricFamily(f"{prefix}_{name}", documentation, labels=labels)
            for stage in stages:
                family.add_metric([stage.stage, stage.operator], getattr(stage, attribute))
            yield family
        family = core.CounterMetricFamily(
            f"{prefix}_sla_breaches",
            "SLA limits broken, per stage and rule.",
            labels=["stage", "rule"],
        )
        for (stage_key, rule), count in sorted(breaches.items()):
            family.add_metric([stage_key, rule], count)
        yield family

    # ------------------------------------------------------------------ the subscriber
    def on_subscribe(self, subscription: Subscription) -> None:
        """Keep the first subscription (Rule 2.5) and request one snapshot."""
        if not accept_subscription(subscription, self._claim):
            return
        subscription.request(1)

    def _claim(self, subscription: Subscription) -> bool:
        with self._lock:
            first = self._subscription is None
            if first:
                self._subscription = subscription
        return first

    def on_next(self, element: MetricsSnapshot) -> None:
        """Store the snapshot for the next scrape, count its breaches, ask for the next."""
        if element is None:
            raise TypeError("Rule 2.13: on_next(None)")
        with self._lock:
            self._latest = element
            for breach in element.breaches:
                key = (breach.stage, breach.rule)
                self._breaches[key] = self._breaches.get(key, 0) + 1
            subscription = self._subscription
        if subscription is not None:
            subscription.request(1)

    def on_error(self, error: Exception) -> None:
        """The stream failed: the last snapshot stays visible."""
        if error is None:
            raise TypeError("Rule 2.13: on_error(None)")

    def on_complete(self) -> None:
        """The flow finished: the last snapshot stays visible."""

    def close(self) -> None:
        """Cancel the metrics stream and remove the collector from the registry."""
        with self._lock:
            subscription, self._subscription = self._subscription, None
        if subscription is not None:
            cancel_quietly(subscription)
        with contextlib.suppress(KeyError):  # closed twice
            self._registry.unregister(self)
