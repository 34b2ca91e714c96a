"""Partitioned routes over real files: the four routes, request-n on the wire, the errors."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest

from reactive_streams import Publisher
from reactive_streams.files import FilePartitions, InputFile
from reactive_streams.rsocket import (
    ErrorCode,
    RSocketClient,
    RSocketConnectionError,
    RSocketServer,
    RSocketStreamError,
    connect,
    partitioned_routes,
    serve,
)
from reactive_streams.rsocket._frames import FLAG_COMPLETE, FLAG_NEXT, FrameType, encode_request_n
from reactive_streams.tck import PublisherVerification
from reactive_streams.testing import collect

from ..files.partition_inputs import RECORDS, SCHEMA, local_rows, write_inputs
from .conftest import TIMEOUT
from .rawpeer import RawPeer, request_stream, setup_frame

PARTITIONS = 3
BATCH_ROWS = 4


@pytest.fixture
def files(tmp_path: Path) -> list[InputFile]:
    return write_inputs(tmp_path / "input")


@pytest.fixture
def source(files: list[InputFile]) -> FilePartitions:
    return FilePartitions.plan(files, schema=SCHEMA, partitions=PARTITIONS, batch_rows=BATCH_ROWS)


@pytest.fixture
def server(source: FilePartitions) -> Iterator[RSocketServer]:
    with serve(partitioned_routes("events", source)) as running:
        yield running


@pytest.fixture
def client(server: RSocketServer) -> Iterator[RSocketClient]:
    with connect(f"tcp://127.0.0.1:{server.port}") as connected:
        yield connected


def ask(partition: object, start: object) -> bytes:
    return json.dumps({"partition": partition, "start": start}).encode()


def answer(client: RSocketClient, route: str) -> dict[str, Any]:
    [data] = collect(client.request_response(route), timeout=TIMEOUT)
    value: dict[str, Any] = json.loads(data.decode("utf-8"))
    return value


def decode(payload: bytes) -> pa.RecordBatch:
    """The one record batch of a PAYLOAD's IPC stream (the wire allows exactly one)."""
    reader = pa.ipc.open_stream(payload)
    batches = list(reader)
    assert len(batches) == 1
    batch: pa.RecordBatch = batches[0]
    return batch


def read(client: RSocketClient, partition: int, start: int) -> list[pa.RecordBatch]:
    data = ask(partition, start)
    return [decode(d) for d in collect(client.request_stream("events", data), timeout=TIMEOUT)]


def test_meta_answers_version_partitions_batch_rows_and_the_arrow_schema(
    client: RSocketClient, source: FilePartitions
) -> None:
    meta = answer(client, "events.meta")
    assert set(meta) == {"version", "partitions", "batch_rows", "live", "schema"}
    assert (meta["version"], meta["partitions"], meta["batch_rows"], meta["live"]) == (
        1,
        PARTITIONS,
        BATCH_ROWS,
        False,
    )
    schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(meta["schema"])))
    assert schema == source.schema
    assert schema.names == ["id", "name", "score", "_dead_letter"]


def test_offsets_answers_each_partitions_final_size(client: RSocketClient) -> None:
    assert answer(client, "events.offsets") == {
        "high_water": [25, 25, 25],
        "final": [True, True, True],
    }


def test_the_partitions_carry_every_record_once_in_input_order(
    client: RSocketClient, files: list[InputFile]
) -> None:
    rows = [
        row for p in range(PARTITIONS) for batch in read(client, p, 0) for row in batch.to_pylist()
    ]
    assert len(rows) == RECORDS
    assert rows == local_rows(files)
    assert sum(row["_dead_letter"] is not None for row in rows) == 2
    assert {"id": 3, "name": "two\nlines", "score": 3.5, "_dead_letter": None} in rows


def test_a_stream_from_a_middle_offset_is_what_a_local_split_reader_reads_from_there(
    client: RSocketClient, source: FilePartitions, files: list[InputFile]
) -> None:
    # Partition 1 holds records 25..49: a.csv's last five, then b.jsonl (its bad line too).
    batches = read(client, 1, 3)
    assert all(1 <= batch.num_rows <= BATCH_ROWS for batch in batches)
    assert all(batch.schema == source.schema for batch in batches)
    assert [row for batch in batches for row in batch.to_pylist()] == local_rows(files)[28:50]


