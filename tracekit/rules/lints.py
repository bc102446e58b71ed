"""Lints: checks over the attributed collectives, written to FINDINGS.

Each check is a function named in ``lints.yaml`` (``check:``); the YAML holds its severity,
wording and parameters. Checks read the engine's frame of communication rows (one row per
collective unit after attribution) and return finding dicts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import api
from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules.model import LintRule, RuleSet
from tracekit.schema import Group, PathLabel
from tracekit.topology import Topology

Finding = dict[str, Any]
Check = Callable[[pd.DataFrame, LintRule, "Topology | None", api.Run], list[Finding]]


def _units(comm: pd.DataFrame) -> pd.DataFrame:
    units = comm[comm[F.UNIT].astype(bool)] if F.UNIT in comm else comm.iloc[0:0]
    return units.drop_duplicates([S.RANK, S.LOGICAL_ID])


def _layer_key(units: pd.DataFrame) -> list[Any]:
    return [units[F.STEP].fillna(-1), units[S.LAYER]]


def _finding(rule: LintRule, layer: Any, ranks: list[int], group: str | None,
             path: str | None, evidence: str, **fmt: Any) -> Finding:
    known = layer is not None and layer == layer  # not None, not NaN
    values = {"layer": int(layer) if known else layer, "group": group, "path": path, **fmt}
    try:
        message = rule.message.format(**values)
    except (KeyError, IndexError):
        message = rule.message
    return {
        S.RULE_ID: rule.id, S.SEVERITY: rule.severity,
        S.LAYER: int(layer) if known else None,
        S.RANKS: sorted({int(r) for r in ranks}), S.GROUP: group, S.PATH: path,
        S.MESSAGE: " ".join(message.split()), S.EVIDENCE: evidence,
    }


def double_reduction(comm: pd.DataFrame, rule: LintRule, topo: Topology | None,
                     run: api.Run) -> list[Finding]:
    """B or C reduced the expert output and the post-expert AllReduce also ran (same layer)."""
    reducing = set(rule.param("reducing", ()))
    post = set(rule.param("post_expert", ()))
    units = _units(comm)
    units = units[units[S.LAYER].notna() & units[S.PATH].isin(reducing | post)]
    if units.empty:
        return []
    keys = [units[F.STEP].fillna(-1), units[S.LAYER], units[S.RANK]]
    has_post = units[S.PATH].isin(post).groupby(keys).transform("any")
    hits = units[units[S.PATH].isin(reducing) & has_post]
    out: list[Finding] = []
    for (step, layer, path), part in hits.groupby(
            [hits[F.STEP].fillna(-1), hits[S.LAYER], hits[S.PATH]], sort=True):
        ranks = sorted(set(part[S.RANK]))
        n_post = int((units[S.PATH].isin(post) & units[S.RANK].isin(ranks)
                      & (units[S.LAYER] == layer) & (units[F.STEP].fillna(-1) == step)).sum())
        evidence = (f"step {int(step)}: {n_post} post-expert all_reduce and {len(part)} {path} "
                    f"collectives on ranks {ranks}")
        out.append(_finding(rule, layer, ranks, Group.TP, str(path), evidence))
    return out


def attention_global_tp(comm: pd.DataFrame, rule: LintRule, topo: Topology | None,
                        run: api.Run) -> list[Finding]:
    """Attention output all-reduced over the whole TP group while 1 < attn_tp < tp."""
    if topo is None or topo.config.attn_tp_case != "between":
        return []
    paths = set(rule.param("paths", ()))
    units = _units(comm)
    bad = units[units[S.PATH].isin(paths) & (units[S.GROUP] == Group.TP)
                & (units[F.LOGICAL_OP] == S.Op.ALL_REDUCE)]
    out: list[Finding] = []
    for (step, layer), part in bad.groupby(_layer_key(bad), sort=True, dropna=False):
        ranks = sorted(set(part[S.RANK]))
        members = topo.group_of(ranks[0], Group.TP) or ()
        evidence = (f"step {int(step)}: {len(part)} all_reduce on TP {list(members)} in the "
                    f"attention slot ({', '.join(sorted(set(part[S.PATH])))})")
        out.append(_finding(rule, layer, ranks, Group.TP, PathLabel.ATTN_FULL_TP, evidence,
                            members=list(members), attn_tp=topo.config.attn_tp,
                            tp=topo.config.tp))
    return out


_FAMILIES = {
    "attn_reduce": (PathLabel.ATTN_FULL_TP, PathLabel.ATTN_TP),
    "dp_gather": (PathLabel.GATHER_V, PathLabel.GATHER_AR, PathLabel.GATHER_AG,
                  PathLabel.GATHER_RS_AG),
    "combine": (PathLabel.COMBINE_A, PathLabel.COMBINE_B, PathLabel.COMBINE_C,
                PathLabel.NO_DPA_MOE_AR),
    "a2a": (PathLabel.DEEPEP_LAYOUT, PathLabel.DEEPEP_NORMAL_DISPATCH,
            PathLabel.DEEPEP_NORMAL_COMBINE, PathLabel.DEEPEP_LL_DISPATCH,
            PathLabel.DEEPEP_LL_COMBINE, PathLabel.DEEPEP_V2_DISPATCH,
            PathLabel.DEEPEP_V2_COMBINE, PathLabel.FUSEEP),
}


_FAMILY_PATHS = sorted({p for paths in _FAMILIES.values() for p in paths})


# config values -> the path each implies; both the reference workload's spelling
# (sum_len, max_len, a, b, c) and the synth/path-label spelling (allreduce, rs_ag, a_allreduce...)
_GATHER = {
    "gatherv": {PathLabel.GATHER_V}, "sum_len": {PathLabel.GATHER_AR},
    "allreduce": {PathLabel.GATHER_AR}, "allgather": {PathLabel.GATHER_AG},
    "rs_ag": {PathLabel.GATHER_RS_AG}, "none": set(),
}
_COMBINE = {
    "b": {PathLabel.COMBINE_B}, "b_reduce_scatterv": {PathLabel.COMBINE_B},
    "c": {PathLabel.COMBINE_C}, "c_reduce_scatter": {PathLabel.COMBINE_C}, "none": set(),
}
_ATTN = {"full_tp": {PathLabel.ATTN_FULL_TP}, "attn_tp": {PathLabel.ATTN_TP}, "none": set()}
_NOT_STATED = (None, "auto")


def expected_paths(topo: Topology) -> dict[str, set[str] | None]:
    """Per family, the paths the config's switches imply (None: not stated or a value this
    lint does not know, so not checked: an unknown spelling must never raise a finding)."""
    c = topo.config
    out: dict[str, set[str] | None] = {}
    attn = c.expected("attn_reduce")
    out["attn_reduce"] = None if attn in _NOT_STATED else _ATTN.get(str(attn))
    gather = c.expected("dp_gather")
    if gather == "max_len":
        out["dp_gather"] = {PathLabel.GATHER_AG} if c.attn_tp == 1 else {PathLabel.GATHER_RS_AG}
    else:
        out["dp_gather"] = None if gather in _NOT_STATED else _GATHER.get(str(gather))
    combine = c.expected("combine")
    if combine in ("a", "a_allreduce"):
        out["combine"] = {PathLabel.COMBINE_A} if c.attn_dp > 1 else {PathLabel.NO_DPA_MOE_AR}
    else:
        out["combine"] = None if combine in _NOT_STATED else _COMBINE.get(str(combine))
    a2a = c.expected("a2a")
    normal = {PathLabel.DEEPEP_LAYOUT, PathLabel.DEEPEP_NORMAL_DISPATCH,
              PathLabel.DEEPEP_NORMAL_COMBINE}
    low_latency = {PathLabel.DEEPEP_LL_DISPATCH, PathLabel.DEEPEP_LL_COMBINE}
    mode = c.expected("deepep_mode") or "normal"
    deepep = (normal if mode == "normal" else low_latency if mode == "low_latency"
              else normal | low_latency)  # auto: normal for extend, low latency for decode
    deepep = deepep | {PathLabel.DEEPEP_V2_DISPATCH, PathLabel.DEEPEP_V2_COMBINE}  # V2: one mode
    a2a_paths = {"fuseep": {PathLabel.FUSEEP}, "deepep": deepep, "deepep_ll": low_latency,
                 "none": set()}
    out["a2a"] = None if a2a in _NOT_STATED else a2a_paths.get(str(a2a))
    return out


def path_mismatch(comm: pd.DataFrame, rule: LintRule, topo: Topology | None,
                  run: api.Run) -> list[Finding]:
    """The paths observed in a layer differ from what the config's switches imply."""
    if topo is None or not topo.config.expect:
        return []
    expected = expected_paths(topo)
    units = _units(comm)
    units = units[units[S.LAYER].notna()]
    if units.empty:
        return []
    layers = _LayerRows(units)
    out: list[Finding] = []
    for code, (step, layer) in enumerate(layers.keys):
        seen = layers.seen.get(code, frozenset())
        for family, members in _FAMILIES.items():
            want = expected.get(family)
            if want is None:
                continue
            got = seen & set(members)
            ok = got <= want and (bool(got) or not want) if family == "a2a" else got == want
            if ok:
                continue
            ranks = layers.ranks(code, members)
            evidence = (f"step {int(step)}: config {family}={topo.config.expected(family)}; "
                        f"observed {sorted(got) or 'none'} on ranks {ranks}")
            out.append(_finding(rule, layer, ranks, None, ",".join(sorted(got)) or None,
                                evidence, expected=sorted(want) or "none", phase=family,
                                observed=sorted(got) or "none"))
    return out


