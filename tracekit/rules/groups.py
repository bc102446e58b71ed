"""Which communicator a collective ran on: the evidence chain, strongest first.

1. process-group description on the event (``pg_desc``);
2. process-group ranks on the event matched against the topology's member lists;
3. ``distributedInfo.pg_config`` (PROCESS_GROUPS) through the event's ``pg_name``;
4. the runloop thread a gloo op ran on, when another op on that thread was decided;
5. the Python call site (``call_sites`` rules);
6. the message shape (all_gather / reduce_scatter out/in ratio = group size);
7. the kernel class's default communicator.

Each piece of evidence gives a set of candidates; sets are intersected in order (a weaker
piece that contradicts a stronger one is noted and ignored). One candidate left: attributed.
Several: ambiguous, the candidates named in the reason. None: unattributed.
The work runs once per distinct combination of evidence, not per event.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules.keys import (
    factorize,
    first_rows,
    row_codes,
    tuple_key_series,
)
from tracekit.rules.model import RuleSet
from tracekit.rules.verdicts import Coded
from tracekit.schema import Status
from tracekit.topology import Topology


def desc_to_group(descs: pd.Series, rules: RuleSet) -> pd.Series:
    """Communicator named by each process-group description (None: no or unknown name)."""
    compiled = [(re.compile(r.match), r.group) for r in rules.group_descs]

    def one(desc: object) -> str | None:
        if not isinstance(desc, str):
            return None
        for pattern, group in compiled:
            if pattern.search(desc):
                return group
        return None

    values = descs.astype("object")
    uniq = {d: one(d) for d in pd.unique(values)}
    return values.map(uniq)


def desc_rule_id(desc: str, rules: RuleSet) -> str | None:
    for r in rules.group_descs:
        if re.search(r.match, desc):
            return r.id
    return None


_DESC_MEMO: dict[int, tuple[RuleSet, dict[str, str | None]]] = {}


def _desc_group(desc: str, rules: RuleSet) -> str | None:
    """``desc_to_group`` of one description, remembered per rule set for the process."""
    entry = _DESC_MEMO.get(id(rules))
    if entry is None or entry[0] is not rules:
        if len(_DESC_MEMO) >= 8:
            _DESC_MEMO.clear()
        entry = _DESC_MEMO[id(rules)] = (rules, {})
    memo = entry[1]
    if desc not in memo:
        memo[desc] = desc_to_group(pd.Series([desc]), rules).iloc[0]
    return memo[desc]


@dataclass(frozen=True)
class Evidence:
    name: str  # what it is, for the reason
    candidates: tuple[str, ...]
    rule_id: str


@dataclass(frozen=True)
class Verdict:
    group: str | None
    status: str
    rule_id: str | None
    reason: str
    candidates: tuple[str, ...]


def resolve(evidence: Sequence[Evidence]) -> Verdict:
    """Intersect candidate sets strongest first (see module doc)."""
    current: tuple[str, ...] | None = None
    used: list[str] = []
    notes: list[str] = []
    rule: str | None = None
    for ev in evidence:
        if not ev.candidates:
            continue
        if current is None:
            current, rule = ev.candidates, ev.rule_id
            used.append(f"{ev.name} -> {'|'.join(ev.candidates)}")
        else:
            both = tuple(g for g in current if g in ev.candidates)
            if not both:
                notes.append(f"ignored {ev.name} -> {'|'.join(ev.candidates)} (contradicts)")
                continue
            if both != current:
                current, rule = both, ev.rule_id
                used.append(f"{ev.name} -> {'|'.join(ev.candidates)}")
        if current is not None and len(current) == 1:
            break
    if not current:
        return Verdict(None, Status.UNATTRIBUTED, None, "no group evidence", ())
    reason = "; ".join(used + notes)
    if len(current) == 1:
        return Verdict(current[0], Status.ATTRIBUTED, rule, reason, current)
    reason += f"; candidates {', '.join(current)} (same members, nothing separates them)"
    return Verdict(None, Status.AMBIGUOUS, rule, reason, current)


def _canon(topo: Topology | None, groups: Sequence[str | None]) -> tuple[str, ...]:
    out: list[str] = []
    for g in groups:
        if g is None:
            continue
        c = topo.canonical(g) if topo is not None else g
        if c not in out:
            out.append(c)
    return tuple(out)


def _rank_candidates(topo: Topology | None, ranks: Sequence[int] | None) -> tuple[str, ...]:
    if topo is None or ranks is None or not len(ranks):
        return ()
    return member_groups(topo, tuple(ranks))


@functools.lru_cache(maxsize=4096)
def member_groups(topo: Topology, ranks: tuple[int, ...]) -> tuple[str, ...]:
    """``topo.groups_with_members``, remembered: the same member list recurs on every row and
    every rank of a communicator."""
    return topo.groups_with_members(frozenset(ranks))


@functools.lru_cache(maxsize=4096)
def _listed(ranks: tuple[int, ...]) -> str:
    return str(list(ranks))


def _as_key(ranks: Any) -> tuple[int, ...] | None:
    if ranks is None or not len(ranks):
        return None
    return tuple(ranks.tolist() if isinstance(ranks, np.ndarray) else (int(r) for r in ranks))


def _size_candidates(topo: Topology | None, rank: int, op: object, nin: object,
                     nout: object) -> tuple[str, ...]:
    if topo is None or not isinstance(op, str):
        return ()
    try:
        a, b = int(nin), int(nout)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return ()
    if a <= 0 or b <= 0:
        return ()
    ratio = b // a if op == S.Op.ALL_GATHER and b % a == 0 else (
        a // b if op == S.Op.REDUCE_SCATTER and a % b == 0 else 0)
    if ratio < 2:
        return ()
    out: list[str] = []
    for g in S.Group.ALL:
        m = topo.group_of(rank, g)
        if m is not None and len(m) == ratio and topo.canonical(g) not in out:
            out.append(topo.canonical(g))
    return tuple(out)


KEY_COLUMNS = (
    S.RANK, S.PG_DESC, F.RANKS_KEY, S.PG_NAME, F.CALL_GROUP, F.CALL_RULE, F.THREAD_GROUP,
    F.KGROUP, F.KRULE, S.OP, S.IN_NELEMS, S.OUT_NELEMS,
)


def evidence_codes(comm: pd.DataFrame, ranks_key: pd.Series | np.ndarray) -> np.ndarray:
    """Row codes of the evidence columns but the runloop thread's group (the one column that
    changes between the engine's two passes)."""
    return row_codes([ranks_key if name == F.RANKS_KEY else comm[name]
                      for name in KEY_COLUMNS if name != F.THREAD_GROUP])


