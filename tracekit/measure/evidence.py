"""What a measured figure rests on: the communicator's real size, how transfer was separated
from wait, and whether the bound is physically consistent with the time seen.

* ``group_size``: the size of each row's communicator from the trace's group size (Ascend: the
  parser's size from the communication matrix), else its member list (trace ranks or the
  topology), else the run's process groups (``pg_config``) by name; never the number of
  ranks that happen to be in the traces. NaN when nothing says.
* ``split_times``: transfer / wait from the cross-rank minimum only where another member of
  the communicator was seen (or the communicator has one member); the Ascend profiler's own
  per-op Transit / Wait times where it recorded them; else null (a lone member's duration is
  transfer plus an unknown wait). Wait includes the rank's notify (synchronisation) time.
* ``bound_status`` / ``exceeded_findings``: why a bound is null, and a finding naming the
  inputs that must be wrong where bound / transfer is above 1 + the profile's tolerance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import schema, tables
from tracekit.measure import crossrank
from tracekit.schema import BoundStatus, TimeSource

N_SOURCE = "_n_source"  # per row: where its group size came from (schema.SIZE_SOURCE values)
RAW_BOUND = "_raw_bound"  # the bound before a physically impossible one is withheld
RAW_EFF = "_raw_efficiency"
EXCEEDED_RULE = "measure.bound-exceeded"
ASCEND_OPS = "ascend_comm_ops"  # Run.extra key of the Ascend per-op communication table
# where a group size came from (N_SOURCE) and where transfer / wait came from: the values
# the per-row codes index
_SIZE_SOURCES = (schema.GROUP_SIZE, "topology", schema.PG_RANKS, "process_groups")
_TIME_SOURCES = (TimeSource.SOME_RANKS, TimeSource.ALL_RANKS, TimeSource.ONE_MEMBER,
                 TimeSource.PROFILER)
ROOTED = frozenset({schema.Op.BROADCAST, schema.Op.REDUCE, schema.Op.GATHER, schema.Op.SCATTER})


def group_size(df: pd.DataFrame, process_groups: pa.Table | None) -> pd.Series:
    """The communicator's size per row (float, NaN when unknown); sets ``df[N_SOURCE]``."""
    n = df[schema.GROUP_SIZE].astype("Float64")
    # an index into _SIZE_SOURCES per row (-1: none), as object strings at the end
    source = np.full(len(df), -1, dtype=np.int8)
    source[n.notna().to_numpy(dtype=bool)] = _SIZE_SOURCES.index(schema.GROUP_SIZE)
    from_members = _member_counts(df[crossrank.MEMBERS])
    take = (n.isna() & from_members.notna()).to_numpy(dtype=bool)
    topo = df.get(crossrank.FROM_TOPOLOGY, pd.Series(False, index=df.index)).fillna(False)
    source[take] = np.where(topo.to_numpy()[take].astype(bool), _SIZE_SOURCES.index(
        "topology"), _SIZE_SOURCES.index(schema.PG_RANKS))
    n = n.fillna(from_members)
    if process_groups is not None and process_groups.num_rows and n.isna().any():
        pg = crossrank.frame(process_groups.select([schema.PG_NAME, schema.PG_RANKS,
                                                    schema.GROUP_SIZE]))
        size = pg[schema.GROUP_SIZE].astype("Float64").fillna(
            pg[schema.PG_RANKS].map(lambda r: np.nan if r is None else float(len(r)),
                                    na_action="ignore").astype("Float64"))
        by_name = pd.Series(size.to_numpy(), index=pg[schema.PG_NAME]).dropna()
        by_name = by_name[~by_name.index.duplicated()]
        found = df[schema.PG_NAME].map(by_name).astype("Float64")
        take = (n.isna() & found.notna()).to_numpy(dtype=bool)
        source[take] = _SIZE_SOURCES.index("process_groups")
        n = n.fillna(found)
    words = np.array([*_SIZE_SOURCES, None], dtype=object)  # -1 reads the trailing None
    df[N_SOURCE] = pd.Series(words[source], index=df.index, dtype=object)
    return n.astype("float64")