class _LayerRows:
    """The unit rows of each (step, layer), numbered in sorted key order, with the family
    paths each layer holds; rows are looked up by position, not by slicing the frame."""

    def __init__(self, units: pd.DataFrame) -> None:
        grouped = units.groupby(_layer_key(units), sort=True)
        self.keys = list(grouped.size().index)
        codes = grouped.ngroup().to_numpy()
        self.order = np.argsort(codes, kind="stable")
        self.bounds = np.searchsorted(codes[self.order], np.arange(len(self.keys) + 1))
        self.paths = units[S.PATH].astype(object).to_numpy()
        self.rank_values = units[S.RANK].to_numpy()
        known = units[S.PATH].isin(_FAMILY_PATHS).to_numpy()
        pairs = pd.DataFrame({F.IDX: codes[known], S.PATH: self.paths[known]}).drop_duplicates()
        seen: dict[int, set[str]] = {}
        for code, path in zip(pairs[F.IDX].tolist(), pairs[S.PATH].tolist(), strict=True):
            seen.setdefault(code, set()).add(path)
        self.seen = {code: frozenset(paths) for code, paths in seen.items()}
        self.on_family: dict[tuple[str, ...], np.ndarray] = {}

    def ranks(self, code: int, members: tuple[str, ...]) -> list[int]:
        """Sorted ranks of the layer's rows on ``members``, else of all its rows."""
        rows = self.order[self.bounds[code]:self.bounds[code + 1]]
        if members not in self.on_family:
            self.on_family[members] = pd.Series(self.paths, dtype=object).isin(members).to_numpy()
        hit = self.on_family[members][rows]
        chosen = self.rank_values[rows[hit]] if hit.any() else self.rank_values[rows]
        return sorted({int(r) for r in chosen.tolist()})


