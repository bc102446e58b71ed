"""An SGLang-like parallel state on torch.distributed (gloo on CPU).

Group names, creation order, member formulas and aliasing follow SGLang's
``initialize_model_parallel`` (SGLANG_PATHS.md 1.3-1.4): every rank calls ``new_group`` for
every subgroup in the same order, with ``group_desc=f"{group_name}:device"`` (and the gloo
``:cpu`` twin), so the trace's ``distributedInfo.pg_config`` names each group as SGLang does.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from tracekit.schema import Group, Op
from tracekit.workloads import comm_log
from tracekit.workloads.config import WorkloadConfig

# SGLang group_name -> tracekit group label
LABEL = {
    "world": Group.WORLD,
    "tp": Group.TP,
    "attn_cp": Group.ATTN_CP,
    "attention_tp": Group.ATTN_TP,
    "moe_dp": Group.MOE_DP,
    "moe_ep": Group.MOE_EP,
    "moe_tp": Group.MOE_TP,
}


def _nbytes(t: Any) -> int:
    return int(t.numel() * t.element_size())


def group_members(cfg: WorkloadConfig) -> dict[str, list[list[int]] | str]:
    """Every group's member lists in creation order, or the name of the group it aliases.

    PP = 1, so the single TP block starts at global rank 0 (base = 0).
    """
    tp, world = cfg.tp_size, cfg.world_size
    attn_tp, attn_cp, attn_dp = cfg.attn_tp_size, cfg.attn_cp_size, cfg.attn_dp_size
    ep, moe_dp, moe_tp = cfg.ep_size, cfg.moe_dp_size, cfg.moe_tp_size
    out: dict[str, list[list[int]] | str] = {
        "world": [list(range(world))],
        "tp": [list(range(i * tp, (i + 1) * tp)) for i in range(world // tp)],
    }
    if attn_cp == tp:
        out["attn_cp"] = "tp"
    else:
        out["attn_cp"] = [
            list(range(d * attn_tp * attn_cp + t, (d + 1) * attn_tp * attn_cp + t, attn_tp))
            for d in range(attn_dp) for t in range(attn_tp)]
    if attn_tp == tp:
        out["attention_tp"] = "tp"
    else:
        out["attention_tp"] = [list(range(c * attn_tp, (c + 1) * attn_tp))
                               for c in range(attn_cp * attn_dp)]
    if attn_cp > moe_dp:
        out["moe_dp"] = "attn_cp"
    elif moe_dp == tp:
        out["moe_dp"] = "tp"
    else:
        out["moe_dp"] = [list(range(c, tp + c, moe_tp * ep)) for c in range(moe_tp * ep)]
    if ep == tp and not cfg.npu:  # NPU always makes a standalone MOE_EP communicator
        out["moe_ep"] = "tp"
    else:
        out["moe_ep"] = [
            list(range(d * ep * moe_tp + t, d * ep * moe_tp + t + ep * moe_tp, moe_tp))
            for d in range(moe_dp) for t in range(moe_tp)]
    if moe_tp == tp:
        out["moe_tp"] = "tp"
    else:
        out["moe_tp"] = [list(range(c * moe_tp, (c + 1) * moe_tp)) for c in range(ep * moe_dp)]
    return out


@dataclass
class GroupCoordinator:
    """The slice of SGLang's GroupCoordinator this workload needs: one rank's view of a group."""

    group_name: str
    ranks: list[int]
    rank: int
    device_group: Any = None
    cpu_group: Any = None
    has_cpu_group: bool = True  # False when the cpu "twin" is the device group itself
    label: str = field(init=False)

    def __post_init__(self) -> None:
        self.label = LABEL[self.group_name]

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def rank_in_group(self) -> int:
        return self.ranks.index(self.rank)

    @property
    def desc(self) -> str:
        return f"{self.group_name}:device"

    @property
    def cpu_desc(self) -> str:
        return f"{self.group_name}:cpu" if self.has_cpu_group else self.desc

    def barrier(self) -> None:
        """Barrier on the gloo cpu group, as SGLang's GroupCoordinator.barrier does."""
        import torch.distributed as dist

        comm_log.record(Op.BARRIER, self, 0, desc=self.cpu_desc)
        dist.barrier(group=self.cpu_group)

    def global_rank(self, rank_in_group: int) -> int:
        return self.ranks[rank_in_group]

    # ---- collectives (all on the device group, as SGLang's eager torch.distributed path) ----
    def all_reduce(self, input_: Any) -> Any:
        if self.world_size == 1:
            return input_
        return self._all_reduce_in_place(input_)

    def _all_reduce_in_place(self, input_: Any) -> Any:
        import torch.distributed as dist

        comm_log.record(Op.ALL_REDUCE, self, _nbytes(input_))
        dist.all_reduce(input_, group=self.device_group)
        return input_

    def all_gather_into_tensor(self, output: Any, input_: Any) -> None:
        import torch.distributed as dist

        comm_log.record(Op.ALL_GATHER, self, _nbytes(output))
        dist.all_gather_into_tensor(output, input_, group=self.device_group)

    def reduce_scatter_tensor(self, output: Any, input_: Any) -> None:
        import torch.distributed as dist

        comm_log.record(Op.REDUCE_SCATTER, self, _nbytes(input_))
        dist.reduce_scatter_tensor(output, input_, group=self.device_group)

    def all_gatherv(self, input_: Any, sizes: list[int], output: Any) -> Any:
        """Variable-length gather as pynccl does it: one broadcast per root, in root order."""
        import torch.distributed as dist

        offset = 0
        for root, size in enumerate(sizes):
            part = output[offset:offset + size]
            if root == self.rank_in_group:
                part.copy_(input_)
            comm_log.record(Op.BROADCAST, self, _nbytes(part))
            dist.broadcast(part, group=self.device_group, group_src=root)
            offset += size
        return output

    def reduce_scatterv(self, input_: Any, output: Any, sizes: list[int]) -> Any:
        """Variable-length reduce-scatter as pynccl does it: one reduce per root."""
        import torch.distributed as dist

        offset = 0
        for root, size in enumerate(sizes):
            part = input_[offset:offset + size]
            comm_log.record(Op.REDUCE, self, _nbytes(part))
            dist.reduce(part, group=self.device_group, group_dst=root)
            if root == self.rank_in_group:
                output.copy_(part)
            offset += size
        return output

    def all_to_all_single(self, output: Any, input_: Any,
                          output_split_sizes: list[int] | None = None,
                          input_split_sizes: list[int] | None = None) -> None:
        import torch.distributed as dist

        op = Op.ALL_TO_ALL if input_split_sizes is None else Op.ALL_TO_ALLV
        comm_log.record(op, self, _nbytes(input_))
        dist.all_to_all_single(output, input_, output_split_sizes, input_split_sizes,
                               group=self.device_group)


