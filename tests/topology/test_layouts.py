"""vLLM and Megatron-core layouts: member lists against the upstream formulas, written out here.

Expected groups come from the frameworks' own sources, not from tracekit:
* Megatron-LM ``megatron/core/parallel_state.py``: the docstring examples of
  ``generate_masked_orthogonal_rank_groups`` and ``initialize_model_parallel``, and the
  equation ``global_rank = tp_rank + cp_rank * tp + dp_rank * tp * cp + pp_rank * tp * cp * dp``
  of the default order tp-cp-ep-dp-pp (the expert grid: etp, ep, expert dp, pp).
* vLLM ``vllm/distributed/parallel_state.py`` (``all_ranks.reshape(-1, dp, pp, pcp, tp)``,
  docstring example of ``initialize_model_parallel``) and
  ``vllm/model_executor/layers/fused_moe/config.py`` (``FusedMoEParallelConfig.make``
  docstring: TP = 2, DP = 2, EP = True gives device d the EP rank d of 4).
"""

from __future__ import annotations

import itertools

import pytest

from tracekit import schema as S
from tracekit.errors import ConfigError
from tracekit.schema import Group
from tracekit.topology import ParallelConfig, Topology
from tracekit.topology.layouts import NAMES, megatron_rank_groups


def groups_varying(sizes: dict[str, int], rank_of, axes: tuple[str, ...]) -> set[tuple[int, ...]]:
    """Every group that varies ``axes`` (first fastest) with the other coordinates fixed."""
    others = [a for a in sizes if a not in axes]
    out = set()
    for fixed in itertools.product(*[range(sizes[a]) for a in others]):
        at = dict(zip(others, fixed, strict=True))
        members = []
        for inner in itertools.product(*[range(sizes[a]) for a in reversed(axes)]):
            at.update(zip(reversed(axes), inner, strict=True))
            members.append(rank_of(**at))
        out.add(tuple(members))
    return out


def as_set(topo: Topology, group: str) -> set[tuple[int, ...]]:
    return set(topo.members_of(group))


# ------------------------------------------------------------------------------ Megatron


def test_megatron_rank_generator_matches_its_docstring_examples() -> None:
    # GIVEN generate_masked_orthogonal_rank_groups' examples: sizes tp 2, dp 3, pp 4 in order
    # tp-dp-pp: dp_group[0] = [0, 2, 4], dp_group[1] = [1, 3, 5], dp_group[7] = [19, 21, 23]
    dp = megatron_rank_groups({"tp": 2, "dp": 3, "pp": 4}, "dp", order="tp-dp-pp")
    assert dp[0] == (0, 2, 4) and dp[1] == (1, 3, 5) and dp[7] == (19, 21, 23)
    # and order tp-pp-dp, sizes 2-2-2: the dp groups are [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert megatron_rank_groups({"tp": 2, "pp": 2, "dp": 2}, "dp", order="tp-pp-dp") == [
        (0, 4), (1, 5), (2, 6), (3, 7)]


def test_megatron_matches_initialize_model_parallel_docstring() -> None:
    # GIVEN initialize_model_parallel's example: 16 GPUs, tp 2, pp 4 (so dp 2)
    topo = Topology(ParallelConfig(layout="megatron", tp=2, pp=4, dp=2))
    # THEN its 8 data-parallel, 8 tensor and 4 pipeline groups, in its order
    assert list(topo.members_of(Group.DP)) == [
        (0, 2), (1, 3), (4, 6), (5, 7), (8, 10), (9, 11), (12, 14), (13, 15)]
    assert list(topo.members_of(Group.TP)) == [(2 * i, 2 * i + 1) for i in range(8)]
    assert list(topo.members_of(Group.PP)) == [
        (0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15)]


