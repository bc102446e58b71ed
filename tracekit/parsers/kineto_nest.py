"""Nesting on one thread: which event starts inside which (vectorised with searchsorted).

Used to carry communication metadata between the levels of one collective on the CPU side:
``c10d::allreduce_`` > ``record_param_comms`` > ``nccl:all_reduce`` (TRACE_FORMATS.md A.2).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
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
        hit = np.asarray(pc.fill_null(pc.is_in(arr.dictionary, pa.array(values, pa.string())),
                                      False), dtype=bool)
    return np.append(hit, False)[codes(arr)]  # code -1 (null) reads the appended False


def codes(arr: pa.DictionaryArray) -> np.ndarray:
    """The dictionary codes of ``arr`` as numpy (-1 for null), without a copy when it has no
    null (usable as indices into a per-value table with one extra slot at the end)."""
    indices = arr.indices if arr.null_count == 0 else pc.fill_null(arr.indices, -1)
    return indices.to_numpy(zero_copy_only=False)


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
        at = pa.array(self.rows, pa.int64())

        def col(key: str, fill: int = -1) -> np.ndarray:
            return np.array(pc.fill_null(t.column(key).take(at), fill).to_numpy(
                zero_copy_only=False), dtype=np.int64)

        self.pid, self.tid, self.ts = col(S.PID), col(S.TID), col(S.TS_NS)
        self.end = self.ts + col(S.DUR_NS, 0)
        self.wrapper, self.title = wrapper[self.rows], title[self.rows]
        self.comm_op = comm_op[self.rows]

    def _enclosed(self, parents: np.ndarray, children: np.ndarray) -> np.ndarray:
        return first_enclosed(parents, children, self.pid, self.tid, self.ts, self.end)

    def wrappers_take_inner_record(self, rec_idx: np.ndarray, linked: np.ndarray,
                                   side: pa.Table) -> np.ndarray:
        """c10d ops whose inputs give no size take the record of the record_param_comms they
        enclose (its args: dtype, sizes, group)."""
        rec = rec_idx[self.rows]
        no_bytes = np.append(np.asarray(pc.is_null(side.column(S.IN_BYTES)), dtype=bool), True)
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
        return pc.coalesce(op, op.take(pa.array(src)))


WRAPPER_PREFIXES = ("c10d::", "_c10d_functional::")
TITLE_PREFIXES = ("nccl:", "gloo:")


def one_chunk(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The values of ``col`` as one array, without a copy when it has a single chunk."""
    if isinstance(col, pa.Array):
        return col
    if col.num_chunks == 1:
        return col.chunk(0)
    return col.combine_chunks()


def _prefix_mask(col: pa.DictionaryArray, prefixes: Sequence[str]) -> pa.Array | np.ndarray:
    if len(col.dictionary) <= _SMALL_DICT:
        first = tuple(prefixes)
        per_value = [v is not None and v.startswith(first) for v in col.dictionary.to_pylist()]
        return np.array([*per_value, False], dtype=bool)[codes(col)]
    hit = pc.starts_with(col.dictionary, prefixes[0])
    for p in prefixes[1:]:
        hit = pc.or_(hit, pc.starts_with(col.dictionary, p))
    return pc.fill_null(hit.take(col.indices), False)
