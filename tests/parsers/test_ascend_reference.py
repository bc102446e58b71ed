"""Ascend parser on the real msinsight exports (../shared/reference_traces/ascend/msinsight).

Every expectation is computed here from the raw files with json / csv / sqlite3 and Decimal,
independently of tracekit's readers (TRACE_FORMATS.md B.4-B.9).
"""

from __future__ import annotations

import csv
import json
import re
import sqlite3
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracekit import api
from tracekit import schema as S
from tracekit.parsers import ascend, load_run
from tracekit.parsers.ascend.hccl import double_hash
from tracekit.parsers.ascend.meta import read_rank_meta
from tracekit.parsers.ascend.ops import comm_columns

OP_RE = re.compile(r"^(hcom_[A-Za-z]+_)(?:AicpuKernel)?_(\d+)_(\d+)(?:_(\d+))?$")
DB_COMM = "90.91.105.46%enp189s0f0_60000_0_1736410538306028"


def _ns(text: str, unit: int) -> int:
    return int((Decimal(text) * unit).to_integral_value(rounding="ROUND_HALF_EVEN"))


def _ops(run: api.Run, rank: int) -> pa.Table:
    ev = run.events
    return ev.filter(pc.and_(pc.is_valid(ev[S.OP]), pc.equal(ev[S.RANK], rank)))


def _raw_trace_view_ops(path: Path) -> list[dict]:
    """HCCL big ops of a trace_view.json: X events of the process named HCCL whose name is an
    hcom op (B.7), with the ts / dur JSON text kept exact."""
    events = json.loads(path.read_text(), parse_float=str)
    hccl = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
            and e["args"]["name"] == "HCCL"}
    return [e for e in events if e.get("ph") == "X" and e["pid"] in hccl
            and OP_RE.match(e["name"])]


@pytest.fixture(scope="module")
def text_run(ascend_msinsight: Path) -> api.Run:
    return load_run(ascend_msinsight / "text_level1", api.LoadOptions())


@pytest.fixture(scope="module")
def db_run(ascend_msinsight: Path) -> api.Run:
    return load_run(ascend_msinsight / "db_level1", api.LoadOptions())


def test_double_hash_reproduces_the_reference_group(ascend_msinsight: Path) -> None:
    """B.4: the group after '@' / analysis.db group_name is double_hash(comm name)."""
    # GIVEN the db export's raw communicator name and its analysis.db group name
    db = ascend_msinsight / "db_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/analysis.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        groups = {r[0] for r in con.execute("SELECT group_name FROM CommAnalyzerTime")}
    # WHEN hashed THEN it is the documented value and the one analysis.db uses
    assert double_hash(DB_COMM) == 17148521525495523210
    assert groups == {str(double_hash(DB_COMM))}


@pytest.mark.parametrize("rank", [0, 1])
def test_text_export_op_counts_and_time_match_trace_view(
    ascend_msinsight: Path, text_run: api.Run, rank: int
) -> None:
    """B.7: one hcom_* X event per collective in the HCCL process; ts text has ns precision."""
    # GIVEN the raw HCCL ops of the rank's trace_view.json
    raw = _raw_trace_view_ops(ascend_msinsight / f"text_level1/rank{rank}_ascend_pt/"
                              "ASCEND_PROFILER_OUTPUT/trace_view.json")
    want_types = Counter(OP_RE.match(e["name"]).group(1) for e in raw)  # type: ignore[union-attr]
    want_total = sum(_ns(e["dur"], 1000) for e in raw)
    want_ts = sorted(_ns(e["ts"], 1000) for e in raw)
    # WHEN loaded
    ops = _ops(text_run, rank)
    # THEN op counts per type, exact start times and the total time are the raw ones
    assert Counter(ops[S.COLL_NAME].to_pylist()) == want_types
    assert sorted(ops[S.TS_NS].to_pylist()) == want_ts
    assert pc.sum(ops[S.DUR_NS]).as_py() == want_total
    assert set(ops[S.OP].to_pylist()) == {S.Op.ALL_REDUCE}
    # and bytes = count x dtype size (FP32 = 4 B)
    counts = {e["name"]: int(e["args"]["count"]) for e in raw}
    got = dict(zip(ops[S.NAME].to_pylist(), ops[S.IN_BYTES].to_pylist(), strict=True))
    assert got == {n: 4 * c for n, c in counts.items()}


