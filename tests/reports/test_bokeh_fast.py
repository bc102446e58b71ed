"""The report's bokeh document built and serialised inside bokeh_fast.quick(): the same
document, and bokeh as it was outside."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from tracekit.reports import bokeh_fast, bokeh_load, bokeh_plot
from tracekit.reports import html as html_report

bokeh_load.load()
pytestmark = pytest.mark.skipif(not bokeh_fast.supported(),
                                reason="bokeh_fast patches only the bokeh releases it names")

_IDS = re.compile(r'"p\d+"')


def _needs_label() -> type:
    from bokeh.core.properties import Required, String
    from bokeh.model import Model

    class NeedsLabel(Model):
        label = Required(String)

    return NeedsLabel


NeedsLabel = _needs_label()  # one class per test process (bokeh names each model class)


def _document(analysis: Any) -> Any:
    from bokeh.document import Document

    doc = Document()
    with bokeh_plot.page():
        for p in html_report.panels(analysis):
            for root in p.roots:
                doc.add_root(root)
    return doc


def _json(doc: Any) -> str:
    """The document's JSON, its model ids renumbered in order of appearance."""
    from bokeh.core.json_encoder import serialize_json

    ids: dict[str, str] = {}
    return _IDS.sub(lambda m: ids.setdefault(m.group(0), f'"P{len(ids)}"'),
                    serialize_json(doc.to_json(deferred=False)))


def _props(doc: Any) -> list[tuple[str, list[tuple[str, Any]]]]:
    return [(m.id, list(m.properties_with_values(include_defaults=False).items()))
            for m in sorted(doc.models, key=lambda m: m.id)]


def test_quick_serialises_the_same_document(analysis):
    # GIVEN the full report's bokeh document, built as bokeh builds it
    doc = _document(analysis)
    plain, plain_json = _props(doc), _json(doc)
    # WHEN serialised inside quick()
    with bokeh_fast.quick():
        assert bokeh_fast.active()
        fast, fast_json = _props(doc), _json(doc)
    # THEN every model gives the same properties in the same order, and the same JSON
    assert fast == plain
    assert fast_json == plain_json
    assert sum(len(p) for _, p in plain) > 100


def test_quick_builds_the_same_document(analysis):
    # GIVEN the page's document built with bokeh's validation and per-model work
    plain = _json(_document(analysis))
    # WHEN built and serialised inside quick() THEN it is the same, model for model
    with bokeh_fast.quick():
        fast = _json(_document(analysis))
    assert fast == plain


def test_an_unset_required_property_still_raises():
    # GIVEN a model whose property without a default (Required) is unset
    # WHEN serialised inside quick() THEN bokeh's error, as outside
    from bokeh.core.property.descriptors import UnsetValueError

    with pytest.raises(UnsetValueError):
        NeedsLabel().properties_with_values(include_defaults=False)
    with bokeh_fast.quick(), pytest.raises(UnsetValueError):
        NeedsLabel().properties_with_values(include_defaults=False)


def test_quick_leaves_bokeh_as_it_was():
    from bokeh.core.has_props import HasProps
    from bokeh.models import Range1d

    original = HasProps.__dict__["query_properties_with_values"]
    with bokeh_fast.quick():
        assert HasProps.__dict__["query_properties_with_values"] is not original
        with pytest.raises(ValueError):  # property validation stays on
            Range1d(start="not a number")
        with bokeh_fast.quick():  # nested: still active, restored once at the end
            pass
        assert HasProps.__dict__["query_properties_with_values"] is not original
        # the queries other than serialisation's are bokeh's own
        assert "start" in Range1d(start=1).properties_with_values(include_defaults=True)
    assert HasProps.__dict__["query_properties_with_values"] is original
    assert not bokeh_fast.active()
    with pytest.raises(RuntimeError), bokeh_fast.quick():
        raise RuntimeError("a failure inside restores bokeh too")
    assert HasProps.__dict__["query_properties_with_values"] is original


CHECK = """
import sys
from tracekit.reports import bokeh_fast
with bokeh_fast.quick():
    assert "bokeh" not in sys.modules and not bokeh_fast.active()  # imports nothing
    from tracekit.reports import bokeh_load
    bokeh_load.load()
    assert bokeh_fast.active()  # patched once bokeh is loaded
assert not bokeh_fast.active()
print("ok")
"""


def test_quick_before_bokeh_is_loaded_patches_when_it_loads(
        fresh_python: Callable[[str], None]) -> None:
    fresh_python(CHECK)


def test_an_unchecked_bokeh_release_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    import bokeh

    monkeypatch.setattr(bokeh, "__version__", "9.0.0")
    assert not bokeh_fast.supported()
    from bokeh.core.has_props import HasProps

    before = HasProps.__dict__["query_properties_with_values"]
    with bokeh_fast.quick():
        assert HasProps.__dict__["query_properties_with_values"] is before
        assert not bokeh_fast.active()
