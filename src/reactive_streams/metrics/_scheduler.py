"""Deprecated: the metrics stream's own ``now``/``call_later`` scheduler protocol.

``metrics_stream`` runs on ``reactive_streams.schedulers.Scheduler`` like every time
operator. This module keeps old code working for a release and will then go away:

* ``CallLaterScheduler`` adapts an object with ``now()`` and ``call_later(delay, action)``
  (the old protocol) to a ``Scheduler``; ``metrics_stream`` uses it, with a
  ``DeprecationWarning``, when it is given such an object.
* ``ThreadScheduler`` is ``reactive_streams.schedulers.ThreadTimerScheduler``;
  ``reactive_streams.metrics.Scheduler``, ``ThreadScheduler`` and ``Cancellable`` resolve
  to the ``reactive_streams.schedulers`` names with a ``DeprecationWarning``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..schedulers import ScheduledTask, Scheduler, ThreadTimerScheduler

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..schedulers import Cancellable

__all__ = ["CallLaterScheduler", "ThreadScheduler"]

ThreadScheduler = ThreadTimerScheduler
"""Deprecated alias of ``reactive_streams.schedulers.ThreadTimerScheduler``."""


class _CallLater(Protocol):
    def now(self) -> float: ...

    def call_later(self, delay: float, action: Callable[[], None]) -> Cancellable: ...


class _CallLaterTask(ScheduledTask):
    """A ``ScheduledTask`` whose ``cancel`` also cancels the old scheduler's handle."""

    __slots__ = ("handle",)

    def __init__(self, due: float, action: Callable[[], object]) -> None:
        super().__init__(due, action)
        self.handle: Cancellable | None = None

    def cancel(self) -> None:
        super().cancel()
        handle = self.handle
        if handle is not None:
            handle.cancel()


class CallLaterScheduler(Scheduler):
    """A ``Scheduler`` on an object with ``now()`` and ``call_later(delay, action)``.

    Deprecated: implement ``Scheduler`` (``now`` and ``schedule``) instead.
    """

    __slots__ = ("_legacy",)

    def __init__(self, legacy: _CallLater) -> None:
        self._legacy = legacy

    def now(self) -> float:
        """The old scheduler's ``now()``."""
        return self._legacy.now()

    def schedule(self, delay: float, action: Callable[[], object]) -> ScheduledTask:
        """``call_later(delay, ...)`` on the old scheduler; ``cancel()`` cancels it there."""
        delay = max(0.0, delay)
        task = _CallLaterTask(self._legacy.now() + delay, action)
        task.handle = self._legacy.call_later(delay, task.run)
        return task
