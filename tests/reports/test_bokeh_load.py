"""bokeh loaded for the HTML report: lighter, and bokeh behaves as usual after."""

from __future__ import annotations

from collections.abc import Callable

CHECK = """
import inspect
from tracekit.reports import bokeh_load
bokeh_load.load()
bokeh_load.load()  # a second call finds everything loaded
import bokeh.models as bm
from bokeh.model import Model
from bokeh.plotting import figure
assert "*args" in str(inspect.signature(bm.Quad.__init__)), inspect.signature(bm.Quad.__init__)
assert [p[0].name for p in bm.Quad.parameters()][:2] == ["left", "right"]  # bokeh's again
assert "left" in str(inspect.signature(figure.quad))  # glyph methods: full signatures
fig = figure()
r = fig.scatter([1, 2], [3, 4])  # positional arguments reach the glyph
assert list(r.data_source.data["x"]) == [1, 2] and list(r.data_source.data["y"]) == [3, 4]

class Mine(Model):  # a model defined later is as bokeh makes it
    __module__ = "bokeh.models.mine"
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)

assert "name" in str(inspect.signature(Mine.__init__))
print("ok")
"""


def test_load_imports_bokeh_and_leaves_it_as_bokeh_makes_it(
        fresh_python: Callable[[str], None]) -> None:
    # GIVEN a fresh interpreter WHEN the report's bokeh is loaded THEN models build, glyph
    # methods take positional arguments, and later classes get their signatures
    fresh_python(CHECK)
