"""Cross-rank matching of collective instances: transfer time, wait, start skew, stragglers.

Each rank file holds one row per collective it ran (``is_instance``). The same collective on
different ranks is matched by, in order of preference: the Comms Id; the process group's
sequence number; else its order among the collectives of the same communicator on that rank.
The communicator is keyed by its member ranks (else its process-group name, else its group
label) and the key always holds the op (its family: all_to_all and all_to_allv are one, send
and recv are one), so two instances of different communicators or kinds are never one; a row
whose communicator nothing identifies is left unmatched (BOUNDS_AND_PEERS.md sections 6-7;
TraceLens and msprof use the same minimum-duration definition).

Per instance: transfer = min over ranks of the duration (the time the data took once every
rank had arrived), wait = a rank's duration minus that, skew = its start minus the earliest
start. The kernels that are the synchronisation part of an instance (``kernel_role`` notify:
DeepEP's notify_dispatch / cached_notify / notify_combine, which exchange counts and wait at a
barrier before the dispatch or combine moves the tokens) are not instances: their time on a
rank is that rank's ``notify_ns`` and is added to its wait, never to the duration or the
transfer (transfer + wait = duration + notify). ``tracekit.measure.evidence`` then
withholds them where too few members were seen.
The straggler of an instance is the rank that started last; its weight is the wait it
caused the others. Times stay integers: no ``*_ns`` value passes through a float.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema
from tracekit.measure.intervals import group_rows
from tracekit.measure.textmask import text_mask
from tracekit.schema import KernelClass, Op

STRAGGLER_MIN_SHARE = 0.5
STRAGGLER_MIN_WAIT_FRACTION = 0.05
END = "_end"
ROW = "_row"
MEMBERS = "_members"
KEY = "_key"  # match: the communicator of each row (communicator_key), kept for coverage
N_SEEN = "_n_seen"
LAST = "_last"
N_GROUP = "_n_group"  # the communicator's real size (measure.evidence.group_size)
FROM_TOPOLOGY = "_members_from_topology"  # the members were filled in from the layout
HAS_CALL_SITE = "_has_call_site"  # the row has a call site (what coverage reads of it)

# ops that are one collective whichever variant a rank recorded (the matching key's op)
OP_FAMILY = {Op.ALL_TO_ALLV: Op.ALL_TO_ALL, Op.ALL_GATHERV: Op.ALL_GATHER,
             Op.REDUCE_SCATTERV: Op.REDUCE_SCATTER, Op.SEND: Op.SEND_RECV, Op.RECV: Op.SEND_RECV}

_COLUMNS = (
    schema.RANK, schema.EVENT_ID, schema.PID, schema.TS_NS, schema.DUR_NS, schema.NAME,
    schema.OP, schema.GROUP, schema.PATH, schema.PHASE, schema.LAYER, schema.KERNEL_CLASS,
    schema.IN_BYTES, schema.OUT_BYTES, schema.IN_SPLIT, schema.OUT_SPLIT, schema.GROUP_SIZE,
    schema.PG_NAME, schema.PG_RANKS, schema.SEQ, schema.COMMS_ID, schema.LOGICAL_ID,
    schema.PG_DESC, schema.CALL_SITE, schema.CORRELATION,
)


def _decode(col: pa.ChunkedArray) -> pa.ChunkedArray:
    return col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col


def frame(table: pa.Table) -> pd.DataFrame:
    """pandas frame with dictionary columns decoded to plain strings (no categoricals)."""
    decoded = pa.table({c: _decode(table.column(c)) for c in table.column_names})
    return decoded.combine_chunks().to_pandas()  # one chunk: see rules.tables.to_pandas


_META = (
    schema.OP, schema.IN_BYTES, schema.OUT_BYTES, schema.IN_SPLIT, schema.OUT_SPLIT,
    schema.GROUP_SIZE, schema.PG_NAME, schema.PG_RANKS, schema.SEQ, schema.COMMS_ID,
    schema.PG_DESC, schema.CALL_SITE,
)


def _mask(values: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.bool_]:
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def int_array(col: pd.Series) -> pa.Array:
    """An int64 array of ``col`` without a float round trip where the values are integers.

    Integer columns (numpy or nullable) and object columns of Python ints convert exactly;
    only a genuinely float column (a modelled bound, say) is rounded.
    """
    if pd.api.types.is_bool_dtype(col.dtype):
        return pa.array(col.astype("Int64"), type=pa.int64(), from_pandas=True)
    if pd.api.types.is_integer_dtype(col.dtype):
        return pa.array(col, type=pa.int64(), from_pandas=True)
    if col.dtype == object:
        obj = col.where(col.notna(), None)
        try:
            return pa.array(obj.tolist(), type=pa.int64())  # exact ints (floats must be whole)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            pass
    values = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64)
    return pa.array(np.rint(np.nan_to_num(values)).astype(np.int64), mask=np.isnan(values))


def int_frame(table: pa.Table) -> pd.DataFrame:
    """``frame`` with integer columns as pandas nullable integers: nulls stay nulls and the
    values stay exact (a plain to_pandas turns an int column with nulls into float64)."""
    df = frame(table)
    for f in table.schema:
        if pa.types.is_integer(f.type) and df[f.name].dtype.kind == "f":
            df[f.name] = pd.Series(pd.arrays.IntegerArray(
                *_int_parts(table.column(f.name))), index=df.index)
    return df


def _int_parts(col: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    values = np.asarray(pc.fill_null(col, 0).cast(pa.int64()).to_numpy(), dtype=np.int64)
    mask = np.asarray(pc.is_null(col).to_numpy(zero_copy_only=False), dtype=bool)
    return values, mask


def table_of(df: pd.DataFrame, target: pa.Schema, *, order: np.ndarray | None = None,
             texts: Mapping[str, pa.ChunkedArray | pa.Array] | None = None) -> pa.Table:
    """A pandas frame as a table of ``target`` (NaN -> null; integer values kept exact);
    ``order``: the rows at these positions, as of ``df.take(order)`` but a column at a time;
    ``texts``: dictionary-encoded text columns holding the frame's values in the table's row
    order (after ``order``), used instead of the frame's (the same table, not hashing the
    frame's strings)."""
    arrays = []
    for f in target:
        typ = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        if texts is not None and f.name in texts and pa.types.is_string(typ):
            arrays.append(_in_first_order(texts[f.name], f.type))
            continue
        if f.name not in df.columns:
            arrays.append(pa.nulls(len(df), typ))
            continue
        col = df[f.name] if order is None else df[f.name].take(order)
        if pa.types.is_string(typ) and isinstance(col.dtype, pd.StringDtype):
            arr = pa.array(col, from_pandas=True)  # Arrow-backed: no Python objects
            arrays.append((arr.combine_chunks() if isinstance(arr, pa.ChunkedArray)
                           else arr).cast(typ))
        elif pa.types.is_string(typ):
            arrays.append(_text_array(col, f.type))
        elif pa.types.is_integer(typ):
            arrays.append(int_array(col).cast(typ))
        elif pa.types.is_boolean(typ) and col.dtype == np.bool_:
            arrays.append(pa.array(col.to_numpy(), type=typ))
        elif pa.types.is_boolean(typ):
            obj = col.astype(object)
            arrays.append(pa.array(obj.where(obj.notna(), None).tolist(), type=typ))
        elif pa.types.is_list(typ):
            arrays.append(pa.array([v if isinstance(v, list | tuple | np.ndarray) else None
                                    for v in col.tolist()], type=typ))
        else:
            arrays.append(pa.array(col, type=typ, from_pandas=True))
    table = pa.Table.from_arrays(arrays, names=[f.name for f in target])
    return schema.conform(table, target)


