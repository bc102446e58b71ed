"""The HTML report's plots: BokehJS figures written as models (``bokeh_plot``, ``bokehjs``;
no holoviews and no bokeh Python models: importing and building those took longer than the
rest of the report).

Input frames come from ``plotframes`` (pure); this module only draws. Hover tooltips are
(label, "@column") pairs: BokehJS inserts those values as escaped text, never as HTML, so a
kernel named ``<script>...`` shows as written. No tooltip uses the ``{safe}`` format.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tracekit import schema as s
from tracekit.reports import bokeh_plot as bp
from tracekit.reports import plotframes as pf
from tracekit.reports.bokehjs import Map, Model, field, value

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


def _formatter(code: str) -> Model:
    """This page's tick formatter running ``code`` (one model per code on a page)."""
    return bp.shared().formatter(code)


def bytes_ticks() -> Model:
    return _formatter(_BYTES_TICKS)


def ms_ticks() -> Model:
    return _formatter(_MS_TICKS)


def _log_ticks() -> Model:
    return Model("LogTicker", mantissas=list(bp.MANTISSAS))


def _fixed_ticks(ticks: list[int]) -> Model:
    return Model("FixedTicker", ticks=ticks or [0], minor_ticks=[])


def _range(start: float, end: float) -> Model:
    return Model("Range1d", start=float(start), end=float(end))


def _factors(factors: list[str]) -> Model:
    return Model("FactorRange", factors=factors)


def _from_zero() -> Model:
    return Model("DataRange1d", start=0)


def _legend(items: list[Model], location: str | None = None) -> Model:
    return Model("Legend", **({} if location is None else {"location": location}),
                 items=items)


def _item(label: str, renderers: list[Model], index: int | None = None) -> Model:
    return Model("LegendItem", label=value(label), renderers=renderers,
                 **({} if index is None else {"index": index}))


