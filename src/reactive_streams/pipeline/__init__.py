"""The ``reactive-streams pipeline`` job: files -> Spark Structured Streaming -> one result.

The pieces, each usable on its own:

* ``plan_inputs`` / ``default_input``: check the input and infer its schema
  (``schema_from_ddl`` reads a given one, ``--schema``, without Spark);
* ``FileSource``: a publisher of the input's records (``dict`` rows, or with
  ``arrow=True`` ``pyarrow.RecordBatch`` chunks), read only on demand, validated against
  the schema (malformed records go to a ``DeadLetterWriter``; ``DeadLetterLimit`` says when
  there are too many);
* ``plan_file_partitions`` / ``FollowedFiles``: files (and, followed, those that land
  later) as live partitions, served on loopback for ``--input DIR --follow``;
* ``TableSpec``: a reference table (``--table NAME=PATH``) the query can join with;
* ``ResultSink``: a ``Subscriber`` of micro-batches that keeps the latest row per key and
  writes one exact result file at completion (temporary name, then rename);
* ``Pipeline``: the wiring through ``reactive_streams.spark`` (``to_spark_stream``, the SQL
  query over the view ``events``, ``from_streaming_query``).

Importing this package does not import pyspark; ``Pipeline.start`` does.
"""

from __future__ import annotations

from .._core import set_public_module
from ..files import DeadLetter as DeadLetter
from ..files import InputFile as InputFile
from ..files import Validator as Validator
from ._config import DEFAULT_MAX_RECORDS_PER_TRIGGER as DEFAULT_MAX_RECORDS_PER_TRIGGER
from ._config import PipelineConfig as PipelineConfig
from ._dead_letter import DeadLetterLimit as DeadLetterLimit
from ._dead_letter import DeadLetterWriter as DeadLetterWriter
from ._diagnostics import PipelineProgress as PipelineProgress
from ._diagnostics import PipelineResult as PipelineResult
from ._diagnostics import RouteStats as RouteStats
from ._errors import PipelineError as PipelineError
from ._errors import PipelineFailedError as PipelineFailedError
from ._errors import PipelineInterruptedError as PipelineInterruptedError
from ._errors import PipelineUsageError as PipelineUsageError
from ._errors import signal_exit_code as signal_exit_code
from ._errors import signal_name as signal_name
from ._follow import FollowedFiles as FollowedFiles
from ._follow import plan_file_partitions as plan_file_partitions
from ._inputs import InputPlan as InputPlan
from ._inputs import RemoteInput as RemoteInput
from ._inputs import default_input as default_input
from ._inputs import plan_inputs as plan_inputs
from ._output import ResultWriter as ResultWriter
from ._query import DEFAULT_KEYS as DEFAULT_KEYS
from ._query import DEFAULT_SQL as DEFAULT_SQL
from ._run import Pipeline as Pipeline
from ._schema import schema_from_ddl as schema_from_ddl
from ._sink import ResultSink as ResultSink
from ._sink import SinkStatistics as SinkStatistics
from ._source import DEFAULT_CHUNK_ROWS as DEFAULT_CHUNK_ROWS
from ._source import FileSource as FileSource
from ._source import SourceStatistics as SourceStatistics
from ._tables import TableSpec as TableSpec

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "DEFAULT_KEYS",
    "DEFAULT_MAX_RECORDS_PER_TRIGGER",
    "DEFAULT_SQL",
    "DeadLetter",
    "DeadLetterLimit",
    "DeadLetterWriter",
    "FileSource",
    "FollowedFiles",
    "InputFile",
    "InputPlan",
    "Pipeline",
    "PipelineConfig",
    "PipelineError",
    "PipelineFailedError",
    "PipelineInterruptedError",
    "PipelineProgress",
    "PipelineResult",
    "PipelineUsageError",
    "RemoteInput",
    "ResultSink",
    "ResultWriter",
    "RouteStats",
    "SinkStatistics",
    "SourceStatistics",
    "TableSpec",
    "Validator",
    "default_input",
    "plan_file_partitions",
    "plan_inputs",
    "schema_from_ddl",
    "signal_exit_code",
    "signal_name",
]

set_public_module(__name__, globals())
