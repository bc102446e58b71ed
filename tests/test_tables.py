"""tracekit.tables' Arrow builders agree with pyarrow's own conversions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from tracekit import schema as S
from tracekit.tables import integral, masked, rank_chunks, text_series


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 65, 10_000])
@pytest.mark.parametrize("kind", [pa.int32(), pa.int64(), pa.float64()])
def test_masked_is_pyarrows_masked_array(n: int, kind: pa.DataType) -> None:
    rng = np.random.default_rng(n)
    missing = rng.random(n) < 0.3
    values = rng.integers(-50, 50, n).astype(kind.to_pandas_dtype())
    ours = masked(values, missing, kind)
    ours.validate(full=True)
    assert ours.type == kind
    assert ours.equals(pa.array(values, kind, mask=missing))
    assert ours.null_count == int(missing.sum())
    assert masked(values, None, kind).equals(pa.array(values, kind))


@pytest.mark.parametrize("kind", [pa.int32(), pa.int64()])
def test_integral_is_the_checked_cast(kind: pa.DataType) -> None:
    values = np.array([np.nan, 3.0, -2.0, np.nan, 0.0, 7.0, 1e9, np.nan, 5.0])
    ours = integral(values, kind)
    ours.validate(full=True)
    assert ours.equals(pa.array(values, from_pandas=True).cast(kind))
    assert ours.to_pylist() == [None, 3, -2, None, 0, 7, 1_000_000_000, None, 5]
    assert integral(np.full(4, np.nan), kind).null_count == 4


def test_integral_refuses_a_fraction() -> None:
    with pytest.raises(ValueError, match="fraction"):
        integral(np.array([1.0, 2.5, np.nan]), pa.int64())


def test_to_frame_text_of_chunked_dictionaries_is_pyarrows_with_one_object_per_value() -> None:
    """Chunks with dictionaries of their own (one per rank in EVENTS), nulls, a repeated
    dictionary value and an empty chunk: the values are pyarrow's, and each distinct text is
    one Python object across every chunk (the engine codes text columns by reference)."""
    from tracekit.tables import to_frame

    a, b, c = "c10d::allreduce_ a", "nccl:all_reduce b", "record_param_comms c"  # not interned
    chunks = [pa.array([b, None, a, b]).dictionary_encode(),
              pa.DictionaryArray.from_arrays(pa.array([0, 1, None, 0], pa.int32()),
                                             pa.array([a, a])),
              pa.array([], pa.string()).dictionary_encode(),
              pa.array([None, c, a]).dictionary_encode()]
    table = pa.table({"name": pa.chunked_array(chunks)})
    want = table.column("name").cast(pa.string()).to_pylist()
    for rows in (None, np.array([0, 2, 3, 4, 6, 9, 10])):
        got = to_frame(table, ["name"], rows)["name"].to_numpy()
        expected = want if rows is None else [want[i] for i in rows]
        assert got.dtype == object and got.tolist() == expected
        by_value: dict[str, int] = {}
        for v in got.tolist():
            if v is not None:
                assert by_value.setdefault(v, id(v)) == id(v)


@pytest.mark.parametrize("codes", [[0, 1, -1, 2, 0], [-1, -1, -1], [], [2, 2]])
def test_text_series_is_the_column_pandas_infers_from_the_strings(codes: list[int]) -> None:
    """GIVEN per-row codes into three words (-1: missing) WHEN building the column from the
    codes THEN it is what assigning the rows' Python strings (None where missing) gives:
    the same dtype (str, or object where every row is missing) and the same values."""
    words = ("ok", "no_size", "exceeded")
    index = pd.RangeIndex(10, 10 + len(codes))
    objects = np.array([words[c] if c >= 0 else None for c in codes], dtype=object)
    want = pd.DataFrame(index=index).assign(x=objects)["x"]
    got = text_series(np.asarray(codes, dtype=np.int8), words, index)
    assert got.dtype == want.dtype
    pd.testing.assert_series_equal(got, want, check_names=False)


def _chunked(*parts: tuple[list[int | None], list[int | None], list[int | None]]) -> pa.Table:
    """One chunk per (ranks, starts, durations) part."""
    fields = [(S.RANK, pa.int32()), (S.TS_NS, pa.int64()), (S.DUR_NS, pa.int64())]
    schema = pa.schema(fields)
    return pa.Table.from_batches(
        [pa.record_batch([pa.array(c, t) for c, (_, t) in zip(part, fields, strict=True)],
                         schema=schema) for part in parts], schema=schema)


def test_rank_chunks_per_chunk_spans_and_offsets() -> None:
    events = _chunked(([1, 1], [10, 5], [3, 1]), ([], [], []), ([0, 0, 0], [7, 9, 8], [1, 4, 0]),
                      ([1], [20], [2]))
    chunks = rank_chunks(events, "end")
    assert chunks is not None
    table, offsets = chunks
    # rank, first start, last end (ts + dur), rows; the empty chunk left out
    assert table.to_pylist() == [
        {S.RANK: 1, S.TS_NS: 5, "end": 13, S.COUNT: 2},
        {S.RANK: 0, S.TS_NS: 7, "end": 13, S.COUNT: 3},
        {S.RANK: 1, S.TS_NS: 20, "end": 22, S.COUNT: 1}]
    assert offsets == [0, 2, 5]
    assert table.schema.field(S.RANK).type == pa.int32()  # the events' own types


@pytest.mark.parametrize("parts", [
    (([0, 1], [1, 2], [1, 1]),),  # a chunk of two ranks
    (([0, 0], [1, None], [1, 1]),),  # a null start
    (([0], [1], [None]),),  # a null duration
    (([None], [1], [1]),),  # a null rank
    (([], [], []),),  # no rows
])
def test_rank_chunks_declines_what_a_row_wise_group_by_must_do(parts) -> None:
    assert rank_chunks(_chunked(*parts), "end") is None


@pytest.mark.parametrize("rows", [[0, 2, 3, 4, 6, 9, 10], [], [5], [7, 8], list(range(11))])
def test_to_frame_of_rows_is_the_whole_frames_rows(rows: list[int]) -> None:
    """GIVEN chunked number and text columns (nulls in some chunks only, an empty chunk, an
    integer chunk without nulls in a column with some) WHEN converting only some rows THEN
    the frame is the whole table's frame at those rows: values, dtypes and index."""
    from tracekit.tables import to_frame

    def chunked(parts: list[list], kind: pa.DataType) -> pa.ChunkedArray:
        return pa.chunked_array([pa.array(p, kind) for p in parts], kind)

    table = pa.table({
        "i": chunked([[1, None, 3, 4], [5, 6], [], [7, 8, 9, 10, 11]], pa.int64()),
        "n": chunked([[1, 2, 3, 4], [5, 6], [], [7, 8, 9, 10, 11]], pa.int32()),
        "f": chunked([[0.5, 1.5, None, 2.5], [3.5, 4.5], [], [5.5, 6.5, 7.5, None, 9.5]],
                     pa.float64()),
        "s": chunked([["a", None, "b", "a"], ["c", "c"], [], [None, "d", "a", "e", "b"]],
                     pa.string()),
        "b": chunked([[True, False, None, True], [False, True], [],
                      [True, True, False, None, False]], pa.bool_()),
    })
    whole = to_frame(table)
    at = np.asarray(rows, dtype=np.int64)
    got = to_frame(table, rows=at)
    want = whole.iloc[at]
    assert list(got.columns) == list(want.columns)
    assert got.index.tolist() == rows
    for name in want.columns:
        assert got[name].dtype == want[name].dtype, name
        assert got[name].isna().tolist() == want[name].isna().tolist(), name
        assert got[name].dropna().tolist() == want[name].dropna().tolist(), name
