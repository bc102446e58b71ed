"""FR rows as a Run (EVENTS + PROCESS_GROUPS + RANK_INFO), so that the same rules engine as
`tracekit analyze` attributes them: the process-group description and members, the call
site of the entry's stack, and the op.

Each entry becomes one communication event named by its profiling_name (``gloo:all_reduce``
is a gloo runloop annotation to the kernel-class rules, ``nccl:all_reduce`` an NCCL
annotation), at its ``time_created_ns``, with zero duration: the Flight Recorder says when a
collective was enqueued, not how long it ran on gloo.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import model
from tracekit import schema as S
from tracekit.schema import Kind, MetaSource


def fr_events(fr: pa.Table) -> pa.Table:
    """EVENTS rows for the FR rows, in the same order (event_id = position within the rank)."""
    n = fr.num_rows
    rank = fr.column(S.RANK).combine_chunks()
    # position within the rank: rows are grouped by rank, in dump order
    values = rank.to_numpy(zero_copy_only=False)
    _, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    event_id = np.arange(n, dtype=np.int64) - first[inverse]
    cols = {
        S.RANK: rank, S.SOURCE: fr.column(S.SOURCE),
        S.EVENT_ID: pa.array(event_id, pa.int64()),
        S.TS_NS: fr.column(S.TS_NS).fill_null(0), S.DUR_NS: pa.array([0] * n, pa.int64()),
        S.NAME: fr.column(S.COLL_NAME), S.CATEGORY: pa.array(["flight_recorder"] * n),
        S.KIND: pa.array([Kind.ANNOTATION] * n), S.THREAD: fr.column(S.THREAD),
        S.CALL_SITE: fr.column(S.CALL_SITE), S.OP: fr.column(S.OP),
        S.COLL_NAME: fr.column(S.COLL_NAME),
        S.IN_NELEMS: fr.column(S.IN_NELEMS), S.OUT_NELEMS: fr.column(S.OUT_NELEMS),
        S.GROUP_SIZE: pc.list_value_length(fr.column(S.PG_RANKS)).cast(pa.int32()),
        S.PG_NAME: fr.column(S.PG_NAME), S.PG_DESC: fr.column(S.PG_DESC),
        S.PG_RANKS: fr.column(S.PG_RANKS), S.SEQ: fr.column(S.SEQ),
        S.META_SOURCE: pa.array([MetaSource.ARGS] * n),
    }
    return S.conform(pa.table(cols), S.EVENTS)


def fr_process_groups(fr: pa.Table) -> pa.Table:
    """PROCESS_GROUPS: one row per (rank, group) whose members are known."""
    keys = fr.select([S.RANK, S.PG_NAME, S.PG_DESC, S.PG_RANKS]).to_pylist()
    seen: set[tuple[int, str, str]] = set()
    rows = []
    for k in keys:
        ranks = k[S.PG_RANKS]
        ident = (k[S.RANK], k[S.PG_NAME], k[S.PG_DESC])
        if not ranks or ident in seen:
            continue
        seen.add(ident)
        rows.append({S.RANK: k[S.RANK], S.PG_NAME: k[S.PG_NAME], S.PG_DESC: k[S.PG_DESC],
                     S.PG_RANKS: ranks, S.GROUP_SIZE: len(ranks),
                     S.GROUP_RANK: ranks.index(k[S.RANK]) if k[S.RANK] in ranks else None})
    if not rows:
        return S.empty(S.PROCESS_GROUPS)
    return S.conform(pa.Table.from_pylist(rows), S.PROCESS_GROUPS)


def fr_run(fr: pa.Table) -> model.Run:
    """The FR rows as a Run for ``tracekit.rules.engine.attribute_events``."""
    ranks = sorted(set(fr.column(S.RANK).to_pylist()))
    members = pc.list_flatten(fr.column(S.PG_RANKS))
    world = max([*ranks, *(members.to_pylist() if len(members) else [])], default=-1) + 1
    info = S.conform(pa.table({S.RANK: pa.array(ranks, pa.int32()),
                               S.FORMAT: pa.array(["flight_recorder"] * len(ranks)),
                               S.WORLD_SIZE: pa.array([world] * len(ranks), pa.int32())}),
                     S.RANK_INFO)
    return model.Run(fr_events(fr), fr_process_groups(fr), info)
