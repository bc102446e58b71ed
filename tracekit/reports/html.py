"""The HTML report: one self-contained file (bokeh resources inline, no network) for people.

Panels, in order: summary cards, colour legend, per-rank timeline of communication kernels
(coloured by communicator and path; hover: op, bytes, group, path, efficiency, wait), stacked
time per phase, efficiency against message size with the bound per group, the all-to-all
matrix C[i][j] with its imbalance, findings, then the tables of the text report. Each panel is a
``<section id="panel-KEY">``; plots are bokeh roots named ``tracekit_KEY``.

The plot data comes from ``plotframes`` (pure, with the downsampling that keeps a 64-rank
report small); plots from ``html_plots``; escaped fragments from ``html_parts``. The page
template is built from fixed panel keys only; trace strings enter as escaped template values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracekit.api import Analysis
from tracekit.reports import frames, views
from tracekit.reports import html_parts as parts
from tracekit.reports import plotframes as pf

TITLE = "tracekit report"
HTML_TABLE_ROWS = 100  # rows of an extra table shown (all rows are in the JSON report)
_PANEL_RE = "^[a-z0-9_-]+$"


@dataclass(frozen=True)
class Panel:
    key: str  # element id suffix and bokeh root name: fixed identifiers only
    title: str  # plain text (escaped when the page is built)
    html: str  # escaped fragment
    plot: Any = None  # bokeh model named ``tracekit_<key>``, or None


def _plot_panels(analysis: Analysis, timeline_max: int) -> list[Panel]:
    from tracekit.reports import html_plots as plots

    out: list[Panel] = []
    n_ranks = max(1, len(frames.ranks(analysis)))
    tl = pf.timeline(analysis, timeline_max)
    pts = pf.efficiency_points(analysis)
    out.append(Panel("legend", "What the colours mean",
                     parts.legend(tl.frame, efficiency=bool(len(pts.frame)))))
    if len(tl.frame):
        note = (f"{tl.shown:,} kernels" if tl.shown == tl.total else
                f"the {tl.shown:,} longest of {tl.total:,} kernels (an equal share per rank)")
        out.append(Panel("timeline", "Communication kernels per rank",
                         parts.note(note + "; hover a kernel for its details"),
                         plots.timeline(tl, n_ranks)))
    phase_parts = pf.phase_parts(analysis)
    if len(phase_parts):
        table = next((sec for sec in views.sections(analysis) if sec.key == "phases"), None)
        out.append(Panel("phases", "Time per phase: compute, fused, overlapped and exposed "
                         "communication", parts.table(table) if table else "",
                         plots.phase_bars(phase_parts)))
    if len(pts.frame):
        note = ("" if pts.shown == pts.total else
                f"a regular sample of {pts.shown:,} of {pts.total:,} collectives; ")
        out.append(Panel("efficiency", "Efficiency against message size",
                         parts.note(note + "one point per collective and rank"),
                         plots.efficiency(pts.frame, pf.bound_curves(pts.frame))))
    a2a = pf.a2a(analysis)
    if a2a is not None:
        out.append(Panel("a2a", "All-to-all traffic C[i][j] and imbalance",
                         parts.imbalance(a2a), plots.a2a(a2a)))
    return out


def panels(analysis: Analysis, timeline_max: int = pf.TIMELINE_MAX) -> list[Panel]:
    out = [Panel("summary", "Summary", parts.cards(views.summary(analysis)))]
    out += _plot_panels(analysis, timeline_max)
    sections = views.sections(analysis, extra_rows=HTML_TABLE_ROWS)
    found = next((sec for sec in sections if sec.key == "findings"), None)
    if analysis.findings is not None:
        out.append(Panel("findings", "Findings",
                         parts.table(found) if found else "<p>No findings.</p>"))
    for index, sec in enumerate(sections):
        if sec.key in ("phases", "findings"):
            continue
        key = sec.key if sec.key in ("paths", "comm_events", "per_rank") else f"table-{index}"
        out.append(Panel(key, sec.title, parts.table(sec)))
    return out


def _template(keys: list[tuple[str, bool]]) -> str:
    body = []
    for key, has_plot in keys:
        embed = f"{{{{ embed(roots[{'tracekit_' + key!r}]) }}}}" if has_plot else ""
        body.append(f'<section id="panel-{key}"><h2>{{{{ titles[{key!r}] }}}}</h2>'
                    f"{{{{ fragments[{key!r}] }}}}{embed}</section>")
    return ("{% block postamble %}<style>{{ style }}</style>{% endblock %}\n"
            "{% block contents %}<h1>{{ heading }}</h1>\n" + "\n".join(body)
            + "\n{% endblock %}")


def _inline_resources() -> Any:
    """bokeh's inline resources without the external files other libraries' models declare.

    ``Resources.js_files`` lists the ``__javascript__`` URLs of every registered bokeh model
    class, used or not (panel, imported by holoviews, registers an ES-module shim that is
    not part of this page). The report uses only bokeh's own models, whose code is inline.
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


def render(analysis: Analysis, *, title: str = TITLE, timeline_max: int = pf.TIMELINE_MAX,
           **_options: Any) -> str:
    """The report as one HTML document with every script inline."""
    import re

    from bokeh.embed import file_html

    page = panels(analysis, timeline_max)
    for p in page:
        if not re.match(_PANEL_RE, p.key):
            raise ValueError(f"panel key {p.key!r} is not an identifier")
    models = [p.plot for p in page if p.plot is not None]
    return file_html(
        models, resources=_inline_resources(), title=title,
        template=_template([(p.key, p.plot is not None) for p in page]),
        template_variables={
            "style": parts.STYLE, "heading": parts.esc(title),
            "titles": {p.key: parts.esc(p.title) for p in page},
            "fragments": {p.key: p.html for p in page},
        },
    )