@pytest.mark.parametrize("rank", [0, 1])
def test_text_export_sources_agree(ascend_msinsight: Path, text_run: api.Run, rank: int) -> None:
    """B.5 / B.8: communication.json Elapse and kernel_details.csv HCCL rows describe the same
    ops as trace_view, to their rounding (kernel_details keeps 3 decimals of a us)."""
    out = ascend_msinsight / f"text_level1/rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT"
    # GIVEN the raw communication.json and kernel_details.csv HCCL entries
    doc = json.loads((out / "communication.json").read_text(), parse_float=str)
    elapse = {k.split("@")[0]: _ns(v["Communication Time Info"]["Elapse Time(ms)"], 10**6)
              for step in doc.values() for kind in step.values() for k, v in kind.items()
              if k != "Total Op Info"}
    with (out / "kernel_details.csv").open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["Accelerator Core"] == "HCCL"]
    csv_dur = {r["Name"]: _ns(r["Duration(us)"], 1000) for r in rows}
    csv_ts = {r["Name"]: _ns(r["Start Time(us)"].strip(), 1000) for r in rows}
    # WHEN compared with the loaded op rows
    ops = _ops(text_run, rank)
    dur = dict(zip(ops[S.NAME].to_pylist(), ops[S.DUR_NS].to_pylist(), strict=True))
    ts = dict(zip(ops[S.NAME].to_pylist(), ops[S.TS_NS].to_pylist(), strict=True))
    # THEN every source has the same ops and the same times within 1 ns per op
    assert set(elapse) == set(dur) == set(csv_dur)
    assert all(abs(elapse[n] - dur[n]) <= 1 for n in dur)
    assert all(abs(csv_dur[n] - dur[n]) <= 1 for n in dur)
    assert all(abs(csv_ts[n] - ts[n]) <= 1 for n in ts)


@pytest.mark.parametrize("rank", [0, 1])
def test_db_export_matches_communication_op_and_analysis_db(
    ascend_msinsight: Path, db_run: api.Run, rank: int
) -> None:
    """B.9: COMMUNICATION_OP has integer ns and string ids; analysis.db the same ops in ms."""
    out = ascend_msinsight / f"db_level1/rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT"
    # GIVEN the raw tables
    with sqlite3.connect(f"file:{out}/ascend_pytorch_profiler_{rank}.db?mode=ro", uri=True) as c:
        raw = c.execute(
            "SELECT s.value, t.value, o.startNs, o.endNs, g.value FROM COMMUNICATION_OP o"
            " JOIN STRING_IDS s ON s.id = o.opName JOIN STRING_IDS t ON t.id = o.opType"
            " JOIN STRING_IDS g ON g.id = o.groupName").fetchall()
    with sqlite3.connect(f"file:{out}/analysis.db?mode=ro", uri=True) as c:
        analysis = dict(c.execute("SELECT hccl_op_name, elapse_time FROM CommAnalyzerTime"))
    # WHEN loaded
    ops = _ops(db_run, rank)
    # THEN counts per type, start times and total time are the table's, exactly
    assert Counter(ops[S.COLL_NAME].to_pylist()) == Counter(r[1] for r in raw)
    assert sorted(ops[S.TS_NS].to_pylist()) == sorted(r[2] for r in raw)
    assert pc.sum(ops[S.DUR_NS]).as_py() == sum(r[3] - r[2] for r in raw)
    # the group is the raw communicator name (B.9), its hash the analysis.db one (B.4)
    assert set(ops[S.PG_NAME].to_pylist()) == {r[4] for r in raw} == {DB_COMM}
    # and analysis.db Elapse agrees to its rounding (ms as a double: 1 ns)
    dur = dict(zip(ops[S.NAME].to_pylist(), ops[S.DUR_NS].to_pylist(), strict=True))
    assert all(abs(_ns(repr(analysis[n]), 10**6) - dur[n]) <= 1 for n in dur)


def test_text_and_db_exports_agree_on_communication(text_run: api.Run, db_run: api.Run) -> None:
    """The text and db folders are two captures of one program (different communicators and
    clocks, README): the same collectives, element counts, dtypes and bytes per rank, and each
    export's own sources agree on time (tests above)."""
    for rank in (0, 1):
        # GIVEN both exports WHEN the op rows are put in issue order
        t = _ops(text_run, rank).sort_by(S.TS_NS)
        d = _ops(db_run, rank).sort_by(S.TS_NS)
        # THEN the collectives match one to one
        for col in (S.OP, S.COLL_NAME, S.DTYPE, S.IN_NELEMS, S.IN_BYTES, S.OUT_BYTES):
            assert t[col].to_pylist() == d[col].to_pylist(), col
        # op index and iteration fields of the names match; only the group hash differs (B.4)
        strip = [re.sub(r"__\d+_", "__X_", n) for n in t[S.NAME].to_pylist()]
        assert strip == [re.sub(r"__\d+_", "__X_", n) for n in d[S.NAME].to_pylist()]


