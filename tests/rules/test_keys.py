"""Code-space keys of the rules engine (rules/keys.py) and the nested-row search built on them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from tracekit import schema as S
from tracekit.rules import keys
from tracekit.rules.keys import (
    factorize,
    first_rows,
    list_codes,
    objects,
    row_codes,
    spread,
    tuple_keys,
)
from tracekit.rules.nesting import nested_source


def test_row_codes_number_distinct_tuples_in_order_of_first_appearance() -> None:
    # GIVEN three columns where rows 0 and 3, and rows 1 and 4 (missing values), agree
    a = pd.Series(["x", None, "y", "x", np.nan], dtype=object)
    b = np.array([1, 2, 1, 1, 2])
    c = [(1, 2), None, (1, 2), (1, 2), None]
    # WHEN the rows are coded
    codes = row_codes([a, b, c])
    # THEN equal rows share a code, numbered by first appearance, missing equal to missing
    assert codes.tolist() == [0, 1, 2, 0, 1]
    assert first_rows(codes).tolist() == [0, 1, 2]


def test_row_codes_do_not_collide_when_codes_would_overflow_a_naive_product() -> None:
    # GIVEN many columns each with many distinct values
    rng = np.random.default_rng(0)
    cols = [rng.integers(0, 5000, size=20000) for _ in range(8)]
    # WHEN coded THEN the codes separate exactly the distinct row tuples
    codes = row_codes(cols)
    tuples = list(zip(*(c.tolist() for c in cols), strict=True))
    assert len(set(codes.tolist())) == len(set(tuples))
    by_code: dict[int, tuple[int, ...]] = {}
    for code, t in zip(codes.tolist(), tuples, strict=True):
        assert by_code.setdefault(code, t) == t


def test_objects_and_spread_keep_tuples_as_elements_and_object_dtype() -> None:
    s = objects([("a", "b"), ("c", "d"), None])
    assert s.dtype == object and s.iloc[0] == ("a", "b") and s.iloc[2] is None
    out = spread(["p", "q"], np.array([1, 1, 0]), pd.Index([5, 6, 7]))
    assert out.dtype == object and out.tolist() == ["q", "q", "p"]
    assert out.index.tolist() == [5, 6, 7]


def test_tuple_keys_share_one_tuple_per_member_list() -> None:
    ranks = pd.Series([np.array([0, 1], dtype=np.int32), None, np.array([], dtype=np.int32),
                       np.array([0, 1], dtype=np.int32), [2, 3]], dtype=object)
    keys = tuple_keys(ranks)
    assert keys == [(0, 1), None, None, (0, 1), (2, 3)]
    assert keys[0] is keys[3]


def _nested_by_pairs(comm: pd.DataFrame, need: pd.Series,
                     have: pd.Series) -> dict[int, int]:
    """Reference: for each need row, the first have row on its thread starting at or after it
    and ending inside it, else the last one starting at or before it that encloses it."""
    out: dict[int, int] = {}
    rows = comm.assign(_end=comm[S.TS_NS] + comm[S.DUR_NS])
    for i in rows.index[need.to_numpy()]:
        me = rows.loc[i]
        lane = rows[(rows[S.RANK] == me[S.RANK]) & (rows[S.PID] == me[S.PID])
                    & (rows[S.TID] == me[S.TID]) & have.to_numpy()]
        after = lane[lane[S.TS_NS] >= me[S.TS_NS]].sort_values(S.TS_NS)
        if len(after) and after["_end"].iloc[0] <= me["_end"]:
            out[i] = int(after.index[0])
            continue
        before = lane[lane[S.TS_NS] <= me[S.TS_NS]].sort_values(S.TS_NS)
        if len(before) and before["_end"].iloc[-1] >= me["_end"]:
            out[i] = int(before.index[-1])
    return out


def test_nested_source_matches_a_pairwise_search() -> None:
    # GIVEN random rows on a few threads, distinct starts, half of them decided
    rng = np.random.default_rng(1)
    n = 400
    comm = pd.DataFrame({
        S.RANK: rng.integers(0, 2, n), S.PID: rng.integers(0, 2, n),
        S.TID: rng.integers(0, 3, n).astype(float),
        S.TS_NS: rng.permutation(np.arange(n) * 10),
        S.DUR_NS: rng.integers(1, 80, n),
    }, index=pd.RangeIndex(1000, 1000 + n))
    have = pd.Series(rng.random(n) < 0.5, index=comm.index)
    need = ~have
    # WHEN the nested sources are searched THEN they are the pairwise reference's
    found = nested_source(comm, need, have).dropna().astype(int).to_dict()
    expected = _nested_by_pairs(comm, need, have)
    assert expected and found == expected


def test_to_frame_holds_the_values_of_to_pandas_with_text_as_python_strings() -> None:
    import pyarrow as pa

    from tracekit.tables import to_frame, to_pandas

    # GIVEN a two-chunk table with a dictionary column whose chunks differ, a plain string
    # column, an int column with a null and a list column
    part = pa.table({
        "d": pa.array(["a", None, "b"]).dictionary_encode(),
        "s": pa.array(["x", "y", None]),
        "i": pa.array([1, None, 3], pa.int64()),
        "l": pa.array([[1], None, []], pa.list_(pa.int32())),
    })
    other = pa.table({
        "d": pa.array(["c", "a", "a"]).dictionary_encode(), "s": pa.array([None, "z", "x"]),
        "i": pa.array([4, 5, 6], pa.int64()), "l": pa.array([[2, 3], [], None],
                                                             pa.list_(pa.int32())),
    })
    table = pa.concat_tables([part, other])
    # WHEN converted both ways
    frame, reference = to_frame(table, ["d", "s", "i", "l"]), to_pandas(table)
    # THEN text columns are object dtype with None where null, the rest as to_pandas
    for col in ("d", "s"):
        assert frame[col].dtype == object
        expected = [v if isinstance(v, str) else None for v in reference[col]]
        assert frame[col].tolist() == expected
    pd.testing.assert_series_equal(frame["i"], reference["i"])
    assert [None if v is None else v.tolist() for v in frame["l"]] == \
        [None if v is None else v.tolist() for v in reference["l"]]


def test_to_frame_of_some_rows_is_the_whole_frames_rows_with_its_dtypes() -> None:
    import pyarrow as pa

    from tracekit.tables import to_frame

    # GIVEN an int column whose only null lies outside the rows taken, and text and ints
    table = pa.table({
        "i": pa.array([None, 2, 3, 4], pa.int64()),
        "j": pa.array([1, 2, 3, 4], pa.int32()),
        "d": pa.array(["a", None, "b", "a"]).dictionary_encode(),
    })
    rows = np.array([1, 3])
    # WHEN only those rows are converted
    part, whole = to_frame(table, ["i", "j", "d"], rows), to_frame(table, ["i", "j", "d"])
    # THEN they equal the whole frame's rows: same index, values and dtypes (i stays float)
    assert part["i"].dtype == np.float64 and part["j"].dtype == np.int32
    pd.testing.assert_frame_equal(part, whole.iloc[rows])


def test_factorize_equals_pandas_on_long_and_short_text() -> None:
    from tracekit.rules.keys import factorize

    long = ["frame " * 10 + str(i) for i in range(3)]
    for values in (np.array([*long, long[1], long[0]], dtype=object),
                   np.array([long[2], None, long[2], np.nan, long[0]], dtype=object),
                   np.array(["a", "b", "a"], dtype=object), np.array([3, 1, 3])):
        codes, uniques = factorize(values)
        expected_codes, expected_uniques = pd.factorize(values)
        assert codes.tolist() == expected_codes.tolist()
        assert list(uniques) == list(expected_uniques)


def test_lane_time_keys_sort_by_lane_then_time_also_when_the_span_is_huge() -> None:
    from tracekit.rules.keys import lane_time_keys

    rng = np.random.default_rng(2)
    lanes = rng.integers(0, 50, 300)
    for times in (rng.integers(0, 10**6, 300), rng.integers(-(2**62), 2**62, 300)):
        keys, width = lane_time_keys(lanes, times)
        order = np.lexsort((times, lanes))
        assert (np.diff(keys[order]) >= 0).all()
        assert ((keys // width) == lanes).all()
        # equal (lane, time) pairs and only those share a key
        assert len(set(keys.tolist())) == len(set(zip(lanes.tolist(), times.tolist(), strict=True)))


def test_tuple_key_series_equals_tuple_keys_row_by_row() -> None:
    from tracekit.rules.keys import tuple_key_series, tuple_keys

    # GIVEN member lists as arrays (one shared by two rows), lists, empties and missing
    shared = np.array([0, 1, 2, 3], dtype=np.int32)
    cells = [shared, None, np.array([4, 5]), shared, [], float("nan"), (6, 7), np.array([], int)]
    lists = pd.Series(np.array([*cells, None], dtype=object)[:-1], index=range(10, 18))
    # WHEN keyed both ways THEN the same tuples (None where missing or empty), same index
    keys = tuple_key_series(lists)
    assert keys.index.equals(lists.index) and keys.dtype == object
    assert keys.tolist() == tuple_keys(lists)
    assert keys.tolist()[0] == (0, 1, 2, 3) and keys.tolist()[6] == (6, 7)


def test_list_codes_equal_tuple_keys_across_chunks_slices_and_null_members() -> None:
    # GIVEN member lists over two chunks, one of them sliced, with missing and empty ones
    first = pa.array([[9], [1, 2], None, [], [1, 2], [3], [2, 1]], pa.list_(pa.int32())).slice(1)
    lists = pa.chunked_array([first, pa.array([[3], [5, 6, 7], None], pa.list_(pa.int32()))])
    # WHEN they are coded THEN each code names the row's tuple (-1: none), in first appearance
    codes, distinct = list_codes(lists)
    assert codes.tolist() == [0, -1, -1, 0, 1, 2, 1, 3, -1]
    assert distinct == [(1, 2), (3,), (2, 1), (5, 6, 7)]
    expected = tuple_keys(pd.Series(lists.to_pandas()))
    assert [None if c < 0 else distinct[c] for c in codes.tolist()] == expected
    # AND a list with a null member is coded through Python values, equal ones equal
    codes, distinct = list_codes(pa.array([[1, None], [2], [1, None]], pa.list_(pa.int32())))
    assert codes.tolist() == [0, 1, 0] and len(distinct) == 2
    assert list_codes(pa.chunked_array([], pa.list_(pa.int32())))[0].size == 0


def test_few_distinct_objects_are_coded_as_pandas_codes_them() -> None:
    """The comparison path (at most _PEEL distinct objects) and its fallbacks: a value the
    row sample misses, more values than it codes, equal values in distinct objects, NaN
    and None side by side."""
    rng = np.random.default_rng(7)
    twin = "".join(["ab", "c"])  # equal to "abc", another object
    cases: list[list[object]] = [["a"], [None, "b"], ["x", None, "y"], ["p", "q", "r", "s"],
                                 ["abc", twin, None], [None, np.nan, "z", float("nan")],
                                 [str(i) for i in range(9)]]
    for values in cases:
        table = np.empty(len(values), dtype=object)
        table[:] = values
        array = table[rng.integers(0, len(values), 5000)]
        rare = array.copy()
        rare[4321] = "rare"  # one row the sample of every ~10th row does not see
        for a in (array, rare):
            codes, uniques = keys.factorize(a)
            want_codes, want_uniques = pd.factorize(a)
            assert codes.tolist() == want_codes.tolist(), values
            assert list(uniques) == list(want_uniques), values
            assert keys.missing(a).tolist() == pd.isna(a).tolist(), values


def test_factorize_of_arrow_backed_text_is_that_of_its_python_strings() -> None:
    """GIVEN pandas str columns (Arrow-backed) of short and of long text with missing values
    WHEN factorizing them THEN codes and distinct values are those of the rows' Python
    strings as an object array (first appearance, -1 where missing)."""
    for word in ("TP", "x" * 40):
        s = pd.Series([None if i % 5 == 0 else f"{word}{i % 7}" for i in range(200)])
        assert isinstance(s.dtype, pd.StringDtype)
        codes, uniques = factorize(s)
        want_codes, want_uniques = pd.factorize(np.asarray(s.to_numpy(), dtype=object))
        assert codes.tolist() == want_codes.tolist()
        assert uniques.dtype == object and uniques.tolist() == list(want_uniques)
