"""Assemble EVENTS for one rank from decoded pieces: kinds, threads, devices, communication
columns (own args, linked from record_param_comms, record_shapes inputs, or the name).

Everything is vectorised over the whole rank except the loop over the (few) events whose
communication args were decoded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.parsers.kineto_comm import CommRecord, op_from_name
from tracekit.parsers.kineto_decode import RAW_IDX
from tracekit.parsers.kineto_nest import Nest, dict_mask, one_chunk
from tracekit.parsers.kineto_params import param_comms_side
from tracekit.parsers.kineto_piece import Piece
from tracekit.parsers.kineto_shapes import from_inputs
from tracekit.parsers.kineto_spread import release_memory, spread, spread_fast, zeros
from tracekit.parsers.kineto_stack import call_sites
from tracekit.schema import Kind, MetaSource

PARAM_COMMS = "record_param_comms"
GENERIC_THREAD = "(python)"
_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
_KIND_OF_CAT = {
    "kernel": Kind.KERNEL, "cpu_op": Kind.CPU_OP, "python_function": Kind.PYTHON,
    "user_annotation": Kind.ANNOTATION, "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "gpu_memcpy": Kind.MEMCPY, "gpu_memset": Kind.MEMSET, "cuda_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.RUNTIME, "Kernel": Kind.KERNEL, "Runtime": Kind.RUNTIME,
    "Memcpy": Kind.MEMCPY, "Memset": Kind.MEMSET,
}


def concat_pieces(
    pieces: Sequence[Piece],
) -> tuple[pa.Table, pa.Table | None, list[tuple[int, str, dict[str, Any]]],
           list[tuple[Any, Any, str]], int]:
    """(timed events, comm args side table or None, shape args, thread names, event count)."""
    tables = [p.columns for p in pieces]
    raw = pa.concat_tables(tables, promote_options="permissive") if tables else pa.table({})
    comms = [p.comm for p in pieces if p.comm is not None]
    comm = pa.concat_tables(comms, promote_options="permissive") if comms else None
    extra = [x for p in pieces for x in p.extra]
    threads = [t for p in pieces for t in p.threads]
    return raw, comm, extra, threads, sum(p.n_events for p in pieces)


def _map_dict(col: pa.ChunkedArray | pa.Array, fn: Any) -> pa.Array:
    """Apply ``fn`` to each distinct value of a dictionary column; return a plain array."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_encode()
    values = pa.array([fn(v) for v in arr.dictionary.to_pylist()], type=pa.string())
    return values.take(arr.indices)


def dict_isin(col: pa.Array, values: Sequence[str]) -> pa.Array:
    """Boolean (never null) mask of the rows of a dictionary column whose value is one of
    ``values``, computed on the dictionary."""
    hit = pc.is_in(col.dictionary, pa.array(values, pa.string()))
    return pc.fill_null(hit.take(col.indices), False)


def _kind(cat: str | None) -> str:
    return _KIND_OF_CAT.get(cat or "", Kind.OTHER)


def thread_names(threads: Sequence[tuple[Any, Any, str]]) -> dict[tuple, str]:
    """(pid, tid) -> thread or stream name from the ``M`` thread_name events.

    Kineto may name one tid twice (``thread 7 (python)`` and ``thread 7 (pt_gloo_runloop)``,
    in either order); the specific name wins over the generic ``(python)`` one."""
    out: dict[tuple, str] = {}
    for pid, tid, label in threads:
        key = (pid, tid)
        if key not in out or out[key].endswith(GENERIC_THREAD):
            out[key] = label
    return out


def build_events(
    t: pa.Table,
    comm: pa.Table | None,
    extra: Sequence[tuple[int, str, dict[str, Any]]],
    threads: Sequence[tuple[Any, Any, str]],
    *,
    rank: int,
    source: str,
    pg_by_name: Mapping[str, Mapping[str, Any]],
    pg_by_uid: Mapping[str, str],
) -> pa.Table:
    """EVENTS of one rank from its timed events ``t`` and the pieces' side data."""
    return build_events_from([t], comm, extra, threads, rank=rank, source=source,
                             pg_by_name=pg_by_name, pg_by_uid=pg_by_uid)


def _single_chunks(holder: list[pa.Table]) -> pa.Table:
    """The table taken out of ``holder``, its columns made single-chunk one at a time (each
    multi-chunk original is freed before the next column is copied)."""
    t = holder.pop()
    cols = {k: t.column(k) for k in t.column_names}
    del t
    for k in cols:
        cols[k] = one_chunk(cols[k])
    return pa.table(cols)


