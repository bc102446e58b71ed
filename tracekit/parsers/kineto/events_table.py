"""Assemble EVENTS for one rank from decoded pieces: kinds, threads, devices, communication
columns (own args, linked from record_param_comms, record_shapes inputs, or the name).

Everything is vectorised over the whole rank except the loop over the (few) events whose
communication args were decoded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from tracekit import schema as S
from tracekit.parsers.kineto import arrow_values as V
from tracekit.parsers.kineto.block_columns import Piece
from tracekit.parsers.kineto.call_sites import call_sites
from tracekit.parsers.kineto.columns import (
    GPU_CATS,
    kinds,
    no_nulls,
    on_gpu,
    shared_on_gpu,
    thread_column,
)
from tracekit.parsers.kineto.comm import CommRecord, op_from_name
from tracekit.parsers.kineto.decode import RAW_IDX
from tracekit.parsers.kineto.dict_codes import conform, dict_codes, encode_codes, masked
from tracekit.parsers.kineto.nest import (
    FirstIndex,
    Launches,
    Nest,
    dict_mask,
    filled_ints,
    ints_at,
    one_chunk,
)
from tracekit.parsers.kineto.params import param_comms_side
from tracekit.parsers.kineto.shape_ops import ShapeOps
from tracekit.parsers.kineto.shapes import from_inputs
from tracekit.parsers.kineto.sparse_columns import (
    SMALL_ROWS,
    Holders,
    all_null,
    release_memory,
    spread_fast,
    spread_small,
    zeros,
)
from tracekit.schema import Kind, MetaSource

GENERIC_THREAD = "(python)"


def concat_pieces(
    pieces: Sequence[Piece],
) -> tuple[pa.Table, pa.Table | None, ShapeOps, list[tuple[Any, Any, str]], int]:
    """(timed events, comm args side table or None, c10d / gloo ops with their shape args,
    thread names, event count)."""
    tables = [p.columns for p in pieces]
    raw = pa.concat_tables(tables, promote_options="permissive") if tables else pa.table({})
    comms = [p.comm for p in pieces if p.comm is not None]
    comm = pa.concat_tables(comms, promote_options="permissive") if comms else None
    extra = ShapeOps.of([x for p in pieces for x in p.extra])
    threads = [t for p in pieces for t in p.threads]
    return raw, comm, extra, threads, sum(p.n_events for p in pieces)


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
    side_data: list[Any],
    threads: Sequence[tuple[Any, Any, str]],
    *,
    rank: int,
    source: str,
    pg_by_name: Mapping[str, Mapping[str, Any]],
    pg_by_uid: Mapping[str, str],
) -> pa.Table:
    """EVENTS of one rank from the one timed-event table in ``raw`` and ``side_data``
    ([comm args side table or None, ShapeOps]), which it takes out of their lists: then
    nothing else holds them, and what EVENTS does not keep is freed early."""
    t = _single_chunks(raw)
    comm, extra = side_data
    side_data.clear()
    n = t.num_rows
    release_memory(n)  # the pieces' buffers: the allocator would keep their pages
    event_id = t.column(S.EVENT_ID).chunk(0)
    cat = t.column(S.CATEGORY).chunk(0)
    name = t.column(S.NAME).chunk(0)
    kind = kinds(cat, name)
    gpu = dict_mask(cat, GPU_CATS)
    pid, tid = t.column(S.PID).chunk(0), t.column(S.TID).chunk(0)
    cols: dict[str, Any] = {
        S.RANK: V.from_numpy(np.full(n, rank, dtype=np.int32)) if rank else zeros(n, pa.int32()),
        S.SOURCE: pa.DictionaryArray.from_arrays(zeros(n, pa.int32()), V.strings([source])),
        S.EVENT_ID: event_id,
        S.PID: pid,
        S.TID: tid,
        S.DEVICE: on_gpu(pid, gpu, np.int32, pa.int32()),
        S.STREAM: shared_on_gpu(tid, gpu),
        S.THREAD: thread_column(pid, tid, thread_names(threads)),
        S.TS_NS: t.column(S.TS_NS),
        S.DUR_NS: no_nulls(t.column(S.DUR_NS).chunk(0)),
        S.NAME: name,
        S.CATEGORY: cat,
        S.KIND: kind,
        S.CORRELATION: t.column(S.CORRELATION),
        S.EXTERNAL_ID: t.column(S.EXTERNAL_ID),
        S.PY_ID: t.column(S.PY_ID),
        S.PY_PARENT_ID: t.column(S.PY_PARENT_ID),
    }
    side = _side_table(comm, extra, pg_by_name, pg_by_uid)
    del comm, extra
    # shared by _link and call_sites: the launches and the ids they are found by
    launches = Launches(kind, filled_ints(t.column(S.CORRELATION)),
                        filled_ints(t.column(S.EXTERNAL_ID)))
    comm_cols = _CommSpread(t, event_id, side, kind, launches)
    del side
    cols.update(comm_cols.op_columns(name))
    del t  # the raw columns not reused above can go before the call sites
    release_memory(n)
    # call sites read OP only: they are found before the other communication columns are
    # spread over all rows, so that their temporaries and those columns never coexist
    call_site = call_sites(pa.table(cols), launches)
    del launches
    release_memory(n)
    cols.update(comm_cols.other_columns())
    del comm_cols
    cols[S.CALL_SITE] = call_site
    _absent_as_nulls(cols, n)
    return conform(pa.table(cols), S.EVENTS)


def _absent_as_nulls(cols: dict[str, Any], n: int) -> None:
    """The EVENTS columns a Kineto file never fills (the profiler's own communication
    times of an Ascend export) as all-null arrays over a lazily mapped zero buffer: the
    nulls conform would add are written, four int64 columns of zeros that counted about
    49 MiB in the peak RSS of the 500 MB benchmark rank. A small file keeps conform's."""
    if n < SMALL_ROWS:
        return
    for f in S.EVENTS:
        if f.name not in cols:
            nulls = all_null(n, f.type)
            if nulls is not None:
                cols[f.name] = nulls


