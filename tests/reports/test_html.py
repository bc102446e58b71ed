"""The HTML report as a file: self-contained, every panel, escaped, small for big runs."""

from __future__ import annotations

import re

import pytest

from tracekit import reports
from tracekit import schema as s
from tracekit.reports import html as html_report
from tracekit.reports import plotframes

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
FULL_PANELS = ("summary", "legend", "timeline", "waterfall", "phases", "efficiency", "a2a",
               "findings", "paths")


def _panel_ids(html: str) -> list[str]:
    return re.findall(r'<section id="panel-([^"]+)"', html)


@pytest.fixture(scope="module")
def full_html(analysis) -> str:
    return reports.render("html", analysis)


def test_self_contained_no_external_scripts_or_styles(full_html):
    # GIVEN the report WHEN its tags are scanned THEN no script or stylesheet is fetched
    assert re.search(r"<script[^>]*\bsrc\s*=", full_html) is None
    assert re.search(r"<link[^>]*\bhref\s*=", full_html) is None
    markup = re.sub(r"<script[^>]*>.*?</script>", "", full_html, flags=re.S)  # tags, not JS
    assert re.search(r"""\b(src|href)\s*=\s*["']?(https?:)?//""", markup) is None
    assert "<img" not in markup and "<iframe" not in markup
    from tracekit.reports import bokehjs

    assert bokehjs.bokeh_js()[0] in full_html  # BokehJS itself, inline


def test_every_panel_in_order(full_html):
    # GIVEN a full analysis WHEN rendered THEN each panel is a section, in reading order
    ids = _panel_ids(full_html)
    assert [i for i in ids if i in FULL_PANELS] == list(FULL_PANELS)
    assert sum(i.startswith("table-") for i in ids) == 4  # a2a, a2a_matrix, fits, stragglers


@pytest.mark.parametrize("payload", [SCRIPT, IMG])
def test_trace_strings_are_escaped_everywhere(make_analysis, payload):
    # GIVEN a kernel, a thread and a finding carrying an XSS payload WHEN rendered
    html = reports.render("html", make_analysis(evil=payload))
    # THEN the raw payload never appears; the escaped form does (findings table)
    assert payload not in html
    assert "onerror=alert(1)>" not in html
    assert html.count("&lt;") > 0


def test_hover_tooltips_use_text_fields_only(analysis):
    # GIVEN the plots of a full report WHEN their hover tools are read
    panels = html_report.panels(analysis)
    tools = [tool for p in panels if p.plot is not None for tool in p.plot.select("HoverTool")]
    assert tools
    # THEN every tooltip is a (label, field) pair: BokehJS escapes those values; no HTML
    # template and no {safe} format that would insert a trace string as markup
    for tool in tools:
        assert isinstance(tool["tooltips"], list)
        for _label, value in tool["tooltips"]:
            assert re.fullmatch(r"@\{?[A-Za-z_0-9 ]+\}?(\{[^}]*\})?", value), value
            assert "safe" not in value
    timeline = next(p.plot for p in panels if p.key == "timeline")
    labels = {lab for t in timeline.select("HoverTool") for lab, _ in t["tooltips"]}
    assert {"op", "bytes", "group", "path", "efficiency", "wait"} <= labels


def test_events_only_run_renders_a_useful_page(events_only):
    # GIVEN EVENTS only WHEN rendered THEN summary, legend, timeline and event tables, no
    # measured panels
    ids = _panel_ids(reports.render("html", events_only))
    assert ids[:3] == ["summary", "legend", "timeline"]
    assert {"comm_events", "per_rank"} <= set(ids)
    assert not {"phases", "efficiency", "a2a", "findings"} & set(ids)


def test_sixty_four_ranks_stay_under_20_mb_and_say_they_were_cut(make_analysis):
    # GIVEN a 64-rank run with more collectives than the timeline draws
    big = make_analysis(n_ranks=64, layers=61, steps=2)
    assert big.measured.num_rows > plotframes.TIMELINE_MAX
    html = reports.render("html", big)
    # WHEN rendered THEN under 20 MB, and the timeline says it switched to binned occupancy
    assert len(html.encode()) < 20_000_000
    assert f"({big.measured.num_rows:,} of them communication)" in html
    assert "Device busy time per rank and kernel class" in html


