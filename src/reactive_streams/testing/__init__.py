"""Helpers for testing code that uses reactive streams.

* ``RecordingSubscriber``: records every signal, requests only when told to, and notes
  protocol violations it can see (overlapping signals, signals after a terminal one, more
  elements than requested).
* ``collect(publisher)``: subscribe, request everything, wait, return the elements.
* ``VirtualTimeScheduler``: a scheduler whose clock moves only in ``advance(seconds)``,
  for exact time-operator tests that take no wall time.
"""

from __future__ import annotations

from .._core import set_public_module
from ._recording import RecordingSubscriber, collect
from ._virtual_time import VirtualTimeScheduler

__all__ = ["RecordingSubscriber", "VirtualTimeScheduler", "collect"]

set_public_module(__name__, globals())
