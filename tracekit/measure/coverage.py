"""COVERAGE: what the run's figures rest on, per run and per communicator.

For each communicator (keyed as the cross-rank matching keys it: members, else process-group
name, else group label; the collectives nothing identifies share one row): its real size and
where that came from, how many members' traces are present and which are missing, and how
many of its collectives have bytes, communicator metadata, a call site, a matched peer, a
separated transfer, a bound and an efficiency, or ran inside a CUDA-graph replay. The run row
adds the world size, CUDA-graph launches seen and whether the ranks' clocks agree.

``findings`` turns absent members into ``coverage.ranks-missing`` findings. Computed from the
measure stage's frames (crossrank.match output and run.measured_frame), column-wise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import model, schema
from tracekit.measure import crossrank, evidence
from tracekit.schema import BoundStatus, Clocks, Scope

RANKS_MISSING_RULE = "coverage.ranks-missing"
CLOCK_TOLERANCE_NS = 100_000  # collective ends further apart than this: clocks disagree
GRAPH_LAUNCH = r"^(cuda|hip)GraphLaunch"
_KEY = "_comm"
_B, _T = "_bound_sum", "_transfer_sum"
_FLAGS = (schema.COUNT, schema.WITH_BYTES, schema.WITH_COMM_META, schema.WITH_CALL_SITE,
          schema.MATCHED, schema.WITH_TRANSFER, schema.WITH_BOUND, schema.WITH_EFFICIENCY,
          schema.EXCEEDED, schema.IN_GRAPH)


def run_ranks(run: model.Run, df: pd.DataFrame) -> np.ndarray:
    """The ranks whose traces are in the run."""
    info = run.rank_info
    if info is not None and info.num_rows:
        return np.unique(info.column(schema.RANK).to_numpy())
    return np.unique(df[schema.RANK].to_numpy(dtype=np.int64)) if len(df) else np.array([], int)


def world_size(run: model.Run) -> int | None:
    info = run.rank_info
    if info is None or not info.num_rows or schema.WORLD_SIZE not in info.column_names:
        return None
    value = pc.max(info.column(schema.WORLD_SIZE)).as_py()
    return None if value is None else int(value)


def graph_launches(events: pa.Table | None) -> pa.Table | None:
    """(rank, correlation) of every CUDA/HIP graph launch; None when there are no events."""
    if events is None or not events.num_rows:
        return None
    names = events.column(schema.NAME)
    hit = np.empty(len(names), dtype=bool)
    at = 0
    for chunk in names.chunks:
        _matches(chunk, hit[at:at + len(chunk)])
        at += len(chunk)
    return events.select([schema.RANK, schema.CORRELATION]).filter(pa.array(hit))


def _matches(chunk: pa.Array, out: np.ndarray) -> None:
    """GRAPH_LAUNCH per row, into ``out``; a dictionary chunk is matched once per distinct
    name and its rows read their name's answer by a numpy take."""
    if pa.types.is_dictionary(chunk.type):
        per_name = np.append(np.asarray(pc.fill_null(pc.match_substring_regex(
            chunk.dictionary.cast(pa.string()), GRAPH_LAUNCH), False).to_numpy(
            zero_copy_only=False), dtype=bool), False)  # the last: a null row's
        indices = chunk.indices
        if indices.null_count:
            indices = pc.fill_null(indices, len(chunk.dictionary))
        np.take(per_name, indices.to_numpy(), out=out, mode="clip")
        return
    out[:] = np.asarray(pc.fill_null(pc.match_substring_regex(chunk, GRAPH_LAUNCH), False)
                        .to_numpy(zero_copy_only=False), dtype=bool)


