"""from_async_iterable on a running loop: signals sent from inside on_next take effect at once.

The fetch task delivers each item it awaited straight to ``on_next`` (the kit's
``EmitLoopSubscription.emit_here``) and falls back to a whole pass of the emit loop when
anything else is due. These tests drive every way into that fallback from inside
``on_next``: a cancel, a bad request, a request, an ``on_next`` that raises.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from reactive_streams import ProtocolViolationError, Subscriber, Subscription
from reactive_streams.adapters.asyncio import from_async_iterable

TIMEOUT = 10.0
UNBOUNDED = 2**63 - 1


class _Source:
    """An async generator of 0..total-1 that records how far it got and whether it closed."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.produced = 0
        self.closed = asyncio.Event()

    async def items(self) -> AsyncIterator[int]:
        try:
            for i in range(self.total):
                self.produced += 1
                yield i
        finally:
            self.closed.set()


class _Probe(Subscriber[int]):
    """Requests ``first``, then does ``act(self, element)`` inside each ``on_next``."""

    def __init__(self, first: int, act: str, at: int) -> None:
        self.first = first
        self.act = act
        self.at = at
        self.elements: list[int] = []
        self.error: Exception | None = None
        self.completed = False
        self.ended = asyncio.Event()
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        subscription.request(self.first)

    def on_next(self, element: int) -> None:
        self.elements.append(element)
        assert self.subscription is not None
        if self.act == "request_one":
            self.subscription.request(1)
        elif len(self.elements) == self.at:
            if self.act == "cancel":
                self.subscription.cancel()
            elif self.act == "bad_request":
                self.subscription.request(0)
            elif self.act == "raise":
                raise RuntimeError("on_next broke Rule 2.13")

    def on_error(self, error: Exception) -> None:
        self.error = error
        self.ended.set()

    def on_complete(self) -> None:
        self.completed = True
        self.ended.set()


async def _run(source: _Source, probe: _Probe, wait_for_end: bool) -> None:
    from_async_iterable(source.items()).subscribe(probe)
    await asyncio.wait_for(source.closed.wait(), TIMEOUT)
    if wait_for_end:
        await asyncio.wait_for(probe.ended.wait(), TIMEOUT)
    await asyncio.sleep(0.01)  # anything sent after the end would arrive by now


@pytest.mark.parametrize("act", ["cancel", "raise"])
def test_a_cancel_from_inside_on_next_stops_at_that_element(act: str) -> None:
    source, probe = _Source(1000), _Probe(UNBOUNDED, act, at=3)
    asyncio.run(_run(source, probe, wait_for_end=False))
    assert probe.elements == [0, 1, 2]
    assert probe.error is None and not probe.completed  # Rule 1.8: no signal after cancel
    assert source.produced == 3  # nothing awaited past the cancel


def test_a_bad_request_from_inside_on_next_is_signalled_before_the_next_element() -> None:
    source, probe = _Source(1000), _Probe(UNBOUNDED, "bad_request", at=2)
    asyncio.run(_run(source, probe, wait_for_end=True))
    assert probe.elements == [0, 1]
    assert isinstance(probe.error, ProtocolViolationError)  # Rule 3.9
    assert not probe.completed


def test_one_more_requested_inside_each_on_next_gets_every_element_once() -> None:
    source, probe = _Source(500), _Probe(1, "request_one", at=0)
    asyncio.run(_run(source, probe, wait_for_end=True))
    assert probe.elements == list(range(500))
    assert probe.completed and probe.error is None


@pytest.mark.parametrize("first", [1, 7, 64, 65])
def test_the_source_is_never_awaited_past_the_demand(first: int) -> None:
    async def main() -> tuple[_Source, _Probe]:
        source, probe = _Source(1000), _Probe(first, "none", at=0)
        from_async_iterable(source.items()).subscribe(probe)
        for _ in range(50):
            await asyncio.sleep(0)
        assert source.produced == first  # Rule 1.1, and no read-ahead
        assert probe.elements == list(range(first))
        assert probe.subscription is not None
        probe.subscription.request(3)
        for _ in range(50):
            await asyncio.sleep(0)
        probe.subscription.cancel()
        await asyncio.wait_for(source.closed.wait(), TIMEOUT)
        return source, probe

    source, probe = asyncio.run(main())
    assert source.produced == first + 3
    assert probe.elements == list(range(first + 3))
