"""The BokehJS documents tracekit writes without bokeh: the document bokeh writes for the same
models, value for value, and a page that loads no bokeh module."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
from base64 import b64decode
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tracekit import reports
from tracekit.reports import bokeh_plot, bokehjs
from tracekit.reports import html as html_report
from tracekit.reports.bokehjs import Map, Model, field, value


def _ours(roots: list[Model]) -> dict[str, Any]:
    doc, _ = bokehjs.document(roots, title="t", version="0")
    return json.loads(bokehjs.to_json(doc))


def _roots(analysis: Any) -> list[Model]:
    with bokeh_plot.page():
        return [r for p in html_report.panels(analysis) for r in p.roots]


@pytest.mark.parametrize("case", ["full", "binned", "hostile"])
def test_the_page_document_is_the_one_bokeh_writes(case, make_analysis, bokeh_oracle):
    # GIVEN every plot of a report: 8 ranks, 64 ranks past the timeline budget (binned
    # occupancy), and trace strings carrying a script
    kwargs = {"full": {}, "binned": {"n_ranks": 64, "layers": 61, "steps": 2},
              "hostile": {"evil": "<script>alert(1)</script>"}}[case]
    roots = _roots(make_analysis(**kwargs))
    # WHEN tracekit writes their document, and bokeh writes the same models as its own
    ours = bokeh_oracle.graph(_ours(roots))
    theirs = bokeh_oracle.graph(bokeh_oracle.bokeh_document(roots))
    # THEN both are the same models with the same attributes, shared where bokeh shares
    # them, arrays byte for byte
    assert ours[0] == theirs[0]
    assert ours[1] == theirs[1]
    assert len(ours[1]) > 190


@pytest.mark.filterwarnings("ignore:out of range integer")  # bokeh's, on 2**60
def test_values_are_encoded_as_bokeh_encodes_them(bokeh_oracle):
    # GIVEN a data source of every kind of column the report sends, and specs and numbers
    # bokeh writes in their own forms
    cols = Map({
        "f64": np.array([1.5, np.nan, np.inf, -np.inf]), "f32": np.arange(4, dtype=np.float32),
        "i64": np.array([1, 2, 3, 2**31 - 1]), "i64_big": np.array([1, 2, 3, 2**40]),
        "u64": np.array([1, 2, 3, 4], dtype=np.uint64), "i8": np.arange(4, dtype=np.int8),
        "bool": np.array([True, False, True, False]), "text": np.array(["a", "<b>", "c", ""]),
        "objects": np.array(["x", None, math.nan, 3], dtype=object),
        "lines": np.array([np.arange(2.0), np.arange(3.0), np.arange(1.0), np.arange(2.0)],
                          dtype=object)})
    data = Model("ColumnDataSource", selected=Model("Selection", indices=[], line_indices=[]),
                 selection_policy=Model("UnionRenderers"), data=cols)
    glyph = Model("Quad", left=field("f64"), right=field("f32"), bottom=value(0.5),
                  top=field("i8", Model("Dodge", value=-0.2)), line_color=value(None))
    roots = [data, glyph, Model("Range1d", start=math.nan, end=2**60)]
    # WHEN written by tracekit and by bokeh THEN the same document
    ours, theirs = _ours(roots), bokeh_oracle.bokeh_document(roots)
    assert bokeh_oracle.graph(ours) == bokeh_oracle.graph(theirs)
    # and the binary columns are gzip-compressed native arrays, as BokehJS reads them
    rep = next(v for k, v in ours["roots"][0]["attributes"]["data"]["entries"] if k == "i64")
    raw = gzip.decompress(b64decode(rep["array"]["data"]))
    assert rep["dtype"] == "int32" and np.frombuffer(raw, np.int32).tolist() == [1, 2, 3,
                                                                                2**31 - 1]


@pytest.mark.parametrize("v", [
    Map(), Map({"a": 1, "b": [1.5, math.nan]}), [math.inf, -math.inf, 2**53, -(2**60), None],
    (1, "x", True), np.float32(2.5), np.int64(7), np.array(3.0), np.zeros((2, 3)),
    np.array([], dtype=np.int64), np.array([1, 2**33], dtype=np.uint64),
    np.array(["a", None], dtype=object), pd.array([1, None, 3], dtype="Int64").to_numpy(),
    pd.Series(["x", None], dtype="string").to_numpy()], ids=repr)
@pytest.mark.filterwarnings("ignore:out of range integer")
def test_a_value_is_what_bokehs_serialiser_makes_of_it(v):
    # GIVEN a value WHEN encoded by tracekit and by bokeh's Serializer (a Map as the dict
    # bokeh writes as a map) THEN the same JSON
    from bokeh.core.serialization import Serializer

    theirs = Serializer(deferred=False).encode(dict(v) if isinstance(v, Map) else v)
    assert bokehjs.to_json(bokehjs.Writer().encode(v)) == json.dumps(
        theirs, separators=(",", ":"), allow_nan=False)


def test_an_unknown_value_type_is_refused():
    # GIVEN a value BokehJS has no form for WHEN written THEN a clear error, not a guess
    with pytest.raises(TypeError, match="set"):
        _ours([Model("Title", text={1, 2})])


def test_models_are_written_once_then_referred_to():
    # GIVEN one ticker shared by two axes of a plot
    ticker = Model("FixedTicker", ticks=[0, 1], minor_ticks=[])
    plot = Model("Plot", left=[Model("LinearAxis", ticker=ticker)],
                 below=[Model("LinearAxis", ticker=ticker)])
    doc = _ours([plot])
    text = bokehjs.to_json(doc)
    # WHEN written THEN the ticker is in full once and referred to by its id after
    assert text.count('"name":"FixedTicker"') == 1
    first = doc["roots"][0]["attributes"]["left"][0]["attributes"]["ticker"]
    assert doc["roots"][0]["attributes"]["below"][0]["attributes"]["ticker"] == {
        "id": first["id"]}
    assert [m.kind for m in plot.references()] == ["Plot", "LinearAxis", "FixedTicker",
                                                   "LinearAxis"]


def test_script_data_cannot_close_its_script_element():
    # GIVEN a document carrying a trace string that tries to end the script element
    doc = _ours([Model("Title", text="</script><script>alert(1)</script>&amp;")])
    data = bokehjs.script_data(bokehjs.to_json(doc))
    # WHEN escaped for the page THEN no tag survives; unescaped it is the JSON again
    assert "<" not in data and ">" not in data
    import html

    assert json.loads(html.unescape(data)) == doc


def _fresh(code: str) -> str:
    """What ``code`` prints in a new interpreter (nothing of this process imported)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False, timeout=180)
    assert out.returncode == 0, out.stderr
    return out.stdout


