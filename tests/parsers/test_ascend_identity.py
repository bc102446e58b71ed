"""Ascend communicator identity, Level0 exports and read-only opening (issue 13, items 1, 2, 5, 7).

Fixtures come from tests/fixtures/make_ascend.py (TRACE_FORMATS.md Part B); each test names
the format facts it rests on. Level0 facts were read off the real Level0 exports of
Ascend/msinsight (test/data/pytorch/{text,db}/level0 at 4e16fca1, not in the reference set):
no communication.json / communication_matrix.json, no parallel_group_info, and an analysis.db
holding only StepTraceTime.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import fixtures.make_ascend as mk  # tests/ is on pytest's pythonpath (pyproject)
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracekit import api
from tracekit import schema as S
from tracekit.parsers import ascend, load_run

OP_RE = re.compile(r"^(hcom_[A-Za-z]+_)(?:AicpuKernel)?_(\d+)_(\d+)(?:_(\d+))?$")


def _ops(run: api.Run) -> pa.Table:
    ev = run.events
    return ev.filter(pc.is_valid(ev[S.OP])).sort_by([(S.RANK, "ascending"),
                                                     (S.TS_NS, "ascending")])


def _keys(ops: pa.Table) -> list[tuple[object, object, object]]:
    return list(zip(ops[S.PG_NAME].to_pylist(), ops[S.OP].to_pylist(), ops[S.SEQ].to_pylist(),
                    strict=True))


def test_level0_db_export_loads(tmp_path: Path) -> None:
    """B.9 COMMUNICATION_OP (raw group name), Level0 analysis.db = StepTraceTime only."""
    # GIVEN a 2-rank Level0 db export (analysis.db without CommAnalyzer* tables)
    truth = mk.write_export(tmp_path, world=2, export="db", level=0)
    with sqlite3.connect(truth.rank_dirs[0] / "ASCEND_PROFILER_OUTPUT" / "analysis.db") as c:
        assert {r[0] for r in c.execute("SELECT name FROM sqlite_master")} == {"StepTraceTime"}
    # WHEN loaded
    run = load_run(tmp_path, api.LoadOptions())
    ops = _ops(run)
    want = sorted(truth.ops, key=lambda o: (o.rank, o.ts_ns))
    # THEN every op is there, exact, on its raw communicator name
    assert ops[S.NAME].to_pylist() == [o.name for o in want]
    assert ops[S.TS_NS].to_pylist() == [o.ts_ns for o in want]
    assert ops[S.DUR_NS].to_pylist() == [o.dur_ns for o in want]
    assert ops[S.PG_NAME].to_pylist() == [o.comm_name for o in want]
    # and what only Level1 files tell stays unknown rather than invented
    assert set(ops[S.GROUP_SIZE].to_pylist()) == {None}
    assert set(ops[S.PROF_TRANSIT_NS].to_pylist()) == {None}
    assert run.extra[ascend.EXTRA_OPS].num_rows == 0


def test_real_db_level1_loads_the_same_with_a_level0_analysis_db(
    tmp_path: Path, ascend_msinsight: Path
) -> None:
    """The real db_level1 export, its analysis.db replaced by a Level0 one: the op rows come
    from ascend_pytorch_profiler_*.db alone, so EVENTS is the same but for the columns only
    analysis.db gives (the profiler's per-op times, the size its matrix proves)."""
    # GIVEN the real export and a copy whose analysis.db holds only StepTraceTime
    src = ascend_msinsight / "db_level1"
    copy = tmp_path / "db_level0_shaped"
    shutil.copytree(src, copy)
    for db in copy.glob("*/ASCEND_PROFILER_OUTPUT/analysis.db"):
        db.unlink()
        mk.write_step_trace_only_analysis_db(db)
    # WHEN both are loaded
    full = load_run(src, api.LoadOptions()).events
    lean = load_run(copy, api.LoadOptions()).events
    # THEN everything but the analysis.db columns (and the file paths) is identical
    only_analysis = {S.PROF_TRANSIT_NS, S.PROF_WAIT_NS, S.PROF_SYNC_NS, S.PROF_IDLE_NS,
                     S.GROUP_SIZE, S.SOURCE}
    for name in full.column_names:
        if name not in only_analysis:
            assert full[name].equals(lean[name]), name
    is_op = pc.is_valid(full[S.OP])
    assert pc.sum(is_op).as_py() == 8
    assert set(pc.filter(lean[S.GROUP_SIZE], is_op).to_pylist()) == {None}
    assert set(pc.filter(full[S.GROUP_SIZE], is_op).to_pylist()) == {8}


def test_text_level0_ops_match_across_ranks_by_name_and_communicator(tmp_path: Path) -> None:
    """B.4: the op name carries the last 3 digits of the group hash and the op's index in its
    group; a Level0 text export has nothing more (no communication.json, no
    parallel_group_info). tp and moe_ep have the same members but their own tails."""
    # GIVEN a 2-rank Level0 text export
    truth = mk.write_export(tmp_path, world=2, moe="deepep_normal", export="text", level=0)
    # WHEN loaded
    run = load_run(tmp_path, api.LoadOptions())
    ops = _ops(run)
    names = ops[S.NAME].to_pylist()
    # THEN the communicator identity is the name's hash tail, seq its index in the group
    parts = [OP_RE.match(n) for n in names]
    assert ops[S.PG_NAME].to_pylist() == [f"*{m.group(2)}" for m in parts]  # type: ignore[union-attr]
    assert ops[S.SEQ].to_pylist() == [int(m.group(3)) for m in parts]  # type: ignore[union-attr]
    # the same op name gives the same (pg_name, op, seq) on both ranks, and no key is shared
    # by two different op names (other communicator or other kind)
    by_key: dict[tuple[object, object, object], set[str]] = {}
    for key, name in zip(_keys(ops), names, strict=True):
        by_key.setdefault(key, set()).add(name)
    assert all(len(v) == 1 for v in by_key.values())
    assert Counter(_keys(ops)) == Counter({k: 2 for k in by_key})
    assert len(by_key) == len({o.name for o in truth.ops})
    # and the cross-rank matching pairs each collective on both ranks, nothing else (the
    # fixture's MoE kernels are instances too: only the HCCL ops are looked at here)
    measured = api.analyze_run(run).measured
    measured = measured.filter(pc.is_in(measured[S.NAME].cast(pa.string()),
                                        value_set=pa.array(names)))
    inst = measured.group_by(S.INSTANCE).aggregate([(S.RANK, "count_distinct"),
                                                    (S.NAME, "count_distinct")])
    assert inst.num_rows == len(by_key)
    assert set(inst[f"{S.RANK}_count_distinct"].to_pylist()) == {2}
    assert set(inst[f"{S.NAME}_count_distinct"].to_pylist()) == {1}


def test_lone_rank_from_kernel_details_never_waits(
    tmp_path: Path, ascend_msinsight: Path
) -> None:
    """B.8 / B.4: the 2023 test_rank_0 reduced to kernel_details.csv (its HCCL rows name ops
    of several communicators with the same trailing index: hcom_broadcast__483_0 and, in
    communication.json, hcom_allReduce__459_0 / hcom_reduceScatter__693_0). One rank alone
    has nobody to wait for."""
    # GIVEN the rank directory with kernel_details.csv only
    out = tmp_path / "test_rank_0" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    shutil.copy(ascend_msinsight / "test_rank_0/ASCEND_PROFILER_OUTPUT/kernel_details.csv", out)
    shutil.copy(ascend_msinsight / "test_rank_0/profiler_info_0.json", out.parent)
    # WHEN loaded and analysed
    run = load_run(out.parent, api.LoadOptions())
    ops = _ops(run)
    # THEN each named HCCL row is an op with its own (pg_name, op, seq)
    names = [n for n in ops[S.NAME].to_pylist()]
    assert names and all(OP_RE.match(n) for n in names)
    assert len(set(_keys(ops))) == len(names)
    # and no wait is made up
    measured = api.analyze_run(run).measured
    assert pc.sum(measured[S.WAIT_NS]).as_py() in (0, None)


def test_lone_2023_rank_ops_of_other_communicators_never_share_an_instance(
    ascend_msinsight: Path
) -> None:
    """B.4 / B.5: in test_rank_0, ops with index 0 exist in four communicators (483, 459,
    693, 822) and of several kinds; each is its own collective."""
    # GIVEN the real rank WHEN analysed
    run = load_run(ascend_msinsight / "test_rank_0", api.LoadOptions())
    ops = _ops(run)
    zero = [n for n in ops[S.NAME].to_pylist() if OP_RE.match(n).group(3) == "0"]  # type: ignore[union-attr]
    assert len({OP_RE.match(n).group(2) for n in zero}) == 4  # type: ignore[union-attr]
    measured = api.analyze_run(run).measured
    # THEN one instance per op, and no wait made up by matching: the only wait is the one the
    # Ascend profiler itself recorded per op (communication.json "Wait Time(ms)")
    assert measured.num_rows == ops.num_rows
    assert len(set(measured[S.INSTANCE].to_pylist())) == ops.num_rows
    comm = json.loads((ascend_msinsight / "test_rank_0" / "ASCEND_PROFILER_OUTPUT"
                       / "communication.json").read_text())
    infos = [op["Communication Time Info"] for step in comm.values() for kind in step.values()
             for name, op in kind.items() if name != "Total Op Info"]
    want_ns = sum(i["Wait Time(ms)"] for i in infos) * 1e6
    assert abs(pc.sum(measured[S.WAIT_NS]).as_py() - want_ns) <= len(infos)
    assert set(measured[S.TIME_SOURCE].to_pylist()) <= {"profiler"}


def test_seq_widens_only_where_a_communicator_spans_iterations(tmp_path: Path) -> None:
    """B.4: names end in ``_<index>_<iteration>``; an index that restarts in a later
    iteration must not repeat a (pg_name, op, seq) key."""
    from tracekit.parsers.ascend.hccl import split_op_names
    from tracekit.parsers.ascend.ops import sequence_numbers

    # GIVEN one communicator seen in two iterations and one in a single iteration
    names = pa.array(["hcom_allReduce__586_0_1", "hcom_allReduce__586_0_2",
                      "hcom_allGather__123_4_1"])
    ident = pa.array(["*586", "*586", "*123"])
    # WHEN numbered
    seq = sequence_numbers(split_op_names(names), ident).to_pylist()
    # THEN the two-iteration one is iteration x 2^32 + index, the other keeps the index
    assert seq == [(1 << 32) + 0, (2 << 32) + 0, 4]


def _listing(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_databases_are_opened_immutable(tmp_path: Path, ascend_msinsight: Path) -> None:
    """SQLite in WAL mode writes -shm / -wal beside a database opened only ``mode=ro``;
    ``immutable=1`` writes nothing. The copy is put in WAL mode so that a plain read-only
    open would leave files behind."""
    # GIVEN a copy of db_level1 rank 0 in WAL journal mode, then made read-only
    rdir = tmp_path / "rank0_ascend_pt"
    shutil.copytree(ascend_msinsight / "db_level1/rank0_ascend_pt", rdir)
    for db in rdir.glob("ASCEND_PROFILER_OUTPUT/*.db"):
        with sqlite3.connect(db) as con:
            assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
        con.close()
    for p in [*rdir.rglob("*"), rdir]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    before = _listing(rdir)
    # WHEN it is loaded
    try:
        run = load_run(rdir, api.LoadOptions())
        after = _listing(rdir)
    finally:
        for p in [rdir, *rdir.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
    # THEN it loaded, and nothing was written or left beside the export
    assert pc.sum(pc.is_valid(run.events[S.OP])).as_py() == 4
    assert after == before
    assert not [p for p in rdir.rglob("*") if p.name.endswith(("-shm", "-wal", "-journal"))]


@pytest.mark.parametrize("level", [0, 1])
def test_fixture_levels_keep_comms_id_and_seq_equal_across_ranks(tmp_path: Path,
                                                                  level: int) -> None:
    """B.4: one collective has one (pg_name, op, seq) and one comms_id on every rank, whether
    the communicator is known by its full hash (Level1) or only its tail (Level0)."""
    mk.write_export(tmp_path, world=2, moe="mc2", export="text", level=level)
    ops = _ops(load_run(tmp_path, api.LoadOptions()))
    rows = ops.select([S.RANK, S.NAME, S.PG_NAME, S.SEQ, S.COMMS_ID]).to_pylist()
    per_name: dict[str, set[tuple[object, ...]]] = {}
    for r in rows:
        per_name.setdefault(r[S.NAME], set()).add((r[S.PG_NAME], r[S.SEQ], r[S.COMMS_ID]))
    assert all(len(v) == 1 for v in per_name.values())
    assert all(next(iter(v))[2] is not None for v in per_name.values())
