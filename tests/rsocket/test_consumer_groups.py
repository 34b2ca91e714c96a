"""Consumer groups on a live route: a commit releases only what its own group was sent."""

from __future__ import annotations

import json

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from reactive_streams import Flow
from reactive_streams.rsocket import (
    LivePartitions,
    ReleasedOffsetError,
    connect,
    partitioned_routes,
    serve,
)
from reactive_streams.testing import RecordingSubscriber, collect

from .conftest import TIMEOUT
from .test_live_partitions import SCHEMA, Counting, Manual, batch, first, ids


def _rows(live: LivePartitions, group: str, start: int, count: int) -> list[int]:
    """``count`` batches of partition 0 read by ``group`` from ``start``, as ids."""
    return ids(first(live.open_for(group, 0, start), count))


def test_a_group_that_never_read_releases_nothing_with_any_commit() -> None:
    live = LivePartitions(Flow.from_iterable(Counting(rows=100, total=10)), SCHEMA)
    assert _rows(live, "pipeline", 0, 2) == list(range(200))
    live.commit_for("rogue", 0, 10**12)  # no reader of "rogue" ever: ignored
    assert live.retained_rows == 1_000
    # Before: one commit of 10**12 released every row, and the reader failed.
    assert _rows(live, "pipeline", 0, 1) == list(range(100))


def test_a_commit_is_clamped_to_what_its_group_was_sent_and_the_least_group_holds() -> None:
    live = LivePartitions(Flow.from_iterable(Counting(rows=100, total=10)), SCHEMA)
    assert _rows(live, "pipeline", 0, 5) == list(range(500))
    assert _rows(live, "rogue", 0, 1) == list(range(100))
    live.commit_for("rogue", 0, 10**12)  # clamped to the 100 it was sent
    assert live.retained_rows == 1_000  # "pipeline" committed nothing: it holds at 0
    live.commit_for("pipeline", 0, 300)
    assert live.retained_rows == 900  # released below 100, the least of (300, 100)
    with pytest.raises(ReleasedOffsetError):
        collect(live.open_for("pipeline", 0, 0), timeout=TIMEOUT)
    assert _rows(live, "pipeline", 300, 2) == list(range(300, 500))


def test_a_group_that_never_returns_stops_holding_retention_after_its_grace() -> None:
    now = [0.0]
    live = LivePartitions(
        Flow.from_iterable(Counting(rows=100, total=10)),
        SCHEMA,
        group_grace=60.0,
        clock=lambda: now[0],
    )
    assert _rows(live, "gone", 0, 1) == list(range(100))  # read, never committed, left
    assert _rows(live, "pipeline", 0, 4) == list(range(400))
    live.commit_for("pipeline", 0, 400)
    assert live.retained_rows == 1_000  # "gone" holds at 0 within its grace
    now[0] = 61.0
    live.commit_for("pipeline", 0, 400)
    assert live.retained_rows == 600  # its grace passed: released at "pipeline"'s 400
    with pytest.raises(ReleasedOffsetError):  # what the docs say it then gets
        collect(live.open_for("gone", 0, 100), timeout=TIMEOUT)


def test_over_the_route_a_rogue_token_holder_cannot_release_another_groups_records() -> None:
    manual = Manual()
    live = LivePartitions(manual, SCHEMA)
    with serve(partitioned_routes("live", live)) as server:
        url = f"tcp://127.0.0.1:{server.port}"
        for index in range(10):
            manual.push(batch(index * 100, 100))
        with connect(url) as pipeline:
            request = json.dumps({"partition": 0, "start": 0, "group": "ckpt-1"}).encode()
            assert ids_of(first(pipeline.request_stream("live", request), 3)) == list(range(300))
            with connect(url) as rogue:
                for group in ("", "rogue", "ckpt-1"):
                    commit = {"partition": 0, "offset": 10**12, "group": group}
                    collect(rogue.request_response("live.commit", json.dumps(commit).encode()))
            # Before: retention dropped to 0 and the reader failed with ReleasedOffsetError.
            assert live.retained_rows == 700  # "ckpt-1"'s commit was clamped to its 300
            again = json.dumps({"partition": 0, "start": 300, "group": "ckpt-1"}).encode()
            assert ids_of(first(pipeline.request_stream("live", again), 2)) == list(range(300, 500))