def test_transit_and_wait_join_the_op_rows(text_run: api.Run, ascend_msinsight: Path) -> None:
    """B.5: Transit / Wait per op are joined to EVENTS by (rank, event_id)."""
    # GIVEN the rank-0 communication.json Transit / Wait (ms)
    doc = json.loads((ascend_msinsight / "text_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/"
                      "communication.json").read_text(), parse_float=str)
    info = {k.split("@")[0]: v["Communication Time Info"]
            for k, v in doc["step50"]["collective"].items() if k != "Total Op Info"}
    # WHEN the extra table is joined to EVENTS
    extra = text_run.extra[ascend.EXTRA_OPS].filter(pc.equal(text_run.extra[ascend.EXTRA_OPS][
        S.RANK], 0))
    ev = text_run.events.filter(pc.equal(text_run.events[S.RANK], 0))
    names = ev[S.NAME].to_pylist()
    # THEN each row points at the HCCL op of the same name and keeps its exact ns
    for row in extra.to_pylist():
        assert names[row[S.EVENT_ID]] == row[S.NAME]
        assert row[S.TRANSFER_NS] == _ns(info[row[S.NAME]]["Transit Time(ms)"], 10**6)
        assert row[S.WAIT_NS] == _ns(info[row[S.NAME]]["Wait Time(ms)"], 10**6)


@pytest.mark.parametrize("rank", [0, 1])
def test_2023_layout_ops_come_from_communication_json(ascend_msinsight: Path, rank: int) -> None:
    """B.4 / B.5 / B.8: test_rank_N/ASCEND_PROFILER_OUTPUT without trace_view; 2023 two-field
    op names; communication.json lists every op (the CSV sample only some)."""
    out = ascend_msinsight / f"test_rank_{rank}" / "ASCEND_PROFILER_OUTPUT"
    # GIVEN the raw communication.json ops and kernel_details compute rows
    doc = json.loads((out / "communication.json").read_text(), parse_float=str)
    entries = {k: v for step in doc.values() for kind in step.values()
               for k, v in kind.items() if k != "Total Op Info"}
    want_types = Counter(OP_RE.match(k.split("@")[0]).group(1)  # type: ignore[union-attr]
                         for k in entries)
    want_total = sum(_ns(v["Communication Time Info"]["Elapse Time(ms)"], 10**6)
                     for v in entries.values())
    with (out / "kernel_details.csv").open(newline="") as fh:
        compute = [r for r in csv.reader(fh)][1:]
    n_compute = sum(1 for r in compute if r[6] != "HCCL")
    # WHEN the rank directory is loaded
    run = load_run(out.parent, api.LoadOptions())
    ops = _ops(run, rank)
    # THEN op counts per type and total communication time are the raw ones
    assert run.ranks == [rank]
    assert Counter(ops[S.COLL_NAME].to_pylist()) == want_types
    assert pc.sum(ops[S.DUR_NS]).as_py() == want_total
    kernels = run.events.filter(pc.equal(run.events[S.KIND], S.Kind.KERNEL))
    assert kernels.num_rows == n_compute + ops.num_rows  # an HCCL op is a device kernel row
    # and every op keeps its full communicator hash from the key after '@'
    hashes = {k.split("@")[0]: k.split("@")[1] for k in entries}
    assert dict(zip(ops[S.NAME].to_pylist(), ops[S.PG_NAME].to_pylist(), strict=True)) == hashes


