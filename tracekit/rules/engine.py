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

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import model
from tracekit import schema as S
from tracekit.parsers.kineto.heap import reused_heap
from tracekit.rules import firsts
from tracekit.rules import frame as F
from tracekit.rules.callsites import apply_call_sites
from tracekit.rules.gloo import has_gloo_instances, link_wrappers, thread_groups
from tracekit.rules.grouping import per_value, position_in_group, sequence_ids
from tracekit.rules.groups import (
    Verdict,
    attribute_groups,
    evidence_codes,
    kernel_group,
    participants_pass,
)
from tracekit.rules.kernels import classify_table, forget_last, rule_column
from tracekit.rules.keys import (
    correlation_ids,
    equal_codes,
    factorize,
    list_codes,
    missing,
    row_codes,
    spread,
    taken,
)
from tracekit.rules.launcher import launch_rows, launchers, take_launcher_facts
from tracekit.rules.layers import (
    host_times,
    issue_order,
    logical_ids,
    marker_layers,
    periodic_layers,
    steps,
)
from tracekit.rules.lints import collective_units, run_lints
from tracekit.rules.loader import load_rules
from tracekit.rules.model import RuleSet
from tracekit.rules.nesting import fill_from_nested, nested_source
from tracekit.rules.notify import PREPARES, fill_prepared_ops, prepared_targets, take_prepared
from tracekit.rules.paths import (
    Families,
    Placement,
    place,
    required_families,
    rule_paths_seen,
    slot_candidates,
)
from tracekit.rules.signatures import layer_codes, transfer
from tracekit.rules.stacks import missing_call_sites, with_call_sites
from tracekit.rules.verdicts import VERDICT_COLUMNS, Coded, reason_prefixed
from tracekit.rules.world import world_fallback
from tracekit.schema import KernelClass, Status
from tracekit.tables import integral, masked, to_frame, to_pandas
from tracekit.topology import Topology

COMM_CLASSES = (KernelClass.COMM, KernelClass.FUSED)
# KIND is not converted: the frames take it as a categorical of its codes (``_kinds``)
# (byte counts, stream and group size are not read: ATTRIBUTED keeps EVENTS' own columns)
_NEEDED = (
    S.RANK, S.PID, S.TID, S.TS_NS, S.DUR_NS, S.NAME, S.CALL_SITE, S.OP, S.PG_DESC,
    S.PG_NAME, S.PG_RANKS, S.IN_NELEMS, S.OUT_NELEMS, S.EXTERNAL_ID, S.CORRELATION,
    S.META_SOURCE,
)
# columns of the group steps that no later step reads: dropped before the order steps
_GROUP_SCRATCH = (S.META_SOURCE, F.HAS_SPLIT, F.KGROUP, F.THREAD_GROUP, F.CALL_GROUP)
# what the steps read of every event (launches, steps and layer markers); the other columns
# are read of the communication rows alone, so only those rows are converted
_ALL_ROWS = (S.RANK, S.PID, S.TID, S.TS_NS, S.DUR_NS, S.CORRELATION)  # and KIND, NAME


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
    with reused_heap():  # the lints too
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
    with reused_heap():
        return _attribute_events(run, rules, topo, cross_rank)


def _attribute_events(run: model.Run, rules: RuleSet, topo: Topology | None,
                      cross_rank: bool) -> tuple[pa.Table, pa.Table]:
    events = run.events
    krule = classify_table(events, rules)  # the first summary's answer where it classified these
    forget_last()
    # the kernel class is the matched rule's: decided per rule, taken by rule index
    classes = np.array([r.cls for r in rules.kernel_classes] + [None], dtype=object)
    # the working frames live in _attribute_comm alone: freed before ATTRIBUTED is built
    comm, verdicts = _attribute_comm(run, krule, rules, topo, cross_rank)
    return (_assemble(events, krule, classes, comm, verdicts, rules),
            collective_units(comm))


