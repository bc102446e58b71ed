"""One case through the pipeline, rendered as the golden files' text.

Each stage table becomes CSV with a fixed form, so that a diff shows what changed:

* columns in the schema's order; ATTRIBUTED keeps only ``rank``, ``event_id``, ``name`` and the
  columns it adds to EVENTS (the rest is EVENTS' file);
* rows sorted by the key columns present (rank, event_id, instance, phase, layer, ...), then by
  every column, so the order does not depend on the engine;
* integers exactly; floats with 6 significant digits (``%.6g``); null as the empty cell; lists
  as ``[a b c]``; the scratch folder's path as ``<input>``.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracekit import api, reports
from tracekit import schema as S
from tracekit.topology.config import topology_from_options

from .cases import Case

STAGES = ("events", "attributed", "measured", "phases")
SORT_KEYS = (S.RANK, S.EVENT_ID, "instance", S.PHASE, S.LAYER, S.TS_NS)
REPORT_WIDTH = 132


def analyze(case: Case, scratch: Path) -> tuple[api.Analysis, Path]:
    path = case.build(scratch)
    topo = topology_from_options(config=case.config) if case.config else None
    analysis = api.analyze(path, api.LoadOptions(jobs=1),
                           api.AnalyzeOptions(topology=topo, hardware=case.hardware))
    return analysis, path


def cell(value: Any, scratch: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.6g}"
    if isinstance(value, list):
        return "[" + " ".join(cell(v, scratch) for v in value) + "]"
    text = str(value)
    return text.replace(scratch, "<input>") if scratch else text


def table_csv(table: pa.Table, scratch: str, columns: list[str] | None = None) -> str:
    names = columns or table.column_names
    table = table.select(names)
    rows = [[cell(v, scratch) for v in row] for row in zip(*(table.column(n).to_pylist()
                                                             for n in names), strict=True)]
    keys = [names.index(k) for k in SORT_KEYS if k in names]
    numeric = {i for i, n in enumerate(names) if pa.types.is_integer(table.schema.field(n).type)}

    def key(row: list[str]) -> tuple[Any, ...]:
        head = tuple((int(row[i]) if row[i] else -(1 << 62)) if i in numeric else row[i]
                     for i in keys)
        return (*head, *row)

    rows.sort(key=key)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(names)
    writer.writerows(rows)
    return buf.getvalue()


def _stage_table(analysis: api.Analysis, stage: str) -> pa.Table:
    table = analysis.run.events if stage == "events" else analysis.tables.get(stage)
    return table if table is not None else pa.table({})


def render(case: Case, scratch: Path) -> dict[str, str]:
    """{file name: content} of one case: a CSV per stage, rows.csv and report.txt."""
    analysis, _ = analyze(case, scratch)
    prefix = str(scratch)
    out: dict[str, str] = {}
    counts = ["stage,rows"]
    for stage in STAGES:
        table = _stage_table(analysis, stage)
        counts.append(f"{stage},{table.num_rows}")
        columns: list[str] | None = None
        if stage == "attributed":
            added = [f.name for f in S.ATTRIBUTED if f.name not in S.EVENTS.names]
            columns = [S.RANK, S.EVENT_ID, S.NAME, *added]
        if case.comm_rows_only and stage in ("events", "attributed"):
            table = table.filter(table.column(S.OP).is_valid())
        out[f"{stage}.csv"] = table_csv(table, prefix, columns)
    out["rows.csv"] = "\n".join(counts) + "\n"
    text = reports.render("text", analysis, color=False, width=REPORT_WIDTH)
    assert isinstance(text, str)
    out["report.txt"] = "\n".join(line.rstrip() for line in
                                  text.replace(prefix, "<input>").splitlines()) + "\n"
    return out
