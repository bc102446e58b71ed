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
    Lanes,
    Union,
    group_rows,
    uncovered,
    union,
    union_length,
)
from tracekit.schema import KernelClass, Kind

CLASSES = (KernelClass.COMM, KernelClass.FUSED, KernelClass.COMPUTE, KernelClass.MEMCPY)
COMM, FUSED, COMPUTE, MEMCPY = range(4)
CLASS_COLUMNS = (schema.COMM_NS, schema.FUSED_NS, schema.COMPUTE_NS, schema.MEMCPY_NS)


def _strings(table: pa.Table, name: str) -> npt.NDArray[np.object_]:
    col = table.column(name)
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)


def _ints(table: pa.Table, name: str, null: int = -1) -> I64:
    return np.asarray(pc.fill_null(table.column(name), null).to_numpy(), dtype=np.int64)


def _class_codes(table: pa.Table) -> npt.NDArray[np.int8]:
    """Kernel class code per row (-1: not timed), with fallbacks for unclassified rows."""
    cls = _strings(table, schema.KERNEL_CLASS)
    kind = _strings(table, schema.KIND)
    op = _strings(table, schema.OP)
    codes = np.full(table.num_rows, -1, dtype=np.int8)
    for code, name in enumerate(CLASSES):
        codes[cls == name] = code
    device = np.asarray(table.column(schema.DEVICE).is_valid().to_numpy(zero_copy_only=False))
    unclassified = (cls == None) & (op == None)  # noqa: E711 (elementwise)
    codes[unclassified & device & (kind == Kind.KERNEL)] = COMPUTE
    codes[unclassified & ((kind == Kind.MEMCPY) | (kind == Kind.MEMSET))] = MEMCPY
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
    fallback = host_rank & ~has_compute[rank] & unclassified & (kind == Kind.CPU_OP)
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
    comm = tl.cls == COMM
    if not comm.any():
        return np.zeros(n, dtype=np.int64)
    key_lanes = Lanes.build(inv, tl.start, tl.end, n)
    ku = union(key_lanes, inv[comm], tl.start[comm], tl.end[comm])
    seg = uncovered(tl.lanes, tl.cover_any_compute, key_lane[ku.lane],
                    key_lanes.unplace(ku.lane, ku.start), key_lanes.unplace(ku.lane, ku.end))
    return np.bincount(ku.lane, weights=seg, minlength=n).astype(np.int64)


def _per_key(keys: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], I64]:
    return group_rows(*(keys[:, k] for k in range(keys.shape[1])))


def time_classes(tl: Timeline) -> pa.Table:
    """TIME_CLASSES: per (rank, device, stream) and per device (tid null) busy time by class."""
    cols: dict[str, list[npt.NDArray[np.int64]]] = {}
    # Per stream: key = (lane, tid).
    s_keys, s_inv = _per_key(np.stack([tl.lane, tl.tid], axis=1))
    d_keys = np.arange(tl.n_lanes, dtype=np.int64)
    for level, (inv, n) in enumerate(((s_inv, len(s_keys)), (tl.lane, tl.n_lanes))):
        per_class = []
        for code in range(len(CLASSES)):
            m = tl.cls == code
            per_class.append(union_length(inv[m], tl.start[m], tl.end[m], n))
        busy = union_length(inv, tl.start, tl.end, n)
        first = np.full(n, np.iinfo(np.int64).max)
        last = np.full(n, np.iinfo(np.int64).min)
        np.minimum.at(first, inv, tl.start)
        np.maximum.at(last, inv, tl.end)
        span = np.where(busy > 0, last - first, 0)
        lane = s_keys[:, 0] if level == 0 else d_keys
        exposed = exposed_by_key(tl, inv, n, lane)
        values = {
            schema.RANK: tl.lane_rank[lane], schema.PID: tl.lane_pid[lane],
            schema.TID: s_keys[:, 1] if level == 0 else np.full(n, -1, dtype=np.int64),
            schema.SPAN_NS: span, schema.IDLE_NS: span - busy, schema.EXPOSED_NS: exposed,
        }
        values.update(dict(zip(CLASS_COLUMNS, per_class, strict=True)))
        for k, v in values.items():
            cols.setdefault(k, []).append(np.asarray(v, dtype=np.int64))
    data = {k: np.concatenate(v) for k, v in cols.items()}
    # devices with no timed row at all (the host of a GPU rank) get no row
    timed = np.concatenate([np.ones(len(s_keys), dtype=bool),
                            np.bincount(tl.lane, minlength=tl.n_lanes) > 0])
    data = {k: v[timed] for k, v in data.items()}
    table = pa.table({k: pa.array(v, mask=(v == -1) if k in (schema.TID, schema.PID) else None)
                      for k, v in data.items()})
    return schema.conform(table, schema.TIME_CLASSES)
