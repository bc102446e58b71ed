"""The JSON report: versioned, documented keys (docs/json-report.md), byte-identical output.

``build(analysis)`` returns the report as plain Python data; ``render`` serialises it with
sorted keys and fixed rounding, so the same Analysis always gives the same bytes. ``read``
loads a report back (``tracekit diff`` and ``tracekit check --baseline`` compare them).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import schema as s
from tracekit.errors import BadInputError
from tracekit.model import Analysis
from tracekit.reports import frames
from tracekit.version import __version__

REPORT_FORMAT = "tracekit-report"
REPORT_VERSION = 1  # bump on any incompatible change of the keys below; documented per version
MAX_TABLE_ROWS = 2000  # extra tables are cut to this many rows ("truncated": true)
_FLOAT_DIGITS = 6
EFFICIENCY_COUNT = "efficiency_count"  # totals: collectives the efficiency is over
COLLECTIVE_COUNT = "collective_count"  # totals: collectives measured (instances on ranks)

# keys whose values are counts (JSON integers)
_INT_SUFFIXES = ("_ns", "_bytes", "bytes", "count", "rank", "ranks", "layer", "kernels")


def _is_int_key(key: str) -> bool:
    return key.endswith(_INT_SUFFIXES)


def jsonable(value: Any, key: str = "") -> Any:
    """Plain JSON data: NaN -> null, numpy -> Python, integral keys as ints, floats rounded."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, dict):
        return {str(k): jsonable(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [jsonable(v, key) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(jsonable(v, key) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value), key)
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        f = float(value)
        if not math.isfinite(f):
            return None
        if _is_int_key(key) and f.is_integer():
            return int(f)
        return round(f, _FLOAT_DIGITS)
    if isinstance(value, str | Path):
        return str(value)
    text = str(value)
    return type(value).__name__ if " at 0x" in text else text


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of ``df`` as JSON-safe dicts (column order kept; keys sorted on output)."""
    cols = list(df.columns)
    return [
        {c: jsonable(v, c) for c, v in zip(cols, row, strict=True)}
        for row in df.itertuples(index=False, name=None)
    ]


def _arrow_values(column: pa.ChunkedArray) -> list[Any] | None:
    """A column's values as ``records`` reads them from its pandas frame (an integer column
    with a null is float there; dictionaries decoded), straight from Arrow; None for a type
    whose pandas values could read otherwise (then the frame is made)."""
    kind = column.type
    if pa.types.is_dictionary(kind):
        column, kind = column.cast(kind.value_type), kind.value_type
    if pa.types.is_integer(kind) and column.null_count:
        return [None if v is None else float(v) for v in column.to_pylist()]
    if (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)
            or pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return column.to_pylist()
    if pa.types.is_list(kind) and pa.types.is_integer(kind.value_type) and not any(
            chunk.flatten().null_count for chunk in column.chunks):
        return column.to_pylist()  # pandas: an array of the integers per row
    return None


def _arrow_rows(table: pa.Table) -> list[list[Any]] | None:
    """``records`` of ``frames.to_frame(table)`` as lists, read from Arrow without the frame
    (small tables: the frame cost more than its rows), or None (see ``_arrow_values``)."""
    columns = []
    for column in table.columns:
        values = _arrow_values(column)
        if values is None:
            return None
        columns.append(values)
    names = table.column_names
    return [[jsonable(v, c) for c, v in zip(names, row, strict=True)]
            for row in zip(*columns, strict=True)]


def _run_section(analysis: Analysis) -> dict[str, Any]:
    run = analysis.run
    info = frames.to_frame(run.rank_info, [s.FORMAT, s.BACKEND, s.WORLD_SIZE])

    def distinct(col: str) -> list[Any]:
        return sorted({jsonable(v) for v in info[col].dropna()})

    world = distinct(s.WORLD_SIZE)
    return {
        "ranks": frames.ranks(analysis),
        "world_size": world[-1] if world else None,
        "formats": distinct(s.FORMAT),
        "backends": distinct(s.BACKEND),
        "events": frames.n_events(analysis),
        "skipped": [[str(f), str(r)] for f, r in run.skipped],
    }


def _extra_tables(analysis: Analysis) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in sorted(analysis.extra_tables):
        table = analysis.extra_tables[name]
        if table is None:
            continue
        part = table.slice(0, MAX_TABLE_ROWS)
        rows = _arrow_rows(part)
        if rows is None:
            df = frames.to_frame(part)
            rows = [list(r.values()) for r in records(df)]
        out[name] = {
            "columns": part.column_names,
            "rows": rows,
            "total_rows": table.num_rows,
            "truncated": table.num_rows > MAX_TABLE_ROWS,
        }
    return out


def _coverage_section(analysis: Analysis) -> dict[str, Any]:
    """COVERAGE: the run row and one object per communicator (docs/coverage.md)."""
    run = frames.coverage_run(analysis)
    run_out = None if run is None else jsonable(
        {k: v for k, v in run.items() if k not in (s.SCOPE, s.GROUP, s.PG_NAME, s.PG_DESC,
                                                     s.MEMBERS)})
    comms = frames.communicators(analysis).drop(columns=[s.SCOPE, s.GRAPH_REPLAYS, s.CLOCKS,
                                                         s.CLOCK_SPREAD_NS], errors="ignore")
    return {"run": run_out, "communicators": records(comms),
            "no_efficiency": frames.why_no_efficiency(analysis) or None}


def build(analysis: Analysis) -> dict[str, Any]:
    """The report as plain data (see docs/json-report.md for every key)."""
    phases = frames.phase_totals(analysis)
    totals = frames.phase_run_totals(analysis)
    totals[s.N_RANKS] = len(frames.ranks(analysis))
    cov = frames.coverage_run(analysis)
    if cov is not None:  # the efficiency over the collectives that have one, and over how many
        eff = cov[s.EFFICIENCY]
        totals[s.EFFICIENCY] = None if eff is None or pd.isna(eff) else float(eff)
        totals[EFFICIENCY_COUNT] = cov[s.WITH_EFFICIENCY]
        totals[COLLECTIVE_COUNT] = cov[s.COUNT]
    return {
        "format": REPORT_FORMAT,
        "report_version": REPORT_VERSION,
        "schema_version": s.SCHEMA_VERSION,
        "tracekit_version": __version__,
        "run": _run_section(analysis),
        "info": jsonable(analysis.info),
        "totals": jsonable(totals),
        "phases": records(phases),
        "paths": records(frames.path_totals(analysis)),
        "attribution": frames.attribution_counts(analysis),
        "findings": records(frames.findings(analysis)),
        "events": {
            "per_rank": records(frames.events_overview(analysis)),
            "communication": records(frames.comm_events(analysis)),
        },
        "tables": _extra_tables(analysis),
        "coverage": _coverage_section(analysis),
    }


def dumps(report: dict[str, Any]) -> str:
    return json.dumps(report, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def render(analysis: Analysis, **_options: Any) -> str:
    return dumps(build(analysis))


def read(path: str | Path) -> dict[str, Any]:
    """Load a JSON report written by ``render`` (BadInputError when it is not one)."""
    from tracekit.limits import read_options_file

    p = Path(path)
    text = read_options_file(p, "JSON report", yaml=False)
    try:
        data = json.loads(text)
    except (RecursionError, json.JSONDecodeError) as exc:
        raise BadInputError(f"cannot read a JSON report: {exc}", p) from None
    if not is_report(data):
        raise BadInputError(f"not a {REPORT_FORMAT} JSON file", p)
    if data["report_version"] > REPORT_VERSION:
        raise BadInputError(
            f"report_version {data['report_version']} is newer than this tracekit reads "
            f"({REPORT_VERSION})", p)
    return data


SNIFF_MAX_BYTES = 32_000_000  # a larger .json file is taken for a trace, not a report


def sniff(path: str | Path) -> dict[str, Any] | None:
    """The report in ``path`` if it is a tracekit JSON report, else None (a trace, say).

    Only ``.json`` files up to SNIFF_MAX_BYTES are parsed; a JSON file that is not a report
    gives None so the caller can read it as a trace instead.
    """
    p = Path(path)
    if p.suffix != ".json" or not p.is_file() or p.stat().st_size > SNIFF_MAX_BYTES:
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return read(p) if is_report(data) else None


def is_report(data: Any) -> bool:
    return (isinstance(data, dict) and data.get("format") == REPORT_FORMAT
            and isinstance(data.get("report_version"), int))