def build_events_from(
    raw: list[pa.Table],
    comm: pa.Table | None,
    extra: Sequence[tuple[int, str, dict[str, Any]]],
    threads: Sequence[tuple[Any, Any, str]],
    *,
    rank: int,
    source: str,
    pg_by_name: Mapping[str, Mapping[str, Any]],
    pg_by_uid: Mapping[str, str],
) -> pa.Table:
    """``build_events`` of the one table in ``raw``, which it takes out of the list: then
    nothing else holds the raw columns, and those EVENTS does not keep are freed early."""
    t = _single_chunks(raw)
    release_memory()  # the pieces' buffers: the allocator would keep their pages
    n = t.num_rows
    event_id = t.column(S.EVENT_ID).chunk(0)
    cat = t.column(S.CATEGORY).chunk(0)
    name = t.column(S.NAME).chunk(0)
    kind = pc.fill_null(_map_dict(cat, _kind), Kind.OTHER)
    kind = pc.if_else(dict_isin(name, (PARAM_COMMS,)), Kind.COMM_OP, kind).dictionary_encode()
    gpu = dict_isin(cat, _GPU_CATS)
    pid, tid = t.column(S.PID).chunk(0), t.column(S.TID).chunk(0)
    cols: dict[str, Any] = {
        S.RANK: pa.array(np.full(n, rank, dtype=np.int32) if rank else zeros(n, pa.int32())),
        S.SOURCE: pa.DictionaryArray.from_arrays(zeros(n, pa.int32()), pa.array([source])),
        S.EVENT_ID: event_id,
        S.PID: pid,
        S.TID: tid,
        S.DEVICE: pc.if_else(gpu, pid, None).cast(pa.int32()),
        S.STREAM: pc.if_else(gpu, tid, None),
        S.THREAD: _threads(pid, tid, thread_names(threads)),
        S.TS_NS: t.column(S.TS_NS),
        S.DUR_NS: pc.fill_null(t.column(S.DUR_NS), 0),
        S.NAME: name,
        S.CATEGORY: cat,
        S.KIND: kind,
        S.CORRELATION: t.column(S.CORRELATION),
        S.EXTERNAL_ID: t.column(S.EXTERNAL_ID),
        S.PY_ID: t.column(S.PY_ID),
        S.PY_PARENT_ID: t.column(S.PY_PARENT_ID),
    }
    comm_cols = _CommSpread(t, event_id, _side_table(comm, extra, pg_by_name, pg_by_uid),
                            kind)
    cols.update(comm_cols.op_columns(name))
    del t  # the raw columns not reused above can go before the call sites
    release_memory()
    # call sites read OP only: they are found before the other communication columns are
    # spread over all rows, so that their temporaries and those columns never coexist
    call_site = call_sites(pa.table(cols))
    release_memory()
    cols.update(comm_cols.other_columns())
    del comm_cols
    cols[S.CALL_SITE] = call_site
    return S.conform(pa.table(cols), S.EVENTS)


def _threads(pid: pa.Array, tid: pa.Array, threads: Mapping[tuple, str]) -> pa.Array:
    """THREAD of every row: the name of its (pid, tid), matched through one int64 key
    (pid + 1) << 32 | (tid + 1) when both fit in 31 bits, else one comparison per thread."""
    n = len(pid)
    keys = [k for k in threads if isinstance(k[0], int) and isinstance(k[1], int)]
    if not keys or not n:
        return pa.nulls(n, pa.string())
    labels = pa.array([threads[k] for k in keys], pa.string())
    bounds = [pc.min_max(pid), pc.min_max(tid)]
    lo = min(b["min"].as_py() or 0 for b in bounds)
    hi = max(b["max"].as_py() or 0 for b in bounds)
    if lo >= -1 and hi < 1 << 31 and all(0 <= k[0] < 1 << 31 and 0 <= k[1] < 1 << 31
                                         for k in keys):
        row_key = pc.bit_wise_or(pc.shift_left(pc.add(pid, 1), 32), pc.add(tid, 1))
        key = pa.array([((p + 1) << 32) | (t + 1) for p, t in keys], pa.int64())
        return labels.take(pc.index_in(row_key, value_set=key))
    p = np.asarray(pc.fill_null(pid, -1), dtype=np.int64)
    t = np.asarray(pc.fill_null(tid, -1), dtype=np.int64)
    idx = np.full(n, -1, dtype=np.int64)
    for k, (kp, kt) in enumerate(keys):
        idx[(p == kp) & (t == kt)] = k
    return labels.take(pa.array(idx, mask=idx < 0, type=pa.int64()))


