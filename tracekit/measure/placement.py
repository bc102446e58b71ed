"""Which node each rank sits on, and how a group's members spread over nodes.

Nodes come from the trace's host names when the ranks name more than one host; otherwise from
the profile's ``ranks_per_node`` (rank // ranks_per_node); otherwise every rank is on one node.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from tracekit import schema
from tracekit.measure.crossrank import frame as frame_of
from tracekit.measure.hardware import LOCAL, HardwareProfile

I64 = npt.NDArray[np.int64]


def rank_nodes(rank_info: pa.Table, ranks: I64, profile: HardwareProfile | None) -> I64:
    """Node index per global rank, as an array indexed by rank (size max rank + 1)."""
    size = int(max(ranks.max(initial=-1), _max_rank(rank_info))) + 1
    by_rank = np.arange(size, dtype=np.int64)
    hosts = None
    if rank_info.num_rows and schema.HOST in rank_info.column_names:
        frame = frame_of(rank_info.select([schema.RANK, schema.HOST])).dropna()
        if frame[schema.HOST].nunique() > 1:
            hosts = frame
    if hosts is not None:
        codes = pd.factorize(hosts[schema.HOST].astype(str))[0]
        nodes = np.zeros(size, dtype=np.int64)
        nodes[hosts[schema.RANK].to_numpy(dtype=np.int64)] = codes
        return nodes
    if profile is not None and profile.ranks_per_node:
        return by_rank // profile.ranks_per_node
    return np.zeros(size, dtype=np.int64)


def _max_rank(rank_info: pa.Table) -> int:
    if not rank_info.num_rows:
        return -1
    col = rank_info.column(schema.RANK).to_numpy()
    return int(col.max()) if col.size else -1


def pair_link(src: I64, dst: I64, nodes: I64, profile: HardwareProfile | None) -> np.ndarray:
    """Link class name per (src, dst) pair: 'local' for self traffic, else intra / inter."""
    same = nodes[src] == nodes[dst]
    intra = profile.intra if profile else "intra"
    inter = profile.inter if profile else "inter"
    out = np.where(same, intra, inter).astype(object)
    out[src == dst] = LOCAL
    return out


def group_layout(members: pd.Series, fallback_n: pd.Series, nodes: I64) -> pd.DataFrame:
    """Per row: number of nodes a group spans and the most members on one node.

    ``members`` holds comma-joined global ranks (or NaN); rows without members are taken as
    ``fallback_n`` ranks on one node. Each distinct member list is laid out once and spread
    back by its factorize code (the lists repeat on every row of a communicator).
    """
    n_nodes = np.ones(len(members), dtype=np.int64)
    per_node = fallback_n.fillna(1).astype("int64").to_numpy(copy=True)
    codes, uniq = pd.factorize(members)
    texts = pd.Series(np.asarray(uniq, dtype=object))
    filled = (texts.str.len() > 0).to_numpy(dtype=bool)
    if not filled.any():
        return pd.DataFrame({"nodes": n_nodes, "per_node": per_node}, index=members.index)
    exploded = texts[filled].reset_index(drop=True).str.split(",").explode().astype("int64")
    valid = exploded < nodes.size
    node = pd.Series(-1 - exploded.to_numpy(), index=exploded.index)  # unknown: own node
    node[valid.to_numpy()] = nodes[exploded[valid].to_numpy()]
    counts = pd.DataFrame({"g": exploded.index, "node": node.to_numpy()}).groupby(
        ["g", "node"]).size()
    per_group = counts.groupby(level=0).agg(["size", "max"])
    # position of each distinct list among the filled ones (-1: empty or missing)
    slot = np.full(len(texts) + 1, -1, dtype=np.int64)
    slot[:-1][filled] = np.arange(int(filled.sum()))
    row_slot = slot[codes]  # code -1 (missing) reads the last entry, -1
    known = row_slot >= 0
    n_nodes[known] = per_group["size"].to_numpy()[row_slot[known]]
    per_node[known] = per_group["max"].to_numpy()[row_slot[known]]
    return pd.DataFrame({"nodes": n_nodes, "per_node": per_node}, index=members.index)
