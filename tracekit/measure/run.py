"""measure_run: ATTRIBUTED -> MEASURED, PHASES and the extra tables of tracekit.measure.

Steps: select the rows that carry each collective's time and match them across ranks
(crossrank); size each collective the nccl-tests way and bound it with the hardware profile
(bounds, hardware, placement, a2a); place every timed row on its device to get time classes
and exposed communication (phases); fit alpha and beta per (group, op, link class) (fit);
total per phase and layer (phasetable).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import model, progress, schema
from tracekit.measure import a2a, coverage, crossrank, evidence, fit
from tracekit.measure.bounds import (
    A2A_OPS,
    bus_factor_v,
    hierarchical_ns,
    lower_bound_v,
    message_size_v,
)
from tracekit.measure.hardware import HardwareProfile, load_profile
from tracekit.measure.phases import build_timeline, exposed_ns, time_classes
from tracekit.measure.phasetable import phase_table
from tracekit.measure.placement import group_layout, rank_nodes
from tracekit.schema import BoundStatus, KernelClass, Op

NODES, PER_NODE = "nodes", "per_node"


def _bounds(df: pd.DataFrame, n: np.ndarray, size: np.ndarray,
            profile: HardwareProfile | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(link class, bound ns, alpha ns) per row from the profile and the group's layout."""
    link = np.full(len(df), None, dtype=object)
    bound = np.full(len(df), np.nan)
    alpha_row = np.full(len(df), np.nan)
    if profile is None:
        return link, bound, alpha_row
    ops = df[schema.OP].to_numpy(dtype=object)
    single = df[NODES].to_numpy() <= 1
    per_node = df[PER_NODE].to_numpy(dtype=np.int64)
    lc = profile.intra_link
    bw = np.asarray([lc.effective_gbps(p - 1) for p in np.unique(per_node)])
    bw_row = bw[np.searchsorted(np.unique(per_node), per_node)]
    alpha = lc.alpha_ns(ops, n)
    b = lower_bound_v(ops, size, n, alpha, bw_row)
    if lc.nvls_gbps:
        nvls = lower_bound_v(ops, size, n, alpha, lc.nvls_gbps)
        b = np.where(ops == Op.ALL_REDUCE, np.fmin(b, nvls), b)
    bound[single] = b[single]
    alpha_row[single] = alpha[single]
    link[single] = profile.intra
    multi = ~single
    if multi.any():
        inter = profile.inter_link
        combos = df.loc[multi, [schema.OP, PER_NODE, NODES]].drop_duplicates()
        for op, g, nodes in combos.itertuples(index=False):
            m = multi & (ops == op) & (per_node == g) & (df[NODES].to_numpy() == nodes)
            bound[m] = hierarchical_ns(
                str(op), size[m], int(g), int(nodes), inter.alpha_us * 1e3,
                lc.effective_gbps(int(g) - 1), inter.achievable_gbps,
                int(profile.nics_per_node or g))
        link[multi] = profile.inter
        alpha_row[multi] = inter.alpha_us * 1e3
    return link, bound, alpha_row


def _a2a_overrides(df: pd.DataFrame, summary: pa.Table, sizes: pd.Series,
                   link: np.ndarray, bound: np.ndarray, size: np.ndarray) -> None:
    """Instances with a traffic matrix take its S, bound and bottleneck link class."""
    is_a2a = df[schema.OP].isin(A2A_OPS).to_numpy()
    inst = df[schema.INSTANCE]
    s = inst.map(sizes).to_numpy(dtype=np.float64)
    has = is_a2a & np.isfinite(s)
    size[has] = s[has]
    if summary.num_rows == 0:
        return
    a = crossrank.frame(summary).sort_values(schema.BOUND_NS, ascending=False, kind="stable")
    top = a.drop_duplicates(schema.INSTANCE).set_index(schema.INSTANCE)
    b = inst.map(top[schema.BOUND_NS].astype("float64")).to_numpy(dtype=np.float64)
    lk = inst.map(top[schema.LINK_CLASS]).to_numpy(dtype=object)
    has_b = is_a2a & np.isfinite(b)
    bound[has_b] = b[has_b]
    link[has_b] = lk[has_b]


