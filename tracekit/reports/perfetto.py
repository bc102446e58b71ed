"""Chrome trace-event JSON for Perfetto UI and chrome://tracing, annotated by tracekit.

Every original event of every rank becomes a complete ("X") event whose args carry
tracekit's verdict (group, path, phase, layer, status, rule) and, for measured collectives,
the bound, efficiency, transfer and wait. Each rank is one process (pid = rank); each original
thread or stream one thread, named by "M" metadata events. Two kinds of tracks are added per
rank: one per phase (spans from the first to the last collective of that phase in a layer)
and one for findings (instant events at the first collective they concern). The trace's own
flow events (ac2g launch -> kernel, fwdbwd; ph s / t / f) are kept, re-read from the rank
files (``perfetto_flows``) and put on the same exported threads.

Times are microseconds (the format's unit) relative to the earliest event, written as floats
that keep the integer nanoseconds exactly (x.yyy); the epoch offset is in ``otherData``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tracekit import schema as s
from tracekit.model import Analysis
from tracekit.reports import frames
from tracekit.reports import perfetto_flows as flow
from tracekit.version import __version__

PHASE_TID0 = 1  # phase tracks use tids 1..len(Phase.ALL)
FINDINGS_TID = PHASE_TID0 + len(s.Phase.ALL)
THREAD_TID0 = 100  # original threads and streams start here

EVENT_COLS = (s.RANK, s.EVENT_ID, s.PID, s.TID, s.DEVICE, s.STREAM, s.THREAD, s.TS_NS, s.DUR_NS,
              s.NAME, s.CATEGORY, s.KIND, s.CORRELATION, s.EXTERNAL_ID, s.OP, s.IN_BYTES,
              s.PG_DESC, s.SEQ)
ATTR_COLS = (s.GROUP, s.PATH, s.PHASE, s.LAYER, s.KERNEL_CLASS, s.STATUS, s.RULE_ID)
MEASURE_COLS = (s.INSTANCE, s.MSG_BYTES, s.BOUND_NS, s.EFFICIENCY, s.TRANSFER_NS, s.WAIT_NS,
                s.NOTIFY_NS, s.BUSBW_GBPS, s.EXPOSED_NS)
ARG_COLS = (s.EVENT_ID, s.KIND, s.CORRELATION, s.EXTERNAL_ID, s.OP, s.IN_BYTES, s.PG_DESC,
            s.SEQ, *ATTR_COLS, *MEASURE_COLS)
FLOAT_COLS = (s.EFFICIENCY, s.BUSBW_GBPS)
TID_COL = "export_tid"  # derived: the exported thread id
START, END = "span_start_ns", "span_end_ns"  # derived: a phase span


def us(ns: pd.Series | np.ndarray) -> list[float]:
    """Integer nanoseconds -> float microseconds (exact to the nanosecond below 2**53 ns)."""
    return (np.asarray(ns, dtype=np.int64) / 1000.0).tolist()


def _events(analysis: Analysis) -> pd.DataFrame:
    source = analysis.attributed if frames.has_rows(analysis.attributed) else analysis.run.events
    df = frames.to_frame(source, [*EVENT_COLS, *ATTR_COLS])
    if frames.has_rows(analysis.measured):
        m = frames.to_frame(analysis.measured, [s.RANK, s.EVENT_ID, *MEASURE_COLS])
        df = df.merge(m.drop_duplicates([s.RANK, s.EVENT_ID]), on=[s.RANK, s.EVENT_ID],
                      how="left")
    else:
        for col in MEASURE_COLS:
            df[col] = None
    return df


def _thread_keys(df: pd.DataFrame) -> pd.DataFrame:
    return df[[s.RANK, s.PID, s.TID]].fillna(-1).astype(np.int64)


def _thread_ids(df: pd.DataFrame, pairs: pd.DataFrame) -> pd.Series:
    tid = _thread_keys(df).merge(pairs, on=[s.RANK, s.PID, s.TID], how="left")[TID_COL]
    tid.index = df.index
    return tid


def _threads(df: pd.DataFrame, flows: pd.DataFrame
             ) -> tuple[pd.Series, pd.DataFrame, list[dict[str, Any]]]:
    """Dense thread ids per rank (of the events and of the flows' threads), the
    (rank, pid, tid) -> exported tid table, and the thread_name metadata events."""
    keys = pd.concat([_thread_keys(df), _thread_keys(flows)], ignore_index=True)
    pairs = keys.drop_duplicates().sort_values([s.RANK, s.PID, s.TID])
    pairs[TID_COL] = pairs.groupby(s.RANK).cumcount() + THREAD_TID0
    tid = _thread_ids(df, pairs)
    first = df.assign(**{TID_COL: tid}).drop_duplicates([s.RANK, TID_COL])
    meta = []
    for row in first.itertuples(index=False):
        rank, name, t = getattr(row, s.RANK), getattr(row, s.THREAD), getattr(row, TID_COL)
        label = name if isinstance(name, str) and name else (
            f"pid {getattr(row, s.PID)} tid {getattr(row, s.TID)}")
        meta.append({"ph": "M", "name": "thread_name", "pid": int(rank), "tid": int(t),
                     "args": {"name": label}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": int(rank), "tid": int(t),
                     "args": {"sort_index": int(t)}})
    return tid.astype(np.int64), pairs, meta


def _flow_events(flows: pd.DataFrame, pairs: pd.DataFrame, base: int) -> list[dict[str, Any]]:
    """The trace's own flow events (perfetto_flows), on the exported threads."""
    if not len(flows):
        return []
    tid = _thread_ids(flows, pairs).astype(np.int64).tolist()
    ids = [_plain(flow.ID, v) for v in flows[flow.ID].tolist()]
    bps = flows[flow.BP].astype(object).where(flows[flow.BP].notna(), None).tolist()
    columns = zip(flows[flow.PH].tolist(), ids, flows[s.NAME].fillna("").tolist(),
                  flows[s.CATEGORY].fillna("").tolist(), us(flows[s.TS_NS] - base),
                  flows[s.RANK].astype(np.int64).tolist(), tid, strict=True)
    out = [{"ph": ph, "id": i, "name": n, "cat": c, "ts": t, "pid": p, "tid": d}
           for ph, i, n, c, t, p, d in columns]
    for event, bp in zip(out, bps, strict=True):
        if bp is not None:
            event["bp"] = bp
    return out


def _values(series: pd.Series, column: str) -> list[Any]:
    """A column as Python values (ints stay ints, nulls None), converted in one pass."""
    mask = series.notna().to_numpy()
    if column in FLOAT_COLS:
        values = series.to_numpy(dtype=float, na_value=np.nan).tolist()
    elif pd.api.types.is_numeric_dtype(series):
        values = series.fillna(0).to_numpy().astype(np.int64).tolist()
    else:
        values = series.astype(object).tolist()
    return [v if m else None for v, m in zip(values, mask, strict=True)]


def _args(df: pd.DataFrame) -> list[dict[str, Any]]:
    cols = [c for c in ARG_COLS if c in df.columns]
    columns = [_values(df[c], c) for c in cols]
    return [{c: v for c, v in zip(cols, row, strict=True) if v is not None}
            for row in zip(*columns, strict=True)]


def _plain(column: str, v: Any) -> Any:
    """Python scalars; integer columns that pandas widened to float back to int."""
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, float | np.floating):
        f = float(v)
        if column not in FLOAT_COLS and f.is_integer():
            return int(f)
        return f
    return v


