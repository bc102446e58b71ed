"""Vectorised normalisation of record_param_comms args (and their copies on kernels) into the
communication columns of EVENTS (TRACE_FORMATS.md A.1/A.2).

Input: the ``comm`` side table of the decoded pieces (``idx`` + raw fields, one row per event
that has them). Every per-value step (op names, dtype sizes, rank lists) runs once per distinct
value through the dictionary, never once per event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.parsers.kineto import arrow_values as V
from tracekit.parsers.kineto.comm import DTYPE_BYTES, fits, op_from_collective, parse_int_list
from tracekit.parsers.kineto.decode import RAW_IDX
from tracekit.schema import MetaSource, Op

MAX_GROUP = 1 << 20  # ranks in a group rebuilt from its start and stride, at most
_FEW_ROWS = 256  # comm tables up to this size are mapped row by row (small rank files)
_P2P_OR_ROOTED = (Op.SEND, Op.RECV, Op.BROADCAST, Op.REDUCE, Op.GATHER, Op.SCATTER)


def map_values(col: pa.ChunkedArray | pa.Array, fn: Callable[[Any], Any],
               typ: pa.DataType) -> pa.Array:
    """``fn`` applied once per distinct value of ``col``, spread back to every row."""
    if len(col) <= _FEW_ROWS:  # a few rows: Python values cost less than encoding them
        memo: dict[Any, Any] = {}
        return V.array([memo[v] if v in memo else memo.setdefault(v, fn(v))
                        for v in col.to_pylist()], typ)
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_encode()
    values = V.array([fn(v) for v in arr.dictionary.to_pylist()], typ)
    return values.take(arr.indices)


def _nonempty_list(text: Any) -> list[int] | None:
    return parse_int_list(text) or None


def _nonempty_ranks(text: Any) -> list[int] | None:
    """A rank list (int32 values)."""
    return parse_int_list(text, bits=32) or None


def _int32(col: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """An integer column as int32, null where a value does not fit."""
    fits = pc.and_(pc.greater_equal(col, V.scalar(-(1 << 31), pa.int64())),
                   pc.less(col, V.scalar(1 << 31, pa.int64())))
    return pc.if_else(fits, col, V.scalar(None, col.type)).cast(pa.int32())


def param_comms_side(
    comm: pa.Table,
    pg_by_name: Mapping[str, Mapping[str, Any]],
    pg_by_uid: Mapping[str, str],
) -> pa.Table:
    """Side table (``idx`` + EVENTS communication columns) of events with comm args."""
    n = comm.num_rows
    coll = comm.column("coll_name")
    op = map_values(coll, op_from_collective, pa.string())
    in_n = pc.coalesce(comm.column("in_nelems"), comm.column("in_size"))
    out_n = pc.coalesce(comm.column("out_nelems"), comm.column("out_size"))
    size = map_values(comm.column("dtype"), DTYPE_BYTES.get, pa.int64())
    in_split = map_values(comm.column("in_split"), _nonempty_list, pa.list_(pa.int64()))
    out_split = map_values(comm.column("out_split"), _nonempty_list, pa.list_(pa.int64()))
    has_split = pc.or_(pc.is_valid(in_split), pc.is_valid(out_split))
    op = pc.if_else(pc.and_(pc.equal(op, V.scalar(Op.ALL_TO_ALL, pa.string())), has_split),
                    V.scalar(Op.ALL_TO_ALLV, pa.string()), op)
    # group name: the name, else the 2024 integer ID mapped through pg_config's uid
    pg_name = pc.coalesce(
        comm.column("pg_name"),
        map_values(comm.column("pg_id"), lambda v: None if v is None else pg_by_uid.get(v, v),
                   pa.string()),
    )
    desc_of = {k: v.get("desc") for k, v in pg_by_name.items()}
    ranks_of = {k: v.get("ranks") for k, v in pg_by_name.items()}
    pg_desc = pc.coalesce(comm.column("pg_desc"), map_values(pg_name, desc_of.get, pa.string()))
    ranks = map_values(comm.column("pg_ranks"), _nonempty_ranks, pa.list_(pa.int32()))
    ranks = pc.coalesce(ranks, map_values(pg_name, ranks_of.get, pa.list_(pa.int32())))
    ranks = _ranks_from_stride(ranks, comm)
    group_size = pc.coalesce(_int32(comm.column("group_size")), pc.list_value_length(ranks))
    return pa.table({
        RAW_IDX: comm.column(RAW_IDX),
        S.OP: op,
        S.COLL_NAME: coll,
        S.DTYPE: comm.column("dtype"),
        S.IN_NELEMS: in_n,
        S.OUT_NELEMS: out_n,
        S.IN_BYTES: pc.multiply(in_n, size),
        S.OUT_BYTES: pc.multiply(out_n, size),
        S.IN_SPLIT: in_split,
        S.OUT_SPLIT: out_split,
        S.GROUP_SIZE: group_size,
        S.PG_NAME: pg_name,
        S.PG_DESC: pg_desc,
        S.PG_RANKS: ranks,
        S.SEQ: comm.column("seq"),
        S.COMMS_ID: comm.column("comms_id"),
        S.PEER_RANK: _peers(op, ranks, comm),
        S.META_SOURCE: V.strings([MetaSource.ARGS] * n),
    })


def _ranks_from_stride(ranks: pa.Array, comm: pa.Table) -> pa.Array:
    """Truncated rank lists rebuilt from Global rank start/stride and Group size."""
    missing = np.flatnonzero(V.numpy(V.fill_null(pc.is_null(ranks), True)))
    if not missing.size:
        return ranks
    start = comm.column("rank_start").to_pylist()
    stride = comm.column("rank_stride").to_pylist()
    size = comm.column("group_size").to_pylist()
    values = ranks.to_pylist()
    for i in missing.tolist():
        if start[i] is not None and stride[i] and size[i] and 0 < size[i] <= MAX_GROUP:
            rebuilt = [start[i] + stride[i] * k for k in range(size[i])]
            values[i] = rebuilt if fits(rebuilt, 32) else None
    return V.array(values, pa.list_(pa.int32()))


def _peers(op: pa.Array, ranks: pa.Array, comm: pa.Table) -> pa.Array:
    """Global peer of send/recv, or root of broadcast/reduce/gather/scatter (``Rank`` is
    group-local there; ``Src Rank``/``Dst Rank`` are global when present)."""
    n = comm.num_rows
    out: list[int | None] = [None] * n
    rows = np.flatnonzero(V.numpy(V.fill_null(pc.is_in(op, V.strings(_P2P_OR_ROOTED)),
                                                 False)))
    if rows.size:
        ops = op.to_pylist()
        src, dst = comm.column("src_rank").to_pylist(), comm.column("dst_rank").to_pylist()
        local, members = comm.column("rank").to_pylist(), ranks.to_pylist()
        for i in rows.tolist():
            if ops[i] == Op.SEND and dst[i] is not None:
                out[i] = dst[i]
            elif ops[i] == Op.RECV and src[i] is not None:
                out[i] = src[i]
            elif local[i] is not None and members[i] and 0 <= local[i] < len(members[i]):
                out[i] = members[i][local[i]]
    return _int32(V.ints(out, pa.int64()))