def participants(comm: pd.DataFrame, rule: LintRule, topo: Topology | None,
                 run: api.Run) -> list[Finding]:
    """The k-th collective of a communicator must run on every loaded member rank."""
    units = _units(comm)
    units = units[units[S.GROUP].notna()].sort_values([S.RANK, F.ORDER_TS, S.TS_NS], kind="stable")
    if units.empty:
        return []
    loaded = set(run.ranks) or set(units[S.RANK])

    def communicator(rank: int, group: str, ranks: Any) -> tuple[int, ...] | None:
        if ranks is not None and len(ranks):
            return tuple(sorted(int(r) for r in ranks))
        if topo is not None:
            m = topo.group_of(int(rank), group)
            return tuple(sorted(m)) if m else None
        return None

    units = units.assign(**{F.MEMBERS_KEY: [
        communicator(r, g, p) for r, g, p in zip(units[S.RANK], units[S.GROUP], units[S.PG_RANKS],
                                                strict=True)]})
    units = units[units[F.MEMBERS_KEY].notna()]
    order = units.groupby([S.RANK, S.GROUP, F.MEMBERS_KEY]).cumcount()
    units = units.assign(**{F.K_IN_GROUP: order})
    out: list[Finding] = []
    for (group, members), part in units.groupby([S.GROUP, F.MEMBERS_KEY], sort=True):
        want = set(members) & loaded
        if len(want) < 2:
            continue
        seen = part.groupby(F.K_IN_GROUP)[S.RANK].agg(lambda s: tuple(sorted(set(s))))
        bad = seen[[set(s) != want for s in seen]]
        if bad.empty:
            continue
        k = int(bad.index[0])
        ops = part.loc[part[F.K_IN_GROUP] == k, F.LOGICAL_OP].astype(str).unique().tolist()
        evidence = (f"{len(bad)} of {len(seen)} {group} collectives on {list(members)} have "
                    f"other participants; first #{k}: ranks {list(bad.iloc[0])}")
        out.append(_finding(rule, None, list(bad.iloc[0]), str(group), None, evidence,
                            index=k, op="/".join(ops), observed=list(bad.iloc[0]),
                            members=sorted(want)))
    return out


