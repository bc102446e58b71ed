"""Time classes and exposed communication on constructed intervals with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from tracekit import schema
from tracekit.measure.intervals import (
    Lanes,
    group_rows,
    lane_start_order,
    segments,
    uncovered,
    union,
    union_length,
)
from tracekit.measure.phases import build_timeline, exposed_ns, time_classes
from tracekit.schema import KernelClass, Kind

K = KernelClass


def _brute(lanes: np.ndarray, s: np.ndarray, e: np.ndarray, n: int, horizon: int) -> np.ndarray:
    """Reference: mark every integer tick of each lane (test-only, tiny horizon)."""
    marks = np.zeros((n, horizon), dtype=bool)
    ticks = np.arange(horizon)
    for lane, a, b in zip(lanes, s, e, strict=True):
        marks[lane] |= (ticks >= a) & (ticks < b)
    return marks


def test_union_and_uncovered_match_brute_force() -> None:
    """GIVEN random nested and overlapping intervals on 5 lanes
    WHEN taking union lengths and the uncovered part of query intervals
    THEN they equal a tick-by-tick reference."""
    rng = np.random.default_rng(7)
    n, count, horizon = 5, 300, 400
    lane = rng.integers(0, n, count).astype(np.int64)
    s = rng.integers(0, horizon - 50, count).astype(np.int64)
    e = s + rng.integers(0, 50, count)
    marks = _brute(lane, s, e, n, horizon)
    assert list(union_length(lane, s, e, n)) == list(marks.sum(axis=1))
    lanes = Lanes.build(lane, s, e, n)
    cover = union(lanes, lane, s, e)
    q_lane = rng.integers(0, n, 50).astype(np.int64)
    q_s = rng.integers(-20, horizon, 50).astype(np.int64)
    q_e = q_s + rng.integers(0, 80, 50)
    got = uncovered(lanes, cover, q_lane, q_s, q_e)
    ticks = np.arange(horizon)
    for i in range(50):
        inside = (ticks >= q_s[i]) & (ticks < q_e[i])
        expect = (q_e[i] - q_s[i]) - int((marks[q_lane[i]] & inside).sum())
        assert got[i] == expect


def _row(rank: int, pid: int, tid: int, ts: int, dur: int, cls: str | None, **kw: object) -> dict:
    row = {schema.RANK: rank, schema.PID: pid, schema.TID: tid, schema.TS_NS: ts,
           schema.DUR_NS: dur, schema.KERNEL_CLASS: cls, schema.NAME: kw.pop("name", "k")}
    row.update({getattr(schema, k.upper()): v for k, v in kw.items()})
    return row


def test_gpu_exposed_communication(attributed_builder) -> None:
    """GIVEN on GPU 0: compute [0,100) and [150,300) on stream 7, an AllReduce [50,200) and a
    memcpy [400,450) on stream 20, and a CPU wrapper op on the host
    WHEN computing time classes
    THEN the comm is exposed for [100,150) only = 50 ns; compute 250, comm 150, memcpy 50;
    device span [0,450) = 450, busy [0,300) + [400,450) so idle 100; the host row is ignored."""
    rows = [
        _row(0, 0, 7, 0, 100, K.COMPUTE, device=0, kind=Kind.KERNEL),
        _row(0, 0, 7, 150, 150, K.COMPUTE, device=0, kind=Kind.KERNEL),
        _row(0, 0, 20, 50, 150, K.COMM, device=0, kind=Kind.KERNEL, is_instance=True),
        _row(0, 0, 20, 400, 50, K.MEMCPY, device=0, kind=Kind.MEMCPY),
        _row(0, 4242, 1, 0, 1000, K.COMM, kind=Kind.CPU_OP, is_instance=False),
    ]
    t = attributed_builder(rows)
    tl = build_timeline(t)
    tc = time_classes(tl).to_pylist()
    device = next(r for r in tc if r[schema.TID] is None)
    assert device[schema.PID] == 0
    assert (device[schema.COMPUTE_NS], device[schema.COMM_NS], device[schema.MEMCPY_NS]) == (
        250, 150, 50)
    assert device[schema.EXPOSED_NS] == 50
    assert (device[schema.SPAN_NS], device[schema.IDLE_NS]) == (450, 100)
    comm_stream = next(r for r in tc if r[schema.TID] == 20)
    assert comm_stream[schema.EXPOSED_NS] == 50 and comm_stream[schema.IDLE_NS] == 400 - 200
    assert all(r[schema.PID] != 4242 for r in tc)
    got = exposed_ns(tl, np.array([2]), np.array([50]), np.array([200]), np.array([False]))
    assert list(got) == [50]


def test_fused_time_hides_comm_but_is_its_own_class(attributed_builder) -> None:
    """GIVEN a fused dispatch+GEMM+combine kernel [0,100) and a comm kernel [80,120)
    WHEN computing THEN fused 100 is not communication; the comm is exposed 20 ns (fused
    covers [80,100)); the fused kernel itself is exposed 100 (no compute covers it)."""
    rows = [
        _row(0, 1, 7, 0, 100, K.FUSED, device=1, kind=Kind.KERNEL, is_instance=True),
        _row(0, 1, 8, 80, 40, K.COMM, device=1, kind=Kind.KERNEL, is_instance=True),
    ]
    tl = build_timeline(attributed_builder(rows))
    device = next(r for r in time_classes(tl).to_pylist() if r[schema.TID] is None)
    assert (device[schema.FUSED_NS], device[schema.COMM_NS], device[schema.EXPOSED_NS]) == (
        100, 40, 20)
    got = exposed_ns(tl, np.array([0, 1]), np.array([0, 80]), np.array([100, 120]),
                     np.array([True, False]))
    assert list(got) == [100, 20]


def test_cpu_gloo_process_is_the_device(attributed_builder) -> None:
    """GIVEN a CPU-only gloo rank: main thread compute ops [0,100) with a nested op [10,30),
    and [300,400); a c10d wrapper on the main thread [100,300) (not the instance); the gloo
    runloop annotation [120,320) (the instance) on another thread
    WHEN computing THEN compute = 200 (nested counted once), comm = 200, exposed = the
    runloop time no main-thread compute covers = [120,300) = 180."""
    rows = [
        _row(0, 99, 1, 0, 100, K.COMPUTE, kind=Kind.CPU_OP),
        _row(0, 99, 1, 10, 20, K.COMPUTE, kind=Kind.CPU_OP),
        _row(0, 99, 1, 300, 100, K.COMPUTE, kind=Kind.CPU_OP),
        _row(0, 99, 1, 100, 200, K.COMM, kind=Kind.CPU_OP, is_instance=False),
        _row(0, 99, 2, 120, 200, K.COMM, kind=Kind.ANNOTATION, is_instance=True),
    ]
    tc = time_classes(build_timeline(attributed_builder(rows))).to_pylist()
    device = next(r for r in tc if r[schema.TID] is None)
    assert device[schema.PID] == 99
    assert (device[schema.COMPUTE_NS], device[schema.COMM_NS], device[schema.EXPOSED_NS]) == (
        200, 200, 180)
    assert device[schema.IDLE_NS] == 20  # [100,120): nothing ran (the wrapper is not timed)


def test_unclassified_cpu_ops_count_as_compute_when_nothing_is_classified(
        attributed_builder) -> None:
    """GIVEN a CPU-only rank whose compute ops carry no kernel class
    WHEN computing THEN those cpu ops are the compute (the process is the device)."""
    rows = [
        _row(0, 5, 1, 0, 100, None, kind=Kind.CPU_OP),
        _row(0, 5, 2, 50, 100, K.COMM, kind=Kind.ANNOTATION, is_instance=True),
    ]
    device = next(r for r in time_classes(build_timeline(attributed_builder(rows))).to_pylist()
                  if r[schema.TID] is None)
    assert (device[schema.COMPUTE_NS], device[schema.EXPOSED_NS]) == (100, 50)


def test_empty_table_gives_empty_classes() -> None:
    """GIVEN no rows WHEN computing THEN an empty TIME_CLASSES table, not an error."""
    t = schema.empty(schema.ATTRIBUTED)
    out = time_classes(build_timeline(t))
    assert out.num_rows == 0 and out.schema.equals(schema.TIME_CLASSES)


@pytest.mark.parametrize("lanes_count", [1, 3])
def test_lanes_do_not_leak(lanes_count: int) -> None:
    """GIVEN identical intervals on several lanes far apart in time WHEN covering
    THEN each lane sees only its own cover."""
    lane = np.arange(lanes_count, dtype=np.int64)
    s = lane * 10**12
    e = s + 100
    lanes = Lanes.build(lane, s, e, lanes_count)
    cover = union(lanes, lane, s, e)
    got = uncovered(lanes, cover, lane, s - 50, e + 50)
    assert list(got) == [100] * lanes_count
    assert pa.array(got).type == pa.int64()


@pytest.mark.parametrize("spread", [3, 10**6, 2**62])
def test_group_rows_and_lane_order_match_numpy(spread: int) -> None:
    """GIVEN integer columns with few distinct values in a narrow range, a wide range and
    the extremes of int64 WHEN grouping rows and ordering by (lane, start)
    THEN they equal np.unique and np.lexsort (the dense and the hashed paths agree)."""
    rng = np.random.default_rng(spread % 1000)
    a = rng.integers(-spread, spread, 500, dtype=np.int64)
    b = rng.choice(np.array([-spread, 0, 5, spread - 1], dtype=np.int64), 500)
    rows, inverse = group_rows(a, b)
    expect, expect_inv = np.unique(np.stack([a, b], 1), axis=0, return_inverse=True)
    assert rows.tolist() == expect.tolist()
    assert inverse.tolist() == expect_inv.ravel().tolist()
    lane = rng.integers(0, 4, 500).astype(np.int64)
    start = rng.integers(-spread, spread, 500, dtype=np.int64) // 7 * 7  # with ties
    assert lane_start_order(lane, start).tolist() == np.lexsort((start, lane)).tolist()
    assert lane_start_order(lane[:0], start[:0]).tolist() == []


def test_coarser_unions_from_segments_match_brute_force() -> None:
    """GIVEN random nested, overlapping and touching intervals on 6 keys, each key part of
    one of 3 coarser keys, in no order WHEN taking each key's union as segments and merging
    them per coarser key THEN the busy times equal a tick-by-tick reference at both levels
    and the merged segments are those of the coarser keys' union of the raw intervals."""
    rng = np.random.default_rng(11)
    count, horizon = 400, 300
    fine = rng.integers(0, 6, count).astype(np.int64)
    of_key = np.array([0, 0, 1, 2, 2, 2], dtype=np.int64)
    s = rng.integers(0, horizon - 40, count).astype(np.int64)
    e = s + rng.integers(0, 40, count)
    per_key = segments(fine, s, e, 6)
    assert list(per_key.length(6)) == list(_brute(fine, s, e, 6, horizon).sum(axis=1))
    merged = per_key.merged(of_key, 3)
    assert list(merged.length(3)) == list(_brute(of_key[fine], s, e, 3, horizon).sum(axis=1))
    direct = segments(of_key[fine], s, e, 3)
    for got, want in ((merged.key, direct.key), (merged.start, direct.start),
                      (merged.end, direct.end)):
        assert got.tolist() == want.tolist()
    assert per_key.start.size > merged.start.size  # fewer segments than intervals