def _in_graph(df: pd.DataFrame, launches: pa.Table | None) -> pd.Series:
    if launches is None or not launches.num_rows or not len(df):
        return pd.Series(False, index=df.index)
    l_rank, l_corr = (launches.column(c) for c in (schema.RANK, schema.CORRELATION))
    # the launches with both (what a dropna keeps), as int64
    both = np.asarray(pc.and_(pc.is_valid(l_rank), pc.is_valid(l_corr)).to_numpy(
        zero_copy_only=False), dtype=bool)
    l_rank = np.asarray(pc.fill_null(l_rank, 0).to_numpy(), dtype=np.int64)[both]
    l_corr = np.asarray(pc.fill_null(l_corr, 0).to_numpy(), dtype=np.int64)[both]
    corr = df[schema.CORRELATION].astype("Int64")
    values = corr.to_numpy(dtype=np.int64, na_value=-1)
    rank = df[schema.RANK].to_numpy(dtype=np.int64)
    hit = np.zeros(len(df), dtype=bool)
    for r in np.unique(l_rank):  # per launching rank: its rows' correlations among its own
        rows = np.flatnonzero(rank == r)
        hit[rows] = np.isin(values[rows], l_corr[l_rank == r])
    return pd.Series(hit & corr.notna().to_numpy(), index=df.index)


def _flags(df: pd.DataFrame, measured: pd.DataFrame, launches: pa.Table | None) -> pd.DataFrame:
    topo = df.get(crossrank.FROM_TOPOLOGY, pd.Series(False, index=df.index)).fillna(False)
    meta = (df[schema.PG_NAME].notna() | df[schema.PG_DESC].notna()
            | df[schema.GROUP_SIZE].notna() | df[schema.COMMS_ID].notna()
            | (df[schema.PG_RANKS].notna() & ~topo.astype(bool)))
    call = df[crossrank.HAS_CALL_SITE].astype(bool) if crossrank.HAS_CALL_SITE in df else (
        df[schema.CALL_SITE].notna() & (df[schema.CALL_SITE].astype(str) != ""))
    eff = measured[schema.EFFICIENCY].notna()
    transfer = measured[schema.TRANSFER_NS].astype("float64")
    return pd.DataFrame({
        _KEY: crossrank.communicator_of(df).fillna(""),
        schema.COUNT: 1,
        schema.WITH_BYTES: df[schema.IN_BYTES].notna() | df[schema.OUT_BYTES].notna(),
        schema.WITH_COMM_META: meta,
        schema.WITH_CALL_SITE: call,
        schema.MATCHED: df[crossrank.N_SEEN] >= 2,
        schema.WITH_TRANSFER: measured[schema.TRANSFER_NS].notna(),
        schema.WITH_BOUND: measured[schema.BOUND_NS].notna(),
        schema.WITH_EFFICIENCY: eff,
        schema.EXCEEDED: measured[schema.BOUND_STATUS] == BoundStatus.EXCEEDED,
        schema.IN_GRAPH: _in_graph(df, launches),
        _B: measured[schema.BOUND_NS].astype("float64").where(eff, 0.0),
        _T: transfer.where(eff, 0.0),
    }, index=df.index)


def _eff(b: pd.Series | float, t: pd.Series | float) -> pd.Series | float:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.asarray(t) > 0, np.asarray(b) / np.asarray(t), np.nan)


def _communicators(df: pd.DataFrame, flags: pd.DataFrame, ranks: np.ndarray) -> pd.DataFrame:
    # grouped by the communicator's code among the sorted distinct keys: the strings are
    # hashed once, not by every groupby below; the keys come back as the index at the end
    code, keys = flags[_KEY].factorize(sort=True)
    g = flags.drop(columns=[_KEY]).groupby(code, sort=True)
    out = g[list(_FLAGS)].sum().astype("int64")
    out[schema.EFFICIENCY] = _eff(g[_B].sum(), g[_T].sum())
    # the two columns grouped by the codes alone, not a copy of the whole frame with them
    by_code = pd.Series(code, index=df.index, name=_KEY)
    out[schema.GROUP] = _labels(np.asarray(code, dtype=np.int64), df[schema.GROUP])
    out[schema.PG_NAME] = _firsts(code, df[schema.PG_NAME], len(keys))
    out[schema.PG_DESC] = _firsts(code, df[schema.PG_DESC], len(keys))
    out[schema.GROUP_SIZE] = df[crossrank.N_GROUP].groupby(by_code, sort=True).max()
    out[schema.SIZE_SOURCE] = _firsts(code, df[evidence.N_SOURCE], len(keys))
    members = _firsts(code, df[crossrank.MEMBERS], len(keys))
    seen = df[schema.RANK].groupby(by_code, sort=True).nunique()
    present: list[int] = []
    missing: list[list[int] | None] = []
    member_lists: list[list[int] | None] = []
    for key in out.index:  # one step per communicator, not per row (key: its code)
        text = members.get(key)
        if isinstance(text, str) and text:
            m = np.asarray([int(x) for x in text.split(",")], dtype=np.int64)
            here = np.isin(m, ranks)
            present.append(int(here.sum()))
            missing.append([int(x) for x in m[~here]])
            member_lists.append([int(x) for x in m])
        else:
            present.append(int(seen[key]))
            missing.append(None)
            member_lists.append(None)
    out[schema.RANKS_PRESENT] = present
    out[schema.MISSING_RANKS] = missing
    out[schema.MEMBERS] = member_lists
    out[schema.RANKS_ABSENT] = (out[schema.GROUP_SIZE] - out[schema.RANKS_PRESENT]).clip(
        lower=0)
    out.index = keys[out.index.to_numpy()]
    out.loc[out.index == "", [schema.GROUP_SIZE, schema.RANKS_ABSENT]] = np.nan
    out[schema.SCOPE] = Scope.COMMUNICATOR
    # communicators nothing identifies last
    order = np.lexsort((out.index.to_numpy(dtype=str), out.index == ""))
    return out.iloc[order].reset_index(drop=True)


