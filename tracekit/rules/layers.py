"""Order, logical collectives, steps and decoder layers.

* Units: the row that stands for a collective in its rank's issue order (the c10d op when a
  gloo annotation is linked to it, else the instance: a kernel, an HCCL op).
* Logical collectives: consecutive units of a ``grouped`` kernel rule from one call site on
  one thread/stream (pynccl's grouped ncclReduce / ncclBroadcast, or the c10d reduce /
  broadcast calls that emulate them) are one collective; ``logical_op`` is the rule's
  ``grouped_op`` when there are two or more.
* Steps: annotations matching a step marker (``step[...]``, ``ProfilerStep#N``) enclose units.
* Layers: an enclosing layer-marker annotation gives the index; otherwise, within a step, the
  smallest period of the sequence of (op, group, name, call site) tokens splits it into
  identical decoder layers (the config's layer count is preferred when it divides).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules.grouping import (
    group_order,
    position_in_group,
    row_codes,
    sequence_ids,
)
from tracekit.rules.keys import factorize, lane_time_keys, missing, taken
from tracekit.rules.launcher import launch_rows
from tracekit.rules.model import RuleSet

STEP_MARKER = re.compile(r"^(?:step\[|ProfilerStep#)")
NOT_IN_LAYER = (S.Op.BARRIER, S.Op.SEND, S.Op.RECV, S.Op.SEND_RECV)


def issue_order(comm: pd.DataFrame) -> np.ndarray:
    """Positions of the unit rows in issue order: rank, then order time, then start, stable
    (what ``sort_values([RANK, ORDER_TS, TS_NS], kind="stable")`` of the unit rows gives)."""
    at = np.flatnonzero(comm[F.UNIT].to_numpy(dtype=bool))
    order = np.lexsort((comm[S.TS_NS].to_numpy()[at], comm[F.ORDER_TS].to_numpy()[at],
                        comm[S.RANK].to_numpy()[at]))
    return at[order]


def logical_ids(comm: pd.DataFrame, grouped: np.ndarray, grouped_op: np.ndarray,
                group_size: Callable[[np.ndarray], np.ndarray],
                issue: np.ndarray | None = None) -> tuple[pd.Series, pd.Series]:
    """(logical id, logical op): the id of unit rows (linked instances are filled by the
    caller), the op of every row (its own OP, the rule's op for a v-collective's units).
    ``grouped`` and ``grouped_op``: the kernel rules' flag and op, by KRULE (a last entry
    for rows no rule matched), read per rule, not per row.

    A run of grouped units forms one v-collective only when nothing says they are separate
    calls: no process-group metadata of their own (c10d-issued NCCL kernels carry it, pynccl's
    grouped kernels do not), a call site for CPU ops, and as many ops as the group has ranks
    (one per root) when the group size is known: ``group_size(positions)`` gives it for the
    rows of ``comm`` at those positions, in their order (NaN where unknown). ``issue``: the
    ``issue_order`` of ``comm`` where the caller has it. The ids number the logical
    collectives 0.. in order of first appearance in issue order.
    """
    at = issue_order(comm) if issue is None else issue
    rank = comm[S.RANK].to_numpy()[at]
    thread = comm[S.TID].fillna(-1).to_numpy(dtype=np.int64)[at]
    if F.CALL_KEY in comm:  # the engine's call-site codes
        call = comm[F.CALL_KEY].to_numpy(dtype=np.int64)[at]
        empty = _empty_site_code(comm[S.CALL_SITE].to_numpy(), at, call)
        if empty is not None:  # no call site and an empty one are the same
            call[call < 0] = empty
    else:
        every_call, sites = factorize(comm[S.CALL_SITE])
        call = every_call[at]
        if "" in set(sites):  # no call site and an empty one are the same
            call[call < 0] = list(sites).index("")
    rule = comm[F.KRULE].to_numpy()[at]
    # tested on the unit rows alone, each distinct object once (keys.missing)
    own_meta = ~(missing(comm[S.PG_NAME].to_numpy()) & missing(comm[S.PG_DESC].to_numpy()))[at]
    located = (_is_kind(comm[S.KIND], S.Kind.KERNEL) | ~missing(comm[S.CALL_SITE].to_numpy()))[at]
    rule_at = np.where(rule < 0, len(grouped) - 1, rule)
    is_grouped = np.take(_truth(np.asarray(grouped, dtype=object)), rule_at) & ~own_meta & located
    same = np.zeros(len(at), dtype=bool)
    same[1:] = (is_grouped[1:] & is_grouped[:-1] & (rank[1:] == rank[:-1])
                & (thread[1:] == thread[:-1]) & (rule[1:] == rule[:-1])
                & (call[1:] == call[:-1]))
    ids = np.cumsum(~same) - 1
    size = np.bincount(ids)[ids] if len(ids) else ids
    # the group size is looked up only for the rows of runs (it costs a pass per row)
    want = np.full(len(at), np.nan)
    multi = size > 1
    if multi.any():
        want[multi] = np.asarray(group_size(at[multi]), dtype=float)
    whole = (size > 1) & (np.isnan(want) | (size == want))
    # a run that is not one v-collective is split back into single collectives
    rows = comm[F.ROW].to_numpy(dtype=np.int64)[at]
    ids = np.where(whole | (size == 1), ids, -(rows + 1))
    ids = row_codes(ids)  # numbered by first appearance
    gop = np.asarray(grouped_op, dtype=object)
    take = np.flatnonzero(whole & np.take(~np.asarray(pd.isna(gop), dtype=bool), rule_at))
    ops = comm[S.OP].to_numpy(dtype=object, copy=True)
    ops[at[take]] = np.take(gop, rule_at[take])
    # spread over all rows by position, as a reindex would: NaN where a row is no unit (the
    # ids then float64)
    all_ids = np.empty(len(comm), dtype=np.int64) if len(at) == len(comm) \
        else np.full(len(comm), np.nan)
    all_ids[at] = ids
    return (pd.Series(all_ids, index=comm.index, copy=False),
            pd.Series(ops, index=comm.index, dtype=object, copy=False))


def _empty_site_code(sites: np.ndarray, at: np.ndarray, call: np.ndarray) -> int | None:
    """The call code of an empty call site ("") among ``sites[at]`` (coded ``call``, -1:
    none), tested on the first row of each code; None where no site is empty."""
    if not len(call):
        return None
    first = np.full(int(call.max()) + 2, -1, dtype=np.int64)
    first[call[::-1] + 1] = np.arange(len(call) - 1, -1, -1)  # reversed: the first row wins
    reps = first[first >= 0]
    empty = reps[np.asarray(sites[at[reps]] == "", dtype=bool)]
    return int(call[empty.min()]) if empty.size else None


def _is_kind(kinds: pd.Series, kind: str) -> np.ndarray:
    """``kinds == kind`` of a KIND column, on the categorical's codes where it is one."""
    if isinstance(kinds.dtype, pd.CategoricalDtype):
        categories = kinds.cat.categories
        if kind not in categories:
            return np.zeros(len(kinds), dtype=bool)
        return kinds.cat.codes.to_numpy() == categories.get_loc(kind)
    return (kinds == kind).to_numpy()


