"""Aggregated plot frames of the HTML report (pure: no plotting, no HTML, no measuring).

- ``occupancy``: per rank, the share of each time bin that each kernel class kept the device
  busy; what the timeline draws when a run has more kernels than it can draw one by one.
- ``waterfall``: per layer, each phase's compute, fused and communication time per rank laid
  end to end, with the alpha-beta bound of its communication.
- ``efficiency_groups``: collectives grouped by (group, path, op, message size) with their
  count and spread, so 128 collectives at 4 sizes read as 4 markers that say "n = 32".
- ``bound_coverage``: per path, how many collective rows have a message size, a bound and an
  efficiency, which says why an efficiency panel is empty.

Everything is selected and summed from the result tables (PHASES, MEASURED, ATTRIBUTED).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import schema as s
from tracekit.model import Analysis
from tracekit.reports import digest, fmt, frames
from tracekit.reports import plotframes as pf

OCCUPANCY_BINS = 600  # time bins per rank when the timeline aggregates
CLASS_COLORS = {
    s.KernelClass.COMPUTE: "#4c78a8", s.KernelClass.FUSED: "#b279a2",
    s.KernelClass.COMM: "#e45756", s.KernelClass.MEMCPY: "#72b7b2",
    s.KernelClass.OTHER: "#bab0ac",
}

# derived columns
SHARE = "share"
START_MS, END_MS, SEGMENT, PATHS = "start_ms", "end_ms", "segment", "paths"
MS_TXT, BOUND_MS, BOUND_TXT = "ms_txt", "bound_ms", "bound_txt"
N, EFF_MED, EFF_MIN, EFF_MAX = "n", "eff_median", "eff_min", "eff_max"
BW_MED, BW_MIN, BW_MAX, RANGE_TXT = "algbw_median", "algbw_min", "algbw_max", "range_txt"
WITH_SIZE, WITH_BOUND, WITH_EFF = "with_size", "with_bound", "with_efficiency"


@dataclass(frozen=True)
class Occupancy:
    # one rectangle per (rank, class, bin) with a non-zero share: x0, x1 (ms since the trace
    # start), y0, y1, rank, kernel_class, share (0..1 of the bin); the plot colours by class
    # and formats the share and the bin in its tooltip
    frame: pd.DataFrame
    kernels: int  # device kernels aggregated
    bin_ms: float


@dataclass(frozen=True)
class _Kernels:
    # the device kernels of a run, one entry each: rank, start and end (ns since the trace
    # start, float), and the index of the kernel class in s.KernelClass.ALL (-1: another)
    rank: np.ndarray
    start: np.ndarray
    end: np.ndarray
    cls: np.ndarray


def _kernels(analysis: Analysis) -> _Kernels:
    """The device kernels (kind kernel, with a duration) of ATTRIBUTED, else of EVENTS; a
    kernel without a class counts as "other"."""
    import pyarrow.compute as pc

    table = analysis.attributed if frames.has_rows(analysis.attributed) else analysis.run.events
    if table is None or not {s.RANK, s.TS_NS, s.DUR_NS, s.KIND} <= set(table.column_names):
        empty = np.zeros(0)
        return _Kernels(empty.astype(np.int64), empty, empty, empty.astype(np.int64))
    keep = frames.kernel_rows(table)
    keep &= pc.is_valid(table.column(s.DUR_NS)).to_numpy(zero_copy_only=False)
    has_class = s.KERNEL_CLASS in table.column_names
    sub = table.select([s.RANK, s.TS_NS, s.DUR_NS, *([s.KERNEL_CLASS] if has_class else [])]
                       ).filter(pa.array(keep))  # the kernels first: codes of those only
    t0 = pf.trace_start_ns(analysis)
    start = (sub.column(s.TS_NS).to_numpy().astype(np.int64) - t0).astype(np.float64)
    other = s.KernelClass.ALL.index(s.KernelClass.OTHER)
    return _Kernels(sub.column(s.RANK).to_numpy().astype(np.int64), start,
                    start + sub.column(s.DUR_NS).to_numpy().astype(np.float64),
                    frames.codes(sub, s.KERNEL_CLASS, s.KernelClass.ALL, null=other))


def _edge_index(edges: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.searchsorted(edges, values, side="right")`` for the evenly spaced ``edges`` of
    ``np.linspace(0, end, n)`` and finite ``values``: each value's bin by division, then moved
    by one where float rounding put it on the wrong side of an edge (a binary search per
    value was most of the occupancy's time)."""
    n = len(edges)
    if n < 2 or not edges[-1] > 0:
        return np.searchsorted(edges, values, side="right")
    bounded = np.concatenate([[-np.inf], edges, [np.inf]])  # bounded[i + 1] is edges[i]
    guess = np.floor(values * ((n - 1) / edges[-1])).astype(np.int64) + 1
    np.clip(guess, 0, n, out=guess)
    guess += bounded[guess + 1] <= values  # the next edge is at or below the value: counted
    guess -= bounded[guess] > values  # the last edge counted is above it: not counted
    return guess


