"""The HTML report's figures as BokehJS models (``tracekit.reports.bokehjs``).

A figure is what ``bokeh.plotting.figure`` makes (a ``Plot`` with an axis below and left, a
grid per axis and a toolbar above), each model written as bokeh would serialise it: only the
attributes that differ from BokehJS' defaults, plus the few bokeh always sends (a box zoom's
overlay, a wheel zoom's renderers, a hover tool's ``sort_by``, a selection's empty indices).
Renderers leave their selection, non-selection and muted looks to BokehJS ("auto": nothing on
the page selects or mutes).

Within one page (``page()``), the stateless models every figure would otherwise make its own
copy of are one model each, the others referring to it: the axes' label policy
(``AllLabels``), the renderers' view filter (``AllIndices``), the data sources' selection
policy (``UnionRenderers``), the linear axes' ``BasicTicker`` and each tick formatter's code.
Models with state in the browser (scales, ranges, tools, selections, views, number
formatters that remember their precision) stay one per use.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tracekit.reports.bokehjs import Map, Model

AXIS_TYPES = ("linear", "log", "categorical")
MANTISSAS = [1, 2, 5]


def _stateless(name: str) -> Model:
    """A new stateless model ``name`` as bokeh writes it."""
    return Model(name, mantissas=list(MANTISSAS)) if name == "BasicTicker" else Model(name)


@dataclass
class Shared:
    """The stateless models of one page, made on first use."""

    models: dict[str, Model] = field(default_factory=dict)
    formatters: dict[str, Model] = field(default_factory=dict)

    def get(self, key: str) -> Model:
        if key not in self.models:
            self.models[key] = _stateless(key)
        return self.models[key]

    def formatter(self, code: str) -> Model:
        """The ``CustomJSTickFormatter`` running ``code`` (fixed code, no trace string)."""
        if code not in self.formatters:
            self.formatters[code] = Model("CustomJSTickFormatter", code=code)
        return self.formatters[code]


_PAGE: contextvars.ContextVar[Shared | None] = contextvars.ContextVar("tracekit_page",
                                                                      default=None)


@contextlib.contextmanager
def page() -> Iterator[Shared]:
    """The figures made inside share their stateless models (one BokehJS document)."""
    token = _PAGE.set(Shared())
    try:
        yield _PAGE.get()  # type: ignore[misc]
    finally:
        _PAGE.reset(token)


def shared() -> Shared:
    """This page's shared models; outside ``page()`` a new set (nothing shared)."""
    current = _PAGE.get()
    return Shared() if current is None else current


def _box_overlay() -> Model:
    """The box zoom's selection box (bokeh's ``DEFAULT_BOX_OVERLAY``, as it serialises it)."""
    nan = float("nan")
    return Model(
        "BoxAnnotation", syncable=False, line_color="black", line_alpha=1.0, line_width=2,
        line_dash=[4, 4], fill_color="lightgrey", fill_alpha=0.5, level="overlay",
        visible=False, left=nan, right=nan, top=nan, bottom=nan, left_units="canvas",
        right_units="canvas", top_units="canvas", bottom_units="canvas",
        handles=Model("BoxInteractionHandles", all=Model(
            "AreaVisuals", fill_color="white", hover_fill_color="lightgray")))


def _tool(name: str) -> Model:
    makers = {
        "xwheel_zoom": lambda: Model("WheelZoomTool", dimensions="width", renderers="auto"),
        "wheel_zoom": lambda: Model("WheelZoomTool", renderers="auto"),
        "xpan": lambda: Model("PanTool", dimensions="width"),
        "pan": lambda: Model("PanTool"),
        "box_zoom": lambda: Model("BoxZoomTool", dimensions="both", overlay=_box_overlay()),
        "reset": lambda: Model("ResetTool"),
        "save": lambda: Model("SaveTool"),
    }
    return makers[name]()


def _axis(axis: Axis) -> Model:
    common = shared()
    kind = {"log": ("LogAxis", "LogTicker", "LogTickFormatter"),
            "categorical": ("CategoricalAxis", "CategoricalTicker",
                            "CategoricalTickFormatter")}.get(axis.kind)
    if kind is None:
        name, ticker, formatter = "LinearAxis", common.get("BasicTicker"), "BasicTickFormatter"
    else:
        name, ticker, formatter = kind[0], Model(kind[1]), kind[2]
    props: dict[str, Any] = {
        "ticker": axis.ticker or ticker, "formatter": axis.formatter or Model(formatter)}
    if axis.label:
        props["axis_label"] = axis.label
    props.update(axis.props)
    props["major_label_policy"] = common.get("AllLabels")
    return Model(name, **props)


