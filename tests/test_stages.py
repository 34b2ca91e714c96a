"""``reactive_streams.stages``: the public kit for writing operators."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from reactive_streams import ProtocolViolationError, Subscription, set_undeliverable_hook, stages
from reactive_streams.stages import accept_subscription


class _Upstream(Subscription):
    def __init__(self, fail_cancel: bool = False) -> None:
        self.cancels = 0
        self._fail_cancel = fail_cancel

    def request(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        self.cancels += 1
        if self._fail_cancel:
            raise RuntimeError("cancel broke")


def test_none_is_refused_with_the_rule_and_nothing_else_happens() -> None:
    claims: list[object] = []

    def claim(subscription: Subscription) -> bool:
        claims.append(subscription)
        return True

    with pytest.raises(TypeError, match=r"^Rule 2\.13: on_subscribe\(None\)$"):
        accept_subscription(None, claim)
    assert claims == []


def test_the_first_subscription_is_kept_and_not_cancelled() -> None:
    upstream = _Upstream()
    assert accept_subscription(upstream, True) is True
    assert upstream.cancels == 0


def test_a_second_subscription_is_cancelled_once() -> None:
    upstream = _Upstream()
    assert accept_subscription(upstream, False) is False
    assert upstream.cancels == 1


def test_a_claim_stores_under_its_lock_and_cancel_runs_outside_it() -> None:
    lock = threading.Lock()
    held: list[Subscription] = []
    locked_at_cancel: list[bool] = []

    class Watched(_Upstream):
        def cancel(self) -> None:
            locked_at_cancel.append(lock.locked())
            super().cancel()

    def claim(subscription: Subscription) -> bool:
        with lock:
            if held:
                return False
            held.append(subscription)
            return True

    first, second = Watched(), Watched()
    assert accept_subscription(first, claim)
    assert not accept_subscription(second, claim)
    assert held == [first]
    assert (first.cancels, second.cancels) == (0, 1)
    assert locked_at_cancel == [False]


def test_a_cancel_that_raises_is_reported_not_propagated() -> None:
    reported: list[BaseException] = []
    previous = set_undeliverable_hook(reported.append)
    try:
        assert accept_subscription(_Upstream(fail_cancel=True), False) is False
    finally:
        set_undeliverable_hook(previous)
    assert len(reported) == 1
    assert isinstance(reported[0], ProtocolViolationError)
    assert reported[0].rule == "3.15"


@pytest.mark.parametrize("name", stages.__all__)
def test_every_name_shows_a_public_module(name: str) -> None:
    obj: Any = getattr(stages, name)
    assert not any(part.startswith("_") for part in obj.__module__.split("."))


def test_the_stage_bases_are_the_ones_the_operators_use() -> None:
    from reactive_streams import _core

    for name in ("BufferedStage", "UpstreamStage", "StageOperator", "MemberSubscription"):
        assert getattr(stages, name) is getattr(_core, name)