def _side_table(
    comm: pa.Table | None,
    ops: ShapeOps,
    pg_by_name: Mapping[str, Mapping[str, Any]],
    pg_by_uid: Mapping[str, str],
) -> pa.Table | None:
    """One row per event with its own communication metadata, sorted by event index: the
    record_param_comms args (vectorised), else the record_shapes inputs of c10d / gloo ops
    (one record per distinct (name, args): ops repeat with the same shapes layer after
    layer)."""
    parts: list[pa.Table] = []
    part_idx: list[np.ndarray] = []  # the event index of each row of ``parts``
    todo = np.ones(len(ops), dtype=bool)  # the ops without record_param_comms args of their own
    if comm is not None and comm.num_rows:
        parts.append(param_comms_side(comm, pg_by_name, pg_by_uid))
        part_idx.append(np.asarray(V.numpy(parts[0].column(RAW_IDX)), dtype=np.int64))
        own = np.sort(np.asarray(V.numpy(comm.column(RAW_IDX)), dtype=np.int64))
        if len(ops):
            todo = own[np.minimum(np.searchsorted(own, ops.event), own.size - 1)] != ops.event
    keys = ops.key[todo]
    record_of = np.full(len(ops.distinct), -1, dtype=np.int64)  # -1: the inputs give none
    distinct: list[CommRecord] = []
    for k in np.unique(keys).tolist():
        name, args = ops.distinct[k]
        rec = from_inputs(name, args)
        if rec is not None:
            _fill_group(rec, pg_by_name, pg_by_uid)
            record_of[k] = len(distinct)
            distinct.append(rec)
    # every row comes out of one take of the parts (the distinct records once each), in
    # event order (a stable sort, as Arrow's sort_by)
    src = [np.arange(parts[0].num_rows, dtype=np.int64)] if parts else []
    if distinct:
        which = record_of[keys]
        held = which >= 0
        part_idx.append(ops.event[todo][held])
        src.append(which[held] + (parts[0].num_rows if parts else 0))
        parts.append(_record_table(distinct, range(len(distinct))))
    if not parts:
        return None
    side = pa.concat_tables(parts, promote_options="permissive")
    idx = np.concatenate(part_idx)
    order = np.argsort(idx, kind="stable")
    side = side.take(V.from_numpy(np.concatenate(src)[order]))
    return side.set_column(side.schema.get_field_index(RAW_IDX), RAW_IDX,
                           V.from_numpy(idx[order], pa.int64()))


