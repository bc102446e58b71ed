"""Time classes per rank, device and stream, and exposed communication.

A *device* is where time is spent: a GPU/NPU (its trace pid) or, on CPU-only traces (gloo),
the host process, where communication runs on the pt_gloo_runloop threads and compute on the
main thread. Classes (schema.KernelClass): pure communication, fused compute-plus-exchange,
compute, memcpy; idle is the device span minus the union of all of them.

Exposed communication is the part of a communication interval not covered by compute or fused
time on the same device (HTA / msprof definition, BOUNDS_AND_PEERS.md section 7.2); a fused
interval's exposed part is what no other compute covers. All of it is computed by sorting and
sweeping (tracekit.measure.intervals), never by comparing pairs of events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema
from tracekit.measure.intervals import (
    I64,
    LINE_LIMIT,
    Lanes,
    Segments,
    Union,
    by_key,
    group_rows,
    lane_start_order,
    segments,
    uncovered,
    union,
)
from tracekit.schema import KernelClass, Kind

CLASSES = (KernelClass.COMM, KernelClass.FUSED, KernelClass.COMPUTE, KernelClass.MEMCPY)
COMM, FUSED, COMPUTE, MEMCPY = range(4)
CLASS_COLUMNS = (schema.COMM_NS, schema.FUSED_NS, schema.COMPUTE_NS, schema.MEMCPY_NS)


def value_codes(table: pa.Table, name: str, values: tuple[str, ...]) -> npt.NDArray[np.int32]:
    """Per row, the index of the row's string in ``values``: -1 where it is another string,
    -2 where null. Dictionary columns are looked up once per distinct value, not per row,
    and every row reads its entry's code by a numpy take into the output (no Arrow take,
    no copy per chunk)."""
    column = table.column(name)
    out = np.empty(len(column), dtype=np.int32)  # writable
    want = pa.array(list(values), type=pa.string())
    at = 0
    for chunk in column.chunks:
        part = out[at:at + len(chunk)]
        at += len(chunk)
        if pa.types.is_dictionary(chunk.type):
            words = chunk.dictionary.cast(pa.string())
            per_value = np.append(np.asarray(pc.if_else(
                pc.is_valid(words), pc.fill_null(pc.index_in(words, want), -1),
                pa.scalar(-2, pa.int32())).to_numpy(zero_copy_only=False), dtype=np.int32),
                np.int32(-2))  # the last entry: a null row's
            indices = chunk.indices
            if indices.null_count:
                indices = pc.fill_null(indices, len(words))
            np.take(per_value, indices.to_numpy(), out=part, mode="clip")
            continue
        idx = pc.fill_null(pc.index_in(chunk.cast(pa.string()), want), -1)
        part[:] = np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int32)
        part[~np.asarray(chunk.is_valid().to_numpy(zero_copy_only=False), dtype=bool)] = -2
    return out


def _ints(table: pa.Table, name: str, null: int = -1) -> I64:
    return np.asarray(pc.fill_null(table.column(name), null).to_numpy(), dtype=np.int64)


def _class_codes(table: pa.Table) -> npt.NDArray[np.int8]:
    """Kernel class code per row (-1: not timed), with fallbacks for unclassified rows."""
    cls = value_codes(table, schema.KERNEL_CLASS, CLASSES)
    kind = value_codes(table, schema.KIND, (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.CPU_OP))
    codes = np.where(cls >= 0, cls, -1).astype(np.int8)
    device = np.asarray(table.column(schema.DEVICE).is_valid().to_numpy(zero_copy_only=False))
    unclassified = (cls == -2) & ~np.asarray(
        table.column(schema.OP).is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    codes[unclassified & device & (kind == 0)] = COMPUTE
    codes[unclassified & ((kind == 1) | (kind == 2))] = MEMCPY
    rank = _ints(table, schema.RANK)
    timed_device = np.zeros(int(rank.max(initial=0)) + 1, dtype=bool)
    timed_device[rank[device & (codes >= 0)]] = True
    host_rank = ~timed_device[rank]
    # GPU ranks: only device rows; CPU-only ranks: the process is the device.
    codes[~device & ~host_rank] = -1
    instance = np.asarray(pc.fill_null(table.column(schema.IS_INSTANCE), False).to_numpy(
        zero_copy_only=False), dtype=bool)
    codes[~device & (codes <= FUSED) & ~instance] = -1
    has_compute = np.zeros_like(timed_device)
    has_compute[rank[codes == COMPUTE]] = True
    fallback = host_rank & ~has_compute[rank] & unclassified & (kind == 3)
    codes[fallback] = COMPUTE
    return codes


@dataclass(frozen=True)
class Timeline:
    """The timed rows of an ATTRIBUTED table, placed on per-device lanes."""

    row: I64  # index into the ATTRIBUTED table
    lane_of_row: I64  # lane of every ATTRIBUTED row (-1 where the pid is unknown)
    lane_rank: I64
    lane_pid: I64
    lane: I64
    tid: I64
    start: I64
    end: I64
    cls: npt.NDArray[np.int8]
    lanes: Lanes
    cover_any_compute: Union  # compute or fused, per device
    cover_compute: Union  # compute only, per device

    @property
    def n_lanes(self) -> int:
        return int(self.lane_rank.size)


def build_timeline(attributed: pa.Table) -> Timeline:
    rank = _ints(attributed, schema.RANK)
    pid = _ints(attributed, schema.PID)
    uniq, lane_of_row = group_rows(rank, pid)
    codes = _class_codes(attributed)
    row = np.flatnonzero(codes >= 0).astype(np.int64)
    ts = _ints(attributed, schema.TS_NS)
    dur = np.maximum(_ints(attributed, schema.DUR_NS, 0), 0)
    # rows in (lane, start) order: every union over lanes (or keys refining them) then
    # finds its input sorted and skips its own sort
    row = row[lane_start_order(lane_of_row[row], ts[row])]
    start, end = ts[row], ts[row] + dur[row]
    lane, cls = lane_of_row[row], codes[row]
    n_lanes = int(uniq.shape[0])
    lanes = Lanes.build(lane, start, end, n_lanes)
    comp = cls == COMPUTE
    anyc = comp | (cls == FUSED)
    return Timeline(
        row=row, lane_of_row=lane_of_row, lane_rank=uniq[:, 0].astype(np.int64),
        lane_pid=uniq[:, 1].astype(np.int64), lane=lane, tid=_ints(attributed, schema.TID)[row],
        start=start, end=end, cls=cls, lanes=lanes,
        cover_any_compute=union(lanes, lane[anyc], start[anyc], end[anyc]),
        cover_compute=union(lanes, lane[comp], start[comp], end[comp]),
    )


def exposed_ns(tl: Timeline, rows: I64, start: I64, end: I64, fused: npt.NDArray[np.bool_]) -> I64:
    """Exposed part of the given ATTRIBUTED rows' intervals on their device.

    Communication rows: not covered by compute or fused time; fused rows: not covered by
    compute.
    """
    lane = tl.lane_of_row[rows]
    out = uncovered(tl.lanes, tl.cover_any_compute, lane, start, end)
    if fused.any():
        out[fused] = uncovered(tl.lanes, tl.cover_compute, lane[fused], start[fused], end[fused])
    return out


def exposed_by_key(tl: Timeline, inv: I64, n: int, key_lane: I64) -> I64:
    """Exposed communication per key: the union of the key's communication intervals (overlaps
    counted once) minus what compute or fused time covers on the key's device.

    ``inv`` gives the key of every timed row, ``key_lane`` the device lane of every key.
    """
    return exposed_of_rows(tl, inv, tl.start, tl.end, tl.cls, n, key_lane)


def exposed_of_rows(tl: Timeline, inv: I64, start: I64, end: I64, cls: npt.NDArray[np.int8],
                    n: int, key_lane: I64) -> I64:
    """exposed_by_key of the timed rows given as (key, start, end, class) in any order (with
    the rows grouped by key, no union sorts its own)."""
    comm = cls == COMM
    return exposed_of_segments(tl, segments(inv[comm], start[comm], end[comm], n), n, key_lane)


def exposed_of_segments(tl: Timeline, comm: Segments, n: int, key_lane: I64) -> I64:
    """Exposed communication per key from the union of the key's communication intervals
    (``comm``): the part of it that no compute or fused time covers on the key's device."""
    if not comm.key.size:
        return np.zeros(n, dtype=np.int64)
    seg = uncovered_of_segments(tl, comm, key_lane)
    return np.bincount(comm.key, weights=seg, minlength=n).astype(np.int64)


