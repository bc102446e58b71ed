"""Flight Recorder dumps as evidence for `tracekit analyze`: the communicator and per-group
sequence id of trace collectives that carry none (gloo's ``c10d::*`` ops name no group).

Per rank, the trace's c10d dispatcher ops (one per ``torch.distributed`` call, in issue
order) are aligned with the rank's FR entries (in record order) on their op sequence. Only
an alignment that matches op for op at exactly one offset is used; then rows without a
process group take the entry's pg name, description, ranks and sequence id
(``meta_source = flight_recorder``) and rows that have one are checked against it. No
alignment, an ambiguous one, or a disagreement is a finding, and nothing is filled.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import model
from tracekit import schema as S
from tracekit.schema import Kind, MetaSource
from tracekit.tables import to_pandas

RULE = "flight_recorder.disagrees"
_FILLED = (S.PG_NAME, S.PG_DESC, S.PG_RANKS, S.SEQ)


def _finding(rank: int, message: str, evidence: str) -> dict[str, Any]:
    return {S.RULE_ID: RULE, S.SEVERITY: "warning", S.RANKS: [rank], S.MESSAGE: message,
            S.EVIDENCE: evidence}


def _offsets(trace_ops: list[str], fr_ops: list[str]) -> list[int]:
    n, m = len(trace_ops), len(fr_ops)
    return [k for k in range(m - n + 1) if fr_ops[k:k + n] == trace_ops]


def _first_difference(trace_ops: list[str], fr_ops: list[str]) -> str:
    i = next((i for i, (a, b) in enumerate(zip(trace_ops, fr_ops, strict=False)) if a != b),
             min(len(trace_ops), len(fr_ops)))
    have = fr_ops[i] if i < len(fr_ops) else "nothing"
    want = trace_ops[i] if i < len(trace_ops) else "nothing"
    return f"collective #{i}: the trace has {want}, the Flight Recorder {have}"


def _align(rank: int, issue: pd.DataFrame, mine: pd.DataFrame,
           findings: list[dict[str, Any]]) -> pd.DataFrame | None:
    """The FR rows matched to ``issue`` row by row, or None (with a finding)."""
    t_ops, f_ops = issue[S.OP].tolist(), mine[S.OP].tolist()
    offsets = _offsets(t_ops, f_ops)
    if len(offsets) != 1:
        what = (f"aligns at {len(offsets)} offsets" if offsets else
                f"does not match: {_first_difference(t_ops, f_ops)}")
        findings.append(_finding(rank, f"rank {rank}: the Flight Recorder's collectives and "
                                 f"the trace's {what}; its communicators were not used",
                                 f"{len(t_ops)} c10d ops in the trace, {len(f_ops)} FR entries"))
        return None
    k = offsets[0]
    return mine.iloc[k:k + len(issue)]


def apply_flight_recorder(run: model.Run, fr: pa.Table) -> tuple[model.Run, pa.Table]:
    """``run`` with FR evidence filled in, and the FINDINGS of every disagreement."""
    ev = to_pandas(run.events, [S.RANK, S.KIND, S.NAME, S.OP, S.TS_NS, *_FILLED])
    frame = to_pandas(fr, [S.RANK, S.RECORD_ID, S.OP, S.IS_P2P, *_FILLED])
    is_issue = (ev[S.KIND] == Kind.CPU_OP) & ev[S.NAME].astype(str).str.startswith("c10d::") \
        & ev[S.OP].notna()
    findings: list[dict[str, Any]] = []
    fill_rows: list[np.ndarray] = []
    fill_from: list[pd.DataFrame] = []
    for rank, issue in ev[is_issue].sort_values(S.TS_NS, kind="stable").groupby(S.RANK):
        mine = frame[frame[S.RANK] == rank]
        if mine.empty:
            continue
        matched = _align(int(rank), issue, mine, findings)
        if matched is None:
            continue
        own = issue[S.PG_DESC].notna()
        differ = own & (issue[S.PG_DESC].to_numpy() != matched[S.PG_DESC].to_numpy())
        if differ.any():
            i = int(np.flatnonzero(differ.to_numpy())[0])
            findings.append(_finding(int(rank), f"rank {rank}: {int(differ.sum())} collective(s) "
                                     "name another process group than the Flight Recorder",
                                     f"first: trace {issue[S.PG_DESC].iloc[i]!r}, FR "
                                     f"{matched[S.PG_DESC].iloc[i]!r}"))
            continue
        fill_rows.append(issue.index[~own].to_numpy())
        fill_from.append(matched[~own.to_numpy()])
    events = _filled(run.events, fill_rows, fill_from)
    table = (S.conform(pa.Table.from_pylist(findings), S.FINDINGS) if findings
             else S.empty(S.FINDINGS))
    return dataclasses.replace(run, events=events), table


def _filled(events: pa.Table, rows: list[np.ndarray], sources: list[pd.DataFrame]) -> pa.Table:
    if not rows or not sum(len(r) for r in rows):
        return events
    at = np.concatenate(rows)
    src = pd.concat(sources)
    cols = {**{c: src[c].to_numpy() for c in _FILLED},
            S.META_SOURCE: np.full(len(at), MetaSource.FLIGHT_RECORDER, dtype=object),
            S.GROUP_SIZE: src[S.PG_RANKS].map(lambda r: None if r is None else len(r)).to_numpy()}
    n = events.num_rows
    take = np.arange(n, dtype=np.int64)
    take[at] = n + np.arange(len(at), dtype=np.int64)
    index = pa.array(take)
    for name, values in cols.items():
        i = events.schema.get_field_index(name)
        field = events.schema.field(i)
        base = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        new = pa.array([None if isinstance(v, float) and v != v else v for v in values.tolist()],
                       base)
        whole = pa.concat_arrays([events.column(i).combine_chunks().cast(base), new])
        arr = whole.take(index)
        events = events.set_column(i, field, arr.dictionary_encode()
                                   if pa.types.is_dictionary(field.type) else arr)
    return events
