"""``from_rsocket``: a partitioned RSocket route read on Spark's executors (local[2])."""

from __future__ import annotations

import re
import socket
import sys
import threading
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest
from pyspark import cloudpickle

from reactive_streams import Backoff
from reactive_streams.rsocket import serve
from reactive_streams.spark import RemoteRouteError, RSocketSplit, describe_route, from_rsocket
from tests.spark import rsocket_producer
from tests.spark.rsocket_producer import PartitionedRoute, numbered_partitions

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame, SparkSession

    from reactive_streams.rsocket import RSocketServer

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call,unused-ignore]
cloudpickle.register_pickle_by_value(rsocket_producer)  # type: ignore[no-untyped-call,unused-ignore]

TIMEOUT = 120
SIZES = [53, 0, 31, 40]
BATCH_ROWS = 7


@pytest.fixture
def route() -> PartitionedRoute:
    partitions, schema = numbered_partitions(SIZES, BATCH_ROWS)
    return PartitionedRoute("numbers", partitions, schema, batch_rows=BATCH_ROWS)


@pytest.fixture
def server(route: PartitionedRoute) -> Iterator[RSocketServer]:
    with serve(route.routes(), token="s3cret") as running:
        yield running
    route.release.set()


def _url(server: RSocketServer) -> str:
    return f"tcp://127.0.0.1:{server.port}"


def run_available_now(df: DataFrame) -> list[pa.Table]:
    """Run ``df`` with ``Trigger.AvailableNow``; each micro-batch's rows as a table."""
    batches: list[pa.Table] = []
    lock = threading.Lock()

    def keep(frame: DataFrame, batch_id: int) -> None:
        table = frame.toArrow()
        with lock:
            batches.append(table)

    query = df.writeStream.foreachBatch(keep).trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(TIMEOUT)
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    return batches


def expected_rows() -> list[tuple[int, int, str]]:
    return [
        (partition, index, f"p{partition}-{index}")
        for partition, size in enumerate(SIZES)
        for index in range(size)
    ]


def rows_of(tables: list[pa.Table]) -> list[tuple[int, int, str]]:
    rows = [(row["p"], row["i"], row["text"]) for table in tables for row in table.to_pylist()]
    return sorted(rows)


def test_every_record_once_in_bounded_micro_batches_with_commits(
    spark: SparkSession, server: RSocketServer, route: PartitionedRoute
) -> None:
    df = from_rsocket(
        _url(server), "numbers", spark, token="s3cret", max_records_per_trigger=20, read_timeout=60
    )
    assert df.columns == ["p", "i", "text"]
    tables = run_available_now(df)
    assert rows_of(tables) == expected_rows()  # exact: nothing lost, nothing twice
    assert len(tables) >= sum(SIZES) // (20 + BATCH_ROWS * len(SIZES))
    assert len(tables) > 1
    # A micro-batch ends at most one batch per partition past its budget.
    assert max(table.num_rows for table in tables) <= 20 + BATCH_ROWS * len(SIZES)
    # Each micro-batch's end is committed to the producer once the next one starts (Spark
    # commits a source's previous batch when it plans the next), so all but the last.
    assert route.wait_committed(sum(SIZES) - tables[-1].num_rows, TIMEOUT)
    last: dict[int, int] = {}
    for partition, offset in route.commits:
        assert 0 <= offset >= last.get(partition, 0)  # commits never go back
        last[partition] = offset
    assert sorted(last) == list(range(len(SIZES)))
    assert all(last[partition] <= size for partition, size in enumerate(SIZES))


def test_the_producer_produces_only_what_spark_requested(
    spark: SparkSession, server: RSocketServer, route: PartitionedRoute
) -> None:
    df = from_rsocket(
        _url(server), "numbers", spark, token="s3cret", max_records_per_trigger=15, read_timeout=60
    )
    tables = run_available_now(df)
    assert rows_of(tables) == expected_rows()
    batches = sum(len(batches) for batches in route.partitions)
    # Each stream's demand is the worker's: one batch at a time, up to its share's end.
    # A share reads at most its batches, plus the batch it starts inside; the producer's
    # publisher reads one element ahead of the demand.
    assert route.streams > 0
    assert route.requested <= batches + 2 * route.streams
    assert route.produced <= route.requested + route.streams


def test_an_unknown_route_a_wrong_token_and_no_server_are_one_clear_error(
    spark: SparkSession, server: RSocketServer
) -> None:
    url = _url(server)
    with pytest.raises(RemoteRouteError, match=r"route 'nowhere\.meta'.*no route"):
        from_rsocket(url, "nowhere", spark, token="s3cret")
    with pytest.raises(RemoteRouteError, match=r"refused the connection.*token"):
        from_rsocket(url, "numbers", spark, token="wrong", request_timeout=10)
    with pytest.raises(RemoteRouteError, match=r"authentication required"):
        from_rsocket(url, "numbers", spark, request_timeout=10)
    port = closed_port()
    with pytest.raises(RemoteRouteError, match=rf"tcp://127.0.0.1:{port}.*cannot connect"):
        describe_route(f"tcp://127.0.0.1:{port}", "numbers", timeout=10)


