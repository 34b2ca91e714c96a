"""Reference implementations: teaching-quality, rule-commented, and exact under concurrency.

* ``RangePublisher``: integers of a range, synchronous.
* ``IterablePublisher``: any iterable, synchronous.
* ``ExecutorIterablePublisher``: any iterable, every signal on an executor.
* ``SyncSubscriber`` / ``ExecutorSubscriber``: base classes with one method to implement.
"""

from __future__ import annotations

from ._iterable import ExecutorIterablePublisher as ExecutorIterablePublisher
from ._iterable import IterablePublisher as IterablePublisher
from ._range import RangePublisher as RangePublisher
from ._subscribers import ExecutorSubscriber as ExecutorSubscriber
from ._subscribers import SyncSubscriber as SyncSubscriber

for _cls in (
    ExecutorIterablePublisher,
    IterablePublisher,
    RangePublisher,
    ExecutorSubscriber,
    SyncSubscriber,
):
    _cls.__module__ = __name__
del _cls
