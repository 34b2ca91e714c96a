"""Bridges between reactive streams and asyncio.

* ``to_async_iterator(publisher, *, prefetch=256, executor=None, non_blocking=False)``:
  consume any publisher with ``async for``; at most ``prefetch`` elements are buffered,
  and the publisher's ``subscribe``/``request``/``cancel`` run on an executor
  (``default_executor()`` unless given), never on the loop thread, unless
  ``non_blocking=True`` says they return at once.
* ``from_async_iterable(aiterable, *, loop=None)``: publish an async iterable, pulling one
  item per unit of demand.
"""

from __future__ import annotations

from .._core import set_public_module
from ._async_iterator import AsyncIteratorSubscriber, default_executor, to_async_iterator
from ._async_publisher import AsyncIterablePublisher, from_async_iterable

__all__ = [
    "AsyncIterablePublisher",
    "AsyncIteratorSubscriber",
    "default_executor",
    "from_async_iterable",
    "to_async_iterator",
]

set_public_module(__name__, globals())
