"""The Ascend profiler's own figures vs tracekit's, on the real msinsight exports (issue 13).

Every expectation is read here from the exporting tool's files (step_trace_time.csv,
analysis.db StepTraceTime / CommAnalyzer*, communication.json, communication_matrix.json,
kernel_details.csv, op_statistic.csv, msprof-analyze cluster_analysis_output) with csv /
json / sqlite3 and Decimal, never from tracekit's output (TRACE_FORMATS.md B.4-B.9).

Tests marked ``needs_coverage`` check what the coverage work of issue 13 adds (the
``coverage.ranks-missing`` finding); they skip until tracekit has a COVERAGE table.
"""

from __future__ import annotations

import csv
import json
import re
import sqlite3
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pyarrow.compute as pc
import pytest

from tracekit import api
from tracekit import schema as S
from tracekit.parsers import load_run

RANKS = (0, 1)
OUT = "ASCEND_PROFILER_OUTPUT"
TIME_KEYS = {S.PROF_TRANSIT_NS: "Transit Time(ms)", S.PROF_WAIT_NS: "Wait Time(ms)",
             S.PROF_SYNC_NS: "Synchronization Time(ms)", S.PROF_IDLE_NS: "Idle Time(ms)"}
DB_COLS = {S.PROF_TRANSIT_NS: "transit_time", S.PROF_WAIT_NS: "wait_time",
           S.PROF_SYNC_NS: "synchronization_time", S.PROF_IDLE_NS: "idle_time"}
needs_coverage = pytest.mark.skipif(
    not hasattr(S, "COVERAGE"), reason="needs the coverage work of issue 13 (COVERAGE table)")


def _ns(value: object, unit: int) -> int:
    return int((Decimal(str(value)) * unit).to_integral_value(rounding="ROUND_HALF_EVEN"))


def _ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)


def _step_trace(root: Path, which: str, rank: int) -> dict[str, Decimal]:
    """The rank's one step of step_trace_time.csv (text) or StepTraceTime (db), in us."""
    out = root / which / f"rank{rank}_ascend_pt" / OUT
    if which == "text_level1":
        with (out / "step_trace_time.csv").open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert len(rows) == 1
        return {k: Decimal(v) for k, v in rows[0].items() if k != "Step"}
    with _ro(out / "analysis.db") as con:
        row = con.execute("SELECT computing, communication_not_overlapped, communication,"
                          " free, stage FROM StepTraceTime").fetchall()
    assert len(row) == 1
    keys = ("Computing", "Communication(Not Overlapped)", "Communication", "Free", "Stage")
    return {k: Decimal(repr(v)) for k, v in zip(keys, row[0], strict=True)}


@pytest.fixture(scope="module")
def analyses(ascend_msinsight: Path) -> dict[str, api.Analysis]:
    return {w: api.analyze(ascend_msinsight / w, api.LoadOptions(jobs=1))
            for w in ("text_level1", "db_level1")}


@pytest.mark.parametrize("which", ["text_level1", "db_level1"])
@pytest.mark.parametrize("rank", RANKS)
def test_step_trace_time_against_time_classes(
    ascend_msinsight: Path, analyses: dict[str, api.Analysis], which: str, rank: int
) -> None:
    """step_trace_time (B.8) / StepTraceTime (B.9) per rank vs tracekit's device time classes.

    Tolerances and why: ``Communication`` is the sum of the rank's HCCL op durations, the same
    numbers tracekit reads, so it agrees to the file's float rounding (1 us). Ascend's
    ``Computing`` covers every compute task tracekit classes as compute and also part of the
    tasks tracekit keeps apart as memcpy (157 us of them on text rank 0), so it lies between
    tracekit's compute and compute + memcpy; the extra compute hides at most that much more
    communication, which bounds the gap of ``Communication(Not Overlapped)`` to tracekit's
    exposed time, and of ``Free`` (Stage - Computing - Not Overlapped) to the step's
    Stage - compute - exposed.
    """
    # GIVEN the tool's figures for the rank's one step (us)
    f = _step_trace(ascend_msinsight, which, rank)
    # WHEN tracekit's per-device totals are taken (time_classes row without a stream)
    tc = analyses[which].tables["time_classes"].to_pandas()
    row = tc[(tc[S.RANK] == rank) & tc[S.TID].isna()]
    assert len(row) == 1
    t = {k: Decimal(int(row[k].iloc[0])) / 1000 for k in (
        S.COMM_NS, S.COMPUTE_NS, S.MEMCPY_NS, S.EXPOSED_NS)}
    extra = f["Computing"] - t[S.COMPUTE_NS]
    # THEN the figures agree within the stated bounds
    assert abs(f["Communication"] - t[S.COMM_NS]) <= 1
    assert t[S.COMPUTE_NS] <= f["Computing"] <= t[S.COMPUTE_NS] + t[S.MEMCPY_NS]
    assert 0 <= t[S.EXPOSED_NS] - f["Communication(Not Overlapped)"] <= extra
    free = f["Stage"] - t[S.COMPUTE_NS] - t[S.EXPOSED_NS]
    assert 0 <= free - f["Free"] <= extra