def test_timeline_downsampling_keeps_an_equal_share_of_the_longest_per_rank(make_analysis):
    # GIVEN 8 ranks and a limit of 40 kernels WHEN the timeline frame is cut
    a = make_analysis()
    cut = plotframes.timeline(a, limit=40)
    # THEN 5 per rank are kept, each rank's longest
    assert cut.total == a.measured.num_rows and cut.shown == 40
    assert cut.frame.groupby(s.RANK).size().eq(5).all()
    full = plotframes.timeline(a).frame
    dur = full[plotframes.X1] - full[plotframes.X0]
    ordered = full.assign(d=dur).sort_values("d", ascending=False, kind="stable")
    longest = ordered.groupby(s.RANK).head(5)
    assert sorted(longest[plotframes.X0].round(9)) == sorted(cut.frame[plotframes.X0].round(9))


def test_panel_keys_are_identifiers(analysis):
    # GIVEN extra tables named by another stage WHEN panels are built THEN keys stay safe ids
    for p in html_report.panels(analysis):
        assert re.fullmatch(html_report._PANEL_RE.strip("^$"), p.key)


def test_occupancy_keeps_every_kernels_busy_time(analysis):
    # GIVEN the fixture's device kernels (no two of one class overlap on a rank)
    from tracekit.reports import frames
    from tracekit.reports import plotframes_agg as agg

    occ = agg.occupancy(analysis, bins=50)
    ev = frames.to_frame(analysis.run.events, [s.RANK, s.KIND, s.KERNEL_CLASS, s.DUR_NS])
    ev = ev[ev[s.KIND] == s.Kind.KERNEL]
    want = ev.groupby([s.RANK, s.KERNEL_CLASS])[s.DUR_NS].sum() / 1e6
    # WHEN the binned shares are summed back (share = height / 0.8, times the bin width)
    f = occ.frame
    got = ((f[plotframes.Y1] - f[plotframes.Y0]) / 0.8 * (f[plotframes.X1] - f[plotframes.X0]))
    got = got.groupby([f[s.RANK], f[s.KERNEL_CLASS]]).sum()
    # THEN each rank's busy time per class is what its kernels add up to
    assert occ.kernels == len(ev)
    for key, ms in want.items():
        assert abs(got[key] - ms) < 1e-6 * max(1.0, ms), key


def test_waterfall_lays_each_layers_phases_end_to_end(analysis):
    # GIVEN the fixture's PHASES per layer WHEN the waterfall frame is built
    from tracekit.reports import frames
    from tracekit.reports import plotframes_agg as agg

    wf = agg.waterfall(analysis)
    ph = frames.to_frame(analysis.phases_table)
    ph = ph[ph[s.RANK].notna() & ph[s.LAYER].notna()]
    per_rank = (ph[s.COMPUTE_NS] + ph[s.FUSED_NS] + ph[s.COMM_NS]).groupby(ph[s.LAYER]).sum()
    n = analysis.run.rank_info.num_rows
    # THEN each layer ends at its mean per-rank time, segments touch, and every bound tick
    # sits inside the phase it bounds (after the phase's compute)
    for layer, total_ns in per_rank.items():
        rows = wf[wf[s.LAYER] == layer]
        assert abs(rows[agg.END_MS].max() - total_ns / n / 1e6) < 1e-6
        assert (rows[agg.START_MS].to_numpy()[1:] - rows[agg.END_MS].to_numpy()[:-1]).max() < 1e-9
    b = agg.waterfall_bounds(wf)
    assert len(b) == 3 * 3  # 3 layers x (attention reduce, dispatch, combine)
    assert b[agg.BOUND_MS].notna().all()


def test_efficiency_groups_count_every_collective(analysis):
    # GIVEN 8 ranks x 3 layers x 3 collectives + 1 all-gather, each with an efficiency
    from tracekit.reports import plotframes_agg as agg

    g = agg.efficiency_groups(analysis)
    # THEN the markers' counts add up to every MEASURED row and no marker is outside its range
    assert int(g[agg.N].sum()) == analysis.measured.num_rows
    assert (g[agg.EFF_MIN] <= g[agg.EFF_MED]).all() and (g[agg.EFF_MED] <= g[agg.EFF_MAX]).all()


