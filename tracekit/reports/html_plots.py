"""The HTML report's plots: holoviews elements rendered to bokeh models.

Input frames come from ``plotframes`` (pure); this module only draws. Hover tooltips are
(label, "@column") pairs: bokeh inserts those values as escaped text, never as HTML, so a
kernel named ``<script>...`` shows as written. No tooltip uses the ``{safe}`` format.
"""

from __future__ import annotations

from typing import Any

import holoviews as hv
import holoviews.plotting.bokeh  # registers the bokeh backend, needed before .opts
import pandas as pd

from tracekit import schema as s
from tracekit.reports import plotframes as pf

WIDTH = 1150
GROUP_COLORS = {  # fixed per communicator, so reports of different runs agree
    s.Group.TP: "#1f77b4", s.Group.ATTN_TP: "#ff7f0e", s.Group.ATTN_CP: "#8c564b",
    s.Group.MOE_EP: "#2ca02c", s.Group.MOE_TP: "#9467bd", s.Group.MOE_DP: "#e377c2",
    s.Group.DP: "#17becf", s.Group.PP: "#bcbd22", s.Group.WORLD: "#7f7f7f",
}

_RENDERER: Any = None


def root_name(key: str) -> str:
    """The bokeh root name of panel ``key`` (prefixed: holoviews names inner models too)."""
    return f"tracekit_{key}"


def _render(element: Any, name: str) -> Any:
    """A holoviews element as a bokeh model named ``name`` (the template embeds it by name)."""
    global _RENDERER
    if _RENDERER is None:
        _RENDERER = hv.renderer("bokeh")
    model = _RENDERER.get_plot(element).state
    model.name = root_name(name)
    from bokeh.models import Plot

    for plot in model.select({"type": Plot}):
        plot.output_backend = "canvas"  # no WebGL: works in any browser, headless included
    return model


