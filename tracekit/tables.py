"""Arrow -> pandas for every stage: dictionary columns are decoded to plain strings first.

A dictionary array may legally repeat values in its dictionary (e.g. after chunks from several
files are combined); pandas' Categorical refuses that, so the engine never converts a
dictionary column directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


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
    """A string or dictionary-of-string column as an object array (None where null); a
    dictionary column makes one Python string per distinct value, not one per row."""
    return _joined([_chunk_objects(chunk) for chunk in column.chunks], object)


def _chunk_objects(chunk: pa.Array, at: np.ndarray | None = None) -> np.ndarray:
    """Rows of one text chunk (or its rows ``at``) as objects: a dictionary chunk's values
    are converted once and taken by code (rows gathered need no Arrow take)."""
    if pa.types.is_dictionary(chunk.type):
        values = np.empty(len(chunk.dictionary) + 1, dtype=object)
        values[:-1] = chunk.dictionary.cast(pa.string()).to_numpy(zero_copy_only=False)
        idx = pc.fill_null(chunk.indices, -1).to_numpy(zero_copy_only=False)
        return values[idx if at is None else idx[at]]  # -1 takes the trailing None
    if at is not None:
        chunk = chunk.take(pa.array(at, pa.int64()))
    return np.asarray(chunk.to_numpy(zero_copy_only=False), dtype=object)


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
    ``to_frame(table, columns).iloc[rows]``. Columns are converted one at a time, each
    chunk's rows gathered from its own buffers (no taken copy of the table).

    ``shared``: a single-chunk number column without nulls is a read-only view of the
    table's buffer (no copy; for frames that are only read)."""
    if columns is not None:
        table = table.select([c for c in columns if c in table.column_names])
    at = None if rows is None else np.asarray(rows, dtype=np.int64)
    picks = None if at is None else _chunk_rows(table, at)
    data = {field.name: _column(table.column(field.name), field, at, picks,
                                table.column(0), shared) for field in table.schema}
    frame = pd.DataFrame(data, copy=False)
    if rows is not None:
        frame.index = pd.Index(np.asarray(rows, dtype=np.int64))
    return frame


def _chunk_rows(table: pa.Table, rows: np.ndarray) -> list[np.ndarray]:
    """``rows`` (ascending) split by the chunks of ``table``'s columns, as positions within
    each chunk (every column of an EVENTS table is chunked alike, a rank file per chunk)."""
    if not table.num_columns:
        return [rows]
    lengths = _lengths(table.column(0))
    bounds = np.searchsorted(rows, np.cumsum([0, *lengths]))
    starts = np.cumsum([0, *lengths])
    return [rows[a:b] - starts[i] for i, (a, b) in enumerate(pairwise(bounds))]


def _lengths(column: pa.ChunkedArray) -> list[int]:
    return [len(c) for c in column.chunks]


def _column(column: pa.ChunkedArray, field: pa.Field, rows: np.ndarray | None,
            picks: list[np.ndarray] | None, first: pa.ChunkedArray,
            shared: bool) -> pd.Series:
    """One column of ``to_frame``: every row (``rows`` None) or ``rows``, gathered chunk by
    chunk (``picks``: the rows within each chunk of the table's first column)."""
    same_chunks = picks is None or _lengths(column) == _lengths(first)
    if _is_text(field) and same_chunks and all(
            pa.types.is_dictionary(c.type) for c in column.chunks):
        return pd.Series(_text_codes(column, picks), dtype=object, copy=False)
    kind = field.type
    if (pa.types.is_integer(kind) or pa.types.is_floating(kind)) and same_chunks:
        dtype = kind.to_pandas_dtype()
        if column.null_count and pa.types.is_integer(kind):
            dtype = np.float64  # pandas' conversion of an integer column with nulls
        if picks is None and column.num_chunks == 1:
            values = _numbers(column.chunk(0), dtype)
            if not (shared or values.flags.writeable):  # a view of the table's buffer
                values = values.copy()
            return pd.Series(values, copy=False)
        chunks = list(column.chunks)
        parts = [None] * len(chunks) if picks is None else picks
        out = np.empty(sum(len(c) if at is None else len(at)
                           for c, at in zip(chunks, parts, strict=True)), dtype=dtype)
        pos = 0
        for chunk, at in zip(chunks, parts, strict=True):
            end = pos + (len(chunk) if at is None else len(at))
            out[pos:end] = _numbers(chunk, dtype, at)
            pos = end
        return pd.Series(out, copy=False)
    nulls = column.null_count  # of the whole column: its dtype
    if rows is not None:
        column = column.take(pa.array(rows, pa.int64()))
    if _is_text(field):
        return pd.Series(_objects(column), dtype=object, copy=False)
    series = decoded(pa.table({field.name: column})).combine_chunks().to_pandas()[field.name]
    if pa.types.is_integer(kind) and nulls and series.dtype != np.float64:
        series = series.astype(np.float64)
    return series


def _text_codes(column: pa.ChunkedArray, picks: list[np.ndarray] | None) -> np.ndarray:
    """A dictionary text column (or the ``picks`` of its chunks) as objects: each chunk's
    dictionary converted once, the rows' codes offset into the values of all chunks and
    taken in one gather (one Python string per distinct value of a chunk)."""
    tables, codes, base = [], [], 0
    for i, chunk in enumerate(column.chunks):
        values = chunk.dictionary.cast(pa.string()).to_numpy(zero_copy_only=False)
        idx = np.asarray(pc.fill_null(chunk.indices, -1).to_numpy(zero_copy_only=False),
                         dtype=np.int64)
        if picks is not None:
            idx = idx[picks[i]]
        codes.append(np.where(idx >= 0, idx + base, -1))
        tables.append(values)
        base += len(values)
    table = np.empty(base + 1, dtype=object)  # code -1 takes the trailing None
    table[:base] = np.concatenate(tables) if tables else np.empty(0, dtype=object)
    return table[np.concatenate(codes)] if codes else np.empty(0, dtype=object)


def _numbers(chunk: pa.Array, dtype: type, at: np.ndarray | None = None) -> np.ndarray:
    """A number chunk (or its rows ``at``) as numpy values of ``dtype`` (NaN where null)."""
    if not chunk.null_count:
        view = chunk.to_numpy(zero_copy_only=False)
        return (view if at is None else view[at]).astype(dtype, copy=False)
    if at is not None:
        chunk = chunk.take(pa.array(at, pa.int64()))
    return np.asarray(chunk.to_numpy(zero_copy_only=False), dtype=dtype)


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    """The parts as one array (a single part itself)."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return np.empty(0, dtype=dtype)
    return np.concatenate(parts)
