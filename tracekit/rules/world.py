"""The last resort: a collective with no group evidence at all ran in the declared world.

Traces before torch 2.x process-group args (HTA's trace_filter, 2023) say only
``distributedInfo: {world_size: 128}``. A collective there ran on the default group (WORLD) or
on a subgroup the trace does not describe, so WORLD is a candidate, never a verdict, unless
the rank's process groups are known and the world is the only one with more than one member:

* the rank's ``pg_config`` lists only the default group (and single-rank ones): WORLD;
* a topology is known: WORLD and every communicator of the rank with more than one member are
  the candidates (ambiguous unless WORLD is the only one);
* nothing describes the subgroups: ambiguous, WORLD named as the candidate "or a subgroup".

Point-to-point ops have a peer, not a group; they are left alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit import model
from tracekit import schema as S
from tracekit.rules.groups import Verdict
from tracekit.rules.verdicts import Coded
from tracekit.schema import Group, Status
from tracekit.topology import Topology

_P2P = (S.Op.SEND, S.Op.RECV, S.Op.SEND_RECV)


def _world_sizes(run: model.Run) -> dict[int, int]:
    info = run.rank_info
    if not info.num_rows or S.WORLD_SIZE not in info.column_names:
        return {}
    return {int(r): int(w) for r, w in zip(info.column(S.RANK).to_pylist(),
                                           info.column(S.WORLD_SIZE).to_pylist(), strict=True)
            if w}


def _subgroups(run: model.Run) -> dict[int, bool]:
    """Per rank with a pg_config: does it list a group of 2+ ranks other than the world?"""
    pgs = run.process_groups
    if not pgs.num_rows:
        return {}
    out: dict[int, bool] = {}
    sizes = _world_sizes(run)
    for rank, members in zip(pgs.column(S.RANK).to_pylist(),
                             pgs.column(S.PG_RANKS).to_pylist(), strict=True):
        n = len(members or ())
        sub = 1 < n < sizes.get(int(rank), 0) or (n > 1 and not sizes)
        out[int(rank)] = out.get(int(rank), False) or sub
    return out


def _verdict(rank: int, world: int, topo: Topology | None, subgroups: bool | None) -> Verdict:
    base = f"no group evidence; distributedInfo declares a world of {world} ranks"
    if topo is not None:
        cands = [Group.WORLD]
        for g in Group.ALL:
            m = topo.group_of(rank, g)
            if m is not None and len(m) > 1 and topo.canonical(g) not in cands:
                cands.append(topo.canonical(g))
        if len(cands) == 1:
            return Verdict(Group.WORLD, Status.ATTRIBUTED, "world.only", base, (Group.WORLD,))
        return Verdict(None, Status.AMBIGUOUS, "world.subgroups",
                       f"{base}; candidates {', '.join(cands)} (the topology has subgroups)",
                       tuple(cands))
    if subgroups is False:
        return Verdict(Group.WORLD, Status.ATTRIBUTED, "world.only",
                       f"{base} and pg_config lists no subgroup", (Group.WORLD,))
    why = "pg_config lists subgroups" if subgroups else "no process-group config says which"
    return Verdict(None, Status.AMBIGUOUS, "world.declared",
                   f"{base}; candidates WORLD (or a subgroup: {why})", (Group.WORLD,))


def world_fallback(comm: pd.DataFrame, verdicts: Coded, topo: Topology | None,
                   run: model.Run) -> Coded:
    """Rows still without any group evidence get the declared world as candidate."""
    sizes = _world_sizes(run)
    if not sizes:
        return verdicts
    # the open rows, tested column by column on the rows still in question (few of many)
    at = np.flatnonzero(verdicts.has_status(Status.UNATTRIBUTED))
    op = comm[S.OP].to_numpy()[at]
    at = at[pd.notna(op) & ~pd.Series(op, dtype=object).isin(_P2P).to_numpy()]
    ranks = comm[S.RANK].to_numpy()[at]
    at = at[pd.Series(ranks).isin(list(sizes)).to_numpy()]
    if not at.size:
        return verdicts
    subgroups = _subgroups(run)
    distinct, which = np.unique(comm[S.RANK].to_numpy()[at].astype(int), return_inverse=True)
    found = [_verdict(r, sizes[r], topo, subgroups.get(r)) for r in distinct.tolist()]
    return verdicts.written(at, found, which.reshape(-1))
