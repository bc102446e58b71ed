"""The CPU op that launched a device kernel: its op and process-group facts come first.

A collective kernel is launched from inside the c10d dispatcher op (``c10d::allreduce_``,
``c10d::alltoall_base_``...) and, from torch 1.13 on, the ``record_param_comms`` op within it.
Older traces (HTA's trace_filter, 2023) carry no collective args at all and NCCL of that era
names every kernel of several collectives ``ncclKernel_SendRecv_*``: the name alone says
send/recv where the launching op says all_to_all or all_reduce. The link runs through the
kernel's correlation: the runtime launch with the same correlation on the same rank, then the
innermost communication CPU op with an op that encloses the launch on the launching thread.
Found with ``merge_asof`` per nesting level, not per row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit import schema as S
from tracekit.rules import frame as F

_LANE = [S.RANK, S.PID, S.TID]
_LAUNCH_TS = "_launch_ts"
MAX_DEPTH = 4  # c10d op > record_param_comms > nccl:* title: three levels in practice
# facts a kernel takes from its launcher where it has none of its own
CARRIED = (S.PG_DESC, S.PG_NAME, S.PG_RANKS, S.GROUP_SIZE)


def _op(comm: pd.DataFrame) -> pd.Series:
    """The op a row has so far: its own, else its kernel rule's (c10d::allreduce_ ...)."""
    return comm[S.OP].astype("object").where(comm[S.OP].notna(), comm[F.RULE_OP])


def launchers(frame: pd.DataFrame, comm: pd.DataFrame) -> pd.Series:
    """For every communication row: the comm index of the CPU op that launched it, or -1."""
    out = pd.Series(-1, index=comm.index, dtype=np.int64)
    kinds = comm[S.KIND].astype("object")
    # only the columns read below are filtered (the frames are wide)
    device = comm.loc[((kinds == S.Kind.KERNEL) & comm[S.CORRELATION].notna()).to_numpy(),
                      [S.RANK, S.CORRELATION]]
    host = comm.loc[(kinds.isin([S.Kind.CPU_OP, S.Kind.COMM_OP, S.Kind.ANNOTATION])
                     & _op(comm).notna() & ~comm[F.INSTANCE].astype(bool)).to_numpy(),
                    [*_LANE, S.TS_NS, S.DUR_NS]]
    runtime = frame.loc[((frame[S.KIND].astype("object") == S.Kind.RUNTIME)
                         & frame[S.CORRELATION].notna()).to_numpy(),
                        [S.RANK, S.CORRELATION, S.PID, S.TID, S.TS_NS]]
    if device.empty or host.empty or runtime.empty:
        return out
    launch = runtime.drop_duplicates([S.RANK, S.CORRELATION]).set_index(
        [S.RANK, S.CORRELATION])[[S.PID, S.TID, S.TS_NS]]
    keys = pd.MultiIndex.from_frame(device[[S.RANK, S.CORRELATION]])
    left = pd.DataFrame(launch.reindex(keys).to_numpy(), index=device.index,
                        columns=[S.PID, S.TID, _LAUNCH_TS])
    left[S.RANK] = device[S.RANK].to_numpy()
    left = left.dropna()
    right = host[[*_LANE, S.TS_NS, S.DUR_NS]].copy()
    right[F.END] = right[S.TS_NS] + right[S.DUR_NS]
    right[F.SRC] = right.index
    for part in (left, right):
        for k in _LANE:
            part[k] = part[k].astype(np.int64)
    left[_LAUNCH_TS] = left[_LAUNCH_TS].astype(np.int64)
    left[F.IDX] = left.index
    right = right.sort_values(S.TS_NS)
    for _ in range(MAX_DEPTH):  # innermost first; a sibling that closed before: look outside
        if left.empty or right.empty:
            break
        hit = pd.merge_asof(left.sort_values(_LAUNCH_TS), right, left_on=_LAUNCH_TS,
                            right_on=S.TS_NS, by=_LANE, direction="backward")
        found = hit[hit[F.SRC].notna() & (hit[F.END] >= hit[_LAUNCH_TS])]
        out.loc[found[F.IDX].to_numpy()] = found[F.SRC].astype(np.int64).to_numpy()
        missed = hit[hit[F.SRC].notna() & (hit[F.END] < hit[_LAUNCH_TS])]
        left = left[left[F.IDX].isin(missed[F.IDX])]
        right = right[~right[F.SRC].isin(missed[F.SRC])]
    return out


def take_launcher_facts(comm: pd.DataFrame, source: pd.Series) -> pd.DataFrame:
    """Op of each launched kernel from its launcher when the kernel's own op came from its
    name only (``meta_source`` name or none); process-group facts where the kernel has none."""
    has = source >= 0
    if not has.any():
        return comm
    rows = comm.index[has]
    src = source[has].to_numpy()
    named_only = comm.loc[rows, S.META_SOURCE].astype("object").isin([S.MetaSource.NAME, None]) \
        | comm.loc[rows, S.META_SOURCE].isna()
    op = comm.loc[rows, S.OP].astype("object")
    theirs = pd.Series(_op(comm).loc[src].to_numpy(), index=rows)
    comm[S.OP] = comm[S.OP].astype("object")
    comm.loc[rows, S.OP] = op.where(~named_only | theirs.isna(), theirs)
    for col in CARRIED:
        mine = comm.loc[rows, col]
        need = mine.isna() if col != S.PG_RANKS else mine.map(
            lambda v: v is None or (not isinstance(v, float) and len(v) == 0)
            or (isinstance(v, float) and v != v))
        if need.any():
            comm[col] = comm[col].astype("object")
            take = rows[need.to_numpy()]
            comm.loc[take, col] = comm.loc[source[take].to_numpy(), col].to_numpy()
    return comm
