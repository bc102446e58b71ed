"""The CPU op that launched a device kernel: its op and process-group facts come first.

A collective kernel is launched from inside the c10d dispatcher op (``c10d::allreduce_``,
``c10d::alltoall_base_``...) and, from torch 1.13 on, the ``record_param_comms`` op within it.
Older traces (HTA's trace_filter, 2023) carry no collective args at all and NCCL of that era
names every kernel of several collectives ``ncclKernel_SendRecv_*``: the name alone says
send/recv where the launching op says all_to_all or all_reduce. The link runs through the
kernel's correlation: the runtime launch with the same correlation on the same rank, then the
innermost communication CPU op with an op that encloses the launch on the launching thread.
Found with one sorted search per nesting level, not per row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules.keys import correlation_ids, lane_time_keys, row_codes

_LANE = [S.RANK, S.PID, S.TID]
_LAUNCH_FACTS = (S.PID, S.TID, S.TS_NS)  # of the runtime launch
MAX_DEPTH = 4  # c10d op > record_param_comms > nccl:* title: three levels in practice
NOT_LAUNCHED = -2  # launch_rows of a row that is not a kernel with a correlation
# facts a kernel takes from its launcher where it has none of its own
CARRIED = (S.PG_DESC, S.PG_NAME, S.PG_RANKS, S.GROUP_SIZE)


def launch_rows(frame: pd.DataFrame, comm: pd.DataFrame) -> np.ndarray:
    """For every communication row that is a kernel with a correlation: the ``frame`` position
    of its launch, the first runtime row with its (rank, correlation), -1 where there is
    none; -2 for the other rows. Both the launcher search and the issue order
    (``layers.host_times``) read it."""
    out = np.full(len(comm), NOT_LAUNCHED, dtype=np.int64)
    if S.CORRELATION not in frame or S.CORRELATION not in comm:
        return out
    device = np.flatnonzero(((comm[S.KIND] == S.Kind.KERNEL)
                             & comm[S.CORRELATION].notna()).to_numpy())
    out[device] = -1
    runtime = np.flatnonzero(((frame[S.KIND] == S.Kind.RUNTIME)
                              & frame[S.CORRELATION].notna()).to_numpy())
    if not device.size or not runtime.size:
        return out
    keys = row_codes([
        np.concatenate([frame[S.RANK].to_numpy()[runtime], comm[S.RANK].to_numpy()[device]]),
        correlation_ids(np.concatenate([frame[S.CORRELATION].to_numpy()[runtime],
                                        comm[S.CORRELATION].to_numpy()[device]]))])
    first = np.full(int(keys.max()) + 1, -1, dtype=np.int64)
    r_keys, r_first = np.unique(keys[:runtime.size], return_index=True)
    first[r_keys] = runtime[r_first]
    out[device] = first[keys[runtime.size:]]
    return out


def launchers(frame: pd.DataFrame, comm: pd.DataFrame, launch: np.ndarray) -> pd.Series:
    """For every communication row: the comm index of the CPU op that launched it, or -1
    (``launch``: ``launch_rows``)."""
    out = np.full(len(comm), -1, dtype=np.int64)
    device = np.flatnonzero(launch != NOT_LAUNCHED)  # kernels with a correlation
    host = np.flatnonzero((comm[S.KIND].isin([S.Kind.CPU_OP, S.Kind.COMM_OP, S.Kind.ANNOTATION])
                           & ~comm[F.INSTANCE].astype(bool)).to_numpy())
    # of those, the rows with an op so far (tested on the host rows alone: few of many)
    host = host[pd.notna(comm[S.OP].to_numpy()[host]) | pd.notna(comm[F.RULE_OP].to_numpy()[host])]
    if device.size and host.size and (launch[device] >= 0).any():
        kernel, src = _launched(frame, comm, device, host, launch[device])
        out[kernel] = src
    return pd.Series(out, index=comm.index, dtype=np.int64)


def _launched(frame: pd.DataFrame, comm: pd.DataFrame, device: np.ndarray, host: np.ndarray,
              launch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(kernel positions, comm index of their launcher) of the ``device`` rows of ``comm``,
    launched at the ``frame`` rows ``launch``."""
    columns = [frame[c].to_numpy() for c in _LAUNCH_FACTS]
    ok = launch >= 0
    coded = F.THREAD_KEY in frame and F.THREAD_KEY in comm  # the engine's thread codes
    if np.result_type(*(c.dtype for c in columns)).kind == "f":
        facts = [c[np.where(ok, launch, 0)].astype(np.float64) for c in columns]
        ok &= ~np.isnan(facts[0]) & ~np.isnan(facts[1]) & ~np.isnan(facts[2])
        l_pid, l_tid, l_ts = (f[ok].astype(np.int64) for f in facts)
    else:
        # integer facts (no missing one): taken at the found launches alone; where a kernel
        # has none they went through one float block: the same rounding of large values;
        # with thread codes only the launch time is read
        at = launch[ok]
        rounded = not ok.all()
        l_pid, l_tid, l_ts = (
            None if coded and i < 2 else
            c[at].astype(np.float64).astype(np.int64) if rounded else c[at].astype(np.int64)
            for i, c in enumerate(columns))
    kernel = device[ok]
    h_ts = comm[S.TS_NS].to_numpy(dtype=np.int64)[host]
    h_end = h_ts + comm[S.DUR_NS].to_numpy(dtype=np.int64)[host]
    if coded:
        lanes = np.concatenate([np.take(frame[F.THREAD_KEY].to_numpy(), launch[ok]),
                                np.take(comm[F.THREAD_KEY].to_numpy(), host)])
    else:
        lanes = row_codes([
            np.concatenate([comm[S.RANK].to_numpy()[kernel], comm[S.RANK].to_numpy()[host]]),
            np.concatenate([l_pid, comm[S.PID].to_numpy()[host].astype(np.int64)]),
            np.concatenate([l_tid, comm[S.TID].to_numpy()[host].astype(np.int64)])])
    keys, _ = lane_time_keys(lanes, np.concatenate([l_ts, h_ts]))
    l_key, h_key = keys[:kernel.size], keys[kernel.size:]
    l_lane, h_lane = lanes[:kernel.size], lanes[kernel.size:]
    # the host ops by start (ties in the order a merge_asof on them would see), then by lane
    order = np.argsort(h_ts)
    order = order[np.argsort(h_lane[order], kind="stable")]
    alive = np.ones(order.size, dtype=bool)
    left = np.arange(kernel.size)
    found_k: list[np.ndarray] = []
    found_s: list[np.ndarray] = []
    for _ in range(MAX_DEPTH):  # innermost first; a sibling that closed before: look outside
        if not left.size or not alive.any():
            break
        cand = order[alive]
        pos = np.searchsorted(h_key[cand], l_key[left], side="right") - 1
        hit = pos >= 0
        hit[hit] = h_lane[cand[pos[hit]]] == l_lane[left[hit]]
        at = cand[np.where(hit, pos, 0)]
        inside = hit & (h_end[at] >= l_ts[left])
        found_k.append(left[inside])
        found_s.append(at[inside])
        missed = hit & ~inside
        gone = np.zeros(host.size, dtype=bool)
        gone[at[missed]] = True
        alive &= ~gone[order]
        left = left[missed]
    if not found_k:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    k, h = np.concatenate(found_k), np.concatenate(found_s)
    return kernel[k], comm.index.to_numpy()[host[h]]