def _truth(flags: np.ndarray) -> np.ndarray:
    """``pd.notna(flags) & flags.astype(bool)``, decided once per distinct value (the
    flags are a kernel rule's: a few objects repeated over the rows)."""
    codes, uniques = factorize(flags)
    table = np.array([*(bool(pd.notna(u) and u) for u in uniques.tolist()), False], dtype=bool)
    return table[codes]


def _enclosing(units: pd.DataFrame, spans: pd.DataFrame) -> pd.Series:
    """Index (0..) of the span on the same rank that encloses each unit's ORDER_TS (for
    device events: the host time of their launch, see ``host_times``).

    The span is the last one starting at or before the unit's time on its rank, in the order
    a ``merge_asof`` over the spans sorted by start sees them (ties among equal starts as
    that sort leaves them); its index counts the rank's spans sorted by (rank, start)."""
    out = pd.Series(np.nan, index=units.index)
    if spans.empty or units.empty:
        return out
    s_rank = spans[S.RANK].to_numpy()
    s_ts = spans[S.TS_NS].to_numpy()
    s_end = s_ts + spans[S.DUR_NS].to_numpy()
    # index of each span among its rank's spans in (rank, start) order (a stable sort)
    by_rank_start = np.lexsort((s_ts, s_rank))
    number = np.empty(len(s_ts), dtype=np.int64)
    number[by_rank_start] = position_in_group(
        row_codes(s_rank[by_rank_start]))
    # the spans in the order merge_asof read them (the (rank, start) order sorted again by
    # start, unstably), then by rank, stably: among equal starts the last one read is taken
    seen = by_rank_start[np.argsort(s_ts[by_rank_start], kind="quicksort")]
    seen = seen[np.argsort(s_rank[seen], kind="stable")]
    u_rank = units[S.RANK].to_numpy()
    u_time = units[F.ORDER_TS].to_numpy()
    lanes = row_codes(np.concatenate([s_rank[seen], u_rank]))
    key, width = lane_time_keys(lanes, np.concatenate([s_ts[seen], u_time]))
    s_key, u_key = key[:len(seen)], key[len(seen):]
    pos = np.searchsorted(s_key, u_key, side="right") - 1
    hit = pos >= 0
    hit[hit] = s_key[pos[hit]] // width == u_key[hit] // width
    at = seen[np.where(hit, pos, 0)]
    hit &= u_time <= s_end[at]
    values = np.where(hit, number[at], np.nan)
    return pd.Series(values, index=units.index, copy=False)