def attribute_groups(comm: pd.DataFrame, rules: RuleSet, topo: Topology | None,
                     pg_table: pd.DataFrame, ranks_key: pd.Series | None = None,
                     static: np.ndarray | None = None) -> Coded:
    """The verdict (group, status, rule id, reason, candidates) of every communication row,
    in code space (``ranks_key``: each row's PG_RANKS as a tuple, ``static``:
    ``evidence_codes``, when the caller has them already)."""
    if comm.empty:
        return Coded.of((), np.zeros(0, dtype=np.int32))
    if ranks_key is None:
        ranks_key = tuple_key_series(comm[S.PG_RANKS])
    if static is None:
        static = evidence_codes(comm, ranks_key)
    columns = [ranks_key if name == F.RANKS_KEY else comm[name] for name in KEY_COLUMNS]
    codes = row_codes([static, comm[F.THREAD_GROUP]])
    first = first_rows(codes)
    # the evidence of each distinct combination, as Python values (None where missing)
    keys = []
    for column in columns:  # in numpy: a Series per column of a few rows costs more
        values = column.to_numpy()[first].astype(object)
        values[pd.isna(values)] = None
        keys.append(values.tolist())
    pg_lookup = _pg_lookup(pg_table)
    verdicts = [
        _verdict({k: _none(v) for k, v in zip(KEY_COLUMNS, key, strict=True)}, rules, topo,
                 pg_lookup)
        for key in zip(*keys, strict=True)
    ]
    return Coded.of(verdicts, codes)