def _link(t: pa.Table, kind: pa.Array, rec_idx: np.ndarray,
          launches: Launches | None = None) -> np.ndarray:
    """Device events without comm args take the record of the record_param_comms op that
    launched them: by External id, else by correlation through the runtime launch."""
    linked = np.full(len(rec_idx), -1, dtype=np.int32)
    rpc = np.flatnonzero(dict_mask(kind, (Kind.COMM_OP,)) & (rec_idx >= 0))
    dev_rows = np.flatnonzero(dict_mask(kind, (Kind.KERNEL, Kind.GPU_ANNOTATION))
                              & (rec_idx < 0))
    if not rpc.size or not dev_rows.size:
        return linked
    if launches is None:
        launches = Launches(kind, t.column(S.CORRELATION), t.column(S.EXTERNAL_ID))
    ext = launches.external
    by_id = FirstIndex(ints_at(ext, rpc), max(4 * rpc.size, len(rec_idx)) + 1024)
    rpc_rec = rec_idx[rpc]

    def lookup(keys: np.ndarray) -> np.ndarray:
        pos = by_id.find(keys)
        return np.where(pos >= 0, rpc_rec[np.maximum(pos, 0)], -1)

    by_ext = lookup(ints_at(ext, dev_rows))
    missing = by_ext < 0
    if missing.any():
        launch = launches.find(ints_at(launches.correlation, dev_rows[missing]))
        launch_ext = np.full(launch.size, -1, dtype=np.int64)
        hit = launch >= 0
        launch_ext[hit] = ints_at(ext, launch[hit])
        by_ext[missing] = lookup(launch_ext)
    linked[dev_rows] = by_ext
    return linked


