"""Pure functions that prepare the HTML report's plot data (no plotting, no HTML here).

Each returns a pandas frame (or a small dataclass of frames) with display-ready columns; the
``html_*`` modules only turn them into bokeh figures. Big runs are cut here: the timeline
keeps the longest kernels of every rank and the scatter a regular sample, so a 64-rank report
stays small, and each frame says how many rows it kept out of how many.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit import schema as s
from tracekit.model import Analysis
from tracekit.reports import digest, fmt, frames

TIMELINE_MAX = 10_000  # communication kernels drawn one by one; past it, binned occupancy
SCATTER_MAX = 10_000  # points in the efficiency scatter
MS = 1e6  # ns per ms

# derived plot columns
X0, X1, Y0, Y1 = "x0", "x1", "y0", "y1"
KEY = "key"  # "group · path": what a colour means
COLOR = "color"
BYTES_TXT, EFF_TXT, WAIT_TXT, DUR_TXT = "bytes_txt", "eff_txt", "wait_txt", "dur_txt"
PART, MS_PER_RANK = "part", "ms_per_rank"
BOUND_GBPS = "bound_gbps"
INSTANCES, MEAN_IMBALANCE, MAX_IMBALANCE = "instances", "mean_imbalance", "max_imbalance"

PALETTE = (  # Category20, reordered so neighbours differ
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
    "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
)
PART_COLORS = {
    "compute": "#4c78a8", "fused compute+exchange": "#b279a2",
    "communication (overlapped)": "#9ecae9", "communication (exposed)": "#e45756",
}


@dataclass(frozen=True)
class Sampled:
    frame: pd.DataFrame
    shown: int
    total: int


def key_of(group: pd.Series, path: pd.Series) -> pd.Series:
    return group.fillna("?").astype(str) + " · " + path.fillna("?").astype(str)


def colors(keys: pd.Series | list[str]) -> dict[str, str]:
    """A fixed colour per key, assigned in sorted order (the same run gets the same colours)."""
    return {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(sorted(set(keys)))}


def _comm_rows(analysis: Analysis) -> pd.DataFrame:
    cols = [s.RANK, s.TS_NS, s.DUR_NS, s.NAME, s.OP, s.GROUP, s.PATH, s.MSG_BYTES,
            s.EFFICIENCY, s.WAIT_NS]
    if frames.has_rows(analysis.measured):
        return frames.to_frame(analysis.measured, cols)
    if frames.has_rows(analysis.attributed):
        a = frames.to_frame(analysis.attributed, [*cols[:-3], s.IN_BYTES, s.IS_INSTANCE])
        a = a[a[s.IS_INSTANCE].fillna(False).astype(bool)]
        return a.rename(columns={s.IN_BYTES: s.MSG_BYTES}).assign(
            **{s.EFFICIENCY: np.nan, s.WAIT_NS: np.nan})[cols]
    e = frames.to_frame(analysis.run.events, [*cols[:-5], s.KIND, s.IN_BYTES, s.PG_DESC])
    e = e[e[s.OP].notna() & (e[s.KIND] == s.Kind.KERNEL)]
    return e.assign(**{s.GROUP: e[s.PG_DESC], s.PATH: None, s.MSG_BYTES: e[s.IN_BYTES],
                       s.EFFICIENCY: np.nan, s.WAIT_NS: np.nan})[cols]


def comm_total(analysis: Analysis) -> int:
    """How many kernels :func:`timeline` would draw with no limit (its ``total``), counted
    without building its frame."""
    if frames.has_rows(analysis.measured):
        return analysis.measured.num_rows
    return len(_comm_rows(analysis))


def trace_start_ns(analysis: Analysis) -> int:
    """The first event's start: every time the report shows is relative to it."""
    cached = digest.value(analysis, digest.COUNTS, digest.START_NS)
    if cached is not None:
        return int(cached)
    events = analysis.run.events
    if not frames.has_rows(events):
        return 0
    import pyarrow.compute as pc

    return int(pc.min(events.column(s.TS_NS)).as_py() or 0)