@dataclass
class ParallelState:
    """The groups of one rank, and its coordinates (tp_rank, attn_dp_rank, moe_ep_rank...)."""

    cfg: WorkloadConfig
    rank: int
    groups: dict[str, GroupCoordinator]

    @property
    def tp_rank(self) -> int:
        return self.rank % self.cfg.tp_size

    @property
    def attn_tp_rank(self) -> int:
        return self.tp_rank % self.cfg.attn_tp_size

    @property
    def attn_dp_rank(self) -> int:
        return self.tp_rank // (self.cfg.attn_tp_size * self.cfg.attn_cp_size)

    @property
    def moe_ep_rank(self) -> int:
        per_dp = self.cfg.tp_size // self.cfg.moe_dp_size
        return self.tp_rank % per_dp // (per_dp // self.cfg.ep_size)

    @property
    def moe_tp_rank(self) -> int:
        return self.tp_rank % self.cfg.moe_tp_size


def initialize_model_parallel(cfg: WorkloadConfig, rank: int) -> ParallelState:
    """Create every group on every rank in SGLang's order; aliases reuse the aliased group."""
    import torch.distributed as dist

    groups: dict[str, GroupCoordinator] = {}
    timeout = None if cfg.timeout_s is None else datetime.timedelta(seconds=cfg.timeout_s)
    for name, spec in group_members(cfg).items():
        if isinstance(spec, str):
            groups[name] = groups[spec]
            continue
        mine: GroupCoordinator | None = None
        for ranks in spec:
            device = dist.new_group(ranks, backend="gloo", group_desc=f"{name}:device",
                                    timeout=timeout)
            cpu = (dist.new_group(ranks, backend="gloo", group_desc=f"{name}:cpu",
                                  timeout=timeout)
                   if cfg.cpu_groups else device)
            if rank in ranks:
                mine = GroupCoordinator(name, list(ranks), rank, device, cpu, cfg.cpu_groups)
        if mine is None:
            raise RuntimeError(f"rank {rank} is in no {name} group")
        groups[name] = mine
    return ParallelState(cfg, rank, groups)


_PARALLEL: ParallelState | None = None


def set_parallel_state(state: ParallelState | None) -> None:
    global _PARALLEL
    _PARALLEL = state


def get_parallel() -> ParallelState:
    if _PARALLEL is None:
        raise RuntimeError("initialize_model_parallel has not run in this process")
    return _PARALLEL


def get_world_group() -> GroupCoordinator:
    return get_parallel().groups["world"]


def get_tp_group() -> GroupCoordinator:
    return get_parallel().groups["tp"]


def get_attention_tp_group() -> GroupCoordinator:
    return get_parallel().groups["attention_tp"]


def get_moe_ep_group() -> GroupCoordinator:
    return get_parallel().groups["moe_ep"]
