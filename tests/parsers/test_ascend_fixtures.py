"""Ascend parser and NPU rules on exports generated in the documented formats.

No public Ascend export has MoE traffic or parallel_group_info beside communication.json, so
tests/fixtures/make_ascend.py writes them from TRACE_FORMATS.md Part B; each test names the
format facts it rests on.
"""

from __future__ import annotations

import re
from pathlib import Path

import fixtures.make_ascend as mk  # tests/ is on pytest's pythonpath (pyproject)
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracekit import api
from tracekit import schema as S
from tracekit.parsers import ascend, load_run
from tracekit.rules.labels import PathLabel
from tracekit.rules.loader import load_file, packaged_rules
from tracekit.rules.model import KernelRule

NPU_RULES = Path(__file__).resolve().parents[2] / "tracekit" / "rules" / "data" / "npu.yaml"


def _ops(run: api.Run) -> pa.Table:
    ev = run.events
    return ev.filter(pc.is_valid(ev[S.OP])).sort_by([(S.RANK, "ascending"),
                                                                   (S.TS_NS, "ascending")])


def _first_rule(rules: tuple[KernelRule, ...], name: str, kind: str) -> KernelRule | None:
    """The rules engine's contract (model.py): first rule whose regex searches the name."""
    for r in rules:
        if (not r.kinds or kind in r.kinds) and re.search(r.match, name):
            return r
    return None


@pytest.mark.parametrize("export", ["text", "db", "text+db"])
def test_hccl_ops_times_bytes_and_groups(tmp_path: Path, export: str) -> None:
    """B.3 (parallel_group_info), B.4 (op names, double_hash), B.5 (communication.json keys),
    B.7 (string ts, float dur), B.9 (COMMUNICATION_OP raw group name, ENUM dtype)."""
    # GIVEN a 2-rank export where tp and moe_ep have the same members but are two communicators
    truth = mk.write_export(tmp_path, world=2, moe="deepep_normal", export=export)
    # WHEN loaded
    run = load_run(tmp_path, api.LoadOptions())
    ops = _ops(run)
    want = sorted(truth.ops, key=lambda o: (o.rank, o.ts_ns))
    # THEN every HCCL op is there with exact ns, op, bytes = count x dtype size, and its group
    assert ops[S.NAME].to_pylist() == [o.name for o in want]
    assert ops[S.TS_NS].to_pylist() == [o.ts_ns for o in want]
    assert ops[S.DUR_NS].to_pylist() == [o.dur_ns for o in want]
    assert ops[S.IN_BYTES].to_pylist() == [o.nbytes for o in want]
    assert ops[S.PG_NAME].to_pylist() == [o.comm_name for o in want]
    assert ops[S.PG_DESC].to_pylist() == [o.group_name for o in want]
    assert ops[S.PG_RANKS].to_pylist() == [[0, 1]] * len(want)
    assert set(ops[S.META_SOURCE].to_pylist()) == {S.MetaSource.ASCEND}
    tp = {o.comm_name for o in want if o.group_name == "tp"}
    ep = {o.comm_name for o in want if o.group_name == "moe_ep"}
    assert tp and ep and tp.isdisjoint(ep)
    # and PROCESS_GROUPS lists each communicator per rank with this rank's index
    pg = run.process_groups.to_pylist()
    assert {(r[S.RANK], r[S.PG_DESC], r[S.GROUP_RANK]) for r in pg} == {
        (r, g, r) for r in (0, 1) for g in ("default_group", "tp", "moe_ep")}


def test_text_and_db_exports_of_one_run_agree(tmp_path: Path) -> None:
    """B.9 vs B.5/B.7: the db and the text files of the same capture give the same op rows
    and the same Transit / Wait per op."""
    # GIVEN the same plan written once as text and once as db
    mk.write_export(tmp_path / "t", world=2, moe="mc2", export="text")
    mk.write_export(tmp_path / "d", world=2, moe="mc2", export="db")
    # WHEN both are loaded
    t = load_run(tmp_path / "t", api.LoadOptions())
    d = load_run(tmp_path / "d", api.LoadOptions())
    # THEN the communication columns and totals are identical
    cols = [S.RANK, S.NAME, S.TS_NS, S.DUR_NS, S.OP, S.DTYPE, S.IN_BYTES, S.OUT_BYTES,
            S.PG_NAME, S.PG_DESC, S.GROUP_SIZE]
    assert _ops(t).select(cols).to_pylist() == _ops(d).select(cols).to_pylist()
    key = [S.RANK, S.NAME, S.TRANSFER_NS, S.WAIT_NS, S.SYNC_NS, S.IDLE_NS, S.DUR_NS]
    te = sorted(t.extra[ascend.EXTRA_OPS].select(key).to_pylist(), key=str)
    de = sorted(d.extra[ascend.EXTRA_OPS].select(key).to_pylist(), key=str)
    assert te == de and len(te) == _ops(t).num_rows


