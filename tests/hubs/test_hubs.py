"""The hubs: TCK on every output, routing properties, policies, statistics, memory."""

from __future__ import annotations

import doctest
import functools
import itertools
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_streams import MAX_DEMAND, MissingBackpressureError, Publisher, hubs
from reactive_streams.hubs import BroadcastHub, MergeHub, Router
from reactive_streams.operators import Flow
from reactive_streams.tck import PublisherVerification
from reactive_streams.testing import RecordingSubscriber


def _numbers(start: int, stop: int) -> Flow[int]:
    if stop == MAX_DEMAND:
        return Flow.from_iterable(itertools.count(start))
    return Flow.range(start, stop)


def test_docstring_examples() -> None:
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for cls in (BroadcastHub, MergeHub, Router):
        for test in finder.find(cls, cls.__name__, module=False, globs=dict(vars(hubs))):
            runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.attempted >= 20
    assert results.failed == 0


# --------------------------------------------------------------------------- Router


def test_router_waits_for_every_target_and_keeps_producer_order() -> None:
    router: Router[int] = Router(buffer_size=4)
    evens = RecordingSubscriber[int]()
    everything = RecordingSubscriber[int]()
    router.subscribe_where(lambda x: x % 2 == 0).subscribe(evens)
    router.subscribe_where(lambda x: True).subscribe(everything)
    Flow.range(0, 10).subscribe(router.sink())
    everything.request(3)
    assert everything.elements == []  # 0 goes to evens too, which has no demand
    evens.request(1)
    assert (evens.elements, everything.elements) == ([0], [0, 1])  # 2 waits for evens
    evens.request(100)
    assert (evens.elements, everything.elements) == ([0, 2], [0, 1, 2])
    everything.request(100)
    assert evens.elements == [0, 2, 4, 6, 8]
    assert everything.elements == list(range(10))
    stats = router.statistics()
    assert (stats.consumers, stats.buffered, stats.dropped, stats.delivered) == (2, 0, 0, 15)


def test_router_drops_and_counts_unwanted_elements_but_holds_without_consumers() -> None:
    router: Router[int] = Router(buffer_size=8)
    Flow.range(0, 5).subscribe(router.sink())
    assert router.statistics().buffered == 5  # nobody attached yet: held, not dropped
    threes = RecordingSubscriber[int](initial_request=10)
    router.subscribe_where(lambda x: x % 3 == 0).subscribe(threes)
    router.close()
    assert threes.elements == [0, 3]
    assert threes.completed
    assert router.statistics().dropped == 3