def test_a_client_requesting_one_batch_gets_one_payload_until_it_asks_for_more(
    server: RSocketServer,
) -> None:
    peer = RawPeer.connect(server.port)
    try:
        peer.send(setup_frame())
        peer.send(request_stream(1, "events", 1, ask(0, 0)))
        [first] = peer.frames(1)
        assert (first.frame_type, first.stream_id) == (FrameType.PAYLOAD, 1)
        assert first.flags & FLAG_NEXT and not first.flags & FLAG_COMPLETE
        # Another request on the connection: its answer comes next, not a second batch.
        peer.send(request_stream(3, "events", 2**31 - 1, ask(2, 24)))
        one_row, end = peer.frames(2)
        assert (one_row.stream_id, end.stream_id) == (3, 3)
        assert decode(one_row.data).to_pylist()[0]["id"] == 74
        assert end.flags & FLAG_COMPLETE
        peer.send(encode_request_n(1, 2))
        second, third = peer.frames(2)
        assert [(f.frame_type, f.stream_id) for f in (second, third)] == [
            (FrameType.PAYLOAD, 1),
            (FrameType.PAYLOAD, 1),
        ]
        rows = [decode(f.data).num_rows for f in (first, second, third)]
        assert rows == [4, 4, 4]
        # the rest: 25 records in batches of 4 are 7 payloads, then COMPLETE
        peer.send(encode_request_n(1, 100))
        rest = peer.frames(5)
        assert [f.stream_id for f in rest] == [1] * 5
        assert rest[-1].flags & FLAG_COMPLETE
        assert sum(decode(f.data).num_rows for f in rest if f.flags & FLAG_NEXT and f.data) == 13
    finally:
        peer.close()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not json", r"the request is not UTF-8 JSON"),
        (b"[0, 1]", r"the request must be a JSON object"),
        (b'{"partition": 0}', r'the request\'s "start" must be an integer >= 0, got None'),
        (ask(0, -1), r'the request\'s "start" must be an integer >= 0, got -1'),
        (ask(True, 0), r'the request\'s "partition" must be an integer >= 0, got True'),
        (ask(3, 0), r"no partition 3: the route has 3 \(0 to 2\)"),
        (ask(1, 26), r"start 26 is beyond partition 1's 25 records \(route 'events'\)"),
    ],
)
def test_a_bad_request_ends_the_stream_with_an_error_naming_it(
    client: RSocketClient, data: bytes, message: str
) -> None:
    with pytest.raises(RSocketStreamError, match=message) as caught:
        collect(client.request_stream("events", data), timeout=TIMEOUT)
    assert caught.value.code == ErrorCode.APPLICATION_ERROR
    assert answer(client, "events.offsets")["high_water"] == [25, 25, 25]  # the client goes on


def test_a_stream_from_the_end_completes_at_once(client: RSocketClient) -> None:
    assert read(client, 1, 25) == []


def test_a_file_that_vanished_ends_the_stream_with_an_error_naming_it(
    client: RSocketClient, files: list[InputFile]
) -> None:
    files[2].path.unlink()  # c.parquet: the last 25 records, partition 2
    assert len(read(client, 0, 0)) == 7
    with pytest.raises(RSocketStreamError, match=r"FileNotFoundError: .*c\.parquet"):
        read(client, 2, 0)
    # The offsets look at no file: one file gone fails only the reads of its records.
    assert answer(client, "events.offsets")["final"] == [True] * PARTITIONS


def test_commit_is_accepted_and_the_route_replays_what_was_committed(
    client: RSocketClient, files: list[InputFile]
) -> None:
    client.fire_and_forget("events.commit", json.dumps({"partition": 0, "offset": 10}).encode())
    client.fire_and_forget("events.commit", b"not json")  # logged; no answer to send
    rows = [row for batch in read(client, 0, 0) for row in batch.to_pylist()]
    assert rows == local_rows(files)[:25]


def test_a_token_is_required_when_given(source: FilePartitions) -> None:
    with serve(partitioned_routes("events", source), token="s3cret") as server:
        url = f"tcp://127.0.0.1:{server.port}"
        with connect(url) as anonymous:
            with pytest.raises(RSocketConnectionError, match=r"authentication required") as caught:
                answer(anonymous, "events.meta")
            assert caught.value.code == ErrorCode.REJECTED_SETUP
        with connect(url, token="s3cret") as client:
            assert answer(client, "events.meta")["partitions"] == PARTITIONS
            assert len(read(client, 2, 20)) == 2


def test_an_unnamed_route_is_refused() -> None:
    with pytest.raises(ValueError, match=r"needs a name"):
        partitioned_routes("", FilePartitions([], SCHEMA))


class TestPartitionedStreamTck(PublisherVerification):
    """The stream route's publisher itself (as the server subscribes to it): batches of 1."""

    max_elements_from_publisher = RECORDS
    routes: ClassVar[dict[str, Callable[[bytes], Publisher[bytes]]]]

    def create_publisher(self, elements: int) -> Publisher[Any]:
        return self.routes["events"](ask(0, RECORDS - elements))

    def create_failed_publisher(self) -> Publisher[Any] | None:
        return self.routes["events"](b"not json")


@pytest.fixture(scope="module", autouse=True)
def _tck_routes(tmp_path_factory: pytest.TempPathFactory) -> None:
    files = write_inputs(tmp_path_factory.mktemp("tck"))
    source = FilePartitions.plan(files, schema=SCHEMA, batch_rows=1)
    TestPartitionedStreamTck.routes = partitioned_routes("events", source)
