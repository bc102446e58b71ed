"""First rows of codes numbered in order of first appearance, in one pass (no sort).

``keys.row_codes`` numbers distinct rows 0, 1, ... as they first appear, so a code's first
row is where the running maximum of the codes first reaches it: one cumulative maximum and
a difference over the rows, instead of the sort behind ``np.unique(return_index=True)``.
"""

from __future__ import annotations

import numpy as np


def first_rows(codes: np.ndarray) -> np.ndarray:
    """Position of the first row of each code, for codes 0..k-1 numbered in order of first
    appearance (``keys.row_codes``): what ``keys.first_rows`` gives, without sorting."""
    codes = np.asarray(codes)
    if not codes.size:
        return np.zeros(0, dtype=np.int64)
    rising = np.empty(codes.size, dtype=bool)
    rising[0] = True
    top = np.maximum.accumulate(codes)
    np.greater(top[1:], top[:-1], out=rising[1:])
    return np.flatnonzero(rising)


def first_of_each(codes: np.ndarray, span: int) -> np.ndarray:
    """Per code 0..span-1 (any numbering), the position of its first row; -1 where no row
    has it."""
    n = codes.size
    first = np.full(span, n, dtype=np.int64)
    np.minimum.at(first, codes, np.arange(n, dtype=np.int64))
    first[first == n] = -1
    return first