@pytest.mark.parametrize("tp,cp,ep,dp,pp,etp", [
    (2, 1, 2, 4, 2, 1), (2, 1, 2, 4, 2, 2), (2, 2, 2, 2, 2, 1), (2, 2, 4, 2, 1, 2),
])
def test_megatron_groups_follow_order_tp_cp_ep_dp_pp(tp: int, cp: int, ep: int, dp: int,
                                                     pp: int, etp: int) -> None:
    # GIVEN Megatron sizes (ep / etp / expert dp re-read the same world)
    topo = Topology(ParallelConfig(layout="megatron", tp=tp, attn_cp=cp, ep=ep, dp=dp, pp=pp,
                                   etp=etp))
    world = tp * cp * dp * pp
    edp = world // (etp * ep * pp)

    def dense(tp_r: int, cp_r: int, dp_r: int, pp_r: int) -> int:
        return tp_r + cp_r * tp + dp_r * tp * cp + pp_r * tp * cp * dp

    def expert(etp_r: int, ep_r: int, edp_r: int, pp_r: int) -> int:
        return etp_r + ep_r * etp + edp_r * etp * ep + pp_r * etp * ep * edp

    d = {"tp_r": tp, "cp_r": cp, "dp_r": dp, "pp_r": pp}
    e = {"etp_r": etp, "ep_r": ep, "edp_r": edp, "pp_r": pp}
    # THEN every group is the set varying its axes, the others fixed
    assert as_set(topo, Group.TP) == groups_varying(d, dense, ("tp_r",))
    assert as_set(topo, Group.ATTN_CP) == groups_varying(d, dense, ("cp_r",))
    assert as_set(topo, Group.DP) == groups_varying(d, dense, ("dp_r",))
    assert as_set(topo, Group.DP_CP) == groups_varying(d, dense, ("cp_r", "dp_r"))
    assert as_set(topo, Group.PP) == groups_varying(d, dense, ("pp_r",))
    assert as_set(topo, Group.MOE_EP) == groups_varying(e, expert, ("ep_r",))
    assert as_set(topo, Group.MOE_TP) == groups_varying(e, expert, ("etp_r",))
    assert as_set(topo, Group.MOE_DP) == groups_varying(e, expert, ("edp_r",))
    assert topo.config.moe_dp == edp and topo.config.world_size == world
    # AND the coordinates are the same equation read backwards
    rows = topo.coords().to_pylist()
    for r in rows:
        assert dense(r[S.TP_RANK], r[S.ATTN_CP_RANK], r[S.DP_RANK], r[S.PP_RANK]) == r[S.RANK]
        assert expert(r[S.MOE_TP_RANK], r[S.MOE_EP_RANK], r[S.MOE_DP_RANK],
                      r[S.PP_RANK]) == r[S.RANK]
    # AND a rank's position in its EP group is its ep rank
    for r in rows:
        assert topo.group_of(r[S.RANK], Group.MOE_EP).index(r[S.RANK]) == r[S.MOE_EP_RANK]


def test_megatron_defaults_and_refusals() -> None:
    # GIVEN no etp: Megatron's expert_tensor_parallel_size defaults to the TP size
    topo = Topology(ParallelConfig(layout="megatron", tp=2, dp=4, ep=2))
    assert topo.config.etp == 2 and topo.config.moe_dp == 2
    # THEN cp == 1 folds dp-cp onto dp; with cp > 1 it is its own group
    assert topo.alias[Group.DP_CP] == Group.DP
    cp2 = Topology(ParallelConfig(layout="megatron", tp=2, attn_cp=2, dp=2, ep=2, etp=1))
    assert Group.DP_CP not in cp2.alias
    assert cp2.groups_with_members({0, 4}) == (Group.DP,)  # dp alone strides tp * cp
    # (expert dp = world / (etp * ep * pp) = 4 has dp-cp's members: two communicators)
    assert cp2.groups_with_members({0, 2, 4, 6}) == (Group.MOE_DP, Group.DP_CP)
    # AND an expert grid that does not divide the world is refused, as Megatron does
    with pytest.raises(ConfigError, match="not divisible by etp\\*ep\\*pp"):
        ParallelConfig(layout="megatron", tp=2, dp=2, ep=4)
    with pytest.raises(ConfigError, match="moe_dp=3 contradicts"):
        ParallelConfig(layout="megatron", tp=2, dp=4, ep=2, moe_dp=3)
    with pytest.raises(ConfigError, match="SGLang's switch"):
        ParallelConfig(layout="megatron", tp=2, dp=2, enable_dp_attention=True)