def host_times(events: pd.DataFrame, units: pd.DataFrame,
               launch: np.ndarray | None = None) -> pd.Series:
    """Host-side time of each unit: a kernel's launch (runtime call with the same correlation
    on the same rank, e.g. cudaLaunchKernel or the cudaGraphLaunch that replayed it), else
    the unit's own start. Host annotations (steps, layers) enclose host times. ``launch``:
    ``launcher.launch_rows(events, units)`` where the caller has it.

    As in the pandas steps this replaces, where some units have a launch and some do not,
    all the times pass through float64 (the launch times were looked up with missing
    values, and the own times written into that float column)."""
    out = units[F.ORDER_TS].copy()
    if launch is None:
        launch = launch_rows(events, units)
    at = np.flatnonzero(launch >= 0)
    if not at.size:
        return out
    launched = events[S.TS_NS].to_numpy()[launch[at]].astype(np.int64)
    values = out.to_numpy().copy()
    values[at] = launched
    if at.size < len(units):  # as pandas wrote them: through one float64 array
        values = values.astype(np.float64).astype(np.int64)
    return pd.Series(values, index=out.index, name=out.name, copy=False)


def steps(events: pd.DataFrame, units: pd.DataFrame) -> pd.Series:
    """Step index of each unit (NaN outside every step marker)."""
    at = np.flatnonzero((events[S.KIND] == S.Kind.ANNOTATION).to_numpy())
    codes, texts = _names_at(events, at)
    hits = pd.Series(texts).str.contains(STEP_MARKER).to_numpy(dtype=bool)
    mask = hits[codes] if len(codes) else np.zeros(0, dtype=bool)
    return _enclosing(units, taken(events, [S.RANK, S.TS_NS, S.DUR_NS], at[mask]))