def _in_first_order(column: pa.ChunkedArray | pa.Array, typ: pa.DataType) -> pa.Array:
    """A dictionary-encoded text column as ``_text_array`` encodes text: the values in order
    of first appearance (only those that appear), missing values null; as ``typ``."""
    if isinstance(column, pa.ChunkedArray):
        column = column.unify_dictionaries().combine_chunks() if column.num_chunks else \
            pa.array([], pa.dictionary(pa.int32(), pa.string()))
    codes = np.asarray(pc.fill_null(column.indices, -1).to_numpy(), dtype=np.int64)
    missing = codes < 0
    size = len(column.dictionary)
    first = np.full(size, codes.size, dtype=np.int64)  # each code's first row (none: n)
    np.minimum.at(first, codes[~missing], np.flatnonzero(~missing))
    seen = np.flatnonzero(first < codes.size)
    used = seen[np.argsort(first[seen], kind="stable")]  # in order of first appearance
    renumber = np.zeros(size, dtype=np.int64)
    renumber[used] = np.arange(used.size, dtype=np.int64)
    value_type = typ.value_type if pa.types.is_dictionary(typ) else typ
    words = column.dictionary.take(pa.array(used, pa.int64())).cast(value_type)
    renumbered = np.zeros(codes.size, dtype=np.int64)  # 0 under a null (as a cast leaves)
    renumbered[~missing] = renumber[codes[~missing]]
    indices = pa.array(renumbered, mask=missing)
    if pa.types.is_dictionary(typ):
        return pa.DictionaryArray.from_arrays(indices.cast(typ.index_type), words)
    return words.take(indices)


