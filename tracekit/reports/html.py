"""The HTML report: one self-contained file (BokehJS inline, no network) for people.

Panels, in order: summary cards, coverage (when the results carry a COVERAGE table), colour
legend, timeline (each communication kernel per rank up to a budget; past it, each rank's busy
share per kernel class in time bins), per-layer waterfall of the phases with the bound marked,
time per phase, efficiency against message size with the bound drawn (or why there is none),
the all-to-all matrix C[i][j], findings, then the other result tables. Each panel is a
``<section id="panel-KEY">``; its plot is the BokehJS root ``tracekit_KEY``, drawn into the
element ``tracekit_KEY_plot``, its table the element ``tracekit_KEY_table`` (escaped markup,
sortable, with a filter box: not a BokehJS model). A page without any plot carries no BokehJS.

Plot data comes from ``plotframes`` / ``plotframes_agg`` (pure); plots from ``html_plots``;
tables from ``html_tables``; escaped fragments from ``html_parts``; the BokehJS document from
``bokehjs`` (no bokeh Python module is imported). The page is built from fixed panel keys
only; trace strings enter as escaped text or as document data that BokehJS inserts as text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracekit.model import Analysis
from tracekit.reports import bokeh_plot, frames, views
from tracekit.reports import html_parts as parts
from tracekit.reports import plotframes as pf
from tracekit.reports import plotframes_agg as agg
from tracekit.reports.bokehjs import Model

TITLE = "tracekit report"
HTML_TABLE_ROWS = 2000  # rows of an extra table put in the page (all rows are in the JSON)
COVERAGE_TABLE = "coverage"  # the COVERAGE result table, when the analysis carries one
_PANEL_RE = "^[a-z0-9_-]+$"


@dataclass(frozen=True)
class Panel:
    key: str  # element id suffix and BokehJS root name: fixed identifiers only
    title: str  # plain text (escaped when the page is built)
    html: str  # escaped fragment
    plot: Model | None = None  # BokehJS model named ``tracekit_<key>``, or None
    table: str = ""  # escaped fragment: the element ``tracekit_<key>_table``, or ""

    @property
    def roots(self) -> list[Model]:
        return [] if self.plot is None else [self.plot]


def _table_panel(key: str, title: str, section: views.Section, t0: int, html: str = "",
                 plot: Model | None = None) -> Panel:
    from tracekit.reports import html_tables

    note = parts.note(section.note) if section.note else ""
    return Panel(key, title, html + note, plot,
                 html_tables.data_table(section, key, t0) if len(section.frame) else "")


def coverage_panel(analysis: Analysis, t0: int = 0) -> Panel | None:
    """The coverage block: the COVERAGE result table when the analysis has one, else None.

    COVERAGE is written by the coverage stage (how much of the trace was read, attributed
    and bounded); this panel only shows it, sortable, under the summary.
    """
    table = analysis.tables.get(COVERAGE_TABLE)
    if not frames.has_rows(table):
        return None
    df = frames.to_frame(table)
    section = views.Section("coverage", "Coverage", df, tuple(df.columns), headers={})
    return _table_panel("coverage", "Coverage: what the figures rest on", section, t0)


def _timeline_panel(analysis: Analysis, ranks: list[int], budget: int) -> Panel | None:
    """Each communication kernel up to ``budget``; past it, the binned busy share per class."""
    from tracekit.reports import html_plots as plots

    total = pf.comm_total(analysis)
    if 0 < total <= budget:
        tl = pf.timeline(analysis, budget)
        return Panel("timeline", "Communication kernels per rank",
                     parts.legend_keys(tl.frame) +
                     parts.note(f"{tl.total:,} kernels, each drawn; hover one for its "
                                "details; wheel to zoom, drag to pan"),
                     plots.timeline(tl, ranks))
    occ = agg.occupancy(analysis)
    if len(occ.frame):
        return Panel("timeline", "Device busy time per rank and kernel class",
                     parts.legend_pairs(agg.CLASS_COLORS, set(occ.frame[agg.s.KERNEL_CLASS])) +
                     parts.note(f"{occ.kernels:,} device kernels ({total:,} of them "
                                f"communication) are more than the {budget:,} drawn one by "
                                f"one: each bar is a {occ.bin_ms * 1e3:,.0f} µs bin, its "
                                "stacked heights the share of the bin each kernel class kept "
                                "the device busy; zoom in with the wheel"),
                     plots.occupancy(occ, ranks))
    if total:
        tl = pf.timeline(analysis, budget)
        return Panel("timeline", "Communication kernels per rank",
                     parts.legend_keys(tl.frame) +
                     parts.note(f"the {tl.shown:,} longest of {tl.total:,} kernels "
                                "(an equal share per rank)"), plots.timeline(tl, ranks))
    return None


def _efficiency_panel(analysis: Analysis, t0: int) -> Panel | None:
    from tracekit.reports import html_plots as plots

    if not frames.has_rows(analysis.measured):
        return None
    cover = agg.bound_coverage(analysis)
    rows, with_eff = int(cover[agg.s.COUNT].sum()), int(cover[agg.WITH_EFF].sum())
    section = views.Section("bound-coverage", "", cover, tuple(cover.columns), headers={
        agg.WITH_SIZE: "with message size", agg.WITH_BOUND: "with bound",
        agg.WITH_EFF: "with efficiency"})
    groups = agg.efficiency_groups(analysis)
    if not len(groups):
        why = ("No collective of this run has an efficiency: "
               f"{rows - int(cover[agg.WITH_SIZE].sum()):,} of {rows:,} collective rows carry "
               "no message size in the trace (kernels launched outside c10d, such as "
               "DeepEP's, and CUDA-graph replays record none), and without a size there is "
               "no alpha-beta bound. The table says, per path, what is known.")
        return _table_panel("efficiency", "Efficiency against message size", section, t0,
                            html=f"<p>{parts.esc(why)}</p>")
    note = (f"{with_eff:,} of {rows:,} collective rows have an efficiency, shown as "
            f"{len(groups):,} marker{'s' if len(groups) != 1 else ''}: one per communicator, "
            "op, path and message size "
            "(median; the whisker spans min to max; hover for the count). The dashed line at "
            "1.0 is the bound.")
    return _table_panel("efficiency", "Efficiency against message size", section, t0,
                        html=parts.note(note), plot=plots.efficiency(groups))


def _plot_panels(analysis: Analysis, budget: int, t0: int,
                 sections: list[views.Section]) -> list[Panel]:
    from tracekit.reports import html_plots as plots

    out: list[Panel] = []
    ranks = frames.ranks(analysis)
    out.append(Panel("legend", "What the colours mean",
                     parts.legend(efficiency=frames.has_rows(analysis.measured))))
    timeline = _timeline_panel(analysis, ranks, budget)
    if timeline is not None:
        out.append(timeline)
    wf = agg.waterfall(analysis)
    if len(wf):
        out.append(Panel("waterfall", "Per layer: phases end to end, with the bound",
                         parts.note("time per rank (mean over ranks) of each phase of each "
                                    "layer, laid end to end; the black tick is where the "
                                    "phase's communication would end at its alpha-beta bound"),
                         plots.waterfall(wf, agg.waterfall_bounds(wf))))
    phase_parts = pf.phase_parts(analysis)
    if len(phase_parts):
        table = next((sec for sec in sections if sec.key == "phases"), None)
        bars = plots.phase_bars(phase_parts)
        out.append(_table_panel("phases", "Time per phase: compute, fused, overlapped and "
                                "exposed communication", table, t0, plot=bars)
                   if table else Panel("phases", "Time per phase", "", bars))
    panel = _efficiency_panel(analysis, t0)
    if panel is not None:
        out.append(panel)
    a2a = pf.a2a(analysis)
    if a2a is not None:
        out.append(Panel("a2a", "All-to-all traffic C[i][j] and imbalance",
                         parts.imbalance(a2a), plots.a2a(a2a)))
    return out


def panels(analysis: Analysis, timeline_max: int = pf.TIMELINE_MAX) -> list[Panel]:
    t0 = pf.trace_start_ns(analysis)
    out = [Panel("summary", "Summary", parts.cards(views.summary(analysis)))]
    coverage = coverage_panel(analysis, t0)
    if coverage is not None:
        out.append(coverage)
    sections = views.sections(analysis, extra_rows=HTML_TABLE_ROWS)  # once for the page
    out += _plot_panels(analysis, timeline_max, t0, sections)
    found = next((sec for sec in sections if sec.key == "findings"), None)
    if analysis.findings_table is not None:
        out.append(_table_panel("findings", "Findings", found, t0) if found else
                   Panel("findings", "Findings", "<p>No findings.</p>"))
    for index, sec in enumerate(sections):
        if sec.key in ("phases", "findings", f"table-{COVERAGE_TABLE}"):
            continue
        key = sec.key if sec.key in ("paths", "comm_events", "per_rank") else f"table-{index}"
        out.append(_table_panel(key, sec.title, sec, t0))
    return out


def _plain_page(page: list[Panel], title: str) -> str:
    """A page without any plot: the same sections and tables, no bokeh (not even imported)."""
    from tracekit.reports import html_tables

    body = "\n".join(f'<section id="panel-{p.key}"><h2>{parts.esc(p.title)}</h2>{p.html}'
                      f"{p.table}</section>" for p in page)
    return ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{parts.esc(title)}</title>\n<style>{parts.STYLE}"
            f"{html_tables.STYLE}</style>\n</head>\n<body>\n<h1>{parts.esc(title)}</h1>\n"
            f"{body}\n<script>{html_tables.SCRIPT}</script>\n</body>\n</html>\n")


# Runs once the page has loaded: BokehJS reads the document (HTML-escaped JSON, which it
# unescapes) and draws each root into the element named in the render items.
_EMBED = """(function () {
  const run = function () {
    Bokeh.safely(function () {
      const docs = document.getElementById("tracekit-bokeh-doc").textContent;
      Bokeh.embed.embed_items(docs, %s);
    });
  };
  if (document.readyState != "loading") run();
  else document.addEventListener("DOMContentLoaded", run);
})();"""
_DOC_ID = "tracekit"  # the one BokehJS document of the page


def _root_element(key: str) -> str:
    """The element a panel's plot is drawn into (a fixed identifier: no trace string)."""
    return f"tracekit_{key}_plot"


