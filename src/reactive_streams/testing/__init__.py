"""Helpers for testing code that uses reactive streams.

* ``RecordingSubscriber``: records every signal, requests only when told to, and notes
  protocol violations it can see (overlapping signals, signals after a terminal one, more
  elements than requested).
* ``collect(publisher)``: subscribe, request everything, wait, return the elements.
"""

from __future__ import annotations

from ._recording import RecordingSubscriber as RecordingSubscriber
from ._recording import collect as collect

RecordingSubscriber.__module__ = __name__
collect.__module__ = __name__
