"""measure_run end to end on a hand-made 2-rank GPU run: MEASURED, PHASES and the text table."""

from __future__ import annotations

import pytest

from tracekit import api, schema
from tracekit.measure import format_phase_table, measure_run
from tracekit.measure.hardware import load_profile
from tracekit.rules.labels import PathLabel
from tracekit.schema import KernelClass, Kind, Op, Phase

K = KernelClass
S_BYTES = 64 * 2**20


def _rows() -> list[dict]:
    rows = []
    for r in (0, 1):
        base = {schema.RANK: r, schema.PID: 0, schema.DEVICE: 0, schema.KIND: Kind.KERNEL}
        rows.append(base | {schema.TID: 7, schema.TS_NS: 0, schema.DUR_NS: 400_000,
                            schema.NAME: "gemm", schema.KERNEL_CLASS: K.COMPUTE,
                            schema.PHASE: Phase.EXPERTS, schema.LAYER: 0})
        rows.append(base | {schema.TID: 20, schema.TS_NS: 300_000 + 50_000 * r,
                            schema.DUR_NS: 500_000 - 50_000 * r,
                            schema.NAME: "ncclDevKernel_AllReduce", schema.KERNEL_CLASS: K.COMM,
                            schema.IS_INSTANCE: True, schema.OP: Op.ALL_REDUCE,
                            schema.IN_BYTES: S_BYTES, schema.OUT_BYTES: S_BYTES,
                            schema.GROUP_SIZE: 2, schema.PG_RANKS: [0, 1], schema.GROUP: "TP",
                            schema.PATH: PathLabel.NO_DPA_MOE_AR, schema.PHASE: Phase.COMBINE,
                            schema.LAYER: 0})
    return rows


def test_measured_row_by_hand(attributed_builder, run_builder) -> None:
    """GIVEN a 64 MiB AllReduce on 2 H200 ranks: rank 0 [300,800) us, rank 1 [350,800) us,
    and a GEMM [0,400) us on each
    WHEN measuring with the h200 profile
    THEN transfer = 450 us; wait = 50 and 0 us; S = 67,108,864 B; algbw = S / 450 us;
    busbw = algbw x 2(2-1)/2; bound = alpha + S / 475 GB/s (NVLS busbw beats 370), alpha =
    min(15 us, NCCL ring model 6.6 + 2(n-1) x 0.6 us = 7.8 us);
    efficiency = bound / transfer; exposed = 400 us on each (the GEMM covers [300,400)
    and [350,400) of them)."""
    t = attributed_builder(_rows())
    a = measure_run(run_builder(t), t, api.AnalyzeOptions(hardware="h200"))
    rows = sorted(a.measured.to_pylist(), key=lambda r: r[schema.RANK])
    nvls = load_profile("h200").intra_link.nvls_gbps
    bound = 7_800 + 1.0 * S_BYTES / nvls
    for row, wait, exposed in zip(rows, (50_000, 0), (400_000, 400_000), strict=True):
        assert row[schema.TRANSFER_NS] == 450_000 and row[schema.WAIT_NS] == wait
        assert row[schema.MSG_BYTES] == S_BYTES and row[schema.N_RANKS] == 2
        assert row[schema.ALGBW_GBPS] == pytest.approx(S_BYTES / 450_000)
        assert row[schema.BUSBW_GBPS] == pytest.approx(S_BYTES / 450_000)
        assert row[schema.BOUND_NS] == round(bound)
        assert row[schema.EFFICIENCY] == pytest.approx(bound / 450_000)
        assert row[schema.EXPOSED_NS] == exposed
        assert row[schema.LINK_CLASS] == "nvlink4"
    assert a.info["hardware"]["name"] == "h200"


