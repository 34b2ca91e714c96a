"""Bridges between reactive streams and anyio object streams (asyncio and trio backends).

* ``from_receive_stream(stream)``: a ``Publisher`` whose demand pulls from an anyio
  ``ObjectReceiveStream``; cancelling closes the stream.
* ``to_receive_stream(publisher, *, max_buffer_size)``: an async context manager yielding
  a ``MemoryObjectReceiveStream`` whose buffer is the demand.

Neither runs upstream work on the event loop thread. Needs the ``anyio`` extra
(``pip install 'reactive-streams-py[anyio]'``); anyio is imported on first use.
"""

from __future__ import annotations

from .._core import set_public_module
from ._anyio import ReceiveStreamPublisher, from_receive_stream, to_receive_stream

__all__ = ["ReceiveStreamPublisher", "from_receive_stream", "to_receive_stream"]

set_public_module(__name__, globals())
