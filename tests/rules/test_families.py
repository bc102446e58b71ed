"""Built-in kernel families (issue 14, item 5): each on a trace built from its real names.

Every name below is the kernel (or op) its project launches, read from the source cited next
to it, written the way Kineto / the Ascend profiler print it (CUDA kernels: the demangled
signature). Expected facts (communication or fused, op, role, default group) follow from what
the source does, not from tracekit's output.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from rules.test_engine import attribute, kernel, make_run

from tracekit import schema as S
from tracekit.rules.kernels import classify
from tracekit.rules.loader import packaged_rules
from tracekit.schema import Group, KernelClass, Kind
from tracekit.topology import ParallelConfig, Topology

GPU = Topology(ParallelConfig(tp=8, ep=8))
NPU = Topology(ParallelConfig(tp=8, ep=8, npu=True))
COMM, FUSED = KernelClass.COMM, KernelClass.FUSED

# (name, rule id, class, op, role, group, is_instance)
FAMILIES: list[tuple[str, str, str, str, str, str | None, bool]] = [
    # ---- pplx-kernels, vLLM all2all backend "pplx" (PPLXAll2AllManager)
    # ppl-ai/pplx-kernels csrc/all_to_all/intranode_dispatch.cu: anonymous-namespace
    # dispatchKernel<NUM_WARPS=16, DO_SEND, DO_RECV>
    ("void (anonymous namespace)::dispatchKernel<16u, true, true>(int*, unsigned long, "
     "std::byte*, unsigned long, unsigned long, float*, unsigned long, unsigned long, "
     "unsigned long, std::byte const*, unsigned long, float const*, unsigned long, "
     "unsigned long, unsigned int const*, unsigned long, unsigned long, unsigned long, "
     "unsigned long, unsigned int, unsigned int, unsigned int, unsigned long, unsigned long, "
     "unsigned long, unsigned int*, unsigned int, std::byte**, std::byte**, unsigned int*, "
     "unsigned int*, unsigned int*, unsigned int*, unsigned int*, unsigned int*, "
     "unsigned int*, unsigned int&)",
     "pplx.dispatch", COMM, S.Op.DISPATCH, "dispatch", Group.MOE_EP, True),
    # csrc/all_to_all/internode_dispatch.cu: NUM_WARPS = 10, SplitMode::SEND
    ("void (anonymous namespace)::dispatchKernel<10u, true, false>(int*, unsigned long, "
     "std::byte*, unsigned long, unsigned long, float*, unsigned long, unsigned long)",
     "pplx.dispatch", COMM, S.Op.DISPATCH, "dispatch", Group.MOE_EP, True),
    # csrc/all_to_all/internode_combine.cu: combineKernel<T, U, NUM_WARPS=8, DO_SEND, DO_RECV>
    ("void combineKernel<__nv_bfloat16, __nv_bfloat16, 8ul, true, true>(__nv_bfloat16*, "
     "unsigned long, unsigned int*, unsigned long, unsigned long, float*, unsigned long, "
     "unsigned long, __nv_bfloat16*, unsigned long, unsigned long, unsigned long, "
     "unsigned long, unsigned long, unsigned int, unsigned int, unsigned int, unsigned long, "
     "unsigned int*, unsigned int, unsigned int*, unsigned int const*, unsigned int const*, "
     "unsigned int const*, unsigned long*, unsigned long*, std::byte*, std::byte*)",
     "pplx.combine", COMM, S.Op.COMBINE, "combine", Group.MOE_EP, True),
    # ---- flashinfer / TRT-LLM MoE all-to-all, vLLM all2all backend "flashinfer"
    # NVIDIA/TensorRT-LLM cpp/tensorrt_llm/kernels/communicationKernels/moeAlltoAllKernels.cu
    # (flashinfer.comm.trtllm_moe_alltoall): moeA2ADispatchKernel<TOP_K, ...> /
    # moeA2ACombineKernel<T, ...> (namespace left out: the rule reads the function name)
    ("void moeA2ADispatchKernel<8, false, false>(int const*, DispatchKernelPointers, int, "
     "int, int, int, int, int, int)",
     "trtllm.moe_a2a.dispatch", COMM, S.Op.DISPATCH, "dispatch", Group.MOE_EP, True),
    ("void moeA2ACombineKernel<__nv_bfloat16, 8, false, false>(CombineKernelPointers, int, "
     "int, int, int, int, int)",
     "trtllm.moe_a2a.combine", COMM, S.Op.COMBINE, "combine", Group.MOE_EP, True),
    # flashinfer include/flashinfer/comm/trtllm_alltoall.cuh (MnnvlMoe): one kernel, both ways
    ("moeAllToAllKernel(MoeEpWorldInfo, MoeCommWorkspace, SendRecvDataInfo, SendRecvDispls, "
     "SendRecvDispls)",
     "trtllm.moe_a2a.two_sided", COMM, S.Op.ALL_TO_ALL, "collective", Group.MOE_EP, True),
    # ---- custom all-reduce
    # vllm-project/vllm csrc/custom_all_reduce.cuh (namespace vllm)
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, "
     "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
     "custom_ar.v1", COMM, S.Op.ALL_REDUCE, "collective", Group.TP, True),
    ("void vllm::cross_device_reduce_2stage<__nv_bfloat16, 8>(vllm::RankData*, "
     "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
     "custom_ar.v1", COMM, S.Op.ALL_REDUCE, "collective", Group.TP, True),
    # sgl-project/sglang sgl-kernel/csrc/allreduce/custom_all_reduce.cuh (namespace sglang)
    ("void sglang::cross_device_reduce_2stage<half, 4>(sglang::RankData*, "
     "sglang::RankSignals, sglang::Signal*, half*, int, int)",
     "custom_ar.v1", COMM, S.Op.ALL_REDUCE, "collective", Group.TP, True),
    # sglang sgl-kernel/csrc/allreduce/trt_reduce_internal.cu (namespace trt_llm)
    ("void trt_llm::oneShotAllReduceKernel<__nv_bfloat16, 8>(trt_llm::AllReduceParams)",
     "trtllm.custom_ar", COMM, S.Op.ALL_REDUCE, "collective", Group.TP, True),
    # NVIDIA/TensorRT-LLM cpp/tensorrt_llm/kernels/customAllReduceKernels.cu
    ("void tensorrt_llm::kernels::twoShotAllReduceKernel<__nv_bfloat16, 8, true, false>("
     "tensorrt_llm::kernels::AllReduceParams)",
     "trtllm.custom_ar", COMM, S.Op.ALL_REDUCE, "collective", Group.TP, True),
    # TensorRT-LLM cpp/tensorrt_llm/kernels/communicationKernels/allReduceFusionKernels.cu:
    # all-reduce + residual + RMSNorm in one kernel -> fused
    ("void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<"
     "(tensorrt_llm::kernels::ar_fusion::AllReduceFusionPattern)1, __nv_bfloat16, 8, true, "
     "true>(tensorrt_llm::kernels::ar_fusion::AllReduceFusionParams)",
     "trtllm.ar_fusion", FUSED, S.Op.ALL_REDUCE, "collective", Group.TP, True),
    # flashinfer-ai/flashinfer include/flashinfer/comm/trtllm_allreduce_fusion.cuh
    ("void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_twoshot_sync<"
     "__nv_bfloat16, 8, true>(flashinfer::trtllm_allreduce_fusion::AllReduceFusionParams<"
     "__nv_bfloat16>, std::array<int, 8ul>, std::array<int, 8ul>)",
     "flashinfer.ar_fusion", FUSED, S.Op.ALL_REDUCE, "collective", Group.TP, True),
    # flashinfer include/flashinfer/comm/trtllm_mnnvl_allreduce.cuh: twoshot_allreduce_kernel
    ("void flashinfer::trtllm_mnnvl_allreduce::twoshot_allreduce_kernel<8, __nv_bfloat16>("
     "__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16**, __nv_bfloat16*, int, int, int, int, "
     "unsigned int, unsigned int*, bool)",
     "flashinfer.ar", COMM, S.Op.ALL_REDUCE, "collective", Group.TP, True),
    # ROCm/aiter csrc/include/custom_all_reduce.cuh (namespace aiter)
    ("void aiter::cross_device_reduce_1stage<__hip_bfloat16, 8>(aiter::RankData*, "
     "aiter::RankSignals, aiter::Signal*, __hip_bfloat16*, int, int)",
     "aiter.custom_ar", COMM, S.Op.ALL_REDUCE, "collective", Group.TP, True),
    ("void aiter::allreduce_fusion_kernel_1stage<__hip_bfloat16, 8>(aiter::RankData*, "
     "aiter::RankSignals, aiter::Signal*, __hip_bfloat16*, __hip_bfloat16*, int, int)",
     "aiter.ar_fusion", FUSED, S.Op.ALL_REDUCE, "collective", Group.TP, True),
    # "fused allreduce rmsnorm first step": the reduce-scatter, pure communication ...
    ("void aiter::reduce_scatter_cross_device_store<__hip_bfloat16, 8>(aiter::RankData*, "
     "aiter::RankSignals, aiter::Signal*, int, int)",
     "aiter.ar_fusion.rs", COMM, S.Op.ALL_REDUCE, "collective", Group.TP, True),
    # ... then the load of the peers' slices with the RMSNorm: fused, not the instance
    ("void aiter::local_device_load_rmsnorm_naive<__hip_bfloat16, 512, 1>(aiter::RankSignals, "
     "__hip_bfloat16*, __hip_bfloat16*, __hip_bfloat16*, __hip_bfloat16*, float, int, int)",
     "aiter.ar_fusion.norm", FUSED, S.Op.ALL_REDUCE, "epilogue", Group.TP, False),
    # ---- DeepEP V2 since def8651 (EPBuffer): deepseek-ai/DeepEP deep_ep/include/deep_ep/
    # impls/ep/dispatch.cuh, combine.cuh (namespace deep_ep::ep; ElasticBuffer's were
    # deep_ep::elastic, tests/rules/test_deepep.py) and impls/bucket/all_reduce/nvlink.cuh
    ("void deep_ep::ep::dispatch_impl<true, false, false, 24, 4, 16, 8, 7168, 0, 4096, 256, "
     "8, 1, 24, 100000000000l>(void*, float*, long*, float*, int*, int*, int*, int*, int*, "
     "int, int, int, ncclDevComm, ncclWindow_vidmem*, void*, void*, void*, int)",
     "deepep.v2.dispatch", COMM, S.Op.DISPATCH, "dispatch", Group.MOE_EP, True),
    ("void deep_ep::ep::combine_impl<true, false, false, 24, 16, 8, 7168, 4096, 256, 8, 24, "
     "100000000000l>(__nv_bfloat16*, float*, int*, int*, ncclDevComm, ncclWindow_vidmem*, "
     "void*, void*, int, int)",
     "deepep.v2.combine", COMM, S.Op.COMBINE, "combine", Group.MOE_EP, True),
    ("void deep_ep::bucket::nvlink_all_reduce<8, 32, 512, 100000000000l, false, 0>("
     "ncclDevComm, ncclWindow_vidmem*, void*, void*, float, int, deep_ep::comm::BucketList)",
     "deepep.bucket.all_reduce", COMM, S.Op.ALL_REDUCE, "collective", None, True),
    # ---- NCCL symmetric kernels: NVIDIA/nccl src/device/symmetric/generate.py
    # (kernel_cname: ncclSymkDevKernel_<coll>_<algo>[_<red>_<ty>]; NCCL 2.27 spelled it
    # ncclSymDevKernel_ with ncclSymDevArgs). LDMC/STMC algorithms are the NVLS (multimem) ones.
    ("ncclSymkDevKernel_AllReduce_RSxLDMC_AGxSTMC_sum_bf16(ncclSymkDevWorkArgs4K)",
     "nccl.all_reduce", COMM, S.Op.ALL_REDUCE, "collective", None, True),
    ("ncclSymkDevKernel_AllGather_LLMC(ncclSymkDevWorkArgs4K)",
     "nccl.all_gather", COMM, S.Op.ALL_GATHER, "collective", None, True),
    ("ncclSymkDevKernel_ReduceScatter_RailA2A_LsaLD_sum_f32(ncclSymkDevWorkArgs4K)",
     "nccl.reduce_scatter", COMM, S.Op.REDUCE_SCATTER, "collective", None, True),
    ("ncclSymDevKernel_AllReduce_AGxLL_R_sum_bf16(ncclSymDevArgs)",
     "nccl.all_reduce", COMM, S.Op.ALL_REDUCE, "collective", None, True),
    # ---- mscclpp: microsoft/mscclpp apps/nccl/src/allgather.hpp (allgather6) and the
    # algorithm collection (mscclpp::algorithm::allreducePacket); names without a library
    # prefix, parameters with mscclpp types
    ("void allgather6<false>(void*, mscclpp::DeviceHandle<mscclpp::MemoryChannel>*, "
     "unsigned long, unsigned long, unsigned long, unsigned long, unsigned long)",
     "mscclpp.all_gather", COMM, S.Op.ALL_GATHER, "collective", None, True),
    ("void mscclpp::algorithm::allreducePacket<(mscclpp::ReduceOp)0, __nv_bfloat16>("
     "__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, "
     "mscclpp::DeviceHandle<mscclpp::MemoryChannel>*, unsigned long, unsigned long, int, int, "
     "int, unsigned long, void*, unsigned int)",
     "mscclpp", COMM, S.Op.ALL_REDUCE, "collective", None, True),
]

# Ascend HCCL MC2 ops: CANN ops-transformer mc2/ op types, as the Ascend profiler names the
# kernel (op type) and the torch_npu cpu op (torch_npu.npu_mm_all_reduce_base, ...)
MC2: list[tuple[str, str, str, str, str, str, str, bool]] = [
    ("MatmulAllReduce", Kind.KERNEL, "npu.mc2.matmul_all_reduce", FUSED, S.Op.ALL_REDUCE,
     "fused", Group.TP, True),
    ("MatmulAllReduceAddRmsNorm", Kind.KERNEL, "npu.mc2.matmul_all_reduce_norm", FUSED,
     S.Op.ALL_REDUCE, "fused", Group.TP, True),
    ("AllGatherMatmul", Kind.KERNEL, "npu.mc2.all_gather_matmul", FUSED, S.Op.ALL_GATHER,
     "fused", Group.TP, True),
    ("MatmulReduceScatter", Kind.KERNEL, "npu.mc2.matmul_reduce_scatter", FUSED,
     S.Op.REDUCE_SCATTER, "fused", Group.TP, True),
    ("BatchMatMulReduceScatterAlltoAll", Kind.KERNEL, "npu.mc2.bmm_rs_a2a", FUSED,
     S.Op.ALL_TO_ALL, "fused", Group.MOE_EP, True),
    ("AlltoAllAllGatherBatchMatMul", Kind.KERNEL, "npu.mc2.a2a_ag_bmm", FUSED,
     S.Op.ALL_TO_ALL, "fused", Group.MOE_EP, True),
    ("npu::npu_mm_all_reduce_base", Kind.CPU_OP, "npu.mc2.wrapper.all_reduce", FUSED,
     S.Op.ALL_REDUCE, "wrapper", Group.TP, False),
    ("npu::npu_all_gather_base_mm", Kind.CPU_OP, "npu.mc2.wrapper.all_gather", FUSED,
     S.Op.ALL_GATHER, "wrapper", Group.TP, False),
    ("npu::npu_mm_reduce_scatter_base", Kind.CPU_OP, "npu.mc2.wrapper.reduce_scatter", FUSED,
     S.Op.REDUCE_SCATTER, "wrapper", Group.TP, False),
]


def _rule_ids(rows: list[tuple[str, str]]) -> list[str | None]:
    """The packaged kernel rule each (name, kind) matches first."""
    rules = packaged_rules()
    frame = pd.DataFrame({S.NAME: [n for n, _ in rows], S.KIND: [k for _, k in rows]})
    return [rules.kernel_classes[i].id if i >= 0 else None for i in classify(frame, rules)]


def _check(row: dict[str, Any], cls: str, op: str, role: str, group: str | None,
           instance: bool) -> None:
    assert (row[S.KERNEL_CLASS], row[S.OP], row[S.KERNEL_ROLE]) == (cls, op, role), row[S.NAME]
    assert row[S.IS_INSTANCE] is instance, row[S.NAME]
    if group is not None:
        assert row[S.GROUP] == group, (row[S.NAME], row[S.REASON])


@pytest.mark.parametrize("family", FAMILIES, ids=[f[1] + ":" + f[0][:40] for f in FAMILIES])
def test_gpu_family_from_its_real_kernel_name(family: tuple[Any, ...]) -> None:
    # GIVEN one kernel of the family, without any metadata, on a TP8 / EP8 GPU run
    name, rule_id, cls, op, role, group, instance = family
    assert _rule_ids([(name, Kind.KERNEL)]) == [rule_id]
    # WHEN attributed THEN class, op, role, default group and instance follow the source
    (row,) = attribute(make_run([kernel(name)]), GPU)
    _check(row, cls, op, role, group, instance)


@pytest.mark.parametrize("family", MC2, ids=[f[0] for f in MC2])
def test_hccl_mc2_ops_are_fused_on_ascend(family: tuple[Any, ...]) -> None:
    # GIVEN an MC2 op (matmul and collective in one op) on an NPU run
    name, kind, rule_id, cls, op, role, group, instance = family
    assert _rule_ids([(name, kind)]) == [rule_id]
    (row,) = attribute(make_run([kernel(name, **{S.KIND: kind})]), NPU)
    # THEN it is fused, never pure communication
    _check(row, cls, op, role, group, instance)


def test_generic_dispatch_and_combine_kernel_names_are_not_pplx() -> None:
    # GIVEN kernels merely called dispatchKernel / combineKernel, without pplx's template
    # signature (e.g. a user's own helper)
    names = ["void dispatchKernel<float>(float*, int)", "void combineKernel(float*, int)"]
    # THEN no pplx rule claims them
    assert not any(i and i.startswith("pplx") for i in _rule_ids(
        [(n, Kind.KERNEL) for n in names]))


def test_the_parser_reads_nccl_kernel_ops_from_the_packaged_rules() -> None:
    # GIVEN the NCCL kernel rules as the rule set validates them
    from tracekit.parsers.kineto.comm import _nccl_kernel_rules

    nccl = [(r.match, r.op or S.Op.OTHER) for r in packaged_rules().kernel_classes
            if r.library == "nccl" and (not r.kinds or Kind.KERNEL in r.kinds)]
    # THEN the parser's op-by-name table is those rules, in order (one copy of the names)
    assert [(p.pattern, op) for p, op in _nccl_kernel_rules()] == nccl
    assert len(nccl) >= 9