def _member_counts(members: pd.Series) -> pd.Series:
    """Members in each row's comma-joined list (NA when missing): counted once per distinct
    list (they repeat on every row of a communicator) and spread back by factorize code."""
    codes, uniques = pd.factorize(members)
    counts = (pd.Series(np.asarray(uniques, dtype=object)).str.count(",") + 1).to_numpy(
        dtype=np.float64, na_value=np.nan)
    per_row = np.append(counts, np.nan)[codes]  # code -1 (missing) reads the NaN
    return pd.Series(per_row, index=members.index).astype("Float64")


def profiler_times(extra: dict[str, pa.Table] | None) -> pd.DataFrame | None:
    """(rank, event_id) -> the profiler's transit and wait ns, when the run recorded them."""
    table = (extra or {}).get(ASCEND_OPS)
    if table is None or not table.num_rows:
        return None
    cols = [schema.RANK, schema.EVENT_ID, schema.TRANSFER_NS, schema.WAIT_NS]
    if any(c not in table.column_names for c in cols):
        return None
    df = crossrank.int_frame(table.select(cols))
    df = df[df[schema.EVENT_ID].notna() & df[schema.TRANSFER_NS].notna()]
    return df.drop_duplicates([schema.RANK, schema.EVENT_ID]).set_index(
        [schema.RANK, schema.EVENT_ID])


def split_times(df: pd.DataFrame, n: np.ndarray, profiler: pd.DataFrame | None) -> None:
    """Set transfer / wait / skew (nullable ints) and ``time_source`` per row, in place.

    ``df`` is crossrank.match's output (transfer = min duration over the ranks seen).
    """
    seen = df[crossrank.N_SEEN].to_numpy(dtype=np.float64)
    nn = np.asarray(n, dtype=np.float64)
    one = nn == 1
    multi = seen >= 2
    every = multi & (seen >= nn)  # NaN size: False
    source = np.full(len(df), -1, dtype=np.int8)  # index into _TIME_SOURCES (-1: none)
    source[multi] = _TIME_SOURCES.index(TimeSource.SOME_RANKS)
    source[every] = _TIME_SOURCES.index(TimeSource.ALL_RANKS)
    source[one & ~multi] = _TIME_SOURCES.index(TimeSource.ONE_MEMBER)
    dur = df[schema.DUR_NS].astype("Int64")
    transfer = df[schema.TRANSFER_NS].astype("Int64")
    transfer[one & ~multi] = dur[one & ~multi]
    known = pd.Series(source >= 0, index=df.index)
    transfer = transfer.where(known, pd.NA)
    wait = (dur - transfer).astype("Int64")
    skew = df[schema.SKEW_NS].astype("Int64").where(pd.Series(multi, index=df.index), pd.NA)
    if profiler is not None and len(df):
        keys = pd.MultiIndex.from_arrays([df[schema.RANK].astype("int64"),
                                          df[schema.EVENT_ID].astype("int64")])
        found = profiler.reindex(keys)
        t = pd.Series(found[schema.TRANSFER_NS].to_numpy(), index=df.index).astype("Int64")
        w = pd.Series(found[schema.WAIT_NS].to_numpy(), index=df.index).astype("Int64")
        has = t.notna()
        transfer = transfer.where(~has, t)
        wait = wait.where(~has, w.fillna(dur - t))
        source[has.to_numpy()] = _TIME_SOURCES.index(TimeSource.PROFILER)
    df[schema.TRANSFER_NS] = transfer
    # the notify kernels that prepare the instance are synchronisation: wait, not transfer
    df[schema.WAIT_NS] = (wait + crossrank.notify_of(df).astype("Int64")).astype("Int64")
    df[schema.SKEW_NS] = skew
    df[schema.TIME_SOURCE] = tables.text_series(source, _TIME_SOURCES, df.index)