def _text_array(col: pd.Series, typ: pa.DataType) -> pa.Array:
    """A text column as ``typ`` (a string type, or a dictionary of one): each distinct value
    converted once, in order of first appearance with missing values as nulls, as a cast to
    the dictionary type would encode them; not a Python string per row."""
    codes, uniques = pd.factorize(col.astype(object))
    value_type = typ.value_type if pa.types.is_dictionary(typ) else typ
    values = pa.array(np.asarray(uniques, dtype=object).tolist(), type=value_type)
    missing = codes < 0
    codes[missing] = 0  # what a cast leaves under a null
    if pa.types.is_dictionary(typ):
        indices = pa.array(codes.astype(typ.index_type.to_pandas_dtype()), mask=missing)
        return pa.DictionaryArray.from_arrays(indices, values)
    return values.take(pa.array(codes, mask=missing))


def instance_rows(attributed: pa.Table) -> pd.DataFrame:
    """The rows that carry a collective's time on a rank, one per logical collective.

    Their communication metadata is completed from the CPU wrapper rows of the same logical
    collective (same rank and logical id, ``is_instance`` false): on gloo traces the runloop
    span says ``all_to_all`` with in = out bytes while the c10d op that launched it holds the
    split sizes and the gathered output size. The call site comes as the flag HAS_CALL_SITE
    (what coverage reads of it), in its column's place.
    """
    flag = attributed.column(schema.IS_INSTANCE)
    comm_like = text_mask(attributed.column(schema.KERNEL_CLASS),
                          [KernelClass.COMM, KernelClass.FUSED])
    on_device = _mask(pc.is_valid(attributed.column(schema.DEVICE)))
    fallback = _mask(pc.is_null(flag)) & comm_like & on_device
    selected = _mask(flag) | fallback
    rows = np.flatnonzero(selected)
    notify = _notify_mask(attributed)
    wrapper = ~_mask(pc.fill_null(flag, True)) & _valid(attributed, schema.LOGICAL_ID) & \
        _valid(attributed, schema.OP) & ~notify
    # select before filter / take: only the columns read here are copied
    wrappers = attributed.select([schema.RANK, schema.LOGICAL_ID, *_META]).filter(
        pa.array(wrapper))
    # one row per logical collective (from the few columns that say which) before the
    # other columns are taken, decoded or converted: one take of them, of the kept rows
    keep, end = _merge_logical(attributed.select(
        [schema.RANK, schema.TS_NS, schema.DUR_NS, schema.LOGICAL_ID]).take(pa.array(rows)))
    as_float = _nullable_ints(attributed.select(list(_COLUMNS)), selected)
    inst = attributed.select(list(_COLUMNS)).take(pa.array(rows[keep]))
    df, pg_ranks = _enrich(inst, wrappers, as_float)
    df[ROW] = rows[keep]
    # joined in Arrow from the merged lists, not from the frame's Python objects
    members = pg_ranks.cast(pa.list_(pa.int64())).cast(pa.list_(pa.string()))
    df[MEMBERS] = pc.binary_join(members, ",").to_pandas()
    df[FROM_TOPOLOGY] = False
    df[END] = end
    df[schema.DUR_NS] = end - df[schema.TS_NS].to_numpy(dtype=np.int64)
    return _with_notify(df, attributed.select(
        [schema.RANK, schema.LOGICAL_ID, schema.DUR_NS]).filter(pa.array(notify)))


def _valid(table: pa.Table, column: str) -> npt.NDArray[np.bool_]:
    return _mask(pc.is_valid(table.column(column)))


def _nullable_ints(table: pa.Table, rows: npt.NDArray[np.bool_]) -> list[str]:
    """Integer columns holding a null on one of the ``rows`` (a mask): pandas gives them as
    float64 (also on a subset of the rows that happens to have none, so that a merged frame
    keeps the whole one's dtypes)."""
    selected = pa.array(rows)
    return [f.name for f in table.schema
            if pa.types.is_integer(f.type) and table.column(f.name).null_count
            and pc.any(pc.and_(pc.is_null(table.column(f.name)), selected)).as_py()]


def _notify_mask(attributed: pa.Table) -> npt.NDArray[np.bool_]:
    """Rows that are the synchronisation part of a collective (kernel_role notify): device
    kernels, not the instance, sharing the logical id of the operation they prepare."""
    role = text_mask(attributed.column(schema.KERNEL_ROLE), [schema.KernelRole.NOTIFY])
    return role & ~_mask(attributed.column(schema.IS_INSTANCE)) & \
        _valid(attributed, schema.LOGICAL_ID)


