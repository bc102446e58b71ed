"""The HTML report's plots: holoviews elements rendered to bokeh models.

Input frames come from ``plotframes`` (pure); this module only draws. Hover tooltips are
(label, "@column") pairs: bokeh inserts those values as escaped text, never as HTML, so a
kernel named ``<script>...`` shows as written. No tooltip uses the ``{safe}`` format.
"""

from __future__ import annotations

from typing import Any

import holoviews as hv
import holoviews.plotting.bokeh  # registers the bokeh backend, needed before .opts
import numpy as np
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


# Tick labels in human units. The code is fixed here (no trace string enters it).
_P = "const p = (v, d) => Number(v.toPrecision(d)).toString();\n"
_BYTES_TICKS = _P + """
for (const [scale, unit] of [[1e9, " GB"], [1e6, " MB"], [1e3, " kB"]]) {
  if (Math.abs(tick) >= scale) return p(tick / scale, 3) + unit;
}
return p(tick, 3) + " B";
"""
_MS_TICKS = _P + """
const a = Math.abs(tick);
if (a >= 1000) return p(tick / 1000, 4) + " s";
if (a >= 1 || a === 0) return p(tick, 4) + " ms";
return p(tick * 1000, 3) + " µs";
"""
_RATIO_TICKS = _P + "return p(tick, 3);"
_GBPS_TICKS = _P + """
return tick >= 1 ? p(tick, 3) + " GB/s" : p(tick * 1000, 3) + " MB/s";
"""


def _formatter(code: str) -> Any:
    from bokeh.models import CustomJSTickFormatter

    return CustomJSTickFormatter(code=code)


def bytes_ticks() -> Any:
    return _formatter(_BYTES_TICKS)


def ms_ticks() -> Any:
    return _formatter(_MS_TICKS)


def _log_ticks() -> Any:
    from bokeh.models import LogTicker

    return LogTicker(mantissas=[1, 2, 5])