def closed_port() -> int:
    """A port nobody listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_a_producer_that_dies_mid_stream_fails_the_query_naming_the_partition(
    spark: SparkSession, route: PartitionedRoute
) -> None:
    route.stall_at = (0, 30)
    server = serve(route.routes())
    url = f"tcp://127.0.0.1:{server.port}"
    try:
        df = from_rsocket(url, "numbers", spark, max_records_per_trigger=1000, read_timeout=60)

        def consume(frame: DataFrame, batch_id: int) -> None:
            frame.count()

        query = df.writeStream.foreachBatch(consume).trigger(availableNow=True).start()
        try:
            assert route.stalled.wait(TIMEOUT), "the stream never reached the stall"
            server.close(5.0)  # the producer dies with the stream open
            with pytest.raises(Exception) as caught:
                query.awaitTermination(TIMEOUT)
        finally:
            query.stop()
    finally:
        route.release.set()
        server.close(5.0)
    message = str(caught.value)
    # The task reading the stalled partition, or another one cut off with it, or one that
    # opened its partition after the producer was gone (a loaded machine starts it late).
    assert re.search(rf"split {re.escape(url)} route 'numbers' partition \d \(element", message)
    assert "RSocketConnectionError" in message or "cannot connect" in message, message


def test_a_producer_that_sends_more_than_requested_fails_the_read_naming_rule_1_1() -> None:
    """The worker requests one batch; a producer that sends three breaks Rule 1.1."""
    from reactive_streams.rsocket._frames import FrameType, encode_payload
    from reactive_streams.spark._from_rsocket import _RouteReader
    from tests.rsocket.rawpeer import RawServer

    partitions, schema = numbered_partitions([9], 3)
    payloads = [rsocket_producer.ipc_stream(batch) for batch in partitions[0]]
    server = RawServer()
    url = f"tcp://127.0.0.1:{server.port}"
    _, failures, worker = _read_partition_zero(_RouteReader(url, None, 10.0), url, schema, 9)
    peer = server.accept()
    try:
        _setup, request = peer.frames(2)
        assert request.frame_type == FrameType.REQUEST_STREAM
        assert request.number == 1  # the worker's demand: one batch
        peer.send(b"".join(encode_payload(request.stream_id, data) for data in payloads))
        worker.join(TIMEOUT)
    finally:
        peer.close()
        server.close()
    assert not worker.is_alive()
    (failure,) = failures
    assert re.search(
        rf"split {re.escape(url)} route 'numbers' partition 0 .*Rule 1\.1", str(failure)
    )


RECONNECT = Backoff(min_backoff=0.05, max_backoff=0.5, deadline=60.0)


def _read_partition_zero(
    reader: Any, url: str, schema: pa.Schema, size: int = SIZES[0]
) -> tuple[list[Any], list[BaseException], threading.Thread]:
    """Start reading the ``size`` records of partition 0 of ``numbers`` on a thread, as a
    Spark task would; its rows and failures are filled in as it goes."""
    from reactive_streams.spark._splits_source import SplitPartition, SplitPlan, read_partition

    split = RSocketSplit(url, "numbers", 0)
    plan = SplitPlan(
        splits=(split,),
        names=(str(split),),
        opener=reader.open,
        count=reader.count,
        arrow=True,
        read_timeout=60.0,
    )
    rows: list[Any] = []
    failures: list[BaseException] = []

    def read() -> None:
        try:
            task = SplitPartition(0, split, str(split), 0, size)
            for batch in read_partition(plan, task, schema):
                rows.extend(batch.to_pylist())
        except BaseException as exc:
            failures.append(exc)

    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    return rows, failures, worker


def test_with_reconnect_a_stream_cut_by_the_producer_resumes_exactly_from_where_it_was(
    route: PartitionedRoute,
) -> None:
    from reactive_streams.spark._from_rsocket import _RouteReader

    route.stall_at = (0, 30)
    server = serve(route.routes())
    port = server.port
    url = f"tcp://127.0.0.1:{port}"
    again = PartitionedRoute("numbers", route.partitions, route.schema, batch_rows=BATCH_ROWS)
    restarted = None
    try:
        rows, failures, worker = _read_partition_zero(
            _RouteReader(url, None, 10.0, RECONNECT), url, route.schema
        )
        assert route.stalled.wait(TIMEOUT), "the stream never reached the stall"
        server.close(5.0)  # the producer goes away mid-stream...
        restarted = serve(again.routes(), port=port)  # ...and comes back on its port
        worker.join(TIMEOUT)
        assert not worker.is_alive()
    finally:
        route.release.set()
        server.close(5.0)
        if restarted is not None:
            restarted.close(5.0)
    assert failures == []
    assert [(row["p"], row["i"]) for row in rows] == [(0, index) for index in range(SIZES[0])]
    assert again.streams == 1  # asked again once, from the record reached
    assert route.stalled.is_set()


def test_without_reconnect_the_cut_stream_fails_naming_the_partition(
    route: PartitionedRoute,
) -> None:
    from reactive_streams.spark._from_rsocket import _RouteReader

    route.stall_at = (0, 30)
    server = serve(route.routes())
    url = f"tcp://127.0.0.1:{server.port}"
    try:
        _rows, failures, worker = _read_partition_zero(
            _RouteReader(url, None, 10.0), url, route.schema
        )
        assert route.stalled.wait(TIMEOUT)
        server.close(5.0)
        worker.join(TIMEOUT)
    finally:
        route.release.set()
        server.close(5.0)
    (failure,) = failures
    assert "RSocketConnectionError" in str(failure)


def test_with_reconnect_the_query_picks_up_a_producer_served_again_on_its_port(
    spark: SparkSession, route: PartitionedRoute
) -> None:
    route.stall_at = (0, 30)
    server = serve(route.routes())
    port = server.port
    url = f"tcp://127.0.0.1:{port}"
    again = PartitionedRoute("numbers", route.partitions, route.schema, batch_rows=BATCH_ROWS)
    restarted = None
    batches: list[pa.Table] = []
    lock = threading.Lock()

    def keep(frame: DataFrame, batch_id: int) -> None:
        table = frame.toArrow()
        with lock:
            batches.append(table)

    try:
        df = from_rsocket(
            url,
            "numbers",
            spark,
            max_records_per_trigger=1000,
            read_timeout=60,
            reconnect=RECONNECT,
        )
        query = df.writeStream.foreachBatch(keep).trigger(availableNow=True).start()
        try:
            assert route.stalled.wait(TIMEOUT), "the stream never reached the stall"
            server.close(5.0)
            restarted = serve(again.routes(), port=port)
            assert query.awaitTermination(TIMEOUT)
        finally:
            query.stop()
        assert query.exception() is None, query.exception()
    finally:
        route.release.set()
        server.close(5.0)
        if restarted is not None:
            restarted.close(5.0)
    assert rows_of(batches) == expected_rows()  # exact: nothing lost, nothing twice


def test_the_token_is_in_no_plan_no_pickled_option_and_no_sql_tab_text(
    spark: SparkSession, server: RSocketServer
) -> None:
    import base64

    df = from_rsocket(
        _url(server), "numbers", spark, token="s3cret", max_records_per_trigger=20, read_timeout=60
    )
    batches: list[pa.Table] = []
    query = df.writeStream.foreachBatch(lambda frame, _: batches.append(frame.toArrow()))
    started = query.trigger(availableNow=True).start()
    try:
        assert started.awaitTermination(TIMEOUT)
        assert started.exception() is None, started.exception()
        texts = [
            str(started._jsq.streamingQuery().logicalPlan().toString()),
            str(started._jsq.streamingQuery().lastExecution().toString()),
            str(df._jdf.queryExecution().toString()),
        ]
    finally:
        started.stop()
    assert rows_of(batches) == expected_rows()  # the executors had the token
    # What the Spark UI's SQL tab shows: each execution's description and plans.
    store = spark._jsparkSession.sharedState().statusStore()
    executions = store.executionsList()
    for index in range(executions.size()):
        execution = executions.apply(index)
        texts += [str(execution.description()), str(execution.details()),
                  str(execution.physicalPlanDescription())]  # fmt: skip
    [plan_option] = {
        match for text in texts for match in re.findall(r"plan=([A-Za-z0-9+/=]+)", text)
    }
    assert b"s3cret" not in base64.b64decode(plan_option)  # before: pickled into the plan
    assert all("s3cret" not in text for text in texts)
    assert any("secret.token=*********(redacted)" in text for text in texts), texts[0][:2000]


def test_an_acknowledged_commit_is_applied_when_commit_route_returns(
    route: PartitionedRoute, server: RSocketServer
) -> None:
    from reactive_streams.spark import commit_route

    offsets = {0: 10, 2: 5}
    assert commit_route(_url(server), "numbers", offsets, token="s3cret", acknowledged=True)
    with route.lock:  # no wait: the producer answered once each was applied
        assert route.commits == [(0, 10), (2, 5)]
    gone = f"tcp://127.0.0.1:{closed_port()}"
    assert not commit_route(gone, "numbers", offsets, timeout=2.0, acknowledged=True)
