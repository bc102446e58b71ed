"""DeepEP kernels as the library names them: every name below is copied from its source.

Sources (project, file):
* deepseek-ai/DeepEP v1 (commit b306af0^): csrc/kernels/layout.cu (deep_ep::layout::
  get_dispatch_layout<kNumThreads, kNumExpertsPerSM, kNumRanksPerSM>), intranode.cu
  (notify_dispatch<kNumRanks>, cached_notify_dispatch<kNumRanks>, dispatch<kNumRanks,
  kNumThreads, kNumTMABytesPerWarp>, cached_notify_combine<kNumRanks>, combine<dtype_t, ...>),
  internode.cu (notify_dispatch<kLowLatencyMode, kNumRDMARanks>, dispatch<...>,
  cached_notify<kLowLatencyMode, kNumTMABytesPerWarp>, combine<...>), internode_ll.cu
  (dispatch<kUseFP8, kUseUE8M0, kHidden>, combine<kUseLogFMT, kHidden, ...>,
  clean_low_latency_buffer<kNumThreads>); the first release ebfe47e had
  deep_ep::internode::get_dispatch_layout; since b306af0 the same under deep_ep::legacy::.
* deepseek-ai/DeepEP V2 (dd758ca): deep_ep/include/deep_ep/impls/{dispatch,combine,
  dispatch_copy_epilogue,combine_reduce_epilogue,barrier}.cuh in namespace deep_ep::elastic.
* deepseek-ai/profile-data prefill.json / decode.json (DeepSeek's in-house build), as quoted
  in public analyses of those files: dpsk::ep::internode::{notify_dispatch, dispatch,
  cached_notify, combine, dispatch_ll, combine_ll}, dpsk::ep::cuda::get_dispatch_layout;
  SGLang prefill traces of 2025: deep_ep::internode::get_dispatch_layout<256, 32, 8>.
"""

from __future__ import annotations

from typing import Any

from rules.test_engine import attribute, kernel, make_run

from tracekit import schema as S
from tracekit.rules.labels import PathLabel
from tracekit.schema import Group, KernelClass, Phase
from tracekit.topology import ParallelConfig, Topology

LAYOUT_V1 = ("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, "
             "int*, bool*, int, int, int, int)")
LAYOUT_SGLANG_2025 = ("void deep_ep::internode::get_dispatch_layout<256, 32, 8>(long const*, "
                      "int*, int*, int*, bool*, int, int, int, int)")
LAYOUT_DPSK = ("void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, "
               "int*, bool*, int, int, int, int)")
INTRA = {
    "notify": "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*, "
              "int*, int, int, int const*, int*, int*, int, int, void**, int**, int)",
    "dispatch": "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, long*, float*, "
                "int*, int*, int4 const*, float const*, long const*, float const*, bool const*, "
                "int const*, int, int, int, int, int, int, int, void**, int, int, int)",
    "cached_notify": "void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int, int, "
                     "int, int**, int)",
    "combine": "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>(__nv_bfloat16*, "
               "float*, __nv_bfloat16 const*, float const*, int const*, int const*, int const*, "
               "int*, int, int, int, int, void**, int, int, int)",
}
# DeepSeek's prefill trace (profile-data prefill.json): internode, cached_notify before combine
DPSK = {
    "notify": "void dpsk::ep::internode::notify_dispatch<false, 4>(int const*, long*, int, "
              "int const*, int*, int const*, int*, int, bool const*, int, int, int, int, int, "
              "int, int, int*, int*, int*, int*, void*, void**, int**, int, int, int*, int)",
    "dispatch": "void dpsk::ep::internode::dispatch<false, 4, false, 4>(int4*, float*, long*, "
                "float*, dpsk::ep::internode::SourceMeta*, int4 const*, float const*)",
    "cached_notify": "void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int*, "
                     "int, int, int const*, int const*, int*, void*, void**, int**, int, int, "
                     "int, int*, bool, int)",
    "combine": "void dpsk::ep::internode::combine<false, 4, __nv_bfloat16, 4, 4, 16, 24>(int4*, "
               "float*, bool const*, int4 const*, float const*, int4 const*, int4 const*)",
}
LL_V1 = ("void deep_ep::internode_ll::dispatch<true, false, 7168>(void*, float*, int*, long*)",
         "void deep_ep::internode_ll::combine<false, 7168, 9, 8>(void*, void*, int*, void*)")
