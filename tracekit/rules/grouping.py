"""Group helpers over integer group codes, done with numpy instead of pandas' per-group
Python aggregation (which costs a Series per group: thousands of layers on a large rank)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from tracekit.rules import keys


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


def row_codes(*columns: pd.Series | np.ndarray) -> np.ndarray:
    """``keys.row_codes`` of the columns given one by one: a code (0..) per row, equal where
    every column is equal (missing values alike), in order of first appearance."""
    return keys.row_codes(columns)


def per_value(values: pd.Series | np.ndarray, fn: Callable[[Any], Any]) -> np.ndarray:
    """``fn`` of each value, computed once per distinct value (missing ones as None)."""
    codes, uniques = keys.factorize(values)
    results = np.empty(len(uniques) + 1, dtype=object)
    for i, value in enumerate(np.asarray(uniques, dtype=object).tolist()):
        results[i] = fn(value)
    if (codes < 0).any():
        results[-1] = fn(None)  # code -1: the missing values
    return results[codes] if len(codes) else np.empty(0, dtype=object)


def group_order(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row positions sorted by code, stably; start of each code's run, plus the end): the
    rows of code ``k`` are ``order[bounds[k]:bounds[k + 1]]``, in row order. Codes 0..G-1."""
    order = np.argsort(codes, kind="stable")
    groups = int(codes.max()) + 1 if len(codes) else 0
    bounds = np.searchsorted(codes[order], np.arange(groups + 1))
    return order, bounds


def sequence_ids(values: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per group code (0..G-1): an id of the sequence of its ``values`` (int codes) in row
    order, equal sequences equal ids; and one example sequence per id. Groups of one length
    are compared as the rows of one matrix (``np.unique`` over rows), not one by one."""
    order, bounds = group_order(codes)
    ordered = np.asarray(values, dtype=np.int64)[order]
    starts = bounds[:-1]
    lengths = np.diff(bounds)
    ids = np.empty(len(lengths), dtype=np.int64)
    examples: list[np.ndarray] = []
    for length in np.unique(lengths).tolist():
        groups = np.flatnonzero(lengths == length)
        matrix = ordered[starts[groups][:, None] + np.arange(length)[None, :]]
        _, first, inverse = np.unique(matrix, axis=0, return_index=True,
                                             return_inverse=True)
        ids[groups] = len(examples) + inverse.reshape(-1)
        examples.extend(matrix[i] for i in first.tolist())
    return ids, examples


def position_in_group(codes: np.ndarray) -> np.ndarray:
    """``groupby(codes).cumcount()``: each row's position among the rows of its code."""
    order, bounds = group_order(codes)
    pos = np.empty(len(codes), dtype=np.int64)
    starts = np.repeat(bounds[:-1], np.diff(bounds))
    pos[order] = np.arange(len(codes)) - starts
    return pos


def as_objects(values: pd.Series | np.ndarray) -> np.ndarray:
    """``values`` as an object array in which equal values are one shared object (None where
    missing): each distinct value is converted once, and later hashing and comparing of the
    array is by reference (an Arrow string column otherwise yields a new str per row)."""
    codes, uniques = keys.factorize(values)
    table = np.empty(len(uniques) + 1, dtype=object)
    table[:-1] = np.asarray(uniques, dtype=object)
    return table[codes]
