"""Verdicts shared between nested events on one thread or stream.

A CPU wrapper (``c10d::allreduce_``, ``nccl:all_reduce``) nests around or inside the
``record_param_comms`` op that carries the process-group metadata; on the GPU stream the
``nccl:*`` annotation encloses the kernel. Rows that lack a verdict take it from a decided row
on the same (rank, pid, tid) that encloses them or that they enclose (the enclosed one first:
it is the innermost carrier). Found with two ``merge_asof`` passes, not pairwise loops.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from tracekit import schema as S
from tracekit.rules import frame as F

_KEYS = [S.RANK, S.PID, S.TID]


def nested_source(comm: pd.DataFrame, need: pd.Series, have: pd.Series) -> pd.Series:
    """For each row in ``need``: index of a ``have`` row nested with it (same thread), or NaN."""
    out = pd.Series(np.nan, index=comm.index)
    if not need.any() or not have.any():
        return out
    cols = [*_KEYS, S.TS_NS, S.DUR_NS]
    left = comm.loc[need, cols].copy()
    right = comm.loc[have, cols].copy()
    for part in (left, right):
        for k in _KEYS:
            part[k] = part[k].fillna(-1).astype(np.int64)
        part[F.START] = part[S.TS_NS]
    left[F.END] = left[S.TS_NS] + left[S.DUR_NS]
    right[F.END] = right[S.TS_NS] + right[S.DUR_NS]
    right[F.SRC] = right.index
    left[F.IDX] = left.index
    left = left.sort_values(F.START)
    right = right.sort_values(F.START)
    inner = pd.merge_asof(left, right[[*_KEYS, F.START, F.END, F.SRC]], on=F.START, by=_KEYS,
                          direction="forward", suffixes=("", "_r"))
    ok = inner[F.END + "_r"] <= inner[F.END]
    found = inner.loc[ok].set_index(F.IDX)[F.SRC]
    outer = pd.merge_asof(left, right[[*_KEYS, F.START, F.END, F.SRC]], on=F.START, by=_KEYS,
                          direction="backward", suffixes=("", "_r"))
    ok = outer[F.END + "_r"] >= outer[F.END]
    found = found.combine_first(outer.loc[ok].set_index(F.IDX)[F.SRC])
    return out.fillna(found.reindex(out.index))


def fill_from_nested(comm: pd.DataFrame, table: pd.DataFrame, key: str,
                     columns: Sequence[str], reason_col: str | None = None) -> pd.DataFrame:
    """Copy ``columns`` of ``table`` into rows whose ``key`` is missing, from nested rows."""
    need = table[key].isna()
    have = table[key].notna()
    src = nested_source(comm, need, have).dropna()
    if src.empty:
        return table
    out = table.copy()
    rows = src.index
    for col in columns:
        out.loc[rows, col] = table.loc[src.astype(np.int64).to_numpy(), col].to_numpy()
    if reason_col is not None:
        out.loc[rows, reason_col] = (
            "nested with a decided event: "
            + table.loc[src.astype(np.int64).to_numpy(), reason_col].astype(str)).to_numpy()
    return out
