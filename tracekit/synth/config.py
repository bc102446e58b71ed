"""Parallel configuration and process groups of a synthetic SGLang-style run.

Widths and memberships follow SGLang's ``initialize_model_parallel`` (attention laid out as
(dp, cp, tp) with tp fastest; MoE as (moe_dp, ep, moe_tp) with moe_tp fastest), including its
aliasing: a group whose width equals the TP width is the TP group itself. Process group names
follow torch's global creation counter: the default group is "0", then SGLang creates, for
every group kind and every member list, a device group and a gloo (cpu) group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tracekit import schema
from tracekit.errors import ConfigError

A2A_BACKENDS = ("none", "deepep")
DP_GATHERS = ("auto", "allgather", "rs_ag", "allreduce", "gatherv")
COMBINES = ("auto", "a_allreduce", "b_reduce_scatterv", "c_reduce_scatter")


@dataclass(frozen=True)
class ModelShape:
    """The model dimensions that set message sizes."""

    hidden: int = 7168
    experts: int = 256
    topk: int = 8
    tokens: int = 64  # decode tokens per attention-DP rank and step
    extend_tokens: int = 2048  # prefill tokens per attention-DP rank in an extend step
    layers: int = 4
    dtype_bytes: int = 2  # bf16 activations


@dataclass(frozen=True)
class SynthConfig:
    """Everything that decides a synthetic run; the same config and seed give the same bytes."""

    tp: int = 8
    dp: int = 1
    enable_dp_attention: bool = False
    ep: int = 1
    moe_dp: int = 1
    a2a: str = "none"
    dp_gather: str = "auto"
    combine: str = "auto"
    nccl: str = "2.21"  # NCCL version: kernel naming era
    torch: str = "2.13"  # torch version: record_param_comms argument era
    gpus_per_node: int = 8
    steps: int = 4
    extend_steps: int = 1  # the first steps are eager extend steps, the rest decode
    cuda_graph: bool = True  # decode steps replay CUDA graphs (no comm metadata)
    custom_ar: bool = True  # small TP all-reduces use SGLang's custom all-reduce kernels
    stragglers: tuple[int, ...] = ()
    straggle_factor: float = 1.6
    noise: float = 0.04
    seed: int = 0
    profile_id: str = "1790000000.0000000"
    naming: str = "sglang"  # "sglang" ({id}-TP-r[-DP-d][-EP-e]) or "rank" (rank{r})
    gzip: bool = True
    shape: ModelShape = field(default_factory=ModelShape)

    # ---- derived widths -------------------------------------------------------------------
    @property
    def world(self) -> int:
        return self.tp

    @property
    def attn_dp(self) -> int:
        return self.dp if self.enable_dp_attention else 1

    @property
    def attn_tp(self) -> int:
        return self.tp // self.attn_dp

    @property
    def moe_tp(self) -> int:
        return self.tp // self.ep // self.moe_dp

    def validate(self) -> SynthConfig:
        if self.tp < 1 or self.dp < 1 or self.ep < 1 or self.moe_dp < 1:
            raise ConfigError("tp, dp, ep and moe_dp must be at least 1")
        if self.enable_dp_attention and self.tp % self.dp:
            raise ConfigError(f"tp {self.tp} is not a multiple of dp {self.dp}")
        if not self.enable_dp_attention and self.dp != 1:
            raise ConfigError("dp > 1 needs --enable-dp-attention (native DP replicas are "
                              "separate runs)")
        if self.tp % (self.ep * self.moe_dp):
            raise ConfigError(f"tp {self.tp} is not a multiple of ep x moe_dp "
                              f"({self.ep} x {self.moe_dp})")
        if self.a2a not in A2A_BACKENDS:
            raise ConfigError(f"a2a must be one of {', '.join(A2A_BACKENDS)}")
        if self.a2a == "deepep" and self.ep != self.tp:
            raise ConfigError("DeepEP needs ep == tp (its buffer uses the TP group on CUDA)")
        if self.dp_gather not in DP_GATHERS:
            raise ConfigError(f"dp_gather must be one of {', '.join(DP_GATHERS)}")
        if self.combine not in COMBINES:
            raise ConfigError(f"combine must be one of {', '.join(COMBINES)}")
        if self.dp_gather == "gatherv" and (self.attn_tp != 1 or self.attn_dp < 2):
            raise ConfigError("dp_gather gatherv needs DP attention with attn_tp == 1")
        if self.dp_gather == "rs_ag" and self.attn_tp < 2:
            raise ConfigError("dp_gather rs_ag needs attn_tp > 1")
        if self.combine == "c_reduce_scatter" and self.attn_dp != self.tp:
            raise ConfigError("combine c_reduce_scatter needs tp == attn_dp")
        if self.steps < 1 or self.shape.layers < 1:
            raise ConfigError("steps and layers must be at least 1")
        if any(not 0 <= r < self.world for r in self.stragglers):
            raise ConfigError(f"straggler ranks must be in [0, {self.world})")
        _nccl_version(self.nccl)
        _torch_version(self.torch)
        if self.naming not in ("sglang", "rank"):
            raise ConfigError("naming must be sglang or rank")
        return self

    # ---- resolved paths ---------------------------------------------------------------------
    def gather_path(self) -> str | None:
        """The DP-gather variant (None when there is no DP gather)."""
        if self.attn_dp < 2 or self.a2a != "none":
            return None
        if self.dp_gather != "auto":
            return self.dp_gather
        return "allgather" if self.attn_tp == 1 else "rs_ag"

    def combine_path(self) -> str:
        if self.a2a == "deepep":
            return "deepep"
        if self.attn_dp < 2:
            return "tp_allreduce"
        if self.combine != "auto":
            return self.combine
        if self.gather_path() == "gatherv" or self.ep == self.attn_dp:
            return "b_reduce_scatterv"
        return "a_allreduce"


def _nccl_version(text: str) -> tuple[int, int]:
    try:
        major, minor = (int(x) for x in text.split(".")[:2])
    except ValueError as exc:
        raise ConfigError(f"NCCL version {text!r} is not MAJOR.MINOR") from exc
    if (major, minor) < (2, 8):
        raise ConfigError("NCCL versions before 2.8 are not generated")
    return major, minor


def _torch_version(text: str) -> tuple[int, int]:
    try:
        major, minor = (int(x) for x in text.split(".")[:2])
    except ValueError as exc:
        raise ConfigError(f"torch version {text!r} is not MAJOR.MINOR") from exc
    return major, minor


def nccl_version(cfg: SynthConfig) -> tuple[int, int]:
    return _nccl_version(cfg.nccl)


def torch_version(cfg: SynthConfig) -> tuple[int, int]:
    return _torch_version(cfg.torch)


@dataclass(frozen=True)
class ProcessGroup:
    kind: str  # SGLang group name: tp, attention_tp, moe_ep ...
    schema_group: str  # schema.Group value
    pg_name: str
    desc: str
    ranks: tuple[int, ...]
    backend: str  # "cuda:nccl" or "cpu:gloo,cuda:gloo"


def _memberships(cfg: SynthConfig) -> list[tuple[str, str, list[list[int]]]]:
    """(sglang name, schema group, member lists) in SGLang's creation order, aliases removed."""
    tp, attn_tp, attn_dp = cfg.tp, cfg.attn_tp, cfg.attn_dp
    ep, moe_dp, moe_tp = cfg.ep, cfg.moe_dp, cfg.moe_tp
    out: list[tuple[str, str, list[list[int]]]] = [
        ("world", schema.Group.WORLD, [list(range(cfg.world))]),
        ("tp", schema.Group.TP, [list(range(tp))]),
    ]
    if tp != 1:  # attn_cp == 1
        out.append(("attn_cp", schema.Group.ATTN_CP, [[r] for r in range(tp)]))
    if attn_tp != tp:
        out.append(("attention_tp", schema.Group.ATTN_TP,
                    [list(range(c * attn_tp, (c + 1) * attn_tp)) for c in range(attn_dp)]))
    if moe_dp != tp:
        out.append(("moe_dp", schema.Group.MOE_DP,
                    [list(range(c, tp, moe_tp * ep)) for c in range(moe_tp * ep)]))
    if ep != tp:
        lists = []
        for d in range(moe_dp):
            for t in range(moe_tp):
                st = d * ep * moe_tp + t
                lists.append(list(range(st, st + ep * moe_tp, moe_tp)))
        out.append(("moe_ep", schema.Group.MOE_EP, lists))
    if moe_tp != tp:
        out.append(("moe_tp", schema.Group.MOE_TP,
                    [list(range(c * moe_tp, (c + 1) * moe_tp)) for c in range(ep * moe_dp)]))
    out.append(("pp", schema.Group.PP, [[r] for r in range(cfg.world)]))
    return out


