"""All-to-all(v): C[i][j] from split sizes, imbalance, two link classes, time lost."""

from __future__ import annotations

import numpy as np
import pytest

from tracekit import api, schema
from tracekit.measure import measure_run
from tracekit.measure.hardware import load_profile
from tracekit.schema import KernelClass, Kind, Op

# rows per destination (group order) each rank sends; 1 row = 1000 bytes
SPLITS = {
    0: [1, 1, 1, 3],
    1: [1, 0, 1, 3],
    2: [0, 1, 0, 3],
    3: [1, 0, 0, 5],
}
ROW = 1000


def _a2a_rows(members: list[int], transfer: int = 200_000) -> list[dict]:
    rows = []
    for pos, r in enumerate(members):
        send = SPLITS[pos]
        recv = [SPLITS[src][pos] for src in range(4)]
        rows.append({
            schema.RANK: r, schema.PID: r, schema.TID: 3, schema.DEVICE: 0,
            schema.TS_NS: 1_000, schema.DUR_NS: transfer + 10 * pos, schema.KIND: Kind.KERNEL,
            schema.KERNEL_CLASS: KernelClass.COMM, schema.IS_INSTANCE: True,
            schema.OP: Op.ALL_TO_ALLV, schema.NAME: "alltoallv", schema.GROUP: "MOE_EP",
            schema.PHASE: "dispatch", schema.LAYER: 3, schema.PG_RANKS: members,
            schema.GROUP_SIZE: 4, schema.IN_SPLIT: send, schema.OUT_SPLIT: recv,
            schema.IN_BYTES: sum(send) * ROW, schema.OUT_BYTES: sum(recv) * ROW,
        })
    return rows


def test_skewed_matrix_single_link_class(attributed_builder, run_builder) -> None:
    """GIVEN a 4-rank all-to-allv on one H200 node where everyone sends rank 3 the most
    WHEN measuring
    THEN C[i][j] = split x 1000 B; off-diagonal sends are 5000, 5000, 4000, 1000 and receives
    2000, 2000, 2000, 9000 bytes, so D = max(send, recv) per rank = 5000, 5000, 4000, 9000:
    max 9000, mean 5750, imbalance 1.565; bound = alpha (7.2 us) + 9000 / 370; lost to imbalance =
    3250 / 370 ns; lost to under-used links = transfer - bound; nccl-tests S = 14,000 (rank 3
    receives 3 + 3 + 3 rows plus its own 5)."""
    t = attributed_builder(_a2a_rows([0, 1, 2, 3]))
    a = measure_run(run_builder(t), t, api.AnalyzeOptions(hardware="h200"))
    matrix = {(r[schema.SRC_RANK], r[schema.DST_RANK]): r for r in
              a.tables["a2a_matrix"].to_pylist()}
    for src in range(4):
        for dst in range(4):
            assert matrix[(src, dst)][schema.MSG_BYTES] == SPLITS[src][dst] * ROW
    assert matrix[(3, 3)][schema.LINK_CLASS] == "local"
    assert matrix[(0, 3)][schema.LINK_CLASS] == "nvlink4"
    (row,) = a.tables["a2a"].to_pylist()
    alpha = 7_200.0  # NCCL ring model: 6.6 us + 1 step x 0.6 us (all-to-all runs as p2p)
    nvlink = load_profile("h200").intra_link
    assert nvlink.alpha_ns([Op.ALL_TO_ALLV], [4])[0] == pytest.approx(alpha)
    assert (row[schema.SEND_BYTES], row[schema.RECV_BYTES]) == (5000, 9000)
    assert row[schema.MEAN_BYTES] == pytest.approx(5750)
    assert row[schema.IMBALANCE] == pytest.approx(9000 / 5750)
    assert row[schema.BOUND_NS] == round(alpha + 9000 / 370)
    assert row[schema.BALANCED_NS] == round(alpha + 5750 / 370)
    assert row[schema.LOST_IMBALANCE_NS] == round(3250 / 370)
    assert row[schema.TRANSFER_NS] == 200_000
    assert row[schema.LOST_LINKS_NS] == 200_000 - round(alpha + 9000 / 370)
    measured = a.measured.to_pylist()
    assert {m[schema.MSG_BYTES] for m in measured} == {14_000}
    assert {m[schema.BOUND_NS] for m in measured} == {round(alpha + 9000 / 370)}
    assert {m[schema.LINK_CLASS] for m in measured} == {"nvlink4"}


