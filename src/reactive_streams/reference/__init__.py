"""Reference implementations: teaching-quality, rule-commented, and exact under concurrency.

* ``RangePublisher``: integers of a range, synchronous.
* ``IterablePublisher``: any iterable, synchronous.
* ``ExecutorIterablePublisher``: any iterable, every signal on an executor.
* ``SyncSubscriber`` / ``ExecutorSubscriber``: base classes with one method to implement.
"""

from __future__ import annotations

from .._core import set_public_module
from ._iterable import ExecutorIterablePublisher, IterablePublisher
from ._range import RangePublisher
from ._subscribers import ExecutorSubscriber, SyncSubscriber

__all__ = [
    "ExecutorIterablePublisher",
    "ExecutorSubscriber",
    "IterablePublisher",
    "RangePublisher",
    "SyncSubscriber",
]

set_public_module(__name__, globals())
