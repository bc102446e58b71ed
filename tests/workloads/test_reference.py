"""The sharded pieces of the layer add up to the single-process reference (no processes)."""

from __future__ import annotations

import torch

from tracekit.workloads.config import WorkloadConfig
from tracekit.workloads.moe import FusedMoE
from tracekit.workloads.parallel_state import ParallelState, set_parallel_state
from tracekit.workloads.reference import ATOL, RTOL, reference_layer, select_experts
from tracekit.workloads.weights import layer_weights, step_inputs, token_counts


def test_expert_shards_sum_to_the_reference_moe() -> None:
    # GIVEN tp = 4 split as ep 2 x moe_tp 2, and the hidden state entering the MoE
    cfg = WorkloadConfig(tp_size=4, ep_size=2).resolve()
    w = layer_weights(cfg, 0)
    x = step_inputs(cfg, 0)[0]
    h = x + torch.tanh(x @ w.wa) @ w.wo_b
    ids, weights = select_experts(h, w.gate, cfg.topk)
    # WHEN every rank's FusedMoE computes its partial output (its experts, its FFN slice)
    total = torch.zeros_like(h)
    try:
        for rank in range(4):
            set_parallel_state(ParallelState(cfg, rank, {}))
            total += FusedMoE(w).forward(h, ids, weights)
    finally:
        set_parallel_state(None)
    # THEN the partial sums add up to the reference MoE output
    expected_moe = reference_layer(x, w, cfg.topk) - h
    assert total.abs().max() > 0.01
    assert torch.allclose(total, expected_moe, rtol=RTOL, atol=ATOL)


def test_seeded_inputs_are_reproducible_and_uneven() -> None:
    # GIVEN a DP-attention config WHEN inputs are drawn twice THEN they are equal
    cfg = WorkloadConfig(tp_size=4, dp_size=4, enable_dp_attention=True)
    assert all(torch.equal(a, b) for a, b in zip(step_inputs(cfg, 0), step_inputs(cfg, 0),
                                                  strict=True))
    # AND every DP rank has a different token count
    counts = token_counts(cfg, 0)
    assert len(set(counts)) == 4 and min(counts) >= 2
