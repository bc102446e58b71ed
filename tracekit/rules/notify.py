"""Kernels that are the synchronisation part of the operation they prepare.

DeepEP's notify kernels (``notify_dispatch``, ``cached_notify_dispatch``,
``cached_notify_combine``, internode ``cached_notify``) exchange counts and run a barrier
before the dispatch or combine kernel that moves the tokens (deepseek-ai/DeepEP
csrc/legacy/buffer.hpp). A rule with ``prepares: [ops]`` marks such a kernel: it belongs to the
next kernel on the same device stream whose op is one of those and whose library is the same,
provided no other preparing kernel comes in between. Where the name does not say which
operation it prepares (internode ``cached_notify``: a cached dispatch or a combine) the op is
taken from that kernel. The notify row then shares the operation's logical collective, group,
path and layer (``take_prepared``); it is not the instance of the collective, and its time is
reported with ``kernel_role`` notify so that it is not read as transfer time.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules.model import RuleSet
from tracekit.rules.verdicts import Coded

PREPARES = "_prepares"  # ROW of the operation a notify kernel prepares, or -1
_LANE = [S.RANK, S.PID, S.TID]
# the facts a notify row takes of the op it prepares (the verdict too, its reason noted)
TAKEN = (S.LOGICAL_ID, S.LAYER, S.PATH, F.PATH_RULE, F.PATH_REASON, F.STEP)


def prepared_targets(comm: pd.DataFrame, rules: RuleSet) -> pd.Series:
    """For every row: ROW of the operation it prepares (rules with ``prepares``), else -1."""
    out = pd.Series(-1, index=comm.index, dtype=np.int64)
    wanted = [tuple(r.prepares) for r in rules.kernel_classes] + [()]
    krule = comm[F.KRULE].to_numpy()
    which = np.where(krule < 0, len(wanted) - 1, krule)
    is_prep = pd.Series(np.array([bool(w) for w in wanted])[which], index=comm.index)
    if not is_prep.any():
        return out
    wants = np.empty(len(wanted), dtype=object)
    for i, w in enumerate(wanted):
        wants[i] = w
    prep = pd.Series(wants[which], index=comm.index)
    ops = {o for p in prep[is_prep] for o in p}
    libs = set(comm.loc[is_prep, F.LIBRARY].dropna())
    target = (comm[F.INSTANCE].astype(bool) & comm[S.OP].isin(ops) & comm[F.LIBRARY].isin(libs)
              & ~is_prep)
    if not target.any():
        return out
    cols = [*_LANE, S.TS_NS, F.ROW]
    # the lane columns of the preparing and target rows alone (of many communication rows)
    keep = (is_prep | target).to_numpy()
    lanes = comm.loc[keep, cols].copy()
    for k in _LANE:
        lanes[k] = lanes[k].fillna(-1).astype(np.int64)
    left = lanes[is_prep.to_numpy()[keep]].copy()
    left[F.IDX] = left.index
    # the next preparing kernel on the lane bounds the search
    nxt = left.sort_values(S.TS_NS, kind="stable")
    nxt["_bound"] = nxt.groupby(_LANE)[S.TS_NS].shift(-1)
    left["_bound"] = nxt["_bound"].reindex(left.index)
    right = lanes[target.to_numpy()[keep]].rename(columns={F.ROW: "_target", S.TS_NS: "_t_ts"})
    right[S.TS_NS] = right["_t_ts"]
    hit = pd.merge_asof(left.sort_values(S.TS_NS), right.sort_values(S.TS_NS), on=S.TS_NS,
                        by=_LANE, direction="forward", allow_exact_matches=False)
    hit = hit[hit["_target"].notna()]
    hit = hit[hit["_bound"].isna() | (hit["_t_ts"] < hit["_bound"])]
    if hit.empty:
        return out
    by_row = pd.Series(comm.index, index=comm[F.ROW].to_numpy())
    t_op = comm.loc[by_row.reindex(hit["_target"].astype(np.int64)).to_numpy(), S.OP].to_numpy()
    ok = [o in prep.loc[i] for o, i in zip(t_op, hit[F.IDX], strict=True)]
    hit = hit[np.asarray(ok, dtype=bool)]
    out.loc[hit[F.IDX].to_numpy()] = hit["_target"].astype(np.int64).to_numpy()
    return out


def fill_prepared_ops(comm: pd.DataFrame) -> pd.Series:
    """S.OP with the prepared operation's op where the notify rule gives none."""
    op = comm[S.OP].astype("object")
    has = comm[PREPARES] >= 0
    if not has.any():
        return op
    by_row = pd.Series(comm.index, index=comm[F.ROW].to_numpy())
    src = by_row.reindex(comm.loc[has, PREPARES]).to_numpy()
    need = has & op.isna()
    fill = pd.Series(comm.loc[src, S.OP].to_numpy(), index=comm.index[has])
    return op.where(~need, fill.reindex(comm.index))


def take_prepared(comm: pd.DataFrame, verdicts: Coded) -> tuple[pd.DataFrame, Coded]:
    """Notify rows take the decided facts of the operation they prepare (``verdicts``: the
    rows' verdicts in code space, of which the frame holds the group)."""
    has = comm[PREPARES] >= 0
    if not has.any():
        return comm, verdicts
    by_row = pd.Series(comm.index, index=comm[F.ROW].to_numpy())
    src = by_row.reindex(comm.loc[has, PREPARES]).to_numpy()
    # written by position into object copies (no label lookup per column)
    at, source = np.flatnonzero(has.to_numpy()), comm.index.get_indexer(src)
    for col in TAKEN:
        if col in comm:
            values = comm[col].to_numpy(dtype=object, copy=True)
            values[at] = values[source]
            comm[col] = pd.Series(values, index=comm.index, dtype=object, copy=False)
    names = comm.loc[src, S.NAME].astype(str).str.slice(0, 80).to_numpy()
    theirs = [verdicts.table[c] for c in verdicts.codes[source].tolist()]
    made = [dataclasses.replace(v, reason=f"synchronisation part of the {o} it prepares ({n}): "
                                          f"{v.reason}")
            for v, o, n in zip(theirs, comm.loc[src, S.OP].to_numpy(), names, strict=True)]
    verdicts = verdicts.written(at, made, np.arange(len(at)))
    comm[S.GROUP] = verdicts.group_series(comm.index)
    return comm, verdicts
