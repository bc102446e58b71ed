"""Sortable, filterable tables of the HTML report: plain escaped ``<table>`` markup.

A table is built from a ``views.Section``: times (``*_ns``) become milliseconds with the unit
in the heading; absolute timestamps become milliseconds since the trace start; lists become
text. Every cell is escaped text (``html_parts.esc``); a numeric cell also carries its value
in ``data-v`` (a number tracekit formatted, never a trace string), which is what the heading
click sorts by. The filter box keeps the rows where any cell contains the typed text
(case-insensitive). One fixed script (``SCRIPT``, no trace string in it) wires every table
of the page; the tables are not bokeh models (bokeh's DataTable cost three models a column
and its own 680 kB of inline code).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from tracekit import schema as s
from tracekit.reports import fmt, views
from tracekit.reports import plotframes as pf
from tracekit.reports.html_parts import esc

ABSOLUTE_TIME_COLUMNS = (s.TS_NS, s.BASE_TIME_NS, s.ORDER_TS_NS)
BYTE_COLUMNS = (s.MSG_BYTES, s.IN_BYTES, s.OUT_BYTES, s.SEND_BYTES, s.RECV_BYTES)
MAX_HEIGHT = 420  # px; a longer table scrolls inside its box, the heading stays in view

# The page's one table script: sort on a heading click (numbers by data-v, text as text;
# missing values last), filter on typing. It reads only the markup; it writes no markup.
SCRIPT = """
(function () {
  const key = (cell, num) => {
    if (!num) return cell.textContent;
    const v = cell.getAttribute('data-v');
    return v === null || v === '' ? null : Number(v);
  };
  for (const box of document.querySelectorAll('.tk-table')) {
    const table = box.querySelector('table');
    const body = table.tBodies[0];
    const input = box.querySelector('input');
    input.addEventListener('input', () => {
      const needle = input.value.trim().toLowerCase();
      for (const row of body.rows) {
        row.hidden = needle !== '' && !Array.from(row.cells).some(
          (c) => c.textContent.toLowerCase().includes(needle));
      }
    });
    const heads = Array.from(table.tHead.rows[0].cells);
    heads.forEach((th, col) => {
      th.addEventListener('click', () => {
        const up = th.getAttribute('aria-sort') !== 'ascending';
        for (const other of heads) other.removeAttribute('aria-sort');
        th.setAttribute('aria-sort', up ? 'ascending' : 'descending');
        const num = th.getAttribute('data-type') === 'num';
        const rows = Array.from(body.rows).map((r, i) => [key(r.cells[col], num), i, r]);
        rows.sort((a, b) => {
          if (a[0] === null || b[0] === null) {
            return a[0] === b[0] ? a[1] - b[1] : a[0] === null ? 1 : -1;
          }
          const c = a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
          return (up ? c : -c) || a[1] - b[1];
        });
        body.append(...rows.map((r) => r[2]));
      });
    });
  }
})();
"""

STYLE = """
.tk-table { margin: 6px 0; }
.tk-table input { display: block; width: 320px; margin: 4px 0; padding: 3px 6px; font-size: 13px; }
.tk-scroll { max-height: MAXpx; overflow: auto; display: inline-block; max-width: 100%; }
.tk-table table.data { margin: 0; }
.tk-table th { cursor: pointer; position: sticky; top: 0; user-select: none; }
.tk-table th[aria-sort=ascending]::after { content: " \\25B2"; }
.tk-table th[aria-sort=descending]::after { content: " \\25BC"; }
.tk-table td.num { text-align: right; font-variant-numeric: tabular-nums; }
.tk-table td.free { min-width: 260px; }
""".replace("MAX", str(MAX_HEIGHT))


def _number(value: float, decimals: int, optional: bool = False) -> str:
    """``value`` with thousands separators and ``decimals`` decimals (trailing zeros dropped
    when ``optional``); '-' when missing."""
    if not math.isfinite(value):
        return fmt.DASH
    out = f"{value:,.{decimals}f}"
    return out.rstrip("0").rstrip(".") if optional and decimals else out


def _sort_keys(values: np.ndarray) -> list[str]:
    """The ``data-v`` of float cells: the value as Python writes it, '' when missing."""
    return [repr(x) if math.isfinite(x) else "" for x in values.tolist()]


def _column(section: views.Section, col: str, values: pd.Series,
            t0: int) -> tuple[str, list[str], list[str] | None]:
    """(heading, cell texts, sort values or None for a text column) of one column."""
    head = section.header(col)
    numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    if col.endswith("_ns") and numeric:
        if col in ABSOLUTE_TIME_COLUMNS:  # subtract as integers: ns since 1970 overflow floats
            ms = (values.astype("Int64") - t0).astype(float)
            head = f"{head} since trace start"
            v = (ms / pf.MS).to_numpy(dtype=np.float64, na_value=np.nan)
        else:  # numpy on the column's values: pandas' per-column steps cost more here
            v = _floats(values) / pf.MS
        return f"{head} (ms)", [_number(x, 3) for x in v.tolist()], _sort_keys(v)
    if col in BYTE_COLUMNS and numeric:
        v = _floats(values)
        return f"{head} (B)", [_number(x, 0) for x in v.tolist()], _sort_keys(v)
    if pd.api.types.is_float_dtype(values):
        v = _floats(values)
        return head, [_number(x, 3, optional=True) for x in v.tolist()], _sort_keys(v)
    if pd.api.types.is_integer_dtype(values):
        items = values.tolist()  # Python values: no scalar box per cell
        cells = [fmt.DASH if pd.isna(x) else f"{int(x):,}" for x in items]
        return head, cells, ["" if pd.isna(x) else str(int(x)) for x in items]
    if pd.api.types.is_bool_dtype(values):
        return head, [fmt.DASH if pd.isna(x) else ("true" if x else "false")
                      for x in values.tolist()], None
    return head, [fmt.text(x) if not _isna(x) else fmt.DASH for x in values.tolist()], None


def _floats(values: pd.Series) -> np.ndarray:
    """A numeric column as float64, missing values NaN (``astype(float)`` without a Series)."""
    return values.to_numpy(dtype=np.float64, na_value=np.nan)


def _isna(value: Any) -> bool:
    return not isinstance(value, list | tuple | np.ndarray) and bool(pd.isna(value))


def data_table(section: views.Section, key: str, t0: int = 0) -> str:
    """A filter box above a sortable table: ``tracekit_<key>_table`` (the box around both),
    ``tracekit_<key>_grid`` (the table) and ``tracekit_<key>_filter`` (the box)."""
    frame = section.frame  # columns read by name, values by position
    if not frame.columns.is_unique:
        frame = frame[list(section.columns)].reset_index(drop=True)
    heads, columns = [], []
    for col in section.columns:
        head, cells, sort = _column(section, col, frame[col], t0)
        css = "num" if sort is not None else "free" if col in views.FREE_TEXT_COLUMNS else ""
        kind = ' data-type="num"' if sort is not None else ""
        heads.append(f'<th{kind} title="click to sort">{esc(head)}</th>')
        if sort is not None:
            columns.append([f'<td class="num" data-v="{esc(v)}">{esc(c)}</td>'
                            for c, v in zip(cells, sort, strict=True)])
        elif col == s.SEVERITY:
            columns.append([f'<td class="sev-{esc(c)}">{esc(c)}</td>' for c in cells])
        else:
            klass = f' class="{css}"' if css else ""
            columns.append([f"<td{klass}>{esc(c)}</td>" for c in cells])
    rows = "".join("<tr>" + "".join(cells) + "</tr>" for cells in zip(*columns, strict=True))
    name = f"tracekit_{esc(key)}"
    return (f'<div class="tk-table" id="{name}_table">'
            f'<input type="search" id="{name}_filter" '
            'placeholder="filter rows (any column contains...)" aria-label="filter rows">'
            f'<div class="tk-scroll"><table class="data" id="{name}_grid">'
            f"<thead><tr>{''.join(heads)}</tr></thead><tbody>{rows}</tbody></table></div></div>")