class _CommSpread:
    """Which side-table row gives each event its communication columns (own args, linked
    from the launching record_param_comms, or taken by a c10d wrapper), and the spread.

    Row positions are int32 numpy arrays (-1: none) and the string columns are built in
    code space (kineto_dict_codes): no n-row string or int64 intermediates."""

    def __init__(self, t: pa.Table, event_id: pa.Array, side: pa.Table | None,
                 kind: pa.Array, launches: Launches | None = None) -> None:
        if side is None:
            side = _record_table([], [])
        rec_idx = _positions(V.numpy(event_id), V.numpy(side.column(RAW_IDX)))
        linked = _link(t, kind, rec_idx, launches)
        self.nest = Nest(t, kind)
        linked = self.nest.wrappers_take_inner_record(rec_idx, linked, side)
        self.is_linked = linked >= 0
        use = np.where(self.is_linked, linked, rec_idx)
        del linked
        # side rows fit in int32; the -1 slots are masked (null) anyway
        held = use >= 0
        self.take = masked(np.maximum(use, 0), held, pa.int32())
        self.use = use
        self.holders = Holders(self.take, use, held)
        self.rec_idx, self.side = rec_idx, side

    def _side_codes(self, key: str) -> tuple[np.ndarray, list[str | None]]:
        """Codes (-1: none) of the side rows into the distinct values of a string side
        column, and the values."""
        arr = self.side.column(key).combine_chunks().dictionary_encode()
        return dict_codes(arr), arr.dictionary.to_pylist()

    def op_columns(self, name: pa.Array) -> dict[str, pa.Array]:
        """OP (args, else the title a bare record_param_comms encloses, else the name) and
        META_SOURCE."""
        held, rec = self.holders.rows, self.holders.rec
        side_op, op_values = self._side_codes(S.OP)
        by_name = [op_from_name(v) if v is not None else None
                   for v in name.dictionary.to_pylist()]
        # every row starts with the op of its name; the rows with a record whose args give
        # an op take that one
        op = np.take(np.array([-1 if v is None else len(op_values) + i
                               for i, v in enumerate(by_name)] + [-1], dtype=np.int32),
                     dict_codes(name))  # np.take: int32 indices without an intp copy
        rec_op = side_op[rec]
        op[held] = np.where(rec_op >= 0, rec_op, op[held])
        op_values = [*op_values, *by_name]
        self.nest.bare_param_comms_take_title_codes(op, self.rec_idx)
        side_source, source_values = self._side_codes(S.META_SOURCE)
        source = np.full(len(op), -1, dtype=np.int32)
        source[held] = side_source[rec]
        source[self.is_linked] = len(source_values)
        source[(source < 0) & (op >= 0)] = len(source_values) + 1
        source_values = [*source_values, MetaSource.LINKED, MetaSource.NAME]
        self.nest = self.rec_idx = self.is_linked = None  # type: ignore[assignment]
        return {S.OP: encode_codes(op, op_values),
                S.META_SOURCE: encode_codes(source, source_values)}

    def other_columns(self) -> dict[str, pa.Array]:
        keys = [f for f in self.side.column_names if f not in (RAW_IDX, S.OP, S.META_SOURCE)]
        if len(self.use) < SMALL_ROWS:  # a small file: one take of all the columns
            return spread_small(self.side, keys, self.take)
        return {f: spread_fast(self.side.column(f), self.take, self.use, self.holders)
                for f in keys}


def _positions(ids: np.ndarray, side_idx: np.ndarray) -> np.ndarray:
    """int32 position in ``side_idx`` (sorted) of each of ``ids`` (sorted), -1 if absent."""
    out = np.full(len(ids), -1, dtype=np.int32)
    if not len(side_idx) or not len(ids):
        return out
    rows = np.clip(np.searchsorted(ids, side_idx), 0, len(ids) - 1)
    hit = np.flatnonzero(ids[rows] == side_idx)[::-1]  # reversed: the first position wins
    out[rows[hit]] = hit.astype(np.int32)
    return out


def _record_table(recs: Sequence[CommRecord], idxs: Sequence[int]) -> pa.Table:
    types = {
        S.OP: pa.string(), S.COLL_NAME: pa.string(), S.DTYPE: pa.string(),
        S.IN_NELEMS: pa.int64(), S.OUT_NELEMS: pa.int64(), S.IN_SPLIT: pa.list_(pa.int64()),
        S.OUT_SPLIT: pa.list_(pa.int64()), S.GROUP_SIZE: pa.int32(), S.PG_NAME: pa.string(),
        S.PG_DESC: pa.string(), S.PG_RANKS: pa.list_(pa.int32()), S.SEQ: pa.int64(),
        S.COMMS_ID: pa.uint64(), S.PEER_RANK: pa.int32(), S.META_SOURCE: pa.string(),
    }
    arrays = {RAW_IDX: V.ints(list(idxs), pa.int64())}
    arrays.update({k: V.array([getattr(r, k) for r in recs], v) for k, v in types.items()})
    arrays[S.IN_BYTES] = V.ints([r.nbytes(r.in_nelems) for r in recs], pa.int64())
    arrays[S.OUT_BYTES] = V.ints([r.nbytes(r.out_nelems) for r in recs], pa.int64())
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