@dataclass
class _Sized:
    """Per matched row: group size, nccl-tests S, link class, bound and its alpha."""

    n: np.ndarray
    size: np.ndarray
    link: np.ndarray
    bound: np.ndarray
    alpha: np.ndarray
    matrix: pa.Table
    summary: pa.Table
    profile: HardwareProfile | None = None


def size_and_bound(df: pd.DataFrame, run: model.Run, profile: HardwareProfile | None) -> _Sized:
    """Group size, S, link class and bound per matched row; also separates transfer from
    wait where the evidence allows (measure.evidence: a lone member's wait is unknown)."""
    members = pa.array(df[schema.PG_RANKS].astype(object).where(df[schema.PG_RANKS].notna(),
                                                                 None).tolist(),
                       type=pa.list_(pa.int64())).flatten().to_numpy()
    ranks = np.concatenate([df[schema.RANK].to_numpy(dtype=np.int64), members])
    nodes = rank_nodes(run.rank_info, ranks, profile)
    n = evidence.group_size(df, run.process_groups).to_numpy()
    df[crossrank.N_GROUP] = n
    evidence.split_times(df, n, evidence.profiler_times(run.extra))
    layout = group_layout(df[crossrank.MEMBERS], pd.Series(n, index=df.index), nodes)
    df[NODES], df[PER_NODE] = layout[NODES], layout[PER_NODE]
    ops = df[schema.OP].to_numpy(dtype=object)
    size = message_size_v(ops, df[schema.IN_BYTES].astype("float64"),
                          df[schema.OUT_BYTES].astype("float64"), n)
    size = pd.Series(size).groupby(df[schema.INSTANCE].to_numpy()).transform("max").to_numpy(
        dtype=np.float64, copy=True)
    matrix = a2a.matrices(df, nodes, profile)
    summary = a2a.summary(matrix, df, profile, df.drop_duplicates(schema.INSTANCE).set_index(
        schema.INSTANCE)[PER_NODE] - 1)
    link, bound, alpha = _bounds(df, n, size, profile)
    _a2a_overrides(df, summary, a2a.instance_bytes(matrix), link, bound, size)
    if profile is not None and profile.inter != profile.intra:  # inter-node-bound: its alpha
        alpha = np.where(link == profile.inter, profile.inter_link.alpha_us * 1e3, alpha)
    # a bound needs the communicator's real size (more than one member) and known bytes
    bound = np.where((n > 1) & np.isfinite(size), bound, np.nan)
    return _Sized(n, size, link, bound, alpha, matrix, summary, profile)


