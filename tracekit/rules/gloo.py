"""Gloo CPU traces: tie each ``c10d::*`` op on the caller thread to the ``gloo:*`` annotation
it caused (TRACE_FORMATS.md A.6).

Async gloo collectives run on the process group's two ``pt_gloo_runloop`` threads; nothing in
the trace links them to the c10d op. Within one rank, the k-th c10d op whose rule says
``runs_as: gloo:X`` caused the k-th ``gloo:X`` annotation that does not sit inside a c10d op
on the caller's own thread (send/recv run inline and are matched by enclosure). A pairing whose
annotation starts before its c10d op is dropped.

Each runloop thread serves one process group, so once a c10d op's group is decided, the other
annotations on the same thread are on that group too (``thread_groups``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit import schema as S
from tracekit.rules import frame as F

SLACK_NS = 1_000  # clock granularity between a c10d op's start and its runloop work


def _gloo_instances(comm: pd.DataFrame) -> np.ndarray:
    """Rows that are gloo instances (the engine's flag of the kernel rule, where it set one)."""
    gloo = (comm[F.GLOO].to_numpy(dtype=bool) if F.GLOO in comm
            else (comm[F.LIBRARY] == "gloo").to_numpy())
    return gloo & comm[F.INSTANCE].to_numpy(dtype=bool)


def has_gloo_instances(comm: pd.DataFrame) -> bool:
    """Whether some row is a gloo instance (only those have a runloop thread's group)."""
    return bool(_gloo_instances(comm).any())


def link_wrappers(comm: pd.DataFrame) -> pd.Series:
    """For every row: ROW of the gloo annotation a c10d wrapper caused, else -1."""
    link = pd.Series(-1, index=comm.index, dtype=np.int64)
    wrappers = comm[comm[F.RUNS_AS].notna()]
    gloo = comm[_gloo_instances(comm)]
    if wrappers.empty or gloo.empty:
        return link
    # inline (send/recv, or any gloo op on the caller's thread inside the wrapper)
    inline = wrappers.merge(
        gloo[[S.RANK, S.TID, S.TS_NS, S.NAME, F.ROW]], on=[S.RANK, S.TID], suffixes=("", "_g"))
    inside = inline[
        (inline[f"{S.TS_NS}_g"] >= inline[S.TS_NS])
        & (inline[f"{S.TS_NS}_g"] <= inline[S.TS_NS] + inline[S.DUR_NS])
        & (inline[f"{S.NAME}_g"].astype(str) == inline[F.RUNS_AS].astype(str))
    ].drop_duplicates(subset=[F.ROW]).drop_duplicates(subset=[f"{F.ROW}_g"])
    mapping = dict(zip(inside[F.ROW], inside[f"{F.ROW}_g"], strict=True))
    rest_w = wrappers[~wrappers[F.ROW].isin(inside[F.ROW])].copy()
    rest_g = gloo[~gloo[F.ROW].isin(inside[f"{F.ROW}_g"])].copy()
    if rest_w.empty or rest_g.empty:
        return _as_link(comm, mapping)
    rest_w[F.MATCH_KEY] = rest_w[F.RUNS_AS].astype(str)
    rest_g[F.MATCH_KEY] = rest_g[S.NAME].astype(str)
    rest_w = rest_w.sort_values([S.RANK, F.MATCH_KEY, S.TS_NS], kind="stable")
    rest_g = rest_g.sort_values([S.RANK, F.MATCH_KEY, S.TS_NS], kind="stable")
    rest_w[F.MATCH_K] = rest_w.groupby([S.RANK, F.MATCH_KEY]).cumcount()
    rest_g[F.MATCH_K] = rest_g.groupby([S.RANK, F.MATCH_KEY]).cumcount()
    pairs = rest_w.merge(rest_g[[S.RANK, F.MATCH_KEY, F.MATCH_K, F.ROW, S.TS_NS]],
                         on=[S.RANK, F.MATCH_KEY, F.MATCH_K], suffixes=("", "_g"))
    pairs = pairs[pairs[f"{S.TS_NS}_g"] + SLACK_NS >= pairs[S.TS_NS]]
    mapping.update(zip(pairs[F.ROW], pairs[f"{F.ROW}_g"], strict=True))
    return _as_link(comm, mapping)


def _as_link(comm: pd.DataFrame, mapping: dict[int, int]) -> pd.Series:
    return comm[F.ROW].map(mapping).fillna(-1).astype(np.int64)


def thread_groups(comm: pd.DataFrame, decided: pd.Series) -> pd.Series:
    """Communicator of each gloo annotation's runloop thread, from the decided ops on it.

    ``decided`` holds the group already attributed to each row (None when not). A thread
    whose decided rows disagree gets no group.
    """
    out = pd.Series([None] * len(comm), index=comm.index, dtype=object)
    gloo = comm[_gloo_instances(comm)]
    if gloo.empty:
        return out
    known = pd.DataFrame({S.RANK: gloo[S.RANK], S.TID: gloo[S.TID],
                          S.GROUP: decided.reindex(gloo.index)})
    votes = known.dropna(subset=[S.GROUP]).groupby([S.RANK, S.TID])[S.GROUP].agg(
        lambda s: s.iloc[0] if s.nunique() == 1 else None)
    votes = votes.dropna()
    if votes.empty:
        return out
    keys = pd.MultiIndex.from_frame(gloo[[S.RANK, S.TID]])
    out.loc[gloo.index] = votes.reindex(keys).to_numpy()
    return out
