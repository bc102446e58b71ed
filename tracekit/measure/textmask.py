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
    out = np.empty(sum(len(chunk) for chunk in chunks), dtype=bool)
    at = 0
    for chunk in chunks:
        part = out[at:at + len(chunk)]
        at += len(chunk)
        if not pa.types.is_dictionary(chunk.type):
            part[:] = test(chunk)
            continue
        by_entry = np.append(test(chunk.dictionary), False)  # the last: a null row's
        indices = chunk.indices
        if indices.null_count:
            indices = pc.fill_null(indices, len(chunk.dictionary))
        np.take(by_entry, indices.to_numpy(), out=part, mode="clip")  # into the output
    return out


__all__ = ["text_mask"]
