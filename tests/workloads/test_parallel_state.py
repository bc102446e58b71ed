"""Group membership, aliasing and rank coordinates follow SGLang's formulas (DOMAIN.md 2)."""

from __future__ import annotations

import pytest

from tracekit.errors import ConfigError
from tracekit.workloads.config import WorkloadConfig
from tracekit.workloads.parallel_state import ParallelState, group_members


def test_tp16_dp8_attention_groups_are_contiguous_pairs() -> None:
    # GIVEN TP16 / DP8 with DP attention (attn_tp = 2), ep 4 (moe_tp = 4)
    cfg = WorkloadConfig(tp_size=16, dp_size=8, enable_dp_attention=True, ep_size=4,
                         hidden=16, ffn=32, experts=8)
    # WHEN the members are computed
    groups = group_members(cfg)
    # THEN ATTN_TP is consecutive pairs, MOE_TP consecutive fours, MOE_EP strided by moe_tp
    assert groups["attention_tp"] == [[2 * c, 2 * c + 1] for c in range(8)]
    assert groups["moe_tp"] == [list(range(4 * c, 4 * c + 4)) for c in range(4)]
    assert groups["moe_ep"] == [list(range(t, 16, 4)) for t in range(4)]
    assert groups["tp"] == [list(range(16))]
    # AND tp_rank 10 is (attn_dp 5, attn_tp 0) as in DOMAIN.md
    ps = ParallelState(cfg, 10, {})
    assert (ps.attn_dp_rank, ps.attn_tp_rank) == (5, 0)
    assert (ps.moe_ep_rank, ps.moe_tp_rank) == (2, 2)


def test_aliases_follow_sglang_and_npu_keeps_moe_ep_separate() -> None:
    # GIVEN tp = ep = 4 without DP attention
    gpu = group_members(WorkloadConfig(tp_size=4, ep_size=4))
    npu = group_members(WorkloadConfig(tp_size=4, ep_size=4, npu=True))
    # THEN on GPU ATTN_TP and MOE_EP alias TP, on NPU MOE_EP is its own group, same members
    assert gpu["attention_tp"] == "tp" and gpu["moe_ep"] == "tp"
    assert npu["moe_ep"] == [[0, 1, 2, 3]] and npu["attention_tp"] == "tp"
    # AND moe_tp (size 1 here) is a real group per rank, attn_cp too (size 1 != tp)
    assert gpu["moe_tp"] == [[0], [1], [2], [3]]
    assert gpu["attn_cp"] == [[0], [1], [2], [3]]


def test_moe_tp_aliases_tp_when_ep_is_one() -> None:
    groups = group_members(WorkloadConfig(tp_size=4, ep_size=1))
    assert groups["moe_tp"] == "tp"
    assert groups["moe_ep"] == [[0], [1], [2], [3]]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, ("full_tp", "none", "a")),
        ({"dp_size": 2, "enable_dp_attention": True}, ("attn_tp", "sum_len", "a")),
        ({"dp_size": 4, "enable_dp_attention": True, "combine": "b"}, ("none", "gatherv", "b")),
        ({"dp_size": 4, "enable_dp_attention": True, "combine": "c"}, ("none", "max_len", "c")),
        ({"dp_size": 4, "enable_dp_attention": True, "ep_size": 4, "a2a": "deepep"},
         ("none", "none", "none")),
    ],
)
def test_resolve_picks_sglang_paths(kwargs: dict[str, object], expected: tuple[str, ...]) -> None:
    # GIVEN flags WHEN auto choices are resolved THEN they are SGLang's choice for them
    cfg = WorkloadConfig(tp_size=4, **kwargs).resolve()  # type: ignore[arg-type]
    assert (cfg.attn_reduce, cfg.dp_gather, cfg.combine) == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dp_size": 2, "enable_dp_attention": True, "combine": "b"},  # rsv needs attn_tp 1
        {"dp_size": 4, "enable_dp_attention": True, "dp_gather": "sum_len", "combine": "c"},
        {"bug": "double-reduce"},  # needs combine b or c
        {"dp_size": 4, "enable_dp_attention": True, "bug": "global-tp-reduce"},  # attn_tp 1
        {"ep_size": 3},
        {"a2a": "deepep"},  # ep != tp
    ],
)
def test_resolve_rejects_impossible_configs(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        WorkloadConfig(tp_size=4, **kwargs).resolve()  # type: ignore[arg-type]
