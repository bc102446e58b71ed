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
FULL_PANELS = ("summary", "legend", "timeline", "phases", "efficiency", "a2a", "findings",
               "paths")


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
    assert "Bokeh.set_log_level" in full_html and "BEGIN bokeh.min.js" in full_html


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
    from bokeh.models import HoverTool

    tools = [tool for p in html_report.panels(analysis) if p.plot is not None
             for tool in p.plot.select({"type": HoverTool})]
    assert tools
    # THEN every tooltip is a (label, field) pair: bokeh escapes those values; no HTML
    # template and no {safe} format that would insert a trace string as markup
    for tool in tools:
        assert isinstance(tool.tooltips, list)
        for _label, value in tool.tooltips:
            assert re.fullmatch(r"@\{?[A-Za-z_0-9 ]+\}?(\{[^}]*\})?", value), value
            assert "safe" not in value
    timeline = next(p.plot for p in html_report.panels(analysis) if p.key == "timeline")
    labels = {lab for t in timeline.select({"type": HoverTool}) for lab, _ in t.tooltips}
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
    # WHEN rendered THEN under 20 MB, and the timeline says how many kernels it kept
    assert len(html.encode()) < 20_000_000
    assert f"longest of {big.measured.num_rows:,} kernels" in html


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