def _side_table(
    comm: pa.Table | None,
    extra: Sequence[tuple[int, str, dict[str, Any]]],
    pg_by_name: Mapping[str, Mapping[str, Any]],
    pg_by_uid: Mapping[str, str],
) -> pa.Table | None:
    """One row per event with its own communication metadata, sorted by event index: the
    record_param_comms args (vectorised), else the record_shapes inputs of c10d / gloo ops."""
    parts: list[pa.Table] = []
    own: set[int] = set()
    if comm is not None and comm.num_rows:
        parts.append(param_comms_side(comm, pg_by_name, pg_by_uid))
        own = set(comm.column(RAW_IDX).to_pylist())
    distinct: list[CommRecord] = []
    which: list[int] = []  # position in ``distinct`` of each row's record
    idxs: list[int] = []
    # one record per distinct (name, args): ops repeat with the same shapes layer after layer
    cache: dict[tuple[str, bytes], int] = {}
    for idx, name, args in extra:
        if idx in own:
            continue
        key = (name or "", msgspec.json.encode(args))
        pos = cache.get(key)
        if pos is None:
            rec = from_inputs(name or "", args)
            if rec is not None:
                _fill_group(rec, pg_by_name, pg_by_uid)
                distinct.append(rec)
            pos = cache[key] = len(distinct) - 1 if rec is not None else -1
        if pos >= 0:
            which.append(pos)
            idxs.append(idx)
    if distinct:
        rows = _record_table(distinct, range(len(distinct))).take(pa.array(which, pa.int64()))
        parts.append(rows.set_column(rows.schema.get_field_index(RAW_IDX), RAW_IDX,
                                     pa.array(idxs, pa.int64())))
    if not parts:
        return None
    side = pa.concat_tables(parts, promote_options="permissive")
    return side.sort_by([(RAW_IDX, "ascending")])


def _link(t: pa.Table, kind: pa.Array, rec_idx: np.ndarray) -> np.ndarray:
    """Device events without comm args take the record of the record_param_comms op that
    launched them: by External id, else by correlation through the runtime launch."""
    linked = np.full(len(rec_idx), -1, dtype=np.int64)
    rpc = np.flatnonzero(dict_mask(kind, (Kind.COMM_OP,)) & (rec_idx >= 0))
    dev_rows = np.flatnonzero(dict_mask(kind, (Kind.KERNEL, Kind.GPU_ANNOTATION))
                              & (rec_idx < 0))
    if not rpc.size or not dev_rows.size:
        return linked
    rpc_ext = _ints(t.column(S.EXTERNAL_ID), rpc)
    order = np.argsort(rpc_ext, kind="stable")
    sorted_ext = rpc_ext[order]

    def lookup(keys: np.ndarray) -> np.ndarray:
        pos = np.clip(np.searchsorted(sorted_ext, keys), 0, len(sorted_ext) - 1)
        hit = (sorted_ext[pos] == keys) & (keys >= 0)
        return np.where(hit, rec_idx[rpc[order[pos]]], -1)

    by_ext = lookup(_ints(t.column(S.EXTERNAL_ID), dev_rows))
    missing = by_ext < 0
    if missing.any():
        runtime = np.flatnonzero(dict_mask(kind, (Kind.RUNTIME,)))
        rt_corr = _ints(t.column(S.CORRELATION), runtime)
        r_order = np.argsort(rt_corr, kind="stable")
        r_sorted = rt_corr[r_order]
        keys = _ints(t.column(S.CORRELATION), dev_rows[missing])
        if r_sorted.size:
            pos = np.clip(np.searchsorted(r_sorted, keys), 0, len(r_sorted) - 1)
            hit = (r_sorted[pos] == keys) & (keys >= 0)
            launch_ext = np.where(hit, _ints(t.column(S.EXTERNAL_ID), runtime[r_order[pos]]), -1)
            by_ext[missing] = lookup(launch_ext)
    linked[dev_rows] = by_ext
    return linked


def _ints(col: pa.ChunkedArray, rows: np.ndarray) -> np.ndarray:
    """int64 values of ``col`` at ``rows``, nulls as -1."""
    taken = col.take(pa.array(rows, pa.int64()))
    return np.array(pc.fill_null(taken, -1).to_numpy(zero_copy_only=False), dtype=np.int64)


