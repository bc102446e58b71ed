"""Row keys in integer code space, for work that runs once per distinct combination.

The engine decides many things once per distinct tuple of a few columns (evidence, call site,
op) and spreads the answer back over the rows. Building a Python tuple per row for that costs
more than the decision; these helpers factorize each column once and combine the codes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa


def row_codes(columns: Sequence[Any]) -> np.ndarray:
    """One code per row, equal where every column is equal (missing values equal each other),
    numbered 0.. in order of first appearance. Values must be hashable."""
    key, span = equal_codes(columns)
    return first_appearance(key, span)


def equal_codes(columns: Sequence[Any]) -> tuple[np.ndarray, int]:
    """(one code per row, equal where every column is equal, as ``row_codes``; an exclusive
    bound on the codes), numbered in no particular order: for keys that are only compared,
    sorted or matched, the renumbering pass of ``row_codes`` is saved."""
    key: np.ndarray | None = None
    span = 1  # key < span
    for column in columns:
        if not isinstance(column, pd.Series | np.ndarray):
            column = objects(column)  # a list (of tuples, say): one element per row
        codes, width = _codes(column)
        if key is None:
            key, span = codes, width
            continue
        if span * width >= _MAX_KEY:  # renumber before the product could overflow
            key = pd.factorize(key)[0].astype(np.int64)
            span = int(key.max()) + 1 if key.size else 1
        # in place: every key array here is this function's own (no row-sized temporary)
        key *= width
        key += codes
        span *= width
    if key is None:
        return np.zeros(0, dtype=np.int64), 1
    return key, span


def first_appearance(key: np.ndarray, span: int) -> np.ndarray:
    """``pd.factorize(key)[0]`` for keys in 0..span-1: where the span is small against the
    rows, each key's first row is found by a scatter-min and the keys numbered in that order
    (no hash table). From a span of two slots per row on, hashing is the quicker (measured
    on 591k rows: the scatter-min 12-31 ms at span 2n and 22-42 ms at 4n, sorted or random
    keys, against 10-15 ms hashed; below n it wins)."""
    n = len(key)
    if span > 2 * n:
        return pd.factorize(key)[0].astype(np.int64)
    first = np.full(span, n, dtype=np.int64)
    np.minimum.at(first, key, np.arange(n, dtype=np.int64))
    present = np.flatnonzero(first < n)
    number = np.empty(span, dtype=np.int64)
    number[present[np.argsort(first[present])]] = np.arange(len(present), dtype=np.int64)
    return number[key]


_MAX_KEY = 1 << 62


def _codes(column: pd.Series | np.ndarray) -> tuple[np.ndarray, int]:
    """Codes 0.. of one column (0: missing) and how many there can be."""
    values = column.to_numpy() if isinstance(column, pd.Series) else column
    if values.dtype.kind in "iu" and values.size:
        low, high = int(values.min()), int(values.max())
        if high - low < 4 * values.size:  # a dense range: the offset is the code, no hashing
            # one pass each (an astype then an offset wrote two row-sized arrays)
            return (np.subtract(values, low - 1, dtype=np.int64, casting="unsafe"),
                    high - low + 2)
    codes, uniques = factorize(column)
    # missing (-1) becomes 0
    return np.add(codes, 1, dtype=np.int64, casting="unsafe"), len(uniques) + 1


def factorize(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(values)`` (codes, -1 where missing; distinct values in order of first
    appearance), quicker on text. An object array is coded by reference first (the rows'
    pointers, as integers: no string hashed or compared per row; the engine's text columns
    share one object per distinct value), then the few distinct objects by value."""
    if isinstance(values, pd.Series | pd.Index) and values.dtype == object:
        values = values.to_numpy()
    if isinstance(values, np.ndarray) and values.dtype == object and values.ndim == 1 \
            and len(values) >= _BY_REFERENCE:
        return _by_reference(values)
    return _by_value(values)