def uncovered_of_segments(tl: Timeline, comm: Segments, key_lane: I64) -> I64:
    """Per segment of ``comm``, its part that no compute or fused time covers on its key's
    device (``key_lane``: the lane of every key)."""
    return uncovered(tl.lanes, tl.cover_any_compute, key_lane[comm.key], comm.start, comm.end)


def class_segments(inv: I64, start: I64, end: I64, cls: npt.NDArray[np.int8], n: int
                   ) -> list[Segments]:
    """Per time class (CLASSES order), the union of each key's intervals of that class."""
    out = []
    for code in range(len(CLASSES)):
        m = cls == code
        out.append(segments(inv[m], start[m], end[m], n))
    return out


def timeline_class_segments(tl: Timeline, inv: I64, n: int) -> list[Segments]:
    """``class_segments`` of the timeline's rows keyed by ``inv`` (0..n-1, a key refining
    the lane), by one stable sort of the rows by (class, key): each key's rows stay in start
    order and each class's rows are one slice (no mask or copy per class, and no sort by key
    before it)."""
    m = len(CLASSES) * n
    if tl.lanes.width * max(m, 1) >= LINE_LIMIT:  # the one-line placement of segments overflows
        return class_segments(*rows_by_key(tl, inv, n), n)
    code = tl.cls.astype(np.int64) * n
    code += inv
    order = by_key(code, m)
    start, end = tl.start, tl.end
    if order is not None:
        code, start, end = np.take(code, order), np.take(start, order), np.take(end, order)
    cut = np.searchsorted(code, np.arange(len(CLASSES) + 1, dtype=np.int64) * n)
    out = []
    for c in range(len(CLASSES)):
        a, b = int(cut[c]), int(cut[c + 1])
        seg = segments(code[a:b], start[a:b], end[a:b], m)  # views: the keys as coded
        out.append(Segments(seg.key - c * n, seg.start, seg.end))
    return out


