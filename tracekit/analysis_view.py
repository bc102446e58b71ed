"""What ``Analysis`` shows in a notebook: DataFrames of its tables, a short repr and an HTML one.

Unknown values stay missing (``pd.NA``) in every frame: integer, float, boolean and string
columns come back as pandas' nullable dtypes, so a collective with no bound has ``bound_ns``
NA, never 0. Dictionary columns are decoded to strings; list columns stay Python lists.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa

from tracekit import schema as s

if TYPE_CHECKING:
    from tracekit.model import Analysis

COVERAGE_TABLE = "coverage"
# the first columns of Analysis.collectives() (issue 18: one row per collective and rank)
COLLECTIVE_COLUMNS = (s.RANK, s.GROUP, s.PATH, s.PHASE, s.LAYER, s.OP, s.MSG_BYTES,
                      s.TRANSFER_NS, s.WAIT_NS, s.BOUND_NS, s.EFFICIENCY)


def _nullable(t: pa.DataType) -> object:
    if pa.types.is_integer(t):
        return pd.Int64Dtype()
    if pa.types.is_floating(t):
        return pd.Float64Dtype()
    if pa.types.is_boolean(t):
        return pd.BooleanDtype()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pd.StringDtype()
    return None


def _decoded(table: pa.Table) -> pa.Table:
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c
            for c in table.columns]
    return pa.Table.from_arrays(cols, names=table.column_names)


def frame(table: pa.Table | None, schema: pa.Schema,
          first: tuple[str, ...] = ()) -> pd.DataFrame:
    """``table`` (None: no rows) as a DataFrame with every column of ``schema``, ``first``
    leading; nullable dtypes so that unknown stays NA."""
    data = s.conform(table, schema) if table is not None else s.empty(schema)
    data = _decoded(data)
    df = data.to_pandas(types_mapper=_nullable)
    order = [*first, *(c for c in df.columns if c not in first)]
    return df[order]


def collectives(analysis: Analysis) -> pd.DataFrame:
    """One row per collective and rank (MEASURED), COLLECTIVE_COLUMNS first."""
    return frame(analysis.measured, s.MEASURED, COLLECTIVE_COLUMNS)


def _coverage_run(analysis: Analysis) -> dict[str, object] | None:
    cov = analysis.extra_tables.get(COVERAGE_TABLE)
    if cov is None or cov.num_rows == 0:
        return None
    df = frame(cov, s.COVERAGE)
    run = df[df[s.SCOPE] == s.Scope.RUN]
    return None if run.empty else run.iloc[0].to_dict()


def summary_lines(analysis: Analysis) -> list[tuple[str, str]]:
    """(label, value) pairs of the repr: run, ranks, collectives, coverage, efficiency,
    findings, tables."""
    ranks = analysis.run.ranks
    measured = analysis.measured
    n_coll = measured.num_rows if measured is not None else 0
    n_inst = (len(measured.column(s.INSTANCE).drop_null().unique())
              if measured is not None and s.INSTANCE in measured.column_names else 0)
    lines = [("run", analysis.source or "(in memory)"),
             ("ranks", f"{len(ranks)}" + (f" ({ranks[0]}..{ranks[-1]})" if ranks else "")),
             ("collectives", f"{n_coll} rows (collective x rank), {n_inst} instances")]
    cov = _coverage_run(analysis)
    if cov is not None:
        lines.append(("coverage", f"of {cov[s.COUNT]} collectives: {cov[s.WITH_BYTES]} with "
                      f"bytes, {cov[s.MATCHED]} matched across ranks, "
                      f"{cov[s.WITH_EFFICIENCY]} with an efficiency"))
        eff = cov[s.EFFICIENCY]
        text = "unknown (no collective has bound and transfer)"
        if isinstance(eff, float | int) and eff == eff:  # pd.NA and NaN: unknown
            text = f"{eff:.3g} (sum of bounds / sum of transfers)"
        lines.append(("efficiency", text))
    findings = analysis.findings_table
    if findings is not None:
        sev = pd.Series(_decoded(findings.select([s.SEVERITY])).column(0).to_pylist(),
                        dtype=object).fillna("?").value_counts().sort_index()
        detail = ", ".join(f"{n} {k}" for k, n in sev.items())
        lines.append(("findings", f"{findings.num_rows}" + (f" ({detail})" if detail else "")))
    lines.append(("tables", ", ".join(analysis.tables)))
    return lines


def summary_text(analysis: Analysis) -> str:
    """The short repr: one line per summary item."""
    body = "\n".join(f"  {label}: {value}" for label, value in summary_lines(analysis))
    return f"<tracekit Analysis\n{body}>"


def summary_html(analysis: Analysis) -> str:
    """A small HTML table of the summary; every string from the trace is escaped."""
    rows = "".join(f"<tr><th style='text-align:left'>{html.escape(label)}</th>"
                   f"<td style='text-align:left'>{html.escape(value)}</td></tr>"
                   for label, value in summary_lines(analysis))
    return (f"<div class='tracekit-analysis'><strong>tracekit Analysis</strong>"
            f"<table>{rows}</table></div>")