def _scale(kind: str) -> Model:
    return Model({"log": "LogScale", "categorical": "CategoricalScale"}.get(kind, "LinearScale"))


@dataclass(frozen=True)
class Axis:
    """One axis of a figure: its label, range (None: fitted to the data), kind, ticker and
    formatter (None: bokeh's default for the kind)."""

    label: str
    range: Model | None = None
    kind: str = "linear"
    ticker: Model | None = None
    formatter: Model | None = None
    grid: dict[str, Any] = field(default_factory=dict)  # the grid line's properties
    props: dict[str, Any] = field(default_factory=dict)  # more of the axis' properties


def figure(*, width: int, height: int, x: Axis, y: Axis, tools: Sequence[str | Model],
           active_scroll: str | None = None, title: str = "", name: str | None = None,
           ) -> Model:
    """A plot as ``bokeh.plotting.figure`` makes it (axis below and left, a grid per axis,
    a toolbar above with ``tools`` in order: names or tool models; ``active_scroll`` the
    name of the active scroll tool), canvas backend."""
    for axis in (x, y):
        if axis.kind not in AXIS_TYPES:
            raise ValueError(f"axis kind {axis.kind!r} is not one of {AXIS_TYPES}")
    made = [_tool(t) if isinstance(t, str) else t for t in tools]
    toolbar = Model("Toolbar", tools=made)
    if active_scroll:
        toolbar["active_scroll"] = made[list(tools).index(active_scroll)]
    x_axis, y_axis = _axis(x), _axis(y)
    props: dict[str, Any] = {} if name is None else {"name": name}
    props.update(
        width=width, height=height,
        x_range=x.range if x.range is not None else Model("DataRange1d"),
        y_range=y.range if y.range is not None else Model("DataRange1d"),
        x_scale=_scale(x.kind), y_scale=_scale(y.kind),
        title=Model("Title", text=title) if title else Model("Title"),
        renderers=[], toolbar=toolbar, toolbar_location="above", left=[y_axis],
        below=[x_axis],
        center=[Model("Grid", axis=x_axis, **x.grid),
                Model("Grid", dimension=1, axis=y_axis, **y.grid)])
    return Model("Plot", **props)


def source(df: pd.DataFrame) -> Model:
    """A data source of ``df``'s columns (numpy arrays, sent as binary)."""
    return Model("ColumnDataSource",
                 selected=Model("Selection", indices=[], line_indices=[]),
                 selection_policy=shared().get("UnionRenderers"),
                 data=Map({str(c): df[c].to_numpy() for c in df.columns}))


def draw(plot: Model, glyph: Model, data: Model) -> Model:
    """``glyph`` drawn on ``plot`` from the data source ``data``; its selection, non-selection
    and muted looks left to BokehJS ("auto", the defaults: nothing on the page selects or
    mutes)."""
    renderer = Model("GlyphRenderer", data_source=data,
                     view=Model("CDSView", filter=shared().get("AllIndices")), glyph=glyph)
    plot.append("renderers", renderer)
    return renderer


def hover_tool(tooltips: list[tuple[str, str]], renderers: list[Model] | None = None,
               formatters: dict[str, Model] | None = None) -> Model:
    """A hover tool showing ``tooltips`` (label, field) over ``renderers`` (None: set later,
    ``tool["renderers"] = [...]``)."""
    tool = Model("HoverTool")
    if renderers is not None:
        tool["renderers"] = renderers
    tool["tooltips"] = [list(pair) for pair in tooltips]
    if formatters:
        tool["formatters"] = Map(formatters)
    tool["sort_by"] = None
    return tool


def hover(plot: Model, renderers: list[Model], tooltips: list[tuple[str, str]],
          formatters: dict[str, Model] | None = None) -> Model:
    """A hover tool over ``renderers``, appended to ``plot``'s toolbar."""
    tool = hover_tool(tooltips, renderers, formatters)
    plot["toolbar"].append("tools", tool)
    return tool
