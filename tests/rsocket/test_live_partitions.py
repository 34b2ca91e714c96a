"""LivePartitions: a live publisher served as partitions, retention bounded, commits release."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams import Flow, ProtocolViolationError, Publisher, Subscriber, Subscription
from reactive_streams.rsocket import (
    LivePartitions,
    ReleasedOffsetError,
    connect,
    partitioned_routes,
    serve,
)
from reactive_streams.tck import PublisherVerification
from reactive_streams.testing import RecordingSubscriber, collect

from .conftest import TIMEOUT

SCHEMA = pa.schema([("id", pa.int64())])


def batch(first: int, rows: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(range(first, first + rows), pa.int64())], ["id"])


def first(publisher: Publisher[pa.RecordBatch], count: int) -> list[pa.RecordBatch]:
    """The first ``count`` elements of a stream that may never end; then cancel it."""
    reader = RecordingSubscriber[pa.RecordBatch](initial_request=count)
    publisher.subscribe(reader)
    assert reader.wait_for_elements(count, TIMEOUT)
    assert reader.subscription is not None
    reader.subscription.cancel()
    return reader.elements[:count]


def ids(batches: list[pa.RecordBatch]) -> list[int]:
    return [value for b in batches for value in b.column("id").to_pylist()]


class Counting:
    """An endless generator of batches of ``rows`` rows that counts what it produced."""

    def __init__(self, rows: int, total: int | None = None) -> None:
        self.rows = rows
        self.total = total
        self.produced = 0

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for index in itertools.count() if self.total is None else range(self.total):
            self.produced += 1
            yield batch(index * self.rows, self.rows)


class Manual(Publisher[pa.RecordBatch]):
    """A publisher the test drives: ``push`` sends (even past demand), ``end`` terminates."""

    def __init__(self) -> None:
        self.requested = 0
        self.subscriber: Subscriber[pa.RecordBatch] | None = None
        self.cancelled = threading.Event()

    def subscribe(self, subscriber: Subscriber[pa.RecordBatch]) -> None:
        self.subscriber = subscriber
        outer = self

        class _Subscription(Subscription):
            def request(self, n: int) -> None:
                outer.requested += n

            def cancel(self) -> None:
                outer.cancelled.set()

        subscriber.on_subscribe(_Subscription())

    def push(self, element: pa.RecordBatch) -> None:
        assert self.subscriber is not None
        self.subscriber.on_next(element)

    def end(self, error: Exception | None = None) -> None:
        assert self.subscriber is not None
        if error is None:
            self.subscriber.on_complete()
        else:
            self.subscriber.on_error(error)


def test_the_retention_bound_stops_requesting_and_a_commit_resumes() -> None:
    source = Counting(rows=1_000)
    live = LivePartitions(
        Flow.from_iterable(source), SCHEMA, retention_rows=10_000, request_batches=4
    )
    # requested until the bound, then stopped (4 batches at a time may overshoot by 3)
    assert 10_000 <= live.retained_rows <= 13_000
    assert source.produced * 1_000 == live.retained_rows
    before = source.produced
    live.commit(0, 5_000)
    assert source.produced > before  # the commit released rows: more was requested
    assert 10_000 <= live.retained_rows <= 13_000
    assert live.high_water(0) == source.produced * 1_000
    assert live.high_retained_rows <= 10_000 + 3 * 1_000
    assert ids(first(live.open(0, 5_000), 3)) == list(range(5_000, 8_000))


def test_every_record_is_in_exactly_one_partition_and_replays_identically() -> None:
    live = LivePartitions(
        Flow.from_iterable(Counting(rows=100, total=20)), SCHEMA, partitions=3, batch_rows=40
    )
    assert all(live.final(p) for p in range(3))
    parts = [ids(collect(live.open(p, 0), timeout=TIMEOUT)) for p in range(3)]
    assert sorted(itertools.chain(*parts)) == list(range(2_000))
    assert [live.high_water(p) for p in range(3)] == [len(part) for part in parts]
    assert ids(collect(live.open(1, 55), timeout=TIMEOUT)) == parts[1][55:]  # mid-batch start
    for served in collect(live.open(0, 0), timeout=TIMEOUT):
        assert 1 <= served.num_rows <= 40


def test_a_released_position_is_refused_and_a_committed_one_is_served() -> None:
    live = LivePartitions(Flow.from_iterable(Counting(rows=100, total=5)), SCHEMA)
    live.commit(0, 250)
    with pytest.raises(ReleasedOffsetError, match="position 100 was released"):
        collect(live.open(0, 100), timeout=TIMEOUT)
    assert ids(collect(live.open(0, 250), timeout=TIMEOUT)) == list(range(250, 500))
    assert live.retained_rows == 300  # the batch holding 250 stays whole


def test_a_reader_at_the_end_waits_and_is_woken_by_the_next_batch_and_the_end() -> None:
    manual = Manual()
    live = LivePartitions(manual, SCHEMA, request_batches=2)
    assert manual.requested == 2
    reader = RecordingSubscriber[pa.RecordBatch](initial_request=10)
    live.open(0, 0).subscribe(reader)
    assert reader.elements == [] and not reader.terminated
    manual.push(batch(0, 3))
    assert ids(reader.elements) == [0, 1, 2]
    manual.push(batch(3, 2))
    assert ids(reader.elements) == [0, 1, 2, 3, 4]
    assert manual.requested == 4  # each batch received is asked for again
    manual.end()
    assert reader.completed
    assert live.final(0)


def test_the_publisher_failing_reaches_readers_after_the_retained_records() -> None:
    manual = Manual()
    live = LivePartitions(manual, SCHEMA)
    manual.push(batch(0, 3))
    manual.end(RuntimeError("sensor lost"))
    reader = RecordingSubscriber[pa.RecordBatch](initial_request=10)
    live.open(0, 0).subscribe(reader)
    assert ids(reader.elements) == [0, 1, 2]
    assert isinstance(reader.error, RuntimeError)
    assert not live.final(0)


def test_a_publisher_that_sends_more_than_requested_fails_readers_naming_rule_1_1() -> None:
    bad = Manual()
    live = LivePartitions(bad, SCHEMA, request_batches=1, retention_rows=1)
    assert bad.requested == 1
    bad.push(batch(0, 1))  # the retention is full now: nothing more is requested
    assert bad.requested == 1
    bad.push(batch(1, 1))  # Rule 1.1 broken
    assert bad.cancelled.is_set()
    reader = RecordingSubscriber[pa.RecordBatch](initial_request=10)
    live.open(0, 0).subscribe(reader)
    assert ids(reader.elements) == [0]
    assert isinstance(reader.error, ProtocolViolationError)
    assert "Rule 1.1" in str(reader.error)


def test_a_batch_without_the_route_s_columns_ends_the_source_with_a_clear_error() -> None:
    wrong = pa.RecordBatch.from_arrays([pa.array([1])], ["other"])
    live = LivePartitions(Flow.just(wrong), SCHEMA)
    with pytest.raises(ValueError, match=r"lacks the route's columns \['id'\]"):
        collect(live.open(0, 0), timeout=TIMEOUT)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="partitions"):
        LivePartitions(Flow.empty(), SCHEMA, partitions=0)
    live = LivePartitions(Flow.empty(), SCHEMA, partitions=2)
    with pytest.raises(ValueError, match="no partition 2"):
        live.open(2, 0)


def test_served_as_a_live_route_over_rsocket() -> None:
    manual = Manual()
    live = LivePartitions(manual, SCHEMA, partitions=2)
    with (
        serve(partitioned_routes("live", live)) as server,
        connect(f"tcp://127.0.0.1:{server.port}") as client,
    ):
        for index in range(4):
            manual.push(batch(index * 10, 10))
        [meta] = collect(client.request_response("live.meta"), timeout=TIMEOUT)
        assert b'"live":true' in meta
        [offsets] = collect(client.request_response("live.offsets"), timeout=TIMEOUT)
        assert offsets == b'{"high_water":[20,20],"final":[false,false]}'
        stream = client.request_stream("live", b'{"partition":1,"start":5}')
        got = first(stream, 2)
        assert [pa.ipc.open_stream(data).read_all().num_rows for data in got] == [5, 10]
        # A reader's commit releases what its group was sent: partition 1, below 20.
        client.fire_and_forget("live.commit", b'{"partition":1,"offset":20}')
        for _ in range(100):
            if live.retained_rows == 20:
                break
            threading.Event().wait(0.02)
        assert live.retained_rows == 20


class TestLivePartitionsTck(PublisherVerification):
    """One partition's reader, over a completed live source of one-row batches."""

    max_elements_from_publisher = 1_000

    def create_publisher(self, elements: int) -> Publisher[Any]:
        live = LivePartitions(
            Flow.from_iterable(Counting(rows=1, total=elements)), SCHEMA, batch_rows=1
        )
        return live.open(0, 0)

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return LivePartitions(Flow.error(RuntimeError("failed")), SCHEMA).open(0, 0)


