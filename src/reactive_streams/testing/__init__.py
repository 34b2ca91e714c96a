"""Helpers for testing code that uses reactive streams.

* ``RecordingSubscriber``: records every signal, requests only when told to, and notes
  protocol violations it can see (overlapping signals, signals after a terminal one, more
  elements than requested).
* ``collect(publisher)``: subscribe, request everything, wait, return the elements.
"""

from __future__ import annotations

from ._recording import RecordingSubscriber, collect

__all__ = ["RecordingSubscriber", "collect"]

for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