_BY_REFERENCE = 64


def _by_reference(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``factorize`` of an object array: its pointers coded (in order of first appearance,
    as the values' codes are), then the first object of each pointer by value; equal values
    held by distinct objects meet in that second step."""
    ref_codes, first = _reference_codes(array)
    codes, uniques = _by_value(array[first])
    if np.array_equal(codes, np.arange(len(first))):  # distinct objects, distinct values
        return ref_codes, uniques
    return codes[ref_codes], uniques


def missing(values: Any) -> np.ndarray:
    """``pd.isna(values)`` of one column (Series or 1-D array) as a bool array, quicker on
    objects: each distinct object (by reference) is tested once, not every row."""
    array = values.to_numpy() if isinstance(values, pd.Series | pd.Index) else values
    if not isinstance(array, np.ndarray) or array.dtype != object or array.ndim != 1 \
            or len(array) < _BY_REFERENCE:
        return np.asarray(pd.isna(array), dtype=bool)
    ref_codes, first = _reference_codes(array)
    return np.asarray(pd.isna(array[first]), dtype=bool)[ref_codes]


def _reference_codes(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(code of each row's object by reference, numbered in order of first appearance;
    the first row of each code)."""
    refs = np.frombuffer(np.ascontiguousarray(array), dtype=np.intp)
    peeled = _peeled(refs)
    if peeled is not None:
        return peeled
    ref_codes = pd.factorize(refs)[0]
    return ref_codes, first_rows(ref_codes)


_PEEL = 4  # at most this many distinct objects are coded by comparisons instead of hashing


def _peeled(refs: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``_reference_codes`` of pointers with at most ``_PEEL`` distinct values, one equality
    test over the rows per value (a column of one or two shared objects, the usual case for
    the engine's metadata columns: 2.1-2.6 ms instead of 4.8-5.9 ms per 591k-row evidence
    column of r8x40, measured); None where a sample of the rows or the rows themselves hold
    more."""
    n = len(refs)
    if len(np.unique(refs[::max(1, n // 512)])) > _PEEL:
        return None
    # summed in int8 (not written through masks: 3x slower; an int64 sum of int8 terms
    # runs through a casting loop, 7x slower), widened once
    codes = np.zeros(n, dtype=np.int8)
    open_rows = refs != refs[0]
    first = [0]
    while open_rows.any():
        if len(first) == _PEEL:
            return None
        at = int(np.argmax(open_rows))  # the first row not coded yet
        same = refs == refs[at]
        codes += same.view(np.int8) * np.int8(len(first))
        open_rows &= ~same
        first.append(at)
    return codes.astype(np.int64), np.asarray(first, dtype=np.int64)


def _by_value(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(values)``; pandas hashes an object array without missing values as C
    strings, every row's bytes anew; one missing value sends it to the table that hashes the
    Python objects (their hash cached, equal references equal at once), so where the text is
    long (call sites, reasons) one is appended."""
    if isinstance(values, pd.Series | pd.Index) and isinstance(values.dtype, pd.StringDtype):
        # pandas' Arrow-backed str: hashed by pandas (in Arrow) as it is, not turned
        # into an object array of one Python string per row first
        codes, uniques = pd.factorize(values)
        return codes, np.asarray(uniques)
    array = values.to_numpy() if isinstance(values, pd.Series | pd.Index) else values
    if not isinstance(array, np.ndarray) or array.dtype != object or not _long_text(array):
        codes, uniques = pd.factorize(values)
        return codes, np.asarray(uniques)
    codes, uniques = pd.factorize(np.append(array, None))
    return codes[:-1], np.asarray(uniques, dtype=object)


def _long_text(array: np.ndarray) -> bool:
    """Whether a sample of ``array`` holds text long enough that hashing its bytes per row
    costs more than hashing the objects (short names and ops hash faster as bytes)."""
    step = max(1, len(array) // 16)
    return any(isinstance(v, str) and len(v) >= _LONG for v in array[::step].tolist())


_LONG = 24


def first_rows(codes: np.ndarray) -> np.ndarray:
    """Position of the first row of each code of ``row_codes`` (``np.unique``'s
    ``return_index``). Codes numbered in order of first appearance, as ``row_codes``
    numbers them, are read off their running maximum (no sort); other codes are sorted."""
    codes = np.asarray(codes)
    if codes.dtype.kind in "iu" and codes.size:
        top = np.maximum.accumulate(codes)
        rising = np.empty(codes.size, dtype=bool)
        rising[0] = True
        np.greater(top[1:], top[:-1], out=rising[1:])
        first = np.flatnonzero(rising)
        if codes[0] == 0 and np.array_equal(codes[first], np.arange(first.size)) \
                and codes.min() >= 0:
            return first
    return np.unique(codes, return_index=True)[1]


def objects(values: Sequence[Any], index: pd.Index | None = None) -> pd.Series:
    """An object-dtype Series of ``values`` (pandas would infer its Arrow ``str`` dtype,
    whose masked writes rebuild the array)."""
    arr = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        arr[i] = v  # element by element: tuples stay elements, not rows of a 2-D array
    return pd.Series(arr, index=index, dtype=object, copy=False)


def spread(values: Sequence[Any], codes: np.ndarray, index: pd.Index) -> pd.Series:
    """``values[code]`` for every row, as an object Series on ``index``."""
    return pd.Series(objects(values).to_numpy()[codes], index=index, dtype=object, copy=False)


def taken(frame: pd.DataFrame, columns: Sequence[str], at: np.ndarray) -> pd.DataFrame:
    """``frame[columns].take(at)`` column by column: pandas' take of a column selection first
    copies the selected columns whole (one block per dtype), then takes the rows."""
    return pd.DataFrame({c: frame[c].take(at) for c in columns}, index=frame.index[at],
                        copy=False)


def tuple_keys(lists: pd.Series) -> list[tuple[int, ...] | None]:
    """Each list-like value (numpy array, list, tuple) as a tuple of ints; None where missing
    or empty. Equal arrays share one tuple (a communicator's member list recurs on every row)."""
    memo: dict[tuple[str, bytes], tuple[int, ...]] = {}
    return [_tuple_key(v, memo) for v in lists.to_numpy()]


def _tuple_key(v: Any, memo: dict[tuple[str, bytes], tuple[int, ...]]) -> tuple[int, ...] | None:
    if v is None or isinstance(v, float) or not len(v):
        return None
    if isinstance(v, np.ndarray):
        raw = (v.dtype.str, v.tobytes())
        key = memo.get(raw)
        if key is None:
            key = memo[raw] = tuple(v.tolist())
        return key
    return tuple(int(r) for r in v)


def tuple_key_series(lists: pd.Series) -> pd.Series:
    """``objects(tuple_keys(lists), lists.index)``, looking only at the rows that hold a
    value, and once per distinct object (a launcher's member list is shared by the kernels
    it launched; most communication rows of a CUDA trace have none)."""
    values = lists.to_numpy()
    out = np.full(len(values), None, dtype=object)
    present = np.flatnonzero(~pd.isna(values)) if values.dtype == object else np.arange(0)
    memo: dict[tuple[str, bytes], tuple[int, ...]] = {}
    by_object: dict[int, tuple[int, ...] | None] = {}
    held = values[present].tolist()  # held: the ids below stay those of live objects
    keys = np.empty(len(held), dtype=object)
    for i, v in enumerate(held):
        key = by_object.get(id(v), _UNSEEN)
        if key is _UNSEEN:
            key = by_object[id(v)] = _tuple_key(v, memo)
        keys[i] = key
    out[present] = keys
    return pd.Series(out, index=lists.index, dtype=object, copy=False)


_UNSEEN: Any = object()


def list_codes(lists: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Each Arrow list of integers coded once: (one code per row, -1 where missing or empty;
    the distinct lists as tuples, in order of first appearance). Each row's values are seen
    as one binary value over the list's own buffer (no copy, no Python object per row),
    which Arrow's hash table codes chunk by chunk (a rank's part each): equal bytes are
    equal lists of one integer type."""
    chunks = lists.chunks if isinstance(lists, pa.ChunkedArray) else [lists]
    parts = [_chunk_codes(chunk) for chunk in chunks if len(chunk)]
    if not parts:
        return np.zeros(0, dtype=np.int64), []
    if any(part is None for part in parts):  # a null member: no byte image
        return _python_list_codes(lists)
    # the chunks' few distinct lists, coded once more across the chunks
    merged = pa.concat_arrays([d for _, d in parts]).dictionary_encode()
    to_global = merged.indices.to_numpy().astype(np.int64)
    out, base = [], 0
    for codes, distinct in parts:
        table = np.append(to_global[base:base + len(distinct)], -1)  # -1 takes -1
        out.append(table[codes])
        base += len(distinct)
    kind = lists.type.value_type.to_pandas_dtype()
    return np.concatenate(out), [tuple(np.frombuffer(v, dtype=kind).tolist())
                                 for v in merged.dictionary.to_pylist()]


def _chunk_codes(array: pa.Array) -> tuple[np.ndarray, pa.Array] | None:
    """``list_codes`` of one array, the distinct lists as their bytes (None: a null member)."""
    array = array.cast(pa.large_list(array.type.value_type))
    flat = array.values
    if flat.null_count:
        return None
    width = flat.type.bit_width // 8
    offsets = array.offsets.to_numpy().astype(np.int64)
    present = (offsets[1:] > offsets[:-1]) & array.is_valid().to_numpy(zero_copy_only=False)
    as_bytes = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(array),
        [None, pa.py_buffer((offsets + flat.offset) * width), flat.buffers()[1]])
    encoded = as_bytes.filter(pa.array(present)).dictionary_encode()
    codes = np.full(len(array), -1, dtype=np.int64)
    codes[present] = encoded.indices.to_numpy().astype(np.int64)
    return codes, encoded.dictionary


def _python_list_codes(lists: pa.Array | pa.ChunkedArray
                       ) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """``list_codes`` through a Python tuple per row (lists with null members)."""
    keys = tuple_keys(pd.Series(lists.to_pandas(), dtype=object))
    codes, distinct = pd.factorize(objects(keys))
    return codes.astype(np.int64), list(distinct)


def lane_time_keys(lanes: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, int]:
    """(lane, time) pairs as one integer that sorts by lane, then time, and the width of a
    lane (``key // width`` is the lane). Times are offset from the earliest, or replaced by
    their rank where lanes x time span would not fit in 62 bits."""
    if not times.size:
        return np.zeros(0, dtype=np.int64), 1
    low = int(times.min())
    width = int(times.max()) - low + 1
    key = lanes.astype(np.int64)  # the one row-sized array written, in place below
    if (int(key.max()) + 1) * width < _MAX_KEY:
        key *= width
        key -= low  # before the times: no intermediate beyond int64 (times near 2**61)
        key += times.astype(np.int64, copy=False)
        return key, width
    ranked = np.unique(times, return_inverse=True)[1].reshape(-1)
    width = int(ranked.max()) + 1
    key *= width
    key += ranked
    return key, width


def correlation_ids(values: np.ndarray) -> np.ndarray:
    """Correlation ids (no missing ones), as int64: an integer column with nulls is float64 in
    the engine's frames, and integer codes of a dense range need no hashing (``row_codes``).
    Float64 holds these ids exactly (below 2**53), so equal ids stay equal."""
    if values.dtype.kind == "f" and values.size and np.abs(values).max() < 2.0**53:
        return values.astype(np.int64)
    return values