def _phase_tracks(analysis: Analysis, base: int) -> list[dict[str, Any]]:
    if not frames.has_rows(analysis.measured):
        return []
    m = frames.to_frame(analysis.measured, [s.RANK, s.PHASE, s.LAYER, s.TS_NS, s.DUR_NS])
    m = m.assign(**{END: m[s.TS_NS] + m[s.DUR_NS], s.PHASE: m[s.PHASE].fillna(s.Phase.OTHER),
                    s.LAYER: m[s.LAYER].fillna(-1)})
    g = m.groupby([s.RANK, s.PHASE, s.LAYER])
    spans = pd.DataFrame({START: g[s.TS_NS].min(), END: g[END].max()})
    spans = spans.reset_index().sort_values([s.RANK, s.PHASE, START])
    order = {p: i for i, p in enumerate(s.Phase.ALL)}
    out: list[dict[str, Any]] = []
    for rank in sorted(spans[s.RANK].unique()):
        for phase in sorted(spans.loc[spans[s.RANK] == rank, s.PHASE].unique(),
                            key=lambda p: order.get(p, len(order))):
            tid = PHASE_TID0 + order.get(phase, order[s.Phase.OTHER])
            out.append({"ph": "M", "name": "thread_name", "pid": int(rank), "tid": tid,
                        "args": {"name": f"tracekit phase: {phase}"}})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": int(rank), "tid": tid,
                        "args": {"sort_index": tid}})
    ts, dur = us(spans[START] - base), us(spans[END] - spans[START])
    for row, t, d in zip(spans.itertuples(index=False), ts, dur, strict=True):
        phase, layer = getattr(row, s.PHASE), int(getattr(row, s.LAYER))
        out.append({"ph": "X", "name": phase, "cat": "tracekit.phase", "ts": t, "dur": d,
                    "pid": int(getattr(row, s.RANK)),
                    "tid": PHASE_TID0 + order.get(phase, order[s.Phase.OTHER]),
                    "args": {s.PHASE: phase, s.LAYER: None if layer < 0 else layer}})
    return out


