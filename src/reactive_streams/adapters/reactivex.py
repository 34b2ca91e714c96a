"""Bridges between reactive streams and reactivex (RxPY) Observables.

* ``from_observable(observable, *, buffer_size, overflow="error", on_drop=None)``: a
  ``Publisher`` over an Observable, which cannot slow down, so the bound and the overflow
  strategy are the caller's explicit choice; drops are counted in ``statistics()``.
* ``to_observable(publisher, *, prefetch=256)``: an Observable that requests in batches and
  replenishes at 75%; disposing it cancels.

Needs the ``reactivex`` extra (``pip install 'reactive-streams-py[reactivex]'``); reactivex
is imported on first use.
"""

from __future__ import annotations

from .._core import set_public_module
from ._reactivex import ObservablePublisher, from_observable, to_observable

__all__ = ["ObservablePublisher", "from_observable", "to_observable"]

set_public_module(__name__, globals())