def _firsts(code: np.ndarray, column: pd.Series, n_codes: int) -> pd.Series:
    """``column.groupby(code).first()``: per code (0..n_codes-1) its first non-missing value,
    by the first row position per code, not a groupby over the text; codes with none are
    left out (they align as missing, as first() gives them)."""
    rows = np.flatnonzero(column.notna().to_numpy(dtype=bool))
    first = np.full(n_codes, len(column), dtype=np.int64)
    np.minimum.at(first, np.asarray(code, dtype=np.int64)[rows], rows)
    has = np.flatnonzero(first < len(column))
    return pd.Series(column.to_numpy()[first[has]], index=has)


def _labels(code: np.ndarray, group: pd.Series) -> pd.Series:
    """Per communicator code, the group label most of its rows carry (ties: the first in
    sorted order), indexed by the codes that have one: counted per (code, label code)."""
    g_code, names = pd.factorize(group, sort=True)  # no label: -1
    has = g_code >= 0
    if not has.any():
        return pd.Series(dtype=object)
    n_names = len(names)
    counts = np.bincount(code[has] * n_names + g_code[has],
                         minlength=(int(code.max()) + 1) * n_names).reshape(-1, n_names)
    seen = counts.max(axis=1) > 0
    best = counts.argmax(axis=1)  # the first of the most frequent: the smallest label
    return pd.Series(np.asarray(names, dtype=object)[best[seen]], index=np.flatnonzero(seen),
                     dtype=object)


def clocks(run: model.Run, df: pd.DataFrame, n_ranks: int) -> tuple[str, float]:
    """(schema.Clocks value, median end spread ns of matched instances or NaN)."""
    spread = np.nan
    multi = df[df[crossrank.N_SEEN] >= 2] if len(df) else df
    if len(multi):
        end = multi[schema.TS_NS].astype("int64") + multi[schema.DUR_NS].astype("int64")
        g = end.groupby(multi[schema.INSTANCE].to_numpy())
        spread = float(np.median((g.max() - g.min()).to_numpy()))
    if n_ranks <= 1:
        return Clocks.SINGLE_RANK, spread
    info = run.rank_info
    if info is not None and info.num_rows and schema.HOST in info.column_names:
        hosts = info.column(schema.HOST)
        if hosts.null_count == 0 and len(pc.unique(hosts)) == 1:
            return Clocks.ONE_HOST, spread
    if np.isnan(spread):
        return Clocks.UNKNOWN, spread
    return (Clocks.ALIGNED if spread <= CLOCK_TOLERANCE_NS else Clocks.NOT_ALIGNED), spread


