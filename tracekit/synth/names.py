"""Names a synthetic trace uses: NCCL kernels by era, SGLang/DeepEP kernels, Python frames."""

from __future__ import annotations

from tracekit import schema

Op = schema.Op

# Kernel-name collective and the c10d / record_param_comms names of each schema.Op.
NCCL_COLL = {
    Op.ALL_REDUCE: "AllReduce",
    Op.ALL_GATHER: "AllGather",
    Op.REDUCE_SCATTER: "ReduceScatter",
    Op.BROADCAST: "Broadcast",
    Op.REDUCE: "Reduce",
}
C10D = {  # op -> (c10d dispatcher op, record_param_comms "Collective name", nccl: title)
    Op.ALL_REDUCE: ("c10d::allreduce_", "allreduce", "nccl:all_reduce"),
    Op.ALL_GATHER: ("c10d::_allgather_base_", "_allgather_base", "nccl:_all_gather_base"),
    Op.REDUCE_SCATTER: ("c10d::_reduce_scatter_base_", "_reduce_scatter_base",
                        "nccl:_reduce_scatter_base"),
}
_REDUCING = {Op.ALL_REDUCE, Op.REDUCE_SCATTER, Op.REDUCE}
_OLD_CTYPE = "__nv_bfloat16"
_TY = "bf16"


def nccl_kernel(op: str, version: tuple[int, int], symmetric: bool = False) -> str:
    """The demangled NCCL kernel name CUPTI reports for a bf16 ``op`` in NCCL ``version``."""
    coll = NCCL_COLL[op]
    reducing = op in _REDUCING
    if symmetric and version >= (2, 27) and op == Op.ALL_REDUCE:
        return "ncclSymkDevKernel_AllReduce_RSxLD_AGxST_sum_bf16"
    if version >= (2, 19):
        body = f"ncclDevKernel_{coll}_Sum_{_TY}_RING_LL" if reducing else \
            f"ncclDevKernel_{coll}_RING_LL"
        if version >= (2, 23):
            return body + "(ncclDevKernelArgsStorage<4096ul>)"
        return body + "(ncclDevComm*, unsigned long, ncclWork*)"
    ctype = _OLD_CTYPE if reducing else "int8_t"
    body = f"ncclKernel_{coll}_RING_LL_Sum_{ctype}"
    if version >= (2, 13):
        return body + "(ncclDevComm*, unsigned long, ncclWork*)"
    if version >= (2, 12):
        return body + "(ncclDevComm*, ncclWorkElem)"
    return body + "(ncclWorkElem)"


def custom_ar_kernel(version: tuple[int, int], n: int, nbytes: int) -> str:
    """SGLang's custom all-reduce: v1 (sgl-kernel) before NCCL 2.23 here, v2 (JIT) after."""
    if version >= (2, 23):
        shots = 1 if nbytes <= 512 * 1024 else 2
        return ("void (anonymous namespace)::all_reduce_kernel<(anonymous namespace)::"
                f"AllReducePullImpl<__nv_bfloat16, {n}>, {shots}>(void*, void const*, "
                "unsigned int, (anonymous namespace)::AllReduceParams)")
    stage = "1stage" if nbytes <= 512 * 1024 else "2stage"
    return (f"void sglang::cross_device_reduce_{stage}<__nv_bfloat16, {n}>(sglang::RankData*, "
            "sglang::RankSignals, sglang::Signal*, sglang::Signal*, __nv_bfloat16*, int, int)")