LL_LEGACY = ("void deep_ep::legacy::internode_ll::dispatch<true, false, 7168>(void*, float*)",
             "void deep_ep::legacy::internode_ll::combine<false, 7168, 9, 8>(void*, void*)")
LL_DPSK = ("void dpsk::ep::internode::dispatch_ll<true, 3, 10, 7168>(void*, float*, int*, long*)",
           "void dpsk::ep::internode::combine_ll<3, 10, 7168, 9>(void*, void*, int*, void*)")
V2 = ("void deep_ep::elastic::dispatch_impl<true, 8, 7168, 8, 4, 1, 0, 2, 8, 128, 64, 32, 1, 0, "
      "512>(void*)",
      "void deep_ep::elastic::dispatch_copy_epilogue_impl<false, false, false, 8, 7168>(void*)",
      "void deep_ep::elastic::combine_impl<true, 8, 7168, 8, 4, 1, 2, 8, 128, 64, 32, 512>(void*)",
      "void deep_ep::elastic::combine_reduce_epilogue_impl<false, false, 8, 7168>(void*)")

EP_TOPO = Topology(ParallelConfig(tp=16, dp=16, enable_dp_attention=True, ep=16))


def _comm_stream(names: list[str], stream: int = 25) -> list[dict[str, Any]]:
    return [kernel(n, **{S.TID: stream}) for n in names]


def _normal_layer(k: dict[str, str], layout: str) -> list[str]:
    return [layout, k["notify"], k["dispatch"], k["cached_notify"], k["combine"]]


def test_normal_mode_notify_kernels_join_the_operation_they_prepare() -> None:
    # GIVEN two layers of DeepEP normal mode, intranode (v1) and internode (DeepSeek's
    # in-house names), each: get_dispatch_layout, notify, dispatch, cached_notify, combine
    for k, layout in ((INTRA, LAYOUT_V1), (DPSK, LAYOUT_DPSK)):
        rows = attribute(make_run(_comm_stream(_normal_layer(k, layout) * 2)), EP_TOPO)
        # THEN get_dispatch_layout is compute (it moves no data) and no collective
        lay = rows[0]
        assert lay[S.KERNEL_CLASS] == KernelClass.COMPUTE and lay[S.KERNEL_ROLE] == "layout"
        assert lay[S.STATUS] is None and lay[S.IS_INSTANCE] is False
        notify, dispatch, cached, combine = rows[1:5]
        # the notify kernels are the synchronisation part of what follows them: same op,
        # phase, path, group and logical collective, role notify, not the instance
        assert (notify[S.OP], notify[S.PHASE], notify[S.PATH]) == (
            S.Op.DISPATCH, Phase.DISPATCH, PathLabel.DEEPEP_NORMAL_DISPATCH)
        assert (cached[S.OP], cached[S.PHASE], cached[S.PATH]) == (
            S.Op.COMBINE, Phase.COMBINE, PathLabel.DEEPEP_NORMAL_COMBINE)
        assert notify[S.LOGICAL_ID] == dispatch[S.LOGICAL_ID] != combine[S.LOGICAL_ID]
        assert cached[S.LOGICAL_ID] == combine[S.LOGICAL_ID]
        for note in (notify, cached):
            assert note[S.KERNEL_ROLE] == "notify" and note[S.IS_INSTANCE] is False
            assert note[S.KERNEL_CLASS] == KernelClass.COMM
        # ... with the verdict of what it prepares, the reason saying so
        for note, op, prepared in ((notify, "dispatch", dispatch), (cached, "combine", combine)):
            assert (note[S.STATUS], note[S.RULE_ID]) == (prepared[S.STATUS], prepared[S.RULE_ID])
            assert note[S.REASON] == (f"synchronisation part of the {op} it prepares "
                                      f"({prepared[S.NAME][:80]}): {prepared[S.REASON]}")
        assert [r[S.IS_INSTANCE] for r in (dispatch, combine)] == [True, True]
        # every DeepEP collective is on the EP group (ep > 1), in the layer of its operation
        comm = [r for r in rows if r[S.STATUS] is not None]
        assert {r[S.GROUP] for r in comm} == {Group.MOE_EP}
        assert [r[S.LAYER] for r in comm] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_internode_cached_notify_before_a_cached_dispatch_is_in_the_dispatch() -> None:
    # GIVEN internode cached_notify (is_cached_dispatch: the kernel name is the same) before a
    # cached dispatch, and again before a combine
    names = [DPSK["cached_notify"], DPSK["dispatch"], DPSK["cached_notify"], DPSK["combine"]]
    rows = attribute(make_run(_comm_stream(names)), EP_TOPO)
    # THEN each takes the op and phase of the kernel that follows it on the stream
    assert [r[S.OP] for r in rows] == [S.Op.DISPATCH] * 2 + [S.Op.COMBINE] * 2
    assert [r[S.PHASE] for r in rows] == [Phase.DISPATCH] * 2 + [Phase.COMBINE] * 2


