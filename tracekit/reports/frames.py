"""Pure functions that turn an Analysis' result tables into small pandas frames for reporters.

Nothing here plots or formats; nothing here measures. These functions only select, sum and
sort what the earlier stages computed, so every reporter (text, JSON, HTML, Markdown) shows
the same figures. Every function accepts missing tables (None or empty) and returns an empty
frame with the expected columns instead of failing.

Inside ``with shared():`` (the CLI renders all its reports in one) the sums that several
reports and panels read (phase and path totals, attribution counts, coverage rows) are
computed once per analysis; each caller gets its own copy.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any, TypeGuard, TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import schema as s
from tracekit.model import Analysis
from tracekit.reports import digest
from tracekit.rules.labels import PathLabel
from tracekit.tables import rank_chunks

# Columns that reports derive (not schema columns): named once here.
KERNELS = "kernels"  # device kernels per rank
SPAN_NS = s.SPAN_NS  # last event end minus first event start on a rank
END_NS = "end_ns"
BUSY_NS = "busy_ns"  # compute + fused + memcpy + exposed communication
EXPOSED_COMM_PCT = "exposed_comm_pct"  # 100 x exposed / busy
N_EFF = "n_eff"  # collectives of a path row with both a bound and a transfer (its eff is over them)
_BOUNDED_TRANSFER = "_bounded_transfer"
COVERAGE_TABLE = "coverage"  # Analysis.tables key of COVERAGE

# The per-phase time columns summed from PHASES, in display order.
PHASE_SUMS = (
    s.COUNT, s.MSG_BYTES, s.COMM_NS, s.FUSED_NS, s.COMPUTE_NS, s.MEMCPY_NS, s.EXPOSED_NS,
    s.TRANSFER_NS, s.WAIT_NS, s.NOTIFY_NS, s.BOUND_NS,
)
# The per-path sums taken from MEASURED (wait includes notify_ns: the synchronisation kernels).
PATH_SUMS = (s.COUNT, s.MSG_BYTES, s.DUR_NS, s.TRANSFER_NS, s.WAIT_NS, s.NOTIFY_NS, s.BOUND_NS,
             s.EXPOSED_NS)
PATH_KEYS = (s.PHASE, s.PATH, s.GROUP, s.OP)


_SHARED: ContextVar[dict[tuple[object, ...], tuple[Any, Any]] | None] = \
    ContextVar("tracekit_report_frames", default=None)
_F = TypeVar("_F", bound=Callable[..., Any])


@contextlib.contextmanager
def shared() -> Iterator[None]:
    """Compute each ``@_once`` frame once per analysis while inside (nested: the outer one)."""
    token = _SHARED.set({}) if _SHARED.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _SHARED.reset(token)


def _once(*reads: str) -> Callable[[_F], _F]:
    """``fn(analysis)`` computed once inside ``shared()``; each call gets a copy.

    ``reads``: the Analysis fields (or result table names, for the others) ``fn`` reads; the
    value is kept per those tables, so that two analyses with the same ones (the CLI's JSON
    analysis and the others' copy without the first summary's tables) share it.
    """
    def decorate(fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(analysis: Analysis) -> Any:
            memo = _SHARED.get()
            if memo is None:
                return fn(analysis)
            inputs = tuple(getattr(analysis, name) if name in _FIELDS
                           else analysis.extra_tables.get(name) for name in reads)
            key = (fn.__name__, *map(id, inputs))
            if key not in memo:  # the tables are kept with it, so their ids stay their own
                memo[key] = (inputs, fn(analysis))
            value = memo[key][1]
            return value.copy() if isinstance(value, pd.DataFrame | dict) else value
        return wrapper  # type: ignore[return-value]
    return decorate


_FIELDS = ("attributed", "measured", "phases_table", "findings_table")


def has_rows(table: pa.Table | None) -> TypeGuard[pa.Table]:
    return table is not None and table.num_rows > 0


def to_frame(table: pa.Table | None, columns: tuple[str, ...] | list[str] = ()) -> pd.DataFrame:
    """A pandas frame of ``table`` with dictionaries decoded to plain strings.

    Columns of ``columns`` missing from the table come back as all-null columns, so callers can
    select them unconditionally. Inside ``shared()`` each column of a table is decoded once
    (MEASURED's path, group and op strings are read by a dozen frames of the reports); each
    call gets its own frame.
    """
    if table is None:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    memo = _SHARED.get()
    wanted = [c for c in columns if c in table.column_names]
    if memo is None or not wanted or len(set(columns)) != len(columns):
        return _decoded(table, columns)
    entry = memo.setdefault((_COLUMNS, id(table)), (table, {}))  # the table kept: its id too
    cache: dict[str, pd.Series] = entry[1]
    todo = [c for c in wanted if c not in cache]
    if todo:
        fresh = _decoded(table, todo)
        cache.update({c: fresh[c] for c in todo})
    rows = table.num_rows
    data = {c: cache[c] if c in cache else pd.Series([None] * rows, dtype=object)
            for c in columns}
    return pd.DataFrame(data, copy=not _COPY_ON_WRITE)


_COLUMNS = "to_frame: decoded columns"  # key of a table's decoded columns in shared()'s memo
_COPY_ON_WRITE = int(pd.__version__.split(".")[0]) >= 3  # frames share columns safely


def _decoded(table: pa.Table, columns: tuple[str, ...] | list[str] = ()) -> pd.DataFrame:
    """``to_frame`` without the shared columns."""
    wanted = [c for c in columns if c in table.column_names] if columns else table.column_names
    sub = table.select(wanted)
    arrays = [
        col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col
        for col in sub.columns
    ]
    df = pa.Table.from_arrays(arrays, names=wanted).to_pandas()
    for c in columns:
        if c not in df.columns:
            df[c] = pd.Series([None] * len(df), dtype=object)
    return df[list(columns)] if columns else df


def to_frame_where(table: pa.Table | None, keep: np.ndarray,
                   columns: tuple[str, ...] | list[str]) -> pd.DataFrame:
    """``to_frame(table, columns)`` of the rows where ``keep``, with the dtypes the whole
    table's frame has (an integer column with a null anywhere is float, a boolean one with a
    null holds objects), so that selecting first and converting the selected rows only gives
    the same frame as converting all rows and selecting them (index aside)."""
    if table is None:
        return to_frame(None, columns)
    wanted = [c for c in columns if c in table.column_names]
    df = _decoded(table.select(wanted).filter(pa.array(keep, pa.bool_())), columns)
    for c in wanted:
        col = table.column(c)
        if not col.null_count:
            continue
        if pa.types.is_integer(col.type) and df[c].dtype.kind in "iu":
            df[c] = df[c].astype(np.float64)
        elif pa.types.is_boolean(col.type) and df[c].dtype.kind == "b":
            df[c] = df[c].astype(object)
    return df


def is_true(table: pa.Table | None, column: str) -> np.ndarray:
    """Per row, whether the boolean ``column`` is true (False where null or missing)."""
    if table is None:
        return np.zeros(0, dtype=bool)
    if column not in table.column_names:
        return np.zeros(table.num_rows, dtype=bool)
    return table.column(column).fill_null(False).to_numpy(zero_copy_only=False).astype(bool)


def is_valid(table: pa.Table | None, column: str) -> np.ndarray:
    """Per row, whether ``column`` has a value (False everywhere when it is missing)."""
    import pyarrow.compute as pc

    if table is None:
        return np.zeros(0, dtype=bool)
    if column not in table.column_names:
        return np.zeros(table.num_rows, dtype=bool)
    return pc.is_valid(table.column(column)).to_numpy(zero_copy_only=False)


def codes(table: pa.Table, column: str, categories: tuple[str, ...] | list[str],
          null: int = -1) -> np.ndarray:
    """Per row of ``table``, the index of its ``column`` value in ``categories`` (int64):
    ``null`` where the value is null (or the column is missing), -1 where it is not among
    them.

    Dictionary columns are mapped through their (small) dictionaries, so no string of the
    table is decoded."""
    if column not in table.column_names:
        return np.full(table.num_rows, null, dtype=np.int64)
    import pyarrow.compute as pc

    cats = list(categories)
    out = [np.zeros(0, dtype=np.int64)]
    for chunk in table.column(column).chunks:
        if pa.types.is_dictionary(chunk.type):
            values = chunk.dictionary.to_pylist()
            lut = np.array([cats.index(v) if v in cats else -1 for v in values] + [null],
                           dtype=np.int64)
            indices = chunk.indices if not chunk.indices.null_count \
                else chunk.indices.fill_null(len(values))  # no copy without a null
            out.append(lut[indices.to_numpy()])
        elif pa.types.is_null(chunk.type):
            out.append(np.full(len(chunk), null, dtype=np.int64))
        else:
            found = pc.index_in(chunk, value_set=pa.array(cats, chunk.type))
            found = found.fill_null(-1).to_numpy().astype(np.int64)
            out.append(np.where(chunk.is_null().to_numpy(zero_copy_only=False), null, found))
    return np.concatenate(out)


def kernel_rows(table: pa.Table) -> np.ndarray:
    """Per row of ``table``, whether its kind is a device kernel; inside ``shared()`` worked
    out once per table (the EVENTS overview, its communication sums and the plots all ask),
    each call getting its own copy."""
    memo = _SHARED.get()
    if memo is None:
        return codes(table, s.KIND, (s.Kind.KERNEL,)) == 0
    key = (_KERNEL_ROWS, id(table))
    if key not in memo:  # the table kept with it: its id stays its own
        memo[key] = (table, codes(table, s.KIND, (s.Kind.KERNEL,)) == 0)
    return memo[key][1].copy()


_KERNEL_ROWS = "kernel_rows"  # key of a table's kernel mask in shared()'s memo


def ratio(num: float | None, den: float | None) -> float | None:
    """num / den, or None when the denominator is zero or missing."""
    if den is None or not np.isfinite(den) or den == 0 or num is None or not np.isfinite(num):
        return None
    return float(num) / float(den)


def ranks(analysis: Analysis) -> list[int]:
    """The ranks of the run, from RANK_INFO, else from whatever table has them."""
    for table in (analysis.run.rank_info, analysis.run.events, analysis.measured):
        if table is not None and table.num_rows and s.RANK in table.column_names:
            values = table.column(s.RANK).drop_null().unique().to_pylist()
            return sorted(int(v) for v in values)
    return []


def n_events(analysis: Analysis) -> int:
    """How many events were read (from the report digest when EVENTS was not loaded)."""
    cached = digest.value(analysis, digest.COUNTS, digest.N_EVENTS)
    if cached is not None:
        return int(cached)
    events = analysis.run.events
    return events.num_rows if events is not None else 0


def _phase_order(values: pd.Series) -> pd.Series:
    order = {p: i for i, p in enumerate(s.Phase.ALL)}
    return values.map(lambda p: order.get(p, len(order)))


@_once("phases_table", "measured")
def phase_totals(analysis: Analysis) -> pd.DataFrame:
    """One row per phase: PHASE_SUMS summed over ranks and layers, plus the efficiency.

    PHASES may carry all-rank total rows (rank and layer null), per-rank rows (layer null) and
    per-layer rows; the coarsest rows present are used so nothing is counted twice. Without
    PHASES the sums come from MEASURED (compute and memcpy then stay null).
    """
    cols = [s.PHASE, *PHASE_SUMS, s.EFFICIENCY]
    if has_rows(analysis.phases_table):
        df = to_frame(analysis.phases_table, [s.RANK, s.LAYER, *cols])
        totals = df[df[s.RANK].isna() & df[s.LAYER].isna()]
        per_rank = df[df[s.RANK].notna() & df[s.LAYER].isna()]
        rows = totals if len(totals) else per_rank if len(per_rank) else df
    elif has_rows(analysis.measured):
        m = to_frame(analysis.measured, [s.PHASE, s.KERNEL_CLASS, s.MSG_BYTES, s.DUR_NS,
                                         s.EXPOSED_NS, s.TRANSFER_NS, s.WAIT_NS, s.NOTIFY_NS,
                                         s.BOUND_NS])
        fused = m[s.KERNEL_CLASS] == s.KernelClass.FUSED
        rows = pd.DataFrame({
            s.PHASE: m[s.PHASE].fillna(s.Phase.OTHER),
            s.COUNT: 1,
            s.MSG_BYTES: m[s.MSG_BYTES],
            s.COMM_NS: m[s.DUR_NS].where(~fused, 0),
            s.FUSED_NS: m[s.DUR_NS].where(fused, 0),
            s.COMPUTE_NS: np.nan,
            s.MEMCPY_NS: np.nan,
            s.EXPOSED_NS: m[s.EXPOSED_NS],
            s.TRANSFER_NS: m[s.TRANSFER_NS],
            s.WAIT_NS: m[s.WAIT_NS],
            s.NOTIFY_NS: m[s.NOTIFY_NS],
            s.BOUND_NS: m[s.BOUND_NS],
        })
    else:
        return pd.DataFrame(columns=cols)
    rows = rows.assign(**{s.PHASE: rows[s.PHASE].fillna(s.Phase.OTHER)})
    sums = rows.groupby(s.PHASE, sort=False)[list(PHASE_SUMS)].sum(min_count=1).reset_index()
    sums[s.EFFICIENCY] = _efficiency(sums)
    bounded = _bounded_efficiency(analysis)
    if bounded is not None:
        # over the collectives with both a bound and a transfer, as per path: a barrier or a
        # collective without a size in the phase does not dilute it
        sums[s.EFFICIENCY] = sums[s.PHASE].map(bounded).astype(float)
    sums = sums.iloc[np.lexsort((sums[s.PHASE].to_numpy(), _phase_order(sums[s.PHASE])))]
    return sums[cols].reset_index(drop=True)


def has_notify(df: pd.DataFrame) -> bool:
    """Whether a frame of phase or path totals holds notify (synchronisation) time."""
    return s.NOTIFY_NS in df and bool((df[s.NOTIFY_NS].astype(float).fillna(0) > 0).any())


def _bounded_efficiency(analysis: Analysis) -> pd.Series | None:
    """Per phase: bound / transfer summed over the MEASURED rows that have both (None
    without MEASURED)."""
    if not has_rows(analysis.measured):
        return None
    fast = _bounded_sums(analysis.measured)
    if fast is not None:
        return _efficiency(fast)
    m = to_frame(analysis.measured, [s.PHASE, s.BOUND_NS, s.TRANSFER_NS])
    both = m[s.BOUND_NS].notna() & m[s.TRANSFER_NS].notna()
    m = m[both].assign(**{s.PHASE: m[s.PHASE].fillna(s.Phase.OTHER)})
    g = m.groupby(s.PHASE)[[s.BOUND_NS, s.TRANSFER_NS]].sum()
    return _efficiency(g)


def _bounded_sums(measured: pa.Table) -> pd.DataFrame | None:
    """``_bounded_efficiency``'s bound and transfer sums per phase grouped in Arrow, when the
    phase is text and both are integers whose float sums stay exact; else None. A phase
    without a row that has both gets no entry (pandas' way gives it 0 / 0): phase_totals
    reads either as no efficiency."""
    import pyarrow.compute as pc

    cols = (s.PHASE, s.BOUND_NS, s.TRANSFER_NS)
    if not set(cols) <= set(measured.column_names) or not all(
            pa.types.is_integer(measured.schema.field(c).type) for c in cols[1:]):
        return None
    phase = measured.column(s.PHASE)
    phase = phase.cast(phase.type.value_type) if pa.types.is_dictionary(phase.type) else phase
    if not pa.types.is_string(phase.type):
        return None
    bound, transfer = measured.column(s.BOUND_NS), measured.column(s.TRANSFER_NS)
    t = pa.table({s.PHASE: pc.fill_null(phase, s.Phase.OTHER), s.BOUND_NS: bound,
                  s.TRANSFER_NS: transfer}).filter(
        pc.and_(pc.is_valid(bound), pc.is_valid(transfer)))
    if any((pc.sum(pc.abs(t.column(c))).as_py() or 0) >= _EXACT for c in cols[1:]):
        return None  # pandas' float sums could round where Arrow's integer sums do not
    g = t.group_by([s.PHASE]).aggregate([(s.BOUND_NS, "sum"), (s.TRANSFER_NS, "sum")])
    return pd.DataFrame({s.BOUND_NS: g.column(f"{s.BOUND_NS}_sum").to_numpy(),
                         s.TRANSFER_NS: g.column(f"{s.TRANSFER_NS}_sum").to_numpy()},
                        index=pd.Index(g.column(s.PHASE).to_pylist(), name=s.PHASE))


def _efficiency(df: pd.DataFrame) -> pd.Series:
    bound = df[s.BOUND_NS].astype(float)
    transfer = df[s.TRANSFER_NS].astype(float)
    return (bound / transfer.where(transfer > 0)).astype(float)


def run_totals(phases: pd.DataFrame) -> dict[str, float | None]:
    """Totals over phases, the exposed-communication share and the overall efficiency.

    ``busy_ns`` = compute + fused + memcpy + exposed communication: device time that was not
    hidden. ``exposed_comm_pct`` = 100 x exposed / busy. The efficiency is bound / transfer
    over the phases that have a bound: a phase without one (barriers, collectives replayed
    without a size) says nothing about how close the rest came to the hardware.
    """
    out: dict[str, float | None] = {}
    for col in PHASE_SUMS:
        values = phases[col].astype(float) if col in phases else pd.Series(dtype=float)
        out[col] = float(values.sum()) if values.notna().any() else None
    busy = sum(out[c] or 0.0 for c in (s.COMPUTE_NS, s.FUSED_NS, s.MEMCPY_NS, s.EXPOSED_NS))
    pct = ratio(out[s.EXPOSED_NS], busy)
    out[BUSY_NS] = busy if busy else None
    out[EXPOSED_COMM_PCT] = None if pct is None else 100.0 * pct
    if s.BOUND_NS in phases and s.TRANSFER_NS in phases:
        bounded = phases[phases[s.BOUND_NS].astype(float) > 0]
        out[s.EFFICIENCY] = ratio(float(bounded[s.BOUND_NS].astype(float).sum()),
                                  float(bounded[s.TRANSFER_NS].astype(float).sum()))
    else:
        out[s.EFFICIENCY] = None
    return out


@_once("phases_table", "measured")
def phase_run_totals(analysis: Analysis) -> dict[str, float | None]:
    """``run_totals`` of ``phase_totals``: the summary cards, the headline and the JSON
    report's totals read it (once inside ``shared()``; each caller gets a copy)."""
    return run_totals(phase_totals(analysis))


@_once("measured", "attributed")
def path_totals(analysis: Analysis) -> pd.DataFrame:
    """One row per (phase, path, group, op) of MEASURED with PATH_SUMS and the efficiency.

    Without MEASURED the instance rows of ATTRIBUTED give counts and durations only.
    """
    cols = [*PATH_KEYS, *PATH_SUMS, N_EFF, s.EFFICIENCY]
    fast = _path_sums(analysis.measured) if has_rows(analysis.measured) else None
    if fast is not None:
        return _path_rows(fast, cols)
    if has_rows(analysis.measured):
        m = to_frame(analysis.measured, [*PATH_KEYS, *PATH_SUMS[1:]])
    elif has_rows(analysis.attributed):
        a = to_frame(analysis.attributed, [*PATH_KEYS, s.IS_INSTANCE, s.IN_BYTES, s.DUR_NS])
        a = a[a[s.IS_INSTANCE].fillna(False).astype(bool) & a[s.PATH].notna()]
        m = a.rename(columns={s.IN_BYTES: s.MSG_BYTES})
        for col in PATH_SUMS[2:]:
            if col != s.DUR_NS:
                m[col] = np.nan
    else:
        return pd.DataFrame(columns=cols)
    m = m.assign(**{k: m[k].fillna("") for k in PATH_KEYS}, **{s.COUNT: 1})
    # the efficiency is over the collectives with both a bound and a transfer only
    both = m[s.BOUND_NS].notna() & m[s.TRANSFER_NS].notna()
    m[_BOUNDED_TRANSFER] = m[s.TRANSFER_NS].where(both)
    m[N_EFF] = both.astype("int64")
    sums = m.groupby(list(PATH_KEYS), sort=True)[[*PATH_SUMS, N_EFF, _BOUNDED_TRANSFER]].sum(
        min_count=1).reset_index()
    return _path_rows(sums, cols)


def _path_rows(sums: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """``path_totals`` from the sums per path key (in key order): efficiency, then order."""
    sums[s.EFFICIENCY] = _efficiency(sums.assign(**{s.TRANSFER_NS: sums[_BOUNDED_TRANSFER]}))
    sums[N_EFF] = sums[N_EFF].fillna(0).astype("int64")
    order = np.lexsort((sums[s.OP], sums[s.GROUP], sums[s.PATH], _phase_order(sums[s.PHASE])))
    return sums.iloc[order][cols].reset_index(drop=True)


def text_keys(table: pa.Table, keys: Sequence[str],
              fill: str) -> dict[str, pa.ChunkedArray] | None:
    """The ``keys`` columns of ``table`` as plain text with nulls as ``fill`` (what an Arrow
    group by of them reads as pandas' keys), or None where one of them is not text."""
    import pyarrow.compute as pc

    out = {}
    for k in keys:
        col = table.column(k)
        col = col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col
        if not pa.types.is_string(col.type):
            return None
        out[k] = pc.fill_null(col, fill)
    return out


def _path_sums(measured: pa.Table) -> pd.DataFrame | None:
    """``path_totals``' sums per (phase, path, group, op) of MEASURED grouped in Arrow, as
    pandas' group by gives them (keys in order; a sum column with a null anywhere float, NaN
    where a key has no value; integer columns summed exactly), when the keys are text and the
    summed columns integers whose float sums stay exact; else None."""
    import pyarrow.compute as pc

    summed = list(PATH_SUMS[1:])
    if not {*PATH_KEYS, *summed} <= set(measured.column_names) or not all(
            pa.types.is_integer(measured.schema.field(c).type) for c in summed):
        return None
    keys = text_keys(measured, PATH_KEYS, "")
    if keys is None:
        return None
    transfer = measured.column(s.TRANSFER_NS)
    both = pc.and_(pc.is_valid(measured.column(s.BOUND_NS)), pc.is_valid(transfer))
    columns = {**keys, **{c: measured.column(c) for c in summed}, N_EFF: both.cast(pa.int64()),
               _BOUNDED_TRANSFER: pc.if_else(both, transfer, None)}
    floats = [c for c in summed if measured.column(c).null_count] + [_BOUNDED_TRANSFER]
    if any((pc.sum(pc.abs(columns[c])).as_py() or 0) >= _EXACT for c in floats):
        return None  # pandas' float sums could round where Arrow's integer sums do not
    g = pa.table(columns).group_by(list(PATH_KEYS)).aggregate(
        [(N_EFF, "count"), *((c, "sum") for c in [*summed, N_EFF, _BOUNDED_TRANSFER])])
    g = g.sort_by([(k, "ascending") for k in PATH_KEYS])
    out = {k: g.column(k) for k in PATH_KEYS}
    out[s.COUNT] = g.column(f"{N_EFF}_count")
    for c in [*summed, N_EFF, _BOUNDED_TRANSFER]:
        total = g.column(f"{c}_sum")
        out[c] = total.cast(pa.float64()) if c in floats else total
    return pa.table(out).to_pandas()


_RANK_BITS, _EVENT_BITS = 22, 40  # (rank, event_id) packed into one int64 key


def _row_keys(table: pa.Table | None) -> np.ndarray | None:
    """Each row's (rank, event_id) as one int64, or None when one is null or too large to
    pack."""
    if table is None or not {s.RANK, s.EVENT_ID} <= set(table.column_names):
        return None
    rank, event = table.column(s.RANK), table.column(s.EVENT_ID)
    if rank.null_count or event.null_count:
        return None
    r, e = rank.to_numpy().astype(np.int64), event.to_numpy().astype(np.int64)
    if len(r) and (min(r.min(), e.min()) < 0 or r.max() >> _RANK_BITS or e.max() >> _EVENT_BITS):
        return None
    return (r << _EVENT_BITS) | e


def _times_in(keys: np.ndarray, among: np.ndarray) -> np.ndarray:
    """How many times each of ``keys`` occurs in ``among``."""
    if len(keys) > 1 and (keys[1:] > keys[:-1]).all():
        # keys in strictly increasing order (ATTRIBUTED's rows by rank and event id): the
        # sorted ``among`` looked up among them (fewer lookups than the other way round, and
        # in order), each found one counted at its key
        ordered = np.sort(among)
        at = np.minimum(np.searchsorted(keys, ordered), len(keys) - 1)
        return np.bincount(at[keys[at] == ordered], minlength=len(keys)).astype(np.int64)
    ordered = np.sort(among)
    if not len(ordered):
        return np.zeros(len(keys), dtype=np.int64)
    first = np.searchsorted(ordered, keys)
    if (ordered[1:] != ordered[:-1]).all():  # each at most once: found or not
        return (ordered[np.minimum(first, len(ordered) - 1)] == keys).astype(np.int64)
    return np.searchsorted(ordered, keys, side="right") - first


def _instance_times(analysis: Analysis) -> np.ndarray | None:
    """Per row of ATTRIBUTED, how many times ``_instance_statuses`` counts it (None when the
    rows cannot be keyed: then only the join gives them)."""
    a = analysis.attributed
    inst = is_true(a, s.IS_INSTANCE)
    if not has_rows(analysis.measured):
        return inst.astype(np.int64)
    left, right = _row_keys(a), _row_keys(analysis.measured)
    if left is None or right is None:
        return None
    times = np.zeros(len(left), dtype=np.int64)
    times[inst] = _times_in(left[inst], right)
    return times


def _instance_statuses(analysis: Analysis) -> pd.Series:
    """STATUS of each collective instance of ATTRIBUTED; with MEASURED, of those MEASURED
    holds, once per MEASURED row (as an inner join on rank and event id gives them)."""
    a = analysis.attributed
    times = _instance_times(analysis)
    if times is None:
        inst = is_true(a, s.IS_INSTANCE)
        m = to_frame(analysis.measured, [s.RANK, s.EVENT_ID])
        rows = to_frame_where(a, inst, [s.RANK, s.EVENT_ID, s.STATUS])
        return rows.merge(m, on=[s.RANK, s.EVENT_ID], how="inner")[s.STATUS]
    return to_frame_where(a, times > 0, [s.STATUS])[s.STATUS].repeat(times[times > 0])


def _status_counts(table: pa.Table, times: np.ndarray) -> dict[str, int] | None:
    """Per STATUS value (null read as unattributed), the sum of ``times`` over its rows, in
    dictionary code space (a bincount per chunk, no string per row); None when STATUS is not
    a dictionary column or holds a value outside s.Status.ALL with a count."""
    if s.STATUS not in table.column_names:
        return None
    out = dict.fromkeys(s.Status.ALL, 0)
    start = 0
    for chunk in table.column(s.STATUS).chunks:
        if not pa.types.is_dictionary(chunk.type):
            return None
        weights = times[start:start + len(chunk)]
        start += len(chunk)
        values = [*chunk.dictionary.to_pylist(), s.Status.UNATTRIBUTED]  # the last: null
        idx = chunk.indices.fill_null(len(values) - 1).to_numpy()
        sums = np.bincount(idx, weights=weights, minlength=len(values))
        for value, n in zip(values, sums.tolist(), strict=True):
            if not n:
                continue
            if value not in out:
                return None
            out[value] += int(n)
    return out


@_once("attributed", "measured")
def attribution_counts(analysis: Analysis) -> dict[str, int]:
    """How many collective instances are attributed, ambiguous, unattributed.

    With MEASURED, one count per collective as MEASURED has it (the coverage and phase
    tables' unit): a collective of several kernels (ReduceScatterV as one reduce per rank)
    counts once."""
    counts = {status: 0 for status in s.Status.ALL}
    if not has_rows(analysis.attributed):
        return counts
    times = _instance_times(analysis)
    fast = None if times is None else _status_counts(analysis.attributed, times)
    if fast is not None:
        return fast
    statuses = _instance_statuses(analysis)
    for status, n in statuses.fillna(s.Status.UNATTRIBUTED).value_counts().items():
        counts[str(status)] = int(n)
    return counts


FINDING_COLS = (s.SEVERITY, s.RULE_ID, s.LAYER, s.GROUP, s.PATH, s.RANKS, s.MESSAGE, s.EVIDENCE)
_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def findings(analysis: Analysis) -> pd.DataFrame:
    """FINDINGS sorted by severity, rule, layer; ranks as plain lists; a phase column added."""
    cols = [*FINDING_COLS, s.PHASE]
    if not has_rows(analysis.findings_table):
        return pd.DataFrame(columns=cols)
    f = to_frame(analysis.findings_table, FINDING_COLS)
    f[s.RANKS] = f[s.RANKS].map(lambda v: [] if v is None else [int(x) for x in v])
    phase_of = PathLabel.PHASE_OF
    f[s.PHASE] = f[s.PATH].map(lambda p: phase_of.get(p, s.Phase.OTHER))
    sev = f[s.SEVERITY].map(lambda v: _SEVERITY_ORDER.get(v, 3))
    layer = f[s.LAYER].astype(float).fillna(-1)
    order = np.lexsort((f[s.MESSAGE].fillna("").to_numpy(), layer.to_numpy(),
                        f[s.RULE_ID].fillna("").to_numpy(), sev.to_numpy()))
    return f.iloc[order][cols].reset_index(drop=True)


def comm_events(analysis: Analysis) -> pd.DataFrame:
    """Communication events of EVENTS by (op, pg_desc): what a run without analysis shows."""
    cols = [s.OP, s.PG_DESC, s.COUNT, s.IN_BYTES, s.DUR_NS]
    cached = digest.frame(analysis, digest.COMM_EVENTS)
    if cached is not None:
        return cached
    events = analysis.run.events
    if not has_rows(events):
        return pd.DataFrame(columns=cols)
    kernel_ops = is_valid(events, s.OP) & kernel_rows(events)
    summed = [s.IN_BYTES, s.DUR_NS]
    if kernel_ops.any() and s.PG_DESC in events.column_names and all(
            c in events.column_names and pa.types.is_integer(events.schema.field(c).type)
            for c in summed):
        fast = _comm_sums(events, kernel_ops)
        if fast is not None:
            return fast
    e = to_frame_where(events, kernel_ops, [s.OP, s.PG_DESC, *summed])
    e = e.assign(**{s.PG_DESC: e[s.PG_DESC].fillna(""), s.COUNT: 1})
    sums = e.groupby([s.OP, s.PG_DESC], sort=True)[[s.COUNT, s.IN_BYTES, s.DUR_NS]].sum(
        min_count=1
    )
    return sums.reset_index()[cols]


def _values(table: pa.Table, column: str) -> list[str]:
    """The distinct non-null values of a string or dictionary column, sorted."""
    import pyarrow.compute as pc

    out: set[str] = set()
    for chunk in table.column(column).chunks:
        if pa.types.is_dictionary(chunk.type):
            out.update(chunk.dictionary.to_pylist())
        elif not pa.types.is_null(chunk.type):
            out.update(pc.unique(chunk).drop_null().to_pylist())
    return sorted(out)


_EXACT = float(2 ** 53)  # integers summed as float64 stay exact below this


def _comm_sums(events: pa.Table, keep: np.ndarray) -> pd.DataFrame | None:
    """``comm_events``' sums over the rows ``keep`` of EVENTS, from the dictionary codes of
    op and pg_desc (a bincount per (op, pg_desc)): no string of EVENTS is decoded. The
    dtypes are pandas' (a sum column with a null anywhere in EVENTS is float). None when a
    sum could leave the range where float64 sums of integers are exact."""
    import pyarrow.compute as pc

    ops, pgs = _values(events, s.OP), sorted({"", *_values(events, s.PG_DESC)})
    # the kept rows first (a few of EVENTS): codes and values of those only
    rows = events.select([s.OP, s.PG_DESC, s.IN_BYTES, s.DUR_NS]).filter(pa.array(keep))
    group = (codes(rows, s.OP, ops) * len(pgs)
             + codes(rows, s.PG_DESC, pgs, null=pgs.index("")))
    size = len(ops) * len(pgs)
    count = np.bincount(group, minlength=size)
    present = np.flatnonzero(count)
    out = pd.DataFrame({
        s.OP: pa.array([ops[i] for i in present // len(pgs)], pa.string()).to_pandas(),
        s.PG_DESC: pa.array([pgs[i] for i in present % len(pgs)], pa.string()).to_pandas(),
        s.COUNT: count[present].astype(np.int64)})
    for c in (s.IN_BYTES, s.DUR_NS):
        column = rows.column(c)
        values = pc.fill_null(column, 0).to_numpy().astype(np.float64)
        if np.abs(values).sum() >= _EXACT:
            return None
        sums = np.bincount(group, weights=values, minlength=size)[present]
        if events.column(c).null_count:  # a null anywhere in EVENTS: pandas' float sums
            valid = is_valid(rows, c).astype(np.float64)
            seen = np.bincount(group, weights=valid, minlength=size)[present] > 0
            out[c] = np.where(seen, sums, np.nan)
        else:
            out[c] = sums.astype(np.int64)
    return out


def events_overview(analysis: Analysis) -> pd.DataFrame:
    """Per rank: events read, the time span covered and the device kernel count."""
    cols = [s.RANK, s.COUNT, KERNELS, SPAN_NS]
    cached = digest.frame(analysis, digest.OVERVIEW)
    if cached is not None:
        return cached
    events = analysis.run.events
    if not has_rows(events):
        return pd.DataFrame(columns=cols)
    fast = _overview_sums(events)
    if fast is not None:
        return fast
    e = to_frame(events, [s.RANK, s.TS_NS, s.DUR_NS])  # numbers only: no string decoded
    e[END_NS] = e[s.TS_NS] + e[s.DUR_NS]
    e[KERNELS] = kernel_rows(events).astype(int)
    g = e.groupby(s.RANK, sort=True)
    out = pd.DataFrame({
        s.COUNT: g[s.TS_NS].size(),
        KERNELS: g[KERNELS].sum(),
        SPAN_NS: g[END_NS].max() - g[s.TS_NS].min(),
    })
    return out.reset_index()[cols]


def _overview_sums(events: pa.Table) -> pd.DataFrame | None:
    """``events_overview`` grouped in Arrow (no pandas frame of every row), when rank, start
    and duration are integers without a null (then pandas' frame would hold the same int
    dtypes); else None."""
    import pyarrow.compute as pc

    cols = (s.RANK, s.TS_NS, s.DUR_NS)
    if not all(pa.types.is_integer(events.schema.field(c).type)
               and not events.column(c).null_count for c in cols):
        return None
    kernel = kernel_rows(events)
    chunks = rank_chunks(events, END_NS)
    if chunks is not None:  # the parse's layout: each chunk one rank's rows
        t, offsets = chunks
        # the kernels of rows offsets[i] .. offsets[i + 1]
        t = t.append_column(KERNELS, pa.array(np.add.reduceat(kernel.astype(np.int64),
                                                              offsets)))
    else:  # a chunk of several ranks: every row grouped
        t = pa.table({s.RANK: events.column(s.RANK), s.TS_NS: events.column(s.TS_NS),
                      END_NS: pc.add(events.column(s.TS_NS), events.column(s.DUR_NS)),
                      KERNELS: pa.array(kernel.view(np.int8)),
                      s.COUNT: pa.array(np.ones(events.num_rows, dtype=np.int64))})
    g = t.group_by([s.RANK]).aggregate([(s.COUNT, "sum"), (KERNELS, "sum"),
                                        (END_NS, "max"), (s.TS_NS, "min")])
    g = g.sort_by([(s.RANK, "ascending")])
    start = g.column(f"{s.TS_NS}_min").to_numpy()
    return pd.DataFrame({
        s.RANK: g.column(s.RANK).to_numpy(),
        s.COUNT: g.column(f"{s.COUNT}_sum").to_numpy().astype(np.int64),
        KERNELS: g.column(f"{KERNELS}_sum").to_numpy().astype(np.int64),
        SPAN_NS: g.column(f"{END_NS}_max").to_numpy() - start,
    })


# --- coverage: what the figures rest on (tracekit.measure.coverage) ---

_STATUS_WORDS = {
    s.BoundStatus.NO_PROFILE: "no hardware profile (--hardware)",
    s.BoundStatus.NO_GROUP_SIZE: "the communicator's size is unknown",
    s.BoundStatus.ONE_MEMBER: "a communicator of one member moves nothing",
    s.BoundStatus.NO_SIZE: "the trace gives no message size",
    s.BoundStatus.NO_MODEL: "no alpha-beta model for the op",
    s.BoundStatus.NO_TRANSFER: "transfer is not separable from wait (too few members seen)",
    s.BoundStatus.EXCEEDED: "bound / transfer was physically impossible (see findings)",
}


@_once(COVERAGE_TABLE)
def coverage_rows(analysis: Analysis) -> pd.DataFrame:
    """COVERAGE as a frame (empty when the measure stage did not run)."""
    table = analysis.tables.get(COVERAGE_TABLE)
    if not has_rows(table):
        return pd.DataFrame(columns=s.names(s.COVERAGE))
    df = to_frame(table)
    for col in (s.MEMBERS, s.MISSING_RANKS):
        df[col] = df[col].map(lambda v: None if v is None else [int(x) for x in v])
    return df


@_once(COVERAGE_TABLE)
def coverage_run(analysis: Analysis) -> dict[str, object] | None:
    """The run row of COVERAGE, or None."""
    df = coverage_rows(analysis)
    run = df[df[s.SCOPE] == s.Scope.RUN]
    return None if run.empty else run.iloc[0].to_dict()


@_once(COVERAGE_TABLE)
def communicators(analysis: Analysis) -> pd.DataFrame:
    """The communicator rows of COVERAGE."""
    df = coverage_rows(analysis)
    return df[df[s.SCOPE] == s.Scope.COMMUNICATOR].reset_index(drop=True)


@_once("measured")
def why_no_efficiency(analysis: Analysis) -> str:
    """The most frequent reason a collective has no efficiency, in words ('' when none)."""
    if not has_rows(analysis.measured) or s.BOUND_STATUS not in analysis.measured.column_names:
        return ""
    m = to_frame(analysis.measured, [s.BOUND_STATUS])
    m = m[m[s.BOUND_STATUS].notna() & (m[s.BOUND_STATUS] != s.BoundStatus.OK)]
    if m.empty:
        return ""
    top = m[s.BOUND_STATUS].value_counts().sort_index().sort_values(ascending=False,
                                                                     kind="stable")
    return "; ".join(f"{n}: {_STATUS_WORDS.get(str(k), str(k))}" for k, n in top.items())