def _with_notify(df: pd.DataFrame, notify: pa.Table) -> pd.DataFrame:
    """``notify_ns``: per instance row, the summed duration of the notify kernels of the same
    rank and logical collective (exact int64; 0 when none)."""
    df[schema.NOTIFY_NS] = np.zeros(len(df), dtype=np.int64)
    if not notify.num_rows or df.empty:
        return df
    sums = notify.select([schema.RANK, schema.LOGICAL_ID, schema.DUR_NS]).group_by(
        [schema.RANK, schema.LOGICAL_ID]).aggregate([(schema.DUR_NS, "sum")])
    by_key = pd.Series(
        np.asarray(pc.fill_null(sums.column(f"{schema.DUR_NS}_sum"), 0).to_numpy(),
                   dtype=np.int64),
        index=pd.MultiIndex.from_arrays([
            np.asarray(sums.column(schema.RANK).to_numpy(), dtype=np.int64),
            np.asarray(sums.column(schema.LOGICAL_ID).to_numpy(), dtype=np.int64)]))
    has = df[schema.LOGICAL_ID].notna().to_numpy()
    keys = pd.MultiIndex.from_arrays([
        df.loc[has, schema.RANK].to_numpy(dtype=np.int64),
        df.loc[has, schema.LOGICAL_ID].to_numpy(dtype=np.int64)])
    pos = by_key.index.get_indexer(keys)  # -1: no notify kernel (no float round trip)
    values = df[schema.NOTIFY_NS].to_numpy(copy=True)
    values[np.flatnonzero(has)[pos >= 0]] = by_key.to_numpy()[pos[pos >= 0]]
    df[schema.NOTIFY_NS] = values
    return df