def test_the_stats_route_counts_the_demand_on_the_wire_and_the_commit_latency() -> None:
    manual = Manual()
    live = LivePartitions(manual, SCHEMA, partitions=1)
    with (
        serve(partitioned_routes("live", live)) as server,
        connect(f"tcp://127.0.0.1:{server.port}") as client,
    ):

        def stats() -> dict[str, Any]:
            [data] = collect(client.request_response("live.stats"), timeout=TIMEOUT)
            answer: dict[str, Any] = json.loads(data)
            return answer

        assert stats() == {
            "streams": 0,
            "outstanding_batches": 0,
            "sent_batches": 0,
            "latency": None,
        }
        reader = RecordingSubscriber[bytes](initial_request=3)
        client.request_stream("live", b'{"partition":0,"start":0}').subscribe(reader)
        wait_for(lambda: stats()["outstanding_batches"] == 3)
        assert stats()["streams"] == 1
        manual.push(batch(0, 4))
        assert reader.wait_for_elements(1, TIMEOUT)
        wait_for(lambda: stats()["outstanding_batches"] == 2)
        assert stats()["sent_batches"] == 1
        client.fire_and_forget("live.commit", b'{"partition":0,"offset":4}')
        wait_for(lambda: stats()["latency"] is not None)
        latency = stats()["latency"]
        assert 0 <= latency["p50"] <= latency["p99"] < TIMEOUT
        assert latency["samples"] == 1
        assert reader.subscription is not None
        reader.subscription.cancel()
        wait_for(lambda: stats()["streams"] == 0)


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)
