"""to_spark_stream and from_streaming_query: round trips, demand, security, failures."""

from __future__ import annotations

import itertools
import logging
import socket
import threading
from typing import TYPE_CHECKING, Any

import pytest

from reactive_streams.spark import (
    SparkConnectUnsupportedError,
    StreamingQueryFailedError,
)
from reactive_streams.spark._from_streaming_query import MicroBatch, from_streaming_query
from reactive_streams.spark._stream_source import recv_frame, recv_json, send_frame, send_json
from reactive_streams.spark._to_spark_stream import to_spark_stream, to_spark_stream_bridge

from ._helpers import (
    Collector,
    OneShot,
    SequencePublisher,
    await_stopped,
    run_to_completion,
    wait_until,
)

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

TIMEOUT = 90.0


def _rows(count: int) -> SequencePublisher[dict[str, Any]]:
    return SequencePublisher(lambda: ({"x": index, "s": f"r{index}"} for index in range(count)))


def test_round_trip_is_exact_and_batches_respect_the_limit(spark: SparkSession) -> None:
    publisher = _rows(25_000)
    bridge = to_spark_stream_bridge(
        publisher, spark, "x long, s string", max_records_per_trigger=7_000
    )
    batches: list[MicroBatch] = run_to_completion(bridge.dataframe, TIMEOUT)
    sizes = [batch.table.num_rows for batch in batches]
    assert sum(sizes) == 25_000
    assert max(sizes) <= 7_000
    values = list(itertools.chain.from_iterable(b.table.column("x").to_pylist() for b in batches))
    assert sorted(values) == list(range(25_000))
    assert sum(values) == sum(range(25_000))
    ids = [batch.batch_id for batch in batches]
    assert ids == sorted(ids)
    # Demand sent to the publisher is what the micro-batches asked for, never more.
    assert publisher.requested <= 25_000 + 7_000
    stats = bridge.statistics()
    assert stats.delivered == 25_000
    assert stats.buffered == 0


def test_read_ahead_keeps_batches_within_the_limit_and_demand_within_two_triggers(
    spark: SparkSession,
) -> None:
    publisher = SequencePublisher(lambda: ({"x": index} for index in itertools.count()))
    bridge = to_spark_stream_bridge(
        publisher, spark, "x long", max_records_per_trigger=100, read_ahead_triggers=1
    )
    collector: Collector[MicroBatch] = Collector(batch=1, limit=3)  # wants 3 batches only
    source = from_streaming_query(bridge.dataframe)
    source.subscribe(collector)
    assert collector.wait_for(3, TIMEOUT)
    threading.Event().wait(3.0)  # give Spark every chance to run ahead (expected to expire)
    assert len(collector.items) == 3
    assert max(batch.table.num_rows for batch in collector.items) <= 100
    # Three batches delivered, the fourth waits in foreachBatch, one more trigger read ahead.
    assert publisher.requested <= 5 * 100
    assert bridge.statistics().requested <= 5 * 100
    assert collector.subscription is not None
    collector.subscription.cancel()
    assert publisher.cancelled.wait(TIMEOUT)
    query = source.subscriptions[0].query
    assert query is not None
    await_stopped(query, TIMEOUT)


def test_read_ahead_round_trip_is_exact(spark: SparkSession) -> None:
    publisher = _rows(12_000)
    bridge = to_spark_stream_bridge(
        publisher, spark, "x long, s string", max_records_per_trigger=5_000, read_ahead_triggers=1
    )
    collector: Collector[MicroBatch] = Collector()
    from_streaming_query(bridge.dataframe).subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert collector.error is None
    sizes = [batch.table.num_rows for batch in collector.items]
    assert sum(sizes) == 12_000
    assert max(sizes) <= 5_000
    values = itertools.chain.from_iterable(b.table.column("x").to_pylist() for b in collector.items)
    assert sorted(values) == list(range(12_000))
    assert publisher.requested <= 12_000 + 2 * 5_000


def test_read_ahead_must_be_a_non_negative_int(spark: SparkSession) -> None:
    with pytest.raises(ValueError, match=r"read_ahead_triggers must be an int >= 0, got -1"):
        to_spark_stream_bridge(_rows(1), spark, "x long", read_ahead_triggers=-1)


