"""Rendered reports kept beside the derived cache (``--cache-dir D``: ``D/reports/``).

A warm ``tracekit analyze --cache-dir D`` reads its results from the derived entry in well
under a second; rendering them again (bokeh's import and serialisation for ``--html``, the
terminal and JSON reports) then dominated. A rendered report is a pure function of the
derived entry (its key covers the inputs' identity, rules, hardware, options and tracekit's
own code; no reporter reads ``Analysis.source``, which a hit leaves empty), the reporter and
its options (the terminal report's colour, width and ``--verbose``), and the
versions of the libraries that render it. Those make the name of the stored file, so a
changed anything misses and renders afresh; a stored file that cannot be read is rendered
again and replaced. Only text reporters are kept (json, html, text, markdown, junit).
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from tracekit import io
from tracekit.model import Analysis

SUBDIR = "reports"
FORMAT_VERSION = 1
KEPT = frozenset({"json", "html", "text", "markdown", "junit"})
LIBS = ("bokeh", "rich", "pandas", "pyarrow", "numpy")


def _versions() -> dict[str, str]:
    out = {"python": sys.version}
    for lib in LIBS:
        try:
            out[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            out[lib] = "-"
    return out


@dataclass(frozen=True)
class ReportMemo:
    """Rendered reports of the derived entry ``key`` of ``cache_dir``."""

    cache_dir: Path
    key: str

    def entry(self, name: str, options: dict[str, Any]) -> Path:
        parts = {"format": FORMAT_VERSION, "derived": self.key, "report": name,
                 "options": sorted((k, repr(v)) for k, v in options.items()),
                 "libs": _versions()}
        digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]
        return Path(self.cache_dir) / SUBDIR / f"{digest}.{name}"

    def render(self, name: str, analysis: Analysis, **options: Any) -> str | bytes:
        """What ``tracekit.reports.render(name, analysis, **options)`` returns, from the
        stored file when there is one."""
        from tracekit import reports

        if name not in KEPT:
            return reports.render(name, analysis, **options)
        path = self.entry(name, options)
        try:
            return path.read_bytes().decode()
        except (OSError, UnicodeDecodeError):
            pass
        out = reports.render(name, analysis, **options)
        if isinstance(out, str):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                io.write_file(path, out)
            except OSError:  # a read-only cache still renders
                pass
        return out


__all__ = ["FORMAT_VERSION", "KEPT", "SUBDIR", "ReportMemo"]
