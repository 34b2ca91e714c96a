"""``map_async`` / ``map_async_unordered``: bounded calls in flight, order, failures."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams._core import LoopThread
from reactive_streams.operators import Flow, NoneResultError

from .helpers import ManualPublisher, Recorder

if TYPE_CHECKING:
    from collections.abc import Callable


class ManualExecutor(Executor):
    """Runs nothing until the test says which call finishes next."""

    def __init__(self) -> None:
        self.calls: list[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.calls.append((fn, args, future))
        return future

    def pending(self) -> list[int]:
        return [i for i, (_, _, f) in enumerate(self.calls) if not f.done()]

    def finish(self, index: int) -> None:
        fn, args, future = self.calls[index]
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(fn(*args))
            except Exception as exc:
                future.set_exception(exc)


def _wired(
    parallelism: int, *, ordered: bool = True, fn: Callable[[int], Any] = lambda x: x * 10
) -> tuple[ManualPublisher[int], ManualExecutor, Recorder[int]]:
    source = ManualPublisher[int]()
    executor = ManualExecutor()
    recorder: Recorder[int] = Recorder()
    flow = Flow.from_publisher(source)
    mapped = (
        flow.map_async(fn, parallelism, executor=executor)
        if ordered
        else flow.map_async_unordered(fn, parallelism, executor=executor)
    )
    mapped.subscribe(recorder)
    return source, executor, recorder


def test_upstream_is_requested_only_as_slots_free() -> None:
    source, executor, recorder = _wired(2)
    assert source.subscription.requests == [2]
    source.next(1, 2)
    executor.finish(1)  # the second finishes first: it waits for the first
    recorder.request(5)
    assert recorder.elements == []
    assert source.subscription.requests == [2]
    executor.finish(0)
    assert recorder.elements == [10, 20]
    assert source.subscription.total_requested == 4  # two slots freed


def test_results_wait_for_demand_and_hold_their_slot() -> None:
    source, executor, recorder = _wired(2)
    source.next(1, 2)
    executor.finish(0)
    executor.finish(1)
    assert source.subscription.requests == [2]  # results waiting still hold the slots
    recorder.request(1)
    assert recorder.elements == [10]
    assert source.subscription.requests == [2, 1]


def test_unordered_delivers_in_finishing_order() -> None:
    source, executor, recorder = _wired(3, ordered=False)
    recorder.request(10)
    source.next(1, 2, 3)
    executor.finish(2)
    executor.finish(0)
    assert recorder.elements == [30, 10]
    executor.finish(1)
    source.complete()
    assert recorder.elements == [30, 10, 20]
    assert recorder.completed == 1


def test_completion_waits_for_the_calls_in_flight() -> None:
    source, executor, recorder = _wired(2)
    recorder.request(10)
    source.next(1)
    source.complete()
    assert recorder.completed == 0
    executor.finish(0)
    assert recorder.elements == [10]
    assert recorder.completed == 1


def test_a_failing_call_fails_at_once_and_discards_the_others() -> None:
    def fn(x: int) -> int:
        if x == 2:
            raise KeyError("two")
        return x

    source, executor, recorder = _wired(3, fn=fn)
    recorder.request(10)
    source.next(1, 2, 3)
    executor.finish(1)
    assert isinstance(recorder.errors[0], KeyError)
    assert source.subscription.cancelled == 1
    assert [f.cancelled() for _, _, f in executor.calls] == [True, False, True]
    executor.finish(0)  # already cancelled: nothing more reaches downstream
    assert recorder.elements == []
    assert recorder.signals_after_terminal == 0


def test_an_upstream_error_overtakes_the_results() -> None:
    source, executor, recorder = _wired(2)
    recorder.request(10)
    source.next(1)
    source.error(KeyError("up"))
    assert isinstance(recorder.errors[0], KeyError)
    executor.finish(0)
    assert recorder.elements == []


def test_none_result_is_a_rule_2_13_error() -> None:
    source, executor, recorder = _wired(2, fn=lambda _: None)
    recorder.request(1)
    source.next(1)
    executor.finish(0)
    assert isinstance(recorder.errors[0], NoneResultError)
    assert "map_async()" in str(recorder.errors[0])


def test_cancel_cancels_upstream_and_the_calls() -> None:
    source, executor, recorder = _wired(2)
    source.next(1)
    recorder.cancel()
    assert source.subscription.cancelled == 1
    assert executor.calls[0][2].cancelled()


def test_sync_function_on_the_default_pool_keeps_order_and_bounds_parallelism() -> None:
    running = 0
    most = 0
    lock = threading.Lock()
    gate = threading.Event()

    def slow(x: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        gate.wait(0.01 * (x % 3))  # a little later for some: results finish out of order
        with lock:
            running -= 1
        return x

    assert Flow.range(0, 60).map_async(slow, 4).to_list(timeout=30) == list(range(60))
    assert 1 <= most <= 4


def test_coroutines_run_on_the_shared_loop_or_a_given_one() -> None:
    async def double(x: int) -> int:
        await asyncio.sleep(0.001 * (5 - x % 5))
        return x * 2

    assert Flow.range(0, 20).map_async(double, 5).to_list(timeout=30) == [x * 2 for x in range(20)]
    thread = LoopThread("test-map-async")
    try:
        seen: set[int] = set()

        async def where(x: int) -> int:
            seen.add(threading.get_ident())
            return x

        result = Flow.range(0, 5).map_async_unordered(where, 2, loop=thread.loop).to_list(10)
        assert sorted(result) == list(range(5))
        assert len(seen) == 1
        assert thread.loop.is_running()
    finally:
        thread.stop()


def test_wrong_arguments_are_refused() -> None:
    async def coroutine(x: int) -> int:
        return x

    with (
        ThreadPoolExecutor(1) as pool,
        pytest.raises(TypeError, match="coroutine function runs on loop="),
    ):
        Flow.range(0, 1).map_async(coroutine, 1, executor=pool)
    loop = asyncio.new_event_loop()
    try:
        untyped: Any = Flow.range(0, 1)  # the types refuse it already
        with pytest.raises(TypeError, match="loop= is for a coroutine"):
            untyped.map_async(lambda x: x, 1, loop=loop)
    finally:
        loop.close()
    with pytest.raises(ValueError, match="parallelism"):
        Flow.range(0, 1).map_async(lambda x: x, 0)


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(0, 12),
    parallelism=st.integers(1, 4),
    ordered=st.booleans(),
    choices=st.lists(st.integers(0, 100), max_size=60),
    requests=st.lists(st.integers(1, 3), max_size=60),
)
def test_map_async_matches_a_model(
    count: int, parallelism: int, ordered: bool, choices: list[int], requests: list[int]
) -> None:
    """Any finishing order and demand: bounded slots, order (or finishing order), no loss."""
    source = ManualPublisher[int]()
    executor = ManualExecutor()
    recorder: Recorder[int] = Recorder()
    flow = Flow.from_publisher(source)
    (
        flow.map_async(lambda x: x, parallelism, executor=executor)
        if ordered
        else flow.map_async_unordered(lambda x: x, parallelism, executor=executor)
    ).subscribe(recorder)
    sent = 0
    finished: list[int] = []
    steps = iter(choices)
    extra = iter(requests)
    while len(recorder.elements) < count:
        allowed = source.subscription.total_requested - sent
        assert sent - len(recorder.elements) <= parallelism  # slots: running or waiting
        if allowed > 0 and sent < count:
            source.next(sent)
            sent += 1
            continue
        pending = executor.pending()
        choice = next(steps, 0)
        if pending and choice % 2 == 0:
            index = pending[choice // 2 % len(pending)]
            executor.finish(index)
            finished.append(index)
        else:
            recorder.request(next(extra, 1))
    source.complete()
    assert recorder.completed == 1
    expected = list(range(count)) if ordered else finished
    assert recorder.elements == expected
