"""A minimal in-test producer of a partitioned RSocket route (the wire protocol, version 1).

Serves in-memory Arrow batches, partition by partition, with ``reactive_streams.rsocket.serve``
and route functions of its own, and records what it was asked and what it produced, so the
tests can check the demand on the wire.
"""

from __future__ import annotations

import base64
import json
import threading
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

from reactive_streams import Publisher, Subscriber, Subscription
from reactive_streams.reference import IterablePublisher

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

STALL_TIMEOUT = 60.0
"""Seconds a stalled stream waits to be released (only against a hang)."""


def ipc_stream(batch: pa.RecordBatch) -> bytes:
    """One batch as an Arrow IPC stream (schema and the batch)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


class _Counted(Publisher[bytes]):
    """A publisher whose subscription adds every ``request(n)`` to the route's tally."""

    def __init__(self, inner: Publisher[bytes], route: PartitionedRoute) -> None:
        self._inner = inner
        self._route = route

    def subscribe(self, subscriber: Subscriber[bytes]) -> None:
        route = self._route

        class Relay(Subscriber[bytes]):
            def on_subscribe(self, subscription: Subscription) -> None:
                subscriber.on_subscribe(_Requests(subscription, route))

            def on_next(self, element: bytes) -> None:
                subscriber.on_next(element)

            def on_error(self, error: Exception) -> None:
                subscriber.on_error(error)

            def on_complete(self) -> None:
                subscriber.on_complete()

        self._inner.subscribe(Relay())


class _Requests(Subscription):
    def __init__(self, inner: Subscription, route: PartitionedRoute) -> None:
        self._inner = inner
        self._route = route

    def request(self, n: int) -> None:
        with self._route.lock:
            self._route.requested += n
        self._inner.request(n)

    def cancel(self) -> None:
        self._inner.cancel()


class PartitionedRoute:
    """The four routes of a partitioned route over in-memory batches (all partitions final).

    Attributes:
        produced: batches taken from the partitions (serialized for the wire) so far.
        requested: the request-n the server passed to the streams' publishers, summed.
        streams: request-streams opened.
        commits: ``(partition, offset)`` of every ``R.commit``, in arrival order.
        stall_at: ``(partition, record)``: a stream of that partition stops before the
            batch holding that record, sets ``stalled`` and waits for ``release``;
            partition ``None``: a stream of any partition does.
        stalls: streams that reached the stall so far.
    """

    def __init__(
        self,
        name: str,
        partitions: Sequence[Sequence[pa.RecordBatch]],
        schema: pa.Schema,
        *,
        batch_rows: int,
    ) -> None:
        self.name = name
        self.partitions = [list(batches) for batches in partitions]
        self.schema = schema
        self.batch_rows = batch_rows
        self.lock = threading.Lock()
        self.produced = 0
        self.requested = 0
        self.streams = 0
        self.commits: list[tuple[int, int]] = []
        self.committed = threading.Condition(self.lock)
        self.stall_at: tuple[int | None, int] | None = None
        self.stalls = 0
        self.stalled = threading.Event()
        self.release = threading.Event()

    def wait_committed(self, records: int, timeout: float) -> bool:
        """Wait until the last commits add up to ``records`` at least."""
        with self.committed:
            return self.committed.wait_for(
                lambda: sum(dict(self.commits).values()) >= records, timeout
            )

    def sizes(self) -> list[int]:
        """Records per partition."""
        return [sum(int(batch.num_rows) for batch in batches) for batches in self.partitions]

    def routes(self) -> dict[str, Callable[[bytes], Publisher[bytes]]]:
        """``{R.meta, R.offsets, R, R.commit}`` for ``serve``."""
        return {
            f"{self.name}.meta": self._meta,
            f"{self.name}.offsets": self._offsets,
            self.name: self._stream,
            f"{self.name}.commit": self._commit,
        }

    def _meta(self, data: bytes) -> Publisher[bytes]:
        answer = {
            "version": 1,
            "partitions": len(self.partitions),
            "batch_rows": self.batch_rows,
            "live": False,
            "schema": base64.b64encode(self.schema.serialize().to_pybytes()).decode("ascii"),
        }
        return IterablePublisher([json.dumps(answer).encode("utf-8")])

    def _offsets(self, data: bytes) -> Publisher[bytes]:
        sizes = self.sizes()
        answer = {"high_water": sizes, "final": [True] * len(sizes)}
        return IterablePublisher([json.dumps(answer).encode("utf-8")])

    def _commit(self, data: bytes) -> Publisher[bytes]:
        request = json.loads(data)
        with self.lock:
            self.commits.append((int(request["partition"]), int(request["offset"])))
            self.committed.notify_all()
        return IterablePublisher([])

    def _stream(self, data: bytes) -> Publisher[bytes]:
        request: dict[str, Any] = json.loads(data)
        partition, start = int(request["partition"]), int(request["start"])
        size = self.sizes()[partition]
        if start > size:
            raise ValueError(f"start {start} is beyond partition {partition}'s {size} records")
        with self.lock:
            self.streams += 1
        return _Counted(IterablePublisher(self._batches(partition, start)), self)

    def _batches(self, partition: int, start: int) -> Iterator[bytes]:
        position = 0
        for batch in self.partitions[partition]:
            rows = int(batch.num_rows)
            if position + rows <= start:
                position += rows
                continue
            stall = self.stall_at
            if (
                stall is not None
                and stall[0] in (partition, None)
                and position <= stall[1] < position + rows
            ):
                with self.lock:
                    self.stalls += 1
                self.stalled.set()
                self.release.wait(STALL_TIMEOUT)
            skip = max(0, start - position)
            with self.lock:
                self.produced += 1
            yield ipc_stream(batch.slice(skip))
            position += rows


def numbered_partitions(
    sizes: Sequence[int], batch_rows: int
) -> tuple[list[list[pa.RecordBatch]], pa.Schema]:
    """Partitions of ``{"p": partition, "i": position, "text": ...}`` rows, in batches."""
    schema = pa.schema([("p", pa.int64()), ("i", pa.int64()), ("text", pa.string())])
    partitions = []
    for partition, size in enumerate(sizes):
        batches = []
        for first in range(0, size, batch_rows):
            last = min(size, first + batch_rows)
            positions = list(range(first, last))
            batches.append(
                pa.RecordBatch.from_pydict(
                    {
                        "p": [partition] * len(positions),
                        "i": positions,
                        "text": [f"p{partition}-{i}" for i in positions],
                    },
                    schema=schema,
                )
            )
        partitions.append(batches)
    return partitions, schema