def measured_frame(df: pd.DataFrame, sized: _Sized, exposed: np.ndarray) -> pd.DataFrame:
    """MEASURED rows as a frame: times from crossrank, sizes and bounds, exposed time."""
    ops = df[schema.OP].to_numpy(dtype=object)
    transfer = df[schema.TRANSFER_NS].to_numpy(dtype=np.float64, na_value=np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(transfer > 0, sized.size / transfer, np.nan)
        efficiency = np.where(transfer > 0, sized.bound / transfer, np.nan)
    status = evidence.bound_status(sized.n, sized.size, sized.bound, transfer,
                                   sized.profile is not None)
    tolerance = sized.profile.tolerance if sized.profile is not None else np.inf
    exceeded = np.isfinite(efficiency) & (efficiency > 1.0 + tolerance)
    status[exceeded] = BoundStatus.EXCEEDED
    bound = np.where(exceeded, np.nan, sized.bound)
    measured = df[[schema.RANK, schema.EVENT_ID, schema.INSTANCE, schema.NAME, schema.OP,
                   schema.GROUP, schema.PATH, schema.PHASE, schema.LAYER, schema.KERNEL_CLASS,
                   schema.TS_NS, schema.DUR_NS, schema.TRANSFER_NS, schema.WAIT_NS,
                   schema.NOTIFY_NS, schema.SKEW_NS, schema.TIME_SOURCE, evidence.N_SOURCE]].copy()
    latency = pd.Series(sized.alpha >= sized.bound - sized.alpha, dtype="boolean",
                        index=df.index)
    measured = measured.assign(**{
        schema.LINK_CLASS: sized.link, schema.MSG_BYTES: sized.size, schema.N_RANKS: sized.n,
        schema.BOUND_NS: bound, schema.EFFICIENCY: np.where(exceeded, np.nan, efficiency),
        schema.ALGBW_GBPS: algbw,
        schema.BUSBW_GBPS: algbw * bus_factor_v(ops, sized.n),
        schema.EXPOSED_NS: pd.array(np.asarray(exposed), dtype="Int64")
        if np.issubdtype(np.asarray(exposed).dtype, np.integer) else exposed,
        schema.LATENCY_BOUND: latency.where(np.isfinite(bound), pd.NA),
        schema.BOUND_STATUS: status, evidence.RAW_BOUND: sized.bound,
        evidence.RAW_EFF: efficiency,
    })
    float_cols = [schema.MSG_BYTES, schema.N_RANKS, schema.BOUND_NS, schema.EFFICIENCY,
                  schema.ALGBW_GBPS, schema.BUSBW_GBPS, evidence.RAW_BOUND, evidence.RAW_EFF]
    measured[float_cols] = measured[float_cols].replace([np.inf, -np.inf], np.nan)
    return measured


def bound_findings(measured: pd.DataFrame, sized: _Sized) -> pa.Table:
    """measure.bound-exceeded findings of a measured_frame."""
    profile = sized.profile
    if profile is None:
        return schema.empty(schema.FINDINGS)
    return evidence.exceeded_findings(measured, profile.name, profile.tolerance)


def measure_run(run: model.Run, attributed: pa.Table,
                options: model.AnalyzeOptions) -> model.Analysis:
    """Fill MEASURED, PHASES and the tables time_classes, a2a_matrix, a2a, fits, stragglers."""
    attributed = schema.conform(attributed, schema.ATTRIBUTED)
    profile = load_profile(options.hardware) if options.hardware is not None else None
    tl = build_timeline(attributed)
    with progress.stage("cross-rank"):
        df = crossrank.match(crossrank.fill_members(crossrank.instance_rows(attributed),
                                                    options.topology))
    sized = size_and_bound(df, run, profile)
    fused = (df[schema.KERNEL_CLASS] == KernelClass.FUSED).to_numpy()
    exposed = exposed_ns(tl, df[crossrank.ROW].to_numpy(dtype=np.int64),
                         df[schema.TS_NS].to_numpy(dtype=np.int64),
                         df[crossrank.END].to_numpy(dtype=np.int64), fused)
    measured = measured_frame(df, sized, exposed)
    measured_table = crossrank.table_of(measured, schema.MEASURED)
    cover = coverage.coverage_table(run, df, measured)
    ops = df[schema.OP].to_numpy(dtype=object)
    inst = measured.assign(**{fit.BUS_BYTES: sized.size * bus_factor_v(ops, sized.n)})
    strag = crossrank.stragglers(df)
    analysis = model.Analysis(
        run=run,
        attributed=attributed,
        measured=measured_table,
        phases_table=phase_table(tl, attributed, crossrank.int_frame(measured_table)),
        extra_tables={
            "time_classes": time_classes(tl),
            "a2a_matrix": sized.matrix,
            "a2a": sized.summary,
            "fits": fit.fit_table(inst.drop_duplicates(schema.INSTANCE), profile),
            "stragglers": strag,
            "coverage": cover,
        },
        findings_table=_concat(crossrank.straggler_findings(strag, df),
                         bound_findings(measured, sized), coverage.findings(cover)),
    )
    analysis.info["hardware"] = _profile_info(profile)
    return analysis


def _concat(*tables: pa.Table) -> pa.Table:
    return pa.concat_tables([schema.conform(t, schema.FINDINGS) for t in tables])


def _profile_info(profile: HardwareProfile | None) -> dict[str, object] | None:
    if profile is None:
        return None
    return {
        "name": profile.name, "path": profile.path, "intra": profile.intra,
        "inter": profile.inter, "tolerance": profile.tolerance,
        "unverified": {k: list(v.unverified) for k, v in profile.links.items() if v.unverified},
    }
