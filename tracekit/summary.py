"""A first summary of a Run: small tables computed from EVENTS, nothing else.

* ``rank_spans``: per rank, first start, span and event count;
* ``kernel_time``: per rank and kernel class (communication, compute, memcpy, other), the
  device time and kernel count;
* ``comm_by_op``: per collective op, the count, bytes and time of the rows that carry a
  collective's time on a rank (device kernels; on CPU-only gloo traces the ``gloo:*`` titles).

Pure functions over pyarrow tables. Kernel classes come from the packaged rules; the
attribution stage's ``is_instance`` then refines which rows carry a collective's time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.measure.textmask import text_mask
from tracekit.model import Run
from tracekit.schema import Kind
from tracekit.tables import rank_chunks

GLOO_PREFIX = "gloo:"
_END = "_end"  # scratch column of the rank-span aggregations (never a table column)


@dataclass
class Summary:
    ranks: pa.Table  # RANK, TS_NS (first start), DUR_NS (span), COUNT
    kernel_time: pa.Table  # RANK, KERNEL_CLASS, COUNT, DUR_NS
    comm: pa.Table  # OP, COUNT, MSG_BYTES, DUR_NS
    skipped: list[tuple[str, str]]

    def tables(self) -> dict[str, pa.Table]:
        return {"ranks": self.ranks, "kernel_time": self.kernel_time, "communication": self.comm}


def rank_spans(events: pa.Table) -> pa.Table:
    chunks = rank_chunks(events, _END)
    if chunks is not None:  # the parse's layout: each chunk one rank's rows
        g = chunks[0].group_by([S.RANK]).aggregate(
            [(S.TS_NS, "min"), (_END, "max"), (S.COUNT, "sum")])
        count = g.column(f"{S.COUNT}_sum")
    else:
        ends = pc.add(events.column(S.TS_NS), events.column(S.DUR_NS))
        t = pa.table({S.RANK: events.column(S.RANK), S.TS_NS: events.column(S.TS_NS),
                      _END: ends})
        g = t.group_by([S.RANK]).aggregate(
            [(S.TS_NS, "min"), (_END, "max"), (S.TS_NS, "count")])
        count = g.column(f"{S.TS_NS}_count")
    start = g.column(f"{S.TS_NS}_min")
    out = pa.table({
        S.RANK: g.column(S.RANK),
        S.TS_NS: start,
        S.DUR_NS: pc.subtract(g.column("_end_max"), start),
        S.COUNT: count,
    })
    return out.sort_by([(S.RANK, "ascending")])


def _class_codes(events: pa.Table) -> tuple[np.ndarray, list[str]]:
    """Per row, an index into the returned distinct kernel classes (-1: a host row or no
    class), from the packaged kernel-class rules (tracekit/rules/data): the one definition
    of what a communication kernel is. Classified once per distinct (name, kind), in Arrow
    dictionary code space: no string per row."""
    from tracekit.rules.kernels import classify_table
    from tracekit.rules.loader import load_rules

    rules = load_rules()
    rule = classify_table(events.select([S.NAME, S.KIND]), rules)
    classes = sorted({r.cls for r in rules.kernel_classes if r.cls is not None})
    # the last entry is what a row without a rule (-1) reads
    of_rule = np.array([classes.index(r.cls) if r.cls is not None else -1
                        for r in rules.kernel_classes] + [-1],
                       dtype=np.int8 if len(classes) < 127 else np.int32)
    codes = of_rule[rule]
    device = text_mask(events.column(S.KIND), [Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET])
    return np.where(device, codes, -1), classes


def kernel_classes(events: pa.Table) -> pa.Array:
    """KernelClass of each device row (null on host rows)."""
    codes, classes = _class_codes(events)
    values = pa.array([*classes, None], pa.string())
    return values.take(pa.array(np.where(codes < 0, len(classes), codes)))


def kernel_time(events: pa.Table) -> pa.Table:
    codes, classes = _class_codes(events)
    keep = codes >= 0
    t = pa.table({
        S.RANK: events.column(S.RANK).filter(pa.array(keep)),
        "_cls": pa.array(codes[keep]),
        S.DUR_NS: events.column(S.DUR_NS).filter(pa.array(keep)),
    })
    g = t.group_by([S.RANK, "_cls"]).aggregate([(S.DUR_NS, "sum"), (S.DUR_NS, "count")])
    out = pa.table({
        S.RANK: g.column(S.RANK),
        S.KERNEL_CLASS: pa.array(classes, pa.string()).take(g.column("_cls")),
        S.COUNT: g.column(f"{S.DUR_NS}_count"),
        S.DUR_NS: g.column(f"{S.DUR_NS}_sum"),
    })
    return out.sort_by([(S.RANK, "ascending"), (S.KERNEL_CLASS, "ascending")])


def _instance_mask(events: pa.Table) -> np.ndarray:
    """Per row, whether it carries a collective's time: a device kernel with an op; on ranks
    without any, a ``gloo:*`` title with an op."""
    has_op = np.asarray(pc.is_valid(events.column(S.OP)).to_numpy(zero_copy_only=False),
                        dtype=bool) if events.num_rows else np.zeros(0, dtype=bool)
    kernel = has_op & text_mask(events.column(S.KIND), [Kind.KERNEL])
    gloo = has_op & text_mask(events.column(S.NAME), prefix=GLOO_PREFIX)
    if not gloo.any():  # a GPU trace: no rank to look at
        return kernel
    rank = np.asarray(events.column(S.RANK).to_numpy())
    return kernel | (gloo & ~np.isin(rank, np.unique(rank[kernel])))


def instance_rows(events: pa.Table) -> pa.Table:
    """Rows that carry a collective's time: device kernels with an op; for ranks without
    any, the ``gloo:*`` titles."""
    return events.filter(pa.array(_instance_mask(events)))


def _text_codes(column: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """One int32 code per row (-1: null) into the returned distinct texts of a text column:
    a dictionary column's chunks unified, not decoded."""
    if pa.types.is_dictionary(column.type):
        col = column.unify_dictionaries().combine_chunks() if column.num_chunks \
            else pa.array([], column.type)
        encoded = pc.dictionary_encode(col.dictionary)  # distinct texts, even if repeated
        remap = np.append(np.asarray(encoded.indices.to_numpy(), dtype=np.int32), -1)
        idx = pc.fill_null(col.indices, -1).to_numpy()  # -1 reads remap's last: null
        return remap[idx], encoded.dictionary
    encoded = pc.dictionary_encode(column.combine_chunks())
    return (np.asarray(pc.fill_null(encoded.indices, -1).to_numpy(), dtype=np.int32),
            encoded.dictionary)


def comm_by_op(events: pa.Table) -> pa.Table:
    keep = pa.array(_instance_mask(events))
    codes, ops = _text_codes(events.column(S.OP))
    rows = events.select([S.IN_BYTES, S.OUT_BYTES, S.DUR_NS]).filter(keep)
    size = pc.max_element_wise(rows.column(S.IN_BYTES), rows.column(S.OUT_BYTES))
    t = pa.table({
        "_op": pa.array(codes).filter(keep),
        S.MSG_BYTES: size,
        S.DUR_NS: rows.column(S.DUR_NS),
    })
    g = t.group_by(["_op"]).aggregate(
        [(S.DUR_NS, "count"), (S.MSG_BYTES, "sum"), (S.DUR_NS, "sum")])
    out = pa.table({
        S.OP: ops.cast(pa.string()).take(g.column("_op")),
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
