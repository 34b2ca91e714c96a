"""The TCK on the pipeline's result sink (Rules 2.x, black box)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

from reactive_streams import Subscriber
from reactive_streams.pipeline import ResultSink
from reactive_streams.tck import SubscriberBlackboxVerification


@dataclass(frozen=True)
class _Batch:
    batch_id: int
    table: pa.Table


class TestResultSinkBlackbox(SubscriberBlackboxVerification):
    def create_subscriber(self) -> Subscriber[Any]:
        directory = tempfile.TemporaryDirectory(prefix="tck-sink-")
        self.add_cleanup(directory.cleanup)
        return ResultSink(Path(directory.name), "parquet", mode="update", keys=("key",))

    def create_element(self, index: int) -> Any:
        return _Batch(index, pa.table({"key": [index % 3], "value": [index]}))
