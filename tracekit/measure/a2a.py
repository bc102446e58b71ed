"""All-to-all(v) traffic matrices C[i][j], imbalance and the two-link-class bound.

C[i][j] = bytes rank i sends to rank j in one instance. It is built from the split sizes the
trace records (``in_split`` on the sender: rows per destination in group order; ``out_split``
on the receiver: rows per source), scaled to bytes by the rank's bytes per row; an equal-split
``all_to_all`` without splits gives in_bytes / n per destination.

For each link class l (intra-node, inter-node; self traffic is 'local' and costs nothing),
with D_r,l = max(bytes rank r sends over l, bytes it receives over l) (BOUNDS 2.5, seed 003
eq. cc-a2a-v-lb / cc-a2a-dispatch-lb):

    bound_l     = alpha_l + max_r D_r,l / B_l       (the busiest rank bounds it)
    balanced_l  = alpha_l + mean_r D_r,l / B_l      (the same bytes spread evenly)
    imbalance_l = max_r D_r,l / mean_r D_r,l
    time lost to imbalance    = (max - mean) / B_l = bound_l - balanced_l
    time lost to under-used links = transfer - max_l bound_l
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import schema
from tracekit.measure.bounds import A2A_OPS
from tracekit.measure.crossrank import N_GROUP, N_SEEN, frame, table_of
from tracekit.measure.hardware import LOCAL, HardwareProfile
from tracekit.measure.placement import I64, pair_link
from tracekit.schema import Op

_SRC, _DST, _BYTES = schema.SRC_RANK, schema.DST_RANK, schema.MSG_BYTES


def _lists(series: pd.Series) -> pa.ListArray:
    values = series.astype(object)
    return pa.array(values.where(values.notna(), None).tolist(), type=pa.list_(pa.int64()))


def _non_empty(series: pd.Series) -> np.ndarray:
    lengths = _lists(series).value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
    return np.asarray(lengths, dtype=np.int64) > 0


def _explode(frame: pd.DataFrame, split_col: str | None, bytes_col: str,
             sender: bool) -> pd.DataFrame:
    """Long-form (instance, src, dst, bytes) from one side's split lists (vectorised).

    Entry k of a split list belongs to member k of the group (``pg_ranks`` order); without a
    split column every member gets an equal share.
    """
    members = _lists(frame[schema.PG_RANKS])
    m_flat = members.flatten().to_numpy()
    m_off = members.offsets.to_numpy()
    m_len = np.diff(m_off)
    if split_col is None:
        parent = members.value_parent_indices().to_numpy()
        pos = np.arange(parent.size) - m_off[parent]
        weights = np.ones(parent.size)
    else:
        split = _lists(frame[split_col])
        parent = split.value_parent_indices().to_numpy()
        pos = np.arange(parent.size) - split.offsets.to_numpy()[parent]
        weights = split.flatten().to_numpy().astype(np.float64)
    if parent.size == 0:
        return pd.DataFrame(columns=[schema.INSTANCE, _SRC, _DST, _BYTES])
    totals = np.bincount(parent, weights=weights, minlength=len(frame))[parent]
    keep = pos < m_len[parent]
    peers = np.full(parent.size, -1, dtype=np.int64)
    peers[keep] = m_flat[m_off[parent[keep]] + pos[keep]]
    own_bytes = frame[bytes_col].to_numpy(dtype=np.float64)[parent]
    with np.errstate(divide="ignore", invalid="ignore"):
        amount = np.where(totals > 0, own_bytes * weights / totals, 0.0)
    keep &= np.isfinite(amount)
    rank = frame[schema.RANK].to_numpy(dtype=np.int64)[parent]
    return pd.DataFrame({
        schema.INSTANCE: frame[schema.INSTANCE].to_numpy()[parent][keep],
        _SRC: (rank if sender else peers)[keep],
        _DST: (peers if sender else rank)[keep],
        _BYTES: amount[keep],
    })


def matrices(matched: pd.DataFrame, nodes: I64, profile: HardwareProfile | None,
             is_a2a: np.ndarray | None = None) -> pa.Table:
    """A2A_MATRIX: C[src][dst] per all-to-all(v) instance, from both sides' split sizes
    (``is_a2a``: the rows whose op is in A2A_OPS where the caller has them coded)."""
    if is_a2a is None:
        is_a2a = matched[schema.OP].isin(A2A_OPS).to_numpy(dtype=bool)
    # no all-to-all with members: the empty matrix (what the path below gives), without a
    # look at the member lists where no row is an all-to-all at all
    rows = is_a2a & matched[schema.PG_RANKS].notna().to_numpy(dtype=bool) \
        if is_a2a.any() else is_a2a
    if not rows.any():
        return schema.empty(schema.A2A_MATRIX)
    a2a = matched[rows]
    parts = []
    has_in = _non_empty(a2a[schema.IN_SPLIT])
    has_out = _non_empty(a2a[schema.OUT_SPLIT])
    parts.append(_explode(a2a.loc[has_in], schema.IN_SPLIT, schema.IN_BYTES, sender=True))
    parts.append(_explode(a2a.loc[has_out], schema.OUT_SPLIT, schema.OUT_BYTES, sender=False))
    equal = a2a.loc[~has_in & (a2a[schema.OP] == Op.ALL_TO_ALL).to_numpy()]
    parts.append(_explode(equal, None, schema.IN_BYTES, sender=True))
    long = pd.concat([p for p in parts if not p.empty] or [parts[0]], ignore_index=True)
    long = long.groupby([schema.INSTANCE, _SRC, _DST], as_index=False)[_BYTES].max()
    src = long[_SRC].to_numpy(dtype=np.int64)
    dst = long[_DST].to_numpy(dtype=np.int64)
    inside = (src < nodes.size) & (dst < nodes.size)
    link = np.full(src.size, None, dtype=object)
    link[inside] = pair_link(src[inside], dst[inside], nodes, profile)
    long[schema.LINK_CLASS] = link
    long[_BYTES] = np.rint(long[_BYTES]).astype("int64")
    return table_of(long, schema.A2A_MATRIX)


def summary(matrix: pa.Table, matched: pd.DataFrame, profile: HardwareProfile | None,
            peers_in_box: pd.Series) -> pa.Table:
    """A2A: per (instance, link class) busiest-rank bytes, imbalance, bound and lost time."""
    c = frame(matrix)
    c = c[c[schema.LINK_CLASS].notna() & (c[schema.LINK_CLASS] != LOCAL)]
    if c.empty:
        return schema.empty(schema.A2A)
    keys = [schema.INSTANCE, schema.LINK_CLASS]
    send = c.groupby([*keys, _SRC])[_BYTES].sum().rename_axis([*keys, schema.RANK])
    recv = c.groupby([*keys, _DST])[_BYTES].sum().rename_axis([*keys, schema.RANK])
    per_rank = pd.concat({"send": send, "recv": recv}, axis=1).fillna(0)
    per_rank["d"] = per_rank[["send", "recv"]].max(axis=1)
    agg = per_rank.groupby(level=[0, 1]).agg(send=("send", "max"), recv=("recv", "max"),
                                             dmax=("d", "max"), dsum=("d", "sum"))
    agg = agg.reset_index()
    first = matched.drop_duplicates(schema.INSTANCE).set_index(schema.INSTANCE)
    info = first.loc[agg[schema.INSTANCE]]
    # the communicator's real size (measure.evidence), not the ranks that happen to be seen
    n = (info[N_GROUP] if N_GROUP in info else info[schema.GROUP_SIZE].fillna(
        info[N_SEEN])).to_numpy(dtype=np.float64, na_value=np.nan)
    mean = agg["dsum"].to_numpy() / np.maximum(n, 1)
    alpha, bw = _link_params(agg[schema.LINK_CLASS], profile,
                             peers_in_box.reindex(agg[schema.INSTANCE]).to_numpy(),
                             info[schema.OP].to_numpy(dtype=object), n)
    dmax = agg["dmax"].to_numpy(dtype=np.float64)
    bound = alpha + dmax / bw
    balanced = alpha + mean / bw
    transfer_exact = info[schema.TRANSFER_NS].astype("Int64").to_numpy()
    transfer = info[schema.TRANSFER_NS].to_numpy(dtype=np.float64, na_value=np.nan)
    inst_bound = pd.Series(bound).groupby(agg[schema.INSTANCE].to_numpy()).transform("max")
    out = pd.DataFrame({
        schema.INSTANCE: agg[schema.INSTANCE].to_numpy(),
        schema.OP: info[schema.OP].to_numpy(), schema.GROUP: info[schema.GROUP].to_numpy(),
        schema.PATH: info[schema.PATH].to_numpy(), schema.PHASE: info[schema.PHASE].to_numpy(),
        schema.LAYER: info[schema.LAYER].to_numpy(), schema.N_RANKS: n,
        schema.LINK_CLASS: agg[schema.LINK_CLASS].to_numpy(),
        schema.SEND_BYTES: agg["send"].to_numpy(), schema.RECV_BYTES: agg["recv"].to_numpy(),
        schema.MEAN_BYTES: mean,
        schema.IMBALANCE: np.where(mean > 0, dmax / np.where(mean > 0, mean, 1), np.nan),
        schema.TRANSFER_NS: transfer_exact,
        schema.BOUND_NS: bound, schema.BALANCED_NS: balanced,
        schema.LOST_IMBALANCE_NS: bound - balanced,
        schema.LOST_LINKS_NS: transfer - inst_bound.to_numpy(),
    })
    for col in (schema.BOUND_NS, schema.BALANCED_NS,
                schema.LOST_IMBALANCE_NS, schema.LOST_LINKS_NS, schema.SEND_BYTES,
                schema.RECV_BYTES, schema.N_RANKS, schema.LAYER):
        out[col] = pd.array(np.rint(out[col].to_numpy(dtype=np.float64)), dtype="Int64")
    return table_of(out, schema.A2A)


def _link_params(link: pd.Series, profile: HardwareProfile | None, peers: np.ndarray,
                 ops: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """alpha (ns) and bandwidth (GB/s) per row's link class; NaN without a profile."""
    alpha = np.full(len(link), np.nan)
    bw = np.full(len(link), np.nan)
    if profile is None:
        return alpha, bw
    names = link.to_numpy(dtype=object)
    for name, lc in profile.links.items():
        m = names == name
        alpha[m] = lc.alpha_ns(ops[m], n[m])
        p = np.nan_to_num(peers[m].astype(np.float64), nan=1.0).astype(np.int64)
        bw[m] = lc.achievable_gbps * (np.clip(p, 1, lc.max_peers or None)
                                      if lc.topology == "mesh" else 1)
    return alpha, bw


def instance_bytes(matrix: pa.Table) -> pd.Series:
    """nccl-tests AlltoAllv S per instance: max over ranks of max(send, recv) bytes."""
    c = frame(matrix)
    if c.empty:
        return pd.Series(dtype="float64")
    send = c.groupby([schema.INSTANCE, _SRC])[_BYTES].sum().groupby(level=0).max()
    recv = c.groupby([schema.INSTANCE, _DST])[_BYTES].sum().groupby(level=0).max()
    return pd.concat([send, recv], axis=1).max(axis=1)
