"""The accumulator's columns as the raw timed-event table of RawTrace, over its C memory
(Arrow buffers whose base is the Accumulator: no copy), the communication rows it read, and
the record_shapes side list."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pyarrow as pa

from tracekit import schema as S
from tracekit.parsers.kineto import arrow_values as V
from tracekit.parsers.kineto import native as A
from tracekit.parsers.kineto.accumulator import Accumulator
from tracekit.parsers.kineto.block_columns import COMM_TYPES, _any_prefix, _codes_matching
from tracekit.parsers.kineto.decode import COMM_FIELDS, RAW_IDX
from tracekit.parsers.kineto.dict_codes import dict_codes, masked
from tracekit.parsers.kineto.shape_ops import ShapeOps


def _buffer(ptr: int, nbytes: int, owner: Accumulator) -> pa.Buffer:
    """``nbytes`` of accumulator memory, kept alive by ``owner`` (no copy)."""
    if not ptr or nbytes <= 0:
        return pa.py_buffer(b"")
    return pa.foreign_buffer(ptr, nbytes, base=owner)


def timed_table(owner: Accumulator) -> tuple[pa.Table, pa.DictionaryArray]:
    """The raw timed-event table (EVENT_ID and the raw columns; DUR_NS without nulls: the
    accumulator writes 0 for a missing dur, as EVENTS wants), and its NAME column."""
    info = owner.info()
    n = info["rows"]
    ptrs = owner.arrays()
    i64 = dict(zip(A.ROW_INT64, ptrs, strict=False))
    i32 = dict(zip(A.ROW_INT32, ptrs[len(A.ROW_INT64):], strict=False))
    at = len(A.ROW_INT64) + len(A.ROW_INT32)
    valid = dict(zip(A.ROW_VALID, ptrs[at:], strict=False))
    dicts = ptrs[-4:]
    bitmap = (n + 7) // 8

    def ints(key: str) -> pa.Array:
        return pa.Array.from_buffers(pa.int64(), n, [
            _buffer(valid[key], bitmap, owner), _buffer(i64[key], 8 * n, owner)])

    def strings(key: str, k: int, size: int) -> pa.DictionaryArray:
        off_ptr, data_ptr = dicts[2 * k], dicts[2 * k + 1]
        if size:
            offsets = _buffer(off_ptr, 4 * (size + 1), owner)
            end = int(np.frombuffer(offsets, np.int32)[size])
        else:
            offsets, end = pa.py_buffer(np.zeros(1, np.int32)), 0
        values = pa.StringArray.from_buffers(size, offsets, _buffer(data_ptr, end, owner))
        codes = pa.Array.from_buffers(pa.int32(), n, [
            _buffer(valid[key], bitmap, owner), _buffer(i32[key], 4 * n, owner)])
        return pa.DictionaryArray.from_arrays(codes, values)

    name = strings("name", 0, info["names"])
    table = pa.table({
        S.EVENT_ID: pa.Array.from_buffers(pa.int64(), n, [
            None, _buffer(i64["event_id"], 8 * n, owner)]),
        S.NAME: name,
        S.CATEGORY: strings("cat", 1, info["cats"]),
        S.PID: ints("pid"),
        S.TID: ints("tid"),
        S.TS_NS: ints("ts"),
        # no validity: the accumulator writes 0 for a null dur, which EVENTS wants
        S.DUR_NS: pa.Array.from_buffers(pa.int64(), n, [None, _buffer(i64["dur"], 8 * n, owner)]),
        S.EXTERNAL_ID: ints("external_id"),
        S.CORRELATION: ints("correlation"),
        S.PY_ID: ints("py_id"),
        S.PY_PARENT_ID: ints("py_parent_id"),
    })
    return table, name


def comm_rows(owner: Accumulator) -> pa.Table | None:
    """The communication rows the accumulator read (RAW_IDX + COMM_FIELDS, as
    kineto_block_columns.comm_table types them), copied out of its memory; None when there
    is none."""
    n = owner.info()["comm_rows"]
    if not n:
        return None
    ptrs = owner.comm_arrays()
    k = len(COMM_FIELDS)
    strings = _strings(ptrs[-2], ptrs[-1], owner.info()["comm_strings"])
    cols: dict[str, pa.Array] = {RAW_IDX: masked(_copy(ptrs[0], ctypes.c_int64, n), None,
                                                 pa.int64())}
    for i, f in enumerate(COMM_FIELDS):
        values = _copy(ptrs[1 + i], ctypes.c_int64, n)
        has = _copy(ptrs[1 + k + i], ctypes.c_int8, n).astype(bool)
        kind = COMM_TYPES[f]
        if pa.types.is_string(kind):
            cols[f] = strings.take(masked(values.astype(np.int32), has, pa.int32()))
        else:
            cols[f] = masked(values.view(np.uint64) if kind == pa.uint64() else values, has,
                             kind)
    return pa.table(cols)


def _copy(ptr: int, ctype: Any, n: int) -> np.ndarray:
    arr = (ctype * n).from_address(ptr)
    return np.ctypeslib.as_array(arr).copy()


def _strings(off_ptr: int, data_ptr: int, size: int) -> pa.StringArray:
    """A copy of an accumulator dictionary's strings."""
    if not size:
        return V.strings([])
    offsets = _copy(off_ptr, ctypes.c_int32, size + 1)
    end = int(offsets[size])
    data = ctypes.string_at(data_ptr, end) if end else b""
    return pa.StringArray.from_buffers(size, pa.py_buffer(offsets), pa.py_buffer(data))


def shape_ops(table: pa.Table, name: pa.DictionaryArray,
              shapes: dict[int, dict[str, Any]]) -> ShapeOps:
    """Every timed c10d / gloo op with its record_shapes args (by row; an op without such
    args has an empty dict), as the piece path gives them."""
    rows = np.flatnonzero(_codes_matching(name, _any_prefix))
    if not rows.size:
        return ShapeOps()
    event_id = V.numpy(table.column(S.EVENT_ID).chunk(0))[rows]
    codes = dict_codes(name)[rows]  # never -1 here: a null name has no prefix
    return ShapeOps.by_name(event_id, codes, name.dictionary.to_pylist(), shapes, rows)
