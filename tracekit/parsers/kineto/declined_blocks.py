"""The rows of the blocks msgspec decoded (kineto_msgspec) joined to the accumulator's, by
event index: the timed-event table, the communication rows and the record_shapes ops come
out as one reader would have given them for the whole file. The pieces' NAME and CATEGORY
are codes into the accumulator's dictionaries (kineto_native_reader), which are then theirs too."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from tracekit import schema as S
from tracekit.parsers.kineto import arrow_values as V
from tracekit.parsers.kineto.block_columns import Piece
from tracekit.parsers.kineto.decode import RAW_IDX
from tracekit.parsers.kineto.shape_ops import ShapeOps


def _in_order(parts: Sequence[pa.Table], key: str) -> pa.Table:
    """The rows of ``parts`` sorted by ``key`` (stable), in one chunk per column."""
    merged = pa.concat_tables(parts, promote_options="permissive")
    order = np.argsort(merged.column(key).to_numpy(), kind="stable")
    return merged.take(V.from_numpy(order)).combine_chunks()


def _decoded(columns: pa.Table, table: pa.Table) -> pa.Table:
    """A piece's columns with its NAME / CATEGORY codes over the dictionaries of ``table``."""
    for key in (S.NAME, S.CATEGORY):
        values = table.column(key).chunk(0).dictionary
        i = columns.schema.get_field_index(key)
        codes = columns.column(key).combine_chunks()
        columns = columns.set_column(i, key, pa.DictionaryArray.from_arrays(codes, values))
    return columns


def with_pieces(table: pa.Table, comm: pa.Table | None, ops: ShapeOps,
                pieces: Sequence[Piece]) -> tuple[pa.Table, pa.Table | None, ShapeOps]:
    """(timed events, communication rows, shape ops) of the accumulator with ``pieces``."""
    raw = _in_order([table, *(_decoded(p.columns, table) for p in pieces)], S.EVENT_ID)
    comms = [c for c in [comm, *(p.comm for p in pieces)] if c is not None]
    merged_comm = _in_order(comms, RAW_IDX) if comms else None
    extra = [(int(e), *ops.distinct[k]) for e, k in zip(ops.event.tolist(), ops.key.tolist(),
                                                        strict=True)]
    extra += [x for p in pieces for x in p.extra]
    extra.sort(key=lambda x: x[0])
    return raw, merged_comm, ShapeOps.of(extra)
