"""Sortable, filterable tables of the HTML report (bokeh DataTable with a filter box).

A table is built from a ``views.Section``: times (``*_ns``) become milliseconds (numbers, so
sorting is numeric) with the unit in the heading; absolute timestamps become milliseconds
since the trace start; lists become text. Cells are drawn by bokeh's StringFormatter and
NumberFormatter, which insert text, never markup, so a trace string shows as written.
The filter box keeps the rows where any cell contains the typed text (case-insensitive); its
code is fixed here and receives no trace string.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tracekit import schema as s
from tracekit.reports import fmt, views
from tracekit.reports import plotframes as pf

ABSOLUTE_TIME_COLUMNS = (s.TS_NS, s.BASE_TIME_NS, s.ORDER_TS_NS)
ROW_PX, MAX_HEIGHT = 25, 420

_FILTER_JS = """
const needle = input.value.trim().toLowerCase();
const data = source.data;
const names = Object.keys(data);
const n = names.length ? data[names[0]].length : 0;
const keep = [];
for (let i = 0; i < n; i++) {
  if (!needle || names.some((c) => String(data[c][i]).toLowerCase().includes(needle))) {
    keep.push(i);
  }
}
view.filter.indices = keep;
source.change.emit();
"""


def _column(section: views.Section, col: str, values: pd.Series,
            t0: int) -> tuple[str, pd.Series, Any]:
    """(heading, display values, bokeh formatter) of one column."""
    from bokeh.models.widgets.tables import NumberFormatter, StringFormatter

    head = section.header(col)
    if col.endswith("_ns") and pd.api.types.is_numeric_dtype(values):
        ms = values.astype(float)
        if col in ABSOLUTE_TIME_COLUMNS:  # subtract as integers: ns since 1970 overflow floats
            ms = (values.astype("Int64") - t0).astype(float)
            head = f"{head} since trace start"
        return f"{head} (ms)", ms / pf.MS, NumberFormatter(format="0,0.000", nan_format="-")
    if col in (s.MSG_BYTES, s.IN_BYTES, s.OUT_BYTES, s.SEND_BYTES, s.RECV_BYTES) and \
            pd.api.types.is_numeric_dtype(values):
        return f"{head} (B)", values.astype(float), NumberFormatter(format="0,0", nan_format="-")
    if pd.api.types.is_float_dtype(values):
        return head, values.astype(float), NumberFormatter(format="0,0.[000]", nan_format="-")
    if pd.api.types.is_integer_dtype(values) or pd.api.types.is_bool_dtype(values):
        return head, values, NumberFormatter(format="0,0") if not \
            pd.api.types.is_bool_dtype(values) else StringFormatter()
    return head, values.map(lambda v: fmt.text(v)), StringFormatter()


def data_table(section: views.Section, key: str, t0: int = 0) -> Any:
    """A filter box above a sortable DataTable: ``tracekit_<key>_table`` (layout), ``_grid``
    (the DataTable) and ``_filter`` (the box)."""
    from bokeh.layouts import column
    from bokeh.models import CDSView, ColumnDataSource, CustomJS, IndexFilter
    from bokeh.models.widgets.inputs import TextInput
    from bokeh.models.widgets.tables import DataTable, TableColumn

    frame = section.frame[list(section.columns)].reset_index(drop=True)
    data: dict[str, Any] = {}
    columns = []
    for i, col in enumerate(section.columns):
        head, values, formatter = _column(section, col, frame[col], t0)
        field = f"c{i}"  # field names are ours; headings are text
        series = pd.Series(values).reset_index(drop=True)
        if pd.api.types.is_float_dtype(series):
            data[field] = series.to_numpy(dtype=np.float64)
        else:
            data[field] = series.astype(object).where(series.notna(), "-").tolist()
        width = 280 if col in views.FREE_TEXT_COLUMNS else 110
        columns.append(TableColumn(field=field, title=head, formatter=formatter, width=width))
    source = ColumnDataSource(data)
    view = CDSView(filter=IndexFilter(indices=list(range(len(frame)))))
    height = min(MAX_HEIGHT, ROW_PX * (len(frame) + 1) + 8)
    table = DataTable(source=source, view=view, columns=columns, sortable=True,
                      reorderable=False, index_position=None, height=height, width=1150,
                      autosize_mode="force_fit" if len(columns) <= 10 else "none",
                      name=f"tracekit_{key}_grid")
    box = TextInput(placeholder="filter rows (any column contains...)", width=320,
                    name=f"tracekit_{key}_filter")
    box.js_on_change("value_input", CustomJS(args={"input": box, "source": source,
                                                   "view": view},
                                             code=_FILTER_JS.replace("input.value",
                                                                     "input.value_input")))
    return column(box, table, name=f"tracekit_{key}_table")
