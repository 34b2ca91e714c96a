"""A hypothesis state machine: stages against an adversarial upstream and downstream.

The upstream may raise from ``request`` (breaking Rule 3.16), signal twice, or signal
after being cancelled; the downstream requests and cancels from several threads at once.
After every step: at most one terminal signal and nothing after it (Rule 1.7), never more
elements than requested (Rule 1.1), nothing ever escapes our ``request``/``cancel``
(Rule 3.16), and a stage that failed because upstream's ``request`` raised has cancelled
that upstream.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from reactive_streams import Flow, Publisher, Subscriber, Subscription

if TYPE_CHECKING:
    from collections.abc import Callable


class _Broken(RuntimeError):
    pass


class _Upstream(Publisher[int], Subscription):
    """Hand-driven; ``request`` raises while ``broken`` is set."""

    def __init__(self) -> None:
        self.subscriber: Subscriber[int] | None = None
        self.requested = 0
        self.sent = 0
        self.cancelled = False
        self.broken = False
        self.raised = False
        self.lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber[int]) -> None:
        self.subscriber = subscriber
        subscriber.on_subscribe(self)

    def request(self, n: int) -> None:
        with self.lock:
            if self.broken:
                self.raised = True
                raise _Broken(f"request({n})")
            self.requested = min(self.requested + n, 2**63 - 1)

    def cancel(self) -> None:
        self.cancelled = True


class _Downstream(Subscriber[Any]):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.subscription: Subscription | None = None
        self.requested = 0
        self.elements = 0
        self.terminals: list[BaseException | None] = []
        self.after_terminal = 0
        self.escaped: list[BaseException] = []
        self.active = 0
        self.overlaps = 0

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription

    def _signal(self) -> None:
        with self.lock:
            self.active += 1
            if self.active > 1:
                self.overlaps += 1
            if self.terminals:
                self.after_terminal += 1

    def _done(self) -> None:
        with self.lock:
            self.active -= 1

    def on_next(self, element: Any) -> None:
        self._signal()
        with self.lock:
            self.elements += 1
        self._done()

    def on_error(self, error: Exception) -> None:
        self._signal()
        with self.lock:
            self.terminals.append(error)
        self._done()

    def on_complete(self) -> None:
        self._signal()
        with self.lock:
            self.terminals.append(None)
        self._done()

    def request(self, n: int) -> None:
        with self.lock:
            self.requested += n
        assert self.subscription is not None
        try:
            self.subscription.request(n)
        except BaseException as exc:
            self.escaped.append(exc)

    def cancel(self) -> None:
        assert self.subscription is not None
        try:
            self.subscription.cancel()
        except BaseException as exc:
            self.escaped.append(exc)


STAGES: dict[str, Callable[[_Upstream], Flow[Any]]] = {
    "buffer": lambda p: Flow.from_publisher(p).buffer(1),
    "map": lambda p: Flow.from_publisher(p).map(lambda x: x),
    "flat_map": lambda p: Flow.from_publisher(p).flat_map(Flow.just, concurrency=2),
    "zip": lambda p: Flow.zip(p, Flow.range(0, 10**6), prefetch=4),
    "share": lambda p: Flow.from_publisher(p).share(prefetch=4),
    "retry": lambda p: Flow.from_publisher(p).retry(0),
}


class StageMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.upstream = _Upstream()
        self.downstream = _Downstream()

    @initialize(stage=st.sampled_from(sorted(STAGES)))
    def start(self, stage: str) -> None:
        self.stage = stage
        STAGES[stage](self.upstream).subscribe(self.downstream)

    @rule(amounts=st.lists(st.integers(1, 5), min_size=1, max_size=3))
    def request_from_threads(self, amounts: list[int]) -> None:
        threads = [threading.Thread(target=self.downstream.request, args=(n,)) for n in amounts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(5)

    @rule()
    def cancel_from_a_thread(self) -> None:
        thread = threading.Thread(target=self.downstream.cancel)
        thread.start()
        self.downstream.request(1)
        thread.join(5)

    @rule()
    def break_upstream(self) -> None:
        self.upstream.broken = True

    @precondition(lambda self: self.upstream.subscriber is not None)
    @rule(count=st.integers(1, 4))
    def emit(self, count: int) -> None:
        upstream = self.upstream
        subscriber = upstream.subscriber
        assert subscriber is not None
        for _ in range(count):
            if upstream.sent >= upstream.requested:
                return  # the adversary still honours Rule 1.1
            upstream.sent += 1
            subscriber.on_next(upstream.sent)

    @precondition(lambda self: self.upstream.subscriber is not None)
    @rule(kind=st.sampled_from(["complete", "error", "twice"]))
    def terminate(self, kind: str) -> None:
        subscriber = self.upstream.subscriber
        assert subscriber is not None
        if kind == "error":
            subscriber.on_error(RuntimeError("upstream failed"))
        else:
            subscriber.on_complete()
            if kind == "twice":  # breaks Rule 1.7: the stage must not forward it
                subscriber.on_complete()

    @precondition(lambda self: self.upstream.subscriber is not None)
    @rule()
    def emit_after_cancel(self) -> None:
        if self.upstream.cancelled:
            subscriber = self.upstream.subscriber
            assert subscriber is not None
            subscriber.on_next(-1)  # Rule 1.8 allows late signals; they must go nowhere

    @invariant()
    def one_terminal_nothing_after(self) -> None:
        downstream = self.downstream
        assert len(downstream.terminals) <= 1
        assert downstream.after_terminal == 0
        assert downstream.overlaps == 0

    @invariant()
    def nothing_escapes(self) -> None:
        assert self.downstream.escaped == []

    @invariant()
    def within_demand(self) -> None:
        downstream = self.downstream
        assert downstream.elements <= downstream.requested

    @invariant()
    def upstream_cancelled_after_its_request_raised(self) -> None:
        terminals = self.downstream.terminals
        if terminals and isinstance(terminals[0], _Broken):
            assert self.upstream.cancelled


TestStageMachine = StageMachine.TestCase
TestStageMachine.settings = settings(max_examples=150, stateful_step_count=25, deadline=None)