def test_router_predicate_error_ends_only_that_consumer() -> None:
    router: Router[int] = Router(buffer_size=8)
    bad = RecordingSubscriber[int](initial_request=10)
    good = RecordingSubscriber[int](initial_request=10)
    router.subscribe_where(lambda x: 1 // (x - 2) is not None).subscribe(bad)
    router.subscribe_where(lambda x: True).subscribe(good)
    Flow.range(0, 5).subscribe(router.sink())
    router.close()
    assert isinstance(bad.error, ZeroDivisionError)
    assert bad.elements == [0, 1]
    assert good.elements == [0, 1, 2, 3, 4]
    assert good.completed
    assert router.statistics().failed_consumers == 1


def test_router_producer_error_is_counted_and_reported(undeliverable: list[BaseException]) -> None:
    router: Router[int] = Router(buffer_size=8)
    seen = RecordingSubscriber[int](initial_request=10)
    router.subscribe_where(lambda x: True).subscribe(seen)
    failure = RuntimeError("producer died")
    Flow.range(0, 2).concat_with(Flow.error(failure)).subscribe(router.sink())
    Flow.range(5, 7).subscribe(router.sink())
    router.close()
    assert sorted(seen.elements) == [0, 1, 5, 6]
    assert seen.completed
    assert router.statistics().producer_errors == 1
    assert undeliverable == [failure]


def test_router_bad_request_is_signalled() -> None:
    router: Router[int] = Router()
    seen = RecordingSubscriber[int]()
    router.subscribe_where(lambda x: True).subscribe(seen)
    seen.request(0)
    assert seen.error is not None
    assert str(seen.error).startswith("Rule 3.9")


def _matches(modulus: int, rest: int, element: tuple[int, int]) -> bool:
    return element[1] % modulus == rest % modulus


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 50), max_size=30), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(1, 4), st.integers(0, 3)), min_size=1, max_size=4),
    st.integers(1, 8),
)
def test_router_gives_each_consumer_exactly_its_filter(
    producers: list[list[int]], filters: list[tuple[int, int]], buffer_size: int
) -> None:
    router: Router[tuple[int, int]] = Router(buffer_size=buffer_size)
    seen: list[RecordingSubscriber[tuple[int, int]]] = []
    for modulus, rest in filters:
        recorder = RecordingSubscriber[tuple[int, int]](initial_request=1, request_on_next=1)
        router.subscribe_where(functools.partial(_matches, modulus, rest)).subscribe(recorder)
        seen.append(recorder)
    for index, values in enumerate(producers):
        Flow.from_iterable([(index, value) for value in values]).subscribe(router.sink())
    router.close()
    tagged = [(index, value) for index, values in enumerate(producers) for value in values]
    for recorder, (modulus, rest) in zip(seen, filters, strict=True):
        assert recorder.completed
        wanted = [x for x in tagged if x[1] % modulus == rest % modulus]
        assert sorted(recorder.elements) == sorted(wanted)
        for index in range(len(producers)):  # each producer's order is kept
            mine = [x for x in recorder.elements if x[0] == index]
            assert mine == [x for x in wanted if x[0] == index]
    unwanted = [x for x in tagged if not any(x[1] % m == r % m for m, r in filters)]
    assert router.statistics().dropped == len(unwanted)


# --------------------------------------------------------------------------- MergeHub


def test_merge_hub_one_consumer_at_a_time() -> None:
    hub: MergeHub[int] = MergeHub(buffer_size=4)
    first = RecordingSubscriber[int](initial_request=2)
    hub.source.subscribe(first)
    second = RecordingSubscriber[int](initial_request=2)
    hub.source.subscribe(second)
    assert isinstance(second.error, RuntimeError)
    assert str(second.error) == "MergeHub.source already has a subscriber"
    Flow.range(0, 3).subscribe(hub.sink())
    assert first.elements == [0, 1]
    assert hub.statistics().buffered == 1


def test_merge_hub_is_fair_between_producers() -> None:
    hub: MergeHub[str] = MergeHub(buffer_size=4)
    Flow.just("a1", "a2", "a3").subscribe(hub.sink())
    Flow.just("b1", "b2", "b3").subscribe(hub.sink())
    hub.close()
    assert Flow.from_publisher(hub.source).to_list(timeout=5) == [
        "a1",
        "b1",
        "a2",
        "b2",
        "a3",
        "b3",
    ]


def test_merge_hub_sink_after_close_is_cancelled() -> None:
    hub: MergeHub[int] = MergeHub()
    hub.close()
    pulled: list[int] = []

    def pull(value: int) -> int:
        pulled.append(value)
        return value

    Flow.range(0, 3).map(pull).subscribe(hub.sink())
    assert pulled == []


# --------------------------------------------------------------------------- BroadcastHub


def test_broadcast_wait_paces_by_the_slowest_within_buffer_size() -> None:
    hub = BroadcastHub(Flow.range(0, 100), buffer_size=8)
    fast, slow = RecordingSubscriber[int](), RecordingSubscriber[int]()
    hub.subscribe(fast)
    hub.subscribe(slow)
    fast.request(1000)
    assert len(fast.elements) == 8
    slow.request(3)
    assert len(fast.elements) == 11
    assert hub.statistics().buffered == 8


def test_broadcast_drop_lets_the_fast_consumer_run() -> None:
    hub = BroadcastHub(Flow.range(0, 100), buffer_size=8, slow_consumer="drop")
    fast, slow = RecordingSubscriber[int](), RecordingSubscriber[int]()
    hub.subscribe(fast)
    hub.subscribe(slow)
    fast.request(1000)
    assert fast.elements == list(range(100))
    slow.request(1000)
    assert slow.elements == list(range(92, 100))
    assert hub.statistics().dropped == 92
    assert slow.completed


