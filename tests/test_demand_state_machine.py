"""Hypothesis state machines over the demand core and the synchronous reference publishers.

Random sequences of ``request(n)`` (including ``n <= 0`` and huge ``n``), ``cancel()`` and
re-entrant requests from ``on_next``; after every step: delivered <= requested (Rule 1.1),
nothing after a terminal signal (Rule 1.7), at most one terminal signal, recursion depth 1
(Rule 3.3), elements in order.
"""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from reactive_streams import MAX_DEMAND, Publisher, Subscriber, Subscription
from reactive_streams.reference import IterablePublisher, RangePublisher

SIZE = 60


class _Probe(Subscriber[int]):
    def __init__(self) -> None:
        self.subscription: Subscription | None = None
        self.elements: list[int] = []
        self.terminals: list[str] = []
        self.after_terminal = 0
        self.depth = 0
        self.max_depth = 0
        self.reentrant: list[int] = []  # demand to request from inside on_next, consumed in order

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription

    def on_next(self, element: int) -> None:
        if self.terminals:
            self.after_terminal += 1
        self.depth += 1
        self.max_depth = max(self.max_depth, self.depth)
        self.elements.append(element)
        if self.reentrant and self.subscription is not None:
            self.subscription.request(self.reentrant.pop(0))
        self.depth -= 1

    def on_error(self, error: Exception) -> None:
        if self.terminals:
            self.after_terminal += 1
        self.terminals.append(f"error:{type(error).__name__}")

    def on_complete(self) -> None:
        if self.terminals:
            self.after_terminal += 1
        self.terminals.append("complete")


class SynchronousPublisherMachine(RuleBasedStateMachine):
    """One subscription to a synchronous reference publisher of SIZE elements."""

    def __init__(self) -> None:
        super().__init__()
        self.probe = _Probe()
        self.requested = 0
        self.cancelled = False
        self.bad_request = False

    @initialize(kind=st.sampled_from(["range", "iterable"]))
    def subscribe(self, kind: str) -> None:
        publisher: Publisher[int] = (
            RangePublisher(0, SIZE) if kind == "range" else IterablePublisher(list(range(SIZE)))
        )
        publisher.subscribe(self.probe)

    @rule(n=st.one_of(st.integers(1, 20), st.just(MAX_DEMAND), st.integers(MAX_DEMAND - 5, 2**70)))
    def request(self, n: int) -> None:
        assert self.probe.subscription is not None
        if not (self.cancelled or self.probe.terminals):
            self.requested = min(self.requested + n, MAX_DEMAND)
        self.probe.subscription.request(n)

    @rule(n=st.integers(-(2**64), 0))
    def request_non_positive(self, n: int) -> None:
        assert self.probe.subscription is not None
        if not (self.cancelled or self.probe.terminals):
            self.bad_request = True
        self.probe.subscription.request(n)

    @rule(amounts=st.lists(st.integers(1, 5), min_size=1, max_size=5))
    def request_from_on_next(self, amounts: list[int]) -> None:
        self.probe.reentrant.extend(amounts)
        if not (self.cancelled or self.probe.terminals):
            self.requested = min(self.requested + sum(amounts), MAX_DEMAND)

    @precondition(lambda self: self.probe.subscription is not None)
    @rule()
    def cancel(self) -> None:
        assert self.probe.subscription is not None
        self.cancelled = True
        self.probe.subscription.cancel()

    @invariant()
    def delivered_within_requested(self) -> None:  # Rule 1.1
        assert len(self.probe.elements) <= self.requested

    @invariant()
    def elements_in_order(self) -> None:
        assert self.probe.elements == list(range(len(self.probe.elements)))

    @invariant()
    def at_most_one_terminal_and_nothing_after(self) -> None:  # Rule 1.7
        assert len(self.probe.terminals) <= 1
        assert self.probe.after_terminal == 0

    @invariant()
    def recursion_depth_one(self) -> None:  # Rule 3.3
        assert self.probe.max_depth <= 1

    @invariant()
    def bad_request_ends_with_value_error(self) -> None:  # Rule 3.9
        if self.bad_request and not self.cancelled:
            assert self.probe.terminals == ["error:NonPositiveDemandError"]

    @invariant()
    def completes_exactly_when_all_delivered(self) -> None:  # Rule 1.5
        if self.probe.terminals == ["complete"]:
            assert len(self.probe.elements) == SIZE


SynchronousPublisherMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=30, deadline=None
)
TestSynchronousPublisher = SynchronousPublisherMachine.TestCase