def test_empty_publisher_completes_the_query(spark: SparkSession) -> None:
    collector: Collector[MicroBatch] = Collector()
    df = to_spark_stream(_rows(0), spark, "x long, s string")
    from_streaming_query(df).subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert collector.completed
    assert sum(batch.table.num_rows for batch in collector.items) == 0


def test_slow_subscriber_holds_back_micro_batches_and_cancel_stops_everything(
    spark: SparkSession,
) -> None:
    publisher = SequencePublisher(lambda: ({"x": index} for index in itertools.count()))
    bridge = to_spark_stream_bridge(publisher, spark, "x long", max_records_per_trigger=100)
    collector: Collector[MicroBatch] = Collector(batch=1, limit=3)  # wants 3 batches only
    source = from_streaming_query(bridge.dataframe)
    source.subscribe(collector)
    assert collector.wait_for(3, TIMEOUT)
    # Give Spark every chance to run ahead; it must not (this wait is expected to expire).
    threading.Event().wait(3.0)
    assert len(collector.items) == 3
    # Three batches delivered, the fourth waits in foreachBatch: Spark cannot plan a fifth.
    assert publisher.requested <= 4 * 100
    assert bridge.statistics().requested <= 4 * 100
    assert collector.subscription is not None
    collector.subscription.cancel()
    assert publisher.cancelled.wait(TIMEOUT)  # query stopped -> bridge cancelled upstream
    query = source.subscriptions[0].query
    assert query is not None
    await_stopped(query, TIMEOUT)
    assert not query.isActive
    assert not collector.done.is_set()  # no signal after cancel


def test_publisher_error_fails_the_query_after_the_elements_before_it(
    spark: SparkSession,
) -> None:
    publisher = SequencePublisher(
        lambda: ({"x": index} for index in range(150)), fail_with=RuntimeError("sensor offline")
    )
    df = to_spark_stream(publisher, spark, "x long", max_records_per_trigger=100)
    collector: Collector[MicroBatch] = Collector()
    from_streaming_query(df).subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert isinstance(collector.error, StreamingQueryFailedError)
    assert "RuntimeError: sensor offline" in str(collector.error)
    assert "after 150 elements" in str(collector.error)
    assert sum(batch.table.num_rows for batch in collector.items) == 150


def test_elements_that_do_not_fit_the_schema_fail_the_query(spark: SparkSession) -> None:
    rows: list[dict[str, Any]] = [{"x": 1}, {"x": "not a number"}]
    publisher = SequencePublisher(lambda: iter(rows))
    df = to_spark_stream(publisher, spark, "x long")
    collector: Collector[MicroBatch] = Collector()
    from_streaming_query(df).subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert isinstance(collector.error, StreamingQueryFailedError)
    assert "do not fit the schema struct<x:bigint>" in str(collector.error)
    assert publisher.cancelled.is_set()


def test_non_positive_request_signals_rule_3_9_and_stops_the_query(spark: SparkSession) -> None:
    class BadRequester(Collector[MicroBatch]):
        def on_subscribe(self, subscription: Any) -> None:
            self.subscription = subscription
            subscription.request(0)

    collector = BadRequester()
    publisher = SequencePublisher(lambda: ({"x": index} for index in itertools.count()))
    source = from_streaming_query(to_spark_stream(publisher, spark, "x long"))
    source.subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert isinstance(collector.error, ValueError)
    assert str(collector.error) == "Rule 3.9: non-positive subscription request (n=0)"
    assert source.subscriptions[0].query is None  # failed in on_subscribe: never started
    assert publisher.requested == 0


def test_cancel_while_waiting_for_the_first_batch_stops_the_query(spark: SparkSession) -> None:
    class Hesitant(Collector[MicroBatch]):
        def on_subscribe(self, subscription: Any) -> None:
            self.subscription = subscription  # no request: foreachBatch must wait

    collector = Hesitant()
    publisher = SequencePublisher(lambda: ({"x": index} for index in itertools.count()))
    bridge = to_spark_stream_bridge(publisher, spark, "x long", max_records_per_trigger=50)
    source = from_streaming_query(bridge.dataframe)
    source.subscribe(collector)
    subscription = source.subscriptions[0]
    # The first batch was read (50 elements requested) and now waits for demand.
    with bridge._cond:
        assert bridge._cond.wait_for(lambda: bridge._requested >= 50, TIMEOUT)
    assert subscription.statistics().delivered == 0
    assert collector.subscription is not None
    collector.subscription.cancel()
    assert publisher.cancelled.wait(TIMEOUT)
    assert subscription.query is not None
    await_stopped(subscription.query, TIMEOUT)
    assert not subscription.query.isActive
    assert collector.items == []
    assert publisher.requested == 50


