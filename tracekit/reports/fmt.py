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


def duration(value: Any) -> str:
    """Nanoseconds in 4 significant figures, as s / ms / µs / ns (the terminal's tables)."""
    if _missing(value):
        return DASH
    v = float(value)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(v) >= scale:
            x = v / scale
            if unit == "s" and abs(x) >= 1000:
                return f"{x:,.0f} s"
            decimals = 3 if abs(x) < 10 else 2 if abs(x) < 100 else 1
            return f"{x:.{decimals}f} {unit}"
    return f"{v:,.0f} ns"


def nbytes(value: Any) -> str:
    """Bytes in decimal units, kB = 1000 B, MB = 1e6 B, GB = 1e9 B (the nccl-tests
    convention); the only byte units any tracekit report prints."""
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
    s.COUNT: count, s.MSG_BYTES: nbytes, s.IN_BYTES: nbytes, s.OUT_BYTES: nbytes,
    s.SEND_BYTES: nbytes, s.RECV_BYTES: nbytes, s.MEAN_BYTES: nbytes, s.TRANSIT_BYTES: nbytes,
    s.EFFICIENCY: ratio,
    s.ALGBW_GBPS: ratio, s.BUSBW_GBPS: ratio,
}


def short_cell(column: str, value: Any) -> str:
    """``cell`` with times in 4 significant figures (``duration``): the terminal's tables."""
    if column.endswith("_ns") and column not in _BY_COLUMN:
        return duration(value)
    return cell(column, value)


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