def _none(value: object) -> object:
    return None if isinstance(value, float) and value != value else value


def _pg_lookup(pg_table: pd.DataFrame) -> dict[tuple[int, str], tuple[str | None, tuple[int, ...]]]:
    out: dict[tuple[int, str], tuple[str | None, tuple[int, ...]]] = {}
    if pg_table.empty:
        return out
    for rank, name, desc, ranks in zip(pg_table[S.RANK], pg_table[S.PG_NAME],
                                       pg_table[S.PG_DESC], pg_table[S.PG_RANKS], strict=True):
        members = _as_key(ranks) or ()
        out[(int(rank), str(name))] = (desc if isinstance(desc, str) else None, members)
    return out


def _verdict(key: dict[str, object], rules: RuleSet, topo: Topology | None,
             pg_lookup: dict[tuple[int, str], tuple[str | None, tuple[int, ...]]]) -> Verdict:
    ev: list[Evidence] = []
    desc = key[S.PG_DESC]
    by_desc = _desc_group(desc, rules) if isinstance(desc, str) else None
    if by_desc:
        ev.append(Evidence(f"description {desc!r}", _canon(topo, [by_desc]),
                           desc_rule_id(str(desc), rules) or "desc"))
    ranks = key[F.RANKS_KEY]
    if ranks:
        members: tuple[int, ...] = tuple(ranks)  # type: ignore[arg-type]  # _as_key made it
        ev.append(Evidence(f"ranks {_listed(members)} (topology)",
                           _rank_candidates(topo, members), "topology.members"))
    name = key[S.PG_NAME]
    if isinstance(name, str) and key[S.RANK] is not None:
        declared = pg_lookup.get((int(key[S.RANK]), name))  # type: ignore[call-overload]
        if declared is not None:
            pdesc, members = declared
            g = _desc_group(pdesc, rules) if pdesc else None
            if g:
                ev.append(Evidence(f"pg_config {name}={pdesc!r}", _canon(topo, [g]),
                                   "pg_config.desc"))
            ev.append(Evidence(f"pg_config {name} ranks {_listed(members)}",
                               _rank_candidates(topo, members), "pg_config.ranks"))
    if key[F.THREAD_GROUP]:
        ev.append(Evidence("gloo runloop thread", (str(key[F.THREAD_GROUP]),), "gloo.thread"))
    if key[F.CALL_GROUP]:
        ev.append(Evidence(f"call site rule {key[F.CALL_RULE]}",
                           _canon(topo, [str(key[F.CALL_GROUP])]), str(key[F.CALL_RULE])))
    if key[S.RANK] is not None:
        size = _size_candidates(topo, int(key[S.RANK]), key[S.OP], key[S.IN_NELEMS],  # type: ignore[call-overload]
                                key[S.OUT_NELEMS])
        if size:
            ev.append(Evidence("message shape (out/in = group size)", size, "shape.group_size"))
    if key[F.KGROUP]:
        krule = rules.kernel_classes[int(key[F.KRULE])]  # type: ignore[call-overload]
        ev.append(Evidence(f"kernel class {krule.id}", _canon(topo, [str(key[F.KGROUP])]),
                           krule.id))
        return _named(resolve(ev), str(key[F.KGROUP]), topo)
    return resolve(ev)


def _named(verdict: Verdict, label: str, topo: Topology | None) -> Verdict:
    """The kernel class's own name for the decided communicator: DeepEP traffic on an EP
    layout is reported as MOE_EP even where SGLang aliases MOE_EP to TP (ep == tp on CUDA)."""
    if (verdict.status != Status.ATTRIBUTED or verdict.group == label or topo is None
            or not topo.same_communicator(verdict.group, label)):
        return verdict
    return Verdict(label, verdict.status, verdict.rule_id,
                   f"{verdict.reason}; named {label} by the kernel class (same communicator "
                   f"as {verdict.group})", (label,))


