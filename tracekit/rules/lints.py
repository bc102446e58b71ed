"""Lints: checks over the attributed collectives, written to FINDINGS.

A lint in ``lints.yaml`` (or a user file) names one of the generic checks below (``check:``)
and gives it the path labels or path families it is about, its severity and wording; no path
label is named here. Checks read the engine's frame of communication rows (one row per
collective unit after attribution) and return finding dicts.

- ``same_layer``: a path of ``paths`` ran in a layer (same step, same rank) that also ran a
  path of ``with``; the finding names ``group``.
- ``group_in_slot``: an ``op`` on ``group`` filled one of ``paths`` while the topology's
  ``attn_tp`` case is the given one; the finding's path is ``report_path``.
- ``config_paths``: per path family of ``families``, the paths observed in a layer differ from
  what the config switch of the same name implies (``expect``; ``at_most`` families may show
  part of the expected paths).
- ``participants``: the k-th collective of a communicator ran on other ranks than its members.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import model
from tracekit import schema as S
from tracekit.rules import firsts
from tracekit.rules import frame as F
from tracekit.rules.grouping import row_codes
from tracekit.rules.keys import factorize, list_codes, spread, tuple_key_series
from tracekit.rules.model import FrozenMap, LintRule, RuleSet
from tracekit.tables import integral, masked
from tracekit.topology import Topology

Finding = dict[str, Any]
Check = Callable[[pd.DataFrame, LintRule, RuleSet, "Topology | None", model.Run], list[Finding]]


def _paths(rule: LintRule, rules: RuleSet, key: str) -> set[str]:
    return set(rules.expand_paths(rule.param(key, ())))


def _units(comm: pd.DataFrame) -> pd.DataFrame:
    return comm.iloc[_unit_rows(comm)]


def _unit_rows(comm: pd.DataFrame) -> np.ndarray:
    """Positions of the unit rows, the first of each (rank, logical id) pair, in order: what
    ``drop_duplicates([RANK, LOGICAL_ID])`` of the unit rows keeps, in code space (integer
    ids where none is missing: no hashing)."""
    if F.UNIT not in comm:
        return np.zeros(0, dtype=np.int64)
    at = np.flatnonzero(comm[F.UNIT].astype(bool).to_numpy())
    ids = comm[S.LOGICAL_ID].to_numpy()[at]
    if ids.dtype.kind == "f" and not np.isnan(ids).any():
        whole = ids.astype(np.int64)
        ids = whole if (whole == ids).all() else ids
    return at[firsts.first_rows(row_codes(comm[S.RANK].to_numpy()[at], ids))]


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


def same_layer(comm: pd.DataFrame, rule: LintRule, rules: RuleSet, topo: Topology | None,
               run: model.Run) -> list[Finding]:
    """A path of ``paths`` ran in a layer that also ran one of ``with`` (same step, rank)."""
    reducing = _paths(rule, rules, "paths")
    post = _paths(rule, rules, "with")
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
        evidence = (f"step {int(step)}: {n_post} collectives on {', '.join(sorted(post))} and "
                    f"{len(part)} {path} collectives on ranks {ranks}")
        out.append(_finding(rule, layer, ranks, rule.param("group"), str(path), evidence))
    return out


def group_in_slot(comm: pd.DataFrame, rule: LintRule, rules: RuleSet, topo: Topology | None,
                  run: model.Run) -> list[Finding]:
    """An ``op`` on ``group`` filled one of ``paths`` in the given ``attn_tp`` case (the
    attention output all-reduced over the whole TP group while 1 < attn_tp < tp)."""
    case = rule.param("attn_tp")
    if topo is None or (case is not None and topo.config.attn_tp_case != case):
        return []
    paths = _paths(rule, rules, "paths")
    group = rule.param("group")
    units = _units(comm)
    bad = units[units[S.PATH].isin(paths) & (units[S.GROUP] == group)
                & (units[F.LOGICAL_OP] == rule.param("op"))]
    out: list[Finding] = []
    for (step, layer), part in bad.groupby(_layer_key(bad), sort=True, dropna=False):
        ranks = sorted(set(part[S.RANK]))
        members = topo.group_of(ranks[0], group) or ()
        evidence = (f"step {int(step)}: {len(part)} {rule.param('op')} on {group} "
                    f"{list(members)} in the slot of {', '.join(sorted(set(part[S.PATH])))}")
        out.append(_finding(rule, layer, ranks, group, rule.param("report_path"), evidence,
                            members=list(members), attn_tp=topo.config.attn_tp,
                            tp=topo.config.tp))
    return out


_NOT_STATED = (None, "auto")


def _condition_holds(cond: Any, topo: Topology) -> bool:
    c = topo.config
    for key, allowed in cond if isinstance(cond, FrozenMap) else ():
        if key == "attn_tp":
            value: Any = c.attn_tp_case
        elif key == "dp_attention":
            value = c.attn_dp > 1
        else:
            value = c.expected(key)
        options = allowed if isinstance(allowed, tuple) else (allowed,)
        if value not in options:
            return False
    return True


def _implied(want: Any, rules: RuleSet, topo: Topology) -> set[str] | None:
    """The paths one config value implies: a list of paths, or options with ``if``."""
    items = want if isinstance(want, tuple) else (want,)
    if items and all(isinstance(i, FrozenMap) for i in items):
        hit = next((i for i in items if _condition_holds(i.get("if"), topo)), None)
        return None if hit is None else set(rules.expand_paths(hit.get("paths", ())))
    return set(rules.expand_paths(tuple(str(i) for i in items)))


def expected_paths(topo: Topology, rule: LintRule | None = None,
                   rules: RuleSet | None = None) -> dict[str, set[str] | None]:
    """Per family, the paths the config's switches imply (None: not stated or a value the
    lint does not list, so not checked: an unknown spelling must never raise a finding)."""
    from tracekit.rules.loader import packaged_rules

    rules = rules if rules is not None else packaged_rules()
    if rule is None:
        rule = next(r for r in rules.lints if r.check == "config_paths")
    expect = rule.param("expect") or FrozenMap()
    out: dict[str, set[str] | None] = {}
    for family in rule.param("families", ()):
        value = topo.config.expected(family)
        by_value = expect.get(family)
        want = None if value in _NOT_STATED or not isinstance(by_value, FrozenMap) else (
            by_value.get(str(value)))
        out[family] = None if want is None else _implied(want, rules, topo)
    return out


def family_members(rule: LintRule, rules: RuleSet) -> dict[str, tuple[str, ...]]:
    """The path labels of each family the lint checks."""
    return {family: rules.family_paths(family) for family in rule.param("families", ())}


def config_paths(comm: pd.DataFrame, rule: LintRule, rules: RuleSet, topo: Topology | None,
                 run: model.Run) -> list[Finding]:
    """The paths observed in a layer differ from what the config's switches imply."""
    if topo is None or not topo.config.expect:
        return []
    expected = expected_paths(topo, rule, rules)
    families = family_members(rule, rules)
    at_most = set(rule.param("at_most", ()))
    units = _units(comm)
    units = units[units[S.LAYER].notna()]
    if units.empty:
        return []
    layers = _LayerRows(units, sorted({p for m in families.values() for p in m}))
    out: list[Finding] = []
    for code, (step, layer) in enumerate(layers.keys):
        seen = layers.seen.get(code, frozenset())
        for family, members in families.items():
            want = expected.get(family)
            if want is None:
                continue
            got = seen & set(members)
            ok = got <= want and (bool(got) or not want) if family in at_most else got == want
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

    def __init__(self, units: pd.DataFrame, family_paths: list[str]) -> None:
        grouped = units.groupby(_layer_key(units), sort=True)
        self.keys = list(grouped.size().index)
        codes = grouped.ngroup().to_numpy()
        self.order = np.argsort(codes, kind="stable")
        self.bounds = np.searchsorted(codes[self.order], np.arange(len(self.keys) + 1))
        self.paths = units[S.PATH].astype(object).to_numpy()
        self.rank_values = units[S.RANK].to_numpy()
        known = units[S.PATH].isin(family_paths).to_numpy()
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