def tooltips(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(label, column) -> bokeh (label, "@{column}"): fields bokeh inserts as escaped text."""
    return [(label, f"@{{{column}}}") for label, column in pairs]


def group_colors(groups: list[str]) -> dict[str, str]:
    extra = sorted(g for g in set(groups) if g not in GROUP_COLORS)
    out = dict(GROUP_COLORS)
    out.update({g: pf.PALETTE[(i + 9) % len(pf.PALETTE)] for i, g in enumerate(extra)})
    return out


def timeline(sampled: pf.Sampled, n_ranks: int) -> Any:
    df = sampled.frame
    vdims = [s.RANK, s.NAME, s.OP, s.GROUP, s.PATH, pf.KEY, pf.COLOR, pf.BYTES_TXT, pf.EFF_TXT,
             pf.WAIT_TXT, pf.DUR_TXT]
    rects = hv.Rectangles(df, kdims=[pf.X0, pf.Y0, pf.X1, pf.Y1], vdims=vdims)
    rects = rects.opts(
        backend="bokeh", color=pf.COLOR, line_color=pf.COLOR, line_width=0.5,
        tools=["hover"], default_tools=["xwheel_zoom", "xpan", "box_zoom", "reset", "save"],
        hover_tooltips=tooltips([
            ("kernel", s.NAME), ("op", s.OP), ("bytes", pf.BYTES_TXT), ("group", s.GROUP),
            ("path", s.PATH), ("efficiency", pf.EFF_TXT), ("wait", pf.WAIT_TXT),
            ("duration", pf.DUR_TXT), ("rank", s.RANK)]),
        width=WIDTH, height=max(260, min(1400, 22 * n_ranks + 80)), invert_yaxis=True,
        xlabel="time since the first collective (ms)", ylabel="rank", title="",
    )
    return _render(rects, "timeline")


def phase_bars(parts: pd.DataFrame) -> Any:
    bars = hv.Bars(parts, kdims=[s.PHASE, pf.PART], vdims=[pf.MS_PER_RANK])
    bars = bars.opts(
        backend="bokeh", stacked=True, cmap=pf.PART_COLORS, tools=["hover"], width=WIDTH,
        height=380, ylabel="ms per rank", xlabel="phase", show_legend=True,
        legend_position="right", title="",
    )
    return _render(bars, "phases")


def efficiency(points: pd.DataFrame, curves: pd.DataFrame) -> Any:
    colors = group_colors(points[s.GROUP].tolist())
    vdims = [s.EFFICIENCY, pf.BOUND_GBPS, s.ALGBW_GBPS, s.GROUP, s.PATH, s.OP, s.NAME,
             pf.BYTES_TXT, pf.EFF_TXT]
    tips = tooltips([("kernel", s.NAME), ("group", s.GROUP), ("path", s.PATH), ("op", s.OP),
                     ("bytes", pf.BYTES_TXT), ("efficiency", pf.EFF_TXT)])
    color = hv.dim(s.GROUP).categorize(colors, default="#7f7f7f")
    eff = hv.Scatter(points, kdims=[s.MSG_BYTES], vdims=vdims).opts(
        backend="bokeh", color=color, size=6, alpha=0.7, logx=True, tools=["hover"],
        hover_tooltips=tips, xlabel="message size S (bytes)",
        ylabel="efficiency (bound / transfer)",
        width=WIDTH // 2, height=400, title="efficiency against message size")
    ceiling = hv.HLine(1.0).opts(backend="bokeh", color="#444444", line_dash="dashed")
    achieved = hv.Scatter(points, kdims=[s.MSG_BYTES], vdims=[s.ALGBW_GBPS, *vdims[:1],
                                                              *vdims[3:]]).opts(
        backend="bokeh", color=color, size=6, alpha=0.7, logx=True, logy=True, tools=["hover"],
        hover_tooltips=tips, xlabel="message size S (bytes)", ylabel="algbw (GB/s)",
        width=WIDTH // 2, height=400, title="achieved bandwidth and the bound per group")
    lines = [
        hv.Curve(c, kdims=[s.MSG_BYTES], vdims=[pf.BOUND_GBPS], label=f"bound {g} {op}").opts(
            backend="bokeh", color=colors.get(g, "#7f7f7f"), line_width=2)
        for (g, op), c in curves.groupby([s.GROUP, s.OP], sort=True)
    ]
    right = hv.Overlay([achieved, *lines]).opts(backend="bokeh", legend_position="bottom_right")
    layout = (hv.Overlay([eff, ceiling]) + right).cols(2).opts(backend="bokeh", shared_axes=False)
    return _render(layout, "efficiency")


def a2a(data: pf.A2A) -> Any:
    heat = hv.HeatMap(data.matrix, kdims=[s.DST_RANK, s.SRC_RANK], vdims=[s.MSG_BYTES]).opts(
        backend="bokeh", cmap="Viridis", colorbar=True, tools=["hover"], invert_yaxis=True,
        xlabel="destination rank j", ylabel="source rank i", width=WIDTH // 2 + 60, height=480,
        title=f"C[i][j] bytes, summed over {data.instances} all-to-all instance(s)")
    long = data.per_rank.melt(id_vars=[s.RANK], value_vars=[s.SEND_BYTES, s.RECV_BYTES],
                              var_name=pf.PART, value_name=s.MSG_BYTES)
    long[s.RANK] = long[s.RANK].astype(str)
    bars = hv.Bars(long, kdims=[s.RANK, pf.PART], vdims=[s.MSG_BYTES]).opts(
        backend="bokeh", tools=["hover"], width=WIDTH // 2 - 60, height=480, xlabel="rank",
        ylabel="bytes", title="bytes sent and received per rank", show_legend=True,
        cmap={s.SEND_BYTES: "#4c78a8", s.RECV_BYTES: "#f58518"}, xrotation=90)
    return _render((heat + bars).cols(2).opts(backend="bokeh", shared_axes=False), "a2a")
