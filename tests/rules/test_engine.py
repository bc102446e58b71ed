"""The rules engine on hand-built EVENTS tables: evidence chain, classes, logical collectives."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tracekit import api
from tracekit import schema as S
from tracekit.rules.engine import attribute_run
from tracekit.rules.labels import PathLabel
from tracekit.schema import Group, Kind, Status
from tracekit.topology import ParallelConfig, Topology


def make_run(rows: list[dict[str, Any]], pgs: list[dict[str, Any]] | None = None) -> api.Run:
    """EVENTS from dicts (event ids, times and durations filled in order)."""
    filled = []
    for i, row in enumerate(rows):
        base = {S.RANK: 0, S.EVENT_ID: i, S.TS_NS: 1_000 * i, S.DUR_NS: 500, S.PID: 1, S.TID: 1}
        filled.append({**base, **row})
    keys = sorted(set().union(*filled))  # from_pylist keeps only the first row's keys
    events = S.conform(pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in filled]),
                       S.EVENTS)
    groups = S.conform(pa.Table.from_pylist(pgs or [], schema=None) if pgs else
                       S.empty(S.PROCESS_GROUPS), S.PROCESS_GROUPS)
    ranks = sorted({r[S.RANK] for r in filled})
    info = S.conform(pa.table({S.RANK: pa.array(ranks, pa.int32())}), S.RANK_INFO)
    return api.Run(events=events, process_groups=groups, rank_info=info)


def attribute(run: api.Run, topo: Topology | None = None) -> list[dict[str, Any]]:
    attributed, _ = attribute_run(run, api.AnalyzeOptions(topology=topo))
    S.validate(attributed, S.ATTRIBUTED)
    return attributed.to_pylist()


def kernel(name: str, **kw: Any) -> dict[str, Any]:
    return {S.NAME: name, S.KIND: Kind.KERNEL, S.PID: 0, S.TID: 7, **kw}


def test_description_decides_and_wrappers_are_not_instances() -> None:
    # GIVEN a record_param_comms op and its NCCL kernel, both with 'tp:device'
    run = make_run([
        {S.NAME: "record_param_comms", S.KIND: Kind.COMM_OP, S.PG_DESC: "tp:device",
         S.OP: S.Op.ALL_REDUCE, S.EXTERNAL_ID: 5},
        kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
               **{S.PG_DESC: "tp:device", S.PG_RANKS: [0, 1], S.EXTERNAL_ID: 5}),
        kernel("void at::native::vectorized_elementwise_kernel<4>(...)"),
    ])
    # WHEN attributed without a topology
    rows = attribute(run)
    # THEN both are TP by the description; only the kernel is the instance; compute stays
    wrapper, nccl, compute = rows
    assert (nccl[S.GROUP], nccl[S.STATUS]) == (Group.TP, Status.ATTRIBUTED)
    assert nccl[S.IS_INSTANCE] is True
    assert nccl[S.KERNEL_CLASS] == S.KernelClass.COMM and nccl[S.OP] == S.Op.ALL_REDUCE
    assert wrapper[S.GROUP] == Group.TP and wrapper[S.IS_INSTANCE] is False
    assert "tp:device" in nccl[S.REASON] and nccl[S.RULE_ID].startswith("desc.tp")
    assert compute[S.KERNEL_CLASS] == S.KernelClass.COMPUTE and compute[S.STATUS] is None


def test_identical_members_stay_ambiguous_without_separating_evidence() -> None:
    # GIVEN npu with ep == tp, and a kernel that only says its ranks are [0..3]
    topo = Topology(ParallelConfig(tp=4, ep=4, npu=True))
    run = make_run([kernel("ncclDevKernel_AllGather_RING_LL(x)", **{S.PG_RANKS: [0, 1, 2, 3]})])
    # WHEN attributed
    (row,) = attribute(run, topo)
    # THEN the status is ambiguous and the reason names TP and MOE_EP as candidates
    assert row[S.STATUS] == Status.AMBIGUOUS and row[S.GROUP] is None
    assert "candidates TP, MOE_EP, WORLD" in row[S.REASON]


def test_call_site_separates_identical_members() -> None:
    # GIVEN the same ranks but a call site inside forward_fuseep
    topo = Topology(ParallelConfig(tp=4, ep=4, npu=True))
    run = make_run([kernel("ncclDevKernel_AllToAll(x)", **{
        S.PG_RANKS: [0, 1, 2, 3],
        S.CALL_SITE: "dispatch (moe.py:9) <- forward_fuseep (fuseep.py:3)"})])
    # THEN MOE_EP is attributed, the ranks and the call site both in the reason
    (row,) = attribute(run, topo)
    assert (row[S.GROUP], row[S.STATUS], row[S.PATH]) == (Group.MOE_EP, Status.ATTRIBUTED,
                                                          PathLabel.FUSEEP)
    assert "ranks [0, 1, 2, 3]" in row[S.REASON] and "call.fuseep" in row[S.REASON]


def test_contradicting_weaker_evidence_is_noted_not_used() -> None:
    # GIVEN a description 'attention_tp:device' but a call site of the TP all-reduce
    topo = Topology(ParallelConfig(tp=4, dp=2, enable_dp_attention=True))
    run = make_run([kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", **{
        S.PG_DESC: "attention_tp:device", S.PG_RANKS: [0, 1],
        S.CALL_SITE: "tensor_model_parallel_all_reduce (x.py:1)"})])
    (row,) = attribute(run, topo)
    # THEN the description wins (strongest) and the group is ATTN_TP
    assert row[S.GROUP] == Group.ATTN_TP and row[S.PATH] == PathLabel.ATTN_TP


def test_pynccl_grouped_reduce_kernels_form_one_reduce_scatterv() -> None:
    # GIVEN four back-to-back ncclDevKernel_Reduce kernels on one stream, no metadata (pynccl)
    topo = Topology(ParallelConfig(tp=4, dp=4, enable_dp_attention=True))
    name = "ncclDevKernel_Reduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    site = "reduce_scatterv (sglang/srt/distributed/parallel_state.py:900)"
    run = make_run([kernel(name, **{S.CALL_SITE: site}) for _ in range(4)])
    rows = attribute(run, topo)
    # THEN they share one logical id, are TP (call site) and combine path B
    assert len({r[S.LOGICAL_ID] for r in rows}) == 1
    assert {r[S.PATH] for r in rows} == {PathLabel.COMBINE_B}
    assert {r[S.GROUP] for r in rows} == {Group.TP}


def test_c10d_issued_broadcasts_are_not_merged() -> None:
    # GIVEN two broadcast kernels that each carry their own process-group metadata (c10d)
    run = make_run([kernel("ncclKernel_Broadcast_RING_LL_Sum_int8_t(x)",
                           **{S.PG_DESC: "default_pg", S.PG_NAME: "0"}) for _ in range(2)])
    rows = attribute(run)
    # THEN they stay two collectives on WORLD, with no all_gatherv path invented
    assert len({r[S.LOGICAL_ID] for r in rows}) == 2
    assert {r[S.GROUP] for r in rows} == {Group.WORLD} and {r[S.PATH] for r in rows} == {None}


def test_kernel_classes_roles_and_default_groups() -> None:
    # GIVEN library kernels without metadata on an npu and a GPU topology
    names = [
        "void sglang::cross_device_reduce_1stage<__nv_bfloat16, 8>(...)",
        "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<...>",
        "void deep_ep::internode_ll::dispatch<false, 8, 7168>(...)",
        "void deep_ep::legacy::intranode::combine<__nv_bfloat16, 8, 768>(...)",
        "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(...)",
        "void dpsk::ep::internode::dispatch<true, 8>(...)",
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
    ]
    rows = attribute(make_run([kernel(n) for n in names]), Topology(ParallelConfig(tp=8, ep=8)))
    got = [(r[S.KERNEL_CLASS], r[S.KERNEL_ROLE], r[S.GROUP], r[S.PATH]) for r in rows]
    # THEN classes, roles, TP (custom AR), MOE_EP (DeepEP: the layout has ep > 1, the same
    # communicator as TP here) and DeepEP paths follow the YAML
    assert got[0] == ("communication", "collective", Group.TP, None)
    assert got[1][0] == "fused"
    assert got[2] == ("communication", "dispatch", Group.MOE_EP, PathLabel.DEEPEP_LL_DISPATCH)
    assert got[3] == ("communication", "combine", Group.MOE_EP, PathLabel.DEEPEP_NORMAL_COMBINE)
    assert got[4][:2] == ("compute", "layout") and rows[4][S.IS_INSTANCE] is False
    assert got[5][3] == PathLabel.DEEPEP_NORMAL_DISPATCH
    assert got[6][:2] == ("communication", "p2p") and rows[6][S.OP] == S.Op.SEND_RECV
    npu = attribute(make_run([kernel(names[2])]), Topology(ParallelConfig(tp=8, ep=8, npu=True)))
    assert npu[0][S.GROUP] == Group.MOE_EP


def test_gloo_runloop_annotation_takes_the_c10d_ops_verdict() -> None:
    # GIVEN a c10d op on the main thread (call site attn_tp_all_reduce) and the gloo
    # annotation it caused on a runloop thread, plus a second annotation on that thread whose
    # c10d op has no call site
    topo = Topology(ParallelConfig(tp=4, dp=2, enable_dp_attention=True))
    site = "all_reduce (ps.py:1) <- attn_tp_all_reduce (dp.py:2)"
    run = make_run([
        {S.NAME: "c10d::allreduce_", S.KIND: Kind.CPU_OP, S.TID: 1, S.TS_NS: 0,
         S.DUR_NS: 100, S.OP: "all_reduce", S.CALL_SITE: site},
        {S.NAME: "gloo:all_reduce", S.KIND: Kind.ANNOTATION, S.TID: 9, S.TS_NS: 50,
         S.DUR_NS: 900, S.OP: "all_reduce"},
        {S.NAME: "c10d::allreduce_", S.KIND: Kind.CPU_OP, S.TID: 1, S.TS_NS: 2000,
         S.DUR_NS: 100, S.OP: "all_reduce"},
        {S.NAME: "gloo:all_reduce", S.KIND: Kind.ANNOTATION, S.TID: 9, S.TS_NS: 2050,
         S.DUR_NS: 900, S.OP: "all_reduce"},
    ])
    rows = attribute(run, topo)
    # THEN the annotations are the instances with ATTN_TP; the second c10d op gets ATTN_TP
    # from its runloop thread, and each pair shares a logical id
    assert [r[S.IS_INSTANCE] for r in rows] == [False, True, False, True]
    assert [r[S.GROUP] for r in rows] == [Group.ATTN_TP] * 4
    assert "gloo runloop thread" in rows[2][S.REASON]
    assert rows[0][S.LOGICAL_ID] == rows[1][S.LOGICAL_ID] != rows[2][S.LOGICAL_ID]


def test_position_names_tp_all_reduces_in_layers() -> None:
    # GIVEN two identical decoder layers without DP attention: two TP all-reduces each, and
    # nothing but position to tell the attention reduction from the post-expert one
    topo = Topology(ParallelConfig(tp=4))
    ar = {S.NAME: "c10d::allreduce_", S.KIND: Kind.CPU_OP, S.OP: "all_reduce",
          S.CALL_SITE: "tensor_model_parallel_all_reduce (dp.py:1)"}
    gl = {S.NAME: "gloo:all_reduce", S.KIND: Kind.ANNOTATION, S.TID: 9, S.OP: "all_reduce"}
    rows = []
    for i in range(4):
        rows += [{**ar, S.TS_NS: 1000 * i}, {**gl, S.TS_NS: 1000 * i + 10}]
    out = [r for r in attribute(make_run(rows), topo) if r[S.IS_INSTANCE]]
    # THEN layers 0,0,1,1 and full-TP attention then the post-expert all-reduce
    assert [r[S.LAYER] for r in out] == [0, 0, 1, 1]
    assert [r[S.PATH] for r in out] == [PathLabel.ATTN_FULL_TP, PathLabel.NO_DPA_MOE_AR] * 2
    assert [r[S.PHASE] for r in out][:2] == [S.Phase.ATTENTION_REDUCE, S.Phase.COMBINE]


def test_without_a_topology_nothing_is_placed_by_position() -> None:
    # GIVEN TP-described all-reduces in a trace whose process groups say nothing of the layout
    ar = kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", **{S.PG_DESC: "tp:device"})
    rows = attribute(make_run([ar, ar, ar, ar]))
    # THEN the group is known but no path or layer is invented
    assert {r[S.GROUP] for r in rows} == {Group.TP}
    assert {r[S.PATH] for r in rows} == {None} and {r[S.LAYER] for r in rows} == {None}


def test_gpu_deepep_low_latency_layers_from_kernel_names() -> None:
    # GIVEN three layers of DeepEP low-latency kernels (CUDA-graph style: no CPU metadata),
    # DP attention with attn_tp 1 (no attention all-reduce)
    topo = Topology(ParallelConfig(tp=8, dp=8, enable_dp_attention=True, ep=8))
    layer = [kernel("void deep_ep::internode_ll::dispatch<true, 8, 7168>(...)"),
             kernel("void deep_ep::internode_ll::combine<8, 7168>(...)")]
    rows = attribute(make_run(layer * 3), topo)
    # THEN each dispatch/combine pair is one layer, on MOE_EP (the DeepEP group; with
    # ep == tp on GPU it is the TP communicator)
    assert [r[S.LAYER] for r in rows] == [0, 0, 1, 1, 2, 2]
    assert [r[S.PHASE] for r in rows][:2] == [S.Phase.DISPATCH, S.Phase.COMBINE]
    assert {r[S.GROUP] for r in rows} == {Group.MOE_EP}


def test_empty_and_compute_only_runs() -> None:
    # GIVEN a run with no events, and one with compute kernels only
    empty = api.Run(events=S.empty(S.EVENTS), process_groups=S.empty(S.PROCESS_GROUPS),
                    rank_info=S.empty(S.RANK_INFO))
    attributed, findings = attribute_run(empty, api.AnalyzeOptions())
    # THEN both give valid, empty verdicts
    assert attributed.num_rows == 0 and findings.num_rows == 0
    S.validate(attributed, S.ATTRIBUTED)
    rows = attribute(make_run([kernel("void gemm_kernel<128>(...)"),
                               {S.NAME: "cudaMemcpyAsync", S.KIND: Kind.MEMCPY}]))
    assert [r[S.KERNEL_CLASS] for r in rows] == [S.KernelClass.COMPUTE, S.KernelClass.MEMCPY]
    assert {r[S.STATUS] for r in rows} == {None}


def test_layer_markers_name_the_layer() -> None:
    # GIVEN record_function spans 'layer_7' and 'layer_8' around TP all-reduces
    topo = Topology(ParallelConfig(tp=4))
    site = {S.CALL_SITE: "tensor_model_parallel_all_reduce (x.py:1)"}
    rows = []
    for i, layer in enumerate((7, 8)):
        t = 10_000 * i
        rows.append({S.NAME: f"layer_{layer}", S.KIND: Kind.ANNOTATION, S.TS_NS: t,
                     S.DUR_NS: 9_000})
        rows.append(kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)",
                           **{S.PG_DESC: "tp:device", S.TS_NS: t + 100, S.TID: 1, S.PID: 1,
                              **site}))
        rows.append(kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)",
                           **{S.PG_DESC: "tp:device", S.TS_NS: t + 5_000, S.TID: 1, S.PID: 1,
                              **site}))
    out = [r for r in attribute(make_run(rows), topo) if r[S.IS_INSTANCE]]
    # THEN the marker's number is the layer, and position names the two reductions
    assert [r[S.LAYER] for r in out] == [7, 7, 8, 8]
    assert [r[S.PATH] for r in out] == [PathLabel.ATTN_FULL_TP, PathLabel.NO_DPA_MOE_AR] * 2


def test_dictionary_columns_with_repeated_values_are_accepted() -> None:
    # GIVEN a NAME column whose dictionary repeats a value (legal Arrow, e.g. after combining
    # chunks from several files)
    run = make_run([kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)",
                           **{S.PG_DESC: "tp:device"}) for _ in range(2)])
    names = pa.DictionaryArray.from_arrays(
        pa.array([0, 1], pa.int32()),
        pa.array(["ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)"] * 2))
    events = run.events.set_column(run.events.schema.get_field_index(S.NAME),
                                   run.events.schema.field(S.NAME), names)
    # WHEN attributed THEN both kernels are TP collectives
    rows = attribute(api.Run(events=events, process_groups=run.process_groups,
                             rank_info=run.rank_info))
    assert [r[S.GROUP] for r in rows] == [Group.TP, Group.TP]
