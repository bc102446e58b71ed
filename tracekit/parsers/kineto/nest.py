"""Nesting on one thread: which event starts inside which (vectorised with searchsorted).

Used to carry communication metadata between the levels of one collective on the CPU side:
``c10d::allreduce_`` > ``record_param_comms`` > ``nccl:all_reduce`` (TRACE_FORMATS.md A.2).

Also the row-level helpers the assembly steps share: masks of dictionary values, int64
gathers that read validity bits in numpy (``ints_at``), lookups of the first row with an id
(``FirstIndex``: a table indexed by id when the ids are dense) and the launch of each
correlation id (``Launches``, built once per file for ``_link`` and the call sites).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.parsers.kineto import arrow_values as V
from tracekit.schema import Kind

_SMALL_DICT = 64  # dictionaries up to this size are matched in Python


def dict_mask(col: pa.Array | pa.ChunkedArray, values: Sequence[str]) -> np.ndarray:
    """numpy bool mask of the rows of a dictionary column whose value is one of ``values``
    (compared on the dictionary; nulls are False; no per-row strings are built)."""
    arr = one_chunk(col)
    if not pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_encode()
    if len(arr.dictionary) <= _SMALL_DICT:  # a set lookup costs less than a compute call
        wanted = set(values)
        hit = np.array([v in wanted for v in arr.dictionary.to_pylist()], dtype=bool)
    else:
        hit = V.numpy(V.fill_null(pc.is_in(arr.dictionary, V.strings(values)), False))
    return code_mask(codes(arr), hit)


def code_mask(row_codes: np.ndarray, hit: np.ndarray) -> np.ndarray:
    """Rows whose code is a hit: a few hit codes are compared (one pass each, cheaper than
    a lookup per row), more are looked up."""
    found = np.flatnonzero(hit)
    if found.size <= 3:
        mask = np.zeros(row_codes.size, dtype=bool)
        for code in found.tolist():
            mask |= row_codes == code
        return mask
    return np.take(np.append(hit, False), row_codes)  # code -1 reads the appended False


def codes(arr: pa.DictionaryArray) -> np.ndarray:
    """The dictionary codes of ``arr`` as numpy (-1 for null), without a copy when it has no
    null (usable as indices into a per-value table with one extra slot at the end)."""
    indices = arr.indices if arr.null_count == 0 else V.fill_null(arr.indices, -1)
    return V.numpy(indices)


def valid_mask(arr: pa.Array) -> np.ndarray:
    """numpy bool mask of the rows of ``arr`` that hold a value, unpacked from its validity
    bitmap (a conversion of ``is_valid`` builds an Arrow boolean array first)."""
    n = len(arr)
    bitmap = arr.buffers()[0]
    if not arr.null_count or bitmap is None:
        return np.full(n, arr.null_count == 0, dtype=bool)
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), count=arr.offset + n,
                         bitorder="little")
    return bits[arr.offset:].view(bool)


def filled_ints(col: pa.ChunkedArray | pa.Array, fill: int = -1) -> np.ndarray:
    """int64 numpy values of an int64 column with nulls as ``fill`` (read-only; no copy
    when it has no null): a column gathered from several times is filled once, and each
    gather from it costs a fifth of one that reads validity bits per row."""
    arr = one_chunk(col)
    if arr.type != pa.int64() or not len(arr):
        return np.asarray(V.numpy(V.fill_null(arr, fill)),
                          dtype=np.int64)
    off = arr.offset
    values = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=off + len(arr))[off:]
    if not arr.null_count:
        return values
    valid = np.unpackbits(np.frombuffer(arr.buffers()[0], dtype=np.uint8),
                          count=off + len(arr), bitorder="little").view(bool)[off:]
    return np.where(valid, values, fill)


def ints_at(col: pa.ChunkedArray | pa.Array | np.ndarray, rows: np.ndarray,
            fill: int = -1) -> np.ndarray:
    """int64 numpy values of an integer column at ``rows`` (nulls as ``fill``); a writable
    copy. ``col`` may be a ``filled_ints`` array (filled with the same ``fill``). An int64
    column is indexed in numpy, its validity bits read at ``rows`` (Arrow's take, fill_null
    and conversion cost about five times as much)."""
    if isinstance(col, np.ndarray):
        return col[rows]
    arr = one_chunk(col)
    rows = np.asarray(rows, dtype=np.int64)
    if arr.type != pa.int64() or not len(arr):
        taken = arr.take(V.from_numpy(rows, pa.int64()))
        return np.array(V.numpy(V.fill_null(taken, fill)),
                        dtype=np.int64)
    off = arr.offset
    values = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=off + len(arr))[off:][rows]
    if arr.null_count:
        at = rows + off
        bits = np.frombuffer(arr.buffers()[0], dtype=np.uint8)
        values[((bits[at >> 3] >> (at & 7)) & 1) == 0] = fill
    return values


class FirstIndex:
    """``find(keys)``: the position in ``ids`` of the first id equal to each key (-1: none,
    or a negative key), what a stable argsort of ``ids`` and a left search give. Dense ids
    (the largest below ``limit``) are looked up in a table indexed by id instead."""

    def __init__(self, ids: np.ndarray, limit: int) -> None:
        self._table: np.ndarray | None = None
        top = int(ids.max()) if ids.size else -1
        if 0 <= top < limit:
            own = np.flatnonzero(ids >= 0)
            table = np.full(top + 1, -1, dtype=np.int32)  # positions fit: half the memory
            table[ids[own]] = own
            if (table[ids[own]] == own).all():  # no id twice: the table is exact
                self._table = table
                return
        self._order = np.argsort(ids, kind="stable")
        self._sorted = ids[self._order]

    def find(self, keys: np.ndarray) -> np.ndarray:
        out = np.full(keys.size, -1, dtype=np.int64)
        if self._table is not None:
            ok = (keys >= 0) & (keys < self._table.size)
            out[ok] = self._table[keys[ok]]
        elif self._sorted.size:
            pos = np.clip(np.searchsorted(self._sorted, keys), 0, self._sorted.size - 1)
            hit = (self._sorted[pos] == keys) & (keys >= 0)
            out[hit] = self._order[pos[hit]]
        return out


class Launches:
    """The runtime event (the launch) of each correlation id: ``find(keys)`` gives the row
    of the first runtime row carrying each key (-1: none). Built on first use and shared by
    the steps that follow device events to their launch, with the correlation and External
    id columns they read (``filled_ints`` arrays or Arrow columns)."""

    def __init__(self, kind: pa.Array | pa.ChunkedArray,
                 correlation: pa.ChunkedArray | np.ndarray,
                 external: pa.ChunkedArray | np.ndarray) -> None:
        self._kind = kind
        self.correlation, self.external = correlation, external
        self._rows = np.zeros(0, dtype=np.int64)
        self._index: FirstIndex | None = None

    def find(self, keys: np.ndarray) -> np.ndarray:
        if self._index is None:
            self._rows = np.flatnonzero(dict_mask(self._kind, (Kind.RUNTIME,)))
            corr = ints_at(self.correlation, self._rows)
            self._index = FirstIndex(corr, 4 * corr.size + 1024)
            self._kind = None  # type: ignore[assignment]
        pos = self._index.find(keys)
        return np.where(pos >= 0, self._rows[np.maximum(pos, 0)] if self._rows.size else -1, -1)


def unique_pairs(a: np.ndarray, b: np.ndarray) -> list[tuple[int, int]]:
    """The distinct (a, b) pairs, sorted; same as ``np.unique(np.stack([a, b], 1), axis=0)``
    without its slow sort of void records."""
    if not a.size:
        return []
    order = np.lexsort((b, a))
    sa, sb = a[order], b[order]
    first = np.ones(sa.size, dtype=bool)
    first[1:] = (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])
    return list(zip(sa[first].tolist(), sb[first].tolist(), strict=True))


def first_enclosed(parents: np.ndarray, children: np.ndarray, pid: np.ndarray,
                   tid: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For each parent row, the first child row on the same (pid, tid) that starts within
    the parent's ``[ts, end]``; -1 where there is none. Rows index ``pid``/``tid``/``ts``."""
    out = np.full(parents.size, -1, dtype=np.int64)
    if not parents.size or not children.size:
        return out
    order = np.lexsort((ts[children], tid[children], pid[children]))
    kids = children[order]
    kp, kt, kts = pid[kids], tid[kids], ts[kids]
    pp, pt = pid[parents], tid[parents]
    for p, t in unique_pairs(pp, pt):
        lo = int(np.searchsorted(kp, p, side="left"))
        hi = int(np.searchsorted(kp, p, side="right"))
        lo, hi = (lo + int(np.searchsorted(kt[lo:hi], t, side="left")),
                  lo + int(np.searchsorted(kt[lo:hi], t, side="right")))
        if lo == hi:
            continue
        sel = np.flatnonzero((pp == p) & (pt == t))
        pos = lo + np.searchsorted(kts[lo:hi], ts[parents[sel]], side="left")
        at = np.minimum(pos, hi - 1)
        ok = (pos < hi) & (kts[at] <= end[parents[sel]])
        out[sel] = np.where(ok, kids[at], -1)
    return out