def rows_by_key(tl: Timeline, inv: I64, n: int) -> tuple[I64, I64, I64, np.ndarray]:
    """The timeline's (key, start, end, class) with its rows grouped by key ``inv`` (0..n-1)
    once, by a stable sort (each key's rows stay in start order), so that no union over a
    key's rows sorts its own subset again."""
    order = by_key(inv, n)
    if order is None:
        return inv, tl.start, tl.end, tl.cls
    return inv[order], tl.start[order], tl.end[order], tl.cls[order]


def time_classes(tl: Timeline) -> pa.Table:
    """TIME_CLASSES: per (rank, device, stream) and per device (tid null) busy time by class."""
    # Per stream: key = (lane, tid).
    s_keys, inv = group_rows(tl.lane, tl.tid)  # the columns as they are (no stacked copy)
    n = len(s_keys)
    inv, start, end, cls = rows_by_key(tl, inv, n)
    per_class = class_segments(inv, start, end, cls, n)
    busy = segments(inv, start, end, n)
    first = np.full(n, np.iinfo(np.int64).max)
    last = np.full(n, np.iinfo(np.int64).min)
    if inv.size:  # rows grouped by key, each key's in start order: its first row is its start
        heads = np.flatnonzero(np.concatenate([[True], inv[1:] != inv[:-1]]))
        first[inv[heads]] = start[heads]
        last[inv[heads]] = np.maximum.reduceat(end, heads)
    comm = per_class[COMM]
    exposed = uncovered_of_segments(tl, comm, s_keys[:, 0])  # per communication segment
    streams = _level(tl, per_class, busy, first, last, s_keys[:, 0], s_keys[:, 1],
                     np.bincount(comm.key, weights=exposed, minlength=n).astype(np.int64))
    # Per device: the union of its streams' segments (fewer than its rows where they overlap)
    lane, n = s_keys[:, 0], tl.n_lanes
    d_first = np.full(n, np.iinfo(np.int64).max)
    d_last = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(d_first, lane, first)
    np.maximum.at(d_last, lane, last)
    d_class = [seg.merged(lane, n) for seg in per_class]
    # where no two streams' communication segments merged (communication on one stream per
    # device), they are the device's segments and their exposed parts the same
    d_exposed = np.bincount(lane[comm.key], weights=exposed, minlength=n).astype(np.int64) \
        if d_class[COMM].key.size == comm.key.size else exposed_of_segments(
            tl, d_class[COMM], n, np.arange(n, dtype=np.int64))
    devices = _level(tl, d_class, busy.merged(lane, n), d_first, d_last,
                     np.arange(n, dtype=np.int64), np.full(n, -1, dtype=np.int64), d_exposed)
    data = {k: np.concatenate([streams[k], devices[k]]) for k in streams}
    # devices with no timed row at all (the host of a GPU rank) get no row
    timed = np.concatenate([np.ones(len(s_keys), dtype=bool),
                            np.bincount(tl.lane, minlength=tl.n_lanes) > 0])
    data = {k: v[timed] for k, v in data.items()}
    table = pa.table({k: pa.array(v, mask=(v == -1) if k in (schema.TID, schema.PID) else None)
                      for k, v in data.items()})
    return schema.conform(table, schema.TIME_CLASSES)


def _level(tl: Timeline, per_class: list[Segments], busy: Segments, first: I64, last: I64,
           lane: I64, tid: I64, exposed: I64) -> dict[str, I64]:
    """TIME_CLASSES columns of one level (streams or devices) from its keys' unions and
    their exposed communication."""
    n = lane.size
    busy_ns = busy.length(n)
    span = np.where(busy_ns > 0, last - first, 0)
    values = {
        schema.RANK: tl.lane_rank[lane], schema.PID: tl.lane_pid[lane], schema.TID: tid,
        schema.SPAN_NS: span, schema.IDLE_NS: span - busy_ns, schema.EXPOSED_NS: exposed,
    }
    values.update({col: seg.length(n) for col, seg in zip(CLASS_COLUMNS, per_class, strict=True)})
    return {k: np.asarray(v, dtype=np.int64) for k, v in values.items()}
