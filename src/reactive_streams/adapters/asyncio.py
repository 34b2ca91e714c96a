"""Bridges between reactive streams and asyncio.

* ``to_async_iterator(publisher, *, prefetch=256)``: consume any publisher with
  ``async for``; at most ``prefetch`` elements are buffered.
* ``from_async_iterable(aiterable, *, loop=None)``: publish an async iterable, pulling one
  item per unit of demand.
"""

from __future__ import annotations

from ._async_iterator import AsyncIteratorSubscriber, to_async_iterator
from ._async_publisher import AsyncIterablePublisher, from_async_iterable

__all__ = [
    "AsyncIterablePublisher",
    "AsyncIteratorSubscriber",
    "from_async_iterable",
    "to_async_iterator",
]

for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