def _finding_events(analysis: Analysis, base: int, ranks: list[int]) -> list[dict[str, Any]]:
    found = frames.findings(analysis)
    if not len(found):
        return []
    m = frames.to_frame(analysis.measured, [s.RANK, s.PATH, s.LAYER, s.TS_NS])
    first_ts = int(m[s.TS_NS].min()) if len(m) else base
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", "pid": r, "tid": FINDINGS_TID,
         "args": {"name": "tracekit findings"}} for r in ranks]
    for f in found.to_dict("records"):
        where = m
        if f[s.PATH]:
            where = where[where[s.PATH] == f[s.PATH]]
        if f[s.LAYER] is not None and not pd.isna(f[s.LAYER]):
            where = where[where[s.LAYER] == f[s.LAYER]]
        targets = f[s.RANKS] or ranks[:1]
        for r in targets:
            hit = where.loc[where[s.RANK] == r, s.TS_NS]
            ts = int(hit.min()) if len(hit) else first_ts
            out.append({
                "ph": "i", "s": "t", "name": f"{f[s.SEVERITY]}: {f[s.RULE_ID]}",
                "cat": "tracekit.finding", "ts": us([ts - base])[0], "pid": int(r),
                "tid": FINDINGS_TID,
                "args": {k: _plain(k, v) for k, v in f.items() if v is not None and not (
                    isinstance(v, float) and np.isnan(v))},
            })
    return out


def build(analysis: Analysis) -> dict[str, Any]:
    """The trace as a dict: {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}."""
    df = _events(analysis)
    ranks = frames.ranks(analysis)
    base = int(df[s.TS_NS].min()) if len(df) else 0
    events: list[dict[str, Any]] = []
    for r in ranks:
        events.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0,
                       "args": {"name": f"rank {r}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0,
                       "args": {"sort_index": r}})
    if len(df):
        trace_flows = flow.flows(analysis.run.rank_info)
        tid, pairs, meta = _threads(df, trace_flows)
        events += meta
        columns = zip(df[s.NAME].fillna("").astype(str).tolist(),
                      df[s.CATEGORY].fillna("").astype(str).tolist(),
                      us(df[s.TS_NS] - base), us(df[s.DUR_NS]),
                      df[s.RANK].astype(np.int64).tolist(), tid.tolist(), _args(df), strict=True)
        events += [{"ph": "X", "name": n, "cat": c, "ts": t, "dur": d, "pid": p, "tid": i,
                    "args": a} for n, c, t, d, p, i, a in columns]
        events += _flow_events(trace_flows, pairs, base)
    events += _phase_tracks(analysis, base)
    events += _finding_events(analysis, base, ranks)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"producer": f"tracekit {__version__}", "base_time_ns": base,
                      "schema_version": s.SCHEMA_VERSION},
    }


def render(analysis: Analysis, **_options: Any) -> str:
    import msgspec

    return msgspec.json.encode(build(analysis)).decode("utf-8") + "\n"