def kernel_group(krule: pd.Series, rules: RuleSet, topo: Topology | None) -> pd.Series:
    """The kernel rule's default communicator: ``group_npu`` on an npu topology, else
    ``group_ep`` when the layout has an expert-parallel group (ep > 1), else ``group``."""
    npu = topo is not None and topo.config.npu
    has_ep = topo is not None and topo.config.ep > 1

    def pick(r: Any) -> str | None:
        if npu:
            return str(r.group_npu or r.group) if (r.group_npu or r.group) else None
        if has_ep and r.group_ep:
            return str(r.group_ep)
        return str(r.group) if r.group else None

    values = [pick(r) for r in rules.kernel_classes] + [None]
    arr = np.array(values, dtype=object)
    idx = krule.to_numpy()
    return pd.Series(arr[np.where(idx < 0, len(values) - 1, idx)], index=krule.index,
                     dtype=object, copy=False)


def _issuers(calls: np.ndarray, rank: np.ndarray) -> list[frozenset[int]]:
    """Per call code (0..), the ranks that issued it: from the distinct (call, rank) pairs."""
    if not len(calls):
        return []
    low = int(rank.min())
    width = int(rank.max()) - low + 1
    key = calls.astype(np.int64) * width
    key += rank - low
    span = (int(calls.max()) + 1) * width
    if span <= 4 * len(key):  # dense: the pairs present marked (np.unique's sort otherwise)
        seen = np.zeros(span, dtype=bool)
        seen[key] = True
        pairs = np.flatnonzero(seen)
    else:
        pairs = np.unique(key)
    call_of, rank_of = pairs // width, (pairs % width + low).tolist()
    bounds = np.searchsorted(call_of, np.arange(int(calls.max()) + 2)).tolist()
    return [frozenset(rank_of[a:b]) for a, b in pairwise(bounds)]


def participants_pass(comm: pd.DataFrame, verdicts: Coded, topo: Topology | None) -> Coded:
    """The weakest evidence: which ranks issued the same call (name, op, call site) at all.

    A collective's communicator has every member issue that call, so its members are a subset
    of those ranks. For rows still without a group, the candidates are the communicators that
    contain the row's rank and whose members all issued the call (intersected with earlier
    candidates). Needs a topology and two or more rank files. Runs once per distinct
    (rank, call, earlier candidates). ``verdicts``: those of ``comm``'s rows so far.
    """
    if topo is None or comm[S.RANK].nunique() < 2:
        return verdicts
    site = comm[F.CALL_KEY] if F.CALL_KEY in comm else comm[S.CALL_SITE]  # codes: alike
    calls = row_codes([comm[S.NAME], comm[S.OP], site])
    rank = comm[S.RANK].astype(int).to_numpy()
    issuers = _issuers(calls, rank)
    open_rows = np.flatnonzero(~verdicts.has_status(Status.ATTRIBUTED))
    if not open_rows.size:
        return verdicts
    # the earlier candidates, coded per verdict of the table (equal tuples alike)
    cand_of, cand_uniq = factorize(verdicts.per_verdict("candidates"))
    cand_codes = np.take(np.asarray(cand_of, dtype=np.int64), verdicts.codes[open_rows])
    before_of = [tuple(c) if c else () for c in cand_uniq] + [()]  # code -1: none
    pair = row_codes([rank[open_rows], calls[open_rows], cand_codes])
    found: list[Verdict] = []
    for at in first_rows(pair).tolist():
        r, key, before = int(rank[open_rows[at]]), calls[open_rows[at]], before_of[cand_codes[at]]
        took_part = issuers[key]
        cands: list[str] = []
        for g in S.Group.ALL:
            m = topo.group_of(r, g)
            if m and len(m) > 1 and set(m) <= took_part and topo.canonical(g) not in cands:
                cands.append(topo.canonical(g))
        ev = [Evidence("earlier evidence", before, "prior")] if before else []
        ev.append(Evidence(f"ranks issuing this call {sorted(took_part)}", tuple(cands),
                           "participants"))
        found.append(resolve(ev))
    decided = np.array([v.status != Status.UNATTRIBUTED for v in found], dtype=bool)[pair]
    if not decided.any():
        return verdicts
    return verdicts.written(open_rows[decided], found, pair[decided])
