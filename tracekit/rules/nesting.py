"""Verdicts shared between nested events on one thread or stream.

A CPU wrapper (``c10d::allreduce_``, ``nccl:all_reduce``) nests around or inside the
``record_param_comms`` op that carries the process-group metadata; on the GPU stream the
``nccl:*`` annotation encloses the kernel. Rows that lack a verdict take it from a decided row
on the same (rank, pid, tid) that encloses them or that they enclose (the enclosed one first:
it is the innermost carrier). Found with two sorted searches over (thread, start), not
pairwise loops.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules.keys import lane_time_keys, missing, row_codes

_KEYS = [S.RANK, S.PID, S.TID]


def nested_source(comm: pd.DataFrame, need: pd.Series, have: pd.Series) -> pd.Series:
    """For each row in ``need``: index of a ``have`` row nested with it (same thread), or NaN.
    The thread is ``comm``'s THREAD_KEY where it has one (the engine's code of each row's
    (rank, pid, tid)), else coded here from those columns."""
    out = pd.Series(np.nan, index=comm.index)
    need_at, have_at = np.flatnonzero(need.to_numpy()), np.flatnonzero(have.to_numpy())
    if not need_at.size or not have_at.size:
        return out
    lane = comm[F.THREAD_KEY].to_numpy() if F.THREAD_KEY in comm else \
        row_codes([comm[k].fillna(-1).astype(np.int64).to_numpy() for k in _KEYS])
    start = comm[S.TS_NS].to_numpy(dtype=np.int64)
    end = start + comm[S.DUR_NS].to_numpy(dtype=np.int64)
    # the have rows by start (the order a merge_asof on them uses for ties), then by lane
    have_at = have_at[np.argsort(start[have_at])]
    have_at = have_at[np.argsort(lane[have_at], kind="stable")]
    h_lane, l_lane, l_end = lane[have_at], lane[need_at], end[need_at]
    # (lane, start) as one sortable integer
    keys, _ = lane_time_keys(np.concatenate([h_lane, l_lane]),
                             np.concatenate([start[have_at], start[need_at]]))
    h_key, l_key = keys[:have_at.size], keys[have_at.size:]
    # the first have row on the lane starting at or after the row (enclosed by it) ...
    fwd = np.searchsorted(h_key, l_key, side="left")
    inner = fwd < have_at.size
    inner[inner] = h_lane[fwd[inner]] == l_lane[inner]
    inner[inner] = end[have_at[fwd[inner]]] <= l_end[inner]
    # ... else the last one starting at or before it (enclosing it)
    bwd = np.searchsorted(h_key, l_key, side="right") - 1
    outer = ~inner & (bwd >= 0)
    outer[outer] = h_lane[bwd[outer]] == l_lane[outer]
    outer[outer] = end[have_at[bwd[outer]]] >= l_end[outer]
    src = np.full(need_at.size, -1, dtype=np.int64)
    src[inner] = have_at[fwd[inner]]
    src[outer] = have_at[bwd[outer]]
    found = src >= 0
    values = out.to_numpy(copy=True)
    values[need_at[found]] = comm.index.to_numpy()[src[found]]
    return pd.Series(values, index=comm.index, copy=False)


def fill_from_nested(comm: pd.DataFrame, table: pd.DataFrame, key: str,
                     columns: Sequence[str]) -> pd.DataFrame:
    """Copy ``columns`` of ``table`` into rows whose ``key`` is missing, from nested rows
    (the verdicts' own nesting step is ``engine._from_nested``, in code space)."""
    need = pd.Series(missing(table[key]), index=table.index)
    have = ~need
    src = nested_source(comm, need, have).dropna()
    if src.empty:
        return table
    out = table.copy(deep=False)  # the columns written below are replaced, not modified
    at = table.index.get_indexer(src.index)
    take = table.index.get_indexer(src.astype(np.int64).to_numpy())
    for col in columns:
        out[col] = _written(table[col], at, table[col].to_numpy()[take])
    return out


def _written(column: pd.Series, at: np.ndarray, values: np.ndarray) -> pd.Series:
    """``column`` with ``values`` at positions ``at``."""
    if column.dtype != object and not pd.api.types.is_string_dtype(column):
        out = column.copy()
        out.iloc[at] = values  # pandas' own casting rules for numbers
        return out
    arr = column.to_numpy(dtype=object, copy=True)  # text: an object array, no Arrow rebuild
    arr[at] = values
    return pd.Series(arr, index=column.index, dtype=object, copy=False)
