"""Call sites of the rows the kernel rules class as communication or fused.

The parser resolves the Python call site only of the rows whose own metadata says they are
communication (an op from record_param_comms or the event's args); a kernel that a rule file
classes as communication (custom all-reduce, DeepEP, a user's ``uccl::ep::dispatch_kernel``)
gets its call site here, from the links EVENTS carries: the launching runtime call (same
correlation), the python frames around it and their parent ids. Resolved one rank at a time
(pids and correlation ids are a rank file's own), each rank's rows in one vectorised pass.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S
from tracekit.parsers.kineto.call_sites import call_sites_at
from tracekit.parsers.kineto.dict_codes import masked
from tracekit.parsers.kineto.nest import one_chunk
from tracekit.rules import frame as F
from tracekit.rules.keys import factorize
from tracekit.rules.keys import missing as keys_missing

_LINK_COLUMNS = (S.KIND, S.NAME, S.PID, S.TID, S.TS_NS, S.DUR_NS, S.CORRELATION,
                 S.EXTERNAL_ID, S.PY_ID, S.PY_PARENT_ID)


def missing_call_sites(events: pa.Table, comm: pd.DataFrame) -> pd.Series:
    """CALL_SITE of every row of ``comm`` (the engine's communication frame): its own where
    EVENTS has one, else resolved from the stack links (None where no user frame encloses
    it, or the trace has no python frames)."""
    site = comm[S.CALL_SITE].astype("object")
    missing = keys_missing(site)
    need = comm.loc[missing, [S.RANK, F.ROW]]  # the frame is wide: two columns are read
    if need.empty or any(c not in events.column_names for c in _LINK_COLUMNS):
        return site
    if not _has_python(events.column(S.KIND)):
        return site
    ranks = events.column(S.RANK).to_numpy()
    resolved = pd.Series(None, index=need.index, dtype=object)
    for rank, rows in need.groupby(S.RANK)[F.ROW]:
        at = np.flatnonzero(ranks == rank)
        local = _rank_table(events, at)
        # the rank's rows are in EVENTS order: a row's position among them is a search
        pos = np.searchsorted(at, rows.to_numpy())
        codes, texts = call_sites_at(local, pos)
        values = np.array([*texts, None], dtype=object)
        resolved.loc[rows.index] = values[np.where(codes >= 0, codes, len(texts))]
    # written by position into a copy (no index alignment)
    out = site.to_numpy(dtype=object, copy=True)
    out[missing] = resolved.to_numpy(dtype=object)
    return pd.Series(out, index=site.index, dtype=object, copy=False)


def _has_python(kind: pa.ChunkedArray) -> bool:
    """Some row is a python frame (compared in dictionary code space)."""
    for chunk in kind.chunks:
        if pa.types.is_dictionary(chunk.type):
            codes = [i for i, v in enumerate(chunk.dictionary.to_pylist()) if v == S.Kind.PYTHON]
            if codes and np.isin(chunk.indices.to_numpy(zero_copy_only=False), codes).any():
                return True
        elif pc.any(pc.equal(chunk, S.Kind.PYTHON)).as_py():
            return True
    return False


def _rank_table(events: pa.Table, at: np.ndarray) -> pa.Table:
    """The link columns of one rank's rows (a slice when they are contiguous, no copy),
    single-chunk, NAME and KIND dictionary-encoded."""
    cols = events.select(list(_LINK_COLUMNS))
    if at.size and at[-1] - at[0] + 1 == at.size:
        cols = cols.slice(int(at[0]), int(at.size))
    else:
        cols = cols.take(pa.array(at, pa.int64()))
    cols = cols.unify_dictionaries()
    out = {}
    for name in cols.column_names:
        col = one_chunk(cols.column(name))  # a single chunk as it is: no copy
        if name in (S.NAME, S.KIND) and not pa.types.is_dictionary(col.type):
            col = pc.dictionary_encode(col)
        out[name] = col
    return pa.table(out)


def with_call_sites(column: pa.ChunkedArray, rows: np.ndarray,
                    sites: pd.Series) -> pa.ChunkedArray | pa.Array:
    """EVENTS' CALL_SITE column with ``sites`` written at those of ``rows`` that had none
    (unchanged when there are none), built in dictionary code space (no string per row of
    the whole table)."""
    had = np.asarray(pc.is_valid(column.take(pa.array(rows, pa.int64()))).to_numpy(
        zero_copy_only=False), dtype=bool) if len(rows) else np.zeros(0, dtype=bool)
    given = ~keys_missing(sites) & ~had
    if not given.any():
        return column
    col = pa.table({S.CALL_SITE: column}).unify_dictionaries().column(S.CALL_SITE)
    col = one_chunk(col)
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    # long texts: hashed as the objects they are (shared per site), not byte by byte
    new_codes, new_texts = factorize(sites.to_numpy(dtype=object)[given])
    offset = len(col.dictionary)
    codes = np.asarray(pc.fill_null(col.indices, -1).to_numpy(zero_copy_only=False),
                       dtype=np.int32).copy()
    codes[np.asarray(rows)[given]] = new_codes.astype(np.int32) + offset
    dictionary = pa.concat_arrays([col.dictionary.cast(pa.string()),
                                   pa.array(list(new_texts), pa.string())])
    return pa.DictionaryArray.from_arrays(masked(codes, codes >= 0, pa.int32()), dictionary)
