"""publish/share/replay: one upstream subscription, the pace of the slowest subscriber."""

from __future__ import annotations

from reactive_streams import MAX_DEMAND
from reactive_streams.operators import Flow

from .helpers import ManualPublisher, Recorder


def test_publish_waits_for_connect_and_bounds_the_drift() -> None:
    """fast: -0-1-2-3-4-5 (stops: 4 ahead)  slow: -0-1  ... slow requests, both finish."""
    flow = Flow.range(0, 10).publish(prefetch=4)
    fast: Recorder[int] = Recorder(100)
    slow: Recorder[int] = Recorder(2)
    flow.subscribe(fast)
    flow.subscribe(slow)
    assert fast.elements == []
    flow.connect()
    assert slow.elements == [0, 1]
    assert len(fast.elements) - len(slow.elements) <= 4
    slow.request(100)
    assert fast.elements == slow.elements == list(range(10))
    assert fast.completed == slow.completed == 1


def test_share_subscribes_upstream_once_and_cancels_after_the_last() -> None:
    source: ManualPublisher[int] = ManualPublisher()
    subscriptions = 0

    def count() -> ManualPublisher[int]:
        nonlocal subscriptions
        subscriptions += 1
        return source

    shared = Flow.defer(count).share(prefetch=8)
    first: Recorder[int] = Recorder(MAX_DEMAND)
    second: Recorder[int] = Recorder(MAX_DEMAND)
    shared.subscribe(first)
    shared.subscribe(second)
    assert subscriptions == 1
    source.next(1, 2)
    assert first.elements == second.elements == [1, 2]
    first.cancel()
    assert source.subscription.cancelled == 0
    second.cancel()
    assert source.subscription.cancelled == 1


def test_share_late_subscriber_gets_only_new_elements() -> None:
    source: ManualPublisher[int] = ManualPublisher()
    shared = Flow.from_publisher(source).share()
    early: Recorder[int] = Recorder(MAX_DEMAND)
    late: Recorder[int] = Recorder(MAX_DEMAND)
    shared.subscribe(early)
    source.next(1)
    shared.subscribe(late)
    source.next(2)
    source.complete()
    assert early.elements == [1, 2]
    assert late.elements == [2]
    assert early.completed == late.completed == 1


def test_replay_serves_late_subscribers_the_last_n() -> None:
    replayed = Flow.range(0, 10).replay(3)
    assert replayed.to_list(timeout=10) == list(range(10))
    assert replayed.to_list(timeout=10) == [7, 8, 9]


def test_multicast_error_reaches_everyone() -> None:
    source: ManualPublisher[int] = ManualPublisher()
    shared = Flow.from_publisher(source).share()
    a: Recorder[int] = Recorder(MAX_DEMAND)
    b: Recorder[int] = Recorder(MAX_DEMAND)
    shared.subscribe(a)
    shared.subscribe(b)
    boom = RuntimeError("boom")
    source.error(boom)
    assert a.errors == b.errors == [boom]


def test_multicast_member_rule_3_9() -> None:
    shared = Flow.range(0, 5).share()
    a: Recorder[int] = Recorder()
    shared.subscribe(a)
    a.request(0)
    assert isinstance(a.errors[0], ValueError)
