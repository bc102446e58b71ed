"""The pure summary frames every reporter shares: coarsest PHASES rows, no double counting."""

from __future__ import annotations

import math

import pyarrow.compute as pc
import pytest

from tracekit import api, tables
from tracekit import schema as s
from tracekit.api import Analysis
from tracekit.reports import frames
from tracekit.rules.labels import PathLabel


def test_phase_totals_use_the_all_rank_rows_once(analysis):
    # GIVEN PHASES with per-layer, per-rank and all-rank rows
    # WHEN phase totals are taken THEN communication time equals MEASURED's (no double count)
    totals = frames.phase_totals(analysis)
    measured_ns = pc.sum(analysis.measured.column(s.DUR_NS)).as_py()
    assert totals[s.COMM_NS].sum() == measured_ns
    assert list(totals[s.PHASE]) == [p for p in s.Phase.ALL if p in set(totals[s.PHASE])]


def test_phase_totals_fall_back_to_measured_without_phases(analysis):
    # GIVEN an analysis without PHASES WHEN totals are taken THEN MEASURED gives the comm time
    bare = Analysis(run=analysis.run, measured=analysis.measured)
    totals = frames.phase_totals(bare)
    assert totals[s.COMM_NS].sum() == pc.sum(analysis.measured.column(s.DUR_NS)).as_py()
    assert totals[s.COMPUTE_NS].isna().all()


def test_run_totals_define_exposure_over_busy_time(analysis):
    # GIVEN phase totals WHEN run totals are derived THEN exposed % = exposed / busy
    t = frames.run_totals(frames.phase_totals(analysis))
    busy = t[s.COMPUTE_NS] + t[s.FUSED_NS] + t[s.MEMCPY_NS] + t[s.EXPOSED_NS]
    assert math.isclose(t[frames.EXPOSED_COMM_PCT], 100 * t[s.EXPOSED_NS] / busy)
    bounded = frames.phase_totals(analysis)
    bounded = bounded[bounded[s.BOUND_NS] > 0]
    assert math.isclose(t[s.EFFICIENCY], bounded[s.BOUND_NS].sum() / bounded[s.TRANSFER_NS].sum())


def test_a_phase_without_a_bound_does_not_dilute_the_efficiency():
    # GIVEN a bounded phase at 0.5 and a long barrier phase with no bound
    import pandas as pd

    phases = pd.DataFrame({s.PHASE: [s.Phase.COMBINE, s.Phase.OTHER],
                           s.TRANSFER_NS: [100.0, 1e9], s.BOUND_NS: [50.0, 0.0]})
    # WHEN run totals are derived THEN the efficiency is the bounded phase's
    assert frames.run_totals(phases)[s.EFFICIENCY] == 0.5
    # and with no bound anywhere there is no efficiency, not 0
    assert frames.run_totals(phases.assign(**{s.BOUND_NS: 0.0}))[s.EFFICIENCY] is None


def test_path_totals_group_by_path_and_group(analysis):
    # GIVEN the DPA + DeepEP run WHEN paths are summed THEN each path has its communicator
    paths = frames.path_totals(analysis)
    pairs = set(zip(paths[s.PATH], paths[s.GROUP], strict=True))
    assert (PathLabel.ATTN_TP, s.Group.ATTN_TP) in pairs
    assert (PathLabel.DEEPEP_NORMAL_DISPATCH, s.Group.MOE_EP) in pairs
    assert (PathLabel.OTHER, s.Group.TP) in pairs
    assert paths[s.COUNT].sum() == analysis.measured.num_rows


def test_everything_degrades_to_empty_frames_with_events_only(events_only):
    # GIVEN a run with EVENTS only WHEN frames are taken THEN they are empty, not errors, and
    # the EVENTS overviews still have rows
    assert frames.phase_totals(events_only).empty
    assert frames.path_totals(events_only).empty
    assert frames.findings(events_only).empty
    assert sum(frames.attribution_counts(events_only).values()) == 0
    assert len(frames.comm_events(events_only)) == 4
    assert list(frames.events_overview(events_only)[s.RANK]) == list(range(8))


def test_findings_sorted_by_severity_and_mapped_to_phases(analysis):
    # GIVEN findings of three severities WHEN listed THEN errors first, each with its phase
    f = frames.findings(analysis)
    assert list(f[s.SEVERITY]) == ["error", "warning", "info"]
    assert list(f[s.PHASE]) == [s.Phase.ATTENTION_REDUCE, s.Phase.DISPATCH, s.Phase.OTHER]