def _first_valid(wrappers: pa.Table, inst: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Per wrapper row its (rank, logical id) group, and per instance row that group (-1: no
    wrapper shares its rank and logical id)."""
    n_w = wrappers.num_rows
    has = _mask(pc.is_valid(inst.column(schema.LOGICAL_ID)))
    parts = []
    for col in (schema.RANK, schema.LOGICAL_ID):
        parts.append(np.concatenate([
            np.asarray(pc.fill_null(wrappers.column(col), 0).to_numpy(), dtype=np.int64),
            np.asarray(pc.fill_null(inst.column(col), 0).to_numpy(), dtype=np.int64)]))
    lows = [int(c.min(initial=0)) for c in parts]
    spans = [int(c.max(initial=0)) - lo + 1 for c, lo in zip(parts, lows, strict=True)]
    if spans[0] * spans[1] < 2**62:  # one int per pair from the values' offsets
        key = (parts[0] - lows[0]) * spans[1] + (parts[1] - lows[1])
    else:  # from the values' codes
        codes_of = [pd.factorize(c)[0].astype(np.int64) for c in parts]
        key = codes_of[0] * (int(codes_of[1].max(initial=0)) + 1) + codes_of[1]
    codes, uniq = pd.factorize(key[:n_w])
    group = np.asarray(pd.Index(uniq).get_indexer(key[n_w:]), dtype=np.int64)
    group[~has] = -1
    return np.asarray(codes, dtype=np.int64), group


def _frame(table: pa.Table, as_float: list[str]) -> pd.DataFrame:
    df = frame(table)
    for col in as_float:
        if df[col].dtype.kind in "iu":
            df[col] = df[col].astype(np.float64)
    return df


def _enrich(inst: pa.Table, wrappers: pa.Table, as_float: list[str]
            ) -> tuple[pd.DataFrame, pa.Array]:
    """Take each metadata column from the wrapper where it has a value (the first wrapper of
    the same rank and logical id that has one). String columns merge in Arrow; the others
    keep the types the pandas merge gave them (python objects inferred back to a dtype).
    Also returns the merged PG_RANKS as an Arrow array (what MEMBERS is joined from).

    Only the instance rows that get a wrapper's value are taken and decoded (on most
    collectives the wrappers carry none), and the merge writes those rows alone."""
    own_ranks = inst.column(schema.PG_RANKS).combine_chunks()
    site = call_site_flags(inst.column(schema.CALL_SITE))  # never decoded: only "has one"
    if wrappers.num_rows == 0 or inst.num_rows == 0 or \
            inst.column(schema.LOGICAL_ID).null_count == inst.num_rows:
        return _flagged_frame(inst, as_float, site), own_ranks
    codes, group = _first_valid(wrappers, inst)
    n_groups = int(codes.max(initial=-1)) + 1
    found: dict[str, tuple[np.ndarray, pa.Array]] = {}  # the rows that get one, their values
    for col in _META:
        w = wrappers.column(col)
        valid = np.flatnonzero(_mask(pc.is_valid(w)))
        first = np.full(n_groups, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, codes[valid], valid)
        pick = np.where(group >= 0, first[np.clip(group, 0, None)], np.iinfo(np.int64).max)
        hit = np.flatnonzero(pick != np.iinfo(np.int64).max)
        taken = _decode(pc.take(w, pa.array(pick[hit])))
        found[col] = hit, (taken.combine_chunks() if isinstance(taken, pa.ChunkedArray)
                           else taken)
    hit, taken = found[schema.CALL_SITE]
    site[hit] = call_site_flags(taken)
    strings = [c for c in _META if c != schema.CALL_SITE and pa.types.is_string(found[c][1].type)]
    for col in strings:
        hit, taken = found[col]
        merged = _patch(_decode(inst.column(col)).combine_chunks(), hit, taken)
        inst = inst.set_column(inst.schema.get_field_index(col), col, merged)
    df = _flagged_frame(inst, as_float, site)
    for col in _META:
        hit, taken = found[col]
        if col in strings or col == schema.CALL_SITE or not hit.size:
            continue
        df[col] = _merged_values(df[col], hit, taken, wrappers.column(col).null_count > 0)
    # the same merge as the frame's: the wrapper's list where it has one (a list, even an
    # empty one, is not missing), else the row's own
    hit, taken = found[schema.PG_RANKS]
    return df, _patch(own_ranks, hit, taken.cast(own_ranks.type))


def call_site_flags(sites: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.bool_]:
    """Per row: a call site that is neither null nor empty (HAS_CALL_SITE), looked up once
    per distinct value of a dictionary column: the strings are long and never decoded."""
    chunks = sites.chunks if isinstance(sites, pa.ChunkedArray) else [sites]
    out = [np.zeros(0, dtype=bool)]
    for chunk in chunks:
        if pa.types.is_dictionary(chunk.type):
            per_value = pc.fill_null(pc.not_equal(chunk.dictionary, ""), False)
            out.append(_mask(pc.take(per_value, chunk.indices)))
        else:
            out.append(_mask(pc.not_equal(chunk, "")))
    return np.concatenate(out)


def _flagged_frame(inst: pa.Table, as_float: list[str], site: npt.NDArray[np.bool_]
                   ) -> pd.DataFrame:
    """``_frame`` of ``inst`` with the call-site column replaced (in place) by its flag."""
    at = inst.schema.get_field_index(schema.CALL_SITE)
    df = _frame(inst.remove_column(at), as_float)
    df.insert(at, HAS_CALL_SITE, site)
    return df


def _patch(own: pa.Array, hit: np.ndarray, values: pa.Array) -> pa.Array:
    """``own`` with the rows at positions ``hit`` replaced by ``values`` (one each)."""
    if not hit.size:
        return own
    index = np.arange(len(own), dtype=np.int64)
    index[hit] = len(own) + np.arange(hit.size, dtype=np.int64)
    return pa.concat_arrays([own, values.cast(own.type)]).take(pa.array(index))


def _merged_values(col: pd.Series, hit: np.ndarray, taken: pa.Array,
                   wrapper_nulls: bool) -> pd.Series:
    """``col`` with the wrappers' values at the rows ``hit``, in the dtype pandas infers for
    the merged Python objects: the taken values, as a full column with a missing value on
    every other row, are float64 unless every row got one from a wrapper column without
    nulls; floats among them give float64, only int64s give int64."""
    values = taken.to_numpy(zero_copy_only=False)
    every = hit.size == len(col)
    if values.dtype.kind in "iu" and (wrapper_nulls or not every):
        values = values.astype(np.float64)  # the wrappers' column was a float one
    base = col.to_numpy()
    kinds = values.dtype.kind if every else base.dtype.kind + values.dtype.kind
    if kinds in ("f", "i", "ff", "if"):  # numbers alone (not unsigned, lists or objects)
        dtype = np.int64 if kinds == "i" else np.float64
        if every:
            return pd.Series(values.astype(dtype), index=col.index)
        out = base.astype(dtype)
        out[hit] = values
        return pd.Series(out, index=col.index)
    merged = col.astype(object).to_numpy(copy=True)
    merged[hit] = values.astype(object)
    return pd.Series(merged, index=col.index).infer_objects()


def with_call_site_flag(rows: pa.Table) -> pa.Table:
    """``rows`` with its call-site column replaced by the flag HAS_CALL_SITE (a call site
    that is neither null nor empty): the strings are long and nothing after this reads them."""
    if schema.CALL_SITE not in rows.column_names:
        return rows
    site = _decode(rows.column(schema.CALL_SITE))
    flag = pc.fill_null(pc.and_(pc.is_valid(site), pc.not_equal(site, "")), False)
    return rows.drop_columns([schema.CALL_SITE]).append_column(HAS_CALL_SITE, flag)


def fill_members(df: pd.DataFrame, topology: Any | None) -> pd.DataFrame:
    """Members of rows whose trace lacks the group's ranks, from the topology's member lists.

    ``topology`` is a tracekit.topology.Topology (``group_of(rank, group)``); rows keep NaN
    when there is none or the group is unknown. Without members, instances are matched by the
    group label alone, which merges distinct communicators of one kind (two ATTN_TP groups).
    """
    if topology is None or df.empty:
        return df
    members = df[MEMBERS].to_numpy(dtype=object)
    group = df[schema.GROUP].to_numpy(dtype=object)
    need = pd.isna(members) & ~pd.isna(group)
    if not need.any():
        return df
    # one topology look-up per distinct (rank, group), not per row
    idx = np.flatnonzero(need)
    rank = df[schema.RANK].to_numpy(dtype=np.int64)[idx]
    g_code, g_names = pd.factorize(group[idx])  # looked up by their text below
    pair, pairs = pd.factorize(rank * (len(g_names) + 1) + g_code)
    text: list[object] = []
    lists: list[object] = []
    for p in pairs:
        m = topology.group_of(int(p // (len(g_names) + 1)), str(g_names[p % (len(g_names) + 1)]))
        members_of = None if m is None else [int(x) for x in m]
        text.append(np.nan if members_of is None else ",".join(map(str, members_of)))
        lists.append(np.nan if members_of is None else members_of)
    per_row = np.empty(len(pairs), dtype=object)
    per_row[:] = text
    rank_lists = np.empty(len(pairs), dtype=object)
    rank_lists[:] = lists
    # the columns written as arrays (a row subset assigned through .loc rebuilds them)
    filled = members.copy()
    filled[idx] = per_row[pair]
    ranks = df[schema.PG_RANKS].to_numpy(dtype=object).copy()
    no_ranks = need & pd.isna(ranks)
    ranks[no_ranks] = rank_lists[pair[no_ranks[idx]]]
    out = df.copy(deep=False)  # copy-on-write: only the columns set below are copied
    out[MEMBERS] = pd.Series(filled, index=df.index, dtype=df[MEMBERS].dtype)
    from_topology = np.zeros(len(df), dtype=bool)
    from_topology[idx] = ~pd.isna(per_row)[pair]  # the groups the topology knows
    out[FROM_TOPOLOGY] = from_topology
    out[schema.PG_RANKS] = pd.Series(ranks, index=df.index, dtype=object)
    return out


def _merge_logical(inst: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Kernels sharing a logical id on a rank form one collective: its first row (by start)
    spanning to the latest end. Returns the rows to keep (those without a logical id in
    their order, then one per collective in the order of its first start) and their ends."""
    ts = np.asarray(inst.column(schema.TS_NS).to_numpy(), dtype=np.int64)
    end = ts + np.asarray(inst.column(schema.DUR_NS).to_numpy(), dtype=np.int64)
    has = _mask(pc.is_valid(inst.column(schema.LOGICAL_ID)))
    if not has.any():
        return np.arange(inst.num_rows, dtype=np.int64), end
    part = np.flatnonzero(has)
    part = part[np.argsort(ts[part], kind="stable")]
    rank = np.asarray(inst.column(schema.RANK).to_numpy(), dtype=np.int64)[part]
    lid = np.asarray(pc.fill_null(inst.column(schema.LOGICAL_ID), 0).to_numpy(),
                     dtype=np.int64)[part]
    group = group_rows(rank, lid)[1]  # one code per (rank, logical id)
    n = int(group.max(initial=-1)) + 1
    first = np.full(n, part.size, dtype=np.int64)
    np.minimum.at(first, group, np.arange(part.size, dtype=np.int64))
    last_end = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(last_end, group, end[part])
    # the collectives in the order of their first start (distinct positions: counted out)
    slot = np.full(part.size, -1, dtype=np.int64)
    slot[first] = np.arange(n, dtype=np.int64)
    by_start = slot[slot >= 0]
    keep = np.concatenate([np.flatnonzero(~has), part[first[by_start]]])
    return keep, np.concatenate([end[~has], last_end[by_start]])


