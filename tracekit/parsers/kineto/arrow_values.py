"""Arrow arrays and scalars made from Python and numpy values without ``pa.array`` and
``pa.scalar``. Those ask pyarrow's pandas shim whether a value is a pandas object, and the
first question imports pandas (about 0.3 s and 40 MiB of RSS on the benchmark machine, in
the middle of the load of a large rank), which reading a Kineto file never needs; so do
compute calls given a Python scalar or a numpy array, and ``take`` of a numpy array.

Each helper gives the array ``pa.array`` gives for the same values and type. Values that
these builders do not take as they are (an int out of range, a string that is not one)
go to ``pa.array`` itself, which then raises what it always raised.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def from_numpy(values: np.ndarray, type_: pa.DataType | None = None) -> pa.Array:
    """A 1-d numpy array of a fixed-width integer or float type as an Arrow array without
    nulls (``pa.array(values, type_)``), over the same memory when it is contiguous."""
    values = np.ascontiguousarray(values)
    if values.dtype == np.bool_:
        return bools(values)
    t = pa.from_numpy_dtype(values.dtype) if type_ is None else type_
    if t.bit_width != 8 * values.dtype.itemsize:
        values = values.astype(_dtype(t))
    return pa.Array.from_buffers(t, len(values), [None, pa.py_buffer(values)])


def bools(mask: np.ndarray) -> pa.BooleanArray:
    """A numpy bool array as an Arrow boolean array without nulls."""
    bits = np.packbits(np.asarray(mask, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(mask), [None, pa.py_buffer(bits)])


def _validity(values: Sequence[Any]) -> tuple[pa.Buffer | None, int]:
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    nulls = len(values) - int(valid.sum())
    if not nulls:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


def strings(values: Sequence[str | None]) -> pa.StringArray:
    """``pa.array(values, pa.string())`` (None: null)."""
    try:
        data = [b"" if v is None else v.encode() for v in values]
    except (AttributeError, UnicodeError):
        return pa.array(values, pa.string())
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, data), dtype=np.int64, count=len(data)), out=offsets[1:])
    if offsets[-1] >= 1 << 31:
        return pa.array(values, pa.string())
    validity, nulls = _validity(values)
    return pa.StringArray.from_buffers(len(data), pa.py_buffer(offsets.astype(np.int32)),
                                       pa.py_buffer(b"".join(data)), validity, nulls)


def _dtype(type_: pa.DataType) -> np.dtype:
    kind = "u" if pa.types.is_unsigned_integer(type_) else "i"
    return np.dtype(f"{kind}{type_.bit_width // 8}")


def ints(values: Sequence[int | None], type_: pa.DataType) -> pa.Array:
    """``pa.array(values, type_)`` for an integer type (None: null)."""
    if any(isinstance(v, bool) or not (v is None or isinstance(v, int)) for v in values):
        return pa.array(values, type_)
    try:
        data = np.array([0 if v is None else v for v in values], dtype=_dtype(type_))
    except OverflowError:
        return pa.array(values, type_)
    validity, nulls = _validity(values)
    return pa.Array.from_buffers(type_, len(data), [validity, pa.py_buffer(data)], nulls)


def int_lists(values: Sequence[Sequence[int] | None], type_: pa.ListType) -> pa.Array:
    """``pa.array(values, type_)`` for a list of integers (None: a null list)."""
    if any(v is not None and not isinstance(v, list | tuple) for v in values):
        return pa.array(values, type_)
    lengths = np.fromiter((0 if v is None else len(v) for v in values), dtype=np.int64,
                          count=len(values))
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= 1 << 31:
        return pa.array(values, type_)
    items = [x for v in values if v is not None for x in v]
    if None in items:
        return pa.array(values, type_)
    child = ints(items, type_.value_type)
    validity, nulls = _validity(values)
    return pa.ListArray.from_buffers(type_, len(values), [
        validity, pa.py_buffer(offsets.astype(np.int32))], null_count=nulls, children=[child])


def array(values: Sequence[Any], type_: pa.DataType) -> pa.Array:
    """``pa.array(values, type_)`` for strings, integers and lists of integers (other
    types: ``pa.array`` itself)."""
    if pa.types.is_string(type_):
        return strings(values)
    if pa.types.is_integer(type_):
        return ints(values, type_)
    if pa.types.is_list(type_) and pa.types.is_integer(type_.value_type):
        return int_lists(values, type_)
    return pa.array(values, type_)


@cache
def scalar(value: Any, type_: pa.DataType) -> pa.Scalar:
    """``pa.scalar(value, type_)`` for None, a bool, an int or a string."""
    if value is None:
        return pa.nulls(1, type_)[0]
    if pa.types.is_boolean(type_):
        return bools(np.array([bool(value)]))[0]
    return array([value], type_)[0]


def fill_null(values: pa.Array | pa.ChunkedArray, value: Any) -> pa.Array | pa.ChunkedArray:
    """``pc.fill_null(values, value)`` with a Python ``value``."""
    return pc.fill_null(values, scalar(value, values.type))


def numpy(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``values.to_numpy(zero_copy_only=False)`` (and ``np.asarray(values)``), which starts
    pyarrow's pandas conversion (and imports pandas): read from the buffers for an integer,
    float or boolean array without nulls (a read-only view of the values, a fresh bool
    array, as to_numpy gives them); any other array through to_numpy itself."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    t, n, off = arr.type, len(arr), arr.offset
    if arr.null_count == 0 and n:
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            dtype = np.dtype(t.to_pandas_dtype())
            view = np.frombuffer(arr.buffers()[1], dtype=dtype, count=off + n)[off:]
            view.flags.writeable = False
            return view
        if pa.types.is_boolean(t):
            bits = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
            return np.unpackbits(bits, count=off + n, bitorder="little").view(bool)[off:]
    return arr.to_numpy(zero_copy_only=False)


def from_rows(rows: Sequence[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema=schema)`` (a key a row lacks: null)."""
    return pa.Table.from_arrays(
        [array([r.get(f.name) for r in rows], f.type) for f in schema], schema=schema)
