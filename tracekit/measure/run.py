"""The measure stage in two halves, which both executions run (tracekit.pipeline):

    measure_ranks  ATTRIBUTED (any ranks) -> RankMeasures: TIME_CLASSES and the comm rows
                   (one per collective instance, with its exposed time); each rank alone
    cross_rank     the comm rows of every rank + the run's groups -> CrossRanked: MEASURED,
                   STRAGGLERS, a2a, fits, COVERAGE and the measures' FINDINGS
    measure_run    both over a whole run -> Analysis (tracekit.api.measure)

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
import pyarrow.compute as pc

from tracekit import model, schema, tables
from tracekit.measure import a2a, coverage, crossrank, evidence, fit, phasetable
from tracekit.measure.bounds import (
    A2A_OPS,
    OpCodes,
    bus_factor_v,
    hierarchical_ns,
    lower_bound_v,
    message_size_v,
    op_codes,
)
from tracekit.measure.hardware import HardwareProfile, load_profile
from tracekit.measure.phases import Timeline, build_timeline, exposed_ns, time_classes
from tracekit.measure.phasetable import phase_table
from tracekit.measure.placement import group_layout, rank_nodes
from tracekit.schema import BoundStatus, KernelClass, Op

NODES, PER_NODE = "nodes", "per_node"


def _bounds(df: pd.DataFrame, n: np.ndarray, size: np.ndarray,
            profile: HardwareProfile | None, coded: OpCodes
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    alpha = lc.alpha_ns(coded, n)
    b = lower_bound_v(coded, size, n, alpha, bw_row)
    if lc.nvls_gbps:
        nvls = lower_bound_v(coded, size, n, alpha, lc.nvls_gbps)
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


def _a2a_overrides(df: pd.DataFrame, is_a2a: np.ndarray, summary: pa.Table, sizes: pd.Series,
                   link: np.ndarray, bound: np.ndarray, size: np.ndarray) -> None:
    """Instances with a traffic matrix take its S, bound and bottleneck link class
    (``is_a2a``: the rows whose op is an all-to-all, A2A_OPS)."""
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
    ops: OpCodes  # the rows' ops, factorized once for the vector functions (bounds.op_codes)
    profile: HardwareProfile | None = None


def _member_ranks(df: pd.DataFrame) -> np.ndarray:
    """The ranks of every distinct member list: one row per communicator (MEMBERS is the
    text of PG_RANKS), not all of them (64 members on 100k rows are 6.4M values)."""
    codes = pd.factorize(df[crossrank.MEMBERS])[0]
    _, first = np.unique(codes[codes >= 0], return_index=True)
    pick = np.concatenate([np.flatnonzero(codes >= 0)[first], np.flatnonzero(codes < 0)])
    lists = df[schema.PG_RANKS].iloc[pick].astype(object)
    return pa.array(lists.where(lists.notna(), None).tolist(),
                    type=pa.list_(pa.int64())).flatten().to_numpy()


def size_and_bound(df: pd.DataFrame, run: model.Run, profile: HardwareProfile | None) -> _Sized:
    """Group size, S, link class and bound per matched row; also separates transfer from
    wait where the evidence allows (measure.evidence: a lone member's wait is unknown)."""
    ranks = np.concatenate([df[schema.RANK].to_numpy(dtype=np.int64), _member_ranks(df)])
    nodes = rank_nodes(run.rank_info, ranks, profile)
    n = evidence.group_size(df, run.process_groups).to_numpy()
    df[crossrank.N_GROUP] = n
    evidence.split_times(df, n, evidence.profiler_times(run.extra))
    layout = group_layout(df[crossrank.MEMBERS], pd.Series(n, index=df.index), nodes)
    df[NODES], df[PER_NODE] = layout[NODES], layout[PER_NODE]
    coded = op_codes(df[schema.OP].to_numpy(dtype=object))  # once for every vector below
    size = message_size_v(coded, df[schema.IN_BYTES].astype("float64"),
                          df[schema.OUT_BYTES].astype("float64"), n)
    size = pd.Series(size).groupby(df[schema.INSTANCE].to_numpy()).transform("max").to_numpy(
        dtype=np.float64, copy=True)
    is_a2a = np.isin(coded.codes, [k for k, op in enumerate(coded.names) if op in A2A_OPS])
    matrix = a2a.matrices(df, nodes, profile, is_a2a)
    # (an empty matrix has no summary: the peers per instance only where one is made)
    summary = a2a.summary(matrix, df, profile, df.drop_duplicates(schema.INSTANCE).set_index(
        schema.INSTANCE)[PER_NODE] - 1 if matrix.num_rows else pd.Series(dtype=np.int64))
    link, bound, alpha = _bounds(df, n, size, profile, coded)
    if is_a2a.any():
        _a2a_overrides(df, is_a2a, summary, a2a.instance_bytes(matrix), link, bound, size)
    if profile is not None and profile.inter != profile.intra:  # inter-node-bound: its alpha
        alpha = np.where(link == profile.inter, profile.inter_link.alpha_us * 1e3, alpha)
    # a bound needs the communicator's real size (more than one member) and known bytes
    bound = np.where((n > 1) & np.isfinite(size), bound, np.nan)
    return _Sized(n, size, link, bound, alpha, matrix, summary, coded, profile)


def measured_frame(df: pd.DataFrame, sized: _Sized, exposed: np.ndarray) -> pd.DataFrame:
    """MEASURED rows as a frame: times from crossrank, sizes and bounds, exposed time."""
    transfer = df[schema.TRANSFER_NS].to_numpy(dtype=np.float64, na_value=np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(transfer > 0, sized.size / transfer, np.nan)
        efficiency = np.where(transfer > 0, sized.bound / transfer, np.nan)
    status = evidence.bound_status(sized.n, sized.size, sized.bound, transfer,
                                   sized.profile is not None)
    tolerance = sized.profile.tolerance if sized.profile is not None else np.inf
    exceeded = np.isfinite(efficiency) & (efficiency > 1.0 + tolerance)
    status[exceeded] = BoundStatus.ALL.index(BoundStatus.EXCEEDED)
    bound = np.where(exceeded, np.nan, sized.bound)
    measured = df[[schema.RANK, schema.EVENT_ID, schema.INSTANCE, schema.NAME, schema.OP,
                   schema.GROUP, schema.PATH, schema.PHASE, schema.LAYER, schema.KERNEL_CLASS,
                   schema.TS_NS, schema.DUR_NS, schema.TRANSFER_NS, schema.WAIT_NS,
                   schema.NOTIFY_NS, schema.SKEW_NS, schema.TIME_SOURCE, evidence.N_SOURCE]]
    latency = pd.Series(sized.alpha >= sized.bound - sized.alpha, dtype="boolean",
                        index=df.index)
    # the float columns with infinities as NaN (on the arrays, not the frame's columns)
    measured = measured.assign(**{
        schema.LINK_CLASS: sized.link, schema.MSG_BYTES: _finite(sized.size),
        schema.N_RANKS: _finite(sized.n), schema.BOUND_NS: _finite(bound),
        schema.EFFICIENCY: _finite(np.where(exceeded, np.nan, efficiency)),
        schema.ALGBW_GBPS: _finite(algbw),
        schema.BUSBW_GBPS: _finite(algbw * bus_factor_v(sized.ops, sized.n)),
        schema.EXPOSED_NS: pd.array(np.asarray(exposed), dtype="Int64")
        if np.issubdtype(np.asarray(exposed).dtype, np.integer) else exposed,
        schema.LATENCY_BOUND: latency.where(np.isfinite(bound), pd.NA),
        schema.BOUND_STATUS: tables.text_series(status, BoundStatus.ALL, df.index),
        evidence.RAW_BOUND: _finite(sized.bound),
        evidence.RAW_EFF: _finite(efficiency),
    })
    return measured


def _finite(values: np.ndarray) -> np.ndarray:
    """A float array with its infinities as NaN (a new array only where it has some); other
    dtypes as they are."""
    values = np.asarray(values)
    if values.dtype.kind != "f" or not np.isinf(values).any():
        return values
    return np.where(np.isinf(values), np.nan, values)


def bound_findings(measured: pd.DataFrame, sized: _Sized) -> pa.Table:
    """measure.bound-exceeded findings of a measured_frame."""
    profile = sized.profile
    if profile is None:
        return schema.empty(schema.FINDINGS)
    return evidence.exceeded_findings(measured, profile.name, profile.tolerance)


# the columns of comm_table that cross_rank reads (not the row positions and ends that the
# exposed time needed, the pid or the logical id)
CROSS_RANK_COLUMNS = (
    schema.RANK, schema.EVENT_ID, schema.TS_NS, schema.DUR_NS, schema.NAME, schema.OP,
    schema.GROUP, schema.PATH, schema.PHASE, schema.LAYER, schema.KERNEL_CLASS,
    schema.IN_BYTES, schema.OUT_BYTES, schema.IN_SPLIT, schema.OUT_SPLIT, schema.GROUP_SIZE,
    schema.PG_NAME, schema.PG_RANKS, schema.SEQ, schema.COMMS_ID, schema.PG_DESC,
    schema.CORRELATION, crossrank.MEMBERS, crossrank.FROM_TOPOLOGY, schema.NOTIFY_NS,
    schema.EXPOSED_NS, crossrank.HAS_CALL_SITE,
)


# MEASURED's text columns that are the comm rows' own (no stage of cross_rank writes them):
# they come from the comm rows' dictionary codes, not from the frame's Python strings
PASSED_TEXT = (schema.NAME, schema.OP, schema.GROUP, schema.PATH, schema.PHASE,
               schema.KERNEL_CLASS)
COMM_ROW = "_comm_row"  # cross_rank: the comm row each matched row came from


@dataclass
class RankMeasures:
    """The per-rank half of the measure (:func:`measure_ranks`): what each rank measures alone."""

    comm: pa.Table  # one row per collective instance with its exposed time (comm_table)
    classes: pa.Table  # TIME_CLASSES
    timeline: Timeline  # the ranks' device lanes (the whole-run phase table reads them)


@dataclass
class CrossRanked:
    """The cross-rank half of the measure (:func:`cross_rank`): run-wide tables."""

    measured: pa.Table  # MEASURED (rows in matching order unless cross_rank's rank_order)
    stragglers: pa.Table  # STRAGGLERS
    a2a_matrix: pa.Table
    a2a: pa.Table
    fits: pa.Table
    coverage: pa.Table  # COVERAGE
    findings: pa.Table  # FINDINGS: stragglers, impossible efficiencies, absent members
    hardware: dict[str, object] | None  # the profile as Analysis.info["hardware"] gives it


# comm_table's text columns that are the instance rows' own (not completed from the CPU
# wrappers: crossrank._META): dictionary-encoded as in ATTRIBUTED
OWN_TEXT = (schema.NAME, schema.GROUP, schema.PATH, schema.PHASE, schema.KERNEL_CLASS)


def comm_table(attributed: pa.Table, timeline: Timeline | None = None) -> pa.Table:
    """One row per collective instance of the ranks of ``attributed`` (conformed to
    ATTRIBUTED), with its exposed (not overlapped) time: what :func:`cross_rank` reads.

    The rows are crossrank.instance_rows (metadata completed from the CPU wrappers, kernels of
    one logical collective merged); the call site, which only coverage reads and only as
    "has one", travels as the flag ``crossrank.HAS_CALL_SITE``.
    """
    df = crossrank.instance_rows(attributed)
    site = df.pop(crossrank.HAS_CALL_SITE)  # the last column, as comm rows always had it
    if len(df):
        tl = timeline if timeline is not None else build_timeline(attributed)
        fused = (df[schema.KERNEL_CLASS] == KernelClass.FUSED).to_numpy()
        df[schema.EXPOSED_NS] = exposed_ns(
            tl, df[crossrank.ROW].to_numpy(dtype=np.int64),
            df[schema.TS_NS].to_numpy(dtype=np.int64),
            df[crossrank.END].to_numpy(dtype=np.int64), fused)
    else:
        df[schema.EXPOSED_NS] = pd.Series(dtype="int64")
    df[crossrank.HAS_CALL_SITE] = site
    # the rows' own text (no wrapper merges it) as the ATTRIBUTED dictionary codes taken,
    # not the frame's Python strings encoded to text again (cross_rank codes them anyway)
    own = [c for c in OWN_TEXT if c in df.columns]
    table = pa.Table.from_pandas(df.drop(columns=own), preserve_index=False)
    rows = pa.array(df[crossrank.ROW].to_numpy(dtype=np.int64))
    for c in own:
        table = table.add_column(df.columns.get_loc(c), c, attributed.column(c).take(rows))
    return table


def measure_ranks(attributed: pa.Table) -> RankMeasures:
    """The measures each rank takes alone: time classes and the communication rows with
    their exposed time. ``attributed`` must be conformed to ATTRIBUTED."""
    tl = build_timeline(attributed)
    return RankMeasures(comm_table(attributed, tl), time_classes(tl), tl)


def cross_rank(comm: pa.Table, run: model.Run, options: model.AnalyzeOptions, *,
               rank_order: bool = False) -> CrossRanked:
    """Match the collective instances of ``comm`` (comm_table's rows of every rank) across
    ranks, then time, size and bound them (``options.hardware``) and find the stragglers.

    ``run`` gives PROCESS_GROUPS, RANK_INFO and, where present, the events (CUDA-graph
    launches for coverage) and the profiler's own times; ``options.topology`` fills the
    members of communicators whose rows lack them. MEASURED comes in matching order (start,
    then rank), or with ``rank_order`` by (rank, start, event id).
    """
    profile = load_profile(options.hardware) if options.hardware is not None else None
    frame, encoded = _comm_frame(comm)
    del comm  # freed here when the caller passed it without keeping it (a partitioned run)
    # the comm rows' own text columns, as dictionary codes: MEASURED takes them from here
    texts = encoded.select([c for c in PASSED_TEXT if c in encoded.column_names])
    del encoded
    frame[COMM_ROW] = np.arange(len(frame), dtype=np.int64)
    df = crossrank.match(crossrank.fill_members(frame, options.topology))
    del frame
    sized = size_and_bound(df, run, profile)
    measured = measured_frame(df, sized, df[schema.EXPOSED_NS].to_numpy())
    keys = [schema.RANK, schema.TS_NS, schema.EVENT_ID]
    # rank order: the frame's rows taken a column at a time, not a sorted copy of it all
    order = np.asarray(measured[keys].reset_index(drop=True).sort_values(
        keys, kind="stable").index, dtype=np.int64) if rank_order else None
    rows = df[COMM_ROW].to_numpy(dtype=np.int64)
    rows = pa.array(rows if order is None else rows[order])
    measured_table = crossrank.table_of(measured, schema.MEASURED, order=order, texts={
        c: texts.column(c).take(rows) for c in texts.column_names})
    del texts
    cover = coverage.coverage_table(run, df, measured)
    first = ~measured[schema.INSTANCE].duplicated().to_numpy()  # an instance's first row
    bus_bytes = sized.size * bus_factor_v(sized.ops, sized.n)
    fits = fit.fit_table(measured[list(fit.COLUMNS)][first].assign(
        **{fit.BUS_BYTES: bus_bytes[first]}), profile)  # the columns it reads, then the rows
    strag = crossrank.stragglers(df)
    findings = _concat(crossrank.straggler_findings(strag, df), bound_findings(measured, sized),
                       coverage.findings(cover))
    return CrossRanked(measured_table, strag, sized.matrix, sized.summary, fits, cover,
                       findings, _profile_info(profile))


def comm_frame(comm: pa.Table) -> pd.DataFrame:
    """comm_table's rows as the frame crossrank.match takes (an empty one when none), with
    only the columns :func:`cross_rank` reads (CROSS_RANK_COLUMNS)."""
    return _comm_frame(comm)[0]


def _comm_frame(comm: pa.Table) -> tuple[pd.DataFrame, pa.Table]:
    """comm_frame, and the table it converted (its text columns dictionary-encoded)."""
    if not comm.num_rows:
        comm = comm_table(schema.empty(schema.ATTRIBUTED))
    comm = crossrank.with_call_site_flag(comm)  # comm rows written before the flag
    columns = [c for c in CROSS_RANK_COLUMNS if c in comm.column_names or c == schema.PG_RANKS]
    ranks = _ranks_by_members(comm)
    comm = comm.select([c for c in columns if c != schema.PG_RANKS])
    # text as object arrays with one Python string per distinct value (names, groups and
    # members repeat on every rank), not one per row
    for i, f in enumerate(comm.schema):
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
            comm = comm.set_column(i, f.name, pc.dictionary_encode(comm.column(i)))
    df = tables.to_frame(comm)
    df.insert(columns.index(schema.PG_RANKS), schema.PG_RANKS,
              pd.Series(ranks, dtype=object, copy=False))
    return df, comm


def _ranks_by_members(comm: pa.Table) -> np.ndarray:
    """PG_RANKS as an object array holding one array per communicator: rows with the same
    MEMBERS (crossrank.instance_rows joins PG_RANKS into it) share it, instead of an array
    of their own each (a list of 64 members is about 370 bytes a row). Without a PG_RANKS
    column (a partitioned run reads only MEMBERS: the lists are most of the comm parts'
    bytes) each distinct MEMBERS text is split back into its list."""
    codes, texts = _member_codes(comm.column(crossrank.MEMBERS))
    out = np.empty(len(codes), dtype=object)
    keyed = codes >= 0
    if schema.PG_RANKS not in comm.column_names:
        out[keyed] = member_lists(texts).to_numpy(zero_copy_only=False)[codes[keyed]]
        return out  # None where there are no members (a null list joins to null)
    lists = comm.column(schema.PG_RANKS).combine_chunks()
    _, first, inverse = np.unique(codes[keyed], return_index=True, return_inverse=True)
    shared = lists.take(pa.array(np.flatnonzero(keyed)[first])).to_numpy(zero_copy_only=False)
    out[keyed] = shared[inverse]
    if not keyed.all():
        out[~keyed] = lists.filter(pa.array(~keyed)).to_numpy(zero_copy_only=False)
    return out


def member_lists(texts: pa.Array) -> pa.Array:
    """MEMBERS texts ("0,1,2", "" for an empty list) back to PG_RANKS lists (list<int32>)."""
    texts = pc.fill_null(texts.cast(pa.string()), "")
    words = pc.split_pattern(texts, ",")
    lengths = np.where(np.asarray(pc.equal(texts, "").to_numpy(zero_copy_only=False)), 0,
                       np.asarray(pc.list_value_length(words).to_numpy(), dtype=np.int64))
    flat = pc.list_flatten(words)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = flat.filter(pc.not_equal(flat, "")).cast(pa.int32())
    return pa.ListArray.from_arrays(pa.array(offsets), values,
                                    type=pa.list_(pa.field("item", pa.int32())))


def _member_codes(members: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """One integer per distinct MEMBERS text (-1: none) and the texts the integers index:
    read as dictionaries (a part per rank), the ranks' dictionaries are unified instead of
    every row's text decoded."""
    if pa.types.is_dictionary(members.type):
        unified = members.unify_dictionaries()
        indices = pa.chunked_array([c.indices for c in unified.chunks],
                                   type=members.type.index_type)
        texts = unified.chunks[0].dictionary if unified.num_chunks else pa.array(
            [], pa.string())
    else:
        encoded = pc.dictionary_encode(members.combine_chunks())
        indices, texts = encoded.indices, encoded.dictionary
    return np.asarray(pc.fill_null(indices, -1).to_numpy(), dtype=np.int64), texts


def analysis_of(run: model.Run, attributed: pa.Table, ranks: RankMeasures,
                cross: CrossRanked) -> model.Analysis:
    """The whole-run Analysis of both halves (the phase table needs both)."""
    analysis = model.Analysis(
        run=run,
        attributed=attributed,
        measured=cross.measured,
        phases_table=phase_table(ranks.timeline, attributed, crossrank.int_frame(
            cross.measured.select(list(phasetable.MEASURED_COLUMNS)))),
        extra_tables={
            "time_classes": ranks.classes,
            "a2a_matrix": cross.a2a_matrix,
            "a2a": cross.a2a,
            "fits": cross.fits,
            "stragglers": cross.stragglers,
            "coverage": cross.coverage,
        },
        findings_table=cross.findings,
    )
    analysis.info["hardware"] = cross.hardware
    return analysis


def measure_run(run: model.Run, attributed: pa.Table,
                options: model.AnalyzeOptions) -> model.Analysis:
    """Both halves over a whole run: MEASURED, PHASES and the tables time_classes,
    a2a_matrix, a2a, fits, stragglers, coverage (tracekit.api.measure)."""
    attributed = schema.conform(attributed, schema.ATTRIBUTED)
    ranks = measure_ranks(attributed)
    return analysis_of(run, attributed, ranks, cross_rank(ranks.comm, run, options))


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
