"""The demand core: capped addition, request validation, the guard, the election, the drain loop."""

from __future__ import annotations

import threading
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

import pytest

from reactive_streams import (
    MAX_DEMAND,
    DemandTypeError,
    DrainLoop,
    EmitterElection,
    ExecutorRejectedError,
    NonPositiveDemandError,
    ProtocolViolationError,
    SerializedSubscription,
    StreamInterruptedError,
    Subscription,
    WorkGuard,
    add_demand,
    set_undeliverable_hook,
    validate_request,
)
from reactive_streams._core import CALLER_BUDGET, check_positive, replenish_threshold


class _Index:
    """An integer-like object, as NumPy integers are."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def test_max_demand_is_the_jvm_long_max() -> None:
    assert MAX_DEMAND == 2**63 - 1


@pytest.mark.rule("3.17")
@pytest.mark.parametrize(
    ("current", "added", "expected"),
    [(0, 1, 1), (5, 7, 12), (MAX_DEMAND - 1, 1, MAX_DEMAND), (MAX_DEMAND, MAX_DEMAND, MAX_DEMAND)],
)
def test_rule_3_17_add_demand_caps_at_max_demand(current: int, added: int, expected: int) -> None:
    assert add_demand(current, added) == expected


@pytest.mark.rule("3.9")
@pytest.mark.parametrize("value", [1, 10, MAX_DEMAND, MAX_DEMAND * 2, _Index(3)])
def test_rule_3_9_validate_request_accepts_positive_integers(value: object) -> None:
    assert validate_request(value) == int(value.__index__())  # type: ignore[attr-defined]


@pytest.mark.rule("3.9")
@pytest.mark.parametrize("value", [0, -1, -(2**70), _Index(0)])
def test_rule_3_9_non_positive_request_is_a_value_error_citing_the_rule(value: object) -> None:
    with pytest.raises(
        NonPositiveDemandError, match=r"^Rule 3\.9: non-positive subscription request \(n=-?\d+\)$"
    ) as info:
        validate_request(value)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, ProtocolViolationError)
    assert info.value.rule == "3.9"


@pytest.mark.rule("3.9")
@pytest.mark.parametrize("value", [1.5, True, False, "3", None, 2.0])
def test_rule_3_9_non_integer_request_is_a_type_error(value: object) -> None:
    with pytest.raises(
        DemandTypeError, match=r"^Rule 3\.9: subscription request must be a positive int, got "
    ) as info:
        validate_request(value)
    assert isinstance(info.value, TypeError)
    assert info.value.rule == "3.9"


def test_work_guard_has_one_owner_and_replays_missed_work() -> None:
    guard = WorkGuard()
    assert guard.acquire()
    assert not guard.acquire()  # marks missed
    assert guard.release()  # missed: pass again, still owned
    assert not guard.release()  # now idle
    assert guard.acquire()
    guard.retire()
    assert not guard.release()
    assert not guard.acquire()  # retired: owned for good


@pytest.mark.rule("3.3")
def test_rule_3_3_election_elects_only_the_first_requester() -> None:
    election = EmitterElection()
    assert election.request(2)
    assert not election.request(3)  # re-entrant or concurrent: only adds demand
    assert election.demand == 5
    assert election.produced(5) == 0
    assert election.release()  # the second request was missed
    assert not election.release()


@pytest.mark.rule("3.17")
def test_rule_3_17_unbounded_demand_is_not_decremented() -> None:
    election = EmitterElection()
    election.request(MAX_DEMAND)
    election.request(MAX_DEMAND)
    assert election.demand == MAX_DEMAND
    assert election.produced(1000) == MAX_DEMAND
    assert election.requested == MAX_DEMAND
    assert election.delivered == 1000


@pytest.mark.rule("3.9")
def test_rule_3_9_election_parks_the_first_bad_request() -> None:
    election = EmitterElection()
    assert election.request(0)
    assert not election.request(-5)
    error = election.take_error()
    assert isinstance(error, NonPositiveDemandError)
    assert error.n == 0
    assert election.take_error() is None
    assert election.demand == 0


@pytest.mark.rule("3.6")
def test_rule_3_6_requests_after_cancel_are_no_ops() -> None:
    election = EmitterElection()
    assert election.cancel()
    assert not election.cancel()  # Rule 3.7
    assert not election.request(10)
    assert not election.request(0)
    assert election.demand == 0
    assert election.cancelled


def test_terminate_retires_the_owner() -> None:
    election = EmitterElection()
    assert election.request(1)
    election.terminate()
    assert election.terminated and election.cancelled
    assert not election.release()
    assert not election.request(1)
    assert not election.acquire()


def test_drain_loop_runs_again_for_calls_made_during_a_pass() -> None:
    passes: list[int] = []
    loop: DrainLoop

    def drain() -> None:
        passes.append(len(passes))
        if len(passes) < 3:
            loop.schedule()  # re-entrant: must not recurse

    loop = DrainLoop(drain)
    loop.schedule()
    assert passes == [0, 1, 2]


def test_drain_loop_with_executor_yields_between_batches(executor: ThreadPoolExecutor) -> None:
    threads: set[str] = set()
    remaining = [5]
    done = threading.Event()

    def drain() -> bool:
        threads.add(threading.current_thread().name)
        remaining[0] -= 1
        if remaining[0] == 0:
            done.set()
            return False
        return True  # more work: resubmit

    DrainLoop(drain, executor=executor).schedule()
    assert done.wait(5.0)
    assert all(name.startswith("test") for name in threads)


class _CountingExecutor(Executor):
    """Submits to ``inner`` and keeps every future, to count the tasks and await them."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.futures: list[Future[Any]] = []
        self._lock = threading.Lock()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = self.inner.submit(fn, *args, **kwargs)
        with self._lock:
            self.futures.append(future)
        return future