def test_sdma_rows_are_marked_as_containing_hccs(tmp_path: Path) -> None:
    """B.5: SDMA already includes HCCS, PCIE and SIO; summing the rows not in SDMA plus RDMA
    never double counts."""
    # GIVEN an export whose ops move their bytes over HCCS (hence also SDMA)
    truth = mk.write_export(tmp_path, world=2, export="text")
    # WHEN loaded
    bw = load_run(tmp_path, api.LoadOptions()).extra[ascend.EXTRA_BANDWIDTH]
    # THEN HCCS / PCIE / SIO are flagged in_sdma, and SDMA + RDMA is the op's bytes once
    flagged = dict(zip(bw[S.TRANSPORT].to_pylist(), bw[S.IN_SDMA].to_pylist(), strict=True))
    assert flagged == {"RDMA": False, "HCCS": True, "PCIE": True, "SDMA": False, "SIO": True}
    once = bw.filter(pc.invert(bw[S.IN_SDMA]))
    assert pc.sum(once[S.TRANSIT_BYTES]).as_py() == sum(o.nbytes for o in truth.ops)


def test_hash_tail_resolves_groups_without_communication_json(tmp_path: Path) -> None:
    """B.4: the op name carries the last 3 digits of double_hash(comm name); with
    parallel_group_info that alone picks the communicator (tp vs moe_ep, same members)."""
    # GIVEN a text export without communication.json / communication_matrix.json
    truth = mk.write_export(tmp_path, world=2, export="text")
    for rdir in truth.rank_dirs:
        (rdir / "ASCEND_PROFILER_OUTPUT" / "communication.json").unlink()
        (rdir / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").unlink()
    # WHEN loaded
    ops = _ops(load_run(tmp_path, api.LoadOptions()))
    want = sorted(truth.ops, key=lambda o: (o.rank, o.ts_ns))
    # THEN each op still gets its own communicator
    assert ops[S.PG_DESC].to_pylist() == [o.group_name for o in want]


def test_moe_kernels_are_device_kernels_with_links(tmp_path: Path) -> None:
    """B.7 / B.10: MoE kernels are Ascend Hardware tasks (Task Type MIX_AIV, "Stream N"),
    not HCCL ops; they keep exact times."""
    # GIVEN a FuseEP export
    truth = mk.write_export(tmp_path, world=2, moe="fuseep", export="text")
    # WHEN loaded
    ev = load_run(tmp_path, api.LoadOptions()).events
    fused = ev.filter(pc.match_substring(ev[S.NAME].cast(pa.string()), "FusedDeepMoe"))
    # THEN they are kernel rows on stream 6 of their device with the written start and length
    want = [k for k in truth.kernels if "FusedDeepMoe" in k.name]
    assert fused[S.KIND].to_pylist() == [S.Kind.KERNEL] * len(want)
    assert sorted(fused[S.TS_NS].to_pylist()) == sorted(k.ts_ns for k in want)
    assert set(fused[S.STREAM].to_pylist()) == {6}
    assert set(fused[S.OP].to_pylist()) == {None}  # the rules classify them, not the parser
    assert sorted(set(fused[S.DEVICE].to_pylist())) == [0, 1]


CASES = [
    ("mc2", S.KernelClass.COMM, [PathLabel.DEEPEP_LL_DISPATCH, PathLabel.DEEPEP_LL_COMBINE],
     [S.Op.DISPATCH, S.Op.COMBINE]),
    ("mc2_v4", S.KernelClass.COMM, [PathLabel.DEEPEP_LL_DISPATCH,
                                    PathLabel.DEEPEP_LL_COMBINE], [S.Op.DISPATCH, S.Op.COMBINE]),
    ("deepep_normal", S.KernelClass.COMM, [PathLabel.DEEPEP_NORMAL_DISPATCH,
                                           PathLabel.DEEPEP_NORMAL_COMBINE],
     [S.Op.DISPATCH, S.Op.COMBINE]),
    ("deepep_ll", S.KernelClass.COMM, [PathLabel.DEEPEP_LL_DISPATCH,
                                       PathLabel.DEEPEP_LL_COMBINE],
     [S.Op.DISPATCH, S.Op.COMBINE]),
    ("fuseep", S.KernelClass.FUSED, [PathLabel.FUSEEP], [S.Op.FUSED_MOE]),
    ("fuseep_py", S.KernelClass.FUSED, [PathLabel.FUSEEP], [S.Op.FUSED_MOE]),
    ("fuseep_ffn", S.KernelClass.FUSED, [PathLabel.FUSEEP], [S.Op.FUSED_MOE]),
    ("fuseep_decode", S.KernelClass.FUSED, [PathLabel.FUSEEP], [S.Op.FUSED_MOE]),
]


@pytest.mark.parametrize(("moe", "cls", "paths", "ops"), CASES)
def test_npu_rules_decide_deepep_or_fuseep(
    tmp_path: Path, moe: str, cls: str, paths: list[str], ops: list[str]
) -> None:
    """B.10 + SGLANG_PATHS 4.3: dispatch/combine kernels (MoeDistribute*, CamMoe*Normal,
    MoeLowLatency*V2) are DeepEP-on-NPU communication on MOE_EP; FusedDeepMoe / fused_deep_moe,
    DispatchFFNCombine, dispatch_gmm_combine_decode are FuseEP: fused, never communication."""
    # GIVEN the parsed MoE kernel rows of the export and the packaged rules
    mk.write_export(tmp_path, world=2, moe=moe, export="text")
    ev = load_run(tmp_path, api.LoadOptions()).events
    names = [n for n in dict.fromkeys(ev[S.NAME].to_pylist()) if n in mk.MOE_KERNELS[moe]]
    rules = packaged_rules().kernel_classes
    # WHEN each is matched as the engine does (first rule, file priority order)
    hits = [_first_rule(rules, n, S.Kind.KERNEL) for n in names]
    # THEN the class, path, op and communicator follow the kernel's role
    assert len(names) == len(mk.MOE_KERNELS[moe])
    assert all(h is not None and h.id.startswith("npu.") for h in hits), hits
    assert [h.cls for h in hits] == [cls] * len(names)  # type: ignore[union-attr]
    assert [h.path for h in hits] == paths  # type: ignore[union-attr]
    assert [h.op for h in hits] == ops  # type: ignore[union-attr]
    assert {h.group_npu for h in hits} == {S.Group.MOE_EP}  # type: ignore[union-attr]


def test_npu_rules_make_hccl_ops_the_instances(tmp_path: Path) -> None:
    """B.4 / B.7: the hcom_* op carries the time (instance); HcclAllreduce cpu ops and the
    op's SDMA / Notify Wait hardware tasks do not count as compute."""
    mk.write_export(tmp_path, world=1, export="text")
    ev = load_run(tmp_path, api.LoadOptions()).events
    rules = load_file(NPU_RULES).kernel_classes
    # GIVEN the kinds of the rows WHEN classified
    pairs = set(zip(ev[S.NAME].to_pylist(), ev[S.KIND].to_pylist(), strict=True))
    by_name = {n: _first_rule(rules, n, k) for n, k in pairs}
    # THEN hcom ops are communication instances, Hccl* cpu ops wrappers, HCCL tasks are other
    for (name, kind), rule in ((p, by_name[p[0]]) for p in pairs):
        if name.startswith("hcom_"):
            assert kind == S.Kind.KERNEL and rule is not None and rule.instance
            assert rule.cls == S.KernelClass.COMM
        elif name.startswith("Hccl"):
            assert rule is not None and not rule.instance and rule.role == "wrapper"
        elif name == "Notify Wait":
            assert kind == S.Kind.OTHER


def test_npu_rule_file_loads_through_the_rules_loader() -> None:
    """The NPU YAML is valid rule data (model.py format) and part of the packaged rules."""
    rules = load_file(NPU_RULES)
    packaged = {r.id for r in packaged_rules().kernel_classes}
    assert {r.id for r in rules.kernel_classes} <= packaged
    assert all(r.id.startswith("npu.") for r in rules.kernel_classes)


def test_single_rank_directory_and_output_dir(tmp_path: Path) -> None:
    """B.1: a *_ascend_pt directory or its ASCEND_PROFILER_OUTPUT is one rank."""
    truth = mk.write_export(tmp_path, world=2, export="text")
    for rdir in truth.rank_dirs:
        for p in (rdir, rdir / "ASCEND_PROFILER_OUTPUT"):
            assert ascend.sniff(p)
            run = load_run(p, api.LoadOptions())
            assert run.ranks == [truth.rank_dirs.index(rdir)]


def test_one_collective_has_one_comms_id_on_every_rank(tmp_path: Path) -> None:
    """B.4: the op name's index counts the ops of its communicator and is the same on every
    rank, so (communicator, name) identifies one collective across ranks."""
    # GIVEN a 2-rank export WHEN loaded
    mk.write_export(tmp_path, world=2, export="text")
    ops = _ops(load_run(tmp_path, api.LoadOptions())).to_pylist()
    by_rank = {r: [o for o in ops if o[S.RANK] == r] for r in (0, 1)}
    # THEN seq is the index in the name, and comms_id pairs the ranks' rows one to one
    for o in ops:
        assert o[S.SEQ] == int(o[S.NAME].split("_")[-2])
    ids0 = {o[S.NAME]: o[S.COMMS_ID] for o in by_rank[0]}
    ids1 = {o[S.NAME]: o[S.COMMS_ID] for o in by_rank[1]}
    assert ids0 == ids1 and len(set(ids0.values())) == len(ids0)


def test_rules_engine_tells_tp_from_moe_ep_and_fuseep_from_communication(
    tmp_path: Path,
) -> None:
    """B.3 + DOMAIN 2 / 6: on NPU moe_ep is its own communicator even with TP's members; the
    FuseEP kernel is fused compute-plus-exchange on MOE_EP, never pure communication."""
    # GIVEN a FuseEP export with HCCL ops on tp and on moe_ep
    mk.write_export(tmp_path, world=2, moe="fuseep", export="text")
    run = load_run(tmp_path, api.LoadOptions())
    # WHEN the attribute stage runs
    attributed, _ = api.attribute(run)
    rows = attributed.filter(pc.field(S.IS_INSTANCE)).to_pylist()
    # THEN hcom ops get the group their parallel_group_info name says, and FuseEP is fused
    for r in rows:
        name = str(r[S.NAME])
        if name.startswith("hcom_allReduce_"):
            assert (r[S.GROUP], r[S.KERNEL_CLASS]) == (S.Group.TP, S.KernelClass.COMM)
        elif name.startswith("hcom_allGather_"):
            assert (r[S.GROUP], r[S.KERNEL_CLASS]) == (S.Group.MOE_EP, S.KernelClass.COMM)
        else:
            assert "FusedDeepMoe" in name
            assert (r[S.GROUP], r[S.KERNEL_CLASS], r[S.PATH]) == (
                S.Group.MOE_EP, S.KernelClass.FUSED, PathLabel.FUSEEP)
    assert {str(r[S.STATUS]) for r in rows} == {S.Status.ATTRIBUTED}
    assert len(rows) == 2 * (1 + 2 + 2)  # per rank: 1 allgather, 2 allreduce, 2 FuseEP


def test_kernel_details_alone_still_gives_the_ops(tmp_path: Path) -> None:
    """B.8: without trace_view / communication.json, the HCCL rows of kernel_details.csv
    (Accelerator Core HCCL, trailing TAB in Start Time(us)) are the ops; B.4 hash tails give
    their communicators; the CSV has no count, so bytes stay unknown rather than guessed."""
    # GIVEN an export reduced to kernel_details.csv
    truth = mk.write_export(tmp_path, world=2, moe="mc2", export="text")
    for rdir in truth.rank_dirs:
        for name in ("trace_view.json", "communication.json", "communication_matrix.json"):
            (rdir / "ASCEND_PROFILER_OUTPUT" / name).unlink()
    # WHEN loaded
    run = load_run(tmp_path, api.LoadOptions())
    ops = _ops(run)
    want = sorted(truth.ops, key=lambda o: (o.rank, o.ts_ns))
    # THEN the ops keep exact starts, durations to the CSV's digits, and their groups
    assert ops[S.TS_NS].to_pylist() == [o.ts_ns for o in want]
    assert ops[S.DUR_NS].to_pylist() == [o.dur_ns for o in want]
    assert ops[S.PG_DESC].to_pylist() == [o.group_name for o in want]
    assert set(ops[S.IN_BYTES].to_pylist()) == {None}
    moe = run.events.filter(pc.equal(run.events[S.STREAM], 6))
    assert moe.num_rows == sum(1 for k in truth.kernels if k.stream == 6)


def test_the_registry_hands_ascend_directories_to_this_parser(tmp_path: Path) -> None:
    """tracekit.api.load sniffs the directory and delegates (the stage contract)."""
    mk.write_export(tmp_path, world=2, export="db")
    via_api = api.load(tmp_path)
    direct = load_run(tmp_path, api.LoadOptions())
    assert via_api.events.equals(direct.events)
    assert set(via_api.rank_info[S.FORMAT].to_pylist()) == {"ascend"}


def test_db_without_hccl_ops_still_gives_device_tasks(tmp_path: Path) -> None:
    """B.9: a rank that ran no HCCL op has no COMMUNICATION_OP rows (or table); its TASK rows
    are still its device timeline."""
    import sqlite3

    # GIVEN a db export whose COMMUNICATION_OP table was dropped
    truth = mk.write_export(tmp_path, world=1, moe="deepep_ll", export="db")
    db = truth.rank_dirs[0] / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    with sqlite3.connect(db) as con:
        con.execute("DROP TABLE COMMUNICATION_OP")
    # WHEN loaded
    ev = load_run(tmp_path, api.LoadOptions()).events
    # THEN the kernels are all there with exact times and no op row is invented
    assert sorted(ev[S.TS_NS].to_pylist()) == sorted(k.ts_ns for k in truth.kernels)
    assert set(ev[S.OP].to_pylist()) == {None}
