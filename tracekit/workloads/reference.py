"""The single-process reference: the same layers on full weights, no collectives."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tracekit.workloads.config import WorkloadConfig
from tracekit.workloads.weights import LayerWeights, layer_weights, step_inputs

# float32 sums taken in another order (TP shards, experts split across ranks) differ by a few
# ulps; a planted bug is off by O(1). Outputs are compared with torch.allclose(rtol, atol).
RTOL = 1e-4
ATOL = 1e-4


def select_experts(hidden: torch.Tensor, gate: torch.Tensor, topk: int
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax router, top-k, weights renormalised: (topk_ids [T, k], topk_weights [T, k])."""
    scores = torch.softmax(hidden @ gate, dim=-1)
    weights, ids = torch.topk(scores, topk, dim=-1)
    return ids, weights / weights.sum(dim=-1, keepdim=True)


def expert_mlp(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return F.silu(x @ w13) @ w2


def reference_layer(x: torch.Tensor, w: LayerWeights, topk: int) -> torch.Tensor:
    h = x + torch.tanh(x @ w.wa) @ w.wo_b
    ids, weights = select_experts(h, w.gate, topk)
    moe = torch.zeros_like(h)
    for e in range(w.w13.shape[0]):
        rows, slot = (ids == e).nonzero(as_tuple=True)
        if rows.numel():
            y = expert_mlp(h[rows], w.w13[e], w.w2[e]) * weights[rows, slot, None]
            moe.index_add_(0, rows, y)
    return h + moe


def reference_outputs(cfg: WorkloadConfig, step: int) -> list[torch.Tensor]:
    """Each attention-DP rank's output rows after all layers."""
    weights = [layer_weights(cfg, i) for i in range(cfg.layers)]
    outs = []
    for x in step_inputs(cfg, step):
        for w in weights:
            x = reference_layer(x, w, cfg.topk)
        outs.append(x)
    return outs
