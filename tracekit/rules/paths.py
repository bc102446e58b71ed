"""Execution paths: from call sites, kernel classes and path rules, then by position.

1. The call-site rule's path, else the kernel rule's path, else the first ``paths`` rule whose
   ``when`` holds (evaluated once per distinct combination of facts).
2. Collectives still without a path whose op and group fit several per-layer slots (a TP
   AllReduce may be the attention reduction, the SUM_LEN DP gather or the post-expert
   AllReduce) are placed by position inside their layer: phases must not go backwards
   (attention_reduce, dp_gather, dispatch, experts, combine), each of those slots is used once,
   a layer has one DP-gather variant, and a slot the topology does not expect is taken only
   when nothing else fits. Ties stay without a path; the reason names the candidates.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

import pandas as pd

from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules.model import RuleSet, When
from tracekit.schema import Group, PathLabel, Phase
from tracekit.topology import Topology

PHASE_ORDER = {
    Phase.ATTENTION_REDUCE: 0, Phase.DP_GATHER: 1, Phase.DISPATCH: 2, Phase.EXPERTS: 3,
    Phase.COMBINE: 4,
}
SINGLE_USE = (
    PathLabel.ATTN_FULL_TP, PathLabel.GATHER_AR, PathLabel.COMBINE_A, PathLabel.NO_DPA_MOE_AR,
)
GATHER_VARIANTS = (
    PathLabel.GATHER_V, PathLabel.GATHER_AR, PathLabel.GATHER_AG, PathLabel.GATHER_RS_AG,
)


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


def rule_paths(comm: pd.DataFrame, rules: RuleSet, topo: Topology | None) -> pd.DataFrame:
    """PATH and PATH_RULE from call sites, kernel rules and ``paths`` rules."""
    facts_cols = [F.LOGICAL_OP, S.GROUP, F.LIBRARY, F.ROLE, F.MODE, S.CALL_SITE, F.CALL_PATH,
                  F.CALL_RULE, F.KPATH, F.KRULE]
    keys = comm[facts_cols].astype("object").where(comm[facts_cols].notna(), None)
    codes, uniq = pd.factorize(pd.MultiIndex.from_frame(keys))
    results = []
    for key in uniq:
        lop, group, lib, role, mode, call, cpath, crule, kpath, krule = (
            None if isinstance(v, float) and v != v else v for v in key)
        if cpath:
            results.append((cpath, crule))
            continue
        if kpath and krule is not None:
            results.append((kpath, rules.kernel_classes[int(krule)].id))
            continue
        facts = {"op": lop, "group": group, "library": lib, "role": role, "mode": mode,
                 "call": call}
        hit = next((r for r in rules.paths if _holds(r.when, facts, topo)), None)
        results.append((hit.path, hit.id) if hit else (None, None))
    chosen = [results[c] for c in codes]
    return pd.DataFrame({S.PATH: [p for p, _ in chosen], F.PATH_RULE: [r for _, r in chosen]},
                        index=comm.index)


def slot_candidates(topo: Topology | None, op: object, group: object) -> tuple[str, ...]:
    """Slots a collective may fill by its op and group alone: a TP all-reduce in an SGLang
    layout (a topology is known) is the attention reduction, the SUM_LEN DP gather or the
    post-expert all-reduce. Without a topology nothing is placed by position."""
    if topo is None or op != S.Op.ALL_REDUCE or group != Group.TP:
        return ()
    if topo.config.attn_dp == 1:
        return (PathLabel.ATTN_FULL_TP, PathLabel.NO_DPA_MOE_AR)
    return (PathLabel.ATTN_FULL_TP, PathLabel.GATHER_AR, PathLabel.COMBINE_A)


def _expected(path: str, topo: Topology | None) -> bool:
    if topo is None:
        return True
    case = topo.config.attn_tp_case
    if path == PathLabel.ATTN_FULL_TP:
        return case == "eq_tp"
    if path == PathLabel.ATTN_TP:
        return case == "between"
    return True


Placement = tuple[list[str | None], list[tuple[str, ...]]]
Families = tuple[frozenset[str], ...]


def required_families(topo: Topology | None, seen_paths: set[str]) -> Families:
    """Path families every decoder layer must contain, from the topology and what ran.

    Attention reduction when attn_tp > 1; with no all-to-all anywhere in the run, a combine
    step (tp > 1) and, with DP attention, a DP gather; with an all-to-all, one of its paths.
    """
    if topo is None:
        return ()
    c = topo.config
    a2a = frozenset(p for p in PathLabel.ALL if p.startswith(("deepep.", "fuseep")))
    out: list[frozenset[str]] = []
    if c.attn_tp_case == "eq_tp":
        out.append(frozenset({PathLabel.ATTN_FULL_TP}))
    elif c.attn_tp_case == "between":
        out.append(frozenset({PathLabel.ATTN_TP, PathLabel.ATTN_FULL_TP}))
    if seen_paths & a2a:
        out.append(a2a)
    elif c.tp > 1:
        out.append(frozenset({PathLabel.COMBINE_A, PathLabel.COMBINE_B, PathLabel.COMBINE_C,
                              PathLabel.NO_DPA_MOE_AR}))
        if c.attn_dp > 1:
            out.append(frozenset(GATHER_VARIANTS))
    return tuple(out)


def place(sequence: Sequence[tuple[str | None, tuple[str, ...]]], topo: Topology | None,
          required: Families = (), allow_unexpected: bool = True) -> Placement | None:
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
        if not _consistent(trial) or not _covers(trial, required):
            continue
        cost = sum(not _expected(p, topo) for p in combo)
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


def _consistent(paths: Sequence[str | None]) -> bool:
    last = -1
    used: set[str] = set()
    gathers: set[str] = set()
    for p in paths:
        if p is None:
            continue
        order = PHASE_ORDER.get(PathLabel.PHASE_OF.get(p, Phase.OTHER))
        if order is not None:
            if order < last:
                return False
            last = order
        if p in SINGLE_USE:
            if p in used:
                return False
            used.add(p)
        if p in GATHER_VARIANTS:
            gathers.add(p)
    return len(gathers) <= 1