def test_a_parked_owner_keeps_the_guard_until_its_timeout() -> None:
    guard = WorkGuard()
    owned: list[bool] = []
    assert guard.acquire()
    assert not guard.acquire()  # marks work missed
    assert guard.park(5.0)  # missed work: pass again at once, still the owner
    owned.append(guard.owned)
    assert not guard.park(0.001)  # nobody came: ownership given up
    owned.append(guard.owned)
    assert guard.acquire()
    guard.retire()
    assert not guard.park(5.0)  # retired: returns at once, stays owned
    owned.append(guard.owned)
    assert owned == [True, False, True]


def test_a_lingering_drain_loop_serves_the_next_schedule_in_the_same_task(
    executor: ThreadPoolExecutor,
) -> None:
    counting = _CountingExecutor(executor)
    ran = threading.Semaphore(0)
    loop = DrainLoop(ran.release, executor=counting, linger=60.0)
    loop.schedule()
    assert ran.acquire(timeout=5.0)
    loop.schedule()  # the task parked (or is about to): it runs this pass itself
    assert ran.acquire(timeout=5.0)
    assert len(counting.futures) == 1
    loop.guard.retire()  # wakes the parked task, which ends without another pass
    counting.futures[0].result(timeout=5.0)
    assert not ran.acquire(timeout=0)


def test_a_lingering_drain_loop_gives_the_loop_up_after_its_timeout(
    executor: ThreadPoolExecutor,
) -> None:
    counting = _CountingExecutor(executor)
    ran = threading.Semaphore(0)
    loop = DrainLoop(ran.release, executor=counting, linger=0.001)
    loop.schedule()
    assert ran.acquire(timeout=5.0)
    counting.futures[0].result(timeout=5.0)  # the task ended after its linger
    assert not loop.guard.owned
    loop.schedule()  # a new task
    assert ran.acquire(timeout=5.0)
    assert len(counting.futures) == 2


@pytest.mark.parametrize("linger", [-1.0, float("nan")])
def test_a_drain_loop_refuses_a_negative_linger(linger: float) -> None:
    with pytest.raises(ValueError, match=r"^linger must be >= 0 seconds, got "):
        DrainLoop(lambda: None, linger=linger)


def test_a_lingering_drain_loop_loses_no_schedule(executor: ThreadPoolExecutor) -> None:
    """Schedules land on a parked owner, one that just timed out, or no owner at all."""
    changed = threading.Condition()
    posted = seen = 0

    def drain() -> None:
        nonlocal seen
        with changed:
            seen = posted
            changed.notify_all()

    def caught_up() -> bool:
        return seen == posted

    loop = DrainLoop(drain, executor=executor, linger=0.0001)
    for _ in range(500):
        with changed:
            posted += 1
        loop.schedule()
        with changed:
            assert changed.wait_for(caught_up, timeout=5.0), (seen, posted)


