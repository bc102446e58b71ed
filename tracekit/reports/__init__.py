"""Reporters: each reads an ``api.Analysis`` (result tables only) and renders one format.

    render("json", analysis)                 -> str
    render("text", analysis, color=False)    -> str
    render("html", analysis)                 -> str (one self-contained file)
    render("parquet", analysis, table="measured") -> bytes
    write("html", analysis, "report.html")   # temp file in the same folder, then rename

A reporter is a module of this package with a function ``render(analysis, **options)``.
Modules are imported on first use, so ``import tracekit.reports`` stays cheap (bokeh loads
only for HTML).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from tracekit import io
from tracekit.errors import ConfigError
from tracekit.model import Analysis

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
    """Write ``content`` to a temporary file beside ``path``, then rename it over ``path``
    (``tracekit.io.write_file``: gzip when the name ends ``.gz``, mode 0666 less the umask).

    A failure part-way leaves any existing file untouched and no temporary file behind.
    """
    return io.write_file(path, content)


def stage(name: str, analysis: Analysis, path: str | Path, outputs: io.Outputs,
          **options: Any) -> Path:
    """Render with reporter ``name`` into ``outputs`` (put in place when it commits)."""
    if name == "parquet":
        from tracekit.reports import parquet

        return parquet.write(analysis, Path(path), outputs=outputs, **options)
    return outputs.write(path, render(name, analysis, **options))


def write(name: str, analysis: Analysis, path: str | Path, *,
          inputs: Iterable[str | Path] = (), **options: Any) -> Path:
    """Render with reporter ``name`` and write the result to ``path`` atomically; a ``path``
    that is one of ``inputs`` (the run's files) is refused.

    Parquet writes a folder of tables (see ``tracekit.reports.parquet.write``).
    """
    with io.Outputs(inputs) as outputs:
        if name == "parquet":
            outputs.folder(path)
        else:
            outputs.file(path)
        written = stage(name, analysis, path, outputs, **options)
    return written


__all__ = ["REPORTERS", "get", "names", "render", "stage", "write", "write_atomic"]
