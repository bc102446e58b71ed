"""A batch's tables cut back into its ranks, each as if the rank had been processed alone.

The ranks of one task are attributed and measured together (tracekit.pipeline.per_rank), so
their logical ids and row positions count across the batch and the columns the rules build
share one dictionary; these make them the rank's own again.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracekit import schema as S

# columns the rules build over the whole batch (the parser's come per file already)
_BATCH_BUILT = frozenset({S.OP, *(f.name for f in S.ATTRIBUTION_FIELDS)})


def rank_local(table: pa.Table, column: str, offsets: dict[int, int]) -> pa.Table:
    """``column`` (a count over the batch's concatenated ranks) made to count from the
    rank's own first value, as it does when the rank is processed alone."""
    if column not in table.column_names or not table.num_rows:
        return table
    ranks = table.column(S.RANK).to_numpy()
    base = np.zeros(int(ranks.max()) + 1, dtype=np.int64)
    for rank, offset in offsets.items():
        base[rank] = offset
    values = pc.subtract(table.column(column), pa.array(base[ranks]))
    return table.set_column(table.column_names.index(column), column, values)


def first_ids(attributed: pa.Table, starts: Any, sizes: list[int]) -> dict[int, int]:
    """Each rank's smallest logical id in the batch's numbering."""
    out: dict[int, int] = {}
    for begin, size in zip(starts, sizes, strict=True):
        part = attributed.slice(int(begin), size)
        lo = pc.min(part.column(S.LOGICAL_ID))
        if lo.is_valid and size:
            out[int(part.column(S.RANK)[0].as_py())] = int(lo.as_py())
    return out


def own_dictionaries(events: pa.Table) -> pa.Table:
    """One rank's slice of the batch with the dictionaries of the batch-built columns
    re-encoded from its own values (in order of appearance, as when the rank is alone)."""
    for i, f in enumerate(events.schema):
        if f.name in _BATCH_BUILT and pa.types.is_dictionary(f.type):
            column = events.column(i).cast(f.type.value_type).cast(f.type)
            events = events.set_column(i, f, column)
    return events


def of_rank(table: pa.Table, rank: int) -> pa.Table:
    return table.filter(pc.equal(table.column(S.RANK), rank))
