"""The terminal report: plain when not a terminal, rich colour on one, markup never parsed."""

from __future__ import annotations

from tracekit import reports

ESC = "\x1b["


def test_plain_text_is_deterministic_and_has_no_escape_codes(make_analysis):
    # GIVEN the same input twice WHEN rendered without colour THEN identical, no ANSI codes
    first = reports.render("text", make_analysis(), color=False)
    assert first == reports.render("text", make_analysis(), color=False)
    assert ESC not in first
    assert all(len(line) <= 132 for line in first.splitlines())


def test_colour_mode_uses_escape_codes(analysis):
    # GIVEN a terminal WHEN rendered with colour THEN the output has ANSI styling
    assert ESC in reports.render("text", analysis, color=True, width=140)


def test_report_shows_phases_paths_and_findings(analysis):
    # GIVEN a full analysis WHEN rendered THEN each section and key figure is present
    out = reports.render("text", analysis, color=False)
    for needle in ("Time per phase", "attention_reduce", "deepep.normal.dispatch", "ATTN_TP",
                   "MOE_EP", "Findings", "a2a-imbalance", "efficiency (bound / transfer)",
                   "Table stragglers"):
        assert needle in out, needle


def test_rich_markup_in_trace_strings_is_printed_literally(make_analysis):
    # GIVEN a kernel and a finding carrying rich markup
    hostile = "[bold red]boom[/bold red] [link=http://x]y[/link]"
    a = make_analysis(evil=hostile)
    # WHEN rendered, with and without colour THEN the markup shows as written
    for color in (False, True):
        out = reports.render("text", a, color=color, width=400)
        assert "[bold red]boom[/bold red]" in out
        assert "\x1b]8;" not in out  # no terminal hyperlink was created


def test_events_only_text_report_lists_communication_kernels(events_only):
    # GIVEN EVENTS only WHEN rendered THEN it shows the kernels by op and group description
    out = reports.render("text", events_only, color=False)
    assert "Communication kernels in the trace" in out
    assert "moe_ep" in out and "Events per rank" in out
