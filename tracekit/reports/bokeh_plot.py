"""The HTML report's figures built from ``bokeh.models`` directly, without ``bokeh.plotting``.

``bokeh.plotting.figure`` makes, per figure, a default axis ticker, toolbar and hover tool
that the report then replaces, and per glyph a non-selection and a muted glyph that it drops
(bokehjs draws those itself, "auto"); importing it builds ~100 glyph-method signatures. Here
each model is made once, as it ends up: the same document as ``figure`` would give, model for
model (bokehjs' ``Figure`` is its ``Plot`` with no property or behaviour of its own), less
the models that are built only to be thrown away.

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

from tracekit.reports import bokeh_load

AXIS_TYPES = ("linear", "log", "categorical")


@dataclass
class Shared:
    """The stateless models of one page, made on first use."""

    models: dict[str, Any] = field(default_factory=dict)
    formatters: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str) -> Any:
        if key not in self.models:
            import bokeh.models as bm

            self.models[key] = getattr(bm, key)()
        return self.models[key]

    def formatter(self, code: str) -> Any:
        """The ``CustomJSTickFormatter`` running ``code`` (fixed code, no trace string)."""
        if code not in self.formatters:
            from bokeh.models import CustomJSTickFormatter

            self.formatters[code] = CustomJSTickFormatter(code=code)
        return self.formatters[code]


_PAGE: contextvars.ContextVar[Shared | None] = contextvars.ContextVar("tracekit_page",
                                                                      default=None)


@contextlib.contextmanager
def page() -> Iterator[Shared]:
    """The figures made inside share their stateless models (one bokeh document)."""
    token = _PAGE.set(Shared())
    try:
        yield _PAGE.get()  # type: ignore[misc]
    finally:
        _PAGE.reset(token)


def shared() -> Shared:
    """This page's shared models; outside ``page()`` a new set (nothing shared)."""
    current = _PAGE.get()
    return Shared() if current is None else current


def _tool(name: str) -> Any:
    import bokeh.models as bm

    makers = {
        "xwheel_zoom": lambda: bm.WheelZoomTool(dimensions="width"),
        "wheel_zoom": lambda: bm.WheelZoomTool(dimensions="both"),
        "xpan": lambda: bm.PanTool(dimensions="width"),
        "pan": lambda: bm.PanTool(dimensions="both"),
        "box_zoom": lambda: bm.BoxZoomTool(dimensions="both"),
        "reset": bm.ResetTool,
        "save": bm.SaveTool,
    }
    return makers[name]()


def _axis(axis: Axis) -> Any:
    import bokeh.models as bm

    common = shared()
    props = {"axis_label": axis.label, "major_label_policy": common.get("AllLabels"),
             **axis.props}
    if axis.kind == "log":
        return bm.LogAxis(ticker=axis.ticker or bm.LogTicker(),
                          formatter=axis.formatter or bm.LogTickFormatter(), **props)
    if axis.kind == "categorical":
        return bm.CategoricalAxis(ticker=axis.ticker or bm.CategoricalTicker(),
                                  formatter=axis.formatter or bm.CategoricalTickFormatter(),
                                  **props)
    return bm.LinearAxis(ticker=axis.ticker or common.get("BasicTicker"),
                         formatter=axis.formatter or bm.BasicTickFormatter(), **props)


def _scale(kind: str) -> Any:
    import bokeh.models as bm

    return {"log": bm.LogScale, "categorical": bm.CategoricalScale}.get(kind, bm.LinearScale)()


@dataclass(frozen=True)
class Axis:
    """One axis of a figure: its label, range (None: fitted to the data), kind, ticker and
    formatter (None: bokeh's default for the kind)."""

    label: str
    range: Any = None
    kind: str = "linear"
    ticker: Any = None
    formatter: Any = None
    grid: dict[str, Any] = field(default_factory=dict)  # the grid line's properties
    props: dict[str, Any] = field(default_factory=dict)  # more of the axis' properties


def figure(*, width: int, height: int, x: Axis, y: Axis, tools: Sequence[str | Any],
           active_scroll: str | None = None, title: str = "", name: str | None = None,
           ) -> Any:
    """A plot as ``bokeh.plotting.figure`` makes it (axis below and left, a grid per axis,
    a toolbar above with ``tools`` in order: names or tool models; ``active_scroll`` the
    name of the active scroll tool), canvas backend."""
    bokeh_load.load()
    import bokeh.models as bm

    for axis in (x, y):
        if axis.kind not in AXIS_TYPES:
            raise ValueError(f"axis kind {axis.kind!r} is not one of {AXIS_TYPES}")
    made = [_tool(t) if isinstance(t, str) else t for t in tools]
    active = made[list(tools).index(active_scroll)] if active_scroll else "auto"
    x_axis, y_axis = _axis(x), _axis(y)
    extra = {} if name is None else {"name": name}
    return bm.Plot(
        width=width, height=height, title=bm.Title(text=title),
        x_range=x.range if x.range is not None else bm.DataRange1d(),
        y_range=y.range if y.range is not None else bm.DataRange1d(),
        x_scale=_scale(x.kind), y_scale=_scale(y.kind),
        below=[x_axis], left=[y_axis],
        center=[bm.Grid(dimension=0, axis=x_axis, **x.grid),
                bm.Grid(dimension=1, axis=y_axis, **y.grid)],
        toolbar=bm.Toolbar(tools=made, active_scroll=active), toolbar_location="above",
        output_backend="canvas", **extra)


def source(df: pd.DataFrame) -> Any:
    """A data source of ``df``'s columns (numpy arrays, sent as binary)."""
    from bokeh.models import ColumnDataSource

    return ColumnDataSource(data={str(c): df[c].to_numpy() for c in df.columns},
                            selection_policy=shared().get("UnionRenderers"))


def draw(plot: Any, glyph: Any, data: Any) -> Any:
    """``glyph`` drawn on ``plot`` from the data source ``data``; its selection, non-selection
    and muted looks left to bokehjs ("auto", the defaults: nothing on the page selects or
    mutes)."""
    from bokeh.models import CDSView, GlyphRenderer

    renderer = GlyphRenderer(glyph=glyph, data_source=data,
                             view=CDSView(filter=shared().get("AllIndices")))
    plot.renderers.append(renderer)
    return renderer


def hover(plot: Any, renderers: list[Any], tooltips: list[tuple[str, str]],
          formatters: dict[str, Any] | None = None) -> Any:
    """A hover tool over ``renderers``, appended to ``plot``'s toolbar."""
    from bokeh.models import HoverTool

    tool = HoverTool(renderers=renderers, tooltips=tooltips, **(
        {"formatters": formatters} if formatters else {}))
    plot.toolbar.tools.append(tool)
    return tool
