"""The attribute stage: EVENTS -> (ATTRIBUTED, FINDINGS).

Steps, each a function over the engine's working frame (``tracekit.rules.frame``):

1. classify every event by the ``kernel_classes`` rules (kernels.py);
2. on gloo traces, link each c10d op to the runloop annotation it caused (gloo.py);
3. the call sites of the communication rows the parser left without one (stacks.py),
   call-site rules (callsites.py), then the group evidence chain (groups.py), then the
   runloop-thread evidence and a second pass;
4. logical collectives, steps and decoder layers (layers.py);
5. paths from rules, then by position inside each layer (paths.py);
6. lints into FINDINGS (lints.py).

Only communication rows (kernel class communication or fused) get a group, path and status;
every row gets its kernel class.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import model
from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules.callsites import apply_call_sites
from tracekit.rules.gloo import link_wrappers, thread_groups
from tracekit.rules.grouping import grouped_tuples
from tracekit.rules.groups import (
    attribute_groups,
    evidence_codes,
    kernel_group,
    participants_pass,
)
from tracekit.rules.kernels import classify_table, rule_column
from tracekit.rules.keys import first_rows, objects, row_codes, tuple_keys
from tracekit.rules.launcher import launchers, take_launcher_facts
from tracekit.rules.layers import (
    host_times,
    logical_ids,
    marker_layers,
    periodic_layers,
    steps,
)
from tracekit.rules.lints import collective_units, run_lints
from tracekit.rules.loader import load_rules
from tracekit.rules.model import RuleSet
from tracekit.rules.nesting import fill_from_nested
from tracekit.rules.notify import PREPARES, fill_prepared_ops, prepared_targets, take_prepared
from tracekit.rules.paths import (
    Families,
    Placement,
    place,
    required_families,
    rule_paths,
    slot_candidates,
)
from tracekit.rules.signatures import transfer
from tracekit.rules.stacks import missing_call_sites, with_call_sites
from tracekit.rules.world import world_fallback
from tracekit.schema import KernelClass, Status
from tracekit.tables import to_frame, to_pandas
from tracekit.topology import Topology

COMM_CLASSES = (KernelClass.COMM, KernelClass.FUSED)
_NEEDED = (
    S.RANK, S.PID, S.TID, S.TS_NS, S.DUR_NS, S.NAME, S.KIND, S.CALL_SITE, S.OP, S.PG_DESC,
    S.PG_NAME, S.PG_RANKS, S.IN_NELEMS, S.OUT_NELEMS, S.IN_BYTES, S.OUT_BYTES,
    S.GROUP_SIZE, S.STREAM, S.EXTERNAL_ID, S.CORRELATION, S.META_SOURCE,
)


def resolve_topology(run: model.Run, options: model.AnalyzeOptions,
                     rules: RuleSet) -> Topology | None:
    """The topology given in the options, else the one the trace's process groups imply."""
    from tracekit.rules.infer import infer_topology

    if isinstance(options.topology, Topology):
        return options.topology
    if options.topology is not None:
        raise TypeError("AnalyzeOptions.topology must be a tracekit.topology.Topology or None")
    world = None
    if run.rank_info.num_rows and S.WORLD_SIZE in run.rank_info.column_names:
        sizes = [w for w in run.rank_info.column(S.WORLD_SIZE).to_pylist() if w]
        world = max(sizes) if sizes else None
    return infer_topology(run.process_groups, rules, world, getattr(options, "layout", None))


def attribute_run(run: model.Run, options: model.AnalyzeOptions) -> tuple[pa.Table, pa.Table]:
    """ATTRIBUTED (every EVENTS row plus the verdict) and FINDINGS."""
    rules = load_rules(options.rules_files)
    topo = resolve_topology(run, options, rules)
    attributed, units = attribute_events(run, rules, topo)
    return attributed, run_lints(units, rules, topo, run)