def process_groups(cfg: SynthConfig) -> list[ProcessGroup]:
    """Every process group of the run in creation order (both device and cpu groups)."""
    groups = [ProcessGroup("default", schema.Group.WORLD, "0", "default_pg",
                           tuple(range(cfg.world)), "cuda:nccl")]
    counter = 1
    for kind, sgroup, lists in _memberships(cfg):
        for ranks in lists:
            for suffix, backend in (("device", "cuda:nccl"), ("cpu", "cpu:gloo,cuda:gloo")):
                groups.append(ProcessGroup(kind, sgroup, str(counter), f"{kind}:{suffix}",
                                           tuple(ranks), backend))
                counter += 1
    return groups


@dataclass(frozen=True)
class RankGroups:
    """The device groups one rank belongs to, by SGLang name (aliases resolved)."""

    rank: int
    by_kind: dict[str, ProcessGroup]
    member_of: list[ProcessGroup]
    pg_count: int

    def device(self, kind: str) -> ProcessGroup:
        alias = {"attention_tp": "tp", "moe_ep": "tp", "moe_tp": "tp", "moe_dp": "tp"}
        while kind not in self.by_kind and kind in alias:
            kind = alias[kind]
        return self.by_kind[kind]


def rank_groups(cfg: SynthConfig, rank: int, groups: list[ProcessGroup] | None = None
                ) -> RankGroups:
    groups = groups if groups is not None else process_groups(cfg)
    mine = [g for g in groups if rank in g.ranks]
    by_kind = {g.kind: g for g in mine if g.desc.endswith(":device")}
    return RankGroups(rank, by_kind, mine, len(groups))


def rank_coords(cfg: SynthConfig, rank: int) -> dict[str, int]:
    """tp / attention-dp / moe-ep ranks as SGLang's file names use them."""
    tp_rank = rank % cfg.tp
    moe_ep_rank = tp_rank % (cfg.tp // cfg.moe_dp) // max(1, cfg.tp // cfg.moe_dp // cfg.ep)
    return {"tp": tp_rank, "dp": tp_rank // cfg.attn_tp, "ep": moe_ep_rank}


def trace_name(cfg: SynthConfig, rank: int) -> str:
    ext = ".trace.json.gz" if cfg.gzip else ".trace.json"
    if cfg.naming == "rank":
        return f"rank{rank}{ext}"
    c = rank_coords(cfg, rank)
    parts = [cfg.profile_id, f"TP-{c['tp']}"]
    if cfg.dp > 1:
        parts.append(f"DP-{c['dp']}")
    if cfg.ep > 1:
        parts.append(f"EP-{c['ep']}")
    return "-".join(parts) + ext