@pytest.mark.parametrize("second_start", [300, 120])
def test_phase_exposed_over_layers_counts_overlap_once(attributed_builder,
                                                        second_start: int) -> None:
    """GIVEN on GPU 0 compute [0,100) and two communication kernels of one phase in layers 0
    and 1: [50,200) and [second_start, +150), apart or overlapping
    WHEN building PHASES
    THEN each layer's exposed time is its own, and the rank's all-layer row counts the
    overlap once (the union of both minus the compute)."""
    from tracekit.measure.phasetable import phase_table

    rows = [
        _row(0, 0, 7, 0, 100, K.COMPUTE, device=0, kind=Kind.KERNEL, phase="decode", layer=0),
        _row(0, 0, 20, 50, 150, K.COMM, device=0, kind=Kind.KERNEL, phase="decode", layer=0),
        _row(0, 0, 21, second_start, 150, K.COMM, device=0, kind=Kind.KERNEL, phase="decode",
             layer=1),
    ]
    t = attributed_builder(rows)
    out = phase_table(build_timeline(t), t, pd.DataFrame(
        {c: pd.Series(dtype="Int64") for c in (schema.RANK, schema.LAYER, schema.MSG_BYTES,
                                                schema.TRANSFER_NS, schema.WAIT_NS,
                                                schema.NOTIFY_NS, schema.BOUND_NS)}
        | {schema.PHASE: pd.Series(dtype=object)})).to_pylist()
    by = {(r[schema.RANK], r[schema.LAYER]): r for r in out if r[schema.PHASE] == "decode"}
    assert by[(0, 0)][schema.EXPOSED_NS] == 100 and by[(0, 1)][schema.EXPOSED_NS] == 150
    union_end = max(200, second_start + 150) if second_start <= 200 else None
    expect = (union_end - 100) if union_end is not None else 100 + 150
    assert by[(0, None)][schema.EXPOSED_NS] == expect
    assert by[(0, None)][schema.COMM_NS] == (expect + 50)