def attribute_events(run: model.Run, rules: RuleSet, topo: Topology | None, *,
                     cross_rank: bool = True) -> tuple[pa.Table, pa.Table]:
    """ATTRIBUTED and COLLECTIVE_UNITS (what the lints read) of ``run``'s events.

    ``cross_rank=False`` leaves out the only evidence that reads other ranks (which ranks
    issued the same call): each rank is then attributed exactly as if it were alone, so a
    batch of ranks gives the rows of its ranks attributed one by one (logical ids aside: they
    count on across the batch's ranks, in rank order).
    """
    events = run.events
    frame = to_frame(events, _NEEDED)
    frame[F.ROW] = np.arange(len(frame), dtype=np.int64)
    krule = classify_table(events, rules)
    cls = rule_column(krule, rules, "cls")
    verdict = _attribute_comm(frame, krule, rules, topo, run, cross_rank)
    return _assemble(events, krule, cls, verdict, rules), collective_units(verdict)


def _attribute_comm(frame: pd.DataFrame, krule: np.ndarray, rules: RuleSet,
                    topo: Topology | None, run: model.Run, cross_rank: bool) -> pd.DataFrame:
    cls = rule_column(krule, rules, "cls")
    comm = frame[cls.isin(COMM_CLASSES).to_numpy()]  # a new frame (copy-on-write)
    comm[F.KRULE] = krule[comm[F.ROW].to_numpy()]
    for col, attr in ((F.LIBRARY, "library"), (F.ROLE, "role"), (F.MODE, "mode"),
                      (F.INSTANCE, "instance"), (F.RUNS_AS, "runs_as"), (F.KPATH, "path"),
                      (F.GROUPED, "grouped"), (F.GROUPED_OP, "grouped_op"), (F.RULE_OP, "op")):
        values = rule_column(comm[F.KRULE].to_numpy(), rules, attr).to_numpy()
        comm[col] = pd.Series(values, index=comm.index, dtype=object, copy=False)
    comm = take_launcher_facts(comm, launchers(frame, comm))
    comm[S.OP] = comm[S.OP].astype("object").where(comm[S.OP].notna(), comm[F.RULE_OP])
    comm[PREPARES] = prepared_targets(comm, rules)
    comm[S.OP] = fill_prepared_ops(comm)
    comm[F.HAS_SPLIT] = _has_split(run.events, comm[F.ROW].to_numpy())
    comm[F.KGROUP] = kernel_group(comm[F.KRULE], rules, topo)
    comm[F.THREAD_GROUP] = None
    comm[F.LINK] = link_wrappers(comm)
    comm[S.CALL_SITE] = missing_call_sites(run.events, comm)
    comm = comm.join(apply_call_sites(comm, rules))
    pg_table = to_pandas(run.process_groups) if run.process_groups.num_rows else pd.DataFrame()

    # the evidence but the runloop thread's group is the same in both passes
    ranks_key = objects(tuple_keys(comm[S.PG_RANKS]), comm.index)
    static = evidence_codes(comm, ranks_key)
    groups = attribute_groups(comm, rules, topo, pg_table, ranks_key, static)
    groups = _from_wrappers(comm, groups)
    decided = groups[S.GROUP].where(groups[S.STATUS] == Status.ATTRIBUTED)
    comm[F.THREAD_GROUP] = thread_groups(comm, decided)
    by_row = pd.Series(comm.index, index=comm[F.ROW].to_numpy())
    linked = comm[comm[F.LINK] >= 0]
    if not linked.empty:
        comm.loc[linked.index, F.THREAD_GROUP] = comm.loc[
            by_row.reindex(linked[F.LINK]).to_numpy(), F.THREAD_GROUP].to_numpy()
    groups = _from_wrappers(comm, attribute_groups(comm, rules, topo, pg_table, ranks_key,
                                                   static))
    groups = fill_from_nested(comm, groups, S.GROUP,
                              [S.GROUP, S.STATUS, F.GROUP_RULE, F.CANDIDATES], F.GROUP_REASON)
    if cross_rank:
        unlinked = ~comm[F.ROW].isin(comm.loc[comm[F.LINK] >= 0, F.LINK])
        asked = comm.loc[unlinked.to_numpy(), [S.RANK, S.NAME, S.OP, S.CALL_SITE]]
        last = participants_pass(asked.join(groups), topo)
        at = groups.index.get_indexer(last.index)
        for col in last.columns:
            values = groups[col].to_numpy(dtype=object, copy=True)
            values[at] = last[col].to_numpy(dtype=object)
            groups[col] = pd.Series(values, index=groups.index, dtype=object, copy=False)
    groups = world_fallback(comm, groups, topo, run)
    groups = _from_wrappers(comm, groups)
    comm = comm.join(groups)
    return _order_and_paths(frame, comm, rules, topo)