def test_groups_resolve_through_parallel_group_info(ascend_msinsight: Path) -> None:
    """B.3 / B.4: parallel_group_info keys are comm names; an op's hash (or its 3-digit tail)
    finds its group_name and members."""
    # GIVEN the MindSpeed profiler_metadata.json (read in place)
    meta = read_rank_meta(ascend_msinsight / "metadata")
    raw = json.loads((ascend_msinsight / "metadata/profiler_metadata.json").read_text())
    info = raw["parallel_group_info"]
    assert {g.comm_name for g in meta.groups} == set(info)
    # WHEN op names carrying each group's hash tail are resolved
    tails = Counter(str(double_hash(c))[-3:] for c in info)
    unique = [c for c in info if tails[str(double_hash(c))[-3:]] == 1]
    names = pa.array([f"hcom_allReduce__{str(double_hash(c))[-3:]}_0_1" for c in unique])
    n = len(unique)
    cols = comm_columns(names, pa.array(["FP16"] * n), pa.array([8] * n, pa.int64()),
                        pa.nulls(n, pa.string()), meta.groups)
    # THEN each gets its own communicator name, group_name and global ranks
    assert cols[S.PG_NAME].to_pylist() == unique
    assert cols[S.PG_DESC].to_pylist() == [info[c]["group_name"] for c in unique]
    assert cols[S.PG_RANKS].to_pylist() == [info[c]["global_ranks"] for c in unique]
    assert cols[S.IN_BYTES].to_pylist() == [16] * n


def test_sniff_accepts_every_documented_layout(ascend_msinsight: Path) -> None:
    """B.1: a *_ascend_pt dir, its ASCEND_PROFILER_OUTPUT, a parent of ranks, test_rank_N."""
    root = ascend_msinsight
    for p in ("text_level1", "text_level1/rank0_ascend_pt",
              "db_level1/rank1_ascend_pt/ASCEND_PROFILER_OUTPUT", "test_rank_0"):
        assert ascend.sniff(root / p), p
    assert not ascend.sniff(root / "metadata")
    assert not ascend.sniff(root / "trace_view_tiny.json")


def test_reference_run_tables_follow_the_schema(text_run: api.Run, db_run: api.Run) -> None:
    """EVENTS / PROCESS_GROUPS / RANK_INFO are the shared schemas; RANK_INFO says ascend."""
    for run in (text_run, db_run):
        S.validate(run.events, S.EVENTS)
        S.validate(run.process_groups, S.PROCESS_GROUPS)
        S.validate(run.rank_info, S.RANK_INFO)
        assert set(run.rank_info[S.FORMAT].to_pylist()) == {"ascend"}
        assert run.ranks == [0, 1]
        for key, schema in ((ascend.EXTRA_OPS, S.ASCEND_COMM_OPS),
                            (ascend.EXTRA_BANDWIDTH, S.ASCEND_COMM_BANDWIDTH),
                            (ascend.EXTRA_MATRIX, S.ASCEND_COMM_MATRIX)):
            S.validate(run.extra[key], schema)


def test_hccl_ops_link_to_their_launching_cpu_op(text_run: api.Run) -> None:
    """B.7 linking chain: the async_npu flow starts in the cpu_op HcclAllreduce and ends on
    the HCCL op; the op gets that cpu_op's row as external id, as a Kineto kernel does."""
    for rank in (0, 1):
        # GIVEN the rank's rows WHEN the HCCL ops' external ids are followed
        ev = text_run.events.filter(pc.equal(text_run.events[S.RANK], rank))
        names = ev[S.NAME].to_pylist()
        kinds = ev[S.KIND].to_pylist()
        ext = _ops(text_run, rank)[S.EXTERNAL_ID].to_pylist()
        # THEN each lands on the HcclAllreduce cpu_op that launched it, which points at itself
        assert len(ext) == 4 and all(e is not None for e in ext)
        assert {names[e] for e in ext} == {"HcclAllreduce"}
        assert {kinds[e] for e in ext} == {S.Kind.CPU_OP}
        assert all(ev[S.EXTERNAL_ID][e].as_py() == e for e in ext)


def test_device_kernels_inherit_the_python_call_site(text_run: api.Run) -> None:
    """B.7: python_function events (Python id / parent id) around the launching cpu_op give
    the kernel's call site, innermost user frame first, in Kineto's ``func (file:line)``
    format, ' <- ' joined."""
    ev = text_run.events
    kernels = ev.filter(pc.and_(pc.equal(ev[S.KIND], S.Kind.KERNEL),
                                pc.is_valid(ev[S.CALL_SITE])))
    # GIVEN the AlexNet training loop of the reference run WHEN kernels are read
    sites = set(kernels[S.CALL_SITE].to_pylist())
    # THEN most compute kernels carry a call site through the script's train() frame
    assert kernels.num_rows > 100
    assert all("train (main.py:375)" in s for s in sites)
    assert not any("<built-in" in s or "torch/" in s for s in sites)