def test_phases_rows_and_text(attributed_builder, run_builder) -> None:
    """GIVEN the same run WHEN measuring THEN PHASES has per-rank per-layer rows, per-rank
    totals and all-rank totals; the combine total sums both ranks (bytes 2 S, transfer 900 us,
    wait 50 us, exposed 800 us, communication 950 us) and the experts phase holds the
    compute; the text table lists phases in pipeline order with the efficiency in percent."""
    t = attributed_builder(_rows())
    a = measure_run(run_builder(t), t, api.AnalyzeOptions(hardware="h200"))
    p = a.phases_table.to_pylist()
    total = {r[schema.PHASE]: r for r in p if r[schema.RANK] is None}
    comb = total[Phase.COMBINE]
    assert (comb[schema.COUNT], comb[schema.MSG_BYTES]) == (2, 2 * S_BYTES)
    assert (comb[schema.TRANSFER_NS], comb[schema.WAIT_NS]) == (900_000, 50_000)
    assert comb[schema.EXPOSED_NS] == 800_000 and comb[schema.COMM_NS] == 950_000
    assert total[Phase.EXPERTS][schema.COMPUTE_NS] == 800_000
    per_layer = [r for r in p if r[schema.RANK] == 0 and r[schema.LAYER] == 0]
    assert {r[schema.PHASE] for r in per_layer} == {Phase.COMBINE, Phase.EXPERTS}
    text = format_phase_table(a.phases_table)
    lines = text.splitlines()
    assert lines[0].split()[0] == "phase"
    assert [ln.split()[0] for ln in lines[1:]] == [Phase.EXPERTS, Phase.COMBINE]
    assert f"{100 * comb[schema.EFFICIENCY]:.1f}%" in text


def test_without_profile_no_bounds(attributed_builder, run_builder) -> None:
    """GIVEN no --hardware WHEN measuring THEN times, waits and busbw are there but no bound,
    efficiency or link class (nothing is guessed), and the text shows '-'."""
    t = attributed_builder(_rows())
    a = measure_run(run_builder(t), t, api.AnalyzeOptions())
    for row in a.measured.to_pylist():
        assert row[schema.BOUND_NS] is None and row[schema.EFFICIENCY] is None
        assert row[schema.LINK_CLASS] is None and row[schema.BUSBW_GBPS] is not None
    assert a.info["hardware"] is None
    assert a.tables["fits"].num_rows == 1
    schema.validate(a.measured, schema.MEASURED)
    schema.validate(a.phases_table, schema.PHASES)
    for name, table in (("time_classes", schema.TIME_CLASSES), ("a2a", schema.A2A),
                        ("a2a_matrix", schema.A2A_MATRIX), ("fits", schema.FITS),
                        ("stragglers", schema.STRAGGLERS)):
        schema.validate(a.tables[name], table)
    schema.validate(a.findings_table, schema.FINDINGS)


def test_empty_run(attributed_builder, run_builder) -> None:
    """GIVEN a trace with no collectives WHEN measuring THEN empty, valid tables."""
    t = attributed_builder([{schema.RANK: 0, schema.PID: 0, schema.TID: 1, schema.TS_NS: 0,
                             schema.DUR_NS: 10, schema.KIND: Kind.CPU_OP, schema.NAME: "x"}])
    a = measure_run(run_builder(t), t, api.AnalyzeOptions(hardware="cpu-gloo"))
    assert a.measured.num_rows == 0
    schema.validate(a.measured, schema.MEASURED)
    assert "phase" in format_phase_table(a.phases_table)


def test_latency_bound_flag(attributed_builder, run_builder) -> None:
    """GIVEN the 64 MiB AllReduce (bandwidth term 141 us >> alpha 7.8 us) and a 1 KiB one
    (1 KiB / 475 GB/s = 2 ns << alpha) WHEN measuring THEN only the small one is flagged
    latency-bound."""
    rows = _rows()
    for r in (0, 1):
        small = dict(rows[2 * r + 1])
        small.update({schema.TS_NS: 2_000_000, schema.DUR_NS: 20_000, schema.IN_BYTES: 1024,
                      schema.OUT_BYTES: 1024})
        rows.append(small)
    t = attributed_builder(rows)
    a = measure_run(run_builder(t), t, api.AnalyzeOptions(hardware="h200"))
    flags = {(r[schema.MSG_BYTES], r[schema.LATENCY_BOUND]) for r in a.measured.to_pylist()}
    assert flags == {(S_BYTES, False), (1024, True)}
