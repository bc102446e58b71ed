"""The shortcuts of EVENTS assembly for large files give what the general computations give:
frame order, parent links, distinct frames, id lookups, nullable int gathers, side-column
scatters and dictionary codes, each checked against a plain reference on random inputs."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracekit.parsers.kineto import nest as kineto_nest
from tracekit.parsers.kineto.call_sites import _distinct, _enclosing, _parents, frame_order
from tracekit.parsers.kineto.columns import _row_key
from tracekit.parsers.kineto.dict_codes import encode_codes, masked
from tracekit.parsers.kineto.nest import (
    FirstIndex,
    dict_mask,
    filled_ints,
    ints_at,
    valid_mask,
)
from tracekit.parsers.kineto.shape_ops import ShapeOps
from tracekit.parsers.kineto.sparse_columns import Holders, spread, spread_fast

SEEDS = range(40)


@pytest.mark.parametrize("seed", SEEDS)
def test_frame_order_is_the_four_key_lexsort(seed: int) -> None:
    # GIVEN frames with few threads, repeated starts and durations, sometimes already sorted
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    pid = rng.integers(0, 1 + seed % 3, n)
    tid = rng.integers(0, 1 + seed % 4, n)
    start = rng.integers(0, 3 + seed * 5, n)
    dur = rng.integers(0, 4, n)
    if seed % 5 == 0:
        first = np.lexsort((-dur, start, tid, pid))
        pid, tid, start, dur = pid[first], tid[first], start[first], dur[first]
    # WHEN ordered
    order = frame_order(pid, tid, start, dur)
    # THEN it is the lexsort by (pid, tid, start, longest first), None meaning the identity
    expected = np.lexsort((-dur, start, tid, pid))
    got = np.arange(n) if order is None else order
    assert np.array_equal(got, expected)
    if seed % 5 == 0:
        assert order is None


def _parents_reference(pid: np.ndarray, py_id: np.ndarray, parent: np.ndarray) -> list[int]:
    out = []
    for p, want in zip(pid.tolist(), parent.tolist(), strict=True):
        hits = [j for j in range(pid.size) if pid[j] == p and py_id[j] == want and want >= 0]
        out.append(hits[0] if hits else -1)
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_parents_found_by_table_or_search_equal_the_first_match(seed: int) -> None:
    # GIVEN frames in pid order with dense ids (sometimes a repeated id, a null id, an id
    # far beyond the others, or pids out of order)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 50))
    pid = np.sort(rng.integers(0, 1 + seed % 3, n))
    py_id = rng.permutation(n).astype(np.int64) + 1
    if seed % 4 == 1:
        py_id[rng.integers(0, n)] = py_id[0]
    if seed % 4 == 2:
        py_id[0] = -1
    if seed % 7 == 3:
        py_id[-1] = 10**9
    if seed % 9 == 4:
        pid = pid[::-1].copy()
    parent = rng.integers(-1, n + 2, n)
    # WHEN each frame's parent is found
    got = _parents(pid, py_id, parent)
    # THEN it is the first frame of the same pid whose id is the parent id
    assert got.tolist() == _parents_reference(pid, py_id, parent)


@pytest.mark.parametrize("seed", SEEDS)
def test_enclosing_frame_of_each_query_on_its_thread(seed: int) -> None:
    # GIVEN frames of a few threads sorted by (pid, tid, start), parents among them, and
    # queries on those threads and on others (pid -1: none)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    pid, tid = rng.integers(0, 2, n), rng.integers(0, 3, n)
    start = rng.integers(0, 50, n)
    end = start + rng.integers(0, 20, n)
    order = np.lexsort((start, tid, pid))
    pid, tid, start, end = pid[order], tid[order], start[order], end[order]
    parent = np.array([int(rng.integers(-1, i)) if i else -1 for i in range(n)])
    q = int(rng.integers(0, 30))
    qp, qt, qts = rng.integers(-1, 3, q), rng.integers(0, 4, q), rng.integers(0, 80, q)
    # WHEN the innermost enclosing frame of each query is found
    got = _enclosing(pid, tid, start, end, parent, qp, qt, qts)
    # THEN it is the last frame of the query's thread starting at or before it, walked up
    # through the parents while it ended before the query
    want = []
    for p, t, ts in zip(qp.tolist(), qt.tolist(), qts.tolist(), strict=True):
        mine = [j for j in range(n) if pid[j] == p and tid[j] == t and start[j] <= ts]
        j = mine[-1] if p >= 0 and mine else -1
        while j >= 0 and end[j] < ts:
            j = int(parent[j])
        want.append(j)
    assert got.tolist() == want


def test_enclosing_stops_in_a_parent_cycle() -> None:
    # GIVEN frames whose parent links form cycles (a frame its own parent; two frames each
    # other's parent), all ended before the queries on their thread
    pid, tid = np.zeros(3, np.int64), np.zeros(3, np.int64)
    start, end = np.array([0, 2, 4]), np.array([1, 3, 5])
    parent = np.array([0, 2, 1])
    qp, qt, qts = np.zeros(3, np.int64), np.zeros(3, np.int64), np.array([1, 3, 9])
    # WHEN the enclosing frames are found THEN the walk ends, and a query whose walk never
    # reaches a frame that encloses it has none; the first query's frame encloses it
    got = _enclosing(pid, tid, start, end, parent, qp, qt, qts)
    assert got.tolist() == [0, 1, -1]


@pytest.mark.parametrize("seed", SEEDS)
def test_distinct_frames_equal_numpy_unique(seed: int) -> None:
    # GIVEN innermost frame positions (-1: none) among `count` frames
    rng = np.random.default_rng(seed)
    count = int(rng.integers(1, 30))
    frame = rng.integers(-1, count, int(rng.integers(0, 80)))
    # WHEN made distinct
    uniq, inverse = _distinct(frame, count)
    # THEN the values and the inverse are numpy.unique's
    ref_uniq, ref_inverse = np.unique(frame, return_inverse=True)
    assert np.array_equal(uniq, ref_uniq)
    assert np.array_equal(inverse, ref_inverse.ravel())


@pytest.mark.parametrize("seed", SEEDS)
def test_first_index_finds_the_first_equal_id(seed: int) -> None:
    # GIVEN ids with repeats, nulls (-1) and sometimes sparse ones, and keys to look up
    rng = np.random.default_rng(seed)
    ids = rng.integers(-1, 12, int(rng.integers(0, 30)))
    if seed % 3 == 0:
        ids = np.unique(ids)  # no repeat: the table path
    if seed % 5 == 0 and ids.size:
        ids[-1] = 10**12  # sparse: the search path
    keys = rng.integers(-2, 14, 25)
    # WHEN looked up, by table (high limit) and by search (limit 0)
    for limit in (1 << 20, 0):
        got = FirstIndex(ids, limit).find(keys)
        # THEN each key gets the first position of its id, -1 when absent or negative
        want = [int(np.flatnonzero(ids == k)[0]) if k >= 0 and (ids == k).any() else -1
                for k in keys.tolist()]
        assert got.tolist() == want


@pytest.mark.parametrize("seed", SEEDS)
def test_int_gathers_equal_arrow_take_and_fill(seed: int) -> None:
    # GIVEN a nullable int64 column, sometimes a slice (non-zero offset), and rows
    rng = np.random.default_rng(seed)
    values = [None if rng.random() < 0.3 else int(v) for v in rng.integers(-5, 10**12, 70)]
    arr = pa.array(values, pa.int64())
    if seed % 2:
        arr = arr.slice(int(rng.integers(1, 9)), 50)
    col = pa.chunked_array([arr])
    rows = np.sort(rng.integers(0, len(arr), 40))
    fill = -1 if seed % 3 else 0
    # WHEN gathered directly and from the filled column
    direct = ints_at(col, rows, fill)
    via_filled = ints_at(filled_ints(col, fill), rows, fill)
    # THEN both are Arrow's take with nulls filled
    want = pc.fill_null(arr.take(pa.array(rows)), fill).to_numpy()
    assert np.array_equal(direct, want) and np.array_equal(via_filled, want)
    assert direct.dtype == np.int64 and direct.flags.writeable


@pytest.mark.parametrize("seed", SEEDS[:10])
def test_valid_mask_equals_is_valid(seed: int) -> None:
    # GIVEN dictionary, integer and all-null arrays, sliced at an odd offset or not
    rng = np.random.default_rng(seed)
    words = pa.array([None if rng.random() < 0.4 else "w" for _ in range(37)])
    ints = pa.array([None if rng.random() < 0.4 else 1 for _ in range(37)], pa.int64())
    for arr in (words.dictionary_encode(), ints, pa.nulls(9, pa.int64()), ints.fill_null(0)):
        for part in (arr, arr.slice(seed % 5, len(arr) - seed % 5)):
            # WHEN unpacked  THEN it is Arrow's is_valid
            assert valid_mask(part).tolist() == part.is_valid().to_pylist()


def _buffers(arr: pa.Array) -> list[bytes | None]:
    arr = arr.indices if isinstance(arr, pa.DictionaryArray) else arr
    return [None if b is None else b.to_pybytes() for b in arr.buffers()]


@pytest.mark.parametrize("seed", SEEDS)
def test_scattered_side_columns_equal_the_gathered_ones(seed: int) -> None:
    # GIVEN side columns (strings, ints, uint64, int lists; with and without nulls) and the
    # side row of each event (-1: none), every row or few rows held
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 9)), int(rng.integers(1, 120))

    def maybe(v: object) -> object:
        return None if seed % 2 and rng.random() < 0.3 else v

    side = {
        "s": pa.array([maybe(f"v{rng.integers(0, 4)}") for _ in range(m)]),
        "i": pa.array([maybe(int(rng.integers(-9, 9))) for _ in range(m)], pa.int64()),
        "u": pa.array([maybe(int(rng.integers(0, 9))) for _ in range(m)], pa.uint64()),
        "l": pa.array([maybe([int(x) for x in rng.integers(0, 8, rng.integers(0, 4))])
                       for _ in range(m)], pa.list_(pa.int32())),
    }
    share = 1.0 if seed % 4 == 0 else 0.2
    use = np.where(rng.random(n) < share, rng.integers(0, m, n), -1).astype(np.int32)
    take = masked(np.maximum(use, 0), use >= 0, pa.int32())
    holders = Holders(take, use)
    for key, values in side.items():
        col = pa.chunked_array([values])
        # WHEN spread by scattering the held rows
        got = spread_fast(col, take, use, holders)
        got.validate(full=True)
        # THEN the values equal the gather's (and Arrow's take), and for strings and ints
        # so do the buffers, null slots included
        want = spread(col, take, keep_strings=False) if key == "l" else spread_fast(
            col, take, use)
        assert got.type == want.type and got.equals(want), key
        if key != "l":
            assert _buffers(got) == _buffers(want), key


@pytest.mark.parametrize("seed", SEEDS)
def test_encode_codes_equals_encoding_the_strings(seed: int) -> None:
    # GIVEN codes (negative: null, some below -1) into values with repeats and a None
    rng = np.random.default_rng(seed)
    values = [None if rng.random() < 0.2 else f"k{rng.integers(0, 5)}"
              for _ in range(int(rng.integers(1, 8)))]
    if seed % 3 == 0:
        values = [f"d{i}" for i in range(len(values))]  # distinct: the identity table
    codes = rng.integers(-2 if seed % 2 else 0, len(values), int(rng.integers(0, 60)))
    if seed % 3 == 0:
        codes = np.sort(codes)
    codes = codes.astype(np.int32)
    before = codes.copy()
    # WHEN encoded in code space
    got = encode_codes(codes, values)
    # THEN it equals dictionary-encoding the strings, and the codes are left as they were
    want = pa.array([values[c] if c >= 0 else None for c in codes.tolist()],
                    pa.string()).dictionary_encode()
    assert got.equals(want)
    assert got.dictionary.equals(want.dictionary)
    assert np.array_equal(codes, before)


@pytest.mark.parametrize("hits", [0, 1, 3, 4, 6])
@pytest.mark.parametrize("small_dict", [True, False])
def test_dict_mask_with_few_or_many_hits(hits: int, small_dict: bool,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a dictionary column with nulls and a wanted set hitting `hits` entries, the
    # dictionary matched in Python or by Arrow compute
    rng = np.random.default_rng(hits)
    words = [f"w{i}" for i in range(8)]
    col = pa.array([None if rng.random() < 0.1 else words[i]
                    for i in rng.integers(0, 8, 200)]).dictionary_encode()
    wanted = words[:hits]
    if not small_dict:
        monkeypatch.setattr(kineto_nest, "_SMALL_DICT", -1)
    # WHEN masked (a few hit codes compared, more looked up)
    got = dict_mask(col, wanted)
    # THEN it is the rows whose value is wanted
    assert got.dtype == np.bool_
    assert got.tolist() == [v in wanted for v in col.to_pylist()]


def test_row_key_in_numpy_equals_arrow_compute() -> None:
    # GIVEN pid / tid columns without nulls, including -1 and ids near 2**31
    pid = pa.array([-1, 0, 5, (1 << 31) - 1, 7], pa.int64())
    tid = pa.array([3, -1, (1 << 31) - 1, 0, 9], pa.int64())
    # WHEN keyed in numpy
    got = _row_key(pid, tid)
    # THEN the keys equal (pid + 1) << 32 | (tid + 1) computed by Arrow
    want = pc.bit_wise_or(pc.shift_left(pc.add(pid, 1), 32), pc.add(tid, 1))
    assert got.equals(want)


@pytest.mark.parametrize("seed", range(10))
def test_shape_ops_by_name_equal_the_ops_listed_one_by_one(seed: int) -> None:
    # GIVEN c10d ops as name codes into a dictionary, some with record_shapes args
    rng = np.random.default_rng(seed)
    names = ["c10d::allreduce_", "c10d::broadcast_", "gloo:all_reduce", "c10d::barrier"]
    n = int(rng.integers(0, 30))
    codes, rows = rng.integers(0, len(names), n), np.arange(n) * 3
    event = rows + 100
    with_args = {int(r): {"Input Dims": [[int(rng.integers(1, 3))]]}
                 for r in rows[rng.random(n) < 0.3].tolist()} if seed % 2 else {}
    # WHEN grouped by name (and args) in columns, and from one tuple per op
    fast = ShapeOps.by_name(event, codes, names, with_args, rows)
    slow = ShapeOps.of([(int(e), names[c], with_args.get(int(r), {}))
                        for e, c, r in zip(event, codes, rows, strict=True)])
    # THEN every op has the same event index and the same (name, args)
    assert fast.event.tolist() == slow.event.tolist() == event.tolist()
    assert [fast.distinct[k] for k in fast.key.tolist()] == \
        [slow.distinct[k] for k in slow.key.tolist()]