def test_two_link_classes(attributed_builder, run_builder) -> None:
    """GIVEN the same matrix with ranks 0, 1 on host a and 2, 3 on host b (H100 profile)
    WHEN measuring
    THEN bytes split by link class: NVLink carries 0<->1 and 2<->3, InfiniBand the rest;
    each class is bounded by its busiest rank over that class's bandwidth and alpha, and the
    instance bound is the larger one (the classes run concurrently)."""
    t = attributed_builder(_a2a_rows([0, 1, 2, 3]))
    run = run_builder(t, hosts={0: "a", 1: "a", 2: "b", 3: "b"})
    a = measure_run(run, t, api.AnalyzeOptions(hardware="h100"))
    rows = {r[schema.LINK_CLASS]: r for r in a.tables["a2a"].to_pylist()}
    c = np.array([SPLITS[i] for i in range(4)]) * ROW
    node = np.array([0, 0, 1, 1])
    same = node[:, None] == node[None, :]
    off = ~np.eye(4, dtype=bool)
    intra = np.where(same & off, c, 0)
    inter = np.where(~same, c, 0)
    prof = load_profile("h100")
    expect = {}
    for name, m, lc in (("nvlink4", intra, prof.intra_link), ("ib_ndr", inter, prof.inter_link)):
        d = np.maximum(m.sum(axis=1), m.sum(axis=0))
        assert rows[name][schema.SEND_BYTES] == m.sum(axis=1).max()
        assert rows[name][schema.RECV_BYTES] == m.sum(axis=0).max()
        assert rows[name][schema.IMBALANCE] == pytest.approx(d.max() / d.mean())
        alpha = lc.alpha_ns([Op.ALL_TO_ALLV], [4])[0]
        expect[name] = alpha + d.max() / lc.achievable_gbps
        assert rows[name][schema.BOUND_NS] == round(expect[name])
    top = max(expect, key=expect.__getitem__)
    assert top == "ib_ndr"
    assert {m[schema.LINK_CLASS] for m in a.measured.to_pylist()} == {top}
    assert {m[schema.BOUND_NS] for m in a.measured.to_pylist()} == {round(expect[top])}


def test_equal_split_all_to_all_without_splits(attributed_builder, run_builder) -> None:
    """GIVEN an equal all_to_all of 4000 B per rank with no split sizes
    WHEN measuring THEN each pair gets 1000 B and imbalance is 1."""
    rows = _a2a_rows([0, 1, 2, 3])
    for r in rows:
        r.update({schema.OP: Op.ALL_TO_ALL, schema.IN_SPLIT: None, schema.OUT_SPLIT: None,
                  schema.IN_BYTES: 4000, schema.OUT_BYTES: 4000})
    t = attributed_builder(rows)
    a = measure_run(run_builder(t), t, api.AnalyzeOptions(hardware="h200"))
    assert {r[schema.MSG_BYTES] for r in a.tables["a2a_matrix"].to_pylist()} == {1000}
    (row,) = a.tables["a2a"].to_pylist()
    assert row[schema.IMBALANCE] == pytest.approx(1.0)
    assert row[schema.SEND_BYTES] == 3000


def test_matrix_without_all_to_all_rows_is_the_empty_table() -> None:
    """GIVEN matched rows none of which is an all-to-all with members WHEN building the
    traffic matrices THEN the empty A2A_MATRIX table, schema and metadata included."""
    import numpy as np
    import pandas as pd

    from tracekit import schema
    from tracekit.measure import a2a

    matched = pd.DataFrame({schema.OP: ["all_reduce", "all_to_all"],
                            schema.PG_RANKS: [[0, 1], None]})
    got = a2a.matrices(matched, np.zeros(2, dtype=np.int64), None)
    assert got.equals(schema.empty(schema.A2A_MATRIX))
    assert got.schema.equals(schema.A2A_MATRIX, check_metadata=True)