def _frames(events: pa.Table, krule: np.ndarray,
            rules: RuleSet) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The engine's two working frames: what the steps read of every event, and the
    communication rows (kernel class communication or fused) with the columns read of them."""
    frame = to_frame(events, _ALL_ROWS, shared=True)  # only read: views where it can
    # each event's thread (rank, pid, tid), coded once: the launcher and nesting searches
    # and the wrapper fill all match rows by it
    thread, span = equal_codes([frame[S.RANK], frame[S.PID], frame[S.TID]])
    frame[F.THREAD_KEY] = thread.astype(np.int32) if span < 2**31 else row_codes([thread])
    kinds = _kinds(events)
    frame[S.KIND] = kinds
    # names are read of a few kinds of rows (step and layer markers): by their codes
    frame[S.NAME] = _categorical(events, S.NAME)
    in_comm = np.array([r.cls in COMM_CLASSES for r in rules.kernel_classes] + [False])
    kernel_rule = np.where(krule < 0, len(rules.kernel_classes), krule)
    comm = to_frame(events, _NEEDED, np.flatnonzero(in_comm[kernel_rule]))
    comm[F.ROW] = comm.index.to_numpy()
    comm[S.KIND] = pd.Series(kinds.take(comm[F.ROW].to_numpy()), index=comm.index, copy=False)
    comm[F.THREAD_KEY] = np.take(frame[F.THREAD_KEY].to_numpy(), comm[F.ROW].to_numpy())
    return frame, comm


def _kinds(events: pa.Table) -> pd.Categorical:
    """EVENTS' KIND as a categorical from its dictionary codes: the steps compare it with
    one kind after another (runtime, kernel, annotation), on every row; in code space that
    is an integer compare, not one string compare per row."""
    return _categorical(events, S.KIND)


def _categorical(events: pa.Table, name: str) -> pd.Categorical:
    """A text column of EVENTS as a categorical from its dictionary codes (no Python string
    per row)."""
    column = events.column(name)
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    # chunk by chunk (EVENTS has a chunk and a dictionary per rank): each chunk's dictionary
    # mapped to the distinct values in order of first appearance over the chunks'
    # dictionaries (a dictionary may repeat a value), then its indices through that small
    # table; unifying the dictionaries and a null fill over the whole column cost 2-3x more
    number: dict[str, int] = {}
    parts = []
    for chunk in column.chunks:
        table = np.array([-1 if v is None else number.setdefault(v, len(number))
                          for v in chunk.dictionary.to_pylist()] + [-1], dtype=np.int32)
        indices = chunk.indices
        if indices.null_count:  # null rows: the table's trailing -1
            indices = pc.fill_null(indices, len(table) - 1)
        parts.append(table[indices.to_numpy(zero_copy_only=False)])
    codes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(number), dtype=object))


def _attribute_comm(run: model.Run, krule: np.ndarray, rules: RuleSet,
                    topo: Topology | None, cross_rank: bool) -> tuple[pd.DataFrame, Coded]:
    """The communication rows with their order facts and paths, and their verdicts (in code
    space; the frame holds the decided group); the group steps' temporaries are gone (their
    function returned) before the order steps run."""
    frame, comm = _frames(run.events, krule, rules)
    comm, verdicts = _group_steps(frame, comm, krule, rules, topo, run, cross_rank)
    return _order_and_paths(frame, comm, verdicts, rules, topo)


def _group_steps(frame: pd.DataFrame, comm: pd.DataFrame, krule: np.ndarray,
                 rules: RuleSet, topo: Topology | None, run: model.Run,
                 cross_rank: bool) -> tuple[pd.DataFrame, Coded]:
    """Kernel-rule facts, launchers, call sites and the group evidence chain of ``comm``."""
    comm[F.KRULE] = krule[comm[F.ROW].to_numpy()]
    # the kernel rule's attributes, per rule then taken by rule index (-1: the last, none)
    at_rule = np.where(comm[F.KRULE].to_numpy() < 0, len(rules.kernel_classes),
                       comm[F.KRULE].to_numpy())
    # (role, mode and kernel path are read of a few rows alone: paths.rule_paths_seen takes
    # them from the rules by KRULE)
    # (the grouped flag and op are read per rule by logical_ids)
    for col, attr in ((F.LIBRARY, "library"), (F.RUNS_AS, "runs_as"), (F.RULE_OP, "op")):
        values = rule_column(np.arange(len(rules.kernel_classes) + 1), rules, attr).to_numpy()
        comm[col] = pd.Series(values[at_rule], index=comm.index, dtype=object, copy=False)
    # flags of the kernel rule (no object column)
    for col, flag in ((F.INSTANCE, lambda r: bool(r.instance)),
                      (F.GLOO, lambda r: r.library == "gloo")):
        table = np.array([flag(r) for r in rules.kernel_classes] + [False], dtype=bool)
        comm[col] = table[at_rule]
    comm[F.LAUNCH] = launch_rows(frame, comm)  # read again for the issue order
    source = launchers(frame, comm, comm[F.LAUNCH].to_numpy())
    ranks_codes, ranks_lists = _ranks_codes(run.events, comm, source)
    comm = take_launcher_facts(comm, source)
    op = comm[S.OP].to_numpy(dtype=object, copy=True)  # the rule's op where none
    none = missing(op)
    op[none] = comm[F.RULE_OP].to_numpy()[none]
    comm[S.OP] = pd.Series(op, index=comm.index, dtype=object, copy=False)
    comm[PREPARES] = prepared_targets(comm, rules)
    comm[S.OP] = fill_prepared_ops(comm)
    comm[F.HAS_SPLIT] = _has_split(run.events, comm[F.ROW].to_numpy())
    comm[F.KGROUP] = kernel_group(comm[F.KRULE], rules, topo)
    comm[F.THREAD_GROUP] = None
    comm[F.LINK] = link_wrappers(comm)
    # call sites are long strings that several steps key rows by: coded once here (CALL_KEY,
    # -1 where none), one shared object per distinct site
    call_key, sites = factorize(missing_call_sites(run.events, comm))
    comm[S.CALL_SITE] = pd.Series(_with_none(sites)[call_key], index=comm.index, dtype=object,
                                  copy=False)
    comm[F.CALL_KEY] = call_key.astype(np.int64)
    for col, values in apply_call_sites(comm, rules).items():
        comm[col] = values
    pg_table = to_pandas(run.process_groups) if run.process_groups.num_rows else pd.DataFrame()

    # the evidence but the runloop thread's group is the same in both passes
    ranks_key = spread([*ranks_lists, None], ranks_codes, comm.index)
    static = evidence_codes(comm, ranks_key)  # equal codes where the tuples are equal
    link = _links(comm)
    verdicts = _from_wrappers(link, attribute_groups(comm, rules, topo, pg_table, ranks_key,
                                                     static))
    # the runloop threads' groups; without any (no gloo instance, or none decided) the
    # second pass would see the evidence of the first and give its verdicts again
    if has_gloo_instances(comm):
        decided = np.where(verdicts.has_status(Status.ATTRIBUTED), verdicts.column("group"),
                           np.nan)
        comm[F.THREAD_GROUP] = thread_groups(comm, pd.Series(decided, index=comm.index,
                                                             dtype=object))
        by_row = pd.Series(comm.index, index=comm[F.ROW].to_numpy())
        linked = comm[comm[F.LINK] >= 0]
        if not linked.empty:
            comm.loc[linked.index, F.THREAD_GROUP] = comm.loc[
                by_row.reindex(linked[F.LINK]).to_numpy(), F.THREAD_GROUP].to_numpy()
        if comm[F.THREAD_GROUP].notna().any():
            verdicts = _from_wrappers(link, attribute_groups(comm, rules, topo, pg_table,
                                                             ranks_key, static))
    verdicts = _from_nested(comm, verdicts)
    if cross_rank:
        asked = np.flatnonzero(~comm[F.ROW].isin(comm.loc[comm[F.LINK] >= 0, F.LINK])
                               .to_numpy())
        sub = comm[[S.RANK, S.NAME, S.OP, S.CALL_SITE, F.CALL_KEY]]
        if len(asked) < len(comm):
            sub = sub.take(asked)
            verdicts = verdicts.placed(asked, participants_pass(sub, verdicts.subset(asked),
                                                                topo))
        else:  # every row asked (no gloo link)
            verdicts = participants_pass(sub, verdicts, topo)
    verdicts = _from_wrappers(link, world_fallback(comm, verdicts, topo, run))
    comm = comm.drop(columns=[c for c in _GROUP_SCRATCH if c in comm])
    # of the verdict, only the group is a column (the order steps read it on every row)
    comm[S.GROUP] = verdicts.group_series(comm.index)
    return comm, verdicts


def _ranks_codes(events: pa.Table, comm: pd.DataFrame,
                 source: pd.Series) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Each comm row's PG_RANKS as ``keys.list_codes`` codes (-1: missing or empty) and the
    lists they number, coded in Arrow from the events, with the launcher's list where the
    row has none (as take_launcher_facts carries it)."""
    codes, lists = list_codes(events.column(S.PG_RANKS).take(comm[F.ROW].to_numpy()))
    src = source.to_numpy()
    need = np.flatnonzero((src >= 0) & (codes < 0))
    if need.size:
        codes[need] = codes[comm.index.get_indexer(src[need])]
    return codes, lists


