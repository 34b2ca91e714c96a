"""Arrow constants built from buffers, so that the executors' Python workers never import pandas.

pyarrow turns a Python value into Arrow (``pa.scalar``, ``pa.array``, ``pa.repeat`` of a
Python value, a Python value passed to a compute function) only after asking whether the
value is a pandas object, and asking imports pandas when it is installed. That import
costs each process that pays it about 0.2 to 0.45 s of CPU. The executors' Python workers
(``--read-on executors``) otherwise never need pandas, and on a machine whose cores Spark
already keeps busy those seconds add to the run's wall time.

The constants here are built with ``pa.Array.from_buffers`` and ``pa.nulls``, which take no
Python values, and ``tests/pipeline/test_no_pandas.py`` checks that reading and validating
Parquet and CSV files without dead letters imports no pandas. Two paths still build Arrow
from Python values and may import it: a chunk with a dead letter (its rows are rebuilt from
Python lists) and JSON Lines (each record is parsed to a Python ``dict``).
"""

from __future__ import annotations

from array import array
from itertools import accumulate
from typing import TYPE_CHECKING

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "bool_scalar",
    "int8_scalar",
    "int64_range",
    "null_scalar",
    "string_array",
    "string_scalar",
]


def string_array(values: Sequence[str]) -> pa.Array:
    """A ``string`` array of ``values`` (UTF-8, no nulls).

    Raises:
        OverflowError: the text is 2 GiB or more (``string`` has 32-bit offsets).
    """
    data = [value.encode() for value in values]
    offsets = [0, *accumulate(len(item) for item in data)]
    offsets_buffer = pa.py_buffer(b"".join(o.to_bytes(4, "little", signed=True) for o in offsets))
    return pa.Array.from_buffers(
        pa.string(), len(data), [None, offsets_buffer, pa.py_buffer(b"".join(data))]
    )


def string_scalar(value: str) -> pa.Scalar:
    """A ``string`` scalar."""
    return string_array([value])[0]


def int8_scalar(value: int) -> pa.Scalar:
    """An ``int8`` scalar; ``value`` in -128..127.

    Raises:
        OverflowError: ``value`` does not fit in 8 bits.
    """
    return pa.Array.from_buffers(
        pa.int8(), 1, [None, pa.py_buffer(value.to_bytes(1, "little", signed=True))]
    )[0]


def int64_range(start: int, stop: int) -> pa.Array:
    """An ``int64`` array of ``start, start + 1, ..., stop - 1`` (empty when ``stop <= start``).

    Raises:
        OverflowError: a value does not fit in 64 bits.
    """
    values = array("q", range(start, stop))  # 8-byte integers in native order, as Arrow's
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def bool_scalar(value: bool) -> pa.Scalar:
    """A ``bool`` scalar."""
    return pa.Array.from_buffers(pa.bool_(), 1, [None, pa.py_buffer(bytes([int(value)]))])[0]


def null_scalar(data_type: pa.DataType) -> pa.Scalar:
    """A null scalar of ``data_type``."""
    return pa.nulls(1, data_type)[0]
