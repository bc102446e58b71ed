"""The occupancy timeline's binning helpers equal the numpy calls they stand for."""

from __future__ import annotations

import numpy as np
import pytest

from tracekit.reports import plotframes_agg as agg


@pytest.mark.parametrize("end", [7.3e9, 123456789.0, 1.0, 3e12, 1e-3])
@pytest.mark.parametrize("bins", [1, 7, 600])
def test_edge_index_is_searchsorted_right(end: float, bins: int) -> None:
    # GIVEN evenly spaced edges and values anywhere, on an edge and one float either side
    edges = np.linspace(0.0, end, bins + 1)
    rng = np.random.default_rng(bins)
    values = np.concatenate([
        rng.uniform(-end / 10, end * 1.1, 5000), edges, np.nextafter(edges, np.inf),
        np.nextafter(edges, -np.inf), [0.0, end, -0.0]])
    # WHEN binned THEN as a binary search over the edges puts them
    assert (agg._edge_index(edges, values)
            == np.searchsorted(edges, values, side="right")).all()


def test_edge_index_without_a_span_is_searchsorted() -> None:
    edges = np.linspace(0.0, 0.0, 5)
    values = np.array([0.0, 1.0, -1.0])
    assert (agg._edge_index(edges, values) == np.searchsorted(edges, values, side="right")).all()


@pytest.mark.parametrize("values", [
    [3, 1, 3, 0, 7, 1], [5], [0, 0, 0], [2, 100000], [-1, 4, -1], [],
])
def test_dense_unique_is_numpy_unique(values: list[int]) -> None:
    array = np.array(values, dtype=np.int64)
    got, inverse = agg._dense_unique(array)
    want, want_inverse = np.unique(array, return_inverse=True)
    assert got.tolist() == want.tolist() and got.dtype == want.dtype
    assert inverse.tolist() == want_inverse.reshape(-1).tolist()