def test_drain_loop_reports_a_rejecting_executor() -> None:
    class Rejecting(Executor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
            raise RuntimeError("cannot schedule new futures after shutdown")

    rejected: list[ExecutorRejectedError] = []
    loop = DrainLoop(lambda: None, executor=Rejecting(), on_rejected=rejected.append)
    loop.schedule()
    loop.schedule()  # still owned: no second rejection
    assert len(rejected) == 1
    assert "refused" in str(rejected[0])
    assert isinstance(rejected[0].__cause__, RuntimeError)


def test_drain_loop_ends_the_stream_once_when_a_pass_raises() -> None:
    failures: list[Exception] = []
    passes = [0]

    def drain() -> None:
        passes[0] += 1
        raise RuntimeError("upstream.request broke Rule 3.16")

    loop = DrainLoop(drain, on_failure=failures.append)
    loop.schedule()
    loop.schedule()  # the guard is retired: no pass runs again, no second failure
    assert passes == [1]
    assert [str(error) for error in failures] == ["upstream.request broke Rule 3.16"]
    assert loop.guard.retired


def test_drain_loop_signals_and_re_raises_a_keyboard_interrupt() -> None:
    failures: list[Exception] = []
    reported: list[BaseException] = []
    previous = set_undeliverable_hook(reported.append)

    def drain() -> None:
        raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            DrainLoop(drain, on_failure=failures.append).schedule()
    finally:
        set_undeliverable_hook(previous)
    assert len(failures) == 1
    assert isinstance(failures[0], StreamInterruptedError)
    assert isinstance(failures[0].__cause__, KeyboardInterrupt)
    assert any(isinstance(error, KeyboardInterrupt) for error in reported)


def test_drain_loop_without_on_failure_reports_and_stops() -> None:
    reported: list[BaseException] = []
    previous = set_undeliverable_hook(reported.append)
    try:

        def drain() -> None:
            raise ZeroDivisionError("a bug in the pass")

        loop = DrainLoop(drain)
        loop.schedule()
        loop.schedule()
    finally:
        set_undeliverable_hook(previous)
    assert len(reported) == 1
    assert isinstance(reported[0], ZeroDivisionError)


def test_a_self_releasing_pass_gives_ownership_up_under_the_shared_lock() -> None:
    lock = threading.Lock()
    guard = WorkGuard(lock)
    work = [3]
    passes: list[int] = []

    def drain() -> None:
        while True:
            with lock:
                if not work[0]:
                    if guard.release_locked():
                        continue
                    return
                work[0] -= 1
            passes.append(work[0])
            if work[0] == 1:
                loop.schedule()  # re-entrant: marks missed, no recursion

    loop = DrainLoop(drain, guard=guard, self_releasing=True)
    loop.schedule()
    assert passes == [2, 1, 0]
    assert not guard.owned
    with lock:
        assert guard.acquire_locked()  # free again


def test_replenish_threshold_is_three_quarters_and_at_least_one() -> None:
    assert [replenish_threshold(n) for n in (1, 2, 4, 256)] == [1, 2, 3, 192]


def test_check_positive_raises_type_then_value_errors() -> None:
    assert check_positive("prefetch", 3) == 3
    with pytest.raises(TypeError, match=r"^prefetch must be an int, got bool$"):
        check_positive("prefetch", True)
    with pytest.raises(TypeError, match=r"^prefetch must be an int, got float$"):
        check_positive("prefetch", 2.0)
    with pytest.raises(ValueError, match=r"^prefetch must be positive, got 0$"):
        check_positive("prefetch", 0)


class _RecordingUpstream(Subscription):
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.active = 0
        self.overlaps = 0
        self.lock = threading.Lock()
        self.on_request: Any = None

    def request(self, n: int) -> None:
        with self.lock:
            self.active += 1
            self.overlaps += self.active > 1
        self.calls.append(("request", n))
        if self.on_request is not None:
            self.on_request()
        with self.lock:
            self.active -= 1

    def cancel(self) -> None:
        with self.lock:
            self.active += 1
            self.overlaps += self.active > 1
        self.calls.append(("cancel", None))
        with self.lock:
            self.active -= 1


@pytest.mark.rule("2.7")
def test_rule_2_7_serialized_subscription_forwards_reentrant_requests_after_the_outer_one() -> None:
    upstream = _RecordingUpstream()
    serialized = SerializedSubscription(upstream)
    depth = [0]

    def reenter() -> None:
        depth[0] += 1
        if depth[0] < 3:
            serialized.request(1)

    upstream.on_request = reenter
    serialized.request(5)
    assert upstream.calls == [("request", 5), ("request", 1), ("request", 1)]
    assert upstream.overlaps == 0


@pytest.mark.rule("2.7")
def test_rule_2_7_serialized_subscription_is_serial_under_threads() -> None:
    upstream = _RecordingUpstream()
    serialized = SerializedSubscription(upstream)
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait(5.0)
        for _ in range(200):
            serialized.request(1)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10.0)
    assert upstream.overlaps == 0
    assert sum(n for kind, n in upstream.calls if kind == "request") == 1600  # type: ignore[misc]


