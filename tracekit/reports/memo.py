"""Rendered reports kept beside the derived cache (``--cache-dir D``: ``D/reports/``).

A rendered report is a pure function of the derived entry (its key covers the inputs'
identity, rules, hardware, options and tracekit's own code; no reporter reads
``Analysis.source``, which a hit leaves empty), the reporter and its options (the terminal
report's colour, width and ``--verbose``), and the versions of the libraries that render it.
Those make the name of the stored file, so a changed anything misses and renders afresh; a
stored file that cannot be read is rendered again and replaced. Only text reporters are kept
(json, html, text, markdown, junit).

A warm `tracekit analyze` whose every report is stored needs no Analysis at all:
:meth:`ReportMemo.lookup` names a stored file from the key alone, and the CLI writes its bytes
without loading the derived entry, pyarrow, pandas, rich or bokeh. This module imports only
the standard library and tracekit.io.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracekit import io

if TYPE_CHECKING:
    from tracekit.model import Analysis

SUBDIR = "reports"
FORMAT_VERSION = 1
KEPT = frozenset({"json", "html", "text", "markdown", "junit"})
LIBS = ("bokeh", "rich", "pandas", "pyarrow", "numpy")


def _dist_name(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


@functools.lru_cache(maxsize=1)
def _versions() -> tuple[tuple[str, str], ...]:
    """Python's version and each of LIBS' installed version ("-": not installed), from the
    first ``NAME-VERSION.dist-info`` (or ``.egg-info``) folder on ``sys.path``, as
    ``importlib.metadata.version`` finds it, without importing importlib.metadata."""
    found: dict[str, str] = {}
    wanted = {_dist_name(lib) for lib in LIBS}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for n in names:
            stem, dot, kind = n.rpartition(".")
            if not dot or kind not in ("dist-info", "egg-info"):
                continue
            name, _, version = stem.partition("-")
            key = _dist_name(name)
            if key in wanted and key not in found and version:
                found[key] = version
    return (("python", sys.version),
            *((lib, found.get(_dist_name(lib), "-")) for lib in LIBS))


def installed_version(lib: str) -> str:
    """The installed version of ``lib`` (one of LIBS; "-": not installed), as above."""
    return dict(_versions())[lib]


@dataclass(frozen=True)
class ReportMemo:
    """Rendered reports of the derived entry ``key`` of ``cache_dir``."""

    cache_dir: Path
    key: str

    def entry(self, name: str, options: dict[str, Any]) -> Path:
        parts = {"format": FORMAT_VERSION, "derived": self.key, "report": name,
                 "options": sorted((k, repr(v)) for k, v in options.items()),
                 "libs": dict(_versions())}
        digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]
        return Path(self.cache_dir) / SUBDIR / f"{digest}.{name}"

    def lookup(self, name: str, options: dict[str, Any]) -> bytes | None:
        """The stored rendering of report ``name`` with ``options`` (UTF-8 bytes), or None
        (not kept, not stored, unreadable)."""
        if name not in KEPT:
            return None
        try:
            data = self.entry(name, options).read_bytes()
            data.decode()  # a damaged (not UTF-8) file is rendered again
        except (OSError, UnicodeDecodeError):
            return None
        return data

    def store(self, name: str, options: dict[str, Any], out: str | bytes) -> None:
        """Keep ``out`` (a text report's rendering); a read-only cache keeps nothing."""
        if name not in KEPT or not isinstance(out, str):
            return
        path = self.entry(name, options)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            io.write_file(path, out)
        except OSError:  # a read-only cache still renders
            pass

    def render(self, name: str, analysis: Analysis, **options: Any) -> str | bytes:
        """What ``tracekit.reports.render(name, analysis, **options)`` returns, from the
        stored file when there is one (then as UTF-8 bytes)."""
        from tracekit import reports

        stored = self.lookup(name, options)
        if stored is not None:
            return stored
        out = reports.render(name, analysis, **options)
        self.store(name, options, out)
        return out


__all__ = ["FORMAT_VERSION", "KEPT", "SUBDIR", "ReportMemo"]
