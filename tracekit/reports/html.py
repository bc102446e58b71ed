"""The HTML report: one self-contained file (bokeh resources inline, no network) for people.

Panels, in order: summary cards, coverage (when the results carry a COVERAGE table), colour
legend, timeline (each communication kernel per rank up to a budget; past it, each rank's busy
share per kernel class in time bins), per-layer waterfall of the phases with the bound marked,
time per phase, efficiency against message size with the bound drawn (or why there is none),
the all-to-all matrix C[i][j], findings, then the other result tables. Each panel is a
``<section id="panel-KEY">``; its plot is the bokeh root ``tracekit_KEY``, its table the
element ``tracekit_KEY_table`` (escaped markup, sortable, with a filter box: not a bokeh
model). A page without any plot is written without bokeh.

Plot data comes from ``plotframes`` / ``plotframes_agg`` (pure); plots from ``html_plots``;
tables from ``html_tables``; escaped fragments from ``html_parts``. The page template is built
from fixed panel keys only; trace strings enter as escaped template values or as data that
bokeh inserts as text.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tracekit.model import Analysis
from tracekit.reports import bokeh_plot, frames, views
from tracekit.reports import html_parts as parts
from tracekit.reports import plotframes as pf
from tracekit.reports import plotframes_agg as agg

TITLE = "tracekit report"
HTML_TABLE_ROWS = 2000  # rows of an extra table put in the page (all rows are in the JSON)
COVERAGE_TABLE = "coverage"  # the COVERAGE result table, when the analysis carries one
_PANEL_RE = "^[a-z0-9_-]+$"


@dataclass(frozen=True)
class Panel:
    key: str  # element id suffix and bokeh root name: fixed identifiers only
    title: str  # plain text (escaped when the page is built)
    html: str  # escaped fragment
    plot: Any = None  # bokeh model named ``tracekit_<key>``, or None
    table: str = ""  # escaped fragment: the element ``tracekit_<key>_table``, or ""

    @property
    def roots(self) -> list[Any]:
        return [] if self.plot is None else [self.plot]


def _table_panel(key: str, title: str, section: views.Section, t0: int, html: str = "",
                 plot: Any = None) -> Panel:
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


def _template(keys: list[tuple[str, list[str]]]) -> str:
    """The page body for bokeh's file template: per panel its title, fragment, plot and
    table; the table script last."""
    body = []
    for key, roots in keys:
        embed = "".join(f"{{{{ embed(roots[{name!r}]) }}}}" for name in roots)
        body.append(f'<section id="panel-{key}"><h2>{{{{ titles[{key!r}] }}}}</h2>'
                    f"{{{{ fragments[{key!r}] }}}}{embed}{{{{ tables[{key!r}] }}}}</section>")
    return ("{% block postamble %}<style>{{ style }}</style>{% endblock %}\n"
            "{% block contents %}<h1>{{ heading }}</h1>\n" + "\n".join(body)
            + "\n<script>{{ table_script }}</script>\n{% endblock %}")


def _plain_page(page: list[Panel], title: str) -> str:
    """A page without any plot: the same sections and tables, no bokeh (not even imported)."""
    from tracekit.reports import html_tables

    body = "\n".join(f'<section id="panel-{p.key}"><h2>{parts.esc(p.title)}</h2>{p.html}'
                      f"{p.table}</section>" for p in page)
    return ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{parts.esc(title)}</title>\n<style>{parts.STYLE}"
            f"{html_tables.STYLE}</style>\n</head>\n<body>\n<h1>{parts.esc(title)}</h1>\n"
            f"{body}\n<script>{html_tables.SCRIPT}</script>\n</body>\n</html>\n")


def _inline_resources() -> Any:
    """bokeh's inline resources without the external files other libraries' models declare.

    ``Resources.js_files`` lists the ``__javascript__`` URLs of every registered bokeh model
    class, used or not (panel, when imported by another library, registers an ES-module shim
    that is not part of this page). The report uses only bokeh's own models, whose code is
    inline.
    """
    from bokeh.resources import Resources

    class SelfContained(Resources):
        def clone(self, *, components: Any = None) -> Resources:
            copy = super().clone(components=components)
            copy.__class__ = SelfContained
            return copy

        def _collect_external_resources(self, resource_attr: Any) -> list[str]:
            return []

    return SelfContained(mode="inline")


@contextlib.contextmanager
def _unvalidated() -> Iterator[None]:
    """bokeh's document validation off while the page is written, unless the user set it.

    Validation walks every model for integrity checks (~15% of writing the page); the
    report's models are fixed code whose document the tests validate (test_html)."""
    from bokeh.settings import settings

    setting = settings.perform_document_validation
    if getattr(setting, "is_set", True) or os.environ.get(setting.env_var or "") is not None:
        yield
        return
    setting.set_value(False)
    try:
        yield
    finally:
        setting.unset_value()


def render(analysis: Analysis, *, title: str = TITLE, timeline_max: int = pf.TIMELINE_MAX,
           **_options: Any) -> str:
    """The report as one HTML document with every script inline."""
    from tracekit.reports import bokeh_fast

    # bokeh's per-model repeats skipped while the page is built and written (bokeh_fast)
    with bokeh_fast.quick():
        return _render(analysis, title, timeline_max)


def _render(analysis: Analysis, title: str, timeline_max: int) -> str:
    import re

    from tracekit.reports import html_tables

    # the summary, the tables and the plots read the same sums; the plots of the page share
    # their stateless bokeh models
    with frames.shared(), bokeh_plot.page():
        page = panels(analysis, timeline_max)
    for p in page:
        if not re.match(_PANEL_RE, p.key):
            raise ValueError(f"panel key {p.key!r} is not an identifier")
    if not any(p.roots for p in page):
        return _plain_page(page, title)
    from bokeh.document import Document
    from bokeh.embed import file_html

    doc = Document()
    with doc.models.freeze():  # one walk over the models for all roots, not one per root
        for model in (m for p in page for m in p.roots):
            doc.add_root(model)
    with _unvalidated():
        return file_html(
            doc, resources=_inline_resources(), title=title,
            template=_template([(p.key, [m.name for m in p.roots]) for p in page]),
            template_variables={
                "style": parts.STYLE + html_tables.STYLE, "heading": parts.esc(title),
                "titles": {p.key: parts.esc(p.title) for p in page},
                "fragments": {p.key: p.html for p in page},
                "tables": {p.key: p.table for p in page},
                "table_script": html_tables.SCRIPT,
            },
        )
