"""Reading CSV, JSON Lines and Parquet files as records: one implementation for everything.

The planner of ``reactive_streams.spark.splits.file_splits``, the readers it opens on
Spark's executors, and the main job's reader on the driver are all built from this
package, so they agree on what a record is:

* ``CsvDialect``, ``RecordScanner``, ``index_records``: where each record of a text file
  begins and ends (RFC 4180 quoting, line breaks inside quoted values within a bound);
* ``InputFile``, ``open_reader``, ``header``, ``sample``: the readers of each format,
  from any record, in bounded chunks, with every malformed record as a ``DeadLetter``;
* ``Validator``, ``validate``, ``ConversionOptions``: conversion to a schema (flat and
  nested types), record by record where needed;
* ``infer_files_schema``, ``infer_file_schema``, ``infer_schema``, ``widen_type``: schema
  inference from a sample of every file, widened across files; ``guess_timestamp_format``:
  the ``strptime`` form of time text that inference does not read without one;
* ``FileSplit``, ``plan_splits``, ``SplitReader``: files planned once (records counted,
  record boundaries noted) and read from any offset, one row per record;
* ``FilePartitions``: the input's records cut into P contiguous, replayable partitions,
  each a publisher of record batches from any position (what ``reactive-streams serve``
  serves); made ``live``, it grows as ``FileFollower`` appends files that land later.

Needs pyarrow (the ``spark`` extra); ``import reactive_streams`` does not import this.
"""

from __future__ import annotations

from .._core import set_public_module
from ._convert import DEAD_LETTER_COLUMN as DEAD_LETTER_COLUMN
from ._convert import NULL_TEXT as NULL_TEXT
from ._convert import TIMESTAMP_FORMATS as TIMESTAMP_FORMATS
from ._convert import ConversionOptions as ConversionOptions
from ._convert import Converted as Converted
from ._convert import Validator as Validator
from ._convert import aligned_batch as aligned_batch
from ._convert import validate as validate
from ._dead_letter import DeadLetter as DeadLetter
from ._dead_letter import quoted as quoted
from ._follow import FileFollower as FileFollower
from ._formats import COMPRESSIONS as COMPRESSIONS
from ._formats import DEFAULT_ENCODING as DEFAULT_ENCODING
from ._formats import FORMATS as FORMATS
from ._formats import SAMPLE_BYTES as SAMPLE_BYTES
from ._formats import ChunkReader as ChunkReader
from ._formats import Compression as Compression
from ._formats import Format as Format
from ._formats import FormatError as FormatError
from ._formats import InputFile as InputFile
from ._formats import RawChunk as RawChunk
from ._formats import TableReader as TableReader
from ._formats import csv_header as csv_header
from ._formats import format_of as format_of
from ._formats import header as header
from ._formats import open_reader as open_reader
from ._formats import read_csv_header as read_csv_header
from ._formats import sample as sample
from ._identity import TEMPORARY_SUFFIXES as TEMPORARY_SUFFIXES
from ._identity import FileIdentity as FileIdentity
from ._infer import guess_timestamp_format as guess_timestamp_format
from ._infer import infer_file_schema as infer_file_schema
from ._infer import infer_files_schema as infer_files_schema
from ._infer import infer_schema as infer_schema
from ._infer import infer_type as infer_type
from ._infer import widen_type as widen_type
from ._listing import list_files as list_files
from ._partitions import DEFAULT_BATCH_ROWS as DEFAULT_BATCH_ROWS
from ._partitions import FilePartitions as FilePartitions
from ._partitions import PartitionPiece as PartitionPiece
from ._partitions import cut_partitions as cut_partitions
from ._records import BLOCK_BYTES as BLOCK_BYTES
from ._records import MAX_RECORD_BYTES as MAX_RECORD_BYTES
from ._records import Checkpoint as Checkpoint
from ._records import CsvDialect as CsvDialect
from ._records import RecordScanner as RecordScanner
from ._records import index_records as index_records
from ._splits import FileChangedError as FileChangedError
from ._splits import FileSplit as FileSplit
from ._splits import RefusedRecordError as RefusedRecordError
from ._splits import SplitReader as SplitReader
from ._splits import check_unchanged as check_unchanged
from ._splits import count_records as count_records
from ._splits import dead_letters_of as dead_letters_of
from ._splits import parquet_columns as parquet_columns
from ._splits import plan_splits as plan_splits
from ._splits import split_boundaries as split_boundaries

__all__ = [
    "BLOCK_BYTES",
    "COMPRESSIONS",
    "DEAD_LETTER_COLUMN",
    "DEFAULT_BATCH_ROWS",
    "DEFAULT_ENCODING",
    "FORMATS",
    "MAX_RECORD_BYTES",
    "NULL_TEXT",
    "SAMPLE_BYTES",
    "TEMPORARY_SUFFIXES",
    "TIMESTAMP_FORMATS",
    "Checkpoint",
    "ChunkReader",
    "Compression",
    "ConversionOptions",
    "Converted",
    "CsvDialect",
    "DeadLetter",
    "FileChangedError",
    "FileIdentity",
    "FilePartitions",
    "FileSplit",
    "Format",
    "FormatError",
    "InputFile",
    "PartitionPiece",
    "RawChunk",
    "RecordScanner",
    "RefusedRecordError",
    "SplitReader",
    "TableReader",
    "Validator",
    "aligned_batch",
    "check_unchanged",
    "count_records",
    "csv_header",
    "cut_partitions",
    "dead_letters_of",
    "format_of",
    "guess_timestamp_format",
    "header",
    "index_records",
    "infer_file_schema",
    "infer_files_schema",
    "infer_schema",
    "infer_type",
    "list_files",
    "open_reader",
    "parquet_columns",
    "plan_splits",
    "quoted",
    "read_csv_header",
    "sample",
    "split_boundaries",
    "validate",
    "widen_type",
]

set_public_module(__name__, globals())
