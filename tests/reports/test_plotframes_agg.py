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


def _holed(table, column: str, every: int, value) -> object:
    """``table`` with ``column`` set to ``value`` on every ``every``-th row."""
    import pyarrow as pa

    col = table.column(column)
    plain = col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col
    values = [value if i % every == 0 else v for i, v in enumerate(plain.to_pylist())]
    return table.set_column(table.schema.get_field_index(column), column,
                            pa.array(values, plain.type))


def test_bound_coverage_in_arrow_equals_the_pandas_grouping(analysis):
    import pyarrow as pa

    from tracekit import schema as s
    from tracekit.api import Analysis

    # GIVEN MEASURED with missing paths, sizes and a NaN efficiency among the rows
    m = _holed(_holed(_holed(analysis.measured, s.PATH, 5, None), s.MSG_BYTES, 3, None),
               s.EFFICIENCY, 4, float("nan"))
    # WHEN counted in Arrow, and by pandas (a key column as large strings takes that way)
    fast = agg.bound_coverage(Analysis(run=analysis.run, measured=m))
    group = m.column(s.GROUP)
    slow_m = m.set_column(m.schema.get_field_index(s.GROUP), s.GROUP,
                          group.cast(group.type.value_type).cast(pa.large_string()))
    assert agg._coverage_counts(slow_m, [s.PATH, s.GROUP, s.OP, s.MSG_BYTES, s.BOUND_NS,
                                         s.EFFICIENCY]) is None
    slow = agg.bound_coverage(Analysis(run=analysis.run, measured=slow_m))
    # THEN the same frame, dtypes too, and the holes counted as pandas counts them
    assert fast.equals(slow) and list(fast.dtypes) == list(slow.dtypes)
    assert "-" in set(fast[s.PATH])
    assert fast[agg.WITH_EFF].sum() < fast[s.COUNT].sum()


def test_paths_by_layer_phase_reads_the_distinct_triples(analysis):
    from tracekit import schema as s
    from tracekit.api import Analysis
    from tracekit.reports import frames

    # GIVEN MEASURED with missing paths WHEN the paths per layer and phase are listed
    m = _holed(analysis.measured, s.PATH, 3, None)
    got = agg._paths_by_layer_phase(Analysis(run=analysis.run, measured=m))
    # THEN as from every row's decoded triple
    df = frames.to_frame(m, [s.LAYER, s.PHASE, s.PATH])
    df = df[df[s.LAYER].notna() & df[s.PATH].notna()]
    want: dict[str, set[str]] = {}
    for layer, phase, path in df.itertuples(index=False):
        want.setdefault(f"{int(layer)}|{phase}", set()).add(path)
    assert got == {k: ", ".join(sorted(v)) for k, v in want.items()}
    assert len(got) > 1