def test_segments_of_rows_in_key_and_start_order_match_the_general_union() -> None:
    """GIVEN random nested, touching and empty intervals on 6 keys, the rows in (key, start)
    order (the timeline's) and in no order WHEN taking each key's union as segments
    THEN both give the segments of the placed union and the tick-by-tick busy time."""
    rng = np.random.default_rng(13)
    count, horizon = 500, 300
    key = rng.integers(0, 6, count).astype(np.int64)
    s = rng.integers(0, horizon - 40, count).astype(np.int64)
    e = s + rng.integers(0, 40, count)
    order = np.lexsort((s, key))
    lanes = Lanes.build(key, s, e, 6)
    u = union(lanes, key, s, e)
    want = (u.lane.tolist(), lanes.unplace(u.lane, u.start).tolist(),
            lanes.unplace(u.lane, u.end).tolist())
    for k, a, b in ((key[order], s[order], e[order]), (key, s, e)):
        got = segments(k, a, b, 6)
        assert (got.key.tolist(), got.start.tolist(), got.end.tolist()) == want
        assert list(got.length(6)) == list(_brute(key, s, e, 6, horizon).sum(axis=1))


def test_value_codes_of_dictionary_and_plain_text_agree() -> None:
    """GIVEN the same texts (one wanted, one not, a null row) as a dictionary column whose
    dictionary also holds a null, and as plain strings WHEN coding them against a tuple
    THEN both give the index, -1 for another text and -2 for a null."""
    from tracekit.measure.phases import value_codes

    dictionary = pa.array(["comm", None, "other", "compute"])
    coded = pa.DictionaryArray.from_arrays(pa.array([0, 2, None, 1, 3], pa.int32()), dictionary)
    plain = pa.array(["comm", "other", None, None, "compute"])
    want = [0, -1, -2, -2, 1]
    for column in (coded, plain):
        table = pa.table({"t": pa.chunked_array([column[:2], column[2:]])})
        assert value_codes(table, "t", ("comm", "compute")).tolist() == want



