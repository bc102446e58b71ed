"""A DeepEP-like buffer over a device group: token rows travel by all-to-all.

* normal mode: ``get_dispatch_layout`` -> count exchange (notify) -> ``dispatch`` (uneven
  all_to_all_single, one row per (token, expert) pair) -> experts -> ``combine`` (back).
* low-latency mode: fixed-size slots per destination rank (``num_max_dispatch_tokens_per_rank``
  x top-k), so dispatch and combine are equal-split all-to-alls with no count exchange.
* ``fused_deep_moe``: the low-latency exchange and the expert compute in one call (FuseEP).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from tracekit.rules.labels import PathLabel
from tracekit.workloads import comm_log
from tracekit.workloads.parallel_state import GroupCoordinator

NUM_MAX_DISPATCH_TOKENS_PER_RANK = 16  # SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK, scaled


class Experts(Protocol):
    def run_received(self, x: torch.Tensor, expert_ids: torch.Tensor,
                     weights: torch.Tensor) -> torch.Tensor: ...


@dataclass
class DispatchHandle:
    token_index: torch.Tensor  # [pairs] source row of every sent (token, expert) pair
    send_counts: list[int]
    recv_counts: list[int]


@dataclass
class LowLatencyHandle:
    token_index: torch.Tensor  # [pairs] source row of every sent pair
    slots: torch.Tensor  # [pairs] the pair's slot in the [ranks * slots_per_rank] buffer


class DeepEPBuffer:
    def __init__(self, group: GroupCoordinator, experts_per_rank: int, fused: bool = False):
        self.group = group
        self.experts_per_rank = experts_per_rank
        self.fused = fused

    def _path(self, normal: str) -> str:
        return PathLabel.FUSEEP if self.fused else normal

    def get_dispatch_layout(self, topk_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pairs sorted by destination rank, and how many go to each rank."""
        dest = (topk_ids // self.experts_per_rank).flatten()
        order = torch.argsort(dest, stable=True)
        counts = torch.bincount(dest, minlength=self.group.world_size)
        return order, counts

    @staticmethod
    def _pack(hidden: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
              order: torch.Tensor) -> torch.Tensor:
        k = topk_ids.shape[1]
        return torch.cat([hidden[order // k], topk_ids.flatten()[order, None].float(),
                          topk_weights.flatten()[order, None]], dim=1)

    @staticmethod
    def _unpack(rows: torch.Tensor, h: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return rows[:, :h], rows[:, h].long(), rows[:, h + 1]

    # ---- normal mode ---------------------------------------------------------------------
    def dispatch(self, hidden: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, DispatchHandle]:
        order, counts = self.get_dispatch_layout(topk_ids)
        recv_counts = torch.empty_like(counts)
        with comm_log.on_path(PathLabel.DEEPEP_LAYOUT):  # notify: exchange per-rank counts
            self.group.all_to_all_single(recv_counts, counts)
        packed = self._pack(hidden, topk_ids, topk_weights, order)
        send, recv = counts.tolist(), recv_counts.tolist()
        received = packed.new_empty((sum(recv), packed.shape[1]))
        with comm_log.on_path(PathLabel.DEEPEP_NORMAL_DISPATCH):
            self.group.all_to_all_single(received, packed, recv, send)
        handle = DispatchHandle(order // topk_ids.shape[1], send, recv)
        return (*self._unpack(received, hidden.shape[1]), handle)

    def combine(self, expert_out: torch.Tensor, handle: DispatchHandle, num_tokens: int
                ) -> torch.Tensor:
        returned = expert_out.new_empty((sum(handle.send_counts), expert_out.shape[1]))
        with comm_log.on_path(PathLabel.DEEPEP_NORMAL_COMBINE):
            self.group.all_to_all_single(returned, expert_out, handle.send_counts,
                                         handle.recv_counts)
        out = expert_out.new_zeros((num_tokens, expert_out.shape[1]))
        out.index_add_(0, handle.token_index, returned)
        return out

    # ---- low-latency mode ----------------------------------------------------------------
    def low_latency_dispatch(self, hidden: torch.Tensor, topk_ids: torch.Tensor,
                             topk_weights: torch.Tensor, num_max_dispatch_tokens_per_rank: int
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                        LowLatencyHandle]:
        n, k = topk_ids.shape
        if n > num_max_dispatch_tokens_per_rank:
            raise ValueError(f"{n} tokens > num_max_dispatch_tokens_per_rank "
                             f"{num_max_dispatch_tokens_per_rank}")
        per_rank = num_max_dispatch_tokens_per_rank * k
        order, counts = self.get_dispatch_layout(topk_ids)
        dest = (topk_ids // self.experts_per_rank).flatten()[order]
        starts = torch.cumsum(counts, 0) - counts
        slots = dest * per_rank + torch.arange(n * k) - starts[dest]
        send = hidden.new_zeros((self.group.world_size * per_rank, hidden.shape[1] + 2))
        send[:, hidden.shape[1]] = -1  # empty slot: no expert
        send[slots] = self._pack(hidden, topk_ids, topk_weights, order)
        received = torch.empty_like(send)
        with comm_log.on_path(self._path(PathLabel.DEEPEP_LL_DISPATCH)):
            self.group.all_to_all_single(received, send)
        return (*self._unpack(received, hidden.shape[1]), LowLatencyHandle(order // k, slots))

    def low_latency_combine(self, expert_out: torch.Tensor, handle: LowLatencyHandle,
                            num_tokens: int) -> torch.Tensor:
        returned = torch.empty_like(expert_out)
        with comm_log.on_path(self._path(PathLabel.DEEPEP_LL_COMBINE)):
            self.group.all_to_all_single(returned, expert_out)
        out = expert_out.new_zeros((num_tokens, expert_out.shape[1]))
        out.index_add_(0, handle.token_index, returned[handle.slots])
        return out

    # ---- FuseEP ----------------------------------------------------------------------------
    def fused_deep_moe(self, hidden: torch.Tensor, topk_idx: torch.Tensor,
                       topk_weights: torch.Tensor, experts: Experts,
                       num_max_dispatch_tokens_per_rank: int) -> torch.Tensor:
        """Dispatch, expert GEMMs and combine in one call, as Ascend FuseEP's op does."""
        with comm_log.issued_by("fused_deep_moe"):
            x, ids, w, handle = self.low_latency_dispatch(
                hidden, topk_idx, topk_weights, num_max_dispatch_tokens_per_rank)
            y = experts.run_received(x, ids, w)
            return self.low_latency_combine(y, handle, hidden.shape[0])
