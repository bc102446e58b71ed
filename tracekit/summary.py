"""A first summary of a Run: small tables computed from EVENTS, nothing else.

* ``rank_spans``: per rank, first start, span and event count;
* ``kernel_time``: per rank and kernel class (communication, compute, memcpy, other), the
  device time and kernel count;
* ``comm_by_op``: per collective op, the count, bytes and time of the rows that carry a
  collective's time on a rank (device kernels; on CPU-only gloo traces the ``gloo:*`` titles).

Pure functions over pyarrow tables; the attribution stage replaces these heuristics with its
kernel classes and ``is_instance``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.api import Run
from tracekit.schema import KernelClass, Kind

GLOO_PREFIX = "gloo:"
# kernels of communication libraries that kineto gives no collective args (custom all-reduce,
# symmetric memory, DeepEP): communication in the first summary even without an op
COMM_KERNEL_NAMES = re.compile(
    r"^nccl|cross_device_reduce|all_reduce|allreduce|all_gather|allgather|reduce_scatter|"
    r"alltoall|all_to_all|deep_ep::|multimem",
    re.IGNORECASE,
)


@dataclass
class Summary:
    ranks: pa.Table  # RANK, TS_NS (first start), DUR_NS (span), COUNT
    kernel_time: pa.Table  # RANK, KERNEL_CLASS, COUNT, DUR_NS
    comm: pa.Table  # OP, COUNT, MSG_BYTES, DUR_NS
    skipped: list[tuple[str, str]]

    def tables(self) -> dict[str, pa.Table]:
        return {"ranks": self.ranks, "kernel_time": self.kernel_time, "communication": self.comm}


def rank_spans(events: pa.Table) -> pa.Table:
    ends = pc.add(events.column(S.TS_NS), events.column(S.DUR_NS))
    t = pa.table({S.RANK: events.column(S.RANK), S.TS_NS: events.column(S.TS_NS), "_end": ends})
    g = t.group_by([S.RANK]).aggregate([(S.TS_NS, "min"), ("_end", "max"), (S.TS_NS, "count")])
    start = g.column(f"{S.TS_NS}_min")
    out = pa.table({
        S.RANK: g.column(S.RANK),
        S.TS_NS: start,
        S.DUR_NS: pc.subtract(g.column("_end_max"), start),
        S.COUNT: g.column(f"{S.TS_NS}_count"),
    })
    return out.sort_by([(S.RANK, "ascending")])


def kernel_classes(events: pa.Table) -> pa.Array:
    """KernelClass of each device row (null on host rows): kernels with a collective op or a
    communication library's name (COMM_KERNEL_NAMES) are communication, other kernels
    compute, memcpy/memset memcpy. (The rules engine classifies with its own rule files.)"""
    kind = events.column(S.KIND).cast(pa.string())
    is_kernel = pc.equal(kind, Kind.KERNEL)
    is_copy = pc.is_in(kind, pa.array([Kind.MEMCPY, Kind.MEMSET]))
    has_op = pc.or_(pc.is_valid(events.column(S.OP)), _comm_named(events.column(S.NAME)))
    cls = pc.if_else(is_copy, KernelClass.MEMCPY, None)
    cls = pc.if_else(pc.and_(is_kernel, has_op), KernelClass.COMM, cls)
    return pc.if_else(pc.and_(is_kernel, pc.invert(has_op)), KernelClass.COMPUTE, cls)


def _comm_named(names: pa.ChunkedArray) -> pa.ChunkedArray:
    """Rows whose name matches COMM_KERNEL_NAMES (evaluated once per distinct name)."""
    chunks = []
    for chunk in names.chunks:
        arr = chunk if pa.types.is_dictionary(chunk.type) else chunk.dictionary_encode()
        hit = pa.array([bool(COMM_KERNEL_NAMES.search(v or ""))
                        for v in arr.dictionary.to_pylist()], pa.bool_())
        chunks.append(pc.fill_null(hit.take(arr.indices), False))
    return pa.chunked_array(chunks, pa.bool_())


def kernel_time(events: pa.Table) -> pa.Table:
    t = pa.table({
        S.RANK: events.column(S.RANK),
        S.KERNEL_CLASS: kernel_classes(events),
        S.DUR_NS: events.column(S.DUR_NS),
    })
    t = t.filter(pc.is_valid(t.column(S.KERNEL_CLASS)))
    g = t.group_by([S.RANK, S.KERNEL_CLASS]).aggregate([(S.DUR_NS, "sum"), (S.DUR_NS, "count")])
    out = pa.table({
        S.RANK: g.column(S.RANK),
        S.KERNEL_CLASS: g.column(S.KERNEL_CLASS),
        S.COUNT: g.column(f"{S.DUR_NS}_count"),
        S.DUR_NS: g.column(f"{S.DUR_NS}_sum"),
    })
    return out.sort_by([(S.RANK, "ascending"), (S.KERNEL_CLASS, "ascending")])


def instance_rows(events: pa.Table) -> pa.Table:
    """Rows that carry a collective's time: device kernels with an op; for ranks without
    any, the ``gloo:*`` titles."""
    kind = events.column(S.KIND).cast(pa.string())
    has_op = pc.is_valid(events.column(S.OP))
    kernels = events.filter(pc.and_(pc.equal(kind, Kind.KERNEL), has_op))
    with_kernels = pc.unique(kernels.column(S.RANK))
    name = events.column(S.NAME).cast(pa.string())
    gloo = pc.and_(has_op, pc.starts_with(name, GLOO_PREFIX))
    gloo = pc.and_(gloo, pc.invert(pc.is_in(events.column(S.RANK), with_kernels)))
    return pa.concat_tables([kernels, events.filter(gloo)])


def comm_by_op(events: pa.Table) -> pa.Table:
    rows = instance_rows(events)
    size = pc.max_element_wise(rows.column(S.IN_BYTES), rows.column(S.OUT_BYTES))
    t = pa.table({
        S.OP: rows.column(S.OP).cast(pa.string()),
        S.MSG_BYTES: size,
        S.DUR_NS: rows.column(S.DUR_NS),
    })
    g = t.group_by([S.OP]).aggregate(
        [(S.DUR_NS, "count"), (S.MSG_BYTES, "sum"), (S.DUR_NS, "sum")])
    out = pa.table({
        S.OP: g.column(S.OP),
        S.COUNT: g.column(f"{S.DUR_NS}_count"),
        S.MSG_BYTES: g.column(f"{S.MSG_BYTES}_sum"),
        S.DUR_NS: g.column(f"{S.DUR_NS}_sum"),
    })
    return out.sort_by([(S.OP, "ascending")])


def summarize(run: Run) -> Summary:
    events = run.events
    return Summary(
        ranks=rank_spans(events),
        kernel_time=kernel_time(events),
        comm=comm_by_op(events),
        skipped=list(run.skipped),
    )


__all__ = ["Summary", "comm_by_op", "kernel_time", "rank_spans", "summarize"]
