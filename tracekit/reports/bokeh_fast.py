"""Building and serialising the HTML report's bokeh models with less CPU (``quick()``).

Two things bokeh repeats per model that give the same answer each time, skipped inside
``quick()``:

* per property of each new model, whether its default is unstable and the class' overridden
  defaults (a walk of the MRO): functions of the class only, kept per class;
* serialisation (``properties_with_values(include_defaults=False)``) reads the value of
  every property, defaults included, then keeps only the set ones: here only the kept
  ones are read (an unset property without a default still raises as bokeh's does).

The document's JSON is the same, model for model (test_bokeh_fast), on the bokeh releases
named in ``CHECKED``; under any other bokeh ``quick()`` changes nothing. Property validation
stays on: bokeh's serialisation of data specs reads it (a colour field name would be written
as a colour value without it). Outside ``quick()`` bokeh is as it was;
nested or concurrent uses patch once (a counter under a lock). ``quick()`` imports no bokeh:
entered before bokeh is loaded, it patches when ``bokeh_load.load()`` has loaded it (a page
without plots loads no bokeh).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

_LOCK = threading.Lock()
_DEPTH = [0]
_SAVED: dict[str, Any] = {}


# the bokeh releases (major.minor) whose internals these patches were checked against
# (test_bokeh_fast compares the documents); any other runs as it is
CHECKED = ("3.9",)


def supported() -> bool:
    """Whether the loaded bokeh is a release the patches were checked against."""
    import bokeh

    return ".".join(str(bokeh.__version__).split(".")[:2]) in CHECKED


def _patches() -> dict[tuple[Any, str], Any] | None:
    """(owner, attribute) -> the quick version; None for a bokeh the patches were not
    checked against, or without those internals."""
    if not supported():
        return None
    from bokeh.core.has_props import HasProps
    from bokeh.core.property.descriptors import PropertyDescriptor, UnsetValueError
    from bokeh.core.property.singletons import Undefined
    from bokeh.core.property.wrappers import PropertyValueContainer

    overridden = HasProps.__dict__.get("_overridden_defaults")
    unstable = PropertyDescriptor.__dict__.get("has_unstable_default")
    query_fn = HasProps.__dict__.get("query_properties_with_values")
    if not (isinstance(overridden, classmethod) and callable(unstable) and callable(query_fn)):
        return None
    unstable_of: dict[tuple[Any, type], bool] = {}
    overrides_of: dict[type, dict[str, Any]] = {}
    required_of: dict[type, frozenset[str]] = {}

    def has_unstable_default(self: Any, obj: Any) -> bool:
        key = (self, type(obj))
        found = unstable_of.get(key)
        if found is None:
            found = unstable_of[key] = unstable(self, obj)
        return found

    def overridden_defaults(cls: type) -> dict[str, Any]:
        found = overrides_of.get(cls)
        if found is None:
            found = overrides_of[cls] = overridden.__func__(cls)
        return dict(found)  # bokeh's returns a new dict

    def required(cls: Any) -> frozenset[str]:
        """The properties of ``cls`` whose default is Undefined (reading one unset raises)."""
        found = required_of.get(cls)
        if found is None:
            over = cls._overridden_defaults()
            found = required_of[cls] = frozenset(
                name for name in cls.properties(_with_props=True)
                if (over[name] if name in over else cls.lookup(name).property._default)
                is Undefined)
        return found

    def query_properties_with_values(self: Any, query: Callable[[Any], bool], *,
                                     include_defaults: bool = True,
                                     include_undefined: bool = False) -> dict[str, Any]:
        if include_defaults:
            return query_fn(self, query, include_defaults=True,
                            include_undefined=include_undefined)
        selected = set(self._property_values) | set(self._unstable_default_values)
        themed = self.themed_values()
        themed_keys = set() if themed is None else set(themed)
        selected |= themed_keys
        must = required(type(self))
        result: dict[str, Any] = {}
        for key in self.properties(_with_props=True):
            descriptor = self.lookup(key)
            if not query(descriptor):
                continue
            if key not in selected:
                if key in must and not include_undefined:
                    descriptor.get_value(self)  # raises UnsetValueError, as bokeh's does
                continue
            try:
                value = descriptor.get_value(self)
            except UnsetValueError:
                if not include_undefined:
                    raise
                value = Undefined
            if key not in themed_keys and isinstance(value, PropertyValueContainer) \
                    and key in self._unstable_default_values:
                continue
            result[key] = value
        return result

    return {
        (PropertyDescriptor, "has_unstable_default"): has_unstable_default,
        (HasProps, "_overridden_defaults"): classmethod(overridden_defaults),
        (HasProps, "query_properties_with_values"): query_properties_with_values,
    }


def _apply() -> None:
    """Patch bokeh (under _LOCK, inside ``quick()``, bokeh loaded, not yet patched)."""
    patches = _patches()
    if not patches:  # a bokeh the patches were not checked against: left as it is
        return
    for (owner, name), new in patches.items():
        _SAVED[f"{id(owner)}.{name}"] = (owner, name, owner.__dict__[name])
        setattr(owner, name, new)
    _SAVED["applied"] = None


def loaded() -> None:
    """bokeh has just been loaded (``bokeh_load.load``): patch it when inside ``quick()``."""
    with _LOCK:
        if _DEPTH[0] and "applied" not in _SAVED:
            _apply()


def active() -> bool:
    """Whether bokeh is patched now."""
    return "applied" in _SAVED


@contextlib.contextmanager
def quick() -> Iterator[None]:
    """bokeh's per-model repeats skipped while inside (see the module doc)."""
    with _LOCK:
        _DEPTH[0] += 1
        if "applied" not in _SAVED and "bokeh.models" in sys.modules:
            _apply()
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH[0] -= 1
            if _DEPTH[0] == 0:
                _SAVED.pop("applied", None)
                for owner, name, old in _SAVED.values():
                    setattr(owner, name, old)
                _SAVED.clear()


__all__ = ["active", "loaded", "quick"]
