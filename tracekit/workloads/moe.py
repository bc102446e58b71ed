"""The MoE block: router, experts, and the three ways SGLang moves tokens to them.

* ``forward_normal``: every rank runs its experts (or FFN slice) on the whole (gathered) batch
  and the partial sums are reduced afterwards (post-experts AllReduce unless skipped).
* ``forward_deepep``: DeepEP-like ``dispatch`` / ``combine``, uneven all-to-all of token rows.
* ``forward_fuseep``: one ``fused_deep_moe`` call that exchanges and computes (FuseEP-like).
"""

from __future__ import annotations

import torch

from tracekit.rules.labels import PathLabel
from tracekit.workloads import comm_log
from tracekit.workloads.deepep import NUM_MAX_DISPATCH_TOKENS_PER_RANK, DeepEPBuffer
from tracekit.workloads.dp_attention import tensor_model_parallel_all_reduce
from tracekit.workloads.parallel_state import (
    GroupCoordinator,
    get_moe_ep_group,
    get_parallel,
    get_tp_group,
)
from tracekit.workloads.reference import expert_mlp, select_experts
from tracekit.workloads.weights import LayerWeights


class FusedMoE:
    """This rank's experts: ``ep_size`` shards of the experts, ``moe_tp`` slices of the FFN."""

    def __init__(self, w: LayerWeights) -> None:
        ps = get_parallel()
        per_rank = ps.cfg.experts // ps.cfg.ep_size
        f = ps.cfg.ffn // ps.cfg.moe_tp_size
        fs = slice(ps.moe_tp_rank * f, (ps.moe_tp_rank + 1) * f)
        self.first_expert = ps.moe_ep_rank * per_rank
        self.experts_per_rank = per_rank
        self.w13 = w.w13[self.first_expert:self.first_expert + per_rank, :, fs].contiguous()
        self.w2 = w.w2[self.first_expert:self.first_expert + per_rank, fs, :].contiguous()

    def forward(self, hidden: torch.Tensor, topk_ids: torch.Tensor,
                topk_weights: torch.Tensor) -> torch.Tensor:
        """Partial MoE output of the local experts over every row of ``hidden``."""
        out = torch.zeros_like(hidden)
        for local in range(self.experts_per_rank):
            rows, slot = (topk_ids == self.first_expert + local).nonzero(as_tuple=True)
            if rows.numel():
                y = expert_mlp(hidden[rows], self.w13[local], self.w2[local])
                out.index_add_(0, rows, y * topk_weights[rows, slot, None])
        return out

    def run_received(self, x: torch.Tensor, expert_ids: torch.Tensor,
                     weights: torch.Tensor) -> torch.Tensor:
        """Expert outputs for dispatched rows (one row per (token, expert) pair), weighted."""
        out = torch.zeros_like(x)  # rows for no local expert (padding) stay zero
        local_ids = expert_ids - self.first_expert
        for local in range(self.experts_per_rank):
            rows = (local_ids == local).nonzero(as_tuple=True)[0]
            if rows.numel():
                y = expert_mlp(x[rows], self.w13[local], self.w2[local])
                out[rows] = y * weights[rows, None]
        return out


def _deepep_group() -> GroupCoordinator:
    """SGLang's ``_get_deepep_comm_group``: the TP device group on GPU, MOE_EP on NPU."""
    return get_moe_ep_group() if get_parallel().cfg.npu else get_tp_group()


def _planted_here(bug: str) -> str | None:
    """The skip / shape bugs fire on the last rank, in the last layer."""
    ps = get_parallel()
    last = ps.rank == ps.cfg.world_size - 1 and comm_log.current_layer() == ps.cfg.layers - 1
    return bug if last and bug in ("skip-all-reduce", "shape-mismatch") else None


def should_skip_post_experts_all_reduce() -> bool:
    cfg = get_parallel().cfg
    return cfg.combine in ("b", "c") and cfg.bug != "double-reduce"


class DeepseekV2MoE:
    def __init__(self, w: LayerWeights) -> None:
        self.cfg = get_parallel().cfg
        self.gate = w.gate
        self.experts = FusedMoE(w)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.cfg.a2a == "deepep":
            return self.forward_deepep(hidden)
        if self.cfg.a2a == "fuseep":
            return self.forward_fuseep(hidden)
        return self.forward_normal(hidden)

    def forward_normal(self, hidden: torch.Tensor) -> torch.Tensor:
        topk_ids, topk_weights = select_experts(hidden, self.gate, self.cfg.topk)
        final_hidden_states = self.experts.forward(hidden, topk_ids, topk_weights)
        if self.cfg.tp_size > 1 and not should_skip_post_experts_all_reduce():
            planted = _planted_here(self.cfg.bug)
            if planted == "skip-all-reduce":
                return final_hidden_states  # PLANTED: this rank skips it, the others hang
            path = PathLabel.COMBINE_A if self.cfg.attn_dp_size > 1 else PathLabel.NO_DPA_MOE_AR
            with comm_log.on_path(path):
                if planted == "shape-mismatch":  # PLANTED: same bytes, flattened shape
                    tensor_model_parallel_all_reduce(final_hidden_states.view(-1))
                else:
                    final_hidden_states = tensor_model_parallel_all_reduce(final_hidden_states)
        return final_hidden_states

    def forward_deepep(self, hidden: torch.Tensor) -> torch.Tensor:
        topk_ids, topk_weights = select_experts(hidden, self.gate, self.cfg.topk)
        buf = DeepEPBuffer(_deepep_group(), self.experts.experts_per_rank)
        if self.cfg.deepep_mode == "low_latency":
            with comm_log.issued_by("low_latency_dispatch"):
                x, ids, w, ll = buf.low_latency_dispatch(
                    hidden, topk_ids, topk_weights, NUM_MAX_DISPATCH_TOKENS_PER_RANK)
            y = self.experts.run_received(x, ids, w)
            with comm_log.issued_by("low_latency_combine"):
                return buf.low_latency_combine(y, ll, hidden.shape[0])
        with comm_log.issued_by("dispatch"):
            x, ids, w, handle = buf.dispatch(hidden, topk_ids, topk_weights)
        y = self.experts.run_received(x, ids, w)
        with comm_log.issued_by("combine"):
            return buf.combine(y, handle, hidden.shape[0])

    def forward_fuseep(self, hidden: torch.Tensor) -> torch.Tensor:
        """FuseEP: a low-latency-mode buffer on MOE_EP, one fused_deep_moe call."""
        topk_ids, topk_weights = select_experts(hidden, self.gate, self.cfg.topk)
        buf = DeepEPBuffer(get_moe_ep_group(), self.experts.experts_per_rank, fused=True)
        return buf.fused_deep_moe(hidden, topk_ids, topk_weights, self.experts,
                                  NUM_MAX_DISPATCH_TOKENS_PER_RANK)
