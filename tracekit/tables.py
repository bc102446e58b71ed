"""Arrow -> pandas for every stage: dictionary columns are decoded to plain strings first.

A dictionary array may legally repeat values in its dictionary (e.g. after chunks from several
files are combined); pandas' Categorical refuses that, so the engine never converts a
dictionary column directly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S


def decoded(table: pa.Table) -> pa.Table:
    """The same table with every dictionary column decoded to its value type."""
    for i, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            column = table.column(i).cast(field.type.value_type)
            table = table.set_column(i, pa.field(field.name, field.type.value_type), column)
    return table


def to_pandas(table: pa.Table, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """``table`` (or the named columns present in it) as a pandas DataFrame."""
    if columns is not None:
        table = table.select([c for c in columns if c in table.column_names])
    # one chunk per column: pandas' Arrow-backed strings take (filter, reindex) from a
    # chunked array by concatenating its chunks on every call
    return decoded(table).combine_chunks().to_pandas()


def _objects(column: pa.ChunkedArray) -> np.ndarray:
    """A string or dictionary-of-string column as an object array (None where null). A
    dictionary column makes one Python string per distinct value of the whole column, shared
    by every chunk that holds it (EVENTS has a chunk and a dictionary per rank): the engine's
    by-reference coding then sees one object per value, not one per rank."""
    chunks = column.chunks
    if not chunks or not all(pa.types.is_dictionary(c.type) for c in chunks):
        parts = [np.asarray(c.to_numpy(zero_copy_only=False), dtype=object)
                 for c in column.chunks]
        if not parts:
            return np.empty(0, dtype=object)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
    shared: dict[str, str] = {}
    texts: list[str | None] = []
    codes: list[np.ndarray] = []
    for chunk in chunks:
        offset = len(texts)
        texts.extend(None if t is None else shared.setdefault(t, t)
                     for t in chunk.dictionary.cast(pa.string()).to_pylist())
        # null rows: -1, the table's trailing None
        index = pc.fill_null(chunk.indices.cast(pa.int32()), -1 - offset).to_numpy(
            zero_copy_only=False)
        codes.append(index + np.int32(offset) if offset else index)
    table = np.empty(len(texts) + 1, dtype=object)
    table[:-1] = texts
    return np.take(table, codes[0] if len(codes) == 1 else np.concatenate(codes))


def _is_text(field: pa.Field) -> bool:
    kind = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def to_frame(table: pa.Table, columns: Sequence[str] | None = None,
             rows: np.ndarray | None = None, *, shared: bool = False) -> pd.DataFrame:
    """``to_pandas`` with text columns as object-dtype arrays of Python strings (None where
    null) instead of pandas' Arrow-backed ``str``: the rules engine masks, maps and writes
    into its frames row by row subset, which Arrow strings do by rebuilding the array.

    ``rows`` (positions, ascending): only those rows are converted, indexed by their
    positions, with the dtypes the whole table's columns convert to (an integer column with
    nulls is float64 even where the rows taken have none): the frame equals
    ``to_frame(table, columns).iloc[rows]``. Columns are taken and converted one at a time
    (no taken copy of the whole table alive at once).

    ``shared``: a single-chunk number column without nulls is a read-only view of the
    table's buffer (no copy; for frames that are only read)."""
    if columns is not None:
        table = table.select([c for c in columns if c in table.column_names])
    taken = None if rows is None else pa.array(np.asarray(rows, dtype=np.int64), pa.int64())
    data = {field.name: _column(table.column(field.name), field, taken, shared)
            for field in table.schema}
    frame = pd.DataFrame(data, copy=False)
    if rows is not None:
        frame.index = pd.Index(np.asarray(rows, dtype=np.int64))
    return frame


