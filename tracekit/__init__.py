"""tracekit: which communicator, which path, how much pure communication, how far from the bound.

``tracekit.analyze(path, hardware="h200", tp=4, ...)`` runs the whole pipeline and returns an
:class:`tracekit.api.Analysis`; the modules behind it are imported on first use, so that
``import tracekit`` stays cheap.
"""

from __future__ import annotations

from typing import Any

from tracekit.version import __version__

__all__ = ["Analysis", "__version__", "analyze"]


def __getattr__(name: str) -> Any:
    if name in ("analyze", "Analysis"):
        from tracekit import api

        return api.analyze_simple if name == "analyze" else api.Analysis
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")
