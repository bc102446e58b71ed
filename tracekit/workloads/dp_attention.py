"""DP-attention gather/scatter and the TP reductions, named as SGLang's
``layers/dp_attention.py`` and ``distributed/communication_op.py`` name them (SGLANG_PATHS.md 3.2).

Each function issues the same collectives on the same groups as its SGLang namesake; the
V-collectives are done as pynccl does them (one broadcast / reduce per root).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, auto

import torch

from tracekit.rules.labels import PathLabel
from tracekit.workloads import comm_log
from tracekit.workloads.parallel_state import (
    get_attention_tp_group,
    get_parallel,
    get_tp_group,
)


class DpPaddingMode(IntEnum):
    MAX_LEN = auto()  # pad every DP rank to the longest, gather with all_gather_into_tensor
    SUM_LEN = auto()  # sum of the real lengths, gather with all_reduce (or all_gatherv)

    def is_max_len(self) -> bool:
        return self is DpPaddingMode.MAX_LEN


@dataclass(frozen=True)
class ForwardBatch:
    """What a layer needs to know about the step: real token counts of every attention-DP rank."""

    global_num_tokens: tuple[int, ...]  # real rows per attention-DP rank
    dp_padding_mode: DpPaddingMode
    use_gatherv: bool = False  # is_dp_gatherv_active()

    @property
    def max_len(self) -> int:
        attn_tp = get_parallel().cfg.attn_tp_size
        longest = max(self.global_num_tokens)
        return -(-longest // attn_tp) * attn_tp

    def rows(self, dp_rank: int) -> int:
        """Rows dp_rank holds locally (padded to max_len in MAX_LEN mode)."""
        if self.dp_padding_mode.is_max_len():
            return self.max_len
        return self.global_num_tokens[dp_rank]

    def buffer_sizes(self) -> list[int]:
        """Rows of each attention-DP rank in the global buffer, in DP order."""
        return [self.rows(d) for d in range(len(self.global_num_tokens))]

    def offset(self, dp_rank: int) -> int:
        return sum(self.buffer_sizes()[:dp_rank])


def tensor_model_parallel_all_reduce(input_: torch.Tensor) -> torch.Tensor:
    with comm_log.issued_by("tensor_model_parallel_all_reduce"):
        return get_tp_group().all_reduce(input_)


def attn_tp_all_reduce(input_: torch.Tensor) -> torch.Tensor:
    with comm_log.issued_by("attn_tp_all_reduce"):
        return get_attention_tp_group().all_reduce(input_)


def dp_gather_replicate(global_tokens: torch.Tensor, local_tokens: torch.Tensor,
                        forward_batch: ForwardBatch) -> None:
    _dp_gather(global_tokens, local_tokens, forward_batch, is_partial=False)


def dp_gather_partial(global_tokens: torch.Tensor, local_tokens: torch.Tensor,
                      forward_batch: ForwardBatch) -> None:
    _dp_gather(global_tokens, local_tokens, forward_batch, is_partial=True)


def _dp_gather(global_tokens: torch.Tensor, local_tokens: torch.Tensor,
               forward_batch: ForwardBatch, is_partial: bool) -> None:
    if forward_batch.use_gatherv and not forward_batch.dp_padding_mode.is_max_len():
        with comm_log.on_path(PathLabel.GATHER_V), comm_log.issued_by("all_gatherv"):
            get_tp_group().all_gatherv(local_tokens, forward_batch.buffer_sizes(),
                                       output=global_tokens)
    elif forward_batch.dp_padding_mode.is_max_len():
        _dp_gather_via_all_gather(global_tokens, local_tokens, forward_batch, is_partial)
    else:
        _dp_gather_via_all_reduce(global_tokens, local_tokens, forward_batch, is_partial)


def _dp_gather_via_all_reduce(global_tokens: torch.Tensor, local_tokens: torch.Tensor,
                              forward_batch: ForwardBatch, is_partial: bool) -> None:
    """SUM_LEN: zero the global buffer, write the local rows, AllReduce over full TP.

    Only attention-TP rank 0 writes (replicate), so the AllReduce concatenates disjoint rows.
    """
    ps = get_parallel()
    global_tokens.fill_(0)
    if is_partial or ps.attn_tp_rank == 0:
        start = forward_batch.offset(ps.attn_dp_rank)
        global_tokens[start:start + local_tokens.shape[0]].copy_(local_tokens)
    with comm_log.on_path(PathLabel.GATHER_AR), comm_log.issued_by("_dp_gather_via_all_reduce"):
        tensor_model_parallel_all_reduce(global_tokens)


def _dp_gather_via_all_gather(global_tokens: torch.Tensor, local_tokens: torch.Tensor,
                              forward_batch: ForwardBatch, is_partial: bool) -> None:
    """MAX_LEN: AllGather over TP (attn_tp == 1), or ReduceScatter in ATTN_TP then AllGather."""
    ps = get_parallel()
    with comm_log.issued_by("_dp_gather_via_all_gather"):
        if ps.cfg.attn_tp_size == 1:
            with comm_log.on_path(PathLabel.GATHER_AG):
                get_tp_group().all_gather_into_tensor(global_tokens, local_tokens)
            return
        if not is_partial and ps.attn_tp_rank != 0:
            local_tokens = torch.zeros_like(local_tokens)
        scattered = local_tokens.new_empty(
            (local_tokens.shape[0] // ps.cfg.attn_tp_size, *local_tokens.shape[1:]))
        with comm_log.on_path(PathLabel.GATHER_RS_AG):
            get_attention_tp_group().reduce_scatter_tensor(scattered, local_tokens)
            get_tp_group().all_gather_into_tensor(global_tokens, scattered)


def dp_scatter(local_tokens: torch.Tensor, global_tokens: torch.Tensor,
               forward_batch: ForwardBatch) -> None:
    """Take this DP rank's rows out of the global buffer: a copy, no collective."""
    ps = get_parallel()
    start = forward_batch.offset(ps.attn_dp_rank)
    local_tokens.copy_(global_tokens[start:start + local_tokens.shape[0]])


def reduce_scatterv(global_tokens: torch.Tensor, local_tokens: torch.Tensor,
                    forward_batch: ForwardBatch) -> None:
    """Path B: ``get_tp_group().reduce_scatterv(..., sizes=get_dp_global_num_tokens())``."""
    with comm_log.on_path(PathLabel.COMBINE_B), comm_log.issued_by("reduce_scatterv"):
        get_tp_group().reduce_scatterv(global_tokens, output=local_tokens,
                                       sizes=forward_batch.buffer_sizes())


def dp_reduce_scatter_tensor(output: torch.Tensor, input_: torch.Tensor) -> None:
    """Path C: equal shards; with attn_tp > 1 a TP ReduceScatter then an ATTN_TP AllGather."""
    cfg = get_parallel().cfg
    with comm_log.on_path(PathLabel.COMBINE_C), comm_log.issued_by("dp_reduce_scatter_tensor"):
        if cfg.tp_size == cfg.attn_dp_size:
            get_tp_group().reduce_scatter_tensor(output, input_)
            return
        chunk = input_.new_empty((input_.shape[0] // cfg.tp_size, *input_.shape[1:]))
        get_tp_group().reduce_scatter_tensor(chunk, input_)
        get_attention_tp_group().all_gather_into_tensor(output, chunk)
