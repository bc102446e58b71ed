"""What `tracekit analyze` shows about attribution: pure functions from result tables.

* ``by_group(attributed)``: COMM_SUMMARY per communicator;
* ``by_path(attributed)``: COMM_SUMMARY per (communicator, path);
* ``by_op(attributed)``: COMM_SUMMARY per (communicator, path, op);
* ``findings_summary(findings)``: FINDINGS sorted by severity, layer and rule.

Only instance rows count (``is_instance``: the row that carries a collective's time on its
rank), so a collective is counted once per rank whatever wraps it. Kernels that form one
logical collective (``logical_id``) count once; their bytes and time add up.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from tracekit import schema as S
from tracekit.schema import Status
from tracekit.tables import to_pandas

_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def _instances(attributed: pa.Table) -> pd.DataFrame:
    cols = [S.RANK, S.GROUP, S.PATH, S.OP, S.STATUS, S.LOGICAL_ID, S.IN_BYTES, S.OUT_BYTES,
            S.DUR_NS, S.IS_INSTANCE, S.EVENT_ID]
    df = to_pandas(attributed, cols)
    df = df[df[S.IS_INSTANCE].fillna(False).astype(bool) & df[S.STATUS].notna()]
    for col in (S.GROUP, S.PATH, S.OP, S.STATUS):
        df[col] = df[col].astype("object")
    df[S.MSG_BYTES] = df[S.IN_BYTES].fillna(df[S.OUT_BYTES]).fillna(0).astype("int64")
    # one id per logical collective per rank: logical_id, else the event itself
    df[S.INSTANCE] = df[S.LOGICAL_ID].astype("Int64").astype("string").fillna(
        "e" + df[S.EVENT_ID].astype("string"))
    return df


def _summarise(df: pd.DataFrame, keys: list[str]) -> pa.Table:
    if df.empty:
        return S.empty(S.COMM_SUMMARY)
    work = df.copy()
    for k in keys:
        work[k] = work[k].where(work[k].notna(), "")
    per = work.groupby([*keys, S.RANK, S.INSTANCE], dropna=False).agg(
        **{S.MSG_BYTES: (S.MSG_BYTES, "sum"), S.COMM_NS: (S.DUR_NS, "sum"),
           S.STATUS: (S.STATUS, "first")}).reset_index()
    out = per.groupby(keys, dropna=False).agg(
        **{S.COUNT: (S.INSTANCE, "size"), S.N_RANKS: (S.RANK, "nunique"),
           S.MSG_BYTES: (S.MSG_BYTES, "sum"), S.COMM_NS: (S.COMM_NS, "sum"),
           S.AMBIGUOUS_COUNT: (S.STATUS, lambda s: int((s == Status.AMBIGUOUS).sum())),
           S.UNATTRIBUTED_COUNT: (S.STATUS, lambda s: int((s == Status.UNATTRIBUTED).sum()))}
    ).reset_index()
    for k in keys:
        out[k] = out[k].where(out[k] != "", None)
    out = out.sort_values(S.COMM_NS, ascending=False, kind="stable")
    return S.conform(pa.Table.from_pandas(out, preserve_index=False), S.COMM_SUMMARY)


def by_group(attributed: pa.Table) -> pa.Table:
    """Count, bytes and time per communicator (null group: not attributed)."""
    return _summarise(_instances(attributed), [S.GROUP])


def by_path(attributed: pa.Table) -> pa.Table:
    """Count, bytes and time per (communicator, path)."""
    return _summarise(_instances(attributed), [S.GROUP, S.PATH])


def by_op(attributed: pa.Table) -> pa.Table:
    """Count, bytes and time per (communicator, path, op)."""
    return _summarise(_instances(attributed), [S.GROUP, S.PATH, S.OP])


def findings_summary(findings: pa.Table) -> pa.Table:
    """FINDINGS ordered for people: errors first, then by layer and rule."""
    if findings.num_rows == 0:
        return findings
    df = to_pandas(findings)
    df["_order"] = df[S.SEVERITY].astype("object").map(_SEVERITY_ORDER).fillna(3)
    df = df.sort_values(["_order", S.LAYER, S.RULE_ID], kind="stable", na_position="last")
    return S.conform(pa.Table.from_pandas(df.drop(columns=["_order"]), preserve_index=False),
                     S.FINDINGS)