@pytest.mark.rule("3.9")
def test_serialized_subscription_forwards_a_bad_argument_unchanged() -> None:
    upstream = _RecordingUpstream()
    SerializedSubscription(upstream).request(0)
    assert upstream.calls == [("request", 0)]


@pytest.mark.rule("3.13")
def test_serialized_subscription_cancel_wins_and_drops_upstream() -> None:
    upstream = _RecordingUpstream()
    serialized = SerializedSubscription(upstream)
    serialized.cancel()
    serialized.cancel()
    serialized.request(3)
    assert upstream.calls == [("cancel", None)]
    assert serialized.cancelled


def test_serialized_subscription_reports_an_upstream_that_raises(
    undeliverable: list[BaseException],
) -> None:
    class Raising(Subscription):
        def request(self, n: int) -> None:
            raise RuntimeError("broken")

        def cancel(self) -> None:
            raise RuntimeError("broken")

    SerializedSubscription(Raising()).request(1)
    assert len(undeliverable) == 1
    violation = undeliverable[0]
    assert isinstance(violation, ProtocolViolationError)
    assert violation.rule == "3.16"
    assert str(violation).startswith("Rule 3.16: ")


def test_claim_locked_takes_a_free_guard_and_leaves_no_missed_mark() -> None:
    lock = threading.Lock()
    guard = WorkGuard(lock)
    with lock:
        assert guard.claim_locked()  # free: the caller owns it now
        assert not guard.claim_locked()  # owned: no mark, so the owner passes no more
        assert not guard.release_locked()  # no missed work: ownership given up
        assert not guard.owned
        guard.retire_locked()
        assert not guard.claim_locked()  # retired: nobody owns it again


def test_a_borrowed_run_gives_the_thread_back_after_the_budget_and_the_relay_goes_on() -> None:
    items = list(range(5 * CALLER_BUDGET))
    seen: list[int] = []
    on_caller: list[int] = []
    done = threading.Event()
    caller = threading.current_thread()

    def drain() -> bool:
        for _ in range(loop.allow(len(items))):
            seen.append(items.pop(0))
            if threading.current_thread() is caller:
                on_caller.append(seen[-1])
        if items:
            return True  # stopped early, still owning the loop
        done.set()
        return False

    loop = DrainLoop(drain)
    assert loop.guard.acquire()
    loop.start_borrowed()
    assert len(on_caller) == CALLER_BUDGET  # Rule 3.4: the rest went to the relay
    assert done.wait(30)
    assert seen == list(range(5 * CALLER_BUDGET))  # in order, one owner at a time
    assert on_caller == list(range(CALLER_BUDGET))
    assert loop.guard.acquire()  # the relay gave the loop up at the end


def test_a_run_started_by_a_producer_is_not_bounded() -> None:
    items = list(range(5 * CALLER_BUDGET))
    caller = threading.current_thread()
    elsewhere: list[int] = []

    def drain() -> None:
        for _ in range(loop.allow(len(items))):
            item = items.pop(0)
            if threading.current_thread() is not caller:
                elsewhere.append(item)

    loop = DrainLoop(drain)
    loop.schedule()
    assert items == []
    assert elsewhere == []


def test_latency_window_keeps_the_last_samples_and_gives_nearest_rank_quantiles() -> None:
    from reactive_streams._core import LatencyWindow

    window = LatencyWindow(size=100)
    assert window.quantiles() is None
    for value in range(1, 201):  # only the last 100 stay: 101..200
        window.add(float(value))
    p50, p99, samples = window.quantiles() or (0.0, 0.0, 0)
    assert samples == 100
    assert p50 in (150.0, 151.0)
    assert p99 == 199.0
    with pytest.raises(ValueError, match="size"):
        LatencyWindow(size=0)
