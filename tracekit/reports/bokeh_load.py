"""Loading bokeh for the HTML report with less CPU.

``load()`` imports the bokeh modules the report uses (not ``bokeh.plotting``: the figures
are built from the models, tracekit.reports.bokeh_plot). Most of the CPU of ``import
bokeh.models`` (~450 model classes) goes into one thing done for help() and the docs: for
each class bokeh builds the signature of its ``__init__`` from the defaults of every one of
its properties (``Model.parameters``). While ``bokeh.models`` loads here, ``parameters``
returns nothing; the empty signatures it leaves are removed after, so ``inspect.signature``
of a model gives its plain ``(*args, **kwargs)`` one. Nothing else of bokeh changes:
``Model.parameters`` is bokeh's own again after ``bokeh.models`` has loaded (should anything
load ``bokeh.plotting``, its glyph methods take positional arguments through it), and a class
defined later is as usual.

Safe to call from several threads (a background import while the trace is parsed) and
more than once: the first call imports, the others find the modules loaded.
"""

from __future__ import annotations

import sys
import threading
from inspect import Signature
from typing import Any

_LOCK = threading.Lock()


def _no_parameters(cls: type) -> list[Any]:
    """``Model.parameters`` while ``bokeh.models`` loads: no signature to build."""
    return []


def _subclasses(cls: type) -> list[type]:
    out, todo = [], [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            out.append(sub)
            todo.append(sub)
    return out


def _import_models() -> None:
    """``import bokeh.models`` without building its classes' ``__init__`` signatures."""
    from bokeh.model import Model

    original = Model.__dict__.get("parameters")
    if not isinstance(original, classmethod):  # another bokeh: import it as it is
        import bokeh.models
        return
    Model.parameters = classmethod(_no_parameters)  # type: ignore[assignment, method-assign]
    try:
        import bokeh.models  # noqa: F401
    finally:
        Model.parameters = original  # type: ignore[method-assign]
    blank = Signature(parameters=[])
    for cls in _subclasses(Model):
        init = cls.__dict__.get("__init__")
        if getattr(init, "__signature__", None) == blank:
            del init.__signature__  # type: ignore[union-attr]


def load() -> None:
    """Import the bokeh modules of the HTML report (models first, as described above)."""
    with _LOCK:
        if "bokeh.models" not in sys.modules:
            _import_models()
        import bokeh.document
        import bokeh.embed
        import bokeh.resources  # noqa: F401
    from tracekit.reports import bokeh_fast

    bokeh_fast.loaded()