def test_a_collective_without_a_bound_does_not_dilute_its_phase(analysis):
    # GIVEN the attention all-reduces of layer 0 measured without a bound (no size), the
    # rest of the phase with one
    import pyarrow as pa

    m = analysis.measured
    layer0 = pc.and_(pc.equal(m.column(s.PHASE).cast(pa.string()), s.Phase.ATTENTION_REDUCE),
                     pc.equal(m.column(s.LAYER), 0))
    bound = pc.if_else(layer0, pa.scalar(None, m.schema.field(s.BOUND_NS).type),
                       m.column(s.BOUND_NS))
    cut = m.set_column(m.schema.get_field_index(s.BOUND_NS), s.BOUND_NS, bound)
    bare = Analysis(run=analysis.run, measured=cut, phases_table=analysis.phases_table)
    # WHEN phase totals are taken THEN the phase's eff is over the bounded collectives only:
    # the MEASURED rows of the phase that have both a bound and a transfer
    rows = cut.filter(pc.and_(pc.equal(cut.column(s.PHASE).cast(pa.string()),
                                       s.Phase.ATTENTION_REDUCE), pc.is_valid(bound)))
    expected = (pc.sum(rows.column(s.BOUND_NS)).as_py()
                / pc.sum(rows.column(s.TRANSFER_NS)).as_py())
    got = frames.phase_totals(bare).set_index(s.PHASE).loc[s.Phase.ATTENTION_REDUCE]
    assert math.isclose(got[s.EFFICIENCY], expected)
    # AND it equals the path table's eff (one source for both)
    paths = frames.path_totals(bare)
    path = paths[paths[s.PHASE] == s.Phase.ATTENTION_REDUCE].iloc[0]
    assert math.isclose(path[s.EFFICIENCY], expected)


def test_collective_counts_are_the_issued_collectives(tmp_path) -> None:
    # GIVEN a GPU-shaped run whose ReduceScatterV is one reduce kernel per rank (8 kernels a
    # collective) and the ground truth of what each rank issued
    import json

    from tracekit.cli import main

    run = tmp_path / "run"
    with pytest.raises(SystemExit):
        main(["synth", "--out", str(run), "--tp", "8", "--dp", "8", "--enable-dp-attention",
              "--ep", "8", "--steps", "1", "--layers", "1"])
    issued = sum(len(json.loads(f.read_text())["collectives"])
                 for f in run.glob("rank*.sidecar.json"))
    # WHEN analysed THEN the headline's collectives are those issued, once each
    analysis = api.analyze(run, api.LoadOptions(), api.AnalyzeOptions(hardware="h200"))
    assert sum(frames.attribution_counts(analysis).values()) == issued
    kernels = analysis.attributed.filter(analysis.attributed.column(s.IS_INSTANCE))
    assert kernels.num_rows > issued  # the kernels are more: counting them would disagree


def test_shared_computes_the_sums_once_and_hands_out_copies(analysis, monkeypatch):
    # GIVEN the phase totals' reader counted
    calls = []
    real = frames.to_frame

    def counting(table, columns=()):
        if table is analysis.phases_table:
            calls.append(1)
        return real(table, columns)

    monkeypatch.setattr(frames, "to_frame", counting)
    want = frames.phase_totals(analysis)
    assert len(calls) == 1
    # WHEN the totals are read three times inside shared() and one copy is changed
    with frames.shared():
        first = frames.phase_totals(analysis)
        first[s.COUNT] = -1
        second, third = frames.phase_totals(analysis), frames.phase_totals(analysis)
    # THEN PHASES was read once for the three, each caller got the same unchanged figures,
    # and outside shared() every call reads again
    assert len(calls) == 2
    assert second.equals(want) and third.equals(want)
    frames.phase_totals(analysis)
    assert len(calls) == 3


def _counts_by_pandas(analysis: Analysis) -> dict[str, int]:
    """attribution_counts as the decoded statuses' value counts give it."""
    counts = dict.fromkeys(s.Status.ALL, 0)
    for status, n in frames._instance_statuses(analysis).fillna(
            s.Status.UNATTRIBUTED).value_counts().items():
        counts[str(status)] = int(n)
    return counts


def _with_status(analysis: Analysis, status: list[str | None], dictionary: bool) -> Analysis:
    import pyarrow as pa

    a = analysis.attributed
    column = pa.array(status, pa.string())
    column = column.dictionary_encode() if dictionary else column
    table = a.set_column(a.schema.get_field_index(s.STATUS), s.STATUS, column)
    return Analysis(run=analysis.run, attributed=table, measured=analysis.measured)


