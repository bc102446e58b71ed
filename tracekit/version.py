"""The version of tracekit (one place: the package, reports and cache keys read it)."""

__version__ = "0.1.0"