def _has_split(events: pa.Table, rows: np.ndarray) -> np.ndarray:
    """Whether each of ``rows`` has a non-empty IN_SPLIT (in Arrow: no list per row)."""
    if S.IN_SPLIT not in events.column_names:
        return np.zeros(len(rows), dtype=bool)
    lengths = pc.fill_null(pc.list_value_length(events.column(S.IN_SPLIT)), 0)
    return np.asarray(lengths.to_numpy(), dtype=np.int64)[rows] > 0


def _group_sizes(comm: pd.DataFrame, topo: Topology | None) -> pd.Series:
    """Ranks in each row's communicator: its own pg_ranks, else the topology's member list."""
    lengths = [len(r) if r is not None else 0 for r in comm[S.PG_RANKS].to_numpy()]
    own = pd.Series(np.asarray(lengths, dtype=np.float64), index=comm.index)
    own = own.where(own > 0)
    if topo is None:
        return own
    codes = row_codes([comm[S.RANK], comm[S.GROUP]])
    first = first_rows(codes)
    sizes = np.full(first.size, np.nan)
    for i, (r, g) in enumerate(zip(comm[S.RANK].iloc[first], comm[S.GROUP].iloc[first],
                                   strict=True)):
        if pd.notna(r) and pd.notna(g) and (m := topo.group_of(int(r), str(g))):
            sizes[i] = float(len(m))
    return own.fillna(pd.Series(sizes[codes], index=comm.index, dtype="float"))


def _from_wrappers(comm: pd.DataFrame, groups: pd.DataFrame) -> pd.DataFrame:
    """A gloo annotation takes the verdict of the c10d op that caused it."""
    link = comm[F.LINK].to_numpy()
    linked = np.flatnonzero(link >= 0)
    if not linked.size:
        return groups
    position = pd.Series(np.arange(len(comm)), index=comm[F.ROW].to_numpy())
    target = position.reindex(link[linked]).to_numpy().astype(np.int64)
    out = groups.copy(deep=False)  # the columns written are replaced, not modified
    for col in (S.GROUP, S.STATUS, F.GROUP_RULE, F.CANDIDATES, F.GROUP_REASON):
        values = groups[col].to_numpy(dtype=object, copy=True)
        taken = values[linked]
        if col == F.GROUP_REASON:
            taken = np.array(["linked c10d op: " + r if isinstance(r, str) else np.nan
                              for r in taken], dtype=object)
        values[target] = taken
        out[col] = pd.Series(values, index=groups.index, dtype=object, copy=False)
    return out