def _rank_ticks(ranks: list[int]) -> list[int]:
    """Integer rank ticks: every rank up to 32, then a regular subset."""
    step = max(1, -(-len(ranks) // 32))
    return list(ranks[::step])


def _quads(df: pd.DataFrame, tips: list[tuple[str, str]], height: int, ranks: list[int],
           line_width: float) -> Any:
    """Rectangles (x0..x1, y0..y1, one colour each) per rank, rank 0 on top, as a plain bokeh
    figure: holoviews would validate the colour of each of thousands of rectangles one by
    one, which took most of a big run's report time."""
    from bokeh.models import ColumnDataSource, HoverTool, Range1d
    from bokeh.plotting import figure

    fig = figure(width=WIDTH, height=height, tools="xwheel_zoom,xpan,box_zoom,reset,save",
                 active_scroll="xwheel_zoom", x_axis_label="time since the trace start",
                 y_axis_label="rank", output_backend="canvas", toolbar_location="above")
    source = ColumnDataSource({str(c): df[c].to_numpy() for c in df.columns})
    glyphs = fig.quad(left=pf.X0, right=pf.X1, bottom=pf.Y0, top=pf.Y1, source=source,
                      fill_color=pf.COLOR, line_color=pf.COLOR, line_width=line_width)
    fig.add_tools(HoverTool(renderers=[glyphs], tooltips=tips))
    lo, hi = (min(ranks), max(ranks)) if ranks else (0, 0)
    fig.y_range = Range1d(hi + 0.5, lo - 0.5)  # inverted: rank 0 at the top
    fig.yaxis.ticker = _rank_ticks(ranks) or [0]
    fig.xaxis.formatter = ms_ticks()
    fig.grid.grid_line_alpha = 0.3
    fig.name = root_name("timeline")
    return fig


def timeline(sampled: pf.Sampled, ranks: list[int]) -> Any:
    tips = tooltips([
        ("kernel", s.NAME), ("op", s.OP), ("bytes", pf.BYTES_TXT), ("group", s.GROUP),
        ("path", s.PATH), ("efficiency", pf.EFF_TXT), ("wait", pf.WAIT_TXT),
        ("duration", pf.DUR_TXT), ("rank", s.RANK)])
    return _quads(sampled.frame, tips, max(260, min(1400, 22 * len(ranks) + 80)), ranks, 0.5)


def occupancy(occ: Any, ranks: list[int]) -> Any:
    """Per rank, stacked busy share of each kernel class per time bin."""
    tips = tooltips([("rank", s.RANK), ("class", s.KERNEL_CLASS), ("busy", "share_txt"),
                     ("time", "bin_txt")])
    return _quads(occ.frame, tips, max(260, min(1400, 26 * len(ranks) + 80)), ranks, 0.6)


def waterfall(wf: pd.DataFrame, bounds: pd.DataFrame) -> Any:
    """Per layer (one row each), the phases' parts end to end; a black tick marks the bound."""
    from tracekit.reports import plotframes_agg as agg

    layers = sorted(int(v) for v in wf[s.LAYER].unique())
    df = wf.assign(**{pf.Y0: wf[s.LAYER] - 0.38, pf.Y1: wf[s.LAYER] + 0.38})
    tips = tooltips([("layer", s.LAYER), ("phase", s.PHASE), ("part", agg.SEGMENT),
                     ("time per rank", agg.MS_TXT), ("bound", agg.BOUND_TXT),
                     ("paths", agg.PATHS)])
    rects = hv.Rectangles(df, kdims=[agg.START_MS, pf.Y0, agg.END_MS, pf.Y1],
                          vdims=[s.LAYER, s.PHASE, agg.SEGMENT, agg.MS_TXT, agg.BOUND_TXT,
                                 agg.PATHS, pf.COLOR]).opts(
        backend="bokeh", color=pf.COLOR, line_color="white", line_width=1, tools=["hover"],
        hover_tooltips=tips, default_tools=["xwheel_zoom", "xpan", "box_zoom", "reset", "save"])
    overlay = [rects]
    if len(bounds):
        b = bounds.assign(**{pf.Y0: bounds[s.LAYER] - 0.46, pf.Y1: bounds[s.LAYER] + 0.46})
        overlay.append(hv.Segments(b, kdims=[agg.BOUND_MS, pf.Y0, agg.BOUND_MS, pf.Y1],
                                   vdims=[s.LAYER, s.PHASE, agg.BOUND_TXT, agg.PATHS]).opts(
            backend="bokeh", color="black", line_width=3, tools=["hover"],
            hover_tooltips=tooltips([("bound of", s.PHASE), ("layer", s.LAYER),
                                     ("bound", agg.BOUND_TXT), ("paths", agg.PATHS)])))
    plot = hv.Overlay(overlay).opts(
        backend="bokeh", width=WIDTH, height=max(200, min(1400, 30 * len(layers) + 90)),
        invert_yaxis=True, xlabel="time per rank within the layer", ylabel="layer",
        title="", xformatter=ms_ticks(), yticks=_rank_ticks(layers))
    return _render(plot, "waterfall")


def phase_bars(parts: pd.DataFrame) -> Any:
    bars = hv.Bars(parts, kdims=[s.PHASE, pf.PART], vdims=[pf.MS_PER_RANK])
    bars = bars.opts(
        backend="bokeh", stacked=True, cmap=pf.PART_COLORS, tools=["hover"], width=WIDTH,
        height=380, ylabel="time per rank", xlabel="phase", show_legend=True,
        legend_position="right", title="", yformatter=ms_ticks(),
    )
    return _render(bars, "phases")


def _log_range(lo: float, hi: float, must: tuple[float, ...] = ()) -> tuple[float, float]:
    values = [v for v in (lo, hi, *must) if v > 0 and np.isfinite(v)]
    return (min(values) / 1.6, max(values) * 1.6) if values else (0.1, 10.0)


def _log_figure(title: str, ylabel: str, yformatter: Any, x_range: tuple[float, float],
                y_range: tuple[float, float]) -> Any:
    from bokeh.models import Range1d
    from bokeh.plotting import figure

    fig = figure(width=WIDTH // 2, height=420, x_axis_type="log", y_axis_type="log",
                 x_range=Range1d(*x_range), y_range=Range1d(*y_range), title=title,
                 x_axis_label="message size S (nccl-tests)", y_axis_label=ylabel,
                 tools="wheel_zoom,pan,box_zoom,reset,save", active_scroll="wheel_zoom",
                 output_backend="canvas", toolbar_location="above")
    fig.xaxis.formatter = bytes_ticks()
    fig.xaxis.ticker = _log_ticks()
    fig.yaxis.formatter = yformatter
    fig.yaxis.ticker = _log_ticks()
    fig.grid.grid_line_alpha = 0.3
    return fig


def _source(df: pd.DataFrame) -> Any:
    from bokeh.models import ColumnDataSource

    return ColumnDataSource({str(c): df[c].to_numpy() for c in df.columns})


def efficiency(groups: pd.DataFrame) -> Any:
    """Left: efficiency (median, min-max whisker) per size; right: achieved and bound GB/s.

    Plain bokeh figures (one data source per communicator and op): holoviews spent most of
    the report's plotting time laying out these few markers."""
    from bokeh.layouts import gridplot
    from bokeh.models import HoverTool, Span

    from tracekit.reports import plotframes_agg as agg

    keys = sorted(set(groups[pf.KEY]))
    cmap = {k: pf.PALETTE[i % len(pf.PALETTE)] for i, k in enumerate(keys)}
    df = groups.assign(**{pf.COLOR: groups[pf.KEY].map(cmap)})
    xr = _log_range(float(df[s.MSG_BYTES].min()), float(df[s.MSG_BYTES].max()))
    tips = tooltips([("group · op", pf.KEY), ("path", s.PATH), ("message size", pf.BYTES_TXT),
                     ("collective rows", agg.N), ("median efficiency", pf.EFF_TXT),
                     ("min - max", agg.RANGE_TXT)])
    eff_range = _log_range(float(df[agg.EFF_MIN].min()), float(df[agg.EFF_MAX].max()), (1.0,))
    bw_values = pd.concat([df[agg.BW_MIN], df[agg.BW_MAX], df[pf.BOUND_GBPS]]).astype(float)
    bw_range = _log_range(float(bw_values.min()), float(bw_values.max()))
    left = _log_figure("efficiency per message size (median, whisker min-max)",
                       "efficiency = bound / transfer (1.0 = at the bound)",
                       _formatter(_RATIO_TICKS), xr, eff_range)
    right = _log_figure("achieved (dots) and bound (dashed, diamonds) bandwidth",
                        "algorithm bandwidth S / time", _formatter(_GBPS_TICKS), xr, bw_range)
    hover_left, hover_right = [], []
    for key in keys:
        color = cmap[key]
        src = _source(df[df[pf.KEY] == key])
        left.segment(x0=s.MSG_BYTES, y0=agg.EFF_MIN, x1=s.MSG_BYTES, y1=agg.EFF_MAX,
                     source=src, line_color=color, line_width=2, line_alpha=0.6)
        hover_left.append(left.scatter(x=s.MSG_BYTES, y=agg.EFF_MED, source=src, color=color,
                                       size=9, legend_label=key))
        right.segment(x0=s.MSG_BYTES, y0=agg.BW_MIN, x1=s.MSG_BYTES, y1=agg.BW_MAX,
                      source=src, line_color=color, line_width=2, line_alpha=0.6)
        hover_right.append(right.scatter(x=s.MSG_BYTES, y=agg.BW_MED, source=src, color=color,
                                         size=9, legend_label=f"{key} achieved"))
        k = df[df[pf.KEY] == key]
        bound = _source(k.groupby(s.MSG_BYTES, sort=True)[pf.BOUND_GBPS].median().reset_index())
        right.line(x=s.MSG_BYTES, y=pf.BOUND_GBPS, source=bound, line_color=color,
                   line_dash="dashed", line_width=2, legend_label=f"{key} bound")
        right.scatter(x=s.MSG_BYTES, y=pf.BOUND_GBPS, source=bound, marker="diamond", size=12,
                      line_color=color, fill_alpha=0)
    left.add_layout(Span(location=1.0, dimension="width", line_color="#444444",
                         line_dash="dashed", line_width=1.5))
    left.add_tools(HoverTool(renderers=hover_left, tooltips=tips))
    right.add_tools(HoverTool(renderers=hover_right, tooltips=tips))
    for fig in (left, right):
        fig.legend.location = "bottom_right"
    grid = gridplot([[left, right]], toolbar_location="above")
    grid.name = root_name("efficiency")
    return grid


def a2a(data: pf.A2A) -> Any:
    ranks = sorted(int(r) for r in set(data.matrix[s.SRC_RANK]) | set(data.matrix[s.DST_RANK]))
    ticks = _rank_ticks(ranks)
    heat = hv.HeatMap(data.matrix, kdims=[s.DST_RANK, s.SRC_RANK], vdims=[s.MSG_BYTES]).opts(
        backend="bokeh", cmap="Viridis", colorbar=True, tools=["hover"], invert_yaxis=True,
        xlabel="destination rank j", ylabel="source rank i", width=WIDTH // 2 + 60, height=480,
        xticks=ticks, yticks=ticks, colorbar_opts={"formatter": bytes_ticks()},
        title=f"C[i][j] bytes, summed over {data.instances} all-to-all instance(s)")
    long = data.per_rank.melt(id_vars=[s.RANK], value_vars=[s.SEND_BYTES, s.RECV_BYTES],
                              var_name=pf.PART, value_name=s.MSG_BYTES)
    long[s.RANK] = long[s.RANK].astype(int).astype(str)
    bars = hv.Bars(long, kdims=[s.RANK, pf.PART], vdims=[s.MSG_BYTES]).opts(
        backend="bokeh", tools=["hover"], width=WIDTH // 2 - 60, height=480, xlabel="rank",
        ylabel="bytes", title="bytes sent and received per rank", show_legend=True,
        cmap={s.SEND_BYTES: "#4c78a8", s.RECV_BYTES: "#f58518"}, xrotation=90,
        yformatter=bytes_ticks())
    return _render((heat + bars).cols(2).opts(backend="bokeh", shared_axes=False), "a2a")