# ------------------------------------------------------------------------------ vLLM


def test_vllm_matches_initialize_model_parallel_docstring() -> None:
    # GIVEN vLLM's example: 8 GPUs, tp 2, pp 4
    topo = Topology(ParallelConfig(layout="vllm", tp=2, pp=4))
    # THEN 4 TP groups [g0, g1] ... and 2 PP groups [g0, g2, g4, g6], [g1, g3, g5, g7]
    assert list(topo.members_of(Group.TP)) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert as_set(topo, Group.PP) == {(0, 2, 4, 6), (1, 3, 5, 7)}


@pytest.mark.parametrize("tp,dp,pcp,pp", [(2, 2, 1, 1), (2, 2, 2, 2), (1, 4, 1, 2), (4, 2, 1, 1)])
def test_vllm_ep_spans_dp_pcp_tp(tp: int, dp: int, pcp: int, pp: int) -> None:
    # GIVEN vLLM sizes with expert parallel on (ep = DP x PCP x TP)
    n = dp * pcp * tp
    topo = Topology(ParallelConfig(layout="vllm", tp=tp, dp=dp, attn_cp=pcp, pp=pp, ep=n))

    def rank_of(d: int, p: int, c: int, t: int) -> int:  # reshape(-1, dp, pp, pcp, tp)
        return ((d * pp + p) * pcp + c) * tp + t

    sizes = {"d": dp, "p": pp, "c": pcp, "t": tp}
    # THEN TP, PCP, PP and DP vary one axis; EP varies DP, PCP and TP with the stage fixed
    assert as_set(topo, Group.TP) == groups_varying(sizes, rank_of, ("t",))
    assert as_set(topo, Group.ATTN_CP) == groups_varying(sizes, rank_of, ("c",))
    assert as_set(topo, Group.PP) == groups_varying(sizes, rank_of, ("p",))
    assert as_set(topo, Group.DP) == groups_varying(sizes, rank_of, ("d",))
    assert as_set(topo, Group.MOE_EP) == groups_varying(sizes, rank_of, ("t", "c", "d"))
    assert topo.config.enable_expert_parallel and topo.config.etp == 1
    # AND the ep rank is flatten_tp_across_dp_and_pcp: dp_rank * pcp * tp + pcp_rank * tp + tp
    for r in topo.coords().to_pylist():
        flat = r[S.DP_RANK] * pcp * tp + r[S.ATTN_CP_RANK] * tp + r[S.TP_RANK]
        assert r[S.MOE_EP_RANK] == flat
        assert rank_of(r[S.DP_RANK], r[S.PP_RANK], r[S.ATTN_CP_RANK], r[S.TP_RANK]) == r[S.RANK]
        assert topo.group_of(r[S.RANK], Group.MOE_EP).index(r[S.RANK]) == flat


def test_vllm_fused_moe_docstring_and_no_expert_parallel() -> None:
    # GIVEN FusedMoEParallelConfig.make's TP = 2, DP = 2 examples
    on = Topology(ParallelConfig(layout="vllm", tp=2, dp=2, enable_expert_parallel=True))
    off = Topology(ParallelConfig(layout="vllm", tp=2, dp=2))
    # THEN with EP device d has EP = {4, d} and TP {1, 0}; without, TP = {4, d}, EP = {1, 0}
    assert [r[S.MOE_EP_RANK] for r in on.coords().to_pylist()] == [0, 1, 2, 3]
    assert on.config.ep == 4 and on.config.etp == 1
    assert [r[S.MOE_TP_RANK] for r in off.coords().to_pylist()] == [0, 1, 2, 3]
    assert off.config.ep == 1 and off.config.etp == 4
    # AND without EP the experts' flattened TP runs on vLLM's ep group (same communicator)
    assert off.alias[Group.MOE_TP] == Group.MOE_EP
    # AND an EP size that is not DP x PCP x TP is refused
    with pytest.raises(ConfigError, match="ep must be 1 or 4"):
        ParallelConfig(layout="vllm", tp=2, dp=2, ep=2)


