"""Columns of EVENTS that are mostly or entirely null, spread from a small side table over
all rows with as little fresh memory as possible, and the release of freed memory between
the steps of building EVENTS (the peak RSS of a parse is set there)."""

from __future__ import annotations

import ctypes
import mmap
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit.parsers.kineto import arrow_values as V
from tracekit.parsers.kineto.dict_codes import masked
from tracekit.parsers.kineto.nest import codes


def release_memory(rows: int | None = None) -> None:
    """Give the memory freed so far back to the OS: the Arrow pool's cached pages, and the
    heap that decoded Python objects and numpy temporaries used (glibc only): malloc keeps
    it, and it would count in the peak RSS of everything that follows. ``rows``: the size of
    the file's table, when known; below SMALL_ROWS there is too little to give back
    for the cost of a heap walk (which grows with the process's heap, not with the file)."""
    if rows is not None and rows < SMALL_ROWS:
        return
    pa.default_memory_pool().release_unused()
    libc = c_library()
    if libc is not None:
        with suppress(AttributeError):  # not glibc: nothing to do
            libc.malloc_trim(0)


@cache
def c_library() -> ctypes.CDLL | None:
    """The C library, loaded once (a fresh CDLL costs about 0.1 ms, per small file)."""
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


# a file's table below this many rows is small: the fixed cost of its steps is the calls, so
# the heap is not trimmed and the side columns are spread in one take
SMALL_ROWS = 1 << 16
_M_MMAP_THRESHOLD = -3  # glibc mallopt parameter
LARGE_BLOCK = 1 << 20  # blocks from this size on get pages of their own (mmap)
_LEAN_LOCK = threading.Lock()
_lean: dict[str, Any] = {"depth": 0}


@contextmanager
def lean_memory() -> Iterator[None]:
    """Allocation policy while a file is parsed: Arrow allocates through the system
    allocator (its default pool caches freed pages), and glibc gives every block of
    LARGE_BLOCK bytes or more pages of its own, returned to the OS when freed (its default
    threshold grows with the blocks freed, so that later n-row temporaries come from a heap
    that does not shrink). Measured on the 500 MB benchmark rank (peak RSS, load time): Arrow's
    mimalloc and glibc's defaults 512 MB, 2.5-2.9 s; this policy 501-503 MB, 2.4-2.6 s; with
    256 KiB instead of 1 MiB 495 MB but 2.9-3.3 s (fresh pages for every mid-sized block). The
    previous Arrow pool is restored on exit; the glibc threshold stays set (glibc has no
    getter)."""
    with _LEAN_LOCK:
        if not _lean["depth"]:  # the outermost parse (threads may parse files concurrently)
            libc = c_library()
            if libc is not None:
                with suppress(AttributeError):
                    libc.mallopt(_M_MMAP_THRESHOLD, LARGE_BLOCK)
            _lean["previous"] = pa.default_memory_pool()
            pa.set_memory_pool(pa.system_memory_pool())
        _lean["depth"] += 1
    try:
        yield
    finally:
        with _LEAN_LOCK:
            _lean["depth"] -= 1
            if not _lean["depth"]:
                pa.set_memory_pool(_lean.pop("previous"))


def _zero_buffer(nbytes: int) -> pa.Buffer:
    """``nbytes`` zero bytes in a fresh anonymous mapping: the OS maps its pages lazily, so
    pages that are only read (or never) cost no RSS (a heap block would be cleared, and
    count in full)."""
    flags = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
    if not flags:  # not POSIX: calloc'd memory is the next best thing
        return pa.py_buffer(np.zeros(max(nbytes, 1), dtype=np.uint8))
    return pa.py_buffer(mmap.mmap(-1, max(nbytes, 1), flags=flags))