def test_no_efficiency_says_why(make_analysis):
    # GIVEN a run whose collectives carry no message size (DeepEP kernels outside c10d)
    import pyarrow as pa
    import pyarrow.compute as pc

    a = make_analysis()
    m = a.measured
    for col in (s.MSG_BYTES, s.BOUND_NS, s.EFFICIENCY):
        i = m.column_names.index(col)
        m = m.set_column(i, col, pa.nulls(m.num_rows, m.schema.field(col).type))
    a.measured = m
    html = reports.render("html", a)
    # THEN the efficiency panel is there and explains the missing sizes with counts
    assert "panel-efficiency" in html
    assert f"{m.num_rows:,} of {m.num_rows:,} collective rows carry no message size" in html
    assert pc.sum(pc.is_null(m.column(s.EFFICIENCY))).as_py() == m.num_rows


def test_coverage_slot_plugs_in_when_the_table_is_there(make_analysis):
    # GIVEN a COVERAGE result table (as the coverage stage adds it) WHEN rendered
    import pyarrow as pa

    from tracekit import schema

    a = make_analysis()
    a.extra_tables.pop("coverage", None)
    assert html_report.coverage_panel(a) is None
    rows = [{schema.SCOPE: schema.Scope.RUN, schema.GROUP_SIZE: 4, schema.RANKS_PRESENT: 4,
             schema.RANKS_ABSENT: 0, schema.COUNT: 2},
            {schema.SCOPE: schema.Scope.COMMUNICATOR, schema.GROUP: "TP", schema.PG_NAME: SCRIPT,
             schema.MEMBERS: [0, 1, 2, 3], schema.GROUP_SIZE: 4, schema.RANKS_PRESENT: 4,
             schema.RANKS_ABSENT: 0, schema.COUNT: 2}]
    a.extra_tables["coverage"] = schema.conform(pa.Table.from_pylist(rows), schema.COVERAGE)
    html = reports.render("html", a)
    assert SCRIPT not in html  # the trace's group name is data: escaped
    ids = _panel_ids(html)
    # THEN it is the panel right after the summary, and not repeated as a raw table
    assert ids[:2] == ["summary", "coverage"]
    assert not any(i.startswith("table-") and "coverage" in i for i in ids)


def test_tables_show_times_since_the_trace_start(make_analysis):
    # GIVEN a result table with absolute timestamps (ns since the epoch)
    import pyarrow as pa

    from tracekit.reports import html_tables, views

    a = make_analysis()
    t0 = plotframes.trace_start_ns(a)
    df = pa.table({s.TS_NS: [t0 + 1_500_000], s.DUR_NS: [2_000]}).to_pandas()
    table = html_tables.data_table(views.Section("x", "x", df, tuple(df.columns)), "x", t0)
    heads = re.findall(r"<th([^>]*)>([^<]*)</th>", table)
    cells = re.findall(r'<td class="num" data-v="([^"]*)">([^<]*)</td>', table)
    # THEN the cell is 1.5 ms since the start, the heading says so, and both columns sort
    # as numbers (by the value, not the text)
    assert cells[0] == ("1.5", "1.500")
    assert heads[0][1].endswith("since trace start (ms)")
    assert all('data-type="num"' in attrs for attrs, _ in heads)
    assert 'id="tracekit_x_filter"' in table and 'id="tracekit_x_grid"' in table


def test_a2a_heatmap_has_integer_rank_ticks(analysis):
    # GIVEN the all-to-all panel WHEN its heatmap axes are read
    plot = next(p.plot for p in html_report.panels(analysis) if p.key == "a2a")
    tickers = plot.select("FixedTicker")
    # THEN the rank axes tick at whole ranks 0..7
    assert any(list(t["ticks"]) == list(range(8)) for t in tickers)


