"""Hubs: producers and consumers that attach and leave while the stream runs.

* ``MergeHub(buffer_size)``: n producers (``sink()`` each) into one ``source``.
* ``BroadcastHub(source, buffer_size, slow_consumer=...)``: one source to every consumer
  attached at the time, with bounded drift.
* ``Router(buffer_size)``: n producers (``sink()``) to m consumers with a selective
  interest (``subscribe_where(predicate)``): n + m streams instead of n x m.

Each hub has ``statistics() -> HubStatistics`` (producers, consumers, buffered elements,
drops, failures) and is fully demand-driven: every buffer is bounded by ``buffer_size``.
"""

from __future__ import annotations

from .._core import set_public_module
from ._broadcast import BroadcastHub, SlowConsumer
from ._hub import HubStatistics
from ._router import MergeHub, Router

__all__ = ["BroadcastHub", "HubStatistics", "MergeHub", "Router", "SlowConsumer"]

set_public_module(__name__, globals())