_BOKEH_LOADED = "sorted(m for m in sys.modules if m.split('.')[0] == 'bokeh')"


def test_bokeh_js_is_the_installed_file_read_without_importing_bokeh():
    # GIVEN a fresh interpreter WHEN it reads BokehJS for the page
    version, size, loaded = _fresh(
        "import sys\nfrom tracekit.reports import bokehjs\n"
        f"js, version = bokehjs.bokeh_js()\nprint(version, len(js), {_BOKEH_LOADED})",
    ).split(" ", 2)
    # THEN it is bokeh's own bokeh.min.js of the installed release, and no bokeh module loaded
    import bokeh

    path = Path(bokeh.__file__).parent / "server" / "static" / "js" / "bokeh.min.js"
    assert version == bokeh.__version__
    assert int(size) == len(path.read_text(encoding="utf-8")) > 500_000
    assert loaded.strip() == "[]"


def test_the_report_imports_no_bokeh_module():
    # GIVEN a fresh interpreter WHEN the full report is rendered THEN no bokeh module was
    # imported (the page's BokehJS is read from the package's files)
    here = Path(__file__).parent
    printed = _fresh(f"import sys; sys.path.insert(0, {str(here)!r})\n"
                     "from conftest import build_analysis\n"
                     "from tracekit import reports\n"
                     "assert 'tracekit_a2a' in reports.render('html', build_analysis())\n"
                     f"print({_BOKEH_LOADED})")
    assert printed.strip() == "[]"


def test_the_page_embeds_every_plot_by_name(analysis):
    # GIVEN the full report WHEN its render items are read
    import re

    page = reports.render("html", analysis)
    items = json.loads(re.search(r"embed_items\(docs, (\[.*?\])\);", page).group(1))
    doc = json.loads(__import__("html").unescape(re.search(
        r'<script type="application/json" id="tracekit-bokeh-doc">(.*?)</script>', page,
        re.S).group(1)))["tracekit"]
    # THEN each root of the document is drawn into its panel's element, which is on the page
    roots = {r["id"]: r["attributes"]["name"] for r in doc["roots"]}
    assert set(items[0]["roots"]) == set(roots) == set(items[0]["root_ids"])
    for model_id, element in items[0]["roots"].items():
        key = roots[model_id].removeprefix("tracekit_")
        assert element == f"tracekit_{key}_plot"
        assert f'<section id="panel-{key}">' in page and f'<div id="{element}"' in page