def _dense_unique(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of small non-negative integers (ranks) by
    marking those present, no sort; other values through ``np.unique``."""
    if not len(values) or values.min() < 0 or values.max() >= 4 * len(values):
        return np.unique(values, return_inverse=True)
    seen = np.zeros(int(values.max()) + 1, dtype=bool)
    seen[values] = True
    number = np.cumsum(seen) - 1
    return np.flatnonzero(seen).astype(values.dtype), number[values]


def _busy_before(group: np.ndarray, n_groups: int, values: np.ndarray,
                 edges: np.ndarray) -> np.ndarray:
    """Per group and edge, sum over the group's values v < edge of (edge - v): with the
    starts minus with the ends, the time the group's intervals were busy before the edge.

    Each value is counted at the first edge above it (a bincount per group), the counts
    and sums then accumulated along the edges: no sort, one pass over the values."""
    n = len(edges)
    flat = group * (n + 1) + _edge_index(edges, values)
    size = n_groups * (n + 1)
    count = np.bincount(flat, minlength=size).reshape(n_groups, n + 1)[:, :n]
    total = np.bincount(flat, weights=values, minlength=size).reshape(n_groups, n + 1)[:, :n]
    return np.cumsum(count, axis=1) * edges - np.cumsum(total, axis=1)


def occupancy(analysis: Analysis, bins: int = OCCUPANCY_BINS) -> Occupancy:
    """Per rank and kernel class, the busy share of each of ``bins`` equal time bins.

    The shares of a bin are stacked in the rank's row (y from rank - 0.4 to rank + 0.4), the
    classes in s.KernelClass.ALL order; a bin where streams overlap is scaled so its stack
    fills the row at most. Computed for every (rank, class) at once: one array of
    (ranks, classes, bins).
    """
    cached = digest.frame(analysis, digest.OCCUPANCY)
    if cached is not None and bins == OCCUPANCY_BINS:
        meta = analysis.run.extra[digest.OCCUPANCY_META]
        return Occupancy(cached, int(meta.column(digest.KERNELS)[0].as_py()),
                         float(meta.column(digest.BIN_MS)[0].as_py()))
    k = _kernels(analysis)
    empty = pd.DataFrame(columns=[pf.X0, pf.X1, pf.Y0, pf.Y1, s.RANK, s.KERNEL_CLASS, SHARE])
    if not len(k.rank):
        return Occupancy(empty, 0, 0.0)
    edges = np.linspace(0.0, float(k.end.max()) or 1.0, bins + 1)
    width = edges[1] - edges[0]
    classes = np.array(s.KernelClass.ALL, dtype=object)
    rank_values, rank_index = _dense_unique(k.rank)
    known = k.cls >= 0  # a class outside s.KernelClass.ALL is counted but not drawn
    group = (rank_index * len(classes) + k.cls)[known]
    n_groups = len(rank_values) * len(classes)
    busy = np.diff(_busy_before(group, n_groups, k.start[known], edges)
                   - _busy_before(group, n_groups, k.end[known], edges), axis=1)
    stack = (busy / width).reshape(len(rank_values), len(classes), bins)
    stack = stack / np.maximum(1.0, stack.sum(axis=1, keepdims=True))
    base = np.concatenate([np.zeros((len(rank_values), 1, bins)),
                           np.cumsum(stack[:, :-1], axis=1)], axis=1)
    r, c, b = np.nonzero(stack > 1e-4)  # rank, then class, then bin order
    if not len(r):
        return Occupancy(empty, len(k.rank), width / pf.MS)
    share = stack[r, c, b]
    rank = rank_values[r].astype(np.int64)
    y0 = rank + 0.4 - 0.8 * (base[r, c, b] + share)
    frame = pd.DataFrame({
        pf.X0: edges[:-1][b] / pf.MS, pf.X1: edges[1:][b] / pf.MS, pf.Y0: y0,
        pf.Y1: y0 + 0.8 * share, s.RANK: rank, s.KERNEL_CLASS: classes[c], SHARE: share})
    return Occupancy(frame, len(k.rank), width / pf.MS)


WATERFALL_PARTS = (  # (segment, PHASES column): laid end to end within a phase
    ("compute", s.COMPUTE_NS), ("fused compute+exchange", s.FUSED_NS),
    ("communication (exposed)", s.EXPOSED_NS), ("communication (overlapped)", None),
)


def waterfall(analysis: Analysis) -> pd.DataFrame:
    """Per layer, each phase's parts (ms per rank) end to end; the bound marks its comm.

    From PHASES' per-layer rows (rank and layer set), averaged over ranks. A segment's bound
    (``bound_ms``) is where the communication would end if it took only its alpha-beta bound.
    """
    cols = [s.RANK, s.LAYER, s.PHASE, s.COMM_NS, s.FUSED_NS, s.COMPUTE_NS, s.EXPOSED_NS,
            s.BOUND_NS, s.COUNT]
    df = frames.to_frame(analysis.phases_table, cols)
    df = df[df[s.RANK].notna() & df[s.LAYER].notna()]
    if not len(df):
        return pd.DataFrame(columns=[s.LAYER, s.PHASE, SEGMENT, START_MS, END_MS])
    sums = [s.COMM_NS, s.FUSED_NS, s.COMPUTE_NS, s.EXPOSED_NS, s.BOUND_NS]
    n_ranks = df.groupby([s.LAYER, s.PHASE])[s.RANK].nunique()
    per = df.groupby([s.LAYER, s.PHASE])[sums].sum(min_count=1).div(n_ranks, axis=0)
    per = per.reset_index()
    per[s.LAYER] = per[s.LAYER].astype(int)
    order = {p: i for i, p in enumerate(s.Phase.ALL)}
    per = per.assign(_o=per[s.PHASE].map(lambda p: order.get(p, len(order))))
    per = per.sort_values([s.LAYER, "_o", s.PHASE], kind="stable").drop(columns="_o")
    paths = _paths_by_layer_phase(analysis)
    comm = per[s.COMM_NS].astype(float).fillna(0)
    exposed = per[s.EXPOSED_NS].astype(float).fillna(0).clip(upper=comm)
    parts = {
        "compute": per[s.COMPUTE_NS].astype(float).fillna(0),
        "fused compute+exchange": per[s.FUSED_NS].astype(float).fillna(0),
        "communication (exposed)": exposed, "communication (overlapped)": comm - exposed,
    }
    lengths = np.vstack([v.to_numpy() for v in parts.values()]).T / pf.MS  # (rows, parts)
    flat = lengths.ravel()
    layer_of = np.repeat(per[s.LAYER].to_numpy(), len(parts))
    ends = pd.Series(flat).groupby(layer_of).cumsum().to_numpy()
    out = pd.DataFrame({
        s.LAYER: layer_of, s.PHASE: np.repeat(per[s.PHASE].to_numpy(), len(parts)),
        SEGMENT: np.tile(list(parts), len(per)), START_MS: ends - flat, END_MS: ends,
    })
    phase_start = (ends - flat).reshape(-1, len(parts))[:, 0]
    bound_row = per[s.BOUND_NS].astype(float).to_numpy() / pf.MS
    bound_row = np.where((comm.to_numpy() > 0) & (bound_row > 0), bound_row, np.nan)
    bound_at = phase_start + lengths[:, 0] + lengths[:, 1] + bound_row  # comm start + bound
    bound = np.repeat(bound_row, len(parts))
    out[BOUND_MS] = np.repeat(bound_at, len(parts))
    out[MS_TXT] = (pd.Series(flat) * pf.MS).map(fmt.ns).to_numpy()
    out[BOUND_TXT] = (pd.Series(bound) * pf.MS).map(fmt.ns).to_numpy()
    key = out[s.LAYER].astype(str) + "|" + out[s.PHASE].astype(str)
    out[PATHS] = key.map(paths).fillna("-").to_numpy()
    out[pf.COLOR] = out[SEGMENT].map(pf.PART_COLORS)
    return out[flat > 0].reset_index(drop=True)


def _paths_by_layer_phase(analysis: Analysis) -> dict[str, str]:
    cols = [s.LAYER, s.PHASE, s.PATH]
    measured = analysis.measured
    if frames.has_rows(measured) and set(cols) <= set(measured.column_names):
        # the distinct (layer, phase, path) triples grouped in Arrow (dictionary codes): a
        # few hundred rows to decode, not one per collective
        measured = measured.select(cols).group_by(cols).aggregate([])
    m = frames.to_frame(measured, cols)
    m = m[m[s.LAYER].notna() & m[s.PATH].notna()].drop_duplicates()
    if not len(m):
        return {}
    key = m[s.LAYER].astype(int).astype(str) + "|" + m[s.PHASE].astype(str)
    return {k: ", ".join(sorted(set(g))) for k, g in m[s.PATH].astype(str).groupby(key)}


def waterfall_bounds(wf: pd.DataFrame) -> pd.DataFrame:
    """One bound marker per (layer, phase) with a bound."""
    b = wf[wf[BOUND_MS].notna()].drop_duplicates([s.LAYER, s.PHASE])
    return b[[s.LAYER, s.PHASE, BOUND_MS, BOUND_TXT, PATHS]].reset_index(drop=True)


def efficiency_groups(analysis: Analysis) -> pd.DataFrame:
    """Collective rows with an efficiency, grouped by (group, path, op, message size)."""
    cols = [s.GROUP, s.PATH, s.OP, s.MSG_BYTES, s.EFFICIENCY, s.ALGBW_GBPS, s.BOUND_NS]
    df = frames.to_frame(analysis.measured, cols)
    df = df[(df[s.MSG_BYTES].astype(float) > 0) & df[s.EFFICIENCY].notna()]
    if not len(df):
        return pd.DataFrame(columns=[*cols[:4], N, EFF_MED, EFF_MIN, EFF_MAX, pf.BOUND_GBPS])
    keys = [s.GROUP, s.PATH, s.OP]
    df = df.assign(**{k: df[k].fillna("-").astype(str) for k in keys})
    df[pf.BOUND_GBPS] = df[s.MSG_BYTES].astype(float) / df[s.BOUND_NS].astype(float)
    g = df.groupby([*keys, s.MSG_BYTES], sort=True)
    out = pd.DataFrame({
        N: g.size(), EFF_MED: g[s.EFFICIENCY].median(), EFF_MIN: g[s.EFFICIENCY].min(),
        EFF_MAX: g[s.EFFICIENCY].max(), BW_MED: g[s.ALGBW_GBPS].median(),
        BW_MIN: g[s.ALGBW_GBPS].min(), BW_MAX: g[s.ALGBW_GBPS].max(),
        pf.BOUND_GBPS: g[pf.BOUND_GBPS].median(),
    }).reset_index()
    out[pf.BYTES_TXT] = out[s.MSG_BYTES].map(fmt.nbytes)
    out[pf.EFF_TXT] = out[EFF_MED].map(fmt.ratio)
    out[RANGE_TXT] = out[EFF_MIN].map(fmt.ratio) + " - " + out[EFF_MAX].map(fmt.ratio)
    out[pf.KEY] = out[s.GROUP] + " · " + out[s.OP]
    return out


def bound_coverage(analysis: Analysis) -> pd.DataFrame:
    """Per (path, group, op): collective rows, and how many have a size, a bound, an efficiency."""
    cols = [s.PATH, s.GROUP, s.OP, s.MSG_BYTES, s.BOUND_NS, s.EFFICIENCY]
    fast = _coverage_counts(analysis.measured, cols)
    if fast is not None:
        return fast
    df = frames.to_frame(analysis.measured, cols)
    keys = [s.PATH, s.GROUP, s.OP]
    df = df.assign(**{k: df[k].fillna("-").astype(str) for k in keys})
    flags = pd.DataFrame({
        s.COUNT: 1, WITH_SIZE: (df[s.MSG_BYTES].astype(float) > 0).astype(int),
        WITH_BOUND: df[s.BOUND_NS].notna().astype(int),
        WITH_EFF: df[s.EFFICIENCY].notna().astype(int)})
    return pd.concat([df[keys], flags], axis=1).groupby(keys, sort=True).sum().reset_index()


def _present(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Per row, whether pandas would call the value present (notna): not null, not NaN."""
    import pyarrow.compute as pc

    valid = pc.is_valid(column)
    if not pa.types.is_floating(column.type):
        return valid
    return pc.and_kleene(valid, pc.invert(pc.is_nan(column)))  # a null row: not present


def _coverage_counts(measured: pa.Table | None, cols: list[str]) -> pd.DataFrame | None:
    """``bound_coverage`` grouped in Arrow when MEASURED has rows and text keys (no pandas
    frame of every collective), else None."""
    import pyarrow.compute as pc

    if not frames.has_rows(measured) or not set(cols) <= set(measured.column_names):
        return None
    assert measured is not None
    keys, (size, bound, eff) = cols[:3], cols[3:]
    text = frames.text_keys(measured, keys, "-")
    if text is None:
        return None
    with_size = pc.fill_null(pc.greater(measured.column(size).cast(pa.float64()), 0.0), False)
    t = pa.table({**text, WITH_SIZE: with_size.cast(pa.int64()),
                  WITH_BOUND: _present(measured.column(bound)).cast(pa.int64()),
                  WITH_EFF: _present(measured.column(eff)).cast(pa.int64())})
    g = t.group_by(keys).aggregate([(WITH_SIZE, "count"), (WITH_SIZE, "sum"),
                                    (WITH_BOUND, "sum"), (WITH_EFF, "sum")])
    g = g.sort_by([(k, "ascending") for k in keys])
    out = pa.table({**{k: g.column(k) for k in keys}, s.COUNT: g.column(f"{WITH_SIZE}_count"),
                    **{c: g.column(f"{c}_sum") for c in (WITH_SIZE, WITH_BOUND, WITH_EFF)}})
    return out.to_pandas()
