"""Seeded weights and inputs, identical in every process (the reference uses the same ones)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tracekit.workloads.config import WorkloadConfig


@dataclass(frozen=True)
class LayerWeights:
    wa: torch.Tensor  # [H, H] attention inner projection (column-parallel over attn_tp)
    wo_b: torch.Tensor  # [H, H] attention output projection (row-parallel over attn_tp)
    gate: torch.Tensor  # [H, E] router
    w13: torch.Tensor  # [E, H, F] expert up projections
    w2: torch.Tensor  # [E, F, H] expert down projections


def layer_weights(cfg: WorkloadConfig, layer: int) -> LayerWeights:
    g = torch.Generator().manual_seed(cfg.seed * 1000 + layer + 1)
    h, f, e = cfg.hidden, cfg.ffn, cfg.experts

    def rnd(*shape: int, fan_in: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g) / fan_in ** 0.5

    return LayerWeights(
        wa=rnd(h, h, fan_in=h), wo_b=rnd(h, h, fan_in=h), gate=rnd(h, e, fan_in=h),
        w13=rnd(e, h, f, fan_in=h), w2=rnd(e, f, h, fan_in=f))


def token_counts(cfg: WorkloadConfig, step: int) -> tuple[int, ...]:
    """Real tokens of each attention-DP rank in ``step``: different on every rank."""
    g = torch.Generator().manual_seed(cfg.seed * 7919 + step + 17)
    n = cfg.attn_dp_size
    counts = torch.randperm(8, generator=g)[:n] + 2  # distinct values in 2..9
    return tuple(int(c) for c in counts)


def step_inputs(cfg: WorkloadConfig, step: int) -> list[torch.Tensor]:
    """Hidden states entering layer 0, one [tokens, H] tensor per attention-DP rank."""
    g = torch.Generator().manual_seed(cfg.seed * 104729 + step + 3)
    return [torch.randn(n, cfg.hidden, generator=g) for n in token_counts(cfg, step)]
