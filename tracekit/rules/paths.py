"""Execution paths: from call sites, kernel classes and path rules, then by position.

1. The call-site rule's path, else the kernel rule's path, else the first ``paths`` rule whose
   ``when`` holds (evaluated once per distinct combination of facts).
2. Collectives still without a path whose op and group fit several per-layer slots (the
   ``slot`` of a path label: a TP AllReduce may be the attention reduction, the SUM_LEN DP
   gather or the post-expert AllReduce) are placed by position inside their layer: phases
   must not go backwards (``phase_order``), a ``single_use`` label is used once, a family with
   ``one_per_layer`` has one variant per layer, and a label the topology does not expect
   (``expected`` / ``possible``) is taken only when nothing else fits. Ties stay without a
   path; the reason names the candidates. Every fact comes from the path labels and families
   of the loaded rules (paths.yaml and user files); no label is named here.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tracekit import schema as S
from tracekit.rules import firsts
from tracekit.rules import frame as F
from tracekit.rules.grouping import row_codes
from tracekit.rules.kernels import rule_column
from tracekit.rules.keys import taken
from tracekit.rules.model import PathLabelRule, RuleSet, When
from tracekit.topology import Topology


def _holds(when: When, facts: dict[str, object], topo: Topology | None) -> bool:
    for key in ("op", "group", "library", "role", "mode"):
        allowed = getattr(when, key)
        if allowed and facts.get(key) not in allowed:
            return False
    if when.call is not None:
        call = facts.get("call")
        if not isinstance(call, str) or not re.search(when.call, call):
            return False
    if when.attn_tp is not None and (topo is None or topo.config.attn_tp_case != when.attn_tp):
        return False
    return when.dp_attention is None or (
        topo is not None and (topo.config.attn_dp > 1) == when.dp_attention)


_OF_KRULE = (F.LIBRARY, F.ROLE, F.MODE, F.KPATH)
# the kernel rule's attribute behind each of those columns
_RULE_ATTR = {F.LIBRARY: "library", F.ROLE: "role", F.MODE: "mode", F.KPATH: "path"}


def rule_paths(comm: pd.DataFrame, rules: RuleSet, topo: Topology | None) -> pd.DataFrame:
    """PATH and PATH_RULE from call sites, kernel rules and ``paths`` rules (object columns,
    None where no rule gives a path); decided once per distinct combination of facts."""
    return rule_paths_seen(comm, rules, topo)[0]


def rule_paths_seen(comm: pd.DataFrame, rules: RuleSet,
                    topo: Topology | None) -> tuple[pd.DataFrame, set[str]]:
    """``rule_paths`` and the set of the paths it gave (read off the distinct combinations,
    every one of which some row has: no pass over the rows)."""
    facts_cols = [F.LOGICAL_OP, S.GROUP, F.LIBRARY, F.ROLE, F.MODE, S.CALL_SITE, F.CALL_PATH,
                  F.CALL_RULE, F.KPATH, F.KRULE]
    # library, role, mode and kernel path are the kernel rule's: KRULE stands for them in the key
    # (and the engine's call-site codes for the call sites, where it has them)
    key_cols = [F.CALL_KEY if c == S.CALL_SITE and F.CALL_KEY in comm else c
                for c in facts_cols if c not in _OF_KRULE]
    codes = row_codes(*(comm[c] for c in key_cols))
    reps = taken(comm, [c for c in facts_cols if c in comm], firsts.first_rows(codes))
    for col in _OF_KRULE:  # the engine keeps the kernel rule's facts in its rules, by KRULE
        if col not in reps:
            reps[col] = rule_column(reps[F.KRULE].to_numpy(), rules,
                                    _RULE_ATTR[col]).to_numpy()
    reps = reps[facts_cols].astype("object")
    paths = np.empty(len(reps), dtype=object)
    path_rules = np.empty(len(reps), dtype=object)
    for i, key in enumerate(reps.itertuples(index=False, name=None)):
        paths[i], path_rules[i] = _rule_path(
            tuple(None if pd.isna(v) else v for v in key), rules, topo)
    seen = {p for p in paths.tolist() if isinstance(p, str)}
    return pd.DataFrame({
        S.PATH: pd.Series(paths[codes], index=comm.index, dtype=object, copy=False),
        F.PATH_RULE: pd.Series(path_rules[codes], index=comm.index, dtype=object, copy=False),
    }, copy=False), seen


def _rule_path(key: tuple[Any, ...], rules: RuleSet,
               topo: Topology | None) -> tuple[str | None, str | None]:
    lop, group, lib, role, mode, call, cpath, crule, kpath, krule = key
    if cpath:
        return cpath, crule
    if kpath and krule is not None:
        return kpath, rules.kernel_classes[int(krule)].id
    facts = {"op": lop, "group": group, "library": lib, "role": role, "mode": mode,
             "call": call}
    hit = next((r for r in rules.paths if _holds(r.when, facts, topo)), None)
    return (hit.path, hit.id) if hit else (None, None)


def slot_candidates(rules: RuleSet, topo: Topology | None, op: object,
                    group: object) -> tuple[str, ...]:
    """Labels a collective may fill by its op and group alone (their ``slot`` holds), in
    declaration order. Without a topology nothing is placed by position."""
    if topo is None:
        return ()
    facts = {"op": op, "group": group}
    return tuple(lab.id for lab in rules.path_labels
                 if lab.slot is not None and _holds(lab.slot, facts, topo))


def _topology_holds(when: When | None, topo: Topology) -> bool:
    return when is None or _holds(when, {}, topo)


def _expected(rules: RuleSet, path: str, topo: Topology | None) -> bool:
    if topo is None:
        return True
    lab = rules.label(path)
    return lab is None or (_topology_holds(lab.expected, topo)
                           and _topology_holds(lab.possible, topo))


def _possible(lab: PathLabelRule, topo: Topology) -> bool:
    return _topology_holds(lab.possible, topo)


Placement = tuple[list[str | None], list[tuple[str, ...]]]
Families = tuple[frozenset[str], ...]


def required_families(rules: RuleSet, topo: Topology | None, seen_paths: set[str]) -> Families:
    """Path families every decoder layer must contain, from the families' ``required``
    conditions, the topology and the paths that ran (a family counts its possible labels)."""
    if topo is None:
        return ()
    c = topo.config
    members = {f.id: frozenset(lab.id for lab in rules.path_labels
                               if lab.family == f.id and _possible(lab, topo))
               for f in rules.path_families}
    seen = {fid for fid, paths in members.items() if paths & seen_paths}
    out: list[frozenset[str]] = []
    for fam in rules.path_families:
        need = fam.required
        if need is None or not members[fam.id]:
            continue
        if need.attn_tp and c.attn_tp_case not in need.attn_tp:
            continue
        if need.dp_attention is not None and (c.attn_dp > 1) != need.dp_attention:
            continue
        if need.tp_above_one is not None and (c.tp > 1) != need.tp_above_one:
            continue
        if need.seen and fam.id not in seen:
            continue
        if any(other in seen for other in need.unless_seen):
            continue
        out.append(members[fam.id])
    return tuple(out)


def place(rules: RuleSet, sequence: Sequence[tuple[str | None, tuple[str, ...]]],
          topo: Topology | None, required: Families = (),
          allow_unexpected: bool = True) -> Placement | None:
    """Fill the open slots of one layer. ``sequence``: (known path, candidates) in order.

    Returns the chosen path per item (None when tied) and the tied candidates per item, or
    None when no assignment is consistent and covers every ``required`` family. A slot the
    topology does not expect is only taken when ``allow_unexpected`` (a whole layer is known).
    """
    open_idx = [i for i, (p, c) in enumerate(sequence) if p is None and c]
    chosen: list[str | None] = [p for p, _ in sequence]
    ties: list[tuple[str, ...]] = [() for _ in sequence]
    if len(open_idx) > 6:
        return chosen, ties
    best: list[tuple[int, tuple[str, ...]]] = []
    for combo in itertools.product(*(sequence[i][1] for i in open_idx)):
        trial = list(chosen)
        for i, p in zip(open_idx, combo, strict=True):
            trial[i] = p
        if not _consistent(rules, trial) or not _covers(trial, required):
            continue
        cost = sum(not _expected(rules, p, topo) for p in combo)
        if cost and not allow_unexpected:
            continue
        best.append((cost, combo))
    if not best:
        return None
    low = min(c for c, _ in best)
    winners = [combo for c, combo in best if c == low]
    for j, i in enumerate(open_idx):
        options = tuple(dict.fromkeys(w[j] for w in winners))
        if len(options) == 1:
            chosen[i] = options[0]
        else:
            ties[i] = options
    return chosen, ties


def _covers(paths: Sequence[str | None], required: Families) -> bool:
    present = {p for p in paths if p is not None}
    return all(present & family for family in required)


def _consistent(rules: RuleSet, paths: Sequence[str | None]) -> bool:
    order = rules.phase_rank()
    one_per_layer = rules.one_per_layer()
    last = -1
    used: set[str] = set()
    variants: dict[str, set[str]] = {}
    for p in paths:
        if p is None:
            continue
        lab = rules.label(p)
        if lab is None:
            continue
        rank = order.get(lab.phase)
        if rank is not None:
            if rank < last:
                return False
            last = rank
        if lab.single_use:
            if p in used:
                return False
            used.add(p)
        if lab.family in one_per_layer:
            variants.setdefault(lab.family, set()).add(p)
    return all(len(v) <= 1 for v in variants.values())
