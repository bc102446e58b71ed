"""Cross-rank matching, wait, skew and stragglers: hand-made ranks and the real gloo samples."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracekit import api, schema
from tracekit.measure import crossrank, measure_run
from tracekit.schema import KernelClass, Kind, Op

K = KernelClass


def _coll(rank: int, ts: int, dur: int, **kw: object) -> dict:
    row = {schema.RANK: rank, schema.PID: rank, schema.TID: 2, schema.DEVICE: rank,
           schema.TS_NS: ts, schema.DUR_NS: dur, schema.KIND: Kind.KERNEL,
           schema.KERNEL_CLASS: K.COMM, schema.IS_INSTANCE: True, schema.OP: Op.ALL_REDUCE,
           schema.IN_BYTES: 1024, schema.OUT_BYTES: 1024, schema.NAME: "allreduce"}
    row.update({getattr(schema, k.upper()): v for k, v in kw.items()})
    return row


def test_wait_skew_and_straggler_by_group_order(attributed_builder, run_builder) -> None:
    """GIVEN 4 ranks running two AllReduces on group [0..3] where rank 2 starts 300 ns late
    each time, and each rank's call ends when the last one has arrived plus 100 ns
    WHEN measuring
    THEN transfer = 100 ns (rank 2's duration), wait = own duration - 100, skew = start -
    earliest start, and rank 2 is the straggler that caused all the wait (a FINDINGS row)."""
    rows = []
    for k, base in enumerate((0, 10_000)):
        for r in range(4):
            start = base + (300 if r == 2 else 10 * r)
            end = base + 300 + 100
            rows.append(_coll(r, start, end - start, pg_ranks=[0, 1, 2, 3], group_size=4,
                              group="TP", layer=k))
    t = attributed_builder(rows)
    a = measure_run(run_builder(t), t, api.AnalyzeOptions())
    m = a.measured.to_pylist()
    assert len({r[schema.INSTANCE] for r in m}) == 2
    for r in m:
        start = r[schema.TS_NS] % 10_000
        assert r[schema.TRANSFER_NS] == 100
        assert r[schema.WAIT_NS] == (400 - start) - 100
        assert r[schema.SKEW_NS] == start
        assert r[schema.N_RANKS] == 4
    s = a.tables["stragglers"].to_pylist()
    assert s[0][schema.RANK] == 2 and s[0][schema.LAST_COUNT] == 2
    # others wait 300 + 290 + 270 per instance
    assert s[0][schema.CAUSED_WAIT_NS] == 2 * (300 + 290 + 270)
    assert s[0][schema.SHARE] == pytest.approx(1.0)
    f = a.findings_table.to_pylist()
    assert [x[schema.RANKS] for x in f] == [[2]]
    assert f[0][schema.RULE_ID] == "measure.straggler"


def test_matching_prefers_comms_id_then_seq(attributed_builder) -> None:
    """GIVEN rank 1 issued two collectives in the opposite order to rank 0, told apart by
    their Comms Id (first pair) and by their sequence number (second pair)
    WHEN matching THEN the ids / sequence numbers pair them, not the order."""
    rows = [
        _coll(0, 0, 50, comms_id=111, pg_ranks=[0, 1]),
        _coll(0, 100, 50, comms_id=222, pg_ranks=[0, 1]),
        _coll(1, 0, 70, comms_id=222, pg_ranks=[0, 1]),
        _coll(1, 100, 90, comms_id=111, pg_ranks=[0, 1]),
        _coll(0, 200, 50, seq=7, pg_ranks=[0, 1]),
        _coll(0, 300, 50, seq=8, pg_ranks=[0, 1]),
        _coll(1, 200, 20, seq=8, pg_ranks=[0, 1]),
        _coll(1, 300, 30, seq=7, pg_ranks=[0, 1]),
    ]
    df = crossrank.match(crossrank.instance_rows(attributed_builder(rows)))
    pairs = df.groupby(schema.INSTANCE)[schema.DUR_NS].apply(sorted).tolist()
    assert sorted(pairs) == sorted([[50, 90], [50, 70], [30, 50], [20, 50]])


def test_order_is_per_member_set(attributed_builder) -> None:
    """GIVEN two disjoint pairs [0,1] and [2,3] of the same group kind, no ids
    WHEN matching by order THEN each pair forms its own 2-rank instances."""
    rows = [_coll(r, 0, 10 + r, pg_ranks=[0, 1] if r < 2 else [2, 3]) for r in range(4)]
    df = crossrank.match(crossrank.instance_rows(attributed_builder(rows)))
    groups = df.groupby(schema.INSTANCE)[schema.RANK].apply(sorted).tolist()
    assert sorted(groups) == [[0, 1], [2, 3]]


def test_logical_id_merges_kernels(attributed_builder) -> None:
    """GIVEN one logical collective made of two kernels [0,40) and [60,100) on a rank
    WHEN selecting instances THEN it is one row spanning [0,100)."""
    rows = [_coll(0, 0, 40, logical_id=5), _coll(0, 60, 40, logical_id=5)]
    df = crossrank.instance_rows(attributed_builder(rows))
    assert len(df) == 1 and int(df[schema.DUR_NS].iloc[0]) == 100


# ------------------------------------------------------------------------------------------
# Real 4-rank gloo traces (sample_traces/), checked against the files' own timestamps
# ------------------------------------------------------------------------------------------

_TOPOLOGY_KEYS = ("tp_size", "dp_size", "enable_dp_attention", "ep_size", "moe_dp_size",
                  "attn_cp_size", "npu")


def _raw_gloo_calls(trace: Path) -> list[tuple[int, int]]:
    """(ts_ns, dur_ns) of the gloo:* spans in a Kineto file, in start order, read directly."""
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    spans = [e for e in doc["traceEvents"]
             if e.get("ph") == "X" and str(e.get("name", "")).startswith("gloo:")]
    out = [(round(float(e["ts"]) * 1000), round(float(e["dur"]) * 1000)) for e in spans]
    return sorted(out)


def _scenarios(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/manifest.json"))


def _expected(scenario: Path) -> dict:
    """Per instance (members, k-th call of that group on the rank): the files' own
    (rank, ts, dur, sidecar bytes, op), pairing the k-th gloo span with the k-th sidecar entry."""
    manifest = json.loads((scenario / "manifest.json").read_text())
    expect: dict[tuple[tuple[int, ...], int], list[tuple[int, int, int, int, str]]] = {}
    for rank_s, files in manifest["ranks"].items():
        rank = int(rank_s)
        side = json.loads((scenario / files["sidecar"]).read_text())["collectives"]
        raw = _raw_gloo_calls(scenario / files["trace"])
        assert len(raw) == len(side), f"{scenario.name} rank {rank}: spans vs sidecar"
        seen: dict[tuple[int, ...], int] = defaultdict(int)
        for call, (ts, dur) in zip(side, raw, strict=True):
            members = tuple(call["members"])
            expect.setdefault((members, seen[members]), []).append(
                (rank, ts, dur, call["bytes"], call["op"]))
            seen[members] += 1
    return expect


def _check_against_files(scenario: Path, analysis: api.Analysis, expect: dict,
                         *, grouped_only: bool = False) -> None:
    """``grouped_only``: check only instances the rules engine gave a group (an unattributed
    collective is, by design, not matched across ranks)."""
    got = {(r[schema.RANK], r[schema.TS_NS]): r for r in analysis.measured.to_pylist()}
    caused: dict[int, int] = defaultdict(int)
    for (members, _k), calls in expect.items():
        if grouped_only and any(got[(c[0], c[1])][schema.GROUP] is None for c in calls):
            continue
        transfer = min(c[2] for c in calls)
        first = min(c[1] for c in calls)
        for rank, ts, dur, _size, _op in calls:
            row = got[(rank, ts)]
            assert abs(row[schema.TRANSFER_NS] - transfer) <= 2, scenario.name
            assert abs(row[schema.WAIT_NS] - (dur - transfer)) <= 4, scenario.name
            assert abs(row[schema.SKEW_NS] - (ts - first)) <= 2, scenario.name
            assert row[schema.N_RANKS] == len(members), scenario.name
        if len(calls) > 1:
            last = max(calls, key=lambda c: c[1])
            caused[last[0]] += sum(c[2] - transfer for c in calls) - (last[2] - transfer)
    if grouped_only:
        return
    table = {r[schema.RANK]: r for r in analysis.tables["stragglers"].to_pylist()}
    for rank, value in caused.items():
        assert abs(table[rank][schema.CAUSED_WAIT_NS] - value) <= 8, scenario.name
    worst = max(caused, key=caused.__getitem__)
    assert analysis.tables["stragglers"].column(schema.RANK)[0].as_py() == worst


def _attributed_from_sidecars(run: api.Run, scenario: Path) -> pa.Table:
    """ATTRIBUTED built by hand: the gloo:* spans are the instances; op, group and members
    come from the sidecars (the workload's ground truth), nothing from the rules engine."""
    manifest = json.loads((scenario / "manifest.json").read_text())
    ev = crossrank.frame(run.events)
    ev[schema.NAME] = ev[schema.NAME].astype(str)
    spans = ev[ev[schema.NAME].str.startswith("gloo:")].sort_values([schema.RANK, schema.TS_NS])
    ops, groups, members = {}, {}, {}
    for rank_s, files in manifest["ranks"].items():
        side = json.loads((scenario / files["sidecar"]).read_text())["collectives"]
        idx = spans.index[spans[schema.RANK] == int(rank_s)]
        assert len(idx) == len(side)
        for i, call in zip(idx, side, strict=True):
            ops[i], groups[i], members[i] = call["op"], call["group"], call["members"]
    table = {c: ev[c] for c in ev.columns}
    inst = ev.index.isin(spans.index)
    table[schema.IS_INSTANCE] = inst
    table[schema.KERNEL_CLASS] = [KernelClass.COMM if x else None for x in inst]
    table[schema.OP] = [ops.get(i) for i in ev.index]
    table[schema.GROUP] = [groups.get(i) for i in ev.index]
    table[schema.PG_RANKS] = [members.get(i) for i in ev.index]
    frame = pa.Table.from_pandas(ev.assign(**{k: v for k, v in table.items()
                                              if k not in ev.columns or k == schema.OP}),
                                 preserve_index=False)
    frame = frame.drop_columns([schema.PG_RANKS]).append_column(
        schema.PG_RANKS, pa.array(table[schema.PG_RANKS], pa.list_(pa.int32())))
    return schema.conform(frame, schema.ATTRIBUTED)


def test_sample_traces_wait_and_stragglers(sample_traces: Path) -> None:
    """GIVEN each real multi-rank gloo sample, its gloo spans taken as the instances and the
    sidecars' op / group / members (no rules engine involved)
    WHEN measuring
    THEN per instance transfer = min over ranks of the files' gloo span durations, wait =
    duration - transfer, skew = start - earliest start, n = the sidecar's members; and the
    stragglers table equals the one recomputed from the files."""
    for scenario in _scenarios(sample_traces):
        run = api.load(scenario)
        attributed = _attributed_from_sidecars(run, scenario)
        analysis = measure_run(run, attributed, api.AnalyzeOptions(hardware="cpu-gloo"))
        _check_against_files(scenario, analysis, _expected(scenario))


def test_sample_traces_full_pipeline(sample_traces: Path) -> None:
    """GIVEN each sample run WHEN loaded, attributed by the rules engine and measured with the
    manifest's topology THEN for every collective the rules gave a group: the same waits as
    the files' timestamps, the sidecar's op, and S equal to the sidecar's bytes (nccl-tests
    S; for v-collectives S >= any rank's bytes)."""
    from tracekit.topology import Topology
    from tracekit.topology.config import config_from_mapping

    for scenario in _scenarios(sample_traces):
        manifest = json.loads((scenario / "manifest.json").read_text())
        config = {k: manifest["config"][k] for k in _TOPOLOGY_KEYS if k in manifest["config"]}
        topology = Topology(config_from_mapping(config, str(scenario)))
        options = api.AnalyzeOptions(hardware="cpu-gloo", topology=topology)
        run = api.load(scenario)
        attributed, _ = api.attribute(run, options)
        analysis = measure_run(run, attributed, options)
        expect = _expected(scenario)
        _check_against_files(scenario, analysis, expect, grouped_only=True)
        got = {(r[schema.RANK], r[schema.TS_NS]): r for r in analysis.measured.to_pylist()}
        for calls in expect.values():
            largest = max(c[3] for c in calls)
            for rank, ts, _dur, _size, op in calls:
                row = got[(rank, ts)]
                if row[schema.GROUP] is None:
                    continue
                assert row[schema.OP] == op, scenario.name
                if op in (Op.ALL_TO_ALLV, Op.ALL_GATHERV, Op.REDUCE_SCATTERV):
                    assert row[schema.MSG_BYTES] >= largest
                else:
                    assert row[schema.MSG_BYTES] == largest, (scenario.name, op)
                assert row[schema.LINK_CLASS] == "loopback"
                if row[schema.BOUND_STATUS] == schema.BoundStatus.EXCEEDED:
                    # a bound the time beats by more than the tolerance is withheld and named
                    # in a finding (gloo's broadcast root returns before its peers receive)
                    assert row[schema.BOUND_NS] is None and row[schema.EFFICIENCY] is None
                    assert "measure.bound-exceeded" in analysis.findings_table.column(
                        schema.RULE_ID).to_pylist()
                else:
                    assert row[schema.BOUND_NS] > 0, (scenario.name, op)


def test_unknown_communicator_is_not_matched(attributed_builder) -> None:
    """GIVEN two ranks' collectives with no members, group name or group label
    WHEN matching THEN each stays its own instance (no wait is invented)."""
    rows = [_coll(0, 0, 50), _coll(1, 0, 80)]
    df = crossrank.match(crossrank.instance_rows(attributed_builder(rows)))
    assert df[schema.INSTANCE].nunique() == 2 and set(df[schema.WAIT_NS]) == {0}


def _object_merge(col, hit, taken: pa.Array, wrapper_nulls: bool):
    """The merge as Python objects: the taken values as a full column (missing elsewhere)
    written over ``col`` as objects, the dtype inferred back (what _merged_values keeps)."""
    import numpy as np
    import pandas as pd

    full = [None] * len(col)
    for i, v in zip(hit, taken.to_pylist(), strict=True):
        full[i] = v
    values = pa.array(full, type=taken.type).to_numpy(zero_copy_only=False)
    if values.dtype.kind in "iu" and wrapper_nulls:
        values = values.astype(np.float64)
    values = values.astype(object)
    has = ~pd.isna(values)
    merged = col.astype(object).to_numpy(copy=True)
    merged[has] = values[has]
    return pd.Series(merged, index=col.index).infer_objects()


@pytest.mark.parametrize(("base", "hit", "taken", "wrapper_nulls"), [
    ([1.5, float("nan"), 3.0], [1], pa.array([7], pa.int64()), False),  # float col, some
    ([1, 2, 3], [0, 2], pa.array([7, 8], pa.int64()), False),  # int col, some: float64
    ([1, 2, 3], [0, 1, 2], pa.array([7, 8, 9], pa.int64()), False),  # every row: int64
    ([1, 2, 3], [0, 1, 2], pa.array([7, 8, 9], pa.int64()), True),  # wrapper nulls: float
    ([float("nan")] * 3, [0, 1, 2], pa.array([7, 8, 9], pa.int32()), False),  # int64
    ([1, 2, 3], [2], pa.array([2**60 + 1], pa.int64()), False),  # rounded as a float
    ([None, [1, 2], None], [0], pa.array([[3]], pa.list_(pa.int64())), False),  # lists
    ([2**63, 1, 2], [0, 1, 2], pa.array([1, 2, 2**64 - 1], pa.uint64()), False),  # unsigned
])
def test_wrapper_values_merge_as_the_object_merge(base, hit, taken, wrapper_nulls) -> None:
    """GIVEN instance rows' column (float, int, list, unsigned) and the values their CPU
    wrappers give a subset (or all) of them WHEN merging
    THEN values and dtype are those of writing the objects over the column and inferring."""
    import numpy as np
    import pandas as pd

    dtype = {int: "int32", float: "float64"}.get(type(base[-1]), object)
    if isinstance(base[0], int) and base[0] >= 2**63:
        dtype = "uint64"
    col = pd.Series(np.array(base, dtype=object).astype(dtype))
    hit = np.asarray(hit, dtype=np.int64)
    got = crossrank._merged_values(col, hit, taken, wrapper_nulls)
    want = _object_merge(col, hit, taken, wrapper_nulls)
    assert got.dtype == want.dtype
    assert repr(got.tolist()) == repr(want.tolist())


def test_fill_members_from_topology_only_where_missing() -> None:
    """GIVEN rows of a known group without members (one with its own rank list), a row of a
    group the topology does not know, a row with members and a row without a group
    WHEN filling members from the topology
    THEN only the known group's rows get the topology's members (flagged as such) and rank
    lists where they had none; the others keep theirs."""
    import numpy as np
    import pandas as pd

    class Topo:
        def group_of(self, rank: int, group: str) -> list[int] | None:
            return [0, 1] if group == "TP" else None

    own = np.asarray([1, 0], dtype=np.int32)
    df = pd.DataFrame({
        schema.RANK: [0, 1, 0, 0, 1],
        schema.GROUP: pd.Series(["TP", "TP", "EP", "TP", None], dtype=object),
        crossrank.MEMBERS: pd.Series([None, None, None, "0,1,2", None], dtype=object),
        schema.PG_RANKS: pd.Series([None, own, None, None, None], dtype=object),
    })
    out = crossrank.fill_members(df, Topo())
    members = out[crossrank.MEMBERS].tolist()
    assert members[:2] == ["0,1", "0,1"] and members[3] == "0,1,2"
    assert pd.isna(members[2]) and pd.isna(members[4])
    assert out[crossrank.FROM_TOPOLOGY].tolist() == [True, True, False, False, False]
    ranks = out[schema.PG_RANKS].tolist()
    assert ranks[0] == [0, 1] and ranks[1] is own
    assert all(r is None or (isinstance(r, float) and np.isnan(r)) for r in ranks[2:])
    assert out[crossrank.MEMBERS].dtype == object
    assert df[crossrank.MEMBERS].isna().sum() == 4  # the input frame is not written


def test_call_site_flag_merges_the_wrappers_value(attributed_builder) -> None:
    """GIVEN instance rows with a call site, none, an empty one, one whose CPU wrapper has
    an empty one, one whose wrapper has one, and one without a logical id
    WHEN selecting instances (and building the comm rows)
    THEN HAS_CALL_SITE says whether the merged call site (the wrapper's where it has one)
    is neither null nor empty, and the comm rows carry the flag last, not the text."""
    from tracekit.measure.run import comm_table

    def wrapper(ts: int, lid: int, site: str) -> dict:
        return _coll(0, ts, 5, logical_id=lid, call_site=site, is_instance=False,
                     kind=Kind.CPU_OP, device=None)

    rows = [
        _coll(0, 0, 10, logical_id=1, call_site="a.py:1"),
        _coll(0, 100, 10, logical_id=2), wrapper(95, 2, "w.py:9"),
        _coll(0, 200, 10, logical_id=3, call_site=""),
        _coll(0, 300, 10, logical_id=4, call_site="x.py:2"), wrapper(295, 4, ""),
        _coll(0, 400, 10, call_site=None),
    ]
    t = attributed_builder(rows)
    df = crossrank.instance_rows(t)
    got = dict(zip(df[schema.TS_NS], df[crossrank.HAS_CALL_SITE], strict=True))
    assert got == {0: True, 100: True, 200: False, 300: False, 400: False}
    assert schema.CALL_SITE not in df.columns
    comm = comm_table(t)
    assert comm.column_names[-1] == crossrank.HAS_CALL_SITE
    assert schema.CALL_SITE not in comm.column_names


def test_comm_rows_own_text_stays_dictionary_encoded(attributed_builder, monkeypatch) -> None:
    """GIVEN instance rows of two ranks with names, groups and phases (one phase missing)
    and a CPU wrapper
    WHEN building the comm rows
    THEN the rows' own text columns (run.OWN_TEXT) are ATTRIBUTED's dictionary codes of the
    instance rows, in the frame's column order, with the same values as the frame's."""
    from tracekit.measure import run
    from tracekit.measure.run import OWN_TEXT, comm_table

    rows = [
        _coll(0, 0, 10, logical_id=1, name="nccl:all_reduce", phase="dispatch"),
        _coll(0, 0, 5, logical_id=1, is_instance=False, kind=Kind.CPU_OP, device=None,
              name="c10d::allreduce_"),
        _coll(1, 100, 10, logical_id=2, name="nccl:all_gather", phase=None),
    ]
    t = attributed_builder(rows)
    df = crossrank.instance_rows(t)
    comm = comm_table(t)
    for c in OWN_TEXT:
        assert pa.types.is_dictionary(comm.schema.field(c).type), c
        assert comm.column(c).to_pylist() == [None if pd.isna(v) else v for v in df[c]], c
    assert comm.column(schema.NAME).to_pylist() == ["nccl:all_reduce", "nccl:all_gather"]
    assert comm.column(schema.PHASE).to_pylist() == ["dispatch", None]
    # the same columns in the same order and values as the frame's strings encoded again
    monkeypatch.setattr(run, "OWN_TEXT", ())
    encoded = comm_table(t)
    assert comm.column_names == encoded.column_names
    assert not pa.types.is_dictionary(encoded.schema.field(schema.NAME).type)
    for c in comm.column_names:
        assert comm.column(c).to_pylist() == encoded.column(c).to_pylist(), c


@pytest.mark.parametrize("values", [
    [["b", None, "a"], ["a", "c", None, "b"]],  # two chunks, dictionaries of their own
    [[None, None], [None]],  # nothing but nulls
    [[]],
])
def test_text_columns_from_codes_equal_the_frames_encoding(values) -> None:
    """GIVEN text as dictionary-encoded chunks (each with its own dictionary, or all null)
    WHEN table_of takes them as given texts instead of converting the frame's column
    THEN the table holds the same dictionary and indices the frame's strings encode to."""
    import pandas as pd

    typ = pa.dictionary(pa.int32(), pa.string())
    chunks = [pc.dictionary_encode(pa.array(v, pa.string())) for v in values]
    column = pa.chunked_array(chunks, type=typ)
    target = pa.schema([pa.field(schema.NAME, typ)])
    flat = [x for v in values for x in v]
    frame = pd.DataFrame({schema.NAME: pd.Series(flat, dtype=object)})
    want = crossrank.table_of(frame, target).column(schema.NAME).combine_chunks()
    got = crossrank.table_of(frame, target, texts={schema.NAME: column}).column(
        schema.NAME).combine_chunks()
    assert got.dictionary.equals(want.dictionary)
    assert got.indices.equals(want.indices)
    assert got.to_pylist() == flat


@pytest.mark.parametrize("wide", [False, True])
def test_first_seen_ids_are_the_groupby_ngroups(wide: bool) -> None:
    """GIVEN four integer key columns with repeats (negative values included; wide: ranges
    whose product passes 2**62) WHEN numbering their distinct rows THEN the ids are
    groupby(sort=False).ngroup()'s: in order of first appearance."""
    rng = np.random.default_rng(3)
    n = 500
    cols = [rng.integers(0, 4, n), rng.integers(-3, 6, n), rng.integers(0, 5, n),
            rng.integers(0, 7, n)]
    if wide:
        cols[1] = cols[1] * 2**40
        cols[3] = cols[3] * 2**30
    keys = pd.DataFrame({str(i): c for i, c in enumerate(cols)})
    want = keys.groupby(list(keys.columns), sort=False).ngroup().to_numpy()
    assert crossrank._first_seen_ids(*cols).tolist() == want.tolist()


@pytest.mark.parametrize("scale", [1, 2**59])
def test_first_valid_pairs_wrappers_and_instances_by_rank_and_logical_id(scale: int) -> None:
    """GIVEN wrapper rows and instance rows keyed by (rank, logical id), the ids close or so
    far apart that rank and id ranges multiply past 2**62, an instance without a logical id
    and one no wrapper shares WHEN pairing them THEN each wrapper's code numbers its pair by
    first appearance and each instance gets its pair's code (-1: no wrapper or no id)."""
    wrappers = pa.table({schema.RANK: pa.array([0, 1, 0, 0], pa.int32()),
                         schema.LOGICAL_ID: pa.array([5 * scale, 5 * scale, 9 * scale,
                                                      5 * scale], pa.int64())})
    inst = pa.table({schema.RANK: pa.array([1, 0, 0, 2, 0], pa.int32()),
                     schema.LOGICAL_ID: pa.array([5 * scale, 9 * scale, None, 5 * scale,
                                                  5 * scale], pa.int64())})
    codes, group = crossrank._first_valid(wrappers, inst)
    assert codes.tolist() == [0, 1, 2, 0]
    assert group.tolist() == [1, 2, -1, -1, 0]


def test_stragglers_sum_waits_per_instance_and_rank_with_missing_waits() -> None:
    """GIVEN matched rows of three instances on three ranks, some waits missing and one
    instance seen on one rank only WHEN totalling the stragglers THEN per rank: its rows
    of instances seen twice or more, how often it came last, the wait it caused (the others'
    known waits, 0 where its own is missing) and its own known wait."""
    n_seen = crossrank.N_SEEN
    matched = pd.DataFrame({
        schema.INSTANCE: [0, 0, 0, 1, 1, 2],
        schema.RANK: np.array([0, 1, 2, 0, 2, 1], dtype=np.int32),
        schema.WAIT_NS: pd.array([5, 0, 7, None, 3, 9], dtype="Int64"),
        crossrank.LAST: [False, True, False, True, False, True],
        n_seen: [3, 3, 3, 2, 2, 1],
    })
    got = {r[schema.RANK]: r for r in crossrank.stragglers(matched).to_pylist()}
    assert {k: (r[schema.COUNT], r[schema.LAST_COUNT], r[schema.CAUSED_WAIT_NS],
                r[schema.WAIT_NS]) for k, r in got.items()} == {
        0: (2, 1, 0, 5), 1: (1, 1, 12, 0), 2: (2, 0, 0, 10)}
    assert got[1][schema.SHARE] == pytest.approx(12 / 15)
