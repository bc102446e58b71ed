"""Topology: SGLang's rank coordinates, member lists and aliases (DOMAIN.md section 2)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tracekit import schema as S
from tracekit.errors import ConfigError
from tracekit.schema import Group
from tracekit.topology import ParallelConfig, Topology


def coords_of(topo: Topology, rank: int) -> dict[str, int]:
    return topo.coords().slice(rank, 1).to_pylist()[0]


def test_seed_002_attention_grid_tp16_dp8() -> None:
    # GIVEN TP16 / DP8 with DP attention (seed 002's example)
    topo = Topology(ParallelConfig(tp=16, dp=8, enable_dp_attention=True))
    # WHEN rank 10's coordinates are read
    row = coords_of(topo, 10)
    # THEN attn_tp = 2 and TP10 is (attn_dp 5, attn_tp 0); TP11 is its partner
    assert topo.config.attn_tp == 2
    assert (row[S.ATTN_DP_RANK], row[S.ATTN_TP_RANK]) == (5, 0)
    assert topo.group_of(10, Group.ATTN_TP) == (10, 11)
    assert topo.config.world_size == 16  # DPA does not multiply the devices


def test_seed_002_moe_coordinates_and_groups() -> None:
    # GIVEN tp=16, moe_dp=2, ep=4 (moe_tp=2) and tp=8, moe_dp=2, ep=4 (moe_tp=1)
    big = Topology(ParallelConfig(tp=16, moe_dp=2, ep=4))
    small = Topology(ParallelConfig(tp=8, moe_dp=2, ep=4))
    # THEN TP10 is (moe_dp 1, moe_ep 1, moe_tp 0) and the 8-rank groups are as the seed draws
    row = coords_of(big, 10)
    assert (row[S.MOE_DP_RANK], row[S.MOE_EP_RANK], row[S.MOE_TP_RANK]) == (1, 1, 0)
    assert small.members[Group.MOE_EP] == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert small.members[Group.MOE_DP] == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert coords_of(small, 6)[S.MOE_EP_RANK] == 2
    assert big.group_of(10, Group.MOE_TP) == (10, 11)
    assert big.group_of(10, Group.MOE_EP) == (8, 10, 12, 14)


def test_aliases_follow_sglang() -> None:
    # GIVEN configs where SGLang reuses a group instead of creating one
    full = Topology(ParallelConfig(tp=4, ep=4))
    npu = Topology(ParallelConfig(tp=4, ep=4, npu=True))
    cp = Topology(ParallelConfig(tp=8, dp=2, enable_dp_attention=True, attn_cp=2))
    # THEN ATTN_TP is TP when attn_tp == tp, MOE_EP is TP on GPU but not on NPU,
    # and MOE_DP is ATTN_CP when attn_cp > moe_dp
    assert full.alias[Group.ATTN_TP] == Group.TP
    assert full.alias[Group.MOE_EP] == Group.TP
    assert Group.MOE_EP not in npu.alias
    assert cp.alias[Group.MOE_DP] == Group.ATTN_CP
    assert cp.group_of(0, Group.MOE_DP) == cp.group_of(0, Group.ATTN_CP) == (0, 2)


def test_identical_members_are_distinct_communicators_on_npu() -> None:
    # GIVEN npu with ep == tp: MOE_EP has exactly TP's members
    npu = Topology(ParallelConfig(tp=4, ep=4, npu=True))
    gpu = Topology(ParallelConfig(tp=4, ep=4))
    # WHEN the member set [0..3] is looked up
    # THEN both communicators (and the world) are candidates on npu, MOE_EP folds into TP on GPU
    assert npu.groups_with_members([0, 1, 2, 3]) == (Group.TP, Group.MOE_EP, Group.WORLD)
    assert gpu.groups_with_members([0, 1, 2, 3]) == (Group.TP, Group.WORLD)
    assert gpu.same_communicator(Group.MOE_EP, Group.TP)
    assert not npu.same_communicator(Group.MOE_EP, Group.TP)


def test_native_dp_replicas_have_their_own_tp_groups() -> None:
    # GIVEN tp=4, dp=2 without DP attention (two full replicas)
    topo = Topology(ParallelConfig(tp=4, dp=2))
    # THEN there are 8 ranks, TP ranks repeat, and each replica is a DP group
    assert topo.config.world_size == 8
    assert topo.members[Group.TP] == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert topo.members[Group.DP] == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert coords_of(topo, 5)[S.TP_RANK] == 1
    assert coords_of(topo, 5)[S.DP_RANK] == 1


def test_attention_cp_layout() -> None:
    # GIVEN tp=8, dp=2, attn_cp=2 (attn_tp=2): tp_rank = (dp*cp + cp_rank)*attn_tp + attn_tp_rank
    topo = Topology(ParallelConfig(tp=8, dp=2, enable_dp_attention=True, attn_cp=2))
    row = coords_of(topo, 6)
    # THEN rank 6 is (attn_dp 1, attn_cp 1, attn_tp 0) and ATTN_CP strides by attn_tp
    assert (row[S.ATTN_DP_RANK], row[S.ATTN_CP_RANK], row[S.ATTN_TP_RANK]) == (1, 1, 0)
    assert topo.group_of(6, Group.ATTN_CP) == (4, 6)


@pytest.mark.parametrize("kwargs,needle", [
    ({"tp": 6, "dp": 4, "enable_dp_attention": True}, "not divisible by attn_dp"),
    ({"tp": 8, "ep": 3}, r"not divisible by ep\*moe_dp"),
    ({"tp": 0}, "positive integer"),
    ({"tp": 4, "nnodes": 3}, "nnodes"),
])
def test_impossible_configs_are_config_errors(kwargs: dict[str, object], needle: str) -> None:
    # GIVEN sizes that do not divide WHEN the config is built THEN a ConfigError says why
    with pytest.raises(ConfigError, match=needle):
        ParallelConfig(**kwargs)  # type: ignore[arg-type]


def test_tables_conform_to_schema() -> None:
    # GIVEN any topology WHEN its tables are built THEN they follow schema.py exactly
    topo = Topology(ParallelConfig(tp=8, dp=4, enable_dp_attention=True, ep=2))
    coords, groups = topo.coords(), topo.group_table()
    S.validate(coords, S.RANK_COORDS)
    S.validate(groups, S.GROUP_MEMBERS)
    assert coords.num_rows == 8
    tp_rows = groups.filter(pa.compute.equal(groups.column(S.GROUP), Group.TP))
    assert tp_rows.column(S.MEMBERS).to_pylist() == [list(range(8))]
