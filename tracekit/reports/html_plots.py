"""The HTML report's plots: plain bokeh figures (no holoviews: importing it and laying out
its elements took longer than the rest of the report).

Input frames come from ``plotframes`` (pure); this module only draws. Hover tooltips are
(label, "@column") pairs: bokeh inserts those values as escaped text, never as HTML, so a
kernel named ``<script>...`` shows as written. No tooltip uses the ``{safe}`` format.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tracekit import schema as s
from tracekit.reports import bokeh_load
from tracekit.reports import bokeh_plot as bp
from tracekit.reports import plotframes as pf

WIDTH = 1150
GROUP_COLORS = {  # fixed per communicator, so reports of different runs agree
    s.Group.TP: "#1f77b4", s.Group.ATTN_TP: "#ff7f0e", s.Group.ATTN_CP: "#8c564b",
    s.Group.MOE_EP: "#2ca02c", s.Group.MOE_TP: "#9467bd", s.Group.MOE_DP: "#e377c2",
    s.Group.DP: "#17becf", s.Group.PP: "#bcbd22", s.Group.WORLD: "#7f7f7f",
}

def root_name(key: str) -> str:
    """The bokeh root name of panel ``key`` (the page template embeds each root by name)."""
    return f"tracekit_{key}"


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
# a time in ms as the reports print it (tracekit.reports.fmt.ns): ms, µs or ns
_HOVER_MS = """
const f = (v, d) => v.toLocaleString("en-US", {minimumFractionDigits: d,
                                                maximumFractionDigits: d});
const ns = value * 1e6;
if (Math.abs(ns) >= 1e6) return f(value, 3) + " ms";
if (Math.abs(ns) >= 1e3) return f(ns / 1e3, 1) + " µs";
return f(ns, 0) + " ns";
"""
_GBPS_TICKS = _P + """
return tick >= 1 ? p(tick, 3) + " GB/s" : p(tick * 1000, 3) + " MB/s";
"""


def _formatter(code: str) -> Any:
    """This page's tick formatter running ``code`` (one model per code on a page)."""
    return bp.shared().formatter(code)


def bytes_ticks() -> Any:
    return _formatter(_BYTES_TICKS)


def ms_ticks() -> Any:
    return _formatter(_MS_TICKS)


def _log_ticks() -> Any:
    from bokeh.models import LogTicker

    return LogTicker(mantissas=[1, 2, 5])


def _fixed_ticks(ticks: list[int]) -> Any:
    from bokeh.models import FixedTicker

    return FixedTicker(ticks=ticks or [0])