def _connect(address: tuple[str, int]) -> socket.socket:
    return socket.create_connection(address, timeout=30)


def test_bridge_refuses_and_logs_connections_without_the_token(
    spark: SparkSession, caplog: pytest.LogCaptureFixture
) -> None:
    bridge = to_spark_stream_bridge(_rows(10), spark, "x long, s string")
    try:
        host, _port = bridge.address
        assert host == "127.0.0.1"
        with caplog.at_level(logging.WARNING, logger="reactive_streams.spark"):
            with _connect(bridge.address) as wrong:
                send_json(wrong, {"token": "guess", "stream": bridge.stream_id, "version": 1})
                with pytest.raises(EOFError):
                    recv_frame(wrong)
            with _connect(bridge.address) as garbage:
                garbage.sendall(b"\x00\x00\x00\x05hello")
                with pytest.raises(EOFError):
                    recv_frame(garbage)
            with _connect(bridge.address) as deep:  # nested past the parser's recursion
                frame = b"[" * 60_000
                send_frame(deep, frame)
                with pytest.raises(EOFError):
                    recv_frame(deep)
            assert bridge.refused_connections == 3
        refusals = [r for r in caplog.records if "refused a connection" in r.getMessage()]
        assert len(refusals) == 3
        assert "nested too deeply" in refusals[2].getMessage()
        assert "missing or wrong token" in refusals[0].getMessage()
        assert bridge.statistics().requested == 0  # nothing was subscribed or requested
        # The real token works (taken from the bridge, as Spark's runner gets it).
        with _connect(bridge.address) as good:
            send_json(good, {"token": bridge._token, "stream": bridge.stream_id, "version": 1})
            send_json(good, {"op": "read", "start": 0, "max": 4})
            reply = recv_json(good)
            assert reply == {"status": "ok", "count": 4, "end": 4, "done": False}
            import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

            with pa.ipc.open_stream(recv_frame(good)) as stream:
                table = stream.read_all()
            assert table.column("x").to_pylist() == [0, 1, 2, 3]
            assert bridge.statistics().requested == 4  # the read's size was the demand
    finally:
        bridge.close()


def test_connect_sessions_fail_fast() -> None:
    class ConnectSession:
        pass

    ConnectSession.__module__ = "pyspark.sql.connect.session"
    with pytest.raises(SparkConnectUnsupportedError, match=r"^to_spark_stream needs a classic"):
        to_spark_stream(_rows(1), ConnectSession(), "x long")  # type: ignore[arg-type]
    with pytest.raises(SparkConnectUnsupportedError, match=r"^from_streaming_query needs"):
        from_streaming_query(ConnectSession())  # type: ignore[arg-type]


def test_from_streaming_query_refuses_batch_dataframes(spark: SparkSession) -> None:
    with pytest.raises(ValueError, match="needs a streaming DataFrame"):
        from_streaming_query(spark.range(3))


def test_a_failing_query_ends_in_on_error_naming_the_cause(spark: SparkSession) -> None:
    df = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 20)
        .load()
        .selectExpr("IF(value >= 3, raise_error('meter 3 is broken'), value) AS value")
    )
    collector: Collector[MicroBatch] = Collector()
    from_streaming_query(df, query_name="meters").subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert isinstance(collector.error, StreamingQueryFailedError)
    assert str(collector.error).startswith("the streaming query meters failed: ")
    assert "meter 3 is broken" in str(collector.error)
    assert collector.error.__cause__ is not None