def test_notify_on_another_stream_is_not_joined() -> None:
    # GIVEN a cached_notify on stream 25 and a combine on stream 7 (not what it prepares)
    run = make_run([kernel(DPSK["cached_notify"], **{S.TID: 25}),
                    kernel(DPSK["combine"], **{S.TID: 7})])
    notify, combine = attribute(run, EP_TOPO)
    # THEN the notify gets no op or phase borrowed from an unrelated stream
    assert notify[S.OP] is None and notify[S.PHASE] is None
    assert notify[S.LOGICAL_ID] != combine[S.LOGICAL_ID]


def test_low_latency_and_v2_kernels() -> None:
    # GIVEN low-latency dispatch/combine in three spellings, and V2 (ElasticBuffer) kernels
    for pair in (LL_V1, LL_LEGACY, LL_DPSK):
        rows = attribute(make_run(_comm_stream(list(pair) * 2, stream=7)), EP_TOPO)
        # THEN low-latency paths and phases, EP group, one layer per pair
        assert [r[S.PATH] for r in rows[:2]] == [PathLabel.DEEPEP_LL_DISPATCH,
                                                 PathLabel.DEEPEP_LL_COMBINE]
        assert [r[S.LAYER] for r in rows] == [0, 0, 1, 1]
        assert {r[S.GROUP] for r in rows} == {Group.MOE_EP}
    rows = attribute(make_run(_comm_stream(list(V2))), EP_TOPO)
    assert [r[S.PATH] for r in rows] == [PathLabel.DEEPEP_V2_DISPATCH, None,
                                         PathLabel.DEEPEP_V2_COMBINE, None]
    assert [r[S.KERNEL_CLASS] for r in rows] == [KernelClass.COMM, KernelClass.COMPUTE] * 2
    assert [r[S.PHASE] for r in rows[::2]] == [Phase.DISPATCH, Phase.COMBINE]


def test_layout_in_any_namespace_and_cub_kernels_are_compute() -> None:
    # GIVEN get_dispatch_layout as SGLang's 2025 build and DeepSeek's build name it, and a
    # CUB kernel of DeepSeek's sampler whose namespace merely contains 'dpsk::ep::'
    names = [LAYOUT_SGLANG_2025, LAYOUT_DPSK,
             "void cdpsk::ep::CUB_200200_900_NS::DeviceScanKernel<int>(int*)"]
    rows = attribute(make_run(_comm_stream(names)), EP_TOPO)
    # THEN all three are compute
    assert [r[S.KERNEL_CLASS] for r in rows] == [KernelClass.COMPUTE] * 3


def test_deepep_group_without_an_ep_layout_and_on_npu() -> None:
    # GIVEN DeepEP kernels where the layout has no EP group (ep == 1), and on NPU
    rows = attribute(make_run(_comm_stream(list(LL_V1))), Topology(ParallelConfig(tp=8)))
    # THEN the buffer's group is TP (SGLang builds it on the TP group on CUDA) ...
    assert {r[S.GROUP] for r in rows} == {Group.TP}
    npu = attribute(make_run(_comm_stream(list(LL_V1))),
                    Topology(ParallelConfig(tp=8, ep=8, npu=True)))
    # ... and MOE_EP on NPU, where it is a communicator of its own
    assert {r[S.GROUP] for r in npu} == {Group.MOE_EP}