def test_broadcast_fail_ends_the_slow_consumer_only() -> None:
    hub = BroadcastHub(Flow.range(0, 100), buffer_size=8, slow_consumer="fail")
    fast, slow = RecordingSubscriber[int](), RecordingSubscriber[int]()
    hub.subscribe(fast)
    hub.subscribe(slow)
    fast.request(1000)
    assert fast.elements == list(range(100))
    assert fast.completed
    assert isinstance(slow.error, MissingBackpressureError)
    assert str(slow.error).startswith("BroadcastHub: consumer fell 9 elements behind")
    assert hub.statistics().failed_consumers == 1


def test_broadcast_late_consumer_after_completion_gets_the_terminal_signal() -> None:
    failure = RuntimeError("source failed")
    hub = BroadcastHub(Flow.range(0, 2).concat_with(Flow.error(failure)))
    first = RecordingSubscriber[int](initial_request=10)
    hub.subscribe(first)
    assert first.elements == [0, 1]
    assert first.error is failure
    late = RecordingSubscriber[int](initial_request=1)
    hub.subscribe(late)
    assert late.error is failure
    assert late.elements == []  # nothing delivered before is replayed
    assert hub.statistics().buffered == 0


def test_broadcast_consumer_cancelled_from_inside_on_next_gets_no_further_element() -> None:
    hub = BroadcastHub(Flow.range(0, 10), buffer_size=16)
    consumer = _CancelOnFirst()
    hub.subscribe(consumer)
    consumer.request(7)  # seven elements wait in the buffer: the first on_next cancels
    assert consumer.elements == [0]
    assert not consumer.terminated
    assert hub.statistics().delivered == 1


class _CancelOnFirst(RecordingSubscriber[Any]):
    """Cancels from inside its first ``on_next``."""

    def on_next(self, element: Any) -> None:
        super().on_next(element)
        self.cancel()


def test_broadcast_rejects_unknown_policy() -> None:
    with pytest.raises(ValueError, match=r"^slow_consumer must be 'wait', 'drop' or 'fail'"):
        BroadcastHub(Flow.range(1), slow_consumer="block")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the TCK


class _HubVerification(PublisherVerification):
    def executor(self) -> ThreadPoolExecutor:
        pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tck-hubs")
        self.add_cleanup(lambda: pool.shutdown(wait=False, cancel_futures=True))
        return pool