def notify_of(df: pd.DataFrame) -> pd.Series:
    """Each instance row's notify (synchronisation) time: int64, 0 where none or where the
    rows predate the column (partitioned runs written before it)."""
    if schema.NOTIFY_NS not in df:
        df[schema.NOTIFY_NS] = np.zeros(len(df), dtype=np.int64)
    return df[schema.NOTIFY_NS].fillna(0).astype(np.int64)


def communicator_key(df: pd.DataFrame) -> pd.Series:
    """The communicator of each row as a string: its members, else its process-group name,
    else its group label; NaN when nothing identifies it."""
    return df[MEMBERS].fillna(df[schema.PG_NAME]).fillna(df[schema.GROUP])


def communicator_of(df: pd.DataFrame) -> pd.Series:
    """communicator_key of match's rows: the one match kept (KEY), else computed."""
    return df[KEY] if KEY in df.columns else communicator_key(df)


def _instance_ids(out: pd.DataFrame, members: pd.Series) -> np.ndarray:
    """The instance of each row, numbered in order of first appearance, from its matching
    key: the Comms Id; else (op family, communicator (``members``: communicator_key),
    sequence number); else (op family, communicator, its ordinal among that communicator's
    rows on the rank); a row nothing identifies is its own instance. Keys are tuples of
    integer codes, not strings."""
    # nothing says which communicator it ran on: not matched across ranks (no guessing)
    unknown = members.isna().to_numpy()
    rank = out[schema.RANK].to_numpy(dtype=np.int64)
    if unknown.any():
        members = members.astype(object)
        members[unknown] = ["?r" + str(r) for r in rank[unknown]]
    m_code = pd.factorize(members)[0].astype(np.int64)
    ordinal = pd.Series(m_code).groupby([rank, m_code], sort=False).cumcount().to_numpy()
    # each distinct op mapped to its family once, not a dictionary look-up per row
    op_code, ops = pd.factorize(out[schema.OP].astype(object))
    family = np.empty(len(ops) + 1, dtype=object)
    family[:-1] = [OP_FAMILY.get(op, op) for op in ops]
    family[-1] = "?"  # no op (code -1)
    f_code = pd.factorize(family[op_code])[0].astype(np.int64)
    seq = pd.factorize(out[schema.SEQ].astype("Int64"))[0].astype(np.int64)  # NA: -1
    cid = pd.factorize(out[schema.COMMS_ID].astype("UInt64"))[0].astype(np.int64)
    by_id, by_seq = cid >= 0, seq >= 0
    kind = np.where(unknown, 3, np.where(by_id, 0, np.where(by_seq, 1, 2)))
    first = np.where(kind == 3, rank, np.where(kind == 0, cid, f_code))
    second = np.where(kind == 3, np.arange(len(out)), np.where(kind == 0, 0, m_code))
    third = np.where(kind == 1, seq, np.where(kind == 2, ordinal, 0))
    return _first_seen_ids(kind, first, second, third)