def render(analysis: Analysis, *, title: str = TITLE, timeline_max: int = pf.TIMELINE_MAX,
           **_options: Any) -> str:
    """The report as one HTML document with every script inline."""
    import re

    from tracekit.reports import bokehjs, html_tables

    # the summary, the tables and the plots read the same sums; the plots of the page share
    # their stateless models
    with frames.shared(), bokeh_plot.page():
        page = panels(analysis, timeline_max)
    for p in page:
        if not re.match(_PANEL_RE, p.key):
            raise ValueError(f"panel key {p.key!r} is not an identifier")
    if not any(p.roots for p in page):
        return _plain_page(page, title)
    code, version = bokehjs.bokeh_js()
    doc, writer = bokehjs.document([m for p in page for m in p.roots], title=title,
                                   version=version)
    drawn = {writer.ref(root): _root_element(p.key) for p in page for root in p.roots}
    items = [{"docid": _DOC_ID, "roots": drawn, "root_ids": list(drawn)}]
    body = "\n".join(
        f'<section id="panel-{p.key}"><h2>{parts.esc(p.title)}</h2>{p.html}'
        + (f'<div id="{_root_element(p.key)}" style="display: contents;"></div>'
           if p.roots else "") + f"{p.table}</section>" for p in page)
    data = bokehjs.script_data(bokehjs.to_json({_DOC_ID: doc}))
    return ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{parts.esc(title)}</title>\n"
            f"<script>\n/* BokehJS {parts.esc(version)} (bokeh.min.js) */\n{code}\n</script>\n"
            f"<style>{parts.STYLE}{html_tables.STYLE}</style>\n</head>\n<body>\n"
            f"<h1>{parts.esc(title)}</h1>\n{body}\n"
            f"<script>{html_tables.SCRIPT}</script>\n"
            f'<script type="application/json" id="tracekit-bokeh-doc">{data}</script>\n'
            f"<script>{_EMBED % bokehjs.to_json(items)}</script>\n</body>\n</html>\n")