def test_db_names_the_npu_model_and_host(ascend_msinsight: Path, db_run: api.Run) -> None:
    """B.9: NPU_INFO / HOST_INFO / RANK_DEVICE_MAP say which chip, host and device a rank used
    (the measure stage picks the 910B / 910C profile from it)."""
    # GIVEN the raw info tables of rank 1
    out = ascend_msinsight / "db_level1/rank1_ascend_pt/ASCEND_PROFILER_OUTPUT"
    with sqlite3.connect(f"file:{out}/ascend_pytorch_profiler_1.db?mode=ro", uri=True) as con:
        model = con.execute("SELECT name FROM NPU_INFO").fetchone()[0]
        host = con.execute("SELECT hostName FROM HOST_INFO").fetchone()[0]
        device = con.execute("SELECT deviceId FROM RANK_DEVICE_MAP").fetchone()[0]
    # WHEN loaded THEN the devices table and RANK_INFO carry them
    devices = db_run.extra[ascend.EXTRA_DEVICES]
    S.validate(devices, S.ASCEND_DEVICES)
    row = devices.filter(pc.equal(devices[S.RANK], 1)).to_pylist()[0]
    assert (row[S.DEVICE], row[S.DEVICE_MODEL]) == (device, model)
    info = db_run.rank_info.filter(pc.equal(db_run.rank_info[S.RANK], 1))
    assert info[S.HOST].to_pylist() == [host]


@pytest.mark.parametrize("which", ["text", "db"])
def test_an_hccl_ops_own_tasks_are_not_compute(
    which: str, text_run: api.Run, db_run: api.Run
) -> None:
    """B.7 / B.9: the hardware tasks of an HCCL op (its FFTS container, SDMA, Notify Wait)
    carry the op's connection id; they are part of the op, not compute kernels."""
    run = text_run if which == "text" else db_run
    ev = run.events
    # GIVEN the connection ids of the HCCL op rows
    op_conns = pc.unique(ev.filter(pc.is_valid(ev[S.OP]))[S.CORRELATION])
    # WHEN the other device rows with those ids are looked at
    same = ev.filter(pc.and_(pc.is_null(ev[S.OP]), pc.and_(
        pc.is_valid(ev[S.DEVICE]), pc.is_in(ev[S.CORRELATION], value_set=op_conns))))
    # THEN there are such tasks, and none of them is a kernel
    assert same.num_rows > 0
    assert set(same[S.KIND].to_pylist()) == {S.Kind.OTHER}


@pytest.mark.parametrize("which", ["text", "db"])
def test_profiler_step_is_the_step_annotation(
    which: str, text_run: api.Run, db_run: api.Run
) -> None:
    """B.7: torch_npu writes ProfilerStep#N as a cpu_op; it is normalised to the annotation
    kind Kineto gives it, so steps are found the same way in both formats."""
    run = text_run if which == "text" else db_run
    ev = run.events
    steps = ev.filter(pc.starts_with(ev[S.NAME].cast(pa.string()), "ProfilerStep#"))
    assert steps[S.NAME].to_pylist() == ["ProfilerStep#50", "ProfilerStep#50"]
    assert set(steps[S.KIND].to_pylist()) == {S.Kind.ANNOTATION}


def test_correlation_is_the_connection_id(ascend_msinsight: Path, text_run: api.Run) -> None:
    """B.7: args.connection_id ties a CANN launch (Node@launch) to its hardware tasks and its
    HCCL op; the task queue's correlation_id is another id space and is not mixed in."""
    # GIVEN the raw connection ids of the rank-0 CANN events
    raw = json.loads((ascend_msinsight / "text_level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/"
                      "trace_view.json").read_text())
    cann = {e["pid"] for e in raw if e.get("ph") == "M" and e.get("name") == "process_name"
            and e["args"]["name"] == "CANN"}
    launches = {e["args"]["connection_id"] for e in raw
                if e.get("ph") == "X" and e["pid"] in cann and "connection_id" in e["args"]}
    # WHEN the loaded rows are grouped by kind
    ev = text_run.events.filter(pc.equal(text_run.events[S.RANK], 0))
    host = ev.filter(pc.is_in(ev[S.KIND], value_set=pa.array([S.Kind.CPU_OP, S.Kind.PYTHON])))
    ops = ev.filter(pc.is_valid(ev[S.OP]))
    # THEN host rows carry none, and every HCCL op's correlation is one of the CANN launches
    assert host[S.CORRELATION].null_count == host.num_rows
    assert set(ops[S.CORRELATION].to_pylist()) <= launches