def _rank_ticks(ranks: list[int]) -> list[int]:
    """Integer rank ticks: every rank up to 32, then a regular subset."""
    step = max(1, -(-len(ranks) // 32))
    return list(ranks[::step])


_FAINT = {"grid_line_alpha": 0.3}  # the grid lines of the time and log plots
_ZOOM_X = ("xwheel_zoom", "xpan", "box_zoom", "reset", "save")


def _quads(df: pd.DataFrame, tips: list[tuple[str, str]], height: int, ranks: list[int],
           line_width: float, color: Any = pf.COLOR, formatters: dict[str, Any] | None = None,
           ) -> Any:
    """Rectangles (x0..x1, y0..y1; ``color`` a colour column or a colour mapping) per rank,
    rank 0 on top, as a plain bokeh figure: holoviews would validate the colour of each of
    thousands of rectangles one by one, which took most of a big run's report time."""
    from bokeh.models import Quad, Range1d

    lo, hi = (min(ranks), max(ranks)) if ranks else (0, 0)
    fig = bp.figure(
        width=WIDTH, height=height, tools=_ZOOM_X, active_scroll="xwheel_zoom",
        x=bp.Axis("time since the trace start", formatter=ms_ticks(), grid=_FAINT),
        y=bp.Axis("rank", Range1d(hi + 0.5, lo - 0.5),  # inverted: rank 0 at the top
                  ticker=_fixed_ticks(_rank_ticks(ranks)), grid=_FAINT),
        name=root_name("timeline"))
    glyphs = bp.draw(fig, Quad(left=pf.X0, right=pf.X1, bottom=pf.Y0, top=pf.Y1,
                               fill_color=color, line_color=color, line_width=line_width),
                     bp.source(df))
    bp.hover(fig, [glyphs], tips, formatters)
    return fig


def timeline(sampled: pf.Sampled, ranks: list[int]) -> Any:
    bokeh_load.load()
    tips = tooltips([
        ("kernel", s.NAME), ("op", s.OP), ("bytes", pf.BYTES_TXT), ("group", s.GROUP),
        ("path", s.PATH), ("efficiency", pf.EFF_TXT), ("wait", pf.WAIT_TXT),
        ("duration", pf.DUR_TXT), ("rank", s.RANK)])
    return _quads(sampled.frame, tips, max(260, min(1400, 22 * len(ranks) + 80)), ranks, 0.5)


_CLASS_NAME = "return names[value] ?? String(value);"  # a class code's name (fixed names)


def occupancy(occ: Any, ranks: list[int]) -> Any:
    """Per rank, stacked busy share of each kernel class per time bin: one data source, the
    class sent as its small-integer code (binary, not a list of strings), its colour mapped
    from the code and its name, the share and the bin formatted in the browser's tooltip
    (no text column per rectangle)."""
    bokeh_load.load()
    from bokeh.models import CustomJSHover, LinearColorMapper

    from tracekit.reports import plotframes_agg as agg

    classes = list(agg.CLASS_COLORS)
    code = pd.Categorical(occ.frame[s.KERNEL_CLASS], categories=classes).codes
    frame = occ.frame.assign(**{s.KERNEL_CLASS: code.astype(np.int8),
                                s.RANK: occ.frame[s.RANK].astype(np.int32)})
    other = agg.CLASS_COLORS[s.KernelClass.OTHER]
    mapper = LinearColorMapper(palette=[agg.CLASS_COLORS[c] for c in classes], low=-0.5,
                               high=len(classes) - 0.5, low_color=other, high_color=other,
                               nan_color=other)
    color = {"field": s.KERNEL_CLASS, "transform": mapper}
    at = CustomJSHover(code=_HOVER_MS)
    name = CustomJSHover(code=_CLASS_NAME, args={"names": classes})
    tips = [*tooltips([("rank", s.RANK)]), ("class", f"@{{{s.KERNEL_CLASS}}}{{custom}}"),
            ("busy", f"@{{{agg.SHARE}}}{{0%}}"), ("from", f"@{{{pf.X0}}}{{custom}}"),
            ("to", f"@{{{pf.X1}}}{{custom}}")]
    return _quads(frame, tips, max(260, min(1400, 26 * len(ranks) + 80)), ranks, 0.6,
                  color=color, formatters={f"@{{{pf.X0}}}": at, f"@{{{pf.X1}}}": at,
                                           f"@{{{s.KERNEL_CLASS}}}": name})


def waterfall(wf: pd.DataFrame, bounds: pd.DataFrame) -> Any:
    """Per layer (one row each), the phases' parts end to end; a black tick marks the bound."""
    bokeh_load.load()
    from bokeh.models import Quad, Range1d, Segment

    from tracekit.reports import plotframes_agg as agg

    layers = sorted(int(v) for v in wf[s.LAYER].unique())
    df = wf.assign(**{pf.Y0: wf[s.LAYER] - 0.38, pf.Y1: wf[s.LAYER] + 0.38})
    lo, hi = (min(layers), max(layers)) if layers else (0, 0)
    fig = bp.figure(
        width=WIDTH, height=max(200, min(1400, 30 * len(layers) + 90)), tools=_ZOOM_X,
        active_scroll="xwheel_zoom",
        x=bp.Axis("time per rank within the layer", formatter=ms_ticks(), grid=_FAINT),
        y=bp.Axis("layer", Range1d(hi + 0.5, lo - 0.5),  # inverted: the first layer on top
                  ticker=_fixed_ticks(_rank_ticks(layers)), grid=_FAINT),
        name=root_name("waterfall"))
    rects = bp.draw(fig, Quad(left=agg.START_MS, right=agg.END_MS, bottom=pf.Y0, top=pf.Y1,
                              fill_color=pf.COLOR, line_color="white", line_width=1),
                    bp.source(df))
    bp.hover(fig, [rects], tooltips([
        ("layer", s.LAYER), ("phase", s.PHASE), ("part", agg.SEGMENT),
        ("time per rank", agg.MS_TXT), ("bound", agg.BOUND_TXT), ("paths", agg.PATHS)]))
    if len(bounds):
        b = bounds.assign(**{pf.Y0: bounds[s.LAYER] - 0.46, pf.Y1: bounds[s.LAYER] + 0.46})
        ticks = bp.draw(fig, Segment(x0=agg.BOUND_MS, y0=pf.Y0, x1=agg.BOUND_MS, y1=pf.Y1,
                                     line_color="black", line_width=3), bp.source(b))
        bp.hover(fig, [ticks], tooltips([
            ("bound of", s.PHASE), ("layer", s.LAYER), ("bound", agg.BOUND_TXT),
            ("paths", agg.PATHS)]))
    return fig


def phase_bars(parts: pd.DataFrame) -> Any:
    """Per phase, its parts stacked (one bar each, in the frame's order), legend on the right."""
    bokeh_load.load()
    from bokeh.models import DataRange1d, FactorRange, HoverTool, Legend, LegendItem, VBar

    phases = [str(p) for p in pd.unique(parts[s.PHASE].astype(str))]
    df = parts.assign(**{s.PHASE: parts[s.PHASE].astype(str)})
    ms = df[pf.MS_PER_RANK].astype(float).fillna(0.0)
    top = ms.groupby(df[s.PHASE], sort=False).cumsum()
    df = df.assign(**{"_bottom": top - ms, "_top": top, "_width": 0.8,
                      pf.COLOR: df[pf.PART].map(pf.PART_COLORS).fillna("#888888")})
    hover = HoverTool(tooltips=tooltips([("phase", s.PHASE), ("part", pf.PART),
                                         ("time per rank", pf.MS_PER_RANK)]))
    fig = bp.figure(
        width=WIDTH, height=380, tools=(hover, "save", "reset"),
        x=bp.Axis("phase", FactorRange(factors=phases), kind="categorical",
                  grid={"grid_line_color": None}),
        y=bp.Axis("time per rank", DataRange1d(start=0), formatter=ms_ticks()),
        name=root_name("phases"))
    bars = bp.draw(fig, VBar(x=s.PHASE, bottom="_bottom", top="_top", width="_width",
                             fill_color=pf.COLOR, line_color="white"), bp.source(df))
    hover.renderers = [bars]
    names = [str(p) for p in pd.unique(df[pf.PART])]
    index = {name: int(np.flatnonzero(df[pf.PART].to_numpy() == name)[0]) for name in names}
    fig.right.append(Legend(items=[LegendItem(label=name, renderers=[bars], index=index[name])
                                   for name in names]))
    return fig


def _log_range(lo: float, hi: float, must: tuple[float, ...] = ()) -> tuple[float, float]:
    values = [v for v in (lo, hi, *must) if v > 0 and np.isfinite(v)]
    return (min(values) / 1.6, max(values) * 1.6) if values else (0.1, 10.0)


def _log_figure(title: str, ylabel: str, yformatter: Any, x_range: tuple[float, float],
                y_range: tuple[float, float], xformatter: Any, ticker: Any) -> Any:
    """A log-log figure; its axes' ``ticker`` and the x axis' ``xformatter`` are models the
    caller shares between the figures of one panel (stateless: one model serialised, not
    one per axis)."""
    from bokeh.models import Range1d

    return bp.figure(
        width=WIDTH // 2, height=420, title=title,
        tools=("wheel_zoom", "pan", "box_zoom", "reset", "save"), active_scroll="wheel_zoom",
        x=bp.Axis("message size S (nccl-tests)", Range1d(*x_range), kind="log", ticker=ticker,
                  formatter=xformatter, grid=_FAINT),
        y=bp.Axis(ylabel, Range1d(*y_range), kind="log", ticker=ticker, formatter=yformatter,
                  grid=_FAINT))


XS, YS = "xs", "ys"  # a multi-line source: one list of x and of y per line


def _first_rows(keys: pd.Series, names: list[str]) -> list[int]:
    """Per name, the position of its first row in ``keys`` (a legend item's row)."""
    values = keys.to_numpy()
    return [int(np.flatnonzero(values == name)[0]) for name in names]


def efficiency(groups: pd.DataFrame) -> Any:
    """Left: efficiency (median, min-max whisker) per size; right: achieved and bound GB/s.

    Plain bokeh figures with one data source for the markers of every communicator and op
    (coloured per row, a legend item per key pointing at one of its rows) and one for the
    bound curves: the number of bokeh models, which the page's build time follows, does not
    grow with the number of keys."""
    bokeh_load.load()
    from bokeh.models import Legend, LegendItem, MultiLine, Row, Scatter, Segment, Span

    from tracekit.reports import plotframes_agg as agg

    keys = sorted(set(groups[pf.KEY]))
    cmap = {k: pf.PALETTE[i % len(pf.PALETTE)] for i, k in enumerate(keys)}
    order = groups[pf.KEY].map({k: i for i, k in enumerate(keys)}).to_numpy()
    df = groups.iloc[np.argsort(order, kind="stable")].reset_index(drop=True)
    df = df.assign(**{pf.COLOR: df[pf.KEY].map(cmap)})
    xr = _log_range(float(df[s.MSG_BYTES].min()), float(df[s.MSG_BYTES].max()))
    tips = tooltips([("group · op", pf.KEY), ("path", s.PATH), ("message size", pf.BYTES_TXT),
                     ("collective rows", agg.N), ("median efficiency", pf.EFF_TXT),
                     ("min - max", agg.RANGE_TXT)])
    eff_range = _log_range(float(df[agg.EFF_MIN].min()), float(df[agg.EFF_MAX].max()), (1.0,))
    bw_values = pd.concat([df[agg.BW_MIN], df[agg.BW_MAX], df[pf.BOUND_GBPS]]).astype(float)
    bw_range = _log_range(float(bw_values.min()), float(bw_values.max()))
    sizes, ticker = bytes_ticks(), _log_ticks()  # one model each for the four axes
    left = _log_figure("efficiency per message size (median, whisker min-max)",
                       "efficiency = bound / transfer (1.0 = at the bound)",
                       _formatter(_RATIO_TICKS), xr, eff_range, sizes, ticker)
    right = _log_figure("achieved (dots) and bound (dashed, diamonds) bandwidth",
                        "algorithm bandwidth S / time", _formatter(_GBPS_TICKS), xr, bw_range,
                        sizes, ticker)
    src = bp.source(df)
    bp.draw(left, Segment(x0=s.MSG_BYTES, y0=agg.EFF_MIN, x1=s.MSG_BYTES, y1=agg.EFF_MAX,
                          line_color=pf.COLOR, line_width=2, line_alpha=0.6), src)
    medians = bp.draw(left, _dots(agg.EFF_MED), src)
    bp.draw(right, Segment(x0=s.MSG_BYTES, y0=agg.BW_MIN, x1=s.MSG_BYTES, y1=agg.BW_MAX,
                           line_color=pf.COLOR, line_width=2, line_alpha=0.6), src)
    achieved = bp.draw(right, _dots(agg.BW_MED), src)
    bound = (df.groupby([pf.KEY, s.MSG_BYTES], sort=True)[pf.BOUND_GBPS].median()
             .reset_index())
    bound = bound.assign(**{pf.COLOR: bound[pf.KEY].map(cmap)})
    by_key = bound.groupby(pf.KEY, sort=True)
    curves = bp.draw(right, MultiLine(xs=XS, ys=YS, line_color=pf.COLOR, line_dash="dashed",
                                      line_width=2), bp.source(pd.DataFrame({
        XS: [g[s.MSG_BYTES].to_numpy() for _, g in by_key],
        YS: [g[pf.BOUND_GBPS].to_numpy() for _, g in by_key],
        pf.COLOR: [cmap[k] for k, _ in by_key]})))
    # fill_color: what bokeh.plotting gives a glyph without one (drawn with fill_alpha 0)
    bp.draw(right, Scatter(x=s.MSG_BYTES, y=pf.BOUND_GBPS, marker="diamond", size=12,
                           line_color=pf.COLOR, fill_color="#1f77b4", fill_alpha=0),
            bp.source(bound))
    first = _first_rows(df[pf.KEY], keys)
    left.center.append(Legend(location="bottom_right", items=[
        LegendItem(label=k, renderers=[medians], index=i) for k, i in zip(keys, first,
                                                                          strict=True)]))
    right.center.append(Legend(location="bottom_right", items=[
        item for n, (k, i) in enumerate(zip(keys, first, strict=True))
        for item in (LegendItem(label=f"{k} achieved", renderers=[achieved], index=i),
                     LegendItem(label=f"{k} bound", renderers=[curves], index=n))]))
    left.center.append(Span(location=1.0, dimension="width", line_color="#444444",
                            line_dash="dashed", line_width=1.5))
    bp.hover(left, [medians], tips)
    bp.hover(right, [achieved], tips)
    return Row(children=[left, right], name=root_name("efficiency"))


def _dots(y: str) -> Any:
    """The efficiency panel's markers: message size across, ``y`` up, coloured per row."""
    from bokeh.models import Scatter

    return Scatter(x=s.MSG_BYTES, y=y, size=9, fill_color=pf.COLOR, line_color=pf.COLOR,
                   hatch_color=pf.COLOR)


def a2a(data: pf.A2A) -> Any:
    """Left: the C[i][j] heat map (source rank i down, destination j across); right: bytes
    sent and received per rank."""
    bokeh_load.load()
    from bokeh.core.properties import value
    from bokeh.models import (
        ColorBar,
        DataRange1d,
        FactorRange,
        HoverTool,
        Legend,
        LegendItem,
        LinearColorMapper,
        Range1d,
        Rect,
        Row,
        VBar,
    )
    from bokeh.palettes import Viridis256
    from bokeh.transform import dodge

    ranks = sorted(int(r) for r in set(data.matrix[s.SRC_RANK]) | set(data.matrix[s.DST_RANK]))
    ticks = _fixed_ticks(_rank_ticks(ranks))  # one ticker for both axes
    lo, hi = (min(ranks), max(ranks)) if ranks else (0, 0)
    m = data.matrix.assign(**{s.MSG_BYTES: data.matrix[s.MSG_BYTES].astype(float)})
    mapper = LinearColorMapper(palette=Viridis256, low=float(m[s.MSG_BYTES].min()),
                               high=float(m[s.MSG_BYTES].max()))
    hover = HoverTool(tooltips=tooltips([(s.DST_RANK, s.DST_RANK), (s.SRC_RANK, s.SRC_RANK),
                                         (s.MSG_BYTES, s.MSG_BYTES)]))
    heat = bp.figure(
        width=WIDTH // 2 + 60, height=480, tools=(hover, "save", "reset"),
        title=f"C[i][j] bytes, summed over {data.instances} all-to-all instance(s)",
        x=bp.Axis("destination rank j", Range1d(lo - 0.5, hi + 0.5), ticker=ticks),
        y=bp.Axis("source rank i", Range1d(hi + 0.5, lo - 0.5), ticker=ticks))
    hover.renderers = [bp.draw(heat, Rect(
        x=s.DST_RANK, y=s.SRC_RANK, width=1, height=1, line_color=None,
        fill_color={"field": s.MSG_BYTES, "transform": mapper}), bp.source(m))]
    heat.right.append(ColorBar(color_mapper=mapper, formatter=bytes_ticks()))
    per = data.per_rank.assign(**{s.RANK: data.per_rank[s.RANK].astype(int).astype(str)})
    hover = HoverTool(tooltips=tooltips([(s.RANK, s.RANK), (s.SEND_BYTES, s.SEND_BYTES),
                                         (s.RECV_BYTES, s.RECV_BYTES)]))
    factors = FactorRange(factors=list(per[s.RANK]))
    bars = bp.figure(
        width=WIDTH // 2 - 60, height=480, tools=(hover, "save", "reset"),
        title="bytes sent and received per rank",
        x=bp.Axis("rank", factors, kind="categorical", grid={"grid_line_color": None},
                  props={"major_label_orientation": np.pi / 2}),
        y=bp.Axis("bytes", DataRange1d(start=0), formatter=bytes_ticks()))
    src = bp.source(per)
    hover.renderers = [
        bp.draw(bars, VBar(x=dodge(s.RANK, offset, range=factors), top=col, width=0.4,
                           fill_color=color, line_color=color, hatch_color=color), src)
        for col, offset, color in ((s.SEND_BYTES, -0.2, "#4c78a8"),
                                   (s.RECV_BYTES, 0.2, "#f58518"))]
    bars.center.append(Legend(items=[
        LegendItem(label=value(col), renderers=[r])
        for col, r in zip((s.SEND_BYTES, s.RECV_BYTES), hover.renderers, strict=True)]))
    return Row(children=[heat, bars], name=root_name("a2a"))