def _names_at(events: pd.DataFrame, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_name_texts`` of the NAME of ``events``' rows at ``at``; a categorical column is
    read by its codes (the texts: every category, then "" for the missing)."""
    names = events[S.NAME]
    if isinstance(names.dtype, pd.CategoricalDtype):
        codes = names.cat.codes.to_numpy()[at]
        texts = np.array([*(str(c) for c in names.cat.categories.tolist()), ""], dtype=object)
        return np.where(codes < 0, len(texts) - 1, codes), texts
    return _name_texts(names.to_numpy()[at])


def _name_texts(names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(code per row, the text by code) of ``names`` as ``fillna("").astype(str)`` makes
    them, the text made once per distinct name (the missing ones: the last code, "")."""
    codes, uniques = factorize(names)
    texts = np.array([*(str(u) for u in uniques.tolist()), ""], dtype=object)
    return np.where(codes < 0, len(texts) - 1, codes), texts


def marker_layers(events: pd.DataFrame, units: pd.DataFrame, rules: RuleSet) -> pd.Series:
    """Layer index from layer-marker annotations (NaN where none encloses the unit)."""
    out = pd.Series(np.nan, index=units.index)
    for marker in rules.layer_markers:
        at = (np.flatnonzero(events[S.KIND].isin(marker.kinds).to_numpy()) if marker.kinds
              else np.arange(len(events)))
        codes, texts = _names_at(events, at)
        # the ``layer`` group of the marker's pattern, once per distinct name
        layer = pd.Series(texts).str.extract(re.compile(marker.match))["layer"].to_numpy(
            dtype=object)[codes] if len(codes) else np.empty(0, dtype=object)
        hit = np.flatnonzero(pd.notna(layer))
        if not hit.size:
            continue
        spans = taken(events, [S.RANK, S.TS_NS, S.DUR_NS], at[hit])
        spans[F.LAYER_NO] = pd.Series(layer[hit], dtype=object, copy=False).astype(
            int).to_numpy()
        pos = _enclosing(units, spans)
        ordered = spans.sort_values([S.RANK, S.TS_NS])
        ordered[F.SPAN_NO] = ordered.groupby(S.RANK).cumcount()
        lookup = ordered.set_index([S.RANK, F.SPAN_NO])[F.LAYER_NO]
        keys = pd.MultiIndex.from_arrays([units[S.RANK], pos.fillna(-1).astype(int)])
        out = out.fillna(pd.Series(lookup.reindex(keys).to_numpy(), index=units.index,
                                   dtype=float))
    return out


def smallest_period(tokens: np.ndarray, prefer: int | None = None,
                    fits: Callable[[int, int], bool] | None = None) -> int:
    """Smallest p dividing len(tokens) with tokens[i] == tokens[i + p] and ``fits(0, p)``
    true for the first layer (a layer must hold a whole decoder layer's steps); the smallest
    period when no period fits. ``tokens``: integer codes (equal tokens, equal codes)."""
    n = len(tokens)
    if n == 0:
        return 0
    divisors = [p for p in range(1, n + 1) if n % p == 0]
    candidates = [n // prefer, *divisors] if prefer and n % prefer == 0 else divisors
    values = tokens.tolist()  # short sequences: list slices compare fastest
    periodic = [p for p in candidates if values[:n - p] == values[p:]]
    for p in periodic:
        if fits is None or fits(0, p):
            return p
    # nothing holds a whole layer (a step missing from the profile): the plain period
    return min(periodic)


def periodic_layers(logical: pd.DataFrame, layers_hint: int | None,
                    fits: Callable[[np.ndarray], bool] | None = None,
                    fit_codes: np.ndarray | None = None) -> pd.Series:
    """Layer of each logical collective from the repetition of its (rank, step) sequence.

    ``logical`` has one row per logical collective (first unit), ordered, with STEP and
    TOKEN (an integer code of the collective's (op, group, name, call site)). Collectives
    outside layers (barriers, p2p) get NaN. ``fits(positions)`` says whether the rows at
    those positions of ``logical`` can be one decoder layer; when it depends only on
    ``fit_codes`` of those rows, (rank, step) sequences with the same tokens and codes are
    split once.
    """
    out = np.full(len(logical), np.nan)
    inside_mask = ~logical[F.LOGICAL_OP].isin(NOT_IN_LAYER).to_numpy()
    positions = np.flatnonzero(inside_mask)
    if not len(positions):
        return pd.Series(out, index=logical.index)
    tokens = logical[F.TOKEN].to_numpy(dtype=np.int64)[positions]
    keys = row_codes(logical[S.RANK].to_numpy()[positions],
                     logical[F.STEP].fillna(-1).to_numpy()[positions])
    if fits is None:
        alike = tokens
    elif fit_codes is None:
        alike = np.arange(len(positions))  # every sequence its own
    else:
        alike = row_codes(tokens, np.asarray(fit_codes)[positions])
    seq_of_group, _ = sequence_ids(alike, keys)
    order, bounds = group_order(keys)
    _, solved_by = np.unique(seq_of_group, return_index=True)
    period = np.zeros(len(solved_by), dtype=np.int64)
    for sid, group in enumerate(solved_by.tolist()):
        idx = order[bounds[group]:bounds[group + 1]]
        rows = positions[idx]
        check = None if fits is None else (lambda a, b, rows=rows: fits(rows[a:b]))
        period[sid] = smallest_period(tokens[idx], layers_hint, check)
    out[positions] = position_in_group(keys) // period[seq_of_group[keys]]
    return pd.Series(out, index=logical.index)