def participants(comm: pd.DataFrame, rule: LintRule, rules: RuleSet, topo: Topology | None,
                 run: model.Run) -> list[Finding]:
    """The k-th collective of a communicator must run on every loaded member rank."""
    units = _units(comm)
    units = units[units[S.GROUP].notna()].sort_values([S.RANK, F.ORDER_TS, S.TS_NS], kind="stable")
    if units.empty:
        return []
    loaded = set(run.ranks) or set(units[S.RANK])
    codes, communicators = _communicators(units, topo)
    units = units.assign(**{F.MEMBERS_KEY: codes})
    units = units[units[F.MEMBERS_KEY] >= 0]
    order = units.groupby([S.RANK, S.GROUP, F.MEMBERS_KEY]).cumcount()
    units = units.assign(**{F.K_IN_GROUP: order})
    out: list[Finding] = []
    # codes number the member lists in their sorted order: the groups come in (group, list) order
    for (group, code), part in units.groupby([S.GROUP, F.MEMBERS_KEY], sort=True):
        members = communicators[code]
        want = set(members) & loaded
        if len(want) < 2:
            continue
        k_of = part[F.K_IN_GROUP].to_numpy(dtype=np.int64)
        ranks = part[S.RANK].to_numpy(dtype=np.int64)
        # per k: its distinct ranks must be exactly ``want``
        pairs = _pairs(k_of, ranks)
        ks, start = np.unique(pairs[:, 0], return_index=True)
        inside = np.isin(pairs[:, 1], list(want))
        n_in = np.add.reduceat(inside.astype(np.int64), start)
        n_out = np.add.reduceat((~inside).astype(np.int64), start)
        bad = ks[(n_out > 0) | (n_in != len(want))]
        if not len(bad):
            continue
        k = int(bad[0])
        observed = sorted(set(pairs[pairs[:, 0] == k, 1].tolist()))
        ops = part.loc[part[F.K_IN_GROUP] == k, F.LOGICAL_OP].astype(str).unique().tolist()
        evidence = (f"{len(bad)} of {len(ks)} {group} collectives on {list(members)} have "
                    f"other participants; first #{k}: ranks {observed}")
        out.append(_finding(rule, None, observed, str(group), None, evidence,
                            index=k, op="/".join(ops), observed=observed,
                            members=sorted(want)))
    return out


