"""The report's figures as BokehJS models: the document bokeh.plotting would make, with one
page's stateless models shared."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tracekit import reports
from tracekit.reports import bokeh_plot as bp
from tracekit.reports.bokehjs import Model, field, value

pytest.importorskip("bokeh")


def _expanded(model: Any, oracle: Any) -> Any:
    """``model`` serialised, every reference replaced by the object it names, ids dropped;
    bokehjs' Figure read as its Plot, renderers' "auto" looks as the defaults they are."""
    from bokeh.core.serialization import Serializer

    rep = Serializer(deferred=False).encode(model)  # arrays inline
    objects = oracle.objects(rep)

    def expand(v: Any) -> Any:
        if isinstance(v, dict):
            if set(v) == {"id"}:
                v = objects[v["id"]]
            out = {k: expand(x) for k, x in v.items() if k != "id" and not (
                k in ("muted_glyph", "nonselection_glyph") and x == "auto")}
            return {**out, "name": "Plot"} if out.get("name") == "Figure" else out
        if isinstance(v, list):
            return [expand(x) for x in v]
        return v

    return expand(rep)


def _plotting(kind: str) -> Any:
    import numpy as np
    from bokeh.models import ColumnDataSource, HoverTool, Range1d
    from bokeh.plotting import figure

    log = kind == "log"
    fig = figure(width=500, height=300, tools="xwheel_zoom,xpan,box_zoom,reset,save",
                 active_scroll="xwheel_zoom", x_axis_label="x", y_axis_label="y",
                 x_axis_type="log" if log else "linear", y_range=Range1d(3.5, -0.5),
                 **({"title": "t"} if log else {}), output_backend="canvas",
                 toolbar_location="above")
    data = ColumnDataSource({"x0": np.array([1.0])})
    quads = fig.quad(left="x0", right="x1", bottom="y0", top="y1", source=data,
                     fill_color="color", line_color="white", line_width=1)
    fig.add_tools(HoverTool(renderers=[quads], tooltips=[("a", "@{a}")]))
    fig.yaxis.ticker = [0, 1, 2, 3]
    fig.grid.grid_line_alpha = 0.3
    if log:
        fig.xaxis.ticker = bp_log_ticker()
    for renderer in fig.renderers:
        renderer.nonselection_glyph = renderer.muted_glyph = "auto"
    return fig


def bp_log_ticker() -> Any:
    from bokeh.models import LogTicker

    return LogTicker(mantissas=[1, 2, 5])


def _models(kind: str) -> Model:
    import pandas as pd

    log = kind == "log"
    fig = bp.figure(
        width=500, height=300, tools=("xwheel_zoom", "xpan", "box_zoom", "reset", "save"),
        active_scroll="xwheel_zoom", title="t" if log else "",
        x=bp.Axis("x", kind="log" if log else "linear",
                  ticker=Model("LogTicker", mantissas=[1, 2, 5]) if log else None,
                  formatter=None, grid={"grid_line_alpha": 0.3}),
        y=bp.Axis("y", Model("Range1d", start=3.5, end=-0.5),
                  ticker=Model("FixedTicker", ticks=[0, 1, 2, 3], minor_ticks=[]),
                  grid={"grid_line_alpha": 0.3}))
    quads = bp.draw(fig, Model("Quad", left=field("x0"), right=field("x1"), bottom=field("y0"),
                               top=field("y1"), line_color=value("white"),
                               fill_color=field("color")),
                    bp.source(pd.DataFrame({"x0": [1.0]})))
    bp.hover(fig, [quads], [("a", "@{a}")])
    return fig


@pytest.mark.parametrize("kind", ["linear", "log"])
def test_figure_is_the_document_bokeh_plotting_makes(kind, bokeh_oracle):
    # GIVEN the same plot made by bokeh.plotting.figure and by bokeh_plot (as bokeh models)
    # WHEN both are serialised, references resolved
    # THEN they are the same document (what bokehjs draws is the same)
    [ours] = bokeh_oracle.to_bokeh([_models(kind)])
    assert _expanded(ours, bokeh_oracle) == _expanded(_plotting(kind), bokeh_oracle)


def test_a_page_shares_its_stateless_models(analysis):
    # GIVEN the full report (5 plots, 7 figures)
    html = reports.render("html", analysis)
    doc = re.search(r'<script type="application/json" id="[^"]+">\s*(.*?)\s*</script>', html,
                    re.S)
    assert doc is not None
    names = re.findall(r'"type":"object","name":"([A-Za-z]+)"', doc.group(1))
    # WHEN its bokeh models are counted THEN each stateless one is made once for the page,
    # each stateful one per use
    assert names.count("Figure") + names.count("Plot") == 7
    for shared in ("AllLabels", "AllIndices", "UnionRenderers", "BasicTicker"):
        assert names.count(shared) == 1, shared
    assert names.count("Selection") == names.count("ColumnDataSource") > 1
    assert names.count("CDSView") == names.count("GlyphRenderer") > 1
    assert len({json.dumps(n) for n in names}) > 20


def test_figures_outside_a_page_share_nothing():
    # GIVEN two figures made outside bokeh_plot.page() THEN each has its own models
    a, b = _models("linear"), _models("linear")
    assert a["below"][0]["major_label_policy"] is not b["below"][0]["major_label_policy"]
    with bp.page():
        c, d = _models("linear"), _models("linear")
    assert c["below"][0]["major_label_policy"] is d["below"][0]["major_label_policy"]
