"""The engine's fast paths give exactly what the plain pandas formulation gives.

The engine replaces per-group pandas work (``groupby(...).agg(tuple)``, a frame slice per
(step, layer) in the path-mismatch lint) with numpy over group codes; these tests hold the
fast code to a straightforward reference on data with the awkward cases (missing values,
groups of equal length, layers with and without the checked paths).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tracekit import api
from tracekit import schema as S
from tracekit.rules import frame as F
from tracekit.rules.grouping import grouped_tuples
from tracekit.rules.labels import PathLabel
from tracekit.rules.lints import _finding, config_paths, expected_paths, family_members
from tracekit.rules.loader import load_rules
from tracekit.rules.model import LintRule
from tracekit.topology import ParallelConfig, Topology


def test_grouped_tuples_equals_pandas_aggregation() -> None:
    # GIVEN values with missing entries, in groups of equal and unequal length, unsorted codes
    rng = np.random.default_rng(7)
    for size in (1, 5, 40, 300):
        codes = pd.Series(rng.integers(0, max(1, size // 3), size))
        values = pd.Series(rng.choice(["a", "b", None, "c"], size), dtype="str")
        # WHEN both formulations group them
        fast = grouped_tuples(values, codes)
        slow = values.groupby(codes).agg(tuple)
        # THEN the same tuples in the same order, under the same group index
        assert fast.index.equals(slow.index)
        assert [tuple(map(str, t)) for t in fast] == [tuple(map(str, t)) for t in slow]


def test_grouped_tuples_keeps_equal_tuples_one_dimensional() -> None:
    # GIVEN two groups of two (path, slots) items each: numpy would stack these into 2-D
    items = pd.Series([(None, ("x",)), ("p", ()), (None, ("x",)), ("p", ())], dtype=object)
    # WHEN grouped
    out = grouped_tuples(items, np.array([1, 0, 1, 0]))
    # THEN one tuple of items per group
    assert out.tolist() == [(("p", ()), ("p", ())), ((None, ("x",)), (None, ("x",)))]


def _reference_path_mismatch(comm: pd.DataFrame, rule: LintRule,
                             topo: Topology) -> list[dict[str, Any]]:
    """The lint written plainly: one frame slice per (step, layer)."""
    rules = load_rules()
    expected = expected_paths(topo, rule, rules)
    at_most = set(rule.param("at_most", ()))
    units = comm[comm[F.UNIT].astype(bool)].drop_duplicates([S.RANK, S.LOGICAL_ID])
    units = units[units[S.LAYER].notna()]
    out = []
    for (step, layer), part in units.groupby([units[F.STEP].fillna(-1), units[S.LAYER]],
                                             sort=True):
        seen = set(part[S.PATH].dropna())
        for family, members in family_members(rule, rules).items():
            want = expected.get(family)
            if want is None:
                continue
            got = seen & set(members)
            ok = got <= want and (bool(got) or not want) if family in at_most else got == want
            if ok:
                continue
            ranks = sorted(set(part.loc[part[S.PATH].isin(members), S.RANK])) or sorted(
                set(part[S.RANK]))
            evidence = (f"step {int(step)}: config {family}={topo.config.expected(family)}; "
                        f"observed {sorted(got) or 'none'} on ranks {ranks}")
            out.append(_finding(rule, layer, ranks, None, ",".join(sorted(got)) or None,
                                evidence, expected=sorted(want) or "none", phase=family,
                                observed=sorted(got) or "none"))
    return out


def test_path_mismatch_equals_per_layer_reference() -> None:
    # GIVEN units over 3 ranks, 2 steps and 3 layers: gathers right, wrong, missing, and rows
    # without a layer or a path
    rng = np.random.default_rng(3)
    paths = [PathLabel.GATHER_V, PathLabel.GATHER_AG, PathLabel.COMBINE_B, None,
             PathLabel.COMBINE_A]
    n = 240
    comm = pd.DataFrame({
        S.RANK: rng.integers(0, 3, n), S.LOGICAL_ID: np.arange(n),
        F.UNIT: rng.random(n) < 0.9, F.STEP: rng.choice([0.0, 1.0, np.nan], n),
        S.LAYER: rng.choice([0.0, 1.0, 2.0, np.nan], n),
        S.PATH: pd.Series(rng.choice(np.array(paths, dtype=object), n), dtype=object),
    })
    topo = Topology(ParallelConfig(tp=4, dp=4, enable_dp_attention=True,
                                   expect=(("dp_gather", "gatherv"), ("combine", "b"))))
    rules = load_rules()
    rule = next(r for r in rules.lints if r.check == "config_paths")
    run = api.Run(S.empty(S.EVENTS), S.empty(S.PROCESS_GROUPS), S.empty(S.RANK_INFO))
    # WHEN the lint runs
    fast = config_paths(comm, rule, rules, topo, run)
    # THEN the same findings, in the same order, as the per-layer reference
    assert fast
    assert fast == _reference_path_mismatch(comm, rule, topo)