def coverage_table(run: model.Run, df: pd.DataFrame, measured: pd.DataFrame) -> pa.Table:
    """COVERAGE from crossrank.match's rows (after run.size_and_bound) and measured_frame."""
    ranks = run_ranks(run, df)
    launches = graph_launches(run.events)
    flags = _flags(df, measured, launches)
    comms = _communicators(df, flags, ranks) if len(df) else pd.DataFrame()
    world = world_size(run)
    clock, spread = clocks(run, df, len(ranks))
    totals = {c: int(flags[c].sum()) for c in _FLAGS}
    missing = None
    if world is not None and world <= 1_000_000:
        missing = [int(r) for r in np.setdiff1d(np.arange(world), ranks)]
    run_row = {
        schema.SCOPE: Scope.RUN, schema.GROUP_SIZE: world,
        schema.SIZE_SOURCE: schema.WORLD_SIZE if world is not None else None,
        schema.RANKS_PRESENT: len(ranks),
        schema.RANKS_ABSENT: None if world is None else max(0, world - len(ranks)),
        schema.MISSING_RANKS: missing, **totals,
        schema.EFFICIENCY: float(_eff(flags[_B].sum(), flags[_T].sum())),
        schema.GRAPH_REPLAYS: None if launches is None else launches.num_rows,
        schema.CLOCKS: clock,
        schema.CLOCK_SPREAD_NS: None if np.isnan(spread) else round(spread),
    }
    frame = pd.concat([pd.DataFrame([run_row]), comms], ignore_index=True)
    return crossrank.table_of(frame, schema.COVERAGE)


def findings(coverage: pa.Table) -> pa.Table:
    """A coverage.ranks-missing finding per communicator (and for the world) with members
    whose traces are absent."""
    df = crossrank.frame(coverage)
    absent = df[schema.RANKS_ABSENT].fillna(0) > 0
    comms = df[(df[schema.SCOPE] == Scope.COMMUNICATOR) & absent]
    run = df[(df[schema.SCOPE] == Scope.RUN) & absent]
    rows = [_finding(r, world=False) for r in comms.to_dict("records")]
    covered = set(comms[schema.GROUP_SIZE].dropna().astype(int))
    rows += [_finding(r, world=True) for r in run.to_dict("records")
             if int(r[schema.GROUP_SIZE]) not in covered]
    if not rows:
        return schema.empty(schema.FINDINGS)
    return schema.conform(pa.Table.from_pylist(rows), schema.FINDINGS)


def _ranks_text(ranks: list[int], limit: int = 16) -> str:
    shown = ",".join(str(r) for r in ranks[:limit])
    return shown + (f",... ({len(ranks)} in all)" if len(ranks) > limit else "")


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _ints(value: object) -> list[int] | None:
    if isinstance(value, list | tuple | np.ndarray):
        return [int(x) for x in value]
    return None


def _finding(r: dict[str, object], world: bool) -> dict[str, object]:
    size = int(float(str(r[schema.GROUP_SIZE])))
    present = int(float(str(r[schema.RANKS_PRESENT])))
    missing, members = _ints(r[schema.MISSING_RANKS]), _ints(r[schema.MEMBERS])
    if world:
        what = f"the run's world ({size} ranks, from the traces' world size)"
    else:
        name = _str(r[schema.GROUP]) or "a communicator"
        pg = _str(r[schema.PG_NAME])
        what = (f"communicator {name}" + (f" (process group {pg})" if pg is not None else "")
                + f" of {size} members (size from {r[schema.SIZE_SOURCE]})")
    gone = (f"; missing rank(s) {_ranks_text(missing)}" if missing else
            f"; {size - present} member(s) absent")
    msg = (f"{what}: traces of {present} of {size} members are present{gone}. Transfer and "
           "wait cannot be separated where only one member was seen, and waits, skew and "
           "stragglers cover the present members only")
    if world and missing is not None:
        members = list(range(size))
    present_ranks = ([x for x in members if x not in set(missing or [])]
                     if members is not None else None)
    evidence_text = (f"group_size={size} size_source={r[schema.SIZE_SOURCE]} "
                     f"ranks_present={present} collectives={r[schema.COUNT]} "
                     f"matched={r[schema.MATCHED]}")
    return {
        schema.RULE_ID: RANKS_MISSING_RULE, schema.SEVERITY: "warning",
        schema.RANKS: present_ranks, schema.GROUP: "WORLD" if world else _str(r[schema.GROUP]),
        schema.MESSAGE: msg, schema.EVIDENCE: evidence_text,
    }
