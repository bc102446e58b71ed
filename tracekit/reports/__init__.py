"""Reporters: each reads an ``api.Analysis`` (result tables only) and renders one format.

    render("json", analysis)                 -> str
    render("text", analysis, color=False)    -> str
    render("html", analysis)                 -> str (one self-contained file)
    render("parquet", analysis, table="measured") -> bytes
    write("html", analysis, "report.html")   # temp file in the same folder, then rename

A reporter is a module of this package with a function ``render(analysis, **options)``.
Modules are imported on first use, so ``import tracekit.reports`` stays cheap (holoviews and
bokeh load only for HTML).
"""

from __future__ import annotations

import importlib
import os
import tempfile
from pathlib import Path
from typing import Any, Protocol

from tracekit.api import Analysis
from tracekit.errors import ConfigError

# reporter name -> module under tracekit.reports that defines render(analysis, **options)
REPORTERS: dict[str, str] = {
    "text": "text",
    "json": "json",
    "html": "html",
    "markdown": "markdown",
    "junit": "junit",
    "perfetto": "perfetto",
    "parquet": "parquet",
}


class Reporter(Protocol):
    def __call__(self, analysis: Analysis, **options: Any) -> str | bytes: ...


def names() -> list[str]:
    return sorted(REPORTERS)


def get(name: str) -> Reporter:
    """The render function of reporter ``name`` (ConfigError when there is none)."""
    module = REPORTERS.get(name)
    if module is None:
        raise ConfigError(f"unknown report format {name!r}; known: {', '.join(names())}")
    render_fn: Reporter = importlib.import_module(f"tracekit.reports.{module}").render
    return render_fn


def render(name: str, analysis: Analysis, **options: Any) -> str | bytes:
    """Render ``analysis`` with reporter ``name``."""
    return get(name)(analysis, **options)


def write_atomic(path: str | Path, content: str | bytes) -> Path:
    """Write ``content`` to a temporary file beside ``path``, then rename it over ``path``.

    A failure part-way leaves any existing file untouched and no temporary file behind.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8") if isinstance(content, str) else content
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def write(name: str, analysis: Analysis, path: str | Path, **options: Any) -> Path:
    """Render with reporter ``name`` and write the result to ``path`` atomically.

    Parquet writes a folder of tables (see ``tracekit.reports.parquet.write``).
    """
    if name == "parquet":
        from tracekit.reports import parquet

        return parquet.write(analysis, Path(path), **options)
    return write_atomic(path, render(name, analysis, **options))


__all__ = ["REPORTERS", "get", "names", "render", "write", "write_atomic"]