def take_launcher_facts(comm: pd.DataFrame, source: pd.Series) -> pd.DataFrame:
    """Op of each launched kernel from its launcher when the kernel's own op came from its
    name only (``meta_source`` name or none); process-group facts where the kernel has none.
    Written by position (the launched rows and their launchers' positions)."""
    src_label = source.to_numpy()
    rows = np.flatnonzero(src_label >= 0)
    if not rows.size:
        return comm
    src = comm.index.get_indexer(src_label[rows])
    meta = comm[S.META_SOURCE].to_numpy(dtype=object)[rows]
    named_only = np.asarray(pd.isna(meta), dtype=bool) | (meta == S.MetaSource.NAME)
    op = comm[S.OP].to_numpy(dtype=object)
    rule_op = comm[F.RULE_OP].to_numpy(dtype=object)
    theirs = op[src]
    no_op = np.asarray(pd.isna(theirs), dtype=bool)
    theirs[no_op] = rule_op[src[no_op]]  # the launcher's op so far: its own, else its rule's
    replace = named_only & ~np.asarray(pd.isna(theirs), dtype=bool)
    if replace.any():
        op = op.copy()
        op[rows[replace]] = theirs[replace]
    comm[S.OP] = pd.Series(op, index=comm.index, dtype=object, copy=False)
    for col in (c for c in CARRIED if c in comm):
        values = comm[col].to_numpy(dtype=object)
        mine = values[rows]
        need = np.asarray(pd.isna(mine), dtype=bool)
        if col == S.PG_RANKS:  # an empty member list counts as none
            held = np.flatnonzero(~need)
            empty = [len(v) == 0 for v in mine[held].tolist()]
            need[held[np.asarray(empty, dtype=bool)]] = True
        if need.any():
            values = values.copy()
            values[rows[need]] = values[src[need]]
            comm[col] = pd.Series(values, index=comm.index, dtype=object, copy=False)
    return comm