def _order_and_paths(frame: pd.DataFrame, comm: pd.DataFrame, rules: RuleSet,
                     topo: Topology | None) -> pd.DataFrame:
    by_row = pd.Series(comm.index, index=comm[F.ROW].to_numpy())
    linked_targets = set(comm.loc[comm[F.LINK] >= 0, F.LINK].tolist())
    has_gloo = comm[F.LIBRARY].eq("gloo").groupby(comm[S.RANK]).transform("any")
    is_wrapper = comm[F.RUNS_AS].notna()
    inst = comm[F.INSTANCE].astype(bool)
    comm[F.UNIT] = (has_gloo & is_wrapper) | (inst & ~comm[F.ROW].isin(linked_targets))
    # issue order: a kernel counts from its launch (streams overlap on the device)
    lane = comm[[c for c in (S.RANK, S.CORRELATION, S.KIND) if c in comm]]  # narrow copy
    comm[F.ORDER_TS] = host_times(frame, lane.assign(**{F.ORDER_TS: comm[S.TS_NS]}))
    ids, lop = logical_ids(comm, comm[F.GROUPED], comm[F.GROUPED_OP], _group_sizes(comm, topo))
    comm[S.LOGICAL_ID] = ids
    comm[F.LOGICAL_OP] = lop.where(lop.notna(), comm[S.OP])
    comm[S.PATH] = None
    comm[F.PATH_RULE] = None
    comm = comm.drop(columns=[S.PATH, F.PATH_RULE]).join(rule_paths(comm, rules, topo))

    # the units in issue order, then the first unit of each logical collective: ordered on
    # the few columns that decide it, the wide frame is taken once
    units = comm.loc[comm[F.UNIT], [S.RANK, F.ORDER_TS, S.TS_NS, S.LOGICAL_ID]].sort_values(
        [S.RANK, F.ORDER_TS, S.TS_NS], kind="stable")
    unit_steps = steps(frame, units)
    lead = ~units[S.LOGICAL_ID].duplicated().to_numpy()
    first = comm.loc[units.index[lead]].copy()
    first[F.STEP] = unit_steps.to_numpy()[lead]
    token_cols = first[[F.LOGICAL_OP, S.GROUP, S.NAME, S.CALL_SITE]].astype("object")
    token_cols = token_cols.where(token_cols.notna(), None)  # NaN != NaN would break periods
    first[F.TOKEN] = list(token_cols.itertuples(index=False, name=None))
    first[F.SLOTS] = [
        () if isinstance(p, str) else slot_candidates(rules, topo, o, g)
        for o, g, p in zip(first[F.LOGICAL_OP], first[S.GROUP], first[S.PATH], strict=True)]
    required = required_families(rules, topo, set(comm[S.PATH].dropna()))

    items = _sequence(first)
    fitting: dict[tuple[tuple[str | None, tuple[str, ...]], ...], bool] = {}

    def fits(positions: np.ndarray) -> bool:
        # a period must hold whole layers without slots the topology does not expect
        seq = tuple(items[i] for i in positions.tolist())
        if seq not in fitting:
            fitting[seq] = place(rules, seq, topo, required, allow_unexpected=False) is not None
        return fitting[seq]

    layer = marker_layers(frame, first, rules)
    hint = topo.config.layers if topo is not None else None
    layer = layer.fillna(periodic_layers(first, hint, fits))
    first[S.LAYER] = layer
    first = transfer(_place_paths(rules, first, topo, required), rules)
    first[S.LAYER] = _only_model_layers(first, rules)
    per_logical = first.set_index(S.LOGICAL_ID)
    known = comm[S.LOGICAL_ID].notna()
    borrowed = per_logical.loc[(per_logical[F.GROUP_RULE] == "layer.signature").to_numpy(),
                               [S.GROUP, S.STATUS, F.GROUP_RULE, F.GROUP_REASON]]
    take = known & comm[S.LOGICAL_ID].isin(borrowed.index)
    for col in (S.GROUP, S.STATUS, F.GROUP_RULE, F.GROUP_REASON) if take.any() else ():
        comm.loc[take, col] = comm.loc[take, S.LOGICAL_ID].map(borrowed[col])
    for col in (S.LAYER, S.PATH, F.PATH_RULE, F.PATH_REASON, F.STEP):
        values = comm.loc[known, S.LOGICAL_ID].map(per_logical[col])
        if col in (S.PATH, F.PATH_RULE):
            values = values.where(values.notna(), comm.loc[known, col])
        comm.loc[known, col] = values
    # gloo annotations take the order facts of their c10d op
    linked = comm[comm[F.LINK] >= 0]
    target = by_row.reindex(linked[F.LINK]).to_numpy()
    for col in (S.LOGICAL_ID, S.LAYER, S.PATH, F.PATH_RULE, F.PATH_REASON, F.STEP, S.GROUP,
                S.STATUS, F.GROUP_RULE, F.GROUP_REASON) if len(target) else ():
        comm.loc[target, col] = comm.loc[linked.index, col].to_numpy()
    comm = take_prepared(comm)
    comm = _fill_wrappers(comm)
    comm[S.PHASE] = comm[S.PATH].map(rules.phase_of)
    return comm


