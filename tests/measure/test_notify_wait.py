"""DeepEP notify kernels are synchronisation: their time is wait of the operation they prepare.

The traces are built from DeepEP's own kernel names (tests/rules/test_deepep.py lists where
each is copied from): intranode v1 (notify_dispatch, dispatch, cached_notify_combine,
combine) and DeepSeek's internode build (notify_dispatch, dispatch, cached_notify, combine).
notify_dispatch / cached_notify exchange the per-rank token counts and wait at a barrier
(csrc/kernels/intranode.cu, internode.cu), so a rank that arrives early spends the time in
them waiting for the others. Every expected figure below is computed from the planted
durations, never from tracekit's output.
"""

from __future__ import annotations

from typing import Any

import pytest
from rules.test_deepep import DPSK, EP_TOPO, INTRA, LAYOUT_DPSK, LAYOUT_V1
from rules.test_engine import kernel, make_run

from tracekit import api
from tracekit import schema as S
from tracekit.measure import format_phase_table, measure_run
from tracekit.rules.engine import attribute_run
from tracekit.schema import Phase

STREAM = 25
# planted durations (ns) per rank: layout, notify, dispatch, cached notify, combine; rank 1
# arrives late, so rank 0 waits in its notify kernels and the data kernels differ a little
DURS = {0: (3_001, 40_007, 120_011, 30_013, 150_017),
        1: (2_999, 5_003, 117_019, 4_001, 149_023)}
GAP = 1_000  # idle between kernels on the stream


def _rank_rows(names: list[str], rank: int, layers: int) -> list[dict[str, Any]]:
    rows, ts = [], 1_000_000
    for _ in range(layers):
        for name, dur in zip(names, DURS[rank], strict=True):
            rows.append(kernel(name, **{S.RANK: rank, S.TID: STREAM, S.DEVICE: 0,
                                        S.TS_NS: ts, S.DUR_NS: dur}))
            ts += dur + GAP
    return rows


def _analysis(k: dict[str, str], layout: str, layers: int = 2) -> api.Analysis:
    names = [layout, k["notify"], k["dispatch"], k["cached_notify"], k["combine"]]
    run = make_run(_rank_rows(names, 0, layers) + _rank_rows(names, 1, layers))
    options = api.AnalyzeOptions(topology=EP_TOPO, hardware="h200")
    attributed, _ = attribute_run(run, options)
    return measure_run(run, attributed, options)


@pytest.mark.parametrize(("k", "layout"), [(INTRA, LAYOUT_V1), (DPSK, LAYOUT_DPSK)],
                         ids=["intranode-v1", "internode-dpsk"])
def test_notify_time_is_wait_of_the_instance_it_prepares(k: dict[str, str], layout: str) -> None:
    # GIVEN two ranks, two layers of DeepEP normal mode each, with planted durations
    a = _analysis(k, layout)
    m = a.measured.to_pylist()
    # THEN MEASURED has one row per dispatch / combine per rank and layer: the notify kernels
    # are not rows of their own
    assert sorted(r[S.NAME] for r in m) == sorted([k["dispatch"], k["combine"]] * 4)
    for row in m:
        r = row[S.RANK]
        _, notify, dispatch, cached, combine = DURS[r]
        own, note = (dispatch, notify) if row[S.NAME] == k["dispatch"] else (combine, cached)
        others = [d[2] if row[S.NAME] == k["dispatch"] else d[4] for d in DURS.values()]
        # the duration and the transfer are the data kernel's only (min over the ranks) ...
        assert row[S.DUR_NS] == own
        assert row[S.TRANSFER_NS] == min(others)
        # ... and the notify kernel's time is this rank's wait of that same instance
        assert row[S.NOTIFY_NS] == note
        assert row[S.WAIT_NS] == own - min(others) + note
        assert row[S.TRANSFER_NS] + row[S.WAIT_NS] == row[S.DUR_NS] + row[S.NOTIFY_NS]
    # the two ranks' rows of one instance carry each rank's own notify time
    by_inst: dict[int, dict[int, int]] = {}
    for row in m:
        by_inst.setdefault(row[S.INSTANCE], {})[row[S.RANK]] = row[S.NOTIFY_NS]
    assert len(by_inst) == 4 and all(len(v) == 2 for v in by_inst.values())
    assert sorted(tuple(sorted(v.items())) for v in by_inst.values()) == sorted(
        [((0, DURS[0][1]), (1, DURS[1][1]))] * 2 + [((0, DURS[0][3]), (1, DURS[1][3]))] * 2)


def test_phases_count_notify_as_wait_and_keep_summing() -> None:
    # GIVEN the internode trace (cached_notify: the name does not say it prepares a combine)
    a = _analysis(DPSK, LAYOUT_DPSK)
    total = {r[S.PHASE]: r for r in a.phases_table.to_pylist()
             if r[S.RANK] is None and r[S.LAYER] is None}
    for phase, notify_i, data_i in ((Phase.DISPATCH, 1, 2), (Phase.COMBINE, 3, 4)):
        row = total[phase]
        layers = 2
        notify = layers * sum(d[notify_i] for d in DURS.values())
        data = layers * sum(d[data_i] for d in DURS.values())
        transfer = layers * len(DURS) * min(d[data_i] for d in DURS.values())
        # THEN the phase's wait holds all notify time, the transfer none of it
        assert row[S.NOTIFY_NS] == notify
        assert row[S.TRANSFER_NS] == transfer
        assert row[S.WAIT_NS] == data - transfer + notify
        # and the device time of the phase (notify + data kernels, no overlap on one stream)
        # is exactly transfer + wait
        assert row[S.COMM_NS] == notify + data == row[S.TRANSFER_NS] + row[S.WAIT_NS]
    text = format_phase_table(a.phases_table)
    assert "notify ms" in text.splitlines()[0]
    assert f"{layers * (DURS[0][3] + DURS[1][3]) / 1e6:.3f}" in text


def test_a_notify_kernel_that_prepares_nothing_is_no_ones_wait() -> None:
    # GIVEN a cached_notify on one stream and a combine on another (not what it prepares)
    rows = []
    for r in (0, 1):
        rows += [kernel(DPSK["cached_notify"], **{S.RANK: r, S.TID: 25, S.DEVICE: 0,
                                                  S.TS_NS: 0, S.DUR_NS: 7_000}),
                 kernel(DPSK["combine"], **{S.RANK: r, S.TID: 7, S.DEVICE: 0,
                                            S.TS_NS: 10_000, S.DUR_NS: 50_000 + r})]
    run = make_run(rows)
    options = api.AnalyzeOptions(topology=EP_TOPO)
    attributed, _ = attribute_run(run, options)
    m = measure_run(run, attributed, options).measured.to_pylist()
    # THEN the combine's wait is its own duration minus the transfer, nothing borrowed
    assert [r[S.NOTIFY_NS] for r in m] == [0, 0]
    assert sorted(r[S.WAIT_NS] for r in m) == [0, 1]
