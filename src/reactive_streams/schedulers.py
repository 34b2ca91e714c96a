"""Schedulers: where and when the time operators run their timed actions.

A ``Scheduler`` runs a callable after a delay, at an instant or periodically, on a thread
of its own choosing, and tells the time. Every time operator (``sample``,
``throttle_first``, ``debounce``, ``timeout``, ``delay``, ``window``, ``Flow.interval``)
and ``reactive_streams.metrics.metrics_stream`` take ``scheduler=``; three kinds exist:

* ``ThreadTimerScheduler``: one daemon timer thread runs every action in due order (the
  default, shared: ``default_scheduler()``);
* ``AsyncioScheduler(loop)``: actions run on an asyncio event loop (``loop.call_at``);
* ``reactive_streams.testing.VirtualTimeScheduler``: time only moves when a test calls
  ``advance(seconds)``, so time tests are exact and take no wall time.

>>> from reactive_streams.testing import VirtualTimeScheduler
>>> scheduler = VirtualTimeScheduler()
>>> fired = []
>>> _ = scheduler.schedule(2.0, lambda: fired.append(scheduler.now()))
>>> scheduler.advance(1.0); fired
[]
>>> scheduler.advance(1.0); fired
[2.0]

Actions must not raise; one that does is reported through the undeliverable hook and the
scheduler goes on with the next one.
"""

from __future__ import annotations

from ._core import (
    AsyncioScheduler,
    Cancellable,
    PeriodicTask,
    ScheduledTask,
    Scheduler,
    ThreadTimerScheduler,
    default_scheduler,
    set_public_module,
)

__all__ = [
    "AsyncioScheduler",
    "Cancellable",
    "PeriodicTask",
    "ScheduledTask",
    "Scheduler",
    "ThreadTimerScheduler",
    "default_scheduler",
]

set_public_module(__name__, globals())
