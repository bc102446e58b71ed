"""Per-row EVENTS columns derived from the raw ones without n-row string intermediates: KIND
from the category, DEVICE / STREAM of device events, DUR_NS without nulls, THREAD from the
thread-name metadata (dictionary columns built in code space, kineto_dict_codes)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.parsers.kineto import arrow_values as V
from tracekit.parsers.kineto.dict_codes import dict_codes, encode_codes, masked
from tracekit.parsers.kineto.nest import dict_mask
from tracekit.schema import Kind

PARAM_COMMS = "record_param_comms"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
_KIND_OF_CAT = {
    "kernel": Kind.KERNEL, "cpu_op": Kind.CPU_OP, "python_function": Kind.PYTHON,
    "user_annotation": Kind.ANNOTATION, "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "gpu_memcpy": Kind.MEMCPY, "gpu_memset": Kind.MEMSET, "cuda_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.RUNTIME, "Kernel": Kind.KERNEL, "Runtime": Kind.RUNTIME,
    "Memcpy": Kind.MEMCPY, "Memset": Kind.MEMSET,
}


def _kind(cat: str | None) -> str:
    return _KIND_OF_CAT.get(cat or "", Kind.OTHER)


def kinds(cat: pa.DictionaryArray, name: pa.DictionaryArray) -> pa.DictionaryArray:
    """KIND from the category (record_param_comms: a comm op), in code space."""
    values = [_kind(v) for v in cat.dictionary.to_pylist()]
    codes = dict_codes(cat)
    codes = np.where(codes < 0, len(values), codes)  # a null category: other
    codes[dict_mask(name, (PARAM_COMMS,))] = len(values) + 1
    return encode_codes(codes, [*values, Kind.OTHER, Kind.COMM_OP])


def on_gpu(col: pa.Array, gpu: np.ndarray, dtype: type, type_: pa.DataType) -> pa.Array:
    """``col`` (int64) on the rows of device events, null elsewhere, as ``type_``."""
    valid = _valid_on(col, gpu)
    filled = V.numpy(V.fill_null(col, 0))
    values: np.ndarray = np.asarray(filled, dtype=dtype)
    return masked(values, valid, type_)


def shared_on_gpu(col: pa.Array, gpu: np.ndarray) -> pa.Array:
    """``col`` on the rows of device events, null elsewhere, over ``col``'s own values
    buffer (only a new validity bitmap)."""
    if col.offset:
        return on_gpu(col, gpu, np.int64, pa.int64())
    valid = _valid_on(col, gpu)
    bitmap = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(col.type, len(col), [bitmap, col.buffers()[1]])


def _valid_on(col: pa.Array, gpu: np.ndarray) -> np.ndarray:
    """Device rows where ``col`` has a value (a column without nulls: the device rows)."""
    return gpu if col.null_count == 0 else gpu & V.numpy(col.is_valid())


def no_nulls(col: pa.Array) -> pa.Array:
    """DUR_NS: nulls become 0 (no copy when there is none)."""
    return col if col.null_count == 0 else V.fill_null(col, 0)


def thread_column(pid: pa.Array, tid: pa.Array, threads: Mapping[tuple, str]) -> pa.Array:
    """THREAD of every row: the name of its (pid, tid), matched through one int64 key
    (pid + 1) << 32 | (tid + 1) when both fit in 31 bits, else one comparison per thread."""
    n = len(pid)
    keys = [k for k in threads if isinstance(k[0], int) and isinstance(k[1], int)]
    if not keys or not n:
        return pa.nulls(n, pa.string())
    labels = [threads[k] for k in keys]
    lo, hi = _bounds(pid, tid)
    if lo >= -1 and hi < 1 << 31 and all(0 <= k[0] < 1 << 31 and 0 <= k[1] < 1 << 31
                                         for k in keys):
        row_key = _row_key(pid, tid)
        key = V.ints([((p + 1) << 32) | (t + 1) for p, t in keys], pa.int64())
        found = pc.index_in(row_key, value_set=key)
        del row_key
        idx = np.asarray(V.numpy(V.fill_null(found, -1)), np.int32)
        return encode_codes(idx, labels)
    p = np.asarray(V.numpy(V.fill_null(pid, -1)), dtype=np.int64)
    t = np.asarray(V.numpy(V.fill_null(tid, -1)), dtype=np.int64)
    idx = np.full(n, -1, dtype=np.int32)
    for k, (kp, kt) in enumerate(keys):
        idx[(p == kp) & (t == kt)] = k
    return encode_codes(idx, labels)


def _bounds(pid: pa.Array, tid: pa.Array) -> tuple[int, int]:
    """The least and greatest id of both columns (a null-only column counts as 0)."""
    if _plain_int64(pid) and _plain_int64(tid):  # numpy's min / max: a third of Arrow's
        p, t = V.numpy(pid), V.numpy(tid)
        return int(min(p.min(), t.min())), int(max(p.max(), t.max()))
    bounds = [pc.min_max(pid), pc.min_max(tid)]
    return (min(b["min"].as_py() or 0 for b in bounds),
            max(b["max"].as_py() or 0 for b in bounds))


def _plain_int64(col: pa.Array) -> bool:
    return len(col) > 0 and col.null_count == 0 and col.type == pa.int64()


def _row_key(pid: pa.Array, tid: pa.Array) -> pa.Array:
    """(pid + 1) << 32 | (tid + 1) of every row (null where either is), for ids in
    [-1, 2**31): in numpy over the values when neither has a null (one fresh int64 array,
    where Arrow compute allocates four)."""
    if not (_plain_int64(pid) and _plain_int64(tid)):
        one, bits = V.scalar(1, pa.int64()), V.scalar(32, pa.int64())
        return pc.bit_wise_or(pc.shift_left(pc.add(pid, one), bits), pc.add(tid, one))
    key = V.numpy(pid) << 32
    key += V.numpy(tid)
    key += (1 << 32) + 1  # both + 1: tid + 1 < 2**32 does not carry into the pid bits
    return V.from_numpy(key)
