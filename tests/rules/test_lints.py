"""Lints into FINDINGS, on hand-built gloo-style runs (c10d op + runloop annotation)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tracekit import api
from tracekit import schema as S
from tracekit.rules.engine import attribute_run
from tracekit.rules.labels import PathLabel
from tracekit.schema import Kind
from tracekit.topology import ParallelConfig, Topology

RS_V = "reduce_scatterv (parallel_state.py:150) <- reduce_scatterv (dp_attention.py:130)"
TP_AR = "all_reduce (parallel_state.py:106) <- tensor_model_parallel_all_reduce (dp.py:60)"
GATHER_V = "all_gatherv (parallel_state.py:140) <- _dp_gather (dp_attention.py:80)"


def collectives(ranks: list[int], layers: list[list[tuple[str, str, str]]]) -> list[dict[str, Any]]:
    """Per rank: for each layer, each (c10d name, gloo name, call site) as a c10d op followed
    by its runloop annotation."""
    rows: list[dict[str, Any]] = []
    for rank in ranks:
        t = 0
        for layer in layers:
            for c10d, gloo, site in layer:
                op = {"c10d::allreduce_": "all_reduce", "c10d::reduce_": "reduce",
                      "c10d::broadcast_": "broadcast"}[c10d]
                rows.append({S.RANK: rank, S.NAME: c10d, S.KIND: Kind.CPU_OP, S.TID: 1,
                             S.TS_NS: t, S.DUR_NS: 100, S.OP: op, S.CALL_SITE: site})
                rows.append({S.RANK: rank, S.NAME: gloo, S.KIND: Kind.ANNOTATION, S.TID: 9,
                             S.TS_NS: t + 10, S.DUR_NS: 50, S.OP: op})
                t += 1000
    for i, row in enumerate(rows):
        row[S.EVENT_ID] = i
        row[S.PID] = 100 + row[S.RANK]
    return rows


def run_of(rows: list[dict[str, Any]]) -> api.Run:
    keys = sorted(set().union(*rows))  # from_pylist keeps only the first row's keys
    events = S.conform(pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows]),
                       S.EVENTS)
    ranks = sorted({r[S.RANK] for r in rows})
    info = S.conform(pa.table({S.RANK: pa.array(ranks, pa.int32())}), S.RANK_INFO)
    return api.Run(events=events, process_groups=S.empty(S.PROCESS_GROUPS), rank_info=info)


def findings(rows: list[dict[str, Any]], topo: Topology) -> list[dict[str, Any]]:
    _, table = attribute_run(run_of(rows), api.AnalyzeOptions(topology=topo))
    S.validate(table, S.FINDINGS)
    return table.to_pylist()


def layer_b(extra_ar: bool) -> list[tuple[str, str, str]]:
    gather = [("c10d::broadcast_", "gloo:broadcast", GATHER_V)] * 4
    post = [("c10d::allreduce_", "gloo:all_reduce", TP_AR)] if extra_ar else []
    return gather + post + [("c10d::reduce_", "gloo:reduce", RS_V)] * 4


TOPO_B = Topology(ParallelConfig(tp=4, dp=4, enable_dp_attention=True))


def test_double_reduction_is_an_error_per_layer() -> None:
    # GIVEN two layers of path B (all_gatherv, reduce_scatterv) where the post-expert
    # AllReduce also ran
    rows = collectives([0, 1, 2, 3], [layer_b(True), layer_b(True)])
    # WHEN the lints run
    found = [f for f in findings(rows, TOPO_B) if f[S.RULE_ID] == "double-reduction"]
    # THEN each layer has one error naming ReduceScatterV and every rank
    assert [f[S.LAYER] for f in found] == [0, 1]
    assert found[0][S.SEVERITY] == "error" and found[0][S.PATH] == PathLabel.COMBINE_B
    assert found[0][S.RANKS] == [0, 1, 2, 3]
    assert "counted twice" in found[0][S.MESSAGE]
    assert found[1][S.MESSAGE].startswith("layer 1:")  # an integer, not "1.0"


def test_clean_path_b_has_no_finding() -> None:
    # GIVEN the same run without the extra AllReduce THEN nothing is reported
    rows = collectives([0, 1, 2, 3], [layer_b(False), layer_b(False)])
    assert findings(rows, TOPO_B) == []


def test_attention_over_global_tp_is_flagged_only_when_attn_tp_is_between() -> None:
    # GIVEN layers whose first TP all-reduce sits in the attention slot, before the gather
    gather = ("c10d::allreduce_", "gloo:all_reduce",
              "all_reduce (ps.py:1) <- _dp_gather_via_all_reduce (dp.py:2)")
    layer = [("c10d::allreduce_", "gloo:all_reduce", TP_AR), gather,
             ("c10d::allreduce_", "gloo:all_reduce", TP_AR)]
    rows = collectives([0, 1, 2, 3], [layer, layer])
    # WHEN attn_tp = 2 < tp = 4 THEN an error per layer; WHEN attn_tp == tp... (no DPA)
    between = Topology(ParallelConfig(tp=4, dp=2, enable_dp_attention=True))
    found = [f for f in findings(rows, between) if f[S.RULE_ID] == "attention-global-tp-reduce"]
    assert [f[S.LAYER] for f in found] == [0, 1]
    assert "[0, 1, 2, 3]" in found[0][S.MESSAGE] and "attn_tp=2 < tp=4" in found[0][S.MESSAGE]
    plain = collectives([0, 1, 2, 3], [layer[::2], layer[::2]])
    assert findings(plain, Topology(ParallelConfig(tp=4))) == []


def test_missing_participant_is_flagged() -> None:
    # GIVEN rank 3 of a TP group issued one all-reduce fewer than ranks 0-2
    full = [("c10d::allreduce_", "gloo:all_reduce", TP_AR)] * 2
    rows = collectives([0, 1, 2], [full]) + collectives([3], [full[:1]])
    for i, row in enumerate(rows):
        row[S.EVENT_ID] = i
    # WHEN the lints run THEN the 2nd TP collective ran on 0-2 only
    found = [f for f in findings(rows, Topology(ParallelConfig(tp=4)))
             if f[S.RULE_ID] == "participants-mismatch"]
    assert len(found) == 1 and found[0][S.RANKS] == [0, 1, 2]
    assert "#1" in found[0][S.MESSAGE] and found[0][S.GROUP] == "TP"


def test_path_mismatch_needs_a_config_and_compares_switches() -> None:
    # GIVEN a config that says combine c, and traces that ran path B
    rows = collectives([0, 1, 2, 3], [layer_b(False)])
    said_c = Topology(ParallelConfig(tp=4, dp=4, enable_dp_attention=True,
                                     expect=(("combine", "c"), ("dp_gather", "gatherv"))))
    found = findings(rows, said_c)
    # THEN one warning: expected combine C, observed B; the gather matches
    assert [f[S.RULE_ID] for f in found] == ["path-mismatch"]
    assert found[0][S.SEVERITY] == "warning"
    assert "combine.c_reduce_scatter" in found[0][S.MESSAGE]
    assert "combine.b_reduce_scatterv" in found[0][S.MESSAGE]


def test_collective_units_equal_pyarrows_conversion_of_the_unit_rows() -> None:
    """The units table built column by column (codes, integral floats) against pyarrow's
    own conversion of the unit rows conformed to the schema."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from tracekit import schema as S
    from tracekit.rules import frame as F
    from tracekit.rules.lints import _UNIT_COLUMNS, _unit_rows, collective_units

    twin = "".join(["MOE", "_EP"])  # equal to "MOE_EP", another object
    comm = pd.DataFrame({
        S.RANK: np.array([0, 0, 0, 1, 1, 1], dtype=np.int32),
        S.LOGICAL_ID: [0.0, 0.0, 1.0, 0.0, np.nan, 2.0],
        S.TS_NS: np.arange(6, dtype=np.int64) * 10,
        F.ORDER_TS: np.arange(6, dtype=np.int64) * 10 + 1,
        F.STEP: [1.0, 1.0, np.nan, 2.0, 2.0, 2.0],
        S.LAYER: [0.0, 0.0, 1.0, np.nan, 3.0, 3.0],
        S.GROUP: pd.Series(["MOE_EP", "MOE_EP", None, twin, "TP", np.nan], dtype=object),
        S.PATH: pd.Series([None] * 6, dtype=object),
        F.LOGICAL_OP: pd.Series(["all_to_all", "x", "all_reduce", "all_to_all", None, "y"],
                                dtype=object),
        S.PG_RANKS: pd.Series([np.array([0, 1], dtype=np.int32), None, None, None,
                               np.array([0, 1], dtype=np.int32), None], dtype=object),
        F.UNIT: [True, True, True, True, True, False],
    })
    want = S.conform(pa.table({out: pa.array(comm[col].take(_unit_rows(comm)), from_pandas=True)
                               for col, out in _UNIT_COLUMNS}), S.COLLECTIVE_UNITS)
    got = collective_units(comm)
    assert got.schema == want.schema
    assert got.to_pylist() == want.to_pylist()
    assert got.column(S.GROUP).combine_chunks().dictionary.to_pylist() == ["MOE_EP", "TP"]


@pytest.mark.parametrize("k_spread", [50, 10**9])
def test_pairs_are_the_distinct_k_rank_rows(k_spread: int) -> None:
    """GIVEN (k, rank) rows with repeats, k in a narrow and in a wide range WHEN taking the
    distinct pairs THEN they are np.unique's rows over the stacked pairs, in sorted order."""
    import numpy as np

    from tracekit.rules.lints import _pairs

    rng = np.random.default_rng(5)
    k_of = rng.integers(0, k_spread, 400).astype(np.int64)
    ranks = rng.integers(3, 11, 400).astype(np.int64)
    want = np.unique(np.stack([k_of, ranks], axis=1), axis=0)
    got = _pairs(k_of, ranks)
    assert got.dtype == np.int64 and got.tolist() == want.tolist()
