"""Group helpers over integer group codes, done with numpy instead of pandas' per-group
Python aggregation (which costs a Series per group: thousands of layers on a large rank)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pandas as pd


def grouped_tuples(values: pd.Series, codes: pd.Series | np.ndarray) -> pd.Series:
    """``values.groupby(codes).agg(tuple)``: per group code (sorted), the tuple of its values
    in row order. ``codes`` are non-negative integers aligned with ``values``."""
    items = list(values)
    keys = np.asarray(codes, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    groups, starts = np.unique(keys[order], return_index=True)
    bounds = [*starts.tolist(), len(order)]
    positions = order.tolist()
    tuples = [tuple(items[i] for i in positions[a:b]) for a, b in pairwise(bounds)]
    cells = np.empty(len(tuples), dtype=object)
    for i, one in enumerate(tuples):  # element-wise: numpy would make equal tuples 2-D
        cells[i] = one
    return pd.Series(cells, index=groups)
