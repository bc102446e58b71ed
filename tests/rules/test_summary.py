"""Per-group / per-path summaries that `tracekit analyze` prints (computed, not rendered)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tracekit import schema as S
from tracekit.rules import summary


def attributed(rows: list[dict[str, Any]]) -> pa.Table:
    base = {S.RANK: 0, S.EVENT_ID: 0, S.TS_NS: 0, S.DUR_NS: 100, S.IS_INSTANCE: True,
            S.STATUS: S.Status.ATTRIBUTED}
    full = [{**base, **r} for r in rows]
    keys = sorted(set().union(*full))  # from_pylist keeps only the first row's keys
    return S.conform(pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in full]),
                     S.ATTRIBUTED)


def test_counts_bytes_and_time_per_group_and_path() -> None:
    # GIVEN two ranks: a TP all-reduce each, a 4-kernel logical reduce_scatterv on rank 0,
    # an ambiguous all-gather and a CPU wrapper (not an instance)
    rows = [
        {S.RANK: r, S.EVENT_ID: 1, S.GROUP: "TP", S.PATH: "combine.a_allreduce",
         S.IN_BYTES: 1000, S.DUR_NS: 50} for r in (0, 1)
    ] + [
        {S.EVENT_ID: 10 + k, S.GROUP: "TP", S.PATH: "combine.b_reduce_scatterv",
         S.LOGICAL_ID: 7, S.IN_BYTES: 100, S.DUR_NS: 10} for k in range(4)
    ] + [
        {S.EVENT_ID: 20, S.STATUS: S.Status.AMBIGUOUS, S.IN_BYTES: 8, S.DUR_NS: 5},
        {S.EVENT_ID: 21, S.GROUP: "TP", S.IS_INSTANCE: False, S.IN_BYTES: 10**9},
    ]
    table = attributed(rows)
    # WHEN summarised
    groups = {r[S.GROUP]: r for r in summary.by_group(table).to_pylist()}
    paths = {r[S.PATH]: r for r in summary.by_path(table).to_pylist()}
    # THEN the logical collective counts once, wrappers never, ambiguity is counted apart
    assert (groups["TP"][S.COUNT], groups["TP"][S.MSG_BYTES], groups["TP"][S.COMM_NS]) == (
        3, 2400, 140)
    assert groups["TP"][S.N_RANKS] == 2
    assert groups[None][S.AMBIGUOUS_COUNT] == 1
    assert paths["combine.b_reduce_scatterv"][S.COUNT] == 1
    assert paths["combine.b_reduce_scatterv"][S.MSG_BYTES] == 400
    S.validate(summary.by_op(table), S.COMM_SUMMARY)


def test_findings_are_ordered_errors_first() -> None:
    # GIVEN a warning in layer 0 and an error in layer 1
    table = S.conform(pa.Table.from_pylist([
        {S.RULE_ID: "path-mismatch", S.SEVERITY: "warning", S.LAYER: 0},
        {S.RULE_ID: "double-reduction", S.SEVERITY: "error", S.LAYER: 1},
    ]), S.FINDINGS)
    # THEN the error comes first
    out = summary.findings_summary(table).column(S.RULE_ID).to_pylist()
    assert out == ["double-reduction", "path-mismatch"]