def _rank_ticks(ranks: list[int]) -> list[int]:
    """Integer rank ticks: every rank up to 32, then a regular subset."""
    step = max(1, -(-len(ranks) // 32))
    return list(ranks[::step])


_FAINT = {"grid_line_alpha": 0.3}  # the grid lines of the time and log plots
_ZOOM_X = ("xwheel_zoom", "xpan", "box_zoom", "reset", "save")


def _quads(df: pd.DataFrame, tips: list[tuple[str, str]], height: int, ranks: list[int],
           line_width: float, color: dict[str, Any] | None = None,
           formatters: dict[str, Model] | None = None) -> Model:
    """Rectangles (x0..x1, y0..y1; ``color`` a colour spec, None: the colour column) per rank,
    rank 0 on top: holoviews would validate the colour of each of thousands of rectangles
    one by one, which took most of a big run's report time."""
    lo, hi = (min(ranks), max(ranks)) if ranks else (0, 0)
    fig = bp.figure(
        width=WIDTH, height=height, tools=_ZOOM_X, active_scroll="xwheel_zoom",
        x=bp.Axis("time since the trace start", formatter=ms_ticks(), grid=_FAINT),
        y=bp.Axis("rank", _range(hi + 0.5, lo - 0.5),  # inverted: rank 0 at the top
                  ticker=_fixed_ticks(_rank_ticks(ranks)), grid=_FAINT),
        name=root_name("timeline"))
    spec = field(pf.COLOR) if color is None else color
    glyphs = bp.draw(fig, Model("Quad", left=field(pf.X0), right=field(pf.X1),
                                bottom=field(pf.Y0), top=field(pf.Y1), line_color=spec,
                                line_width=value(line_width), fill_color=spec),
                     bp.source(df))
    bp.hover(fig, [glyphs], tips, formatters)
    return fig


def timeline(sampled: pf.Sampled, ranks: list[int]) -> Model:
    tips = tooltips([
        ("kernel", s.NAME), ("op", s.OP), ("bytes", pf.BYTES_TXT), ("group", s.GROUP),
        ("path", s.PATH), ("efficiency", pf.EFF_TXT), ("wait", pf.WAIT_TXT),
        ("duration", pf.DUR_TXT), ("rank", s.RANK)])
    return _quads(sampled.frame, tips, max(260, min(1400, 22 * len(ranks) + 80)), ranks, 0.5)


_CLASS_NAME = "return names[value] ?? String(value);"  # a class code's name (fixed names)


def occupancy(occ: Any, ranks: list[int]) -> Model:
    """Per rank, stacked busy share of each kernel class per time bin: one data source, the
    class sent as its small-integer code (binary, not a list of strings), its colour mapped
    from the code and its name, the share and the bin formatted in the browser's tooltip
    (no text column per rectangle)."""
    from tracekit.reports import plotframes_agg as agg

    classes = list(agg.CLASS_COLORS)
    code = pd.Categorical(occ.frame[s.KERNEL_CLASS], categories=classes).codes
    frame = occ.frame.assign(**{s.KERNEL_CLASS: code.astype(np.int8),
                                s.RANK: occ.frame[s.RANK].astype(np.int32)})
    other = agg.CLASS_COLORS[s.KernelClass.OTHER]
    mapper = Model("LinearColorMapper", palette=[agg.CLASS_COLORS[c] for c in classes],
                   nan_color=other, low=-0.5, high=len(classes) - 0.5, low_color=other,
                   high_color=other)
    color = field(s.KERNEL_CLASS, mapper)
    at = Model("CustomJSHover", code=_HOVER_MS)
    name = Model("CustomJSHover", args=Map({"names": classes}), code=_CLASS_NAME)
    tips = [*tooltips([("rank", s.RANK)]), ("class", f"@{{{s.KERNEL_CLASS}}}{{custom}}"),
            ("busy", f"@{{{agg.SHARE}}}{{0%}}"), ("from", f"@{{{pf.X0}}}{{custom}}"),
            ("to", f"@{{{pf.X1}}}{{custom}}")]
    return _quads(frame, tips, max(260, min(1400, 26 * len(ranks) + 80)), ranks, 0.6,
                  color=color, formatters={f"@{{{pf.X0}}}": at, f"@{{{pf.X1}}}": at,
                                           f"@{{{s.KERNEL_CLASS}}}": name})


def waterfall(wf: pd.DataFrame, bounds: pd.DataFrame) -> Model:
    """Per layer (one row each), the phases' parts end to end; a black tick marks the bound."""
    from tracekit.reports import plotframes_agg as agg

    layers = sorted(int(v) for v in wf[s.LAYER].unique())
    df = wf.assign(**{pf.Y0: wf[s.LAYER] - 0.38, pf.Y1: wf[s.LAYER] + 0.38})
    lo, hi = (min(layers), max(layers)) if layers else (0, 0)
    fig = bp.figure(
        width=WIDTH, height=max(200, min(1400, 30 * len(layers) + 90)), tools=_ZOOM_X,
        active_scroll="xwheel_zoom",
        x=bp.Axis("time per rank within the layer", formatter=ms_ticks(), grid=_FAINT),
        y=bp.Axis("layer", _range(hi + 0.5, lo - 0.5),  # inverted: the first layer on top
                  ticker=_fixed_ticks(_rank_ticks(layers)), grid=_FAINT),
        name=root_name("waterfall"))
    rects = bp.draw(fig, Model("Quad", left=field(agg.START_MS), right=field(agg.END_MS),
                               bottom=field(pf.Y0), top=field(pf.Y1), line_color=value("white"),
                               fill_color=field(pf.COLOR)), bp.source(df))
    bp.hover(fig, [rects], tooltips([
        ("layer", s.LAYER), ("phase", s.PHASE), ("part", agg.SEGMENT),
        ("time per rank", agg.MS_TXT), ("bound", agg.BOUND_TXT), ("paths", agg.PATHS)]))
    if len(bounds):
        b = bounds.assign(**{pf.Y0: bounds[s.LAYER] - 0.46, pf.Y1: bounds[s.LAYER] + 0.46})
        ticks = bp.draw(fig, Model("Segment", x0=field(agg.BOUND_MS), y0=field(pf.Y0),
                                   x1=field(agg.BOUND_MS), y1=field(pf.Y1),
                                   line_width=value(3)), bp.source(b))
        bp.hover(fig, [ticks], tooltips([
            ("bound of", s.PHASE), ("layer", s.LAYER), ("bound", agg.BOUND_TXT),
            ("paths", agg.PATHS)]))
    return fig


def phase_bars(parts: pd.DataFrame) -> Model:
    """Per phase, its parts stacked (one bar each, in the frame's order), legend on the right."""
    phases = [str(p) for p in pd.unique(parts[s.PHASE].astype(str))]
    df = parts.assign(**{s.PHASE: parts[s.PHASE].astype(str)})
    ms = df[pf.MS_PER_RANK].astype(float).fillna(0.0)
    top = ms.groupby(df[s.PHASE], sort=False).cumsum()
    df = df.assign(**{"_bottom": top - ms, "_top": top, "_width": 0.8,
                      pf.COLOR: df[pf.PART].map(pf.PART_COLORS).fillna("#888888")})
    hover = bp.hover_tool(tooltips([("phase", s.PHASE), ("part", pf.PART),
                                    ("time per rank", pf.MS_PER_RANK)]))
    fig = bp.figure(
        width=WIDTH, height=380, tools=(hover, "save", "reset"),
        x=bp.Axis("phase", _factors(phases), kind="categorical",
                  grid={"grid_line_color": None}),
        y=bp.Axis("time per rank", _from_zero(), formatter=ms_ticks()),
        name=root_name("phases"))
    bars = bp.draw(fig, Model("VBar", x=field(s.PHASE), width=field("_width"),
                              bottom=field("_bottom"), top=field("_top"),
                              line_color=value("white"), fill_color=field(pf.COLOR)),
                   bp.source(df))
    hover["renderers"] = [bars]
    names = [str(p) for p in pd.unique(df[pf.PART])]
    index = {name: int(np.flatnonzero(df[pf.PART].to_numpy() == name)[0]) for name in names}
    fig.append("right", _legend([_item(name, [bars], index[name]) for name in names]))
    return fig


def _log_range(lo: float, hi: float, must: tuple[float, ...] = ()) -> tuple[float, float]:
    values = [v for v in (lo, hi, *must) if v > 0 and np.isfinite(v)]
    return (min(values) / 1.6, max(values) * 1.6) if values else (0.1, 10.0)


def _log_figure(title: str, ylabel: str, yformatter: Any, x_range: tuple[float, float],
                y_range: tuple[float, float], xformatter: Any, ticker: Any) -> Model:
    """A log-log figure; its axes' ``ticker`` and the x axis' ``xformatter`` are models the
    caller shares between the figures of one panel (stateless: one model serialised, not
    one per axis)."""
    return bp.figure(
        width=WIDTH // 2, height=420, title=title,
        tools=("wheel_zoom", "pan", "box_zoom", "reset", "save"), active_scroll="wheel_zoom",
        x=bp.Axis("message size S (nccl-tests)", _range(*x_range), kind="log", ticker=ticker,
                  formatter=xformatter, grid=_FAINT),
        y=bp.Axis(ylabel, _range(*y_range), kind="log", ticker=ticker, formatter=yformatter,
                  grid=_FAINT))


XS, YS = "xs", "ys"  # a multi-line source: one list of x and of y per line


def _first_rows(keys: pd.Series, names: list[str]) -> list[int]:
    """Per name, the position of its first row in ``keys`` (a legend item's row)."""
    values = keys.to_numpy()
    return [int(np.flatnonzero(values == name)[0]) for name in names]


def efficiency(groups: pd.DataFrame) -> Model:
    """Left: efficiency (median, min-max whisker) per size; right: achieved and bound GB/s.

    Figures with one data source for the markers of every communicator and op (coloured per
    row, a legend item per key pointing at one of its rows) and one for the bound curves:
    the number of models, which the page's size and draw time follow, does not
    grow with the number of keys."""
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
    bp.draw(left, _whisker(agg.EFF_MIN, agg.EFF_MAX), src)
    medians = bp.draw(left, _dots(agg.EFF_MED), src)
    bp.draw(right, _whisker(agg.BW_MIN, agg.BW_MAX), src)
    achieved = bp.draw(right, _dots(agg.BW_MED), src)
    bound = (df.groupby([pf.KEY, s.MSG_BYTES], sort=True)[pf.BOUND_GBPS].median()
             .reset_index())
    bound = bound.assign(**{pf.COLOR: bound[pf.KEY].map(cmap)})
    by_key = bound.groupby(pf.KEY, sort=True)
    curves = bp.draw(right, Model("MultiLine", xs=field(XS), ys=field(YS),
                                  line_color=field(pf.COLOR), line_width=value(2),
                                  line_dash=value("dashed")), bp.source(pd.DataFrame({
        XS: [g[s.MSG_BYTES].to_numpy() for _, g in by_key],
        YS: [g[pf.BOUND_GBPS].to_numpy() for _, g in by_key],
        pf.COLOR: [cmap[k] for k, _ in by_key]})))
    # fill_color: what bokeh.plotting gives a glyph without one (drawn with fill_alpha 0)
    bp.draw(right, Model("Scatter", x=field(s.MSG_BYTES), y=field(pf.BOUND_GBPS),
                         size=value(12), line_color=field(pf.COLOR),
                         fill_color=value("#1f77b4"), fill_alpha=value(0),
                         marker=value("diamond")), bp.source(bound))
    first = _first_rows(df[pf.KEY], keys)
    left.append("center", _legend([_item(k, [medians], i)
                                   for k, i in zip(keys, first, strict=True)], "bottom_right"))
    right.append("center", _legend([
        item for n, (k, i) in enumerate(zip(keys, first, strict=True))
        for item in (_item(f"{k} achieved", [achieved], i), _item(f"{k} bound", [curves], n))],
        "bottom_right"))
    # bokeh writes the line dash "dashed" of a Span as its pattern [6]
    left.append("center", Model("Span", location=1.0, line_color="#444444", line_width=1.5,
                                line_dash=[6]))
    bp.hover(left, [medians], tips)
    bp.hover(right, [achieved], tips)
    return Model("Row", name=root_name("efficiency"), children=[left, right])


def _whisker(low: str, high: str) -> Model:
    """The efficiency panel's min-max whisker at each message size, coloured per row."""
    return Model("Segment", x0=field(s.MSG_BYTES), y0=field(low), x1=field(s.MSG_BYTES),
                 y1=field(high), line_color=field(pf.COLOR), line_alpha=value(0.6),
                 line_width=value(2))


def _dots(y: str) -> Model:
    """The efficiency panel's markers: message size across, ``y`` up, coloured per row."""
    return Model("Scatter", x=field(s.MSG_BYTES), y=field(y), size=value(9),
                 line_color=field(pf.COLOR), fill_color=field(pf.COLOR),
                 hatch_color=field(pf.COLOR))


def _viridis() -> list[str]:
    """The 256 colours of the viridis map (the palette bokeh names Viridis256)."""
    from importlib.resources import files

    text = files("tracekit.reports").joinpath("data/viridis256.txt").read_text("ascii")
    return text.split()


def a2a(data: pf.A2A) -> Model:
    """Left: the C[i][j] heat map (source rank i down, destination j across); right: bytes
    sent and received per rank."""
    ranks = sorted(int(r) for r in set(data.matrix[s.SRC_RANK]) | set(data.matrix[s.DST_RANK]))
    ticks = _fixed_ticks(_rank_ticks(ranks))  # one ticker for both axes
    lo, hi = (min(ranks), max(ranks)) if ranks else (0, 0)
    m = data.matrix.assign(**{s.MSG_BYTES: data.matrix[s.MSG_BYTES].astype(float)})
    mapper = Model("LinearColorMapper", palette=_viridis(), low=float(m[s.MSG_BYTES].min()),
                   high=float(m[s.MSG_BYTES].max()))
    hover = bp.hover_tool(tooltips([(s.DST_RANK, s.DST_RANK), (s.SRC_RANK, s.SRC_RANK),
                                    (s.MSG_BYTES, s.MSG_BYTES)]))
    heat = bp.figure(
        width=WIDTH // 2 + 60, height=480, tools=(hover, "save", "reset"),
        title=f"C[i][j] bytes, summed over {data.instances} all-to-all instance(s)",
        x=bp.Axis("destination rank j", _range(lo - 0.5, hi + 0.5), ticker=ticks),
        y=bp.Axis("source rank i", _range(hi + 0.5, lo - 0.5), ticker=ticks))
    hover["renderers"] = [bp.draw(heat, Model(
        "Rect", x=field(s.DST_RANK), y=field(s.SRC_RANK), width=value(1), height=value(1),
        line_color=value(None), fill_color=field(s.MSG_BYTES, mapper)), bp.source(m))]
    heat.append("right", Model("ColorBar", formatter=bytes_ticks(),
                               major_label_policy=Model("NoOverlap"), color_mapper=mapper))
    per = data.per_rank.assign(**{s.RANK: data.per_rank[s.RANK].astype(int).astype(str)})
    hover = bp.hover_tool(tooltips([(s.RANK, s.RANK), (s.SEND_BYTES, s.SEND_BYTES),
                                    (s.RECV_BYTES, s.RECV_BYTES)]))
    factors = _factors(list(per[s.RANK]))
    bars = bp.figure(
        width=WIDTH // 2 - 60, height=480, tools=(hover, "save", "reset"),
        title="bytes sent and received per rank",
        x=bp.Axis("rank", factors, kind="categorical", grid={"grid_line_color": None},
                  props={"major_label_orientation": np.pi / 2}),
        y=bp.Axis("bytes", _from_zero(), formatter=bytes_ticks()))
    src = bp.source(per)
    drawn = [
        bp.draw(bars, Model("VBar", x=field(s.RANK, Model("Dodge", value=offset, range=factors)),
                            width=value(0.4), top=field(col), line_color=value(color),
                            fill_color=value(color), hatch_color=value(color)), src)
        for col, offset, color in ((s.SEND_BYTES, -0.2, "#4c78a8"),
                                   (s.RECV_BYTES, 0.2, "#f58518"))]
    hover["renderers"] = drawn
    bars.append("center", _legend([
        _item(col, [r]) for col, r in zip((s.SEND_BYTES, s.RECV_BYTES), drawn, strict=True)]))
    return Model("Row", name=root_name("a2a"), children=[heat, bars])