def zeros(n: int, type_: pa.DataType) -> pa.Array:
    """``n`` zeros of a fixed-width type over a lazily mapped zero buffer."""
    return pa.Array.from_buffers(type_, n, [None, _zero_buffer(n * type_.bit_width // 8)])


def all_null(n: int, type_: pa.DataType) -> pa.Array | None:
    """An all-null array of a primitive or list type over one lazily mapped zero buffer
    (validity, values and list offsets all read zeros); None for other types."""
    if pa.types.is_list(type_):
        zero = _zero_buffer(4 * (n + 1))
        return pa.ListArray.from_buffers(type_, n, [zero, zero], null_count=n,
                                         children=[V.array([], type_.value_type)])
    if pa.types.is_integer(type_) or pa.types.is_floating(type_):
        zero = _zero_buffer(n * type_.bit_width // 8)
        return pa.Array.from_buffers(type_, n, [zero, zero], null_count=n)
    return None


def spread(col: pa.ChunkedArray, take: pa.Array, keep_strings: bool) -> pa.Array:
    """A side-table column spread over all rows (``take``); a column with no value at all
    becomes nulls over a shared zero buffer instead of n freshly written slots."""
    if col.null_count == len(col):
        nulls = all_null(len(take), col.type)
        if nulls is not None:
            return nulls
    return (col if keep_strings else _encoded(col)).take(take)


class Holders:
    """The rows of a file that have a side record (``use`` >= 0) and that record, found once
    and shared by every side column spread over the file: a mostly-null column is then a
    zeroed buffer with the few held rows scattered in (about 3% of the rows of a large
    rank), instead of a gather over all rows."""

    def __init__(self, take: pa.Array, use: np.ndarray, held: np.ndarray | None = None) -> None:
        self.rows = np.flatnonzero(use >= 0 if held is None else held)
        self.rec = use[self.rows]
        self.n = len(use)
        self.bitmap = take.buffers()[0] if take.offset == 0 else None
        self.shared = take.offset == 0
        self._validity: dict[bytes, pa.Buffer | None] = {}

    def validity(self, side_valid: np.ndarray) -> pa.Buffer | None:
        """The validity bitmap of a column whose side values are valid where ``side_valid``:
        ``take``'s bitmap with the bits of the held rows whose record is null cleared,
        built once per null pattern (the columns of one record source share it)."""
        key = np.packbits(side_valid).tobytes()
        if key in self._validity:
            return self._validity[key]
        lost = self.rows[~side_valid[self.rec]]
        if not lost.size:
            out = self.bitmap
        else:
            if self.bitmap is None:
                bits = np.full((self.n + 7) // 8, 0xFF, dtype=np.uint8)
                tail = self.n % 8
                if tail:  # packbits pads the last byte with zeros
                    bits[-1] = (1 << tail) - 1
            else:
                bits = np.frombuffer(self.bitmap, dtype=np.uint8,
                                     count=(self.n + 7) // 8).copy()
            np.bitwise_and.at(bits, lost >> 3,
                              np.invert(np.left_shift(1, lost & 7).astype(np.uint8)))
            out = pa.py_buffer(bits)
        self._validity[key] = out
        return out


def spread_fast(col: pa.ChunkedArray, take: pa.Array, use: np.ndarray,
                holders: Holders | None = None) -> pa.Array:
    """``_spread`` (strings dictionary-encoded) with numpy indexing for integer and string
    columns: the same values as Arrow's take, in about a third of its time. With
    ``holders`` (the same ``take`` / ``use``), the held rows are scattered into a fresh
    buffer instead of gathering all rows (null slots hold the same bytes either way)."""
    if holders is not None and holders.shared and col.null_count < len(col) \
            and pa.types.is_list(col.type):
        listed = _scattered_list(col.combine_chunks(), holders)
        if listed is not None:
            return listed
    if col.null_count == len(col) or not (pa.types.is_integer(col.type)
                                          or pa.types.is_string(col.type)):
        return spread(col, take, keep_strings=False)
    arr = _encoded(col)
    if holders is not None and holders.shared:
        return _scattered(arr, holders)
    # a side column without nulls is valid exactly where a row has a record: the validity
    # bitmap of ``take`` (shared, not rebuilt)
    shared = arr.null_count == 0 and take.offset == 0
    if pa.types.is_dictionary(arr.type):
        row_code = np.append(codes(arr), -1).astype(np.int32)[use]  # -1 reads the last -1
        indices = (pa.Array.from_buffers(pa.int32(), len(use), [take.buffers()[0],
                                                                 pa.py_buffer(row_code)])
                   if shared else masked(row_code, row_code >= 0, pa.int32()))
        return pa.DictionaryArray.from_arrays(indices, arr.dictionary)
    values = V.numpy(V.fill_null(arr, 0))
    values = np.append(values, np.zeros(1, values.dtype))[use]  # same dtype (uint64 too)
    if shared:
        return pa.Array.from_buffers(arr.type, len(use), [take.buffers()[0],
                                                          pa.py_buffer(values)])
    valid = np.append(V.numpy(pc.is_valid(arr)), False)[use]
    return masked(values, valid, arr.type)


def _scattered(arr: pa.Array, holders: Holders) -> pa.Array:
    """``spread_fast`` by scattering the held rows: dictionary codes over -1 (what the
    gather leaves in null slots), integers over 0."""
    side_valid = (np.ones(len(arr), dtype=bool) if arr.null_count == 0
                  else V.numpy(pc.is_valid(arr)))
    bitmap = holders.validity(side_valid)
    if pa.types.is_dictionary(arr.type):
        row_code = np.full(holders.n, -1, dtype=np.int32)
        row_code[holders.rows] = codes(arr)[holders.rec]
        indices = pa.Array.from_buffers(pa.int32(), holders.n,
                                        [bitmap, pa.py_buffer(row_code)])
        return pa.DictionaryArray.from_arrays(indices, arr.dictionary)
    values = V.numpy(V.fill_null(arr, 0))
    out = np.zeros(holders.n, dtype=values.dtype)
    out[holders.rows] = values[holders.rec]
    return pa.Array.from_buffers(arr.type, holders.n, [bitmap, pa.py_buffer(out)])


def _scattered_list(arr: pa.ListArray, holders: Holders) -> pa.Array | None:
    """A list column of integers without null items spread by scattering the held rows'
    list lengths (offsets by a cumulative sum) and gathering their items; None for other
    lists (Arrow's take spreads them)."""
    items = arr.values
    if not pa.types.is_integer(items.type) or items.null_count or arr.offset:
        return None
    side_valid = (np.ones(len(arr), dtype=bool) if arr.null_count == 0
                  else V.numpy(pc.is_valid(arr)))
    side_offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1)
    lengths = np.where(side_valid, np.diff(side_offsets), 0).astype(np.int32)
    held_len = lengths[holders.rec]
    cum = np.zeros(held_len.size + 1, dtype=np.int32)
    np.cumsum(held_len, out=cum[1:])
    # offsets: a step function, constant between held rows (a repeat costs half a cumsum
    # over all rows)
    gaps = np.diff(np.concatenate(([0], holders.rows + 1, [holders.n + 1])))
    offsets = np.repeat(cum, gaps)
    keep = held_len > 0
    # item j of the output comes from side item start(row) + (j - offset(row))
    shift = side_offsets[:-1][holders.rec[keep]] - cum[:-1][keep]
    src = np.repeat(shift.astype(np.int64), held_len[keep]) + np.arange(cum[-1], dtype=np.int64)
    values = V.numpy(items)[src]
    child = pa.Array.from_buffers(items.type, len(values), [None, pa.py_buffer(values)])
    return pa.ListArray.from_buffers(arr.type, holders.n,
                                     [holders.validity(side_valid), pa.py_buffer(offsets)],
                                     children=[child])


def spread_small(side: pa.Table, keys: list[str], take: pa.Array) -> dict[str, pa.Array]:
    """``spread_fast`` of the ``keys`` columns for a small table: the same values in one
    Arrow take of all the columns (a small rank file's fixed cost is the calls, not the
    rows)."""
    taken = pa.table([_encoded(side.column(k)) for k in keys], names=keys).take(take)
    return {k: _single(taken.column(k)) for k in keys}


def _single(col: pa.ChunkedArray) -> pa.Array:
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _encoded(col: pa.ChunkedArray) -> pa.Array:
    """Strings of the (small) side table dictionary-encoded before they are spread over all
    rows: the spread copy is then 4 bytes per row, and EVENTS needs dictionaries anyway."""
    arr = col.combine_chunks()
    return arr.dictionary_encode() if pa.types.is_string(arr.type) else arr