def _column(column: pa.ChunkedArray, field: pa.Field, rows: pa.Array | None,
            shared: bool) -> pd.Series:
    """One column of ``to_frame``: every row (``rows`` None) or the rows taken."""
    kind = field.type
    whole_nulls = column.null_count  # of the whole column: its dtype
    if rows is not None:
        column = column.take(rows)
    if _is_text(field):
        return pd.Series(_objects(column), dtype=object, copy=False)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        dtype = np.float64 if whole_nulls and pa.types.is_integer(kind) \
            else kind.to_pandas_dtype()  # pandas' conversion of an integer column with nulls
        values = np.asarray(column.to_numpy(), dtype=dtype)
        if not (shared or values.flags.writeable):  # a view of the table's buffer
            values = values.copy()
        return pd.Series(values, copy=False)
    series = decoded(pa.table({field.name: column})).combine_chunks().to_pandas()[field.name]
    if pa.types.is_integer(kind) and whole_nulls and series.dtype != np.float64:
        series = series.astype(np.float64)
    if pa.types.is_boolean(kind) and whole_nulls and series.dtype == bool:
        series = series.astype(object)  # pandas' conversion of a boolean column with nulls
    return series


def masked(values: np.ndarray, missing: np.ndarray | None, kind: pa.DataType) -> pa.Array:
    """``pa.array(values, kind, mask=missing)`` from the numpy buffers: ``values`` (of
    ``kind``'s numpy type, whatever the missing rows hold) becomes the data buffer and
    ``missing`` a packed validity bitmap. pyarrow's own mask path took 2.4 ms (int64) to
    20 ms (int32) for 874k rows here, the buffers 0.1 ms."""
    data = np.ascontiguousarray(values, dtype=kind.to_pandas_dtype())
    if missing is None or not missing.any():
        return pa.Array.from_buffers(kind, len(data), [None, pa.py_buffer(data)])
    valid = np.packbits(~np.asarray(missing, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(kind, len(data), [pa.py_buffer(valid), pa.py_buffer(data)],
                                 null_count=int(np.count_nonzero(missing)))


def integral(values: np.ndarray, kind: pa.DataType) -> pa.Array:
    """Whole floats (NaN where missing) as an Arrow integer array of ``kind``: what
    ``pa.array(values, from_pandas=True).cast(kind)`` gives, without the checked cast."""
    missing = np.isnan(values)
    with np.errstate(invalid="ignore"):  # NaN's integer is garbage, masked below
        whole = values.astype(kind.to_pandas_dtype())
    if not np.logical_or(whole == values, missing).all():
        raise ValueError("float values with a fraction cannot be cast to an integer type")
    return masked(whole, missing, kind)


def rank_chunks(events: pa.Table, end: str) -> tuple[pa.Table, list[int]] | None:
    """Per non-empty chunk of ``events`` (the parse writes one or more per rank): its RANK,
    first start (TS_NS), last end (column ``end``) and row COUNT, and the chunks' first-row
    offsets; None when a chunk holds several ranks or a rank, start or duration is null. A
    few reductions per chunk instead of hashing every row's rank (the summary's rank spans
    and the reports' events overview group these rows per rank)."""
    ranks, starts, ends, counts, offsets, at = [], [], [], [], [], 0
    for batch in events.select([S.RANK, S.TS_NS, S.DUR_NS]).to_batches():  # rows aligned
        rank, ts, dur = batch.columns
        if len(rank):
            if rank.null_count or ts.null_count or dur.null_count:
                return None
            low, high = pc.min_max(rank).values()
            if low != high:
                return None
            ranks.append(low)
            starts.append(pc.min(ts))
            ends.append(pc.max(pc.add(ts, dur)))
            counts.append(len(rank))
            offsets.append(at)
        at += len(rank)
    if not ranks:
        return None
    return pa.table({S.RANK: pa.array(ranks), S.TS_NS: pa.array(starts), end: pa.array(ends),
                     S.COUNT: pa.array(counts, pa.int64())}), offsets


def text_series(codes: np.ndarray, words: Sequence[str], index: pd.Index) -> pd.Series:
    """Per-row codes into ``words`` (-1: missing) as the column pandas infers from the rows'
    Python strings: its default str dtype (NaN where missing), or object Nones where every
    row is missing. Built in Arrow from the codes: no Python object per row goes through
    pandas' string inference (about 5 ms per 131k rows)."""
    codes = np.asarray(codes)
    missing = codes < 0
    if missing.all():
        return pd.Series(np.full(len(codes), None, dtype=object), index=index, dtype=object)
    taken = pa.array(list(words), pa.large_string()).take(
        masked(np.maximum(codes, 0), missing, pa.int32()))
    return pd.Series(pd.array(taken, dtype=pd.StringDtype("pyarrow", na_value=np.nan)),
                     index=index)