def bound_status(n: np.ndarray, size: np.ndarray, bound: np.ndarray, transfer: np.ndarray,
                 has_profile: bool) -> np.ndarray:
    """BoundStatus per row (before the plausibility check), first reason wins, as its index
    in BoundStatus.ALL (int8: the column is built from the codes, tables.text_series)."""
    out = np.full(len(n), BoundStatus.ALL.index(BoundStatus.OK), dtype=np.int8)
    checks = [
        (~np.isfinite(transfer), BoundStatus.NO_TRANSFER),
        (~np.isfinite(bound), BoundStatus.NO_MODEL),
        (~np.isfinite(size), BoundStatus.NO_SIZE),
        (n == 1, BoundStatus.ONE_MEMBER),
        (~np.isfinite(n), BoundStatus.NO_GROUP_SIZE),
    ]
    for mask, status in checks:  # last assignment wins: most basic reason last
        out[mask] = BoundStatus.ALL.index(status)
    if not has_profile:
        out[:] = BoundStatus.ALL.index(BoundStatus.NO_PROFILE)
    return out


def exceeded_findings(measured: pd.DataFrame, profile_name: str, tolerance: float) -> pa.Table:
    """One finding per (group, op, link class, size) whose bound / transfer exceeded 1 + tol.

    ``measured`` is run.measured_frame's output with the RAW_BOUND / RAW_EFF columns.
    """
    hit = measured[measured[schema.BOUND_STATUS] == BoundStatus.EXCEEDED]
    if hit.empty:
        return schema.empty(schema.FINDINGS)
    keys = [schema.GROUP, schema.OP, schema.LINK_CLASS, schema.N_RANKS]
    rows = []
    for key, part in hit.groupby(keys, dropna=False, sort=True):
        group, op, link, n = key
        worst = part.loc[part[RAW_EFF].idxmax()]
        n_text = "unknown" if pd.isna(n) else str(int(n))
        source = worst.get(N_SOURCE) or "unknown"
        where = group if pd.notna(group) else "an unknown communicator"
        msg = (f"{len(part)} {op} collective(s) on {where} ran faster than the alpha-beta "
               "bound allows (efficiency up to "
               f"{worst[RAW_EFF]:.2f} > {1 + tolerance:.2f}): their efficiency is withheld. "
               f"One of these inputs must be wrong: the group size ({n_text}, from {source}), "
               f"the link class ({link}), the bytes ({int(worst[schema.MSG_BYTES])} B for the "
               f"worst), the profile ({profile_name}"
               + (": the bound is its latency term alpha" if worst[schema.LATENCY_BOUND] is True
                  else "") + ") or the transfer time ("
               + str(worst[schema.TIME_SOURCE]) + (
                   "; the root of a rooted collective may return before its peers receive"
                   if op in ROOTED else "") + ")")
        evidence = (f"worst rank={int(worst[schema.RANK])} event_id={worst[schema.EVENT_ID]} "
                    f"bound_ns={int(worst[RAW_BOUND])} transfer_ns={worst[schema.TRANSFER_NS]} "
                    f"time_source={worst[schema.TIME_SOURCE]} tolerance={tolerance}")
        rows.append({
            schema.RULE_ID: EXCEEDED_RULE, schema.SEVERITY: "warning",
            schema.RANKS: sorted({int(r) for r in part[schema.RANK]}),
            schema.GROUP: None if pd.isna(group) else str(group),
            schema.PATH: _first(part[schema.PATH]), schema.MESSAGE: msg,
            schema.EVIDENCE: evidence,
        })
    return schema.conform(pa.Table.from_pylist(rows), schema.FINDINGS)


def _first(values: pd.Series) -> str | None:
    v = values.dropna()
    return None if v.empty else str(v.iloc[0])