def test_a_page_without_plots_is_written_without_bokeh(events_only):
    # GIVEN EVENTS with no device kernel (nothing for any plot to draw)
    import dataclasses

    import pyarrow.compute as pc

    from tracekit.model import Analysis

    ev = events_only.run.events
    run = dataclasses.replace(events_only.run,
                              events=ev.filter(pc.not_equal(ev.column(s.KIND), s.Kind.KERNEL)))
    a = Analysis(run=run)
    assert not any(p.plot is not None for p in html_report.panels(a))
    # WHEN rendered THEN a full page of escaped sections and tables, with no bokeh code
    html = reports.render("html", a)
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert _panel_ids(html)[:2] == ["summary", "legend"]
    assert "per_rank" in _panel_ids(html) and 'id="tracekit_per_rank_grid"' in html
    assert "bokeh" not in html.lower()


def test_the_page_models_pass_bokeh_validation(analysis, bokeh_oracle, caplog):
    # GIVEN the plots of a full report as bokeh models (the page is written without bokeh)
    import logging

    from bokeh.core.validation.check import check_integrity
    from bokeh.document import Document

    doc = Document()
    for root in bokeh_oracle.to_bokeh([r for p in html_report.panels(analysis)
                                       for r in p.roots]):
        doc.add_root(root)
    # WHEN bokeh checks their integrity THEN it finds no error and no warning
    with caplog.at_level(logging.WARNING, logger="bokeh"):
        issues = check_integrity(list(doc.models))
    assert not issues.error and not issues.warning, issues
    assert not [r for r in caplog.records if r.name.startswith("bokeh")]


def test_table_cells_as_pandas_formats_them_with_missing_values():
    import math

    import numpy as np
    import pandas as pd

    from tracekit.reports import html_tables, views

    # GIVEN a section of every kind of column, each with a missing value, in a frame whose
    # index is not 0..n-1
    frame = pd.DataFrame({
        s.DUR_NS: pd.array([1_500_000, None, 3], dtype="Int64"),
        s.WAIT_NS: [2.5e6, np.nan, 0.0],
        s.MSG_BYTES: [1024.0, np.nan, 3.0],
        s.EFFICIENCY: [0.5, np.nan, 1.25],
        s.COUNT: pd.array([1, None, 3000], dtype="Int64"),
        s.RANK: [0, 1, 2],
        s.IS_INSTANCE: pd.array([True, None, False], dtype="boolean"),
        s.OP: ["all_reduce", None, "<x>"],
    }, index=[5, 9, 2])
    section = views.Section("t", "T", frame, tuple(frame.columns), headers={})
    html = html_tables.data_table(section, "t")
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html)
    values = re.findall(r'data-v="([^"]*)"', html)
    # THEN each row's cells, in order, as pandas' float and integer values format
    want_cells, want_values = [], []
    for i in range(3):
        ms = [frame[c].astype(float).iloc[i] / 1e6 for c in (s.DUR_NS, s.WAIT_NS)]
        floats = [frame[s.MSG_BYTES].astype(float).iloc[i], frame[s.EFFICIENCY].iloc[i]]
        numbers = [*ms, *floats]
        texts = [html_tables._number(ms[0], 3), html_tables._number(ms[1], 3),
                 html_tables._number(floats[0], 0),
                 html_tables._number(floats[1], 3, optional=True)]
        count = frame[s.COUNT].iloc[i]
        want_cells += [*texts, "-" if pd.isna(count) else f"{int(count):,}",
                       f"{frame[s.RANK].iloc[i]:,}",
                       "-" if pd.isna(frame[s.IS_INSTANCE].iloc[i]) else
                       ("true" if frame[s.IS_INSTANCE].iloc[i] else "false"),
                       "-" if pd.isna(frame[s.OP].iloc[i]) else
                       frame[s.OP].iloc[i].replace("<", "&lt;").replace(">", "&gt;")]
        want_values += [repr(float(x)) if math.isfinite(x) else "" for x in numbers]
        want_values += ["" if pd.isna(count) else str(int(count)), str(frame[s.RANK].iloc[i])]
    assert cells == want_cells
    assert values == want_values
    assert "-" in cells and "1.500" in cells and "3,000" in cells
