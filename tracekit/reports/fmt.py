"""Number formatting shared by the text, Markdown and HTML reporters (no escaping here)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from tracekit import schema as s

DASH = "-"


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    try:
        return bool(isinstance(value, float) and math.isnan(value))
    except TypeError:
        return False


def ns(value: Any) -> str:
    """Nanoseconds as ms / µs / ns with 3 significant decimals."""
    if _missing(value):
        return DASH
    v = float(value)
    if abs(v) >= 1e6:
        return f"{v / 1e6:,.3f} ms"
    if abs(v) >= 1e3:
        return f"{v / 1e3:,.1f} µs"
    return f"{v:,.0f} ns"


def nbytes(value: Any) -> str:
    """Bytes in 1e3-based units (nccl-tests convention)."""
    if _missing(value):
        return DASH
    v = float(value)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:,.2f} {unit}"
    return f"{v:,.0f} B"


def ratio(value: Any) -> str:
    return DASH if _missing(value) else f"{float(value):.2f}"


def pct(value: Any) -> str:
    return DASH if _missing(value) else f"{float(value):.1f}%"


def count(value: Any) -> str:
    return DASH if _missing(value) else f"{int(value):,}"


def text(value: Any) -> str:
    if hasattr(value, "tolist") and not isinstance(value, str):  # a numpy array (list cell)
        value = value.tolist()
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or DASH
    if _missing(value) or value == "":
        return DASH
    return str(value)


# column -> formatter, by what the column holds
_BY_COLUMN = {
    s.COUNT: count, s.MSG_BYTES: nbytes, s.IN_BYTES: nbytes, s.EFFICIENCY: ratio,
    s.ALGBW_GBPS: ratio, s.BUSBW_GBPS: ratio,
}


def cell(column: str, value: Any) -> str:
    """Format ``value`` of ``column``: *_ns as times, bytes as sizes, ratios with 2 decimals."""
    if column in _BY_COLUMN:
        return _BY_COLUMN[column](value)
    if column.endswith("_ns"):
        return ns(value)
    if column.endswith("_pct"):
        return pct(value)
    if isinstance(value, float) and not _missing(value):
        # integer columns with nulls arrive as floats: print them as integers
        return f"{int(value)}" if value.is_integer() and abs(value) < 1e15 else f"{value:.4g}"
    return text(value)
