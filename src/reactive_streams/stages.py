"""Stages: the kit for writing your own operator, as the library writes its own.

The operators of ``Flow`` are built from these pieces, and an operator the library lacks
can be built from them too, then checked with the TCK (``reactive_streams.tck``);
``docs/writing-operators.md`` walks through one. An operator is two objects:

* its **publisher**, a ``StageOperator``: a ``name`` and ``_new_stage(subscriber)``,
  which returns the stage that serves that one subscriber;
* its **stage**, the ``Subscriber`` upstream sees and the ``Subscription`` downstream
  holds. Pick the base by what the stage holds:

  - ``PassThroughStage``: nothing, each element passes on as it comes;
  - ``BufferedStage``: a queue of ready elements (``_push_locked`` under ``_lock``, then
    ``_schedule()``), delivered within demand by one drain loop, which also sends the
    terminal signal after them;
  - ``UpstreamStage`` / ``DownstreamStage``: one upstream, or several inputs each
    through an ``InnerSubscriber``, and a ``_drain`` of your own;
  - ``MemberSubscription``: for a stage that serves several subscribers from one
    buffer, each subscriber's subscription, on the stage's lock and drain loop.

A source (a publisher that produces elements itself) subclasses
``EmitLoopSubscription`` instead.

The members named with one underscore above (``_new_stage``, ``_lock``,
``_push_locked``, ``_schedule``, ``_demand_added``, ``_accept_upstream``, ``_upstream``,
``_done``, ``_cancelled``, ``_drain``) are the extension points of these classes: a
subclass overrides or uses them; a caller from outside does not.

Every ``on_subscribe`` begins the same way: ``None`` is refused (Rule 2.13) and a second
subscription is cancelled (Rule 2.5). ``accept_subscription`` does both in one call
(``UpstreamStage._accept_upstream`` calls it for you):

>>> from reactive_streams.stages import accept_subscription
>>> class Upstream:
...     cancelled = False
...     def request(self, n): pass
...     def cancel(self): self.cancelled = True
>>> first, second = Upstream(), Upstream()
>>> accept_subscription(first, True)
True
>>> accept_subscription(second, False), second.cancelled
(False, True)
>>> accept_subscription(None, True)
Traceback (most recent call last):
...
TypeError: Rule 2.13: on_subscribe(None)
"""

from __future__ import annotations

from ._core import (
    BufferedStage,
    DownstreamStage,
    EmitLoopSubscription,
    InnerSubscriber,
    MemberSubscription,
    Operator,
    PassThroughStage,
    SharedDrainOwner,
    SingleUpstreamOperator,
    StageOperator,
    StageStatistics,
    UpstreamStage,
    accept_subscription,
    cancel_quietly,
    replenish_threshold,
    set_public_module,
    signal_each,
    signal_terminal,
)

__all__ = [
    "BufferedStage",
    "DownstreamStage",
    "EmitLoopSubscription",
    "InnerSubscriber",
    "MemberSubscription",
    "Operator",
    "PassThroughStage",
    "SharedDrainOwner",
    "SingleUpstreamOperator",
    "StageOperator",
    "StageStatistics",
    "UpstreamStage",
    "accept_subscription",
    "cancel_quietly",
    "replenish_threshold",
    "signal_each",
    "signal_terminal",
]

set_public_module(__name__, globals())
