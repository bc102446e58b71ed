"""HTML fragments of the report (cards, tables, legends). Every trace string is escaped here.

Only ``esc`` puts text into markup; numbers go through ``fmt`` first and are escaped too, so
nothing from a trace (kernel, thread, group description, finding message) can open a tag or an
attribute.
"""

from __future__ import annotations

import html

import pandas as pd

from tracekit import schema as s
from tracekit.reports import fmt, views
from tracekit.reports import plotframes as pf


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def cards(summary: list[tuple[str, str]]) -> str:
    items = "".join(
        f'<div class="card"><div class="label">{esc(k)}</div><div class="value">{esc(v)}</div>'
        "</div>" for k, v in summary)
    return f'<div class="cards">{items}</div>'


def table(section: views.Section, css: str = "data") -> str:
    head = "".join(f"<th>{esc(section.header(c))}</th>" for c in section.columns)
    body = []
    frame = section.frame[list(section.columns)]
    for row in frame.itertuples(index=False, name=None):
        cells = []
        for col, value in zip(section.columns, row, strict=True):
            klass = f' class="sev-{esc(value)}"' if col == s.SEVERITY else ""
            cells.append(f"<td{klass}>{esc(fmt.cell(col, value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    note = f'<p class="note">{esc(section.note)}</p>' if section.note else ""
    return (f'<table class="{esc(css)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>{note}")


def _swatches(pairs: list[tuple[str, str]]) -> str:
    return "".join(
        f'<li><span class="swatch" style="background:{esc(c)}"></span>{esc(k)}</li>'
        for k, c in pairs)


def legend_pairs(colors: dict[str, str], present: set[str] | None = None) -> str:
    """A one-line legend of (label, colour), only the labels present when given."""
    pairs = [(k, c) for k, c in colors.items() if present is None or k in present]
    return f'<ul class="keys">{_swatches(pairs)}</ul>'


def legend_keys(timeline: pd.DataFrame) -> str:
    """The timeline's colours: one per communicator · path."""
    keys = timeline[[pf.KEY, pf.COLOR]].drop_duplicates().sort_values(pf.KEY)
    return f'<ul class="keys">{_swatches(list(keys.itertuples(index=False, name=None)))}</ul>'


def legend(efficiency: bool = True) -> str:
    """What the time parts and the efficiency mean (the timeline has its own key)."""
    items = _swatches(list(pf.PART_COLORS.items()))
    eff = ("<div><h3>Efficiency</h3><p>bound / transfer time: 1.0 means the collective ran at "
           "the alpha-beta lower bound of its link class (the dashed line); below 1.0 it was "
           "slower. The bandwidth plot shows the achieved S / time next to the bandwidth the "
           "bound allows at the same sizes.</p></div>") if efficiency else ""
    return (f"<div class=\"legend\"><div><h3>Parts of a phase's time</h3><ul>{items}</ul>"
            "<p>exposed: communication not hidden by compute on the same device; "
            f"overlapped: hidden by it</p></div>{eff}</div>")


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def imbalance(data: pf.A2A) -> str:
    overall = pf.imbalance_of(data.per_rank)
    lines = [f"<p>imbalance over the summed matrix (max / mean of per-rank max(send, recv)): "
             f"<b>{esc(fmt.ratio(overall))}</b></p>"]
    if len(data.imbalance):
        section = views.Section("a2a-imbalance", "", data.imbalance, tuple(data.imbalance.columns),
                                headers={pf.MEAN_IMBALANCE: "mean imbalance",
                                         pf.MAX_IMBALANCE: "max imbalance"})
        lines.append(table(section))
    return "".join(lines)


STYLE = """
body { font-family: system-ui, sans-serif; margin: 0 24px 48px; color: #222; }
h1 { font-size: 22px; margin: 18px 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; }
h3 { font-size: 14px; margin: 4px 0; }
section { border-top: 1px solid #ddd; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; min-width: 150px; }
.card .label { font-size: 12px; color: #666; } .card .value { font-size: 16px; }
table.data { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
table.data th, table.data td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
table.data th { background: #f4f4f4; }
.sev-error { color: #b00020; font-weight: bold; } .sev-warning { color: #a65e00; }
.note { color: #666; font-size: 12px; }
.legend { display: flex; gap: 40px; flex-wrap: wrap; }
.legend ul { list-style: none; padding: 0; margin: 0; font-size: 13px; }
.keys { list-style: none; padding: 0; margin: 4px 0; font-size: 13px; display: flex;
        flex-wrap: wrap; gap: 4px 18px; }
.swatch { display: inline-block; width: 12px; height: 12px; margin-right: 6px;
          vertical-align: middle; border-radius: 2px; }
"""