class Nest:
    """CPU-side levels of one collective on a thread: c10d op > record_param_comms > title.

    Only the rows at one of these levels are kept (positions in ``rows``)."""

    def __init__(self, t: pa.Table, kind: pa.Array) -> None:
        name = one_chunk(t.column(S.NAME))
        wrapper = np.asarray(_prefix_mask(name, WRAPPER_PREFIXES), dtype=bool)
        title = np.asarray(_prefix_mask(name, TITLE_PREFIXES), dtype=bool)
        comm_op = dict_mask(kind, (Kind.COMM_OP,))
        self.rows = np.flatnonzero(wrapper | title | comm_op)
        self.pid = ints_at(t.column(S.PID), self.rows)
        self.tid = ints_at(t.column(S.TID), self.rows)
        self.ts = ints_at(t.column(S.TS_NS), self.rows)
        self.end = self.ts + ints_at(t.column(S.DUR_NS), self.rows, 0)
        self.wrapper, self.title = wrapper[self.rows], title[self.rows]
        self.comm_op = comm_op[self.rows]

    def _enclosed(self, parents: np.ndarray, children: np.ndarray) -> np.ndarray:
        return first_enclosed(parents, children, self.pid, self.tid, self.ts, self.end)

    def wrappers_take_inner_record(self, rec_idx: np.ndarray, linked: np.ndarray,
                                   side: pa.Table) -> np.ndarray:
        """c10d ops whose inputs give no size take the record of the record_param_comms they
        enclose (its args: dtype, sizes, group)."""
        rec = rec_idx[self.rows]
        no_bytes = np.append(V.numpy(pc.is_null(side.column(S.IN_BYTES))), True)
        own_size = ~no_bytes[rec]  # rec -1 reads the appended True
        parents = np.flatnonzero(self.wrapper & ~own_size)
        inner = self._enclosed(parents, np.flatnonzero(self.comm_op & (rec >= 0)))
        hit = inner >= 0
        out = linked.copy()
        out[self.rows[parents[hit]]] = rec[inner[hit]]
        return out

    def bare_param_comms_take_title_codes(self, op: np.ndarray, rec_idx: np.ndarray) -> None:
        """``bare_param_comms_take_title_op`` on OP codes (-1: null), in place."""
        parents = np.flatnonzero(self.comm_op & (rec_idx[self.rows] < 0))
        inner = self._enclosed(parents, np.flatnonzero(self.title))
        hit = inner >= 0
        if not hit.any():
            return
        at, src = self.rows[parents[hit]], self.rows[inner[hit]]
        op[at] = np.where(op[at] < 0, op[src], op[at])

    def bare_param_comms_take_title_op(self, op: pa.Array, rec_idx: np.ndarray) -> pa.Array:
        """record_param_comms without args (2022-23 traces) take the op of the ``nccl:*``
        title they enclose (the ``wait`` ones enclose none and stay without op)."""
        parents = np.flatnonzero(self.comm_op & (rec_idx[self.rows] < 0))
        inner = self._enclosed(parents, np.flatnonzero(self.title))
        hit = inner >= 0
        if not hit.any():
            return op
        src = np.arange(len(op))
        src[self.rows[parents[hit]]] = self.rows[inner[hit]]
        return pc.coalesce(op, op.take(V.from_numpy(src)))


WRAPPER_PREFIXES = ("c10d::", "_c10d_functional::")
TITLE_PREFIXES = ("nccl:", "gloo:")


def one_chunk(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The values of ``col`` as one array, without a copy when it has a single chunk."""
    if isinstance(col, pa.Array):
        return col
    if col.num_chunks == 1:
        return col.chunk(0)
    return col.combine_chunks()


def _prefix_mask(col: pa.DictionaryArray, prefixes: Sequence[str]) -> np.ndarray:
    if len(col.dictionary) <= _SMALL_DICT:
        first = tuple(prefixes)
        per_value = [v is not None and v.startswith(first) for v in col.dictionary.to_pylist()]
        return code_mask(codes(col), np.array(per_value, dtype=bool))
    hit = pc.starts_with(col.dictionary, prefixes[0])
    for p in prefixes[1:]:
        hit = pc.or_(hit, pc.starts_with(col.dictionary, p))
    # matched per dictionary value, spread to the rows in code space (an Arrow take of the
    # per-value result over all rows costs several times as much)
    return code_mask(codes(col), V.numpy(V.fill_null(hit, False)))