def ids_of(payloads: list[bytes]) -> list[int]:
    return [v for p in payloads for v in pa.ipc.open_stream(p).read_all().column("id").to_pylist()]


HONEST = ("a", "b", "c")


class GroupsMachine(RuleBasedStateMachine):
    """Honest groups read, commit, disconnect and resume; a rogue commits anything.

    No honest group ever finds a record it had not committed released.
    """

    @initialize()
    def start(self) -> None:
        self.manual = Manual()
        self.live = LivePartitions(self.manual, SCHEMA, batch_rows=10, request_batches=1)
        self.pushed = 0
        self.committed = dict.fromkeys(HONEST, 0)  # what each told the producer
        self.read_to = dict.fromkeys(HONEST, 0)  # where each reader stands now
        self.joined: set[str] = set()

    @rule(rows=st.integers(1, 25))
    def push(self, rows: int) -> None:
        self.manual.push(batch(self.pushed, rows))
        self.pushed += rows

    @precondition(lambda self: self.pushed > 0)
    @rule(group=st.sampled_from(HONEST), batches=st.integers(1, 3))
    def read(self, group: str, batches: int) -> None:
        if group not in self.joined:  # a new group starts where retention starts (as Kafka's)
            base = self.live._partitions[0].base
            self.committed[group] = self.read_to[group] = max(self.read_to[group], base)
        start = self.read_to[group]
        available = self.pushed - start
        if available <= 0:
            return
        reader: RecordingSubscriber[pa.RecordBatch] = RecordingSubscriber(initial_request=batches)
        self.live.open_for(group, 0, start).subscribe(reader)
        assert reader.wait_for_elements(1, TIMEOUT)
        assert reader.error is None, reader.error
        assert reader.subscription is not None
        reader.subscription.cancel()
        got = ids(reader.elements)
        assert got == list(range(start, start + len(got)))  # exact, in order
        self.read_to[group] = start + len(got)
        self.joined.add(group)

    @rule(group=st.sampled_from(HONEST), share=st.floats(0, 1))
    def commit(self, group: str, share: float) -> None:
        if group not in self.joined:
            return
        low, high = self.committed[group], self.read_to[group]
        offset = low + int((high - low) * share)
        self.live.commit_for(group, 0, offset)
        self.committed[group] = offset

    @rule(group=st.sampled_from(HONEST))
    def restart(self, group: str) -> None:
        self.read_to[group] = self.committed[group]  # back to its checkpoint

    @rule(group=st.sampled_from(("rogue", "", "never-read")), offset=st.integers(0, 10**12))
    def rogue_commit(self, group: str, offset: int) -> None:
        self.live.commit_for(group, 0, offset)

    @precondition(lambda self: self.live._partitions[0].base < self.pushed)
    @rule()
    def rogue_reads_then_commits_everything(self) -> None:
        reader: RecordingSubscriber[pa.RecordBatch] = RecordingSubscriber(initial_request=1)
        self.live.open_for("rogue", 0, self.live._partitions[0].base).subscribe(reader)
        assert reader.wait_for_elements(1, TIMEOUT)
        assert reader.subscription is not None
        reader.subscription.cancel()
        self.live.commit_for("rogue", 0, 10**12)

    @invariant()
    def nothing_uncommitted_is_released(self) -> None:
        if not hasattr(self, "live"):
            return
        base = self.live._partitions[0].base
        for group in self.joined:
            # the group's own position holds retention (it is within its grace)
            assert base <= self.committed[group]


GroupsMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestGroups = GroupsMachine.TestCase