def _pairs(k_of: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """``np.unique(np.stack([k_of, ranks], axis=1), axis=0)`` (k >= 0) as one integer key."""
    low = int(ranks.min())
    width = int(ranks.max()) - low + 1
    key = k_of * width + (ranks - low)
    span = int(key.max()) + 1
    if span <= 4 * key.size + 1024:  # a dense range: the present keys in order, no sort
        present = np.zeros(span, dtype=bool)
        present[key] = True
        key = np.flatnonzero(present).astype(np.int64, copy=False)
    else:
        key = np.unique(key)
    return np.stack([key // width, key % width + low], axis=1)


def _communicators(units: pd.DataFrame,
                   topo: Topology | None) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Each unit's communicator, its sorted member ranks from its own pg_ranks, else the
    topology's group: (a code per unit, -1 where neither says; the member lists, in sorted
    order, that the codes number). Each distinct value is looked at once."""
    own, distinct = _own_ranks(units)
    lists = [tuple(sorted(ranks)) for ranks in distinct]
    rest = np.flatnonzero(own < 0)
    topo_lists: list[tuple[int, ...] | None] = []
    if topo is not None and len(rest):
        pairs = units[[S.RANK, S.GROUP]].iloc[rest]  # the two columns, then the rows
        pair_codes = row_codes(pairs[S.RANK], pairs[S.GROUP])
        reps = pairs.iloc[firsts.first_rows(pair_codes)]
        for rank, group in zip(reps[S.RANK].tolist(), reps[S.GROUP].tolist(), strict=True):
            m = topo.group_of(int(rank), group)
            topo_lists.append(tuple(sorted(m)) if m else None)
    ordered = sorted({*lists, *(m for m in topo_lists if m is not None)})
    number = {m: i for i, m in enumerate(ordered)}
    out = np.append(np.array([number[m] for m in lists], dtype=np.int64), -1)[own]
    if topo_lists:
        by_pair = np.array([-1 if m is None else number[m] for m in topo_lists], dtype=np.int64)
        out[rest] = by_pair[pair_codes]
    return out, ordered


def _own_ranks(units: pd.DataFrame) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """PG_RANKS of each unit coded (-1 where missing or empty) and the distinct lists the
    codes number: from the codes ``units_frame`` made, else from the lists."""
    if F.RANKS_CODE not in units:
        own = tuple_key_series(units[S.PG_RANKS]).to_numpy()  # None where missing or empty
        codes, distinct = pd.factorize(own)
        return codes.astype(np.int64), list(distinct)
    codes = units[F.RANKS_CODE].to_numpy(dtype=np.int64)
    present = np.flatnonzero(codes >= 0)
    _, first, dense = np.unique(codes[present], return_index=True, return_inverse=True)
    lists = units[S.PG_RANKS].to_numpy()[present[first]]
    out = np.full(len(codes), -1, dtype=np.int64)
    out[present] = dense.reshape(-1)
    return out, [tuple(m) for m in lists.tolist()]


CHECKS: dict[str, Check] = {
    "same_layer": same_layer,
    "group_in_slot": group_in_slot,
    "config_paths": config_paths,
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
    ranks attributed apart concatenate into the table of the ranks attributed together.
    Built column by column at the unit rows, straight into the schema's Arrow types: text
    dictionary-encoded from its codes, whole floats as integers (no string array encoded
    again, no checked cast)."""
    at = _unit_rows(comm)
    if not len(at):
        return S.empty(S.COLLECTIVE_UNITS)
    table = pa.table({out: _unit_column(comm[col].to_numpy(), at,
                                        S.COLLECTIVE_UNITS.field(out).type)
                      for col, out in _UNIT_COLUMNS if col in comm})
    return S.conform(table, S.COLLECTIVE_UNITS)


def _unit_column(values: np.ndarray, at: np.ndarray, kind: pa.DataType) -> pa.Array:
    """``values`` at the positions ``at`` as an array of ``kind`` (what ``pa.array(...,
    from_pandas=True)`` cast to ``kind`` gives)."""
    taken_values = np.take(values, at)
    if pa.types.is_dictionary(kind) and taken_values.dtype == object:
        # Arrow's dictionary_encode: distinct values in order of first appearance
        codes, uniques = factorize(taken_values)
        return pa.DictionaryArray.from_arrays(
            masked(codes.astype(np.int32), codes < 0, kind.index_type),
            pa.array(np.asarray(uniques, dtype=object), kind.value_type))
    if pa.types.is_integer(kind) and taken_values.dtype.kind == "f":
        return integral(taken_values, kind)
    if pa.types.is_integer(kind) and taken_values.dtype.kind in "iu":
        return pa.array(taken_values.astype(kind.to_pandas_dtype(), copy=False), kind)
    return pa.array(taken_values, from_pandas=True)


def units_frame(units: pa.Table) -> pd.DataFrame:
    """COLLECTIVE_UNITS back as the frame the checks read."""
    from tracekit.tables import to_pandas

    lists = S.PG_RANKS in units.column_names
    frame = to_pandas(units.drop_columns([S.PG_RANKS]) if lists else units)
    if lists:  # coded in Arrow: no array, no tuple per row; one shared tuple per list
        codes, distinct = list_codes(units.column(S.PG_RANKS))
        frame[S.PG_RANKS] = spread([*distinct, None], codes, frame.index)
        frame[F.RANKS_CODE] = codes
        frame = frame[[*units.column_names, F.RANKS_CODE]]
    frame = frame.rename(columns={out: col for col, out in _UNIT_COLUMNS if out != col})
    frame[F.UNIT] = True
    return frame


def run_lints(units: pa.Table, rules: RuleSet, topo: Topology | None,
              run: model.Run) -> pa.Table:
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
        rows.extend(check(comm, rule, rules, topo, run))
    if not rows:
        return S.empty(S.FINDINGS)
    table = pa.Table.from_pylist(rows)
    return S.conform(table, S.FINDINGS)
