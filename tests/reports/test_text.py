"""The terminal report: plain when not a terminal, rich colour on one, markup never parsed."""

from __future__ import annotations

import re

import pytest

from tracekit import reports
from tracekit import schema as s
from tracekit.reports import fmt, text

ESC = "\x1b["


def test_plain_text_is_deterministic_and_has_no_escape_codes(make_analysis):
    # GIVEN the same input twice WHEN rendered without colour THEN identical, no ANSI codes
    first = reports.render("text", make_analysis(), color=False)
    assert first == reports.render("text", make_analysis(), color=False)
    assert ESC not in first
    assert all(len(line) <= text.DEFAULT_WIDTH for line in first.splitlines())


def test_colour_mode_uses_escape_codes(analysis):
    # GIVEN a terminal WHEN rendered with colour THEN the output has ANSI styling
    assert ESC in reports.render("text", analysis, color=True, width=140)


def test_report_shows_phases_paths_and_findings(analysis):
    # GIVEN a full analysis WHEN rendered THEN each section and key figure is present
    out = reports.render("text", analysis, color=False)
    for needle in ("Time per phase", "attention_reduce", "deepep.normal.dispatch", "ATTN_TP",
                   "MOE_EP", "Findings", "a2a-imbalance", "efficiency", "Table stragglers"):
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


def _table_header(out: str, title: str) -> str:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    return lines[start + 1]


@pytest.mark.parametrize("width", [80, 120])
def test_every_line_fits_the_width_and_eff_is_kept(make_analysis, width):
    # GIVEN a 16-rank run with long path labels (deepep.normal.dispatch, attn_reduce.attn_tp)
    out = reports.render("text", make_analysis(n_ranks=16), color=False, width=width,
                         verbose=True)
    # WHEN rendered at WIDTH columns THEN no line is longer, and the phase and path tables of
    # the first screen keep their eff column (labels wrap instead)
    assert max(len(line) for line in out.splitlines()) <= width
    for title in ("Time per phase, slowest first", "Collectives per path and group, slowest"):
        assert re.search(r"(^| )eff( |$)", _table_header(out, title)), title
    assert "…" not in out  # nothing was cut with an ellipsis


def test_headline_comes_first_within_one_screen(make_analysis):
    # GIVEN a 16-rank run WHEN rendered at 80 columns
    lines = reports.render("text", make_analysis(n_ranks=16), color=False, width=80
                           ).splitlines()
    first = "\n".join(lines[:40])
    # THEN coverage, exposure, efficiency, findings and the slowest phases and paths are all
    # on the first 40 lines, in that order, before any per-rank table
    order = [first.index(k) for k in ("ranks", "exposed comm", "efficiency",
                                      "findings", "Time per phase, slowest first",
                                      "Collectives per path and group, slowest first")]
    assert order == sorted(order)
    assert "Table stragglers" not in "\n".join(lines)  # 16 ranks: per-rank detail held back


def test_per_rank_tables_only_when_verbose_or_small(make_analysis):
    # GIVEN 16 ranks (more than SMALL_RUN_RANKS) and 8 ranks
    big, small = make_analysis(n_ranks=16), make_analysis(n_ranks=8)
    # THEN the stragglers table shows with --verbose or on the small run, and its omission
    # is said
    quiet = reports.render("text", big, color=False)
    assert "Table stragglers" not in quiet
    assert re.search(r"--verbose shows them\): .*stragglers", quiet, re.S)
    assert "Table stragglers" in reports.render("text", big, color=False, verbose=True)
    assert "Table stragglers" in reports.render("text", small, color=False)


def test_one_unit_convention_and_time_headers_without_ns(analysis):
    # GIVEN the report WHEN rendered THEN byte sizes are decimal kB/MB/GB (never KB or KiB)
    # and no heading names a *_ns column (its cells carry their unit)
    out = reports.render("text", analysis, color=False, width=200, verbose=True)
    assert re.search(r"\d kB\b|\d MB\b", out)
    assert not re.search(r"\bKB\b|KiB|MiB", out)
    headers = [line for line in out.splitlines() if re.match(r"^[a-z]", line)]
    assert not [h for h in headers if re.search(r"\w_ns\b", h)]


def test_terminal_width_defaults_to_80_off_a_terminal(monkeypatch):
    # GIVEN stdout is not a terminal and $COLUMNS unset / set
    monkeypatch.delenv("COLUMNS", raising=False)
    assert text.terminal_width() == 80
    monkeypatch.setenv("COLUMNS", "120")
    assert text.terminal_width() == 120


def test_byte_columns_are_sizes_and_counts_stay_counts():
    # GIVEN a size column and a count of collectives "with bytes"
    # THEN the size prints in decimal units (7,340,032 B = 7.34 MB), the count as a number
    assert fmt.short_cell(s.SEND_BYTES, 7_340_032) == "7.34 MB"
    assert fmt.short_cell(s.WITH_BYTES, 32) == "32"
    assert fmt.short_cell(s.TRANSFER_NS, 12_852_000) == "12.85 ms"
    assert fmt.short_cell(s.TRANSFER_NS, None) == fmt.DASH  # unknown, never 0


def test_labels_break_where_their_parts_meet() -> None:
    # GIVEN labels too wide for their column WHEN broken THEN at a separator, never leaving a
    # lone character (the 8-rank synth report used to show "combine.b_reduce_scatter" / "v")
    from tracekit.reports.text import _break

    assert _break("combine.b_reduce_scatterv", 20) == "combine.\nb_reduce_scatterv"
    assert _break("10.0.0.1%eth0_60000_0_1767225000000003", 32) == (
        "10.0.0.1%eth0_60000_0_\n1767225000000003")
    assert _break("abcdefghijklmnopqrstuvwxyz", 10) == "abcdefghij\nklmnopqrst\nuvwxyz"
    assert _break("dp_gather.allgather", 20) == "dp_gather.allgather"