def deepep_kernels(mode: str, n: int, internode: bool, hidden: int) -> dict[str, str]:
    """DeepEP v1 kernels by role for ``mode`` "normal" or "ll" (``n``: ranks of the buffer).

    Names and template parameters follow deepseek-ai/DeepEP csrc/kernels/{layout,intranode,
    internode,internode_ll}.cu (v1, before b306af0): intranode kernels are templated on the
    rank count, internode ones on (low-latency mode, RDMA ranks).
    """
    if mode == "ll":
        return {
            "dispatch": f"void deep_ep::internode_ll::dispatch<true, false, {hidden}>(void*, "
                        "float*, int*, long*, void*, int*, void*, int*, long*, void const*, "
                        "long const*, int*, int*, int, int, int, int, int, int, int, bool, int*, "
                        "int*)",
            "combine": f"void deep_ep::internode_ll::combine<false, {hidden}, 9, 8>(void*, void*, "
                       "int*, void*, void const*, long const*, float const*, int const*, "
                       "long const*, int*, int*, int, int, int, int, int, int, int, int, bool, "
                       "int*, int*)",
        }
    layout = ("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, "
              "int*, bool*, int, int, int, int)")
    if internode:
        rdma = max(2, n // 8)
        return {
            "layout": layout,
            "notify": f"void deep_ep::internode::notify_dispatch<false, {rdma}>(int const*, int*, "
                      "int, int const*, int*, int const*, int*, int, bool const*, int, int, int, "
                      "int, int, int, int, int*, int*, int*, int*, void*, void**, int**, int, "
                      "int, int)",
            "dispatch": f"void deep_ep::internode::dispatch<false, {rdma}, false, 8192, 7>(int4*, "
                        "float*, long*, float*, deep_ep::internode::SourceMeta*, int4 const*, "
                        "float const*, long const*, float const*, int*, int*, int*, int*, "
                        "int const*, int const*, int const*, int const*, int, int, int, int, "
                        "int, bool const*, void*, int, int, void**, int, int, int, int)",
            "cached_notify": "void deep_ep::internode::cached_notify<false, 8192>(int, int, int, "
                             "int, int*, int, int, int const*, int const*, int*, void*, void**, "
                             "int**, int, int, int, bool, int)",
            "combine": f"void deep_ep::internode::combine<false, {rdma}, __nv_bfloat16, 16, 4, 4, "
                       "16, 24>(int4*, float*, bool const*, int4 const*, float const*, "
                       "int const*, int const*, deep_ep::internode::SourceMeta const*, "
                       "int const*, int const*, int const*, int, int, int, int, void*, int, int, "
                       "void**, int, int, int, int)",
        }
    return {
        "layout": layout,
        "notify": f"void deep_ep::intranode::notify_dispatch<{n}>(int const*, int*, int, "
                  "int const*, int*, int, int, int const*, int*, int*, int, int, void**, int**, "
                  "int)",
        "dispatch": f"void deep_ep::intranode::dispatch<{n}, 768, 8192>(int4*, float*, long*, "
                    "float*, int*, int*, int4 const*, float const*, long const*, float const*, "
                    "bool const*, int const*, int, int, int, int, int, int, int, void**, int, "
                    "int, int)",
        "cached_notify": f"void deep_ep::intranode::cached_notify_combine<{n}>(void**, int*, int, "
                         "int, int, int**, int)",
        "combine": f"void deep_ep::intranode::combine<__nv_bfloat16, {n}, 768, 4096>("
                   "__nv_bfloat16*, float*, __nv_bfloat16 const*, float const*, int const*, "
                   "int const*, int const*, int*, int, int, int, int, void**, int, int, int)",
    }


# Compute kernels of a decoder layer: (cpu op, kernel), cycled through.
COMPUTE = (
    ("sgl_kernel::rmsnorm", "void flashinfer::norm::RMSNormKernel<8u, __nv_bfloat16>"
     "(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, unsigned int, unsigned int, float)"),
    ("aten::mm", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
     "_execute_segment_k_off_kernel__5x_cublas"),
    ("sgl_kernel::apply_rope_pos_ids_cos_sin_cache", "void flashinfer::BatchQKApplyRotary"
     "PosIdsCosSinCacheKernel<true, 64u, 8u, 16u, __nv_bfloat16, long>"),
    ("sglang::mla_decode", "void flashinfer::mla::BatchMLAPagedAttentionKernel<flashinfer::mla::"
     "KernelTraits<false, 64u, 2u, 64u, 512u, 64u, __nv_bfloat16, __nv_bfloat16>>"),
    ("aten::add", "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add"
     "<c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add"
     "<c10::BFloat16>, at::detail::Array<char*, 3>)"),
    ("sgl_kernel::topk_softmax", "void moe::topkGatingSoftmax<8, 256, 4, 16, 32, int>(float const*,"
     " bool const*, float*, int, int*, int*, int, int, int)"),
    ("sglang::fused_moe", "fused_moe_kernel"),
    ("sgl_kernel::silu_and_mul", "void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, "
     "&flashinfer::activation::silu>(__nv_bfloat16*, __nv_bfloat16 const*, int)"),
)

# The python frames around each compute op of COMPUTE (same order): module call, then layer.
MODULE_CALL = "torch/nn/modules/module.py(1784): _call_impl"
COMPUTE_FRAMES = (
    "sglang/srt/layers/layernorm.py(183): forward_cuda",
    "sglang/srt/layers/linear.py(1521): forward",
    "sglang/srt/layers/rotary_embedding.py(212): forward_cuda",
    "sglang/srt/layers/attention/flashinfer_mla_backend.py(540): forward_decode",
    "sglang/srt/models/deepseek_v2.py(2431): forward",
    "sglang/srt/layers/moe/topk.py(388): forward_cuda",
    "sglang/srt/layers/moe/fused_moe_triton/layer.py(912): forward",
    "sglang/srt/layers/activation.py(71): forward_cuda",
)
COPY_FRAME = "sglang/srt/layers/dp_attention.py(398): memcpy_triton"

# Python frames (file(line): function) of the call stacks.
F = {
    "loop": "sglang/srt/managers/scheduler.py(1103): event_loop_normal",
    "run_batch": "sglang/srt/managers/scheduler.py(2236): run_batch",
    "forward": "sglang/srt/model_executor/model_runner.py(2071): forward",
    "forward_extend": "sglang/srt/model_executor/model_runner.py(1970): forward_extend",
    "forward_decode": "sglang/srt/model_executor/model_runner.py(1941): forward_decode",
    "replay": "sglang/srt/model_executor/cuda_graph_runner.py(812): replay",
    "graph_replay": "<built-in method replay of torch._C._CUDAGraph object at 0x7f3a2c1e4b30>",
    "model": "sglang/srt/models/deepseek_v2.py(2621): forward",
    "layer": "sglang/srt/models/deepseek_v2.py(2402): forward",
    "attn": "sglang/srt/models/deepseek_v2.py(1487): forward",
    "moe": "sglang/srt/models/deepseek_v2.py(1096): forward",
    "forward_normal": "sglang/srt/models/deepseek_v2.py(1136): forward_normal",
    "forward_deepep": "sglang/srt/models/deepseek_v2.py(1258): forward_deepep",
    "prepare_mlp": "sglang/srt/layers/communicator.py(412): prepare_mlp",
    "postprocess_layer": "sglang/srt/layers/communicator.py(441): postprocess_layer",
    "row_linear": "sglang/srt/layers/linear.py(1560): forward",
    "tensor_model_parallel_all_reduce":
        "sglang/srt/distributed/communication_op.py(13): tensor_model_parallel_all_reduce",
    "attn_tp_all_reduce": "sglang/srt/layers/dp_attention.py(548): attn_tp_all_reduce",
    "dp_gather_partial": "sglang/srt/layers/dp_attention.py(512): dp_gather_partial",
    "_dp_gather": "sglang/srt/layers/dp_attention.py(489): _dp_gather",
    "_dp_gather_via_all_gather":
        "sglang/srt/layers/dp_attention.py(466): _dp_gather_via_all_gather",
    "_dp_gather_via_all_reduce":
        "sglang/srt/layers/dp_attention.py(422): _dp_gather_via_all_reduce",
    "dp_reduce_scatter_tensor": "sglang/srt/layers/dp_attention.py(580): dp_reduce_scatter_tensor",
    "dp_scatter": "sglang/srt/layers/dp_attention.py(560): dp_scatter",
    "gc.all_reduce": "sglang/srt/distributed/parallel_state.py(616): all_reduce",
    "gc.outplace_all_reduce": "sglang/srt/distributed/parallel_state.py(703): outplace_all_reduce",
    "gc.all_gather_into_tensor":
        "sglang/srt/distributed/parallel_state.py(842): all_gather_into_tensor",
    "gc.reduce_scatter_tensor":
        "sglang/srt/distributed/parallel_state.py(781): reduce_scatter_tensor",
    "gc.reduce_scatterv": "sglang/srt/distributed/parallel_state.py(805): reduce_scatterv",
    "gc.all_gatherv": "sglang/srt/distributed/parallel_state.py(880): all_gatherv",
    "pynccl.group": "sglang/srt/distributed/device_communicators/pynccl.py(352): group_start",
    "ca.custom_all_reduce":
        "sglang/srt/distributed/device_communicators/custom_all_reduce.py(402): custom_all_reduce",
    "c10d_logger": "torch/distributed/c10d_logger.py(81): wrapper",
    "dist.all_reduce": "torch/distributed/distributed_c10d.py(2984): all_reduce",
    "dist.all_gather_into_tensor":
        "torch/distributed/distributed_c10d.py(4102): all_gather_into_tensor",
    "dist.reduce_scatter_tensor":
        "torch/distributed/distributed_c10d.py(4588): reduce_scatter_tensor",
    "deepep.dispatch": "sglang/srt/layers/moe/token_dispatcher/deepep.py(745): dispatch",
    "deepep.combine": "sglang/srt/layers/moe/token_dispatcher/deepep.py(771): combine",
    "deepep.get_dispatch_layout": "deep_ep/buffer.py(284): get_dispatch_layout",
    "deepep.buffer_dispatch": "deep_ep/buffer.py(312): dispatch",
    "deepep.buffer_combine": "deep_ep/buffer.py(402): combine",
    "deepep.ll_dispatch": "deep_ep/buffer.py(521): low_latency_dispatch",
    "deepep.ll_combine": "deep_ep/buffer.py(590): low_latency_combine",
}
