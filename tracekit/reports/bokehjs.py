"""BokehJS documents written directly, without bokeh's Python models.

The HTML report's plots are drawn in the browser by BokehJS (the ``bokeh.min.js`` that the
bokeh package ships, inlined). The page only needs BokehJS' document: the JSON of its models.
Building it through bokeh's Python models cost more than the rest of the report (importing
``bokeh.models`` loads ~450 classes; each model then validates, defaults and walks every
property to serialise). Here a model is its class name and the attributes that differ from
BokehJS' defaults, already in BokehJS' wire form, and the document is written the way
bokeh's serialiser writes it (``bokeh.core.serialization``, protocol of bokeh 3): each model
in full where it is first reached, then by ``{"id": ...}``; numeric arrays gzipped and base64
encoded, 64-bit integers as 32-bit ones where every value fits; dicts as maps; NaN and
infinities as number objects. tests/reports/test_bokehjs.py hands the same models to bokeh
and checks that its document is this one, model for model.

Trace strings reach the page only as data (column values, axis labels, legend labels): the
document is JSON inside a ``<script type="application/json">``, HTML-escaped as bokeh does it
(BokehJS unescapes before parsing), and BokehJS inserts those values as text.

Importing this module imports no bokeh: the BokehJS file and the version it was built for are
read from the installed package's files (``bokeh_js()``).
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import importlib.util
import json
import math
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

# bokeh's own array compression for embedded documents (its settings.compression_level
# default, and the fixed mtime that keeps a document the same from run to run)
COMPRESSION_LEVEL = 2
_MTIME = 1
_MAX_SAFE_INT = 2**53 - 1  # larger integers lose precision in JavaScript: sent as floats
_BINARY = frozenset(np.dtype(t) for t in (
    np.bool_, np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.float32,
    np.float64))


class Model:
    """One BokehJS model: its class (``kind``: ``Plot``, ``Quad``...) and the attributes set,
    in wire form (data specs as ``field()`` / ``value()`` dicts, dict-valued properties as
    ``Map``, other models as ``Model``)."""

    __slots__ = ("attributes", "kind")

    def __init__(self, kind: str, /, **attributes: Any) -> None:
        self.kind = kind
        self.attributes = attributes

    def __getitem__(self, key: str) -> Any:
        return self.attributes[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.attributes[key] = value

    def append(self, key: str, model: Any) -> None:
        """Append ``model`` to the list attribute ``key`` (made when not yet set)."""
        self.attributes.setdefault(key, []).append(model)

    def references(self) -> Iterator[Model]:
        """This model and every model it refers to, each once, in order of first reach."""
        seen: set[int] = set()
        todo: list[Any] = [self]
        while todo:
            item = todo.pop()
            if isinstance(item, Model):
                if id(item) in seen:
                    continue
                seen.add(id(item))
                yield item
                todo.extend(reversed(list(item.attributes.values())))
            elif isinstance(item, (list, tuple)):
                todo.extend(reversed(item))
            elif isinstance(item, dict):
                todo.extend(reversed(list(item.values())))

    def select(self, kind: str) -> list[Model]:
        """Every model of class ``kind`` reachable from this one (itself included)."""
        return [m for m in self.references() if m.kind == kind]

    def __repr__(self) -> str:
        return f"Model({self.kind!r}, {sorted(self.attributes)})"


class Map(dict[Any, Any]):
    """A dict-valued property (a data source's columns, a hover tool's formatters): BokehJS
    reads it as a map (``{"type": "map", "entries": [[key, value], ...]}``)."""


def field(name: str, transform: Model | None = None) -> dict[str, Any]:
    """A data spec read from the data source column ``name`` (through ``transform``)."""
    spec: dict[str, Any] = {"type": "field", "field": name}
    if transform is not None:
        spec["transform"] = transform
    return spec


def value(v: Any) -> dict[str, Any]:
    """A data spec of one fixed value for every row."""
    return {"type": "value", "value": v}


def _number(x: float) -> Any:
    if math.isnan(x):
        return {"type": "number", "value": "nan"}
    if math.isinf(x):
        return {"type": "number", "value": "-inf" if x < 0 else "+inf"}
    return x


def _int(x: int) -> Any:
    return x if -_MAX_SAFE_INT < x <= _MAX_SAFE_INT else _number(float(x))


def _bytes(data: bytes | memoryview) -> dict[str, Any]:
    packed = gzip.compress(bytes(data), compresslevel=COMPRESSION_LEVEL, mtime=_MTIME)
    return {"type": "bytes", "data": base64.b64encode(packed).decode("ascii")}


def _narrowed(array: np.ndarray) -> np.ndarray:
    """64-bit integers as 32-bit ones where every value fits (BokehJS has no int64)."""
    for wide, narrow in ((np.int64, np.int32), (np.uint64, np.uint32)):
        if array.dtype == np.dtype(wide):
            info = np.iinfo(narrow)
            if array.size == 0 or (array.min() >= info.min and array.max() <= info.max):
                return array.astype(narrow)
    return array


class Writer:
    """Encodes models and values into the document's JSON objects, numbering the models in
    order of first reach (``p1001``, ``p1002``...)."""

    def __init__(self) -> None:
        self.ids: dict[int, str] = {}
        self._keep: list[Model] = []  # the numbered models stay alive while ids are in use

    def ref(self, model: Model) -> str:
        """``model``'s id (numbered on first use)."""
        key = id(model)
        if key not in self.ids:
            self.ids[key] = f"p{1001 + len(self.ids)}"
            self._keep.append(model)
        return self.ids[key]

    def encode(self, v: Any) -> Any:
        if isinstance(v, Model):
            return self._model(v)
        if v is None or isinstance(v, (bool, str)):
            return v
        if v is pd.NA:  # a missing value of a nullable column: null, as bokeh writes it
            return None
        if isinstance(v, int):
            return _int(v)
        if isinstance(v, float):
            return _number(v)
        if isinstance(v, Map):
            if not v:
                return {"type": "map"}
            return {"type": "map", "entries": [[self.encode(k), self.encode(x)]
                                               for k, x in v.items()]}
        if isinstance(v, dict):
            return {k: self.encode(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [self.encode(x) for x in v]
        if isinstance(v, np.ndarray):
            return self._array(v) if v.shape != () else self.encode(v.item())
        if isinstance(v, np.generic):
            return self.encode(v.item())
        raise TypeError(f"cannot write a {type(v).__name__} into a BokehJS document")

    def _model(self, model: Model) -> dict[str, Any]:
        key = id(model)
        if key in self.ids:
            return {"id": self.ids[key]}
        rep: dict[str, Any] = {"type": "object", "name": model.kind, "id": self.ref(model)}
        if model.attributes:
            rep["attributes"] = {k: self.encode(x) for k, x in model.attributes.items()}
        return rep

    def _array(self, array: np.ndarray) -> dict[str, Any]:
        array = np.ascontiguousarray(_narrowed(array))
        data: Any
        if array.dtype.kind == "U":
            data, dtype = array.ravel().tolist(), "object"
        elif array.dtype not in _BINARY:
            items = array.ravel().tolist()
            # text columns (most of the report's): their items are as written already
            plain = all(type(x) is str for x in items)
            data, dtype = items if plain else self.encode(items), "object"
        else:
            data, dtype = _bytes(array.data), array.dtype.name
        return {"type": "ndarray", "array": data, "shape": list(array.shape), "dtype": dtype,
                "order": sys.byteorder}


def document(roots: Iterable[Model], *, title: str, version: str) -> tuple[dict[str, Any],
                                                                          Writer]:
    """The BokehJS document of ``roots`` (JSON-ready) and the writer that numbered its models
    (``writer.ref(root)`` is a root's id)."""
    writer = Writer()
    config = Model("DocumentConfig", notifications=Model("Notifications"))
    doc = {"version": version, "title": title, "config": writer.encode(config),
           "roots": [writer.encode(root) for root in roots]}
    return doc, writer


def to_json(doc: Any) -> str:
    """The document as bokeh writes it: compact, ASCII, no NaN literals."""
    return json.dumps(doc, separators=(",", ":"), allow_nan=False)


def script_data(text: str) -> str:
    """``text`` made safe inside a ``<script type="application/json">`` element: ``&``, ``<``
    and ``>`` as entities (no ``</script>`` can close it), which BokehJS unescapes."""
    return html.escape(text, quote=False)


@functools.lru_cache(maxsize=1)
def bokeh_js() -> tuple[str, str]:
    """(BokehJS' minified code, the version it was built for) from the installed bokeh
    package's files, without importing bokeh."""
    spec = importlib.util.find_spec("bokeh")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("bokeh is not installed (the HTML report inlines BokehJS)")
    path = Path(spec.origin).parent / "server" / "static" / "js" / "bokeh.min.js"
    code = path.read_text(encoding="utf-8")
    if "</script" in code.lower():
        raise ValueError(f"{path} cannot be inlined: it contains '</script'")
    from tracekit.reports.memo import installed_version

    return code, installed_version("bokeh")


__all__ = ["Map", "Model", "Writer", "bokeh_js", "document", "field", "script_data",
           "to_json", "value"]
