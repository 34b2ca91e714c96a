"""Operators: ``Flow``, a fluent pipeline where every stage follows Reactive Streams.

>>> from reactive_streams import Flow
>>> Flow.range(1, 6).map(lambda x: x * x).to_list()
[1, 4, 9, 16, 25]
"""

from __future__ import annotations

from .._core import NoneResultError as NoneResultError
from .._core import StageStatistics as StageStatistics
from .._core import set_public_module
from ._flow import ConnectableFlow as ConnectableFlow
from ._flow import Flow as Flow
from ._flow import GroupedFlow as GroupedFlow
from ._group_by import TooManyGroupsError as TooManyGroupsError
from ._kill_switch import KillSwitch as KillSwitch
from ._push_source import OfferResult as OfferResult
from ._push_source import PushOverflow as PushOverflow
from ._push_source import PushSource as PushSource
from ._sinks import BlockingIterator as BlockingIterator
from ._sinks import CallbackSubscriber as CallbackSubscriber

__all__ = [
    "BlockingIterator",
    "CallbackSubscriber",
    "ConnectableFlow",
    "Flow",
    "GroupedFlow",
    "KillSwitch",
    "NoneResultError",
    "OfferResult",
    "PushOverflow",
    "PushSource",
    "StageStatistics",
    "TooManyGroupsError",
]

set_public_module(__name__, globals())
