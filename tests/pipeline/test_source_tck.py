"""The TCK on the pipeline's source publisher (Rules 1.x and 3.x)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

from reactive_streams import Publisher
from reactive_streams.pipeline import DeadLetterWriter, FileSource, InputFile, InputPlan
from reactive_streams.tck import PublisherVerification

_SCHEMA = pa.schema([("n", pa.int64())])


class TestFileSource(PublisherVerification):
    max_elements_from_publisher: ClassVar[int] = 100_000

    def create_publisher(self, elements: int) -> Publisher[Any]:
        plan = InputPlan(
            files=(), schema=_SCHEMA, table=pa.table({"n": pa.array(range(elements), pa.int64())})
        )
        return FileSource(plan, dead_letters=DeadLetterWriter(None), chunk_rows=64)

    def create_failed_publisher(self) -> Publisher[Any] | None:
        missing = InputFile(Path("/nonexistent/reactive-streams-tck/input.csv"), "csv")
        plan = InputPlan(files=(missing,), schema=_SCHEMA)
        return FileSource(plan, dead_letters=DeadLetterWriter(None))
