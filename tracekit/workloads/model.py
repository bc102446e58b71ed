"""A DeepSeek-style decoder layer over the parallel state (attention output, DP sync, MoE)."""

from __future__ import annotations

import torch

from tracekit.rules.labels import PathLabel
from tracekit.workloads import comm_log
from tracekit.workloads.dp_attention import (
    DpPaddingMode,
    ForwardBatch,
    attn_tp_all_reduce,
    dp_gather_replicate,
    dp_reduce_scatter_tensor,
    dp_scatter,
    reduce_scatterv,
    tensor_model_parallel_all_reduce,
)
from tracekit.workloads.moe import DeepseekV2MoE
from tracekit.workloads.parallel_state import get_parallel
from tracekit.workloads.weights import LayerWeights


class RowParallelLinear:
    """Row-parallel linear: this rank holds rows ``tp_rank`` of the weight; the outputs are
    partial sums, reduced over full TP here only when ``reduce_results`` (SGLang linear.py)."""

    def __init__(self, weight: torch.Tensor, tp_rank: int, tp_size: int,
                 reduce_results: bool) -> None:
        rows = weight.shape[0] // tp_size
        self.weight = weight[tp_rank * rows:(tp_rank + 1) * rows].contiguous()
        self.tp_size = tp_size
        self.reduce_results = reduce_results

    def forward(self, input_: torch.Tensor) -> torch.Tensor:
        output = input_ @ self.weight
        if self.reduce_results and self.tp_size > 1:
            output = tensor_model_parallel_all_reduce(output)
        return output


class MQALayer:
    """Attention stand-in: a column-parallel projection over ATTN_TP, then ``wo_b``.

    ``wo_b.reduce_results`` is true only when attn_tp == tp > 1 (MqaAttentionBase); with
    1 < attn_tp < tp the output is reduced by ``attn_tp_all_reduce`` on ATTN_TP. The planted
    bug ``global-tp-reduce`` keeps ``reduce_results=True`` there, so it sums over global TP.
    """

    def __init__(self, w: LayerWeights) -> None:
        ps = get_parallel()
        self.tp_size = ps.cfg.attn_tp_size
        self.full_tp = ps.cfg.tp_size
        cols = ps.cfg.hidden // self.tp_size
        self.wa = w.wa[:, ps.attn_tp_rank * cols:(ps.attn_tp_rank + 1) * cols].contiguous()
        self.bug = ps.cfg.bug == "global-tp-reduce"
        reduce_results = (self.tp_size == self.full_tp and self.tp_size > 1) or self.bug
        self.wo_b = RowParallelLinear(w.wo_b, ps.attn_tp_rank, self.tp_size, reduce_results)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        o = torch.tanh(hidden @ self.wa)
        with comm_log.on_path(PathLabel.ATTN_FULL_TP):
            o = self.wo_b.forward(o)
        if 1 < self.tp_size < self.full_tp and not self.bug:
            with comm_log.on_path(PathLabel.ATTN_TP):
                o = attn_tp_all_reduce(o)
        return o


class DeepseekV4DecoderLayer:
    def __init__(self, layer_id: int, w: LayerWeights) -> None:
        self.layer_id = layer_id
        self.self_attn = MQALayer(w)
        self.mlp = DeepseekV2MoE(w)

    def forward(self, hidden: torch.Tensor, forward_batch: ForwardBatch) -> torch.Tensor:
        with comm_log.in_layer(self.layer_id):
            hidden = hidden + self.self_attn.forward(hidden)
            return hidden + self._run_moe_ffn_dp_sync(hidden, forward_batch)

    def _run_moe_ffn_dp_sync(self, hidden: torch.Tensor, fb: ForwardBatch) -> torch.Tensor:
        cfg = get_parallel().cfg
        if cfg.attn_dp_size == 1 or cfg.a2a != "none":
            return self.mlp.forward(hidden)
        global_hidden = hidden.new_empty((sum(fb.buffer_sizes()), hidden.shape[1]))
        dp_gather_replicate(global_hidden, hidden, fb)
        global_hidden = self.mlp.forward(global_hidden)
        local = torch.empty_like(hidden)
        if cfg.combine == "b":
            reduce_scatterv(global_hidden, local, fb)
        elif cfg.combine == "c":
            dp_reduce_scatter_tensor(local, global_hidden)
        else:
            dp_scatter(local, global_hidden, fb)
        return local


def make_forward_batch(counts: tuple[int, ...]) -> ForwardBatch:
    cfg = get_parallel().cfg
    mode = DpPaddingMode.MAX_LEN if cfg.dp_gather == "max_len" else DpPaddingMode.SUM_LEN
    return ForwardBatch(counts, mode, use_gatherv=cfg.dp_gather == "gatherv")