def test_a_restart_from_the_checkpoint_replays_the_uncommitted_batch_id(
    spark: SparkSession, tmp_path: Path
) -> None:
    checkpoint = str(tmp_path / "checkpoint")

    def rate() -> Any:
        return spark.readStream.format("rate").option("rowsPerSecond", 50).load()

    first: OneShot[MicroBatch] = OneShot(2)
    source = from_streaming_query(rate(), checkpoint_location=checkpoint)
    source.subscribe(first)
    assert first.wait_for(2, TIMEOUT)
    assert [batch.batch_id for batch in first.items] == [0, 1]
    # Batch 2 is planned and waits in foreachBatch for demand that never comes.
    query = source.subscriptions[0].query
    assert query is not None
    offsets, commits = tmp_path / "checkpoint" / "offsets", tmp_path / "checkpoint" / "commits"
    assert wait_until((offsets / "2").exists, TIMEOUT)
    assert first.subscription is not None
    first.subscription.cancel()
    await_stopped(query, TIMEOUT)
    assert (commits / "1").exists()
    assert not (commits / "2").exists()  # cancelled while waiting: left uncommitted

    second: OneShot[MicroBatch] = OneShot(1)
    again = from_streaming_query(rate(), checkpoint_location=checkpoint)
    again.subscribe(second)
    assert second.wait_for(1, TIMEOUT)
    assert second.items[0].batch_id == 2  # replayed, same id: at-least-once, dedupe by id
    assert second.subscription is not None
    second.subscription.cancel()
    restarted = again.subscriptions[0].query
    assert restarted is not None
    await_stopped(restarted, TIMEOUT)


def test_a_query_that_cannot_start_ends_in_on_error(spark: SparkSession) -> None:
    publisher = _rows(10)
    df = to_spark_stream(publisher, spark, "x long, s string")
    collector: Collector[MicroBatch] = Collector()
    # "complete" needs an aggregation: Spark refuses to start the query.
    from_streaming_query(df, output_mode="complete").subscribe(collector)
    assert collector.done.wait(TIMEOUT)
    assert isinstance(collector.error, StreamingQueryFailedError)
    assert str(collector.error).startswith("the streaming query could not start: ")
    assert "Invalid streaming output mode: complete" in str(collector.error)
    assert publisher.requested == 0  # the publisher was never asked for anything


def test_finished_subscriptions_are_not_kept(spark: SparkSession) -> None:
    class Canceller(Collector[MicroBatch]):
        def on_subscribe(self, subscription: Any) -> None:
            self.subscription = subscription
            subscription.cancel()  # ends at once: no query is started

    source = from_streaming_query(spark.readStream.format("rate").load())
    for _ in range(5):
        source.subscribe(Canceller())
    assert len(source.subscriptions) == 1  # ended streams leave the list
    assert source.subscriptions[0].cancelled


def test_a_closed_stream_gives_its_registration_back(spark: SparkSession) -> None:
    first = to_spark_stream_bridge(SequencePublisher(lambda: iter(())), spark, "x long")
    name = first.format_name
    first.close()
    second = to_spark_stream_bridge(SequencePublisher(lambda: iter(())), spark, "x long")
    try:
        # One registration serves both, not a new one per stream that is never removed.
        assert second.format_name == name
        assert second.stream_id != first.stream_id
    finally:
        second.close()


def test_the_bridge_cleans_up_when_a_later_step_of_its_constructor_fails(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reactive_streams.spark import _bridge_queries, _to_spark_stream
    from reactive_streams.spark._bridge_server import BridgeServer

    servers: list[BridgeServer] = []

    class Recorded(BridgeServer):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            servers.append(self)

    names: list[str] = []

    def refuse(spark: object, name: str, stream: object) -> None:
        names.append(name)
        raise RuntimeError("registration refused")

    monkeypatch.setattr(_to_spark_stream, "BridgeServer", Recorded)
    monkeypatch.setattr(_bridge_queries, "register", refuse)
    with pytest.raises(RuntimeError, match=r"^registration refused$"):
        to_spark_stream_bridge(SequencePublisher(lambda: iter(())), spark, "x long")
    (server,) = servers
    server._acceptor.join(TIMEOUT)
    assert not server._acceptor.is_alive()  # the socket was closed, so its thread ended
    with pytest.raises(OSError):
        socket.create_connection(server.address, timeout=5).close()
    assert names[0] in _bridge_queries._FREE_NAMES  # the name went back to the pool