def test_text_mask_of_dictionary_and_plain_text_agree() -> None:
    """GIVEN texts (kept, not kept, null rows) as dictionary chunks (sliced, with null
    indices and a null entry) and as plain strings WHEN masking them by a set and by a
    prefix THEN both give true on the kept texts only, false on nulls."""
    from tracekit.measure.textmask import text_mask

    dictionary = pa.array(["comm", None, "other", "compute"])
    coded = pa.DictionaryArray.from_arrays(pa.array([0, 2, None, 1, 3, 0], pa.int32()),
                                           dictionary)
    plain = pa.array(["comm", "other", None, None, "compute", "comm"])
    for column in (coded, plain):
        chunked = pa.chunked_array([column[:1], column[1:4], column[4:]])
        assert text_mask(chunked, ["comm", "compute"]).tolist() == \
            [True, False, False, False, True, True]
        assert text_mask(chunked, prefix="comp").tolist() == \
            [False, False, False, False, True, False]
    assert text_mask(pa.chunked_array([], pa.string()), ["comm"]).tolist() == []

def test_class_segments_by_one_class_and_key_sort_match_the_per_class_unions(
        attributed_builder) -> None:
    """GIVEN random nested, touching and empty kernels of every class on two GPUs and three
    streams WHEN taking each (lane, stream) key's union per class by one sort of the
    timeline by (class, key) THEN the segments are those of the per-class unions of the rows
    grouped by key, and the busy times those of a tick-by-tick reference."""
    from tracekit.measure.phases import (
        CLASSES,
        class_segments,
        rows_by_key,
        timeline_class_segments,
    )

    rng = np.random.default_rng(17)
    count, horizon = 600, 300
    classes = [K.COMM, K.FUSED, K.COMPUTE, K.MEMCPY]
    rows = [_row(0, int(p), int(t), int(s), int(d), classes[int(c)], device=int(p),
                 kind=Kind.KERNEL)
            for p, t, s, d, c in zip(rng.integers(0, 2, count), rng.integers(0, 3, count),
                                     rng.integers(0, horizon - 40, count),
                                     rng.integers(0, 40, count), rng.integers(0, 4, count),
                                     strict=True)]
    tl = build_timeline(attributed_builder(rows))
    keys, inv = group_rows(tl.lane, tl.tid)
    n = len(keys)
    got = timeline_class_segments(tl, inv, n)
    want = class_segments(*rows_by_key(tl, inv, n), n)
    assert len(got) == len(CLASSES)
    for code, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g.key.tolist(), g.start.tolist(), g.end.tolist()) == \
            (w.key.tolist(), w.start.tolist(), w.end.tolist())
        m = tl.cls == code
        assert list(g.length(n)) == list(
            _brute(inv[m], tl.start[m], tl.end[m], n, horizon).sum(axis=1))