class TestRouterSubscribeWhere(_HubVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        router: Router[int] = Router(buffer_size=16)
        stop = MAX_DEMAND if elements == MAX_DEMAND else 2 * elements
        _numbers(0, stop).subscribe(router.sink())
        router.close()
        return router.subscribe_where(lambda x: x % 2 == 0)


class TestMergeHubSource(_HubVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        hub: MergeHub[int] = MergeHub(buffer_size=16)
        half = elements // 2 if elements != MAX_DEMAND else 0
        _numbers(0, half).subscribe(hub.sink())
        _numbers(half, elements).subscribe(hub.sink())
        hub.close()
        return hub.source


class TestBroadcastHub(_HubVerification):
    def create_publisher(self, elements: int) -> Publisher[Any]:
        return BroadcastHub(_numbers(0, elements), buffer_size=16)

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return BroadcastHub(Flow.error(RuntimeError("TCK: failed publisher")))


# --------------------------------------------------------------------------- memory

_MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys, threading, time
    from concurrent.futures import ThreadPoolExecutor
    from reactive_streams import Flow
    from reactive_streams.hubs import BroadcastHub, MergeHub, Router

    N = int(sys.argv[2])
    BUFFER = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
    kind = sys.argv[1]

    def slow(x):  # a pause every 50 elements: ten times the others' pace, and more
        if x % 50 == 0:
            time.sleep(0.001)
        return x

    def rss():  # the resident set now, in KiB (ru_maxrss would hide growth below the
        # import-time peak); sampled every 5 ms while the consumers run
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize() // 1024

    with ThreadPoolExecutor(2) as pool:
        Flow.range(0, 1000).to_list()
        before = rss()
        if kind == "merge":
            hub = MergeHub(buffer_size=BUFFER)
            Flow.range(0, N // 2).subscribe_on(pool).subscribe(hub.sink())
            Flow.range(N // 2, N).subscribe_on(pool).subscribe(hub.sink())
            hub.close()
            outputs = [Flow.from_publisher(hub.source)]
        elif kind == "router":
            hub = Router(buffer_size=BUFFER)
            outputs = [
                Flow.from_publisher(hub.subscribe_where(lambda x: x % 2 == 0)),
                Flow.from_publisher(hub.subscribe_where(lambda x: True)),
            ]
        else:  # the source waits for the gate, so both consumers see every element
            gate = threading.Event()
            producer = ThreadPoolExecutor(1)
            producer.submit(gate.wait, 60)
            hub = BroadcastHub(Flow.range(0, N).subscribe_on(producer), buffer_size=BUFFER)
            outputs = [Flow.from_publisher(hub), Flow.from_publisher(hub)]
        counts = [0] * len(outputs)
        iterators = [output.iterate(prefetch=64, timeout=120) for output in outputs]
        if kind == "broadcast":
            gate.set()

        def consume(index):  # consumer 0 is ten times slower than the others
            for value in iterators[index]:
                if index == 0:
                    slow(value)
                counts[index] += 1

        threads = [threading.Thread(target=consume, args=(i,)) for i in range(len(outputs))]
        for thread in threads:
            thread.start()
        if kind == "router":
            Flow.range(0, N).subscribe_on(pool).subscribe(hub.sink())
            hub.close()
        peak = 0
        peak_rss = rss()
        while any(thread.is_alive() for thread in threads):
            peak = max(peak, hub.statistics().buffered)
            peak_rss = max(peak_rss, rss())
            threads[0].join(0.005)
        for thread in threads:
            thread.join(300)
        report = {"counts": counts, "growth_kib": peak_rss - before, "peak_buffered": peak}
        print(json.dumps(report))
        print(hub.statistics(), file=sys.stderr)
    """
)


_MEMORY_KINDS = ("merge", "router", "broadcast")
_MEMORY_ELEMENTS = int(os.environ.get("HUB_MEMORY_ELEMENTS", "2000000"))


@pytest.fixture(scope="module")
def memory_runs() -> Iterator[dict[str, subprocess.Popen[str]]]:
    """The three memory scripts, started together on first use, one process each.

    Most of each run is the slow consumer sleeping, so the three overlap well even on
    two cores: the module waits for the longest, not for their sum. Each process
    measures only its own resident set.
    """
    runs = {
        kind: subprocess.Popen(
            [sys.executable, "-c", _MEMORY_SCRIPT, kind, str(_MEMORY_ELEMENTS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for kind in _MEMORY_KINDS
    }
    try:
        yield runs
    finally:
        for run in runs.values():
            if run.poll() is None:
                run.kill()
            run.communicate()


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", _MEMORY_KINDS)
def test_two_million_elements_with_a_slow_consumer_stay_within_the_buffers(
    kind: str, memory_runs: dict[str, subprocess.Popen[str]]
) -> None:
    elements = _MEMORY_ELEMENTS
    stdout, stderr = memory_runs[kind].communicate(timeout=600)
    assert memory_runs[kind].returncode == 0, stderr
    report = json.loads(stdout)
    print(kind, report, stderr)
    expected = {"merge": [elements], "router": [elements // 2, elements]}.get(
        kind, [elements, elements]
    )
    assert report["counts"] == expected
    assert report["peak_buffered"] >= 512  # the slow consumer really filled the buffers
    # 1024-element buffers cost ~100 KiB; 193,000 buffered ints measured +7.7 MiB, so 2M
    # leaked elements would be ~80 MiB
    assert report["growth_kib"] < 4 * 1024, f"peak RSS grew by {report['growth_kib']} KiB"