def _with_none(uniques: np.ndarray) -> np.ndarray:
    """``uniques`` as objects with a trailing None (what code -1 takes)."""
    table = np.empty(len(uniques) + 1, dtype=object)
    table[:-1] = uniques
    return table


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
    first = firsts.first_rows(codes)
    sizes = np.full(first.size, np.nan)
    for i, (r, g) in enumerate(zip(comm[S.RANK].iloc[first], comm[S.GROUP].iloc[first],
                                   strict=True)):
        if pd.notna(r) and pd.notna(g) and (m := topo.group_of(int(r), str(g))):
            sizes[i] = float(len(m))
    return own.fillna(pd.Series(sizes[codes], index=comm.index, dtype="float"))


def _links(comm: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(positions of the gloo annotations linked to a c10d op, positions of those ops)."""
    link = comm[F.LINK].to_numpy()
    linked = np.flatnonzero(link >= 0)
    if not linked.size:
        return linked, linked
    position = pd.Series(np.arange(len(comm)), index=comm[F.ROW].to_numpy(), copy=False)
    return linked, position.reindex(link[linked]).to_numpy().astype(np.int64)


def _from_wrappers(link: tuple[np.ndarray, np.ndarray], verdicts: Coded) -> Coded:
    """A gloo annotation takes the verdict of the c10d op that caused it."""
    linked, target = link
    return verdicts.carried(target, linked, reason_prefixed("linked c10d op: "))


def _from_nested(comm: pd.DataFrame, verdicts: Coded) -> Coded:
    """Rows without a group take the verdict of a decided row nested with them."""
    need = verdicts.lacks_group()
    src = nested_source(comm, pd.Series(need, index=comm.index, copy=False),
                        pd.Series(~need, index=comm.index, copy=False)).dropna()
    if src.empty:
        return verdicts
    at = comm.index.get_indexer(src.index)
    take = comm.index.get_indexer(src.astype(np.int64).to_numpy())
    return verdicts.carried(at, take, reason_prefixed("nested with a decided event: "))


# the columns of the first unit of each logical collective that the layer steps read
_FIRST_COLS = [S.RANK, F.ORDER_TS, S.LOGICAL_ID, F.LOGICAL_OP, S.GROUP, S.NAME, S.CALL_SITE,
               S.PATH, F.PATH_RULE, S.STATUS, F.CANDIDATES, F.GROUP_RULE, F.GROUP_REASON]
_VERDICT = (S.GROUP, S.STATUS, F.GROUP_RULE, F.GROUP_REASON)
_PER_LOGICAL = (S.LAYER, S.PATH, F.PATH_RULE, F.PATH_REASON, F.STEP)
Item = tuple[str | None, tuple[str, ...]]


def _order_and_paths(frame: pd.DataFrame, comm: pd.DataFrame, verdicts: Coded, rules: RuleSet,
                     topo: Topology | None) -> tuple[pd.DataFrame, Coded]:
    by_row = pd.Series(comm.index, index=comm[F.ROW].to_numpy())
    linked_targets = set(comm.loc[comm[F.LINK] >= 0, F.LINK].tolist())
    has_gloo = comm[F.GLOO].groupby(comm[S.RANK]).transform("any")
    is_wrapper = comm[F.RUNS_AS].notna()
    inst = comm[F.INSTANCE].astype(bool)
    comm[F.UNIT] = (has_gloo & is_wrapper) | (inst & ~comm[F.ROW].isin(linked_targets))
    # issue order: a kernel counts from its launch (streams overlap on the device)
    comm[F.ORDER_TS] = host_times(frame, comm[[S.TS_NS]].rename(columns={S.TS_NS: F.ORDER_TS}),
                                  comm[F.LAUNCH].to_numpy())
    members = comm[[S.RANK, S.GROUP, S.PG_RANKS]]  # what a group size is read from
    group = verdicts.group_codes()  # the same groups, coded
    issue = issue_order(comm)  # the unit rows in issue order
    by_rule = np.arange(len(rules.kernel_classes) + 1)  # a rule attribute by KRULE, then none
    ids, lop = logical_ids(comm, rule_column(by_rule, rules, "grouped").to_numpy(),
                           rule_column(by_rule, rules, "grouped_op").to_numpy(),
                           lambda at: _sizes_once(members, group, at, topo), issue)
    comm[S.LOGICAL_ID] = ids
    comm[F.LOGICAL_OP] = lop
    by_rules, seen_paths = rule_paths_seen(comm, rules, topo)
    for col, values in by_rules.items():
        comm[col] = values

    # the units in issue order, then the first unit of each logical collective (the first
    # row of each logical id in that order); only the columns the layer steps read are taken
    unit_steps = steps(frame, taken(comm, [S.RANK, F.ORDER_TS], issue))
    lead = firsts.first_rows(row_codes([_integral(comm[S.LOGICAL_ID].to_numpy()[issue])]))
    first = _first_units(comm, verdicts, issue[lead])
    first[F.STEP] = unit_steps.to_numpy()[lead]
    # equal (op, group, name, call site) tokens, equal codes (missing values alike)
    first[F.TOKEN] = row_codes([first[F.LOGICAL_OP], first[S.GROUP], first[S.NAME],
                                first[S.CALL_SITE]])
    item_codes, items = _items(first, rules, topo)
    required = required_families(rules, topo, seen_paths)
    fitting: dict[bytes, bool] = {}

    def fits(positions: np.ndarray) -> bool:
        # a period must hold whole layers without slots the topology does not expect
        key = item_codes[positions].tobytes()
        if key not in fitting:
            seq = [items[c] for c in item_codes[positions].tolist()]
            fitting[key] = place(rules, seq, topo, required, allow_unexpected=False) is not None
        return fitting[key]

    layer = marker_layers(frame, first, rules)
    hint = topo.config.layers if topo is not None else None
    layer = layer.fillna(periodic_layers(first, hint, fits, item_codes))
    first[S.LAYER] = layer
    first = transfer(_place_paths(rules, first, topo, required, item_codes, items), rules)
    first[S.LAYER] = _only_model_layers(first, rules)
    comm, verdicts = _from_first(comm, first, verdicts)
    # gloo annotations take the order facts and the verdict (but candidates) of their c10d op
    linked = comm[comm[F.LINK] >= 0]
    target = by_row.reindex(linked[F.LINK]).to_numpy()
    for col in (S.LOGICAL_ID, S.LAYER, S.PATH, F.PATH_RULE, F.PATH_REASON,
                F.STEP) if len(target) else ():
        comm.loc[target, col] = comm.loc[linked.index, col].to_numpy()
    if len(target):
        source = np.flatnonzero(comm[F.LINK].to_numpy() >= 0)
        verdicts = verdicts.borrowed(comm.index.get_indexer(target), verdicts.table,
                                     verdicts.codes[source])
        comm[S.GROUP] = verdicts.group_series(comm.index)
    comm, verdicts = take_prepared(comm, verdicts)
    return _fill_wrappers(comm), verdicts  # the phases follow from the paths (``_assemble``)


def _first_units(comm: pd.DataFrame, verdicts: Coded, at: np.ndarray) -> pd.DataFrame:
    """The columns of _FIRST_COLS of the rows at positions ``at``: the verdict's fields
    decoded for those rows alone."""
    part = verdicts.subset(at)
    fields = dict(VERDICT_COLUMNS)
    return pd.DataFrame({
        c: (pd.Series(part.column(fields[c]), index=comm.index[at], dtype=object, copy=False)
            if c in fields and c != S.GROUP else comm[c].take(at))
        for c in _FIRST_COLS}, index=comm.index[at], copy=False)


def _integral(values: np.ndarray) -> np.ndarray:
    """Float ids without a missing one as int64 (coded by offset, not hashed); others as
    they are."""
    if values.dtype.kind == "f" and values.size and not np.isnan(values).any():
        whole = values.astype(np.int64)
        if (whole == values).all():
            return whole
    return values


def _sizes_once(members: pd.DataFrame, group: np.ndarray, at: np.ndarray,
                topo: Topology | None) -> np.ndarray:
    """``_group_sizes`` of the rows of ``members`` at positions ``at``; a row without
    pg_ranks of its own has the size of its (rank, group), so one row of each such pair is
    looked up (``group``: the rows' groups coded, ``Coded.group_codes``)."""
    plain = pd.isna(members[S.PG_RANKS].to_numpy()[at])
    out = np.full(len(at), np.nan)
    if not plain.all():
        out[~plain] = _group_sizes(members.iloc[at[~plain]], topo).to_numpy(dtype=float)
    if plain.any():
        rest = at[plain]
        codes = row_codes([members[S.RANK].to_numpy()[rest], group[rest]])
        out[plain] = _group_sizes(members.iloc[rest[firsts.first_rows(codes)]],
                                  topo).to_numpy(dtype=float)[codes]
    return out


def _items(first: pd.DataFrame, rules: RuleSet,
           topo: Topology | None) -> tuple[np.ndarray, list[Item]]:
    """Per row of ``first``, a code of its (known path, slot candidates) item, and the items
    by code: slots are looked up once per distinct (op, group), not per row."""
    pair = row_codes([first[F.LOGICAL_OP], first[S.GROUP]])
    reps = first.iloc[firsts.first_rows(pair)]
    slots: list[tuple[str, ...]] = [
        slot_candidates(rules, topo, None if pd.isna(o) else o, None if pd.isna(g) else g)
        for o, g in zip(reps[F.LOGICAL_OP].tolist(), reps[S.GROUP].astype("object").tolist(),
                        strict=True)]
    known = first[S.PATH].notna().to_numpy()
    slot_code = np.where(known, len(slots), pair)  # a known path has no open slot
    slots.append(())
    codes = row_codes([first[S.PATH], slot_code])
    reps_at = firsts.first_rows(codes)
    paths = first[S.PATH].to_numpy(dtype=object)[reps_at]
    items: list[Item] = [(p if isinstance(p, str) else None, slots[c])
                         for p, c in zip(paths.tolist(), slot_code[reps_at].tolist(),
                                         strict=True)]
    return codes, items


def _from_first(comm: pd.DataFrame, first: pd.DataFrame,
                verdicts: Coded) -> tuple[pd.DataFrame, Coded]:
    """Every row of a logical collective takes the layer facts of its first unit (and the
    group that a layer signature lent it); a row without a path rule result keeps its own.
    Where every row has a logical id (the usual case) each column is one take of the first
    units' values, not a copy of the row's own column written over."""
    ids = comm[S.LOGICAL_ID].to_numpy(dtype=float)
    known = np.flatnonzero(~np.isnan(ids))
    whole = len(known) == len(comm)
    first_ids = first[S.LOGICAL_ID].to_numpy(dtype=np.int64)
    at = np.full(int(first_ids.max()) + 1 if len(first_ids) else 0, -1, dtype=np.int64)
    at[first_ids] = np.arange(len(first_ids))
    src = at[ids.astype(np.int64) if whole else ids[known].astype(np.int64)]
    borrowed = (first[F.GROUP_RULE].to_numpy(dtype=object) == "layer.signature")[src]
    every = whole and bool(borrowed.all())
    lent = np.flatnonzero(borrowed)  # positions in ``src`` of the rows a signature lent to
    to, of = (known[lent], src[lent]) if lent.size and not every else (lent, lent)
    if lent.size:  # the signature's verdict, each row keeping its candidates
        fields = [first[c].to_numpy(dtype=object) for c in _VERDICT]
        donor_of = row_codes(fields)
        reps = firsts.first_rows(donor_of)
        group, status, rule, reason = fields
        donors = [Verdict(group[r], status[r], rule[r], reason[r], ()) for r in reps.tolist()]
        rows = np.arange(len(comm)) if every else to
        verdicts = verdicts.borrowed(rows, donors, donor_of[src if every else of])
        comm[S.GROUP] = verdicts.group_series(comm.index)
    for col in _PER_LOGICAL:
        per_first = first[col].to_numpy()
        if col in (S.PATH, F.PATH_RULE):
            mine = per_first.astype(object, copy=False)[src]
            missing = np.flatnonzero(pd.isna(per_first)[src])  # per logical collective
            own = comm[col].to_numpy(dtype=object)
            if missing.size:
                mine[missing] = own[missing if whole else known[missing]]
            if whole:
                values = mine
            else:
                values = own.copy()
                values[known] = mine
        elif per_first.dtype.kind == "f":
            mine = per_first.astype(np.float64, copy=False)[src]
            values = mine if whole else _placed(mine, known, len(comm), np.nan)
        else:
            mine = per_first.astype(object, copy=False)[src]
            values = mine if whole else _placed(mine, known, len(comm), None)
        comm[col] = pd.Series(values, index=comm.index, dtype=values.dtype, copy=False)
    return comm, verdicts


def _placed(values: np.ndarray, at: np.ndarray, n: int, missing: object) -> np.ndarray:
    """``n`` rows of ``missing`` with ``values`` at positions ``at``."""
    out = np.full(n, missing, dtype=values.dtype)
    out[at] = values
    return out


_ORDER_FACTS = [S.LOGICAL_ID, S.LAYER, S.PATH, F.PATH_RULE, F.STEP]


def _fill_wrappers(comm: pd.DataFrame) -> pd.DataFrame:
    """CPU wrappers of device collectives take the order facts of their kernel: the kernel's
    External id is the record_param_comms op's; the other wrappers nest with that op."""
    has_ext = comm[S.EXTERNAL_ID].notna().to_numpy()
    units = np.flatnonzero(comm[F.UNIT].to_numpy(dtype=bool) & has_ext)
    if units.size:
        _from_units(comm, units, np.flatnonzero(comm[S.LOGICAL_ID].isna().to_numpy() & has_ext))
    # nesting is found on the thread and time columns alone, on the threads that have a row
    # to fill (rows nest only with rows of their own thread): the wide frame is not copied
    open_rows = comm[S.LOGICAL_ID].isna().to_numpy()
    if not open_rows.any():
        return comm
    thread = comm[F.THREAD_KEY].to_numpy()
    on = np.flatnonzero(np.isin(thread, np.unique(thread[open_rows])))
    narrow = taken(comm, [F.THREAD_KEY, S.TS_NS, S.DUR_NS, *_ORDER_FACTS], on)
    filled = fill_from_nested(narrow, narrow, S.LOGICAL_ID, _ORDER_FACTS)
    if filled is not narrow:
        for col in _ORDER_FACTS:
            _write_at(comm, col, on, filled[col])
    return comm


def _from_units(comm: pd.DataFrame, units: np.ndarray, need: np.ndarray) -> None:
    """The rows at positions ``need`` take the order facts of the first of the unit rows
    ``units`` with their (rank, External id); missing (NaN) where no unit has it. In
    positions and codes: the keys are coded once for both sides, no index is built."""
    if not need.size:
        return
    rank = comm[S.RANK].to_numpy()
    both = np.concatenate([units, need])
    codes = row_codes([rank[both], correlation_ids(comm[S.EXTERNAL_ID].to_numpy()[both])])
    unit_codes, need_codes = codes[:units.size], codes[units.size:]
    distinct, first = np.unique(unit_codes, return_index=True)
    source = np.full(int(codes.max()) + 1, -1, dtype=np.int64)
    source[distinct] = units[first]  # the first unit row of each key
    src = source[need_codes]
    found = src >= 0
    for col in _ORDER_FACTS:
        own = comm[col].to_numpy()
        values = own.copy()
        taken = own[np.where(found, src, 0)]
        taken[~found] = np.nan
        values[need] = taken
        comm[col] = pd.Series(values, index=comm.index, dtype=values.dtype, copy=False)


def _write_at(comm: pd.DataFrame, col: str, at: np.ndarray, values: pd.Series) -> None:
    """``comm[col]`` with ``values`` at positions ``at``: by position into a copy where the
    dtypes agree (no label alignment), else as ``.iloc`` writes it (pandas' casting)."""
    column = comm[col]
    if column.dtype == values.dtype and isinstance(column.dtype, np.dtype):
        out = column.to_numpy(copy=True)
        out[at] = values.to_numpy()
        comm[col] = pd.Series(out, index=comm.index, dtype=out.dtype, copy=False)
    else:
        comm.iloc[at, comm.columns.get_loc(col)] = values.to_numpy()


def _only_model_layers(first: pd.DataFrame, rules: RuleSet) -> pd.Series:
    """Keep a layer index only where the layer holds a decoder-layer path (not other)."""
    in_layer = pd.Series(per_value(
        first[S.PATH], lambda p: (rules.phase_of(p) or S.Phase.OTHER) != S.Phase.OTHER),
        index=first.index, dtype=bool)
    keys = [first[S.RANK], first[F.STEP].fillna(-1), first[S.LAYER]]
    keep = in_layer.groupby(keys, dropna=False).transform("any")
    return first[S.LAYER].where(keep.astype(bool))


def _place_paths(rules: RuleSet, first: pd.DataFrame, topo: Topology | None,
                 required: Families, item_codes: np.ndarray, items: list[Item]) -> pd.DataFrame:
    """Place open slots layer by layer; layers with the same sequence are solved once."""
    first[F.PATH_REASON] = None
    keyed = np.flatnonzero(first[S.LAYER].notna().to_numpy())
    if not len(keyed):
        return first
    layer_key = layer_codes(first.iloc[keyed])
    seq_of_layer, sequences = sequence_ids(item_codes[keyed], layer_key)
    # per distinct sequence with an open slot: (path, reason) of each of its positions
    outcomes: dict[int, list[tuple[str | None, str | None]]] = {}
    for sid, codes in enumerate(sequences):
        seq = [items[c] for c in codes.tolist()]
        if any(p is None and c for p, c in seq):
            placed = (place(rules, seq, topo, required)
                      or place(rules, seq, topo, allow_unexpected=False))
            outcomes[sid] = [_slot_outcome(placed, pos, item) for pos, item in enumerate(seq)]
    if not outcomes:
        return first
    sid_of_row = seq_of_layer[layer_key]
    position = position_in_group(layer_key)
    paths = np.full(len(keyed), None, dtype=object)
    reasons = np.full(len(keyed), None, dtype=object)
    for sid, outcome in outcomes.items():
        rows = np.flatnonzero(sid_of_row == sid)
        table = np.empty((len(outcome), 2), dtype=object)
        table[:] = outcome
        paths[rows] = table[position[rows], 0]
        reasons[rows] = table[position[rows], 1]
    placed_at = pd.notna(paths)
    noted_at = pd.notna(reasons)
    for col, at, values in ((S.PATH, placed_at, paths), (F.PATH_RULE, placed_at, None),
                            (F.PATH_REASON, noted_at, reasons)):
        column = first[col].to_numpy(dtype=object, copy=True)
        column[keyed[at]] = "position.in_layer" if values is None else values[at]
        first[col] = pd.Series(column, index=first.index, dtype=object)
    return first


def _slot_outcome(placed: Placement | None, pos: int,
                  item: Item) -> tuple[str | None, str | None]:
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


def _assemble(events: pa.Table, krule: np.ndarray, classes: np.ndarray, comm: pd.DataFrame,
              verdicts: Coded, rules: RuleSet) -> pa.Table:
    """ATTRIBUTED: EVENTS with the engine's op and call site, and the verdict columns
    (``verdicts``: those of ``comm``'s rows, in code space).

    Every row-sized index array is int32 (the tables they index are small): on this kind of
    machine a fresh row-sized temporary costs about as much as the work on it."""
    n = events.num_rows
    rows = comm[F.ROW].to_numpy()
    kernel_rule = krule.astype(np.int32)
    kernel_rule[kernel_rule < 0] = len(rules.kernel_classes)  # the tables' trailing None
    joined, joined_by = _joined_verdicts(verdicts, "rule_id", comm[F.PATH_RULE], "+")
    # a row's own group/path rule, else its kernel rule's id
    rule_table = np.concatenate([joined_by, [r.id for r in rules.kernel_classes], [None]])
    rule_index = kernel_rule + np.int32(len(joined_by))
    rule_index[rows] = np.where(pd.isna(joined_by)[joined], rule_index[rows], joined)
    rule_id = _dictionary(rule_index, rule_table)
    roles = np.array([r.role for r in rules.kernel_classes] + [None], dtype=object)
    # EVENTS' op, the engine's where it decided one: both in code space
    given = events.column(S.OP)
    if pa.types.is_dictionary(given.type):  # codes into one dictionary, not a string per row
        given = pa.table({S.OP: given}).unify_dictionaries().column(S.OP).combine_chunks()
    else:
        given = pc.dictionary_encode(given.combine_chunks())
    op_codes, op_values = _factorized(comm[S.OP])
    shift = len(op_values)  # EVENTS' own codes after the engine's; null: -1
    op_index = pc.fill_null(given.indices.cast(pa.int32()), -1 - shift).to_numpy() + np.int32(shift)
    op_index[rows] = op_codes
    op = _dictionary(op_index, np.concatenate(
        [op_values, np.asarray(given.dictionary.to_pylist(), dtype=object)]))
    # a row's phase is its path's: looked up per distinct path
    path_codes, paths = _factorized(comm[S.PATH])
    phases = np.array([rules.phase_of(p) for p in paths.tolist()] + [None], dtype=object)
    paths = np.append(paths, None)
    path_codes = np.where(path_codes < 0, len(paths) - 1, path_codes)
    instance = np.zeros(n, dtype=bool)
    instance[rows] = comm[F.INSTANCE].astype(bool).to_numpy()
    table = events.set_column(events.schema.get_field_index(S.OP), S.OP, op)
    if S.CALL_SITE in table.column_names:
        table = table.set_column(
            table.schema.get_field_index(S.CALL_SITE), S.CALL_SITE,
            with_call_sites(table.column(S.CALL_SITE), rows, comm[S.CALL_SITE]))
    extra = {
        S.KERNEL_CLASS: _dictionary(kernel_rule, classes),
        S.KERNEL_ROLE: _dictionary(kernel_rule, roles),
        S.GROUP: _dictionary_at(verdicts.codes, verdicts.per_verdict("group"), rows, n),
        S.PATH: _dictionary_at(path_codes, paths, rows, n),
        S.PHASE: _dictionary_at(path_codes, phases, rows, n),
        S.LAYER: _integral_at_rows(comm[S.LAYER], rows, n, pa.int32()),
        S.LOGICAL_ID: _integral_at_rows(comm[S.LOGICAL_ID], rows, n, pa.int64()),
        S.IS_INSTANCE: pa.array(instance),
        S.RULE_ID: rule_id,
        S.STATUS: _dictionary_at(verdicts.codes, verdicts.per_verdict("status"), rows, n),
        S.REASON: _dictionary_at(*_joined_verdicts(verdicts, "reason", comm[F.PATH_REASON],
                                                   "; "), rows, n),
    }
    for name, arr in extra.items():
        table = table.append_column(name, arr)
    return S.conform(table, S.ATTRIBUTED)


def _integral_at_rows(values: pd.Series, rows: np.ndarray, n: int,
                      kind: pa.DataType) -> pa.Array:
    """``n`` rows of ``kind``, null but at ``rows``, which hold ``values`` (whole floats,
    NaN: null), built at the table's width without a float array of it."""
    part = integral(values.to_numpy(dtype=float), kind)
    data = np.zeros(n, dtype=kind.to_pandas_dtype())
    data[rows] = part.fill_null(0).to_numpy()
    missing = np.ones(n, dtype=bool)
    missing[rows] = part.is_null().to_numpy(zero_copy_only=False)
    return masked(data, missing, kind)


def _factorized(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(code per row, -1 where missing; the distinct values by code)."""
    codes, uniques = factorize(values)
    return codes, np.asarray(uniques, dtype=object)


def _dictionary_at(codes: np.ndarray, table: np.ndarray, rows: np.ndarray,
                   n: int) -> pa.DictionaryArray:
    """``n`` rows, null but at ``rows`` (ascending), which hold ``table[codes]``: what
    ``_dictionary`` of the whole table's index (-1 outside ``rows``) gives, encoded on the
    rows alone (the dictionary's order is that of first appearance among them) and placed."""
    part = _dictionary(np.asarray(codes, dtype=np.int32), table)
    indices = np.zeros(n, dtype=np.int32)
    indices[rows] = part.indices.fill_null(0).to_numpy()
    missing = np.ones(n, dtype=bool)
    missing[rows] = part.indices.is_null().to_numpy(zero_copy_only=False)
    return pa.DictionaryArray.from_arrays(masked(indices, missing, pa.int32()), part.dictionary)


def _dictionary(index: np.ndarray, table: np.ndarray) -> pa.DictionaryArray:
    """Rows holding ``table[index]`` (null where the index is -1 or the value missing),
    encoded as Arrow's dictionary_encode encodes: distinct values in order of first
    appearance, int32 indices. The order is read off the index entries in order of first
    appearance (Arrow's unique: one hash pass over small integers), the rows are taken
    through small tables with ``np.take`` (fancy indexing would first copy the index to
    intp: a row-sized temporary)."""
    value_of, values = factorize(table)
    k = len(values)
    value_of = np.append(value_of, -1)  # index -1 (the last entry): no value
    value_of[value_of < 0] = k  # code k: no value
    seen = value_of[pc.unique(pa.array(index)).to_numpy()]  # by first appearance
    order = pd.unique(seen[seen < k])  # a value's first row: that of its first index entry
    number = np.zeros(k + 1, dtype=np.int32)  # a null row's index stays 0
    number[order] = np.arange(len(order), dtype=np.int32)
    null = np.zeros(k + 1, dtype=bool)
    null[k] = True
    dictionary = pa.array(np.asarray(values, dtype=object)[order], pa.string())
    indices = np.take(number[value_of], index)
    return pa.DictionaryArray.from_arrays(
        masked(indices, np.take(null[value_of], index), pa.int32()), dictionary)


def _joined(first: pd.Series, second: pd.Series, sep: str) -> tuple[np.ndarray, np.ndarray]:
    """``first`` and ``second`` joined by ``sep`` where ``second`` is set (``first`` alone
    elsewhere), ``sep`` characters stripped from both ends, None where nothing is left; as
    (code per row, value by code), computed once per distinct pair."""
    codes = row_codes([first, second])
    at = firsts.first_rows(codes)
    return codes, _joined_at(first.to_numpy(dtype=object)[at], second.to_numpy(dtype=object)[at],
                             sep)


def _joined_verdicts(verdicts: Coded, attr: str, second: pd.Series,
                     sep: str) -> tuple[np.ndarray, np.ndarray]:
    """``_joined`` of the verdicts' ``attr`` and ``second``, keyed by the verdict codes (no
    text column of the verdict per row)."""
    codes = row_codes([verdicts.codes, second])
    at = firsts.first_rows(codes)
    return codes, _joined_at(verdicts.per_verdict(attr)[verdicts.codes[at]],
                             second.to_numpy(dtype=object)[at], sep)


def _joined_at(first: np.ndarray, second: np.ndarray, sep: str) -> np.ndarray:
    """The joined value of each (first, second) pair (see ``_joined``)."""
    out = np.empty(len(first), dtype=object)
    for i, (a, b) in enumerate(zip(first.tolist(), second.tolist(), strict=True)):
        a = None if pd.isna(a) else str(a)
        joined = a if pd.isna(b) else (a or "") + sep + str(b)
        out[i] = None if joined is None else (joined.strip(sep) or None)
    return out
