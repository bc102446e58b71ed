"""Tests of a text column read in Arrow dictionary code space: a dictionary column is tested
once per dictionary entry and every row reads its entry's answer by its index, instead of a
string decoded per row (pyarrow and numpy only: light enough for tracekit.summary)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def text_mask(column: pa.ChunkedArray | pa.Array, keep: Sequence[str] | None = None,
              prefix: str | None = None) -> np.ndarray:
    """Per row, whether a text column's value is one of ``keep`` (or, given ``prefix``,
    starts with it); false where the value is null."""
    value_set = pa.array(list(keep) if keep is not None else [], pa.string())

    def test(values: pa.Array) -> np.ndarray:
        hit = pc.is_in(values, value_set) if prefix is None else pc.starts_with(values, prefix)
        return np.asarray(pc.fill_null(hit, False).to_numpy(zero_copy_only=False), dtype=bool)

    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = []
    for chunk in chunks:
        if not pa.types.is_dictionary(chunk.type):
            parts.append(test(chunk))
            continue
        by_entry = np.append(test(chunk.dictionary), False)  # the last: a null row's
        idx = np.asarray(pc.fill_null(chunk.indices, -1).to_numpy(), dtype=np.int64)
        parts.append(by_entry[idx])
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


__all__ = ["text_mask"]