class _CommSpread:
    """Which side-table row gives each event its communication columns (own args, linked
    from the launching record_param_comms, or taken by a c10d wrapper), and the spread."""

    def __init__(self, t: pa.Table, event_id: pa.Array, side: pa.Table | None,
                 kind: pa.Array) -> None:
        if side is None:
            side = _record_table([], [])
        ids = event_id.to_numpy()
        side_idx = side.column(RAW_IDX).to_numpy()
        pos = np.clip(np.searchsorted(side_idx, ids), 0, max(len(side_idx) - 1, 0))
        rec_idx = (np.where(side_idx[pos] == ids, pos, -1) if len(side_idx)
                   else np.full(len(ids), -1, dtype=np.int64))
        del pos, ids
        linked = _link(t, kind, rec_idx)
        self.nest = Nest(t, kind)
        linked = self.nest.wrappers_take_inner_record(rec_idx, linked, side)
        use = np.where(linked >= 0, linked, rec_idx).astype(np.int32)
        self.is_linked = pa.array(linked >= 0, pa.bool_())
        del linked
        # side rows fit in int32; the -1 slots are masked (null) anyway
        self.take = pa.array(np.maximum(use, 0), mask=use < 0, type=pa.int32())
        self.use = use
        self.rec_idx, self.side = rec_idx, side

    def op_columns(self, name: pa.Array) -> dict[str, pa.Array]:
        """OP (args, else the title a bare record_param_comms encloses, else the name) and
        META_SOURCE."""
        op = pc.coalesce(spread(self.side.column(S.OP), self.take, keep_strings=True),
                         _map_dict(name, op_from_name))
        op = self.nest.bare_param_comms_take_title_op(op, self.rec_idx)
        source = spread(self.side.column(S.META_SOURCE), self.take, keep_strings=True)
        source = pc.if_else(self.is_linked, MetaSource.LINKED, source)
        source = pc.if_else(pc.and_(pc.is_null(source), pc.is_valid(op)), MetaSource.NAME,
                            source)
        self.nest = self.rec_idx = self.is_linked = None  # type: ignore[assignment]
        # encoded now (as EVENTS wants them): the n-row strings go before the spread
        return {S.OP: op.dictionary_encode(), S.META_SOURCE: source.dictionary_encode()}

    def other_columns(self) -> dict[str, pa.Array]:
        return {f: spread_fast(self.side.column(f), self.take, self.use)
                for f in self.side.column_names if f not in (RAW_IDX, S.OP, S.META_SOURCE)}


def _record_table(recs: Sequence[CommRecord], idxs: Sequence[int]) -> pa.Table:
    types = {
        S.OP: pa.string(), S.COLL_NAME: pa.string(), S.DTYPE: pa.string(),
        S.IN_NELEMS: pa.int64(), S.OUT_NELEMS: pa.int64(), S.IN_SPLIT: pa.list_(pa.int64()),
        S.OUT_SPLIT: pa.list_(pa.int64()), S.GROUP_SIZE: pa.int32(), S.PG_NAME: pa.string(),
        S.PG_DESC: pa.string(), S.PG_RANKS: pa.list_(pa.int32()), S.SEQ: pa.int64(),
        S.COMMS_ID: pa.uint64(), S.PEER_RANK: pa.int32(), S.META_SOURCE: pa.string(),
    }
    arrays = {RAW_IDX: pa.array(idxs, pa.int64())}
    arrays.update({k: pa.array([getattr(r, k) for r in recs], type=v) for k, v in types.items()})
    arrays[S.IN_BYTES] = pa.array([r.nbytes(r.in_nelems) for r in recs], pa.int64())
    arrays[S.OUT_BYTES] = pa.array([r.nbytes(r.out_nelems) for r in recs], pa.int64())
    return pa.table(arrays)


def _fill_group(
    rec: CommRecord, pg_by_name: Mapping[str, Mapping[str, Any]], pg_by_uid: Mapping[str, str]
) -> None:
    """Fill description / ranks / size from distributedInfo.pg_config by group name or uid."""
    if rec.pg_name is not None and rec.pg_name not in pg_by_name and rec.pg_name in pg_by_uid:
        rec.pg_name = pg_by_uid[rec.pg_name]
    pg = pg_by_name.get(rec.pg_name or "")
    if pg is None:
        return
    if rec.pg_desc is None:
        rec.pg_desc = pg.get("desc")
    if rec.pg_ranks is None:
        rec.pg_ranks = pg.get("ranks")
    if rec.group_size is None and rec.pg_ranks:
        rec.group_size = len(rec.pg_ranks)