def _keep_longest(df: pd.DataFrame, limit: int) -> pd.DataFrame:
    if len(df) <= limit:
        return df
    per_rank = max(1, limit // max(1, df[s.RANK].nunique()))
    ordered = df.sort_values([s.RANK, s.DUR_NS], ascending=[True, False], kind="stable")
    kept = ordered[ordered.groupby(s.RANK).cumcount() < per_rank]
    return kept.sort_values([s.RANK, s.TS_NS], kind="stable")


def timeline(analysis: Analysis, limit: int = TIMELINE_MAX) -> Sampled:
    """Communication kernels per rank as rectangles (ms from the trace start), with hover text.

    Past ``limit`` kernels the longest of each rank are kept (``occupancy`` is what the page
    draws then); ``shown`` and ``total`` say how many.
    """
    df = _comm_rows(analysis)
    total = len(df)
    t0 = trace_start_ns(analysis)
    df = _keep_longest(df, limit)
    key = key_of(df[s.GROUP], df[s.PATH])
    cmap = colors(key)
    out = pd.DataFrame({
        X0: (df[s.TS_NS] - t0) / MS, X1: (df[s.TS_NS] + df[s.DUR_NS] - t0) / MS,
        Y0: df[s.RANK] - 0.4, Y1: df[s.RANK] + 0.4,
        s.RANK: df[s.RANK], s.NAME: df[s.NAME].fillna("").astype(str),
        s.OP: df[s.OP].fillna("-").astype(str), s.GROUP: df[s.GROUP].fillna("-").astype(str),
        s.PATH: df[s.PATH].fillna("-").astype(str), KEY: key, COLOR: key.map(cmap),
        BYTES_TXT: df[s.MSG_BYTES].map(fmt.nbytes), EFF_TXT: df[s.EFFICIENCY].map(fmt.ratio),
        WAIT_TXT: df[s.WAIT_NS].map(fmt.ns), DUR_TXT: df[s.DUR_NS].map(fmt.ns),
    })
    return Sampled(out.reset_index(drop=True), len(out), total)


def phase_parts(analysis: Analysis) -> pd.DataFrame:
    """Per phase, ms per rank of compute, fused, overlapped and exposed communication."""
    totals = frames.phase_totals(analysis)
    n = max(1, len(frames.ranks(analysis)))
    if not len(totals):
        return pd.DataFrame(columns=[s.PHASE, PART, MS_PER_RANK])
    comm = totals[s.COMM_NS].astype(float).fillna(0)
    exposed = totals[s.EXPOSED_NS].astype(float).fillna(0).clip(upper=comm)
    parts = {
        "compute": totals[s.COMPUTE_NS].astype(float).fillna(0),
        "fused compute+exchange": totals[s.FUSED_NS].astype(float).fillna(0),
        "communication (overlapped)": comm - exposed,
        "communication (exposed)": exposed,
    }
    rows = [pd.DataFrame({s.PHASE: totals[s.PHASE], PART: name, MS_PER_RANK: v / n / MS})
            for name, v in parts.items()]
    return pd.concat(rows, ignore_index=True)


def efficiency_points(analysis: Analysis, limit: int = SCATTER_MAX) -> Sampled:
    """Measured collectives with a bound: size, efficiency, achieved and bound bandwidth."""
    cols = [s.MSG_BYTES, s.EFFICIENCY, s.ALGBW_GBPS, s.BOUND_NS, s.GROUP, s.PATH, s.OP,
            s.NAME, s.TRANSFER_NS]
    df = frames.to_frame(analysis.measured, cols)
    df = df[(df[s.MSG_BYTES].astype(float) > 0) & df[s.EFFICIENCY].notna()]
    total = len(df)
    if total > limit:
        df = df.iloc[np.linspace(0, total - 1, limit).astype(int)]
    out = df.assign(**{
        s.GROUP: df[s.GROUP].fillna("-").astype(str), s.PATH: df[s.PATH].fillna("-").astype(str),
        s.OP: df[s.OP].fillna("-").astype(str), s.NAME: df[s.NAME].fillna("").astype(str),
        BYTES_TXT: df[s.MSG_BYTES].map(fmt.nbytes), EFF_TXT: df[s.EFFICIENCY].map(fmt.ratio),
        BOUND_GBPS: df[s.MSG_BYTES].astype(float) / df[s.BOUND_NS].astype(float),
    })
    return Sampled(out.reset_index(drop=True), len(out), total)


def bound_curves(points: pd.DataFrame) -> pd.DataFrame:
    """Per group and op, the bandwidth the bound allows at each message size (sorted)."""
    if not len(points):
        return pd.DataFrame(columns=[s.GROUP, s.OP, s.MSG_BYTES, BOUND_GBPS])
    g = points.groupby([s.GROUP, s.OP, s.MSG_BYTES], sort=True)[BOUND_GBPS].median()
    return g.reset_index()


@dataclass(frozen=True)
class A2A:
    matrix: pd.DataFrame  # src_rank, dst_rank, msg_bytes summed over instances
    per_rank: pd.DataFrame  # rank, send_bytes, recv_bytes
    imbalance: pd.DataFrame  # per path: instances, mean and max imbalance
    instances: int


def a2a(analysis: Analysis) -> A2A | None:
    """The all-to-all matrix C[i][j] summed over instances, per-rank totals and imbalance."""
    table = analysis.tables.get("a2a_matrix")
    if not frames.has_rows(table):
        return None
    m = frames.to_frame(table, [s.INSTANCE, s.SRC_RANK, s.DST_RANK, s.MSG_BYTES])
    matrix = m.groupby([s.SRC_RANK, s.DST_RANK], sort=True)[s.MSG_BYTES].sum().reset_index()
    send = matrix.groupby(s.SRC_RANK)[s.MSG_BYTES].sum().rename(s.SEND_BYTES)
    recv = matrix.groupby(s.DST_RANK)[s.MSG_BYTES].sum().rename(s.RECV_BYTES)
    per_rank = pd.concat([send, recv], axis=1).fillna(0).rename_axis(s.RANK).reset_index()
    imb = frames.to_frame(analysis.tables.get("a2a"), [s.PATH, s.IMBALANCE, s.INSTANCE])
    imb = imb[imb[s.IMBALANCE].notna()]
    g = imb.groupby(s.PATH, sort=True)
    summary = pd.DataFrame({INSTANCES: g[s.INSTANCE].nunique(),
                            MEAN_IMBALANCE: g[s.IMBALANCE].mean(),
                            MAX_IMBALANCE: g[s.IMBALANCE].max()})
    return A2A(matrix, per_rank, summary.reset_index(), int(m[s.INSTANCE].nunique()))


def imbalance_of(per_rank: pd.DataFrame) -> float | None:
    """max / mean of per-rank max(send, recv) over the summed matrix."""
    load = per_rank[[s.SEND_BYTES, s.RECV_BYTES]].max(axis=1).astype(float)
    return frames.ratio(float(load.max()), float(load.mean())) if len(load) else None