_ORDER_FACTS = [S.LOGICAL_ID, S.LAYER, S.PATH, F.PATH_RULE, F.STEP]


def _fill_wrappers(comm: pd.DataFrame) -> pd.DataFrame:
    """CPU wrappers of device collectives take the order facts of their kernel: the kernel's
    External id is the record_param_comms op's; the other wrappers nest with that op."""
    units = comm.loc[comm[F.UNIT] & comm[S.EXTERNAL_ID].notna(),
                     [S.RANK, S.EXTERNAL_ID, *_ORDER_FACTS]]
    if not units.empty:
        by_ext = units.drop_duplicates([S.RANK, S.EXTERNAL_ID]).set_index([S.RANK, S.EXTERNAL_ID])
        need = comm[comm[S.LOGICAL_ID].isna() & comm[S.EXTERNAL_ID].notna()]
        keys = pd.MultiIndex.from_frame(need[[S.RANK, S.EXTERNAL_ID]])
        for col in _ORDER_FACTS:
            comm.loc[need.index, col] = by_ext[col].reindex(keys).to_numpy()
    return fill_from_nested(comm, comm, S.LOGICAL_ID, _ORDER_FACTS)


def _only_model_layers(first: pd.DataFrame, rules: RuleSet) -> pd.Series:
    """Keep a layer index only where the layer holds a decoder-layer path (not other)."""
    in_layer = first[S.PATH].map(
        lambda p: (rules.phase_of(p) or S.Phase.OTHER) != S.Phase.OTHER)
    keys = [first[S.RANK], first[F.STEP].fillna(-1), first[S.LAYER]]
    keep = in_layer.groupby(keys, dropna=False).transform("any")
    return first[S.LAYER].where(keep.astype(bool))


def _sequence(rows: pd.DataFrame) -> list[tuple[str | None, tuple[str, ...]]]:
    paths = [p if isinstance(p, str) else None for p in rows[S.PATH]]
    return list(zip(paths, rows[F.SLOTS], strict=True))


def _place_paths(rules: RuleSet, first: pd.DataFrame, topo: Topology | None,
                 required: Families) -> pd.DataFrame:
    """Place open slots layer by layer; layers with the same sequence are solved once."""
    first = first.copy()
    first[F.PATH_REASON] = None
    keyed = first[first[S.LAYER].notna()]
    if keyed.empty:
        return first
    seq_items = pd.Series(_sequence(keyed), index=keyed.index)
    layer_key = pd.Series(pd.factorize(pd.MultiIndex.from_arrays(
        [keyed[S.RANK], keyed[F.STEP].fillna(-1), keyed[S.LAYER]]))[0], index=keyed.index)
    sequences = grouped_tuples(seq_items, layer_key)
    solved: dict[tuple[tuple[str | None, tuple[str, ...]], ...], Placement | None] = {}
    for seq in set(sequences):
        if any(p is None and c for p, c in seq):
            solved[seq] = (place(rules, seq, topo, required)
                          or place(rules, seq, topo, allow_unexpected=False))
    if not solved:
        return first
    position = keyed.groupby(layer_key).cumcount()
    seqs = layer_key.map(sequences)
    outcome = [_slot_outcome(solved.get(seq), pos, seq[pos])
               for seq, pos in zip(seqs, position, strict=True)]
    paths = pd.Series([o[0] for o in outcome], index=keyed.index, dtype=object)
    reasons = pd.Series([o[1] for o in outcome], index=keyed.index, dtype=object)
    placed = paths.notna()
    first.loc[paths.index[placed], S.PATH] = paths[placed]
    first.loc[paths.index[placed], F.PATH_RULE] = "position.in_layer"
    noted = reasons.notna()
    first.loc[reasons.index[noted], F.PATH_REASON] = reasons[noted]
    return first