def test_vllm_ep_is_its_own_communicator_even_with_tp_members() -> None:
    # GIVEN vLLM dp 1 tp 4 with EP: its ep group has TP's members but is a separate PG
    topo = Topology(ParallelConfig(layout="vllm", tp=4, ep=4))
    # THEN the member set names both (unlike SGLang on GPU, where MOE_EP is TP)
    assert topo.groups_with_members({0, 1, 2, 3}) == (Group.TP, Group.MOE_EP, Group.WORLD)
    sglang = Topology(ParallelConfig(tp=4, ep=4))
    assert sglang.groups_with_members({0, 1, 2, 3}) == (Group.TP, Group.WORLD)


def test_layout_names_and_unknown_layout() -> None:
    from tracekit.cli.topo import LAYOUT_CHOICES

    assert LAYOUT_CHOICES == NAMES
    with pytest.raises(ConfigError, match="unknown layout"):
        ParallelConfig(layout="deepspeed")


def test_tables_conform_for_every_layout() -> None:
    for name, kw in [("vllm", {"tp": 2, "dp": 2, "ep": 4}),
                     ("megatron", {"tp": 2, "dp": 2, "ep": 2, "pp": 2, "etp": 1})]:
        topo = Topology(ParallelConfig(layout=name, **kw))  # type: ignore[arg-type]
        S.validate(topo.coords(), S.RANK_COORDS)
        S.validate(topo.group_table(), S.GROUP_MEMBERS)


# ------------------------------------------------------------------------------ rules engine


def _nccl(ranks: list[int]) -> dict[str, object]:
    return {S.NAME: "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            S.KIND: S.Kind.KERNEL, S.PID: 0, S.TID: 7, S.PG_RANKS: ranks, S.RANK: ranks[0]}


def test_the_rules_engine_reads_megatron_member_lists() -> None:
    # GIVEN a Megatron topology (tp 2, dp 4, ep 2, pp 2; etp defaults to 2, expert dp 2)
    import pyarrow as pa

    from tracekit import api
    from tracekit.rules.engine import attribute_run

    topo = Topology(ParallelConfig(layout="megatron", tp=2, dp=4, ep=2, pp=2))
    rows = [_nccl([0, 2, 4, 6]), _nccl([0, 4]), _nccl([0, 8]), _nccl([0, 2]), _nccl([0, 1])]
    filled = [{S.EVENT_ID: i, S.TS_NS: 1000 * i, S.DUR_NS: 500, **r} for i, r in enumerate(rows)]
    events = S.conform(pa.Table.from_pylist(filled), S.EVENTS)
    info = S.conform(pa.table({S.RANK: pa.array([0], pa.int32())}), S.RANK_INFO)
    run = api.Run(events=events, process_groups=S.empty(S.PROCESS_GROUPS), rank_info=info)
    attributed, _ = attribute_run(run, api.AnalyzeOptions(topology=topo))
    out = attributed.to_pylist()
    # THEN [0, 2, 4, 6] is DP (stride tp * cp), [0, 4] the expert DP (stride etp * ep),
    # [0, 8] PP, [0, 2] EP (stride etp); [0, 1] is TP and expert TP at once (distinct
    # groups with the same members: ambiguous, both named)
    assert [(r[S.GROUP], r[S.STATUS]) for r in out[:4]] == [
        (Group.DP, S.Status.ATTRIBUTED), (Group.MOE_DP, S.Status.ATTRIBUTED),
        (Group.PP, S.Status.ATTRIBUTED), (Group.MOE_EP, S.Status.ATTRIBUTED)]
    assert out[4][S.STATUS] == S.Status.AMBIGUOUS
    assert "candidates TP, MOE_TP" in out[4][S.REASON]