CHECKS: dict[str, Check] = {
    "double_reduction": double_reduction,
    "attention_global_tp": attention_global_tp,
    "path_mismatch": path_mismatch,
    "participants": participants,
}


# engine frame column -> COLLECTIVE_UNITS column
_UNIT_COLUMNS = (
    (S.RANK, S.RANK), (S.LOGICAL_ID, S.LOGICAL_ID), (S.TS_NS, S.TS_NS),
    (F.ORDER_TS, S.ORDER_TS_NS), (F.STEP, S.STEP_INDEX), (S.LAYER, S.LAYER),
    (S.GROUP, S.GROUP), (S.PATH, S.PATH), (F.LOGICAL_OP, S.LOGICAL_OP),
    (S.PG_RANKS, S.PG_RANKS),
)


def collective_units(comm: pd.DataFrame) -> pa.Table:
    """COLLECTIVE_UNITS of the engine's frame: one row per (rank, logical collective), all the
    lints read. Units of different ranks never interact before the lints, so the tables of
    ranks attributed apart concatenate into the table of the ranks attributed together."""
    keep = [c for c in (*(col for col, _ in _UNIT_COLUMNS), F.UNIT) if c in comm]
    units = _units(comm[keep])  # only the columns kept: the frame is wide
    if units.empty:
        return S.empty(S.COLLECTIVE_UNITS)
    table = pa.table({
        out: pa.array(units[col].astype("object").where(units[col].notna(), None).to_numpy(),
                      from_pandas=True)
        for col, out in _UNIT_COLUMNS if col in units})
    return S.conform(table, S.COLLECTIVE_UNITS)


def units_frame(units: pa.Table) -> pd.DataFrame:
    """COLLECTIVE_UNITS back as the frame the checks read."""
    from tracekit.rules.tables import to_pandas

    frame = to_pandas(units).rename(
        columns={out: col for col, out in _UNIT_COLUMNS if out != col})
    frame[F.UNIT] = True
    return frame


def run_lints(units: pa.Table, rules: RuleSet, topo: Topology | None,
              run: api.Run) -> pa.Table:
    """FINDINGS from every lint rule over COLLECTIVE_UNITS (of one rank or of many: they are
    concatenated across ranks); an unknown ``check`` name is a ConfigError."""
    from tracekit.errors import ConfigError

    comm = units_frame(units)
    rows: list[Finding] = []
    for rule in rules.lints:
        check = CHECKS.get(rule.check)
        if check is None:
            raise ConfigError(f"lint {rule.id}: unknown check {rule.check!r} "
                              f"(known: {', '.join(sorted(CHECKS))})")
        rows.extend(check(comm, rule, topo, run))
    if not rows:
        return S.empty(S.FINDINGS)
    table = pa.Table.from_pylist(rows)
    return S.conform(table, S.FINDINGS)