def _slot_outcome(placed: Placement | None, pos: int,
                  item: tuple[str | None, tuple[str, ...]]) -> tuple[str | None, str | None]:
    """(placed path, reason) of one position of a solved layer."""
    if placed is None:
        return None, None
    chosen, ties = placed
    known, cands = item
    if known is None and chosen[pos] is not None:
        return chosen[pos], f"position in layer among {', '.join(cands)}"
    if ties[pos]:
        return None, f"path ambiguous by position: {', '.join(ties[pos])}"
    return None, None


def _assemble(events: pa.Table, krule: np.ndarray, cls: pd.Series, comm: pd.DataFrame,
              rules: RuleSet) -> pa.Table:
    n = events.num_rows
    rows = comm[F.ROW].to_numpy()

    def full(values: Any, dtype: Any = object) -> np.ndarray:
        out = np.full(n, None, dtype=object) if dtype is object else np.zeros(n, dtype=dtype)
        out[rows] = values
        return out

    rule_ids = np.array([r.id for r in rules.kernel_classes] + [None], dtype=object)
    krid = rule_ids[np.where(krule < 0, len(rule_ids) - 1, krule)]
    group_rule = comm[F.GROUP_RULE].astype("object")
    path_rule = comm[F.PATH_RULE].astype("object")
    combined = group_rule.where(path_rule.isna(), group_rule.fillna("").str.cat(path_rule, sep="+"))
    combined = combined.str.strip("+").replace("", None).to_numpy()
    rule_id = krid.copy()
    rule_id[rows] = pd.Series(combined, dtype="object").fillna(
        pd.Series(krid[rows], dtype="object")).to_numpy()
    greason = comm[F.GROUP_REASON].astype("object")
    preason = comm[F.PATH_REASON].astype("object")
    reason = greason.where(preason.isna(), greason.fillna("").str.cat(preason, sep="; "))
    reason = reason.str.strip("; ").replace("", None)
    role = rule_column(krule, rules, "role").to_numpy()
    op = np.array(to_pandas(events, [S.OP])[S.OP].astype("object"), dtype=object)
    op[rows] = comm[S.OP].to_numpy()
    layer = full(comm[S.LAYER].to_numpy())
    logical = full(comm[S.LOGICAL_ID].to_numpy())
    instance = np.zeros(n, dtype=bool)
    instance[rows] = comm[F.INSTANCE].astype(bool).to_numpy()
    table = events.set_column(events.schema.get_field_index(S.OP), S.OP,
                              pa.array(op, pa.string(), from_pandas=True).dictionary_encode())
    if S.CALL_SITE in table.column_names:
        table = table.set_column(
            table.schema.get_field_index(S.CALL_SITE), S.CALL_SITE,
            with_call_sites(table.column(S.CALL_SITE), rows, comm[S.CALL_SITE]))
    extra = {
        S.KERNEL_CLASS: pa.array(cls.to_numpy(), pa.string(), from_pandas=True),
        S.KERNEL_ROLE: pa.array(role, pa.string(), from_pandas=True),
        S.GROUP: pa.array(full(comm[S.GROUP].to_numpy()), pa.string(), from_pandas=True),
        S.PATH: pa.array(full(comm[S.PATH].to_numpy()), pa.string(), from_pandas=True),
        S.PHASE: pa.array(full(comm[S.PHASE].to_numpy()), pa.string(), from_pandas=True),
        S.LAYER: pa.array(pd.array(pd.to_numeric(pd.Series(layer)), dtype="Int32")),
        S.LOGICAL_ID: pa.array(pd.array(pd.to_numeric(pd.Series(logical)), dtype="Int64")),
        S.IS_INSTANCE: pa.array(instance),
        S.RULE_ID: pa.array(rule_id, pa.string(), from_pandas=True),
        S.STATUS: pa.array(full(comm[S.STATUS].to_numpy()), pa.string(), from_pandas=True),
        S.REASON: pa.array(full(reason.to_numpy()), pa.string(), from_pandas=True),
    }
    for name, arr in extra.items():
        table = table.append_column(name, arr)
    return S.conform(table, S.ATTRIBUTED)