def _first_seen_ids(*columns: npt.NDArray[np.integer]) -> npt.NDArray[np.int64]:
    """One id per distinct row of integer columns, numbered in order of first appearance
    (``groupby(sort=False).ngroup()``): one hash of a mixed-radix int64 code per row where
    the columns' ranges multiply below 2**62, else the pandas groupby."""
    bounds = [(int(c.min()), int(c.max())) if len(c) else (0, 0) for c in columns]
    spans = [hi - lo + 1 for lo, hi in bounds]
    if int(np.prod(np.asarray(spans, dtype=object))) >= 2**62:
        keys = pd.DataFrame({str(i): c for i, c in enumerate(columns)})
        return keys.groupby(list(keys.columns), sort=False).ngroup().to_numpy(dtype=np.int64)
    code = np.zeros(len(columns[0]), dtype=np.int64)
    for col, (lo, _), span in zip(columns, bounds, spans, strict=True):
        code *= span
        code += col
        code -= lo  # wraps back: the code itself stays below 2**62
    return np.asarray(pd.factorize(code)[0], dtype=np.int64)


def match(df: pd.DataFrame) -> pd.DataFrame:
    """Add instance, transfer, wait, skew, n_seen and last-arrival columns to instance rows
    (and KEY, the communicator each was matched in)."""
    out = df.sort_values([schema.TS_NS, schema.RANK], kind="stable").reset_index(drop=True)
    if out.empty:
        for c in (schema.INSTANCE, schema.TRANSFER_NS, schema.WAIT_NS, schema.SKEW_NS, N_SEEN):
            out[c] = pd.Series(dtype="int64")
        out[LAST] = pd.Series(dtype=bool)
        return out
    key = communicator_key(out)
    out[schema.INSTANCE] = _instance_ids(out, key)
    out[KEY] = key
    g = out.groupby(schema.INSTANCE, sort=False)
    transfer = g[schema.DUR_NS].transform("min")
    out[schema.TRANSFER_NS] = transfer
    out[schema.WAIT_NS] = out[schema.DUR_NS] - transfer + notify_of(out)
    out[schema.SKEW_NS] = out[schema.TS_NS] - g[schema.TS_NS].transform("min")
    out[N_SEEN] = g[schema.RANK].transform("nunique")
    last_idx = g[schema.TS_NS].idxmax()
    out[LAST] = False
    out.loc[last_idx.to_numpy(), LAST] = True
    return out