@pytest.mark.parametrize("rank", RANKS)
def test_kernel_details_and_op_statistic_counts(ascend_msinsight: Path, rank: int) -> None:
    """B.8: kernel_details.csv lists every device kernel of the step (HCCL ops as
    Accelerator Core HCCL); op_statistic.csv counts the non-HCCL ones per OP Type."""
    out = ascend_msinsight / "text_level1" / f"rank{rank}_ascend_pt" / OUT
    # GIVEN the raw rows
    with (out / "kernel_details.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    with (out / "op_statistic.csv").open(newline="") as fh:
        stat_total = sum(int(r["Count"]) for r in csv.DictReader(fh))
    want_compute = Counter(r["Name"] for r in rows if r["Accelerator Core"] != "HCCL")
    want_hccl = Counter(r["Name"] for r in rows if r["Accelerator Core"] == "HCCL")
    # WHEN loaded (from trace_view.json, the richest text source)
    run = load_run(ascend_msinsight / "text_level1", api.LoadOptions())
    ev = run.events.filter(pc.and_(pc.equal(run.events[S.RANK], rank),
                                   pc.equal(run.events[S.KIND], S.Kind.KERNEL)))
    is_op = pc.is_valid(ev[S.OP])
    # THEN the kernel rows are the CSV's, name for name, and op_statistic's total
    assert Counter(pc.filter(ev[S.NAME], pc.invert(is_op)).to_pylist()) == want_compute
    assert Counter(pc.filter(ev[S.NAME], is_op).to_pylist()) == want_hccl
    assert sum(want_compute.values()) == stat_total


def _comm_json(path: Path) -> dict[str, dict[str, object]]:
    doc = json.loads(path.read_text(), parse_float=Decimal)
    return {k.split("@")[0]: v["Communication Time Info"] for step in doc.values()
            for kind in step.values() for k, v in kind.items() if k != "Total Op Info"}


def _totals(path: Path) -> dict[str, Decimal]:
    """Sum of the "Total Op Info" entries (one per kind) of communication.json, in ms."""
    doc = json.loads(path.read_text(), parse_float=Decimal)
    out: dict[str, Decimal] = Counter()  # type: ignore[assignment]
    for step in doc.values():
        for kind in step.values():
            for key, value in kind.get("Total Op Info", {}).get(
                    "Communication Time Info", {}).items():
                if key.endswith("(ms)"):
                    out[key] += value
    return out


@pytest.mark.parametrize("where", ["text_level1/rank0_ascend_pt", "text_level1/rank1_ascend_pt",
                                   "test_rank_0", "test_rank_1"])
def test_profiler_times_per_op_and_totals_from_communication_json(
    ascend_msinsight: Path, where: str
) -> None:
    """B.5: each op's Elapse / Transit / Wait / Synchronization / Idle, exactly (ns from the
    JSON literal), on its EVENTS row; and the per-kind "Total Op Info" sums match the rows'
    sums to the JSON's float rounding (1 ns per op)."""
    rdir = ascend_msinsight / where
    path = rdir / OUT / "communication.json"
    # GIVEN the tool's per-op and total figures
    info = _comm_json(path)
    totals = _totals(path)
    # WHEN the rank directory is loaded
    ev = load_run(rdir, api.LoadOptions()).events
    ops = ev.filter(pc.is_valid(ev[S.OP])).to_pylist()
    # THEN every op carries its own figures
    assert sorted(o[S.NAME] for o in ops) == sorted(info)
    for o in ops:
        t = info[o[S.NAME]]
        assert o[S.DUR_NS] == _ns(t["Elapse Time(ms)"], 10**6)
        for col, key in TIME_KEYS.items():
            assert o[col] == _ns(t[key], 10**6), (o[S.NAME], col)
    # and the totals are the sums of the rows
    n = len(ops)
    assert abs(sum(o[S.DUR_NS] for o in ops) - _ns(totals["Elapse Time(ms)"], 10**6)) <= n
    for col, key in TIME_KEYS.items():
        assert abs(sum(o[col] for o in ops) - _ns(totals[key], 10**6)) <= n, key


@pytest.mark.parametrize("rank", RANKS)
def test_profiler_times_per_op_from_analysis_db(ascend_msinsight: Path, rank: int) -> None:
    """B.9: the db export's per-op times are in analysis.db CommAnalyzerTime (ms, REAL)."""
    out = ascend_msinsight / "db_level1" / f"rank{rank}_ascend_pt" / OUT
    with _ro(out / "analysis.db") as con:
        con.row_factory = sqlite3.Row
        want = {r["hccl_op_name"]: dict(r) for r in con.execute("SELECT * FROM CommAnalyzerTime")}
    run = load_run(out.parent, api.LoadOptions())
    ops = run.events.filter(pc.is_valid(run.events[S.OP])).to_pylist()
    assert sorted(o[S.NAME] for o in ops) == sorted(want)
    for o in ops:
        for col, key in DB_COLS.items():
            assert o[col] == _ns(repr(want[o[S.NAME]][key]), 10**6), (o[S.NAME], col)


def _matrix_links(ascend_msinsight: Path, which: str, rank: int) -> list[tuple[str, int, int]]:
    """(group hash, src, dst) of every link the rank's matrix lists (B.6 / B.9)."""
    out = ascend_msinsight / which / f"rank{rank}_ascend_pt" / OUT
    if which == "text_level1":
        doc = json.loads((out / "communication_matrix.json").read_text())
        return [(key.split("@")[1], int(link.split("-")[0]), int(link.split("-")[1]))
                for step in doc.values() for kind in step.values()
                for key, links in kind.items() for link in links]
    with _ro(out / "analysis.db") as con:
        return [(g, int(s), int(d)) for g, s, d in con.execute(
            "SELECT group_name, src_rank, dst_rank FROM CommAnalyzerMatrix")]


@pytest.mark.parametrize("which", ["text_level1", "db_level1"])
def test_communicator_size_comes_from_the_matrix(ascend_msinsight: Path, which: str) -> None:
    """B.6: the matrix links group-local ranks; each exported rank links to every local rank
    0..7 of its one communicator over HCCS, so the communicator has 8 members although only
    2 ranks were exported. Which global ranks they are, nothing says."""
    # GIVEN the links of both ranks' matrices
    links = {r: _matrix_links(ascend_msinsight, which, r) for r in RANKS}
    groups = {g for r in RANKS for g, _, _ in links[r]}
    assert len(groups) == 1
    size = 1 + max(max(s, d) for r in RANKS for _, s, d in links[r])
    assert size == 8
    own = {r: {s for _, s, _ in links[r]} for r in RANKS}  # a rank's src: its local rank
    # WHEN loaded
    run = load_run(ascend_msinsight / which, api.LoadOptions())
    ops = run.events.filter(pc.is_valid(run.events[S.OP]))
    # THEN every op has the communicator's real size and no guessed members
    assert set(ops[S.GROUP_SIZE].to_pylist()) == {size}
    assert set(map(str, ops[S.PG_RANKS].to_pylist())) == {"None"}
    pg = run.process_groups.to_pylist()
    assert [(p[S.RANK], p[S.GROUP_SIZE], p[S.PG_RANKS]) for p in pg] == [
        (r, size, None) for r in RANKS]
    assert {p[S.RANK]: {p[S.GROUP_RANK]} for p in pg} == own


def test_members_come_from_cluster_analysis_output(ascend_msinsight: Path) -> None:
    """B.4: msprof-analyze's cluster_communication.json keys each communicator's ops by its
    rank set; the 2023 ranks' group 483 is "(0, 1, ..., 7)". Groups no file describes keep an
    unknown size (their 2023 matrices link over RDMA, or only to themselves)."""
    # GIVEN the rank sets the cluster file gives per group hash
    doc = json.loads((ascend_msinsight / "cluster_analysis_output/cluster_communication.json")
                     .read_text())
    members = {op.split("@")[1]: sorted(int(x) for x in re.findall(r"\d+", key))
               for key, steps in doc.items() if key.startswith("(")
               for ops in steps.values() for op in ops if "@" in op}
    assert members == {"9350434047717501483": list(range(8))}
    # WHEN both 2023 ranks are loaded from the folder that holds them (and the cluster output)
    run = load_run(ascend_msinsight, api.LoadOptions())
    assert run.ranks == [0, 1]
    ops = run.events.filter(pc.is_valid(run.events[S.OP])).to_pandas()
    # THEN the described group has its members and size; the others stay unknown
    known = ops[ops[S.PG_NAME].astype(str).isin(members)]
    assert len(known) > 0
    assert {tuple(x) for x in known[S.PG_RANKS]} == {tuple(range(8))}
    assert set(known[S.GROUP_SIZE]) == {8}
    rest = ops[~ops[S.PG_NAME].astype(str).isin(members)]
    assert rest[S.GROUP_SIZE].isna().all()
    pg = run.process_groups.to_pandas()
    row = pg[pg[S.PG_NAME].astype(str).isin(members)]
    assert sorted(zip(row[S.RANK], row[S.GROUP_RANK], strict=True)) == [(0, 0), (1, 1)]


def test_2023_ranks_match_only_the_same_collective(ascend_msinsight: Path) -> None:
    """B.4: ranks 0 and 1 share communicators 483 (TP) and 822; each has its own DP-like
    groups (459, 693 on rank 0; 303, 016 on rank 1). Only ops of a shared communicator with
    the same name pair up across the two ranks."""
    # GIVEN the op names per rank from communication.json
    names = {r: set(_comm_json(ascend_msinsight / f"test_rank_{r}" / OUT / "communication.json"))
             for r in RANKS}
    shared = names[0] & names[1]
    # WHEN both ranks are analysed
    run = load_run(ascend_msinsight, api.LoadOptions())
    m = api.analyze_run(run).measured.to_pandas()
    per = m.groupby(S.INSTANCE).agg(ranks=(S.RANK, "nunique"), names=(S.NAME, "nunique"),
                                    name=(S.NAME, "first"))
    # THEN every instance is one op name; shared names are on both ranks, the rest alone
    assert (per["names"] == 1).all()
    assert set(per.loc[per["ranks"] == 2, "name"]) == shared
    assert set(per.loc[per["ranks"] == 1, "name"]) == (names[0] | names[1]) - shared


@needs_coverage
@pytest.mark.parametrize("where", ["text_level1", "db_level1", "test_rank_0"])
def test_missing_ranks_are_reported(ascend_msinsight: Path, where: str) -> None:
    """The communicators have 8 members (matrix / cluster output); 2 (or 1) were exported."""
    a = api.analyze(ascend_msinsight / where, api.LoadOptions(jobs=1))
    assert a.findings_table is not None
    assert "coverage.ranks-missing" in set(a.findings_table[S.RULE_ID].to_pylist())


@pytest.mark.parametrize("which", ["text_level1", "db_level1"])
def test_no_efficiency_above_the_bound(ascend_msinsight: Path, which: str) -> None:
    """The issue: with the bound computed for 2 ranks, half the all-reduces had efficiency
    2.2. With the communicator's real size (8, from the matrix) on the 910B profile, every
    collective has a bound and none is faster than it."""
    a = api.analyze(ascend_msinsight / which, api.LoadOptions(jobs=1),
                    api.AnalyzeOptions(hardware="ascend-910b"))
    m = a.measured
    assert m is not None and m.num_rows == 8
    assert set(m[S.N_RANKS].to_pylist()) == {8}
    eff = pd.Series(m[S.EFFICIENCY].to_pylist(), dtype="float64")
    assert eff.notna().all()
    assert (eff <= 1.0).all()