@pytest.mark.parametrize("second", [(250, 50), (120, 100)])
def test_device_exposed_of_comm_on_two_streams(attributed_builder,
                                               second: tuple[int, int]) -> None:
    """GIVEN on GPU 0 compute [0,100), communication [50,200) on stream 20 and
    communication on stream 21 apart from it or overlapping it WHEN computing time classes
    THEN each stream's exposed time is its own and the device's counts the overlap once
    (the union of both minus the compute), whether or not the streams' segments merge."""
    ts, dur = second
    rows = [
        _row(0, 0, 7, 0, 100, K.COMPUTE, device=0, kind=Kind.KERNEL),
        _row(0, 0, 20, 50, 150, K.COMM, device=0, kind=Kind.KERNEL, is_instance=True),
        _row(0, 0, 21, ts, dur, K.COMM, device=0, kind=Kind.KERNEL, is_instance=True),
    ]
    tc = time_classes(build_timeline(attributed_builder(rows))).to_pylist()
    by_tid = {r[schema.TID]: r for r in tc}
    assert by_tid[20][schema.EXPOSED_NS] == 100 and by_tid[21][schema.EXPOSED_NS] == dur
    union_end = max(200, ts + dur) if ts <= 200 else None
    want = union_end - 100 if union_end is not None else 100 + dur
    assert by_tid[None][schema.EXPOSED_NS] == want


def test_phase_rank_rows_sum_their_layers_with_missing_bounds(attributed_builder) -> None:
    """GIVEN MEASURED rows of rank 0 in two phases and two layers, the bounds known on one
    row of one phase only WHEN building PHASES THEN each rank-level row (layer null) sums
    its layers' bytes, counts and bounds, the bound missing where no row has one."""
    from tracekit.measure.phasetable import phase_table

    t = attributed_builder([_row(0, 0, 7, 0, 100, K.COMPUTE, device=0, kind=Kind.KERNEL,
                                 phase="decode", layer=0)])
    ints = {schema.RANK: [0, 0, 0, 0], schema.LAYER: [0, 0, 1, 1],
            schema.MSG_BYTES: [10, 20, 30, 40], schema.TRANSFER_NS: [1, 2, 3, 4],
            schema.WAIT_NS: [0, 0, 0, 0], schema.NOTIFY_NS: [0, 0, 0, 0],
            schema.BOUND_NS: [5, None, None, None]}
    measured = pd.DataFrame({c: pd.array(v, dtype="Int64") for c, v in ints.items()}
                            | {schema.PHASE: ["decode", "decode", "decode", "combine"]})
    out = phase_table(build_timeline(t), t, measured).to_pylist()
    by = {(r[schema.RANK], r[schema.PHASE], r[schema.LAYER]): r for r in out}
    decode, combine = by[(0, "decode", None)], by[(0, "combine", None)]
    assert (decode[schema.MSG_BYTES], decode[schema.COUNT], decode[schema.BOUND_NS]) == (60, 3, 5)
    assert (combine[schema.MSG_BYTES], combine[schema.COUNT]) == (40, 1)
    assert combine[schema.BOUND_NS] is None
    assert by[(None, "decode", None)][schema.MSG_BYTES] == 60


def test_overlap_of_many_unordered_intervals_is_that_of_each() -> None:
    """GIVEN a cover on two lanes and more intervals than Union.overlap searches in their
    given order, in no order WHEN measuring the covered part of each THEN it is each
    interval's own covered_before(end) - covered_before(start), in the given order."""
    rng = np.random.default_rng(21)
    lane = rng.integers(0, 2, 300).astype(np.int64)
    s = rng.integers(0, 10_000, 300).astype(np.int64)
    lanes = Lanes.build(lane, s, s + 50, 2)
    cover = union(lanes, lane, s, s + rng.integers(0, 50, 300))
    q_lane = rng.integers(0, 2, 6000).astype(np.int64)
    a = lanes.place(q_lane, rng.integers(0, 10_000, 6000).astype(np.int64))
    b = a + rng.integers(0, 200, 6000)
    want = cover.covered_before(b) - cover.covered_before(a)
    got = cover.overlap(a, b)
    assert got.dtype == np.int64 and got.tolist() == want.tolist()
    assert want.any()