@pytest.mark.parametrize("statuses, dictionary", [
    (None, True),  # the run's own statuses
    ([s.Status.AMBIGUOUS, None, s.Status.ATTRIBUTED], True),  # nulls read as unattributed
    ([s.Status.AMBIGUOUS, None, s.Status.ATTRIBUTED], False),  # plain strings
    (["odd", s.Status.ATTRIBUTED, None], True),  # a status of no known kind
])
def test_attribution_counts_equal_the_decoded_statuses_counts(analysis, statuses, dictionary):
    # GIVEN ATTRIBUTED with statuses of each kind, cycled over its rows
    a = analysis if statuses is None else _with_status(
        analysis, [statuses[i % len(statuses)] for i in range(analysis.attributed.num_rows)],
        dictionary)
    # WHEN counted THEN as the decoded statuses' value counts, keys in the same order
    got = frames.attribution_counts(a)
    assert list(got.items()) == list(_counts_by_pandas(a).items())
    assert sum(got.values()) == sum(_counts_by_pandas(analysis).values())


def test_events_overview_equals_pandas_groupby_with_or_without_nulls(events_only):
    import pyarrow as pa

    from tracekit.reports import digest

    assert not any(k.startswith(digest.PREFIX) for k in events_only.run.extra)  # computed
    events = events_only.run.events
    dur = events.column(s.DUR_NS).to_pylist()
    holed = events.set_column(events.schema.get_field_index(s.DUR_NS), s.DUR_NS,
                              pa.array([None if i % 7 == 0 else v for i, v in enumerate(dur)],
                                       events.schema.field(s.DUR_NS).type))
    by_rank = sorted((events.filter(pc.equal(events.column(s.RANK), r))
                      for r in pc.unique(events.column(s.RANK)).to_pylist()),
                     key=lambda t: -t.num_rows)  # ranks out of order
    halves = [part for t in by_rank for part in (t.slice(0, t.num_rows // 2),
                                                 t.slice(t.num_rows // 2))]
    split = pa.Table.from_batches(
        [b for part in halves[1::2] + halves[::2] for b in part.combine_chunks().to_batches()])
    mixed = events.combine_chunks()  # one chunk of every rank
    assert tables.rank_chunks(split, "end") is not None  # per-chunk sums
    assert tables.rank_chunks(mixed, "end") is None  # every row grouped
    for table in (events, holed, split, mixed):
        # GIVEN EVENTS (with durations missing in the second; a rank's rows in two chunks
        # apart in the third; all ranks in one chunk in the last) WHEN overviewed
        got = frames.events_overview(Analysis(run=dataclass_replace(events_only.run, table)))
        # THEN as pandas' group by rank of the decoded rows gives it
        e = table.select([s.RANK, s.TS_NS, s.DUR_NS]).to_pandas()
        e["end"] = e[s.TS_NS] + e[s.DUR_NS]
        e["k"] = (table.column(s.KIND).cast(pa.string()).to_numpy(zero_copy_only=False)
                  == s.Kind.KERNEL).astype(int)
        g = e.groupby(s.RANK, sort=True)
        assert list(got[s.RANK]) == list(g.size().index)
        assert list(got[s.COUNT]) == list(g.size())
        assert list(got[frames.KERNELS]) == list(g["k"].sum())
        assert list(got[frames.SPAN_NS]) == list(g["end"].max() - g[s.TS_NS].min())
        assert got[frames.SPAN_NS].dtype == (g["end"].max() - g[s.TS_NS].min()).dtype


def dataclass_replace(run, events):
    """``run`` with other EVENTS."""
    import dataclasses

    return dataclasses.replace(run, events=events)


@pytest.mark.parametrize("keys, among", [
    ([1, 4, 9, 12], [9, 1, 9, 5, 12, 12, 12, 0, 13]),  # increasing keys: the lookup reversed
    ([9, 1, 4, 1], [1, 1, 4, 7]),  # keys in any order, repeated
    ([3], [3, 3, 2]),
    ([2, 5], []),
])
def test_times_in_counts_each_key_in_among(keys, among):
    import numpy as np

    got = frames._times_in(np.array(keys, np.int64), np.array(among, np.int64))
    assert got.dtype == np.int64
    assert got.tolist() == [among.count(k) for k in keys]


def test_the_reports_shared_lines_are_computed_once_inside_shared(analysis, monkeypatch):
    # GIVEN the readers behind the coverage lines, the efficiency note and the run totals
    # counted
    calls: list[str] = []
    real_frame, real_totals, real_rows = frames.to_frame, frames.run_totals, frames.coverage_rows

    def counting_frame(table, columns=()):
        calls.append("status" if list(columns) == [s.BOUND_STATUS] else "other")
        return real_frame(table, columns)

    def counting_totals(phases):
        calls.append("totals")
        return real_totals(phases)

    def counting_rows(a):
        calls.append("coverage")
        return real_rows(a)

    monkeypatch.setattr(frames, "to_frame", counting_frame)
    monkeypatch.setattr(frames, "run_totals", counting_totals)
    monkeypatch.setattr(frames, "coverage_rows", counting_rows)
    want = (frames.coverage_run(analysis), frames.communicators(analysis),
            frames.why_no_efficiency(analysis), frames.phase_run_totals(analysis))
    assert calls.count("coverage") == 2 and calls.count("status") == 1  # outside: each call
    # WHEN each is read three times inside shared() (one copy changed)
    calls.clear()
    with frames.shared():
        got = [(frames.coverage_run(analysis), frames.communicators(analysis),
                frames.why_no_efficiency(analysis), frames.phase_run_totals(analysis))
               for _ in range(3)]
        got[0][3][s.COMM_NS] = -1.0
    # THEN the coverage rows, the bound statuses and the totals were read once each for
    # the run line and the communicators, the same figures every time
    assert calls.count("coverage") == 2 and calls.count("status") == 1
    assert calls.count("totals") == 1
    for run, comms, why, totals in got[1:]:
        assert run == want[0] and comms.equals(want[1]) and why == want[2]
        assert totals == want[3]


def test_path_totals_in_arrow_equal_the_pandas_grouping(analysis):
    import pyarrow as pa

    # GIVEN MEASURED with a missing path, op and wait here and there, a bound on few rows
    m = analysis.measured

    def holed(table, column, every):
        col = table.column(column)
        plain = col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col
        values = [None if i % every == 0 else v for i, v in enumerate(plain.to_pylist())]
        return table.set_column(table.schema.get_field_index(column), column,
                                pa.array(values, plain.type))

    for column, every in ((s.PATH, 7), (s.OP, 5), (s.WAIT_NS, 3), (s.BOUND_NS, 2)):
        m = holed(m, column, every)
    # WHEN summed in Arrow, and by pandas (a key column as large strings takes that way)
    fast = frames.path_totals(Analysis(run=analysis.run, measured=m))
    group = m.column(s.GROUP)
    plain = group.cast(group.type.value_type) if pa.types.is_dictionary(group.type) else group
    slow_m = m.set_column(m.schema.get_field_index(s.GROUP), s.GROUP,
                          plain.cast(pa.large_string()))
    assert frames._path_sums(slow_m) is None
    slow = frames.path_totals(Analysis(run=analysis.run, measured=slow_m))
    # THEN the same rows in the same order, dtypes too
    assert len(fast) > 2 and "" in set(fast[s.PATH])
    assert fast.equals(slow) and list(fast.dtypes) == list(slow.dtypes)


@pytest.mark.parametrize("bound_every", [2, 1])  # some bounds missing; none at all
def test_phase_efficiency_in_arrow_equals_the_pandas_sums(analysis, bound_every):
    import pyarrow as pa

    # GIVEN MEASURED with bounds missing (on every row in the second case)
    m = analysis.measured
    bound = [None if i % bound_every == 0 else v
             for i, v in enumerate(m.column(s.BOUND_NS).to_pylist())]
    m = m.set_column(m.schema.get_field_index(s.BOUND_NS), s.BOUND_NS,
                     pa.array(bound, m.schema.field(s.BOUND_NS).type))
    fast = frames.phase_totals(Analysis(run=analysis.run, measured=m,
                                        phases_table=analysis.phases_table))
    # WHEN the phase totals' efficiency is summed in Arrow, and by pandas (the phase as
    # large strings takes that way)
    phase = m.column(s.PHASE)
    plain = phase.cast(phase.type.value_type) if pa.types.is_dictionary(phase.type) else phase
    slow_m = m.set_column(m.schema.get_field_index(s.PHASE), s.PHASE,
                          plain.cast(pa.large_string()))
    assert frames._bounded_sums(slow_m) is None and frames._bounded_sums(m) is not None
    slow = frames.phase_totals(Analysis(run=analysis.run, measured=slow_m,
                                        phases_table=analysis.phases_table))
    # THEN the same totals and efficiencies
    assert fast.equals(slow)
    assert fast[s.EFFICIENCY].notna().any() == (bound_every == 2)


def test_kernel_rows_once_per_table_inside_shared(events_only, monkeypatch):
    # GIVEN EVENTS and a count of the kind lookups
    events = events_only.run.events
    want = frames.codes(events, s.KIND, (s.Kind.KERNEL,)) == 0
    calls = []
    real = frames.codes
    monkeypatch.setattr(frames, "codes", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    with frames.shared():
        # WHEN asked twice inside shared() THEN the kind is looked up once, each caller
        # getting its own copy (changing one leaves the next as it was)
        first = frames.kernel_rows(events)
        first[:] = False
        second = frames.kernel_rows(events)
    assert calls == [s.KIND]
    assert second.tolist() == want.tolist() and want.any()
    # outside shared() every call looks it up
    assert frames.kernel_rows(events).tolist() == want.tolist() and calls == [s.KIND] * 2