def stragglers(matched: pd.DataFrame) -> pa.Table:
    """STRAGGLERS: per rank, how often it started last and how much waiting that caused."""
    multi = matched[matched[N_SEEN] >= 2]
    # exact int64 sums by np.add.at: per instance its members' wait (a missing one counts
    # 0), caused by its last arrival (0 where that wait is missing); then per rank
    inst = multi[schema.INSTANCE].to_numpy(dtype=np.int64)
    wait = multi[schema.WAIT_NS]
    known = wait.notna().to_numpy(dtype=bool)
    w = wait.fillna(0).to_numpy(dtype=np.int64)
    last = multi[LAST].to_numpy(dtype=bool)
    total = np.zeros(int(inst.max(initial=-1)) + 1, dtype=np.int64)
    np.add.at(total, inst, w)
    caused = np.where(last & known, total[inst] - w, 0)
    rank = multi[schema.RANK]
    ranks, of_rank = np.unique(rank.to_numpy(), return_inverse=True)
    sums = {}
    for col, values in ((schema.COUNT, np.ones(len(w), dtype=np.int64)),
                        (schema.LAST_COUNT, last.astype(np.int64)),
                        (schema.CAUSED_WAIT_NS, caused), (schema.WAIT_NS, w)):
        sums[col] = np.zeros(len(ranks), dtype=np.int64)
        np.add.at(sums[col], of_rank, values)
    per = pd.DataFrame({schema.RANK: ranks.astype(rank.dtype, copy=False), **sums})
    all_wait = float(per[schema.WAIT_NS].sum())
    per[schema.SHARE] = per[schema.CAUSED_WAIT_NS] / all_wait if all_wait > 0 else 0.0
    per = per.sort_values(schema.CAUSED_WAIT_NS, ascending=False, kind="stable")
    return table_of(per, schema.STRAGGLERS)


def straggler_findings(table: pa.Table, matched: pd.DataFrame) -> pa.Table:
    """A FINDINGS row for each rank whose caused wait passes the thresholds.

    A rank is reported when it caused at least max(STRAGGLER_MIN_SHARE, 1.5 / ranks) of all
    wait and the wait is at least STRAGGLER_MIN_WAIT_FRACTION of the matched collectives' time.
    """
    df = frame(table)
    multi = matched[matched[N_SEEN] >= 2]
    busy = float(multi[schema.DUR_NS].sum())
    all_wait = float(df[schema.WAIT_NS].sum()) if not df.empty else 0.0
    n_ranks = max(1, int(df[schema.RANK].nunique())) if not df.empty else 1
    threshold = max(STRAGGLER_MIN_SHARE, 1.5 / n_ranks)
    if busy <= 0 or all_wait < STRAGGLER_MIN_WAIT_FRACTION * busy:
        return schema.empty(schema.FINDINGS)
    hit = df[df[schema.SHARE] >= threshold]
    if hit.empty:
        return schema.empty(schema.FINDINGS)
    msg = (
        "rank " + hit[schema.RANK].astype(str) + " started last in "
        + hit[schema.LAST_COUNT].astype(str) + " of " + hit[schema.COUNT].astype(str)
        + " matched collectives; the other ranks waited "
        + (hit[schema.CAUSED_WAIT_NS] / 1e6).map("{:.3f}".format) + " ms for it ("
        + (100 * hit[schema.SHARE]).map("{:.0f}".format) + "% of all wait)"
    )
    evidence = (
        "caused_wait_ns=" + hit[schema.CAUSED_WAIT_NS].astype(str) + " all_wait_ns="
        + str(int(all_wait)) + " matched_busy_ns=" + str(int(busy)) + " threshold_share="
        + f"{threshold:.2f}"
    )
    out = pa.table({
        schema.RULE_ID: ["measure.straggler"] * len(hit),
        schema.SEVERITY: ["warning"] * len(hit),
        schema.RANKS: pa.array([[int(r)] for r in hit[schema.RANK]], pa.list_(pa.int32())),
        schema.MESSAGE: msg.tolist(),
        schema.EVIDENCE: evidence.tolist(),
    })
    return schema.conform(out, schema.FINDINGS)
