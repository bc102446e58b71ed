"""How each framework lays ranks out: sizes -> widths, member lists, aliases and coordinates.

One class per layout, chosen by ``ParallelConfig.layout``. Each reproduces the framework's own
group construction (sources below); ``tracekit.topology`` holds the generic part.

* ``sglang``: sgl-project/sglang ``python/sglang/srt/distributed/parallel_state.py``
  (``initialize_model_parallel``) and ``runtime_context.py`` (see ../shared/DOMAIN.md section 2):
  attention and MoE re-read the TP world; native DP replicates it.
* ``vllm``: vllm-project/vllm ``vllm/distributed/parallel_state.py``
  (``initialize_model_parallel``: ``all_ranks = arange(world).reshape(-1, dp, pp, pcp, tp)``,
  each group one axis moved last) and ``vllm/model_executor/layers/fused_moe/config.py``
  (``FusedMoEParallelConfig.make``: the MoE spans DP x PCP x TP, ``ep_rank = dp_rank * pcp * tp
  + pcp_rank * tp + tp_rank`` with ``enable_expert_parallel``, else the same ranks shard the
  experts as one flattened TP).
* ``megatron``: NVIDIA/Megatron-LM ``megatron/core/parallel_state.py``
  (``initialize_model_parallel`` with the default ``order="tp-cp-ep-dp-pp"``, ``RankGenerator``
  and ``generate_masked_orthogonal_rank_groups``): a dense generator (tp, cp, dp, pp) and an
  expert generator (expert tp, ep, expert dp, pp) over the same world, the first token fastest.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from tracekit import schema
from tracekit.errors import ConfigError
from tracekit.schema import Group

if TYPE_CHECKING:
    from tracekit.topology import ParallelConfig

Members = tuple[int, ...]
GroupLists = dict[str, list[Members]]

NOT_SEPARATE = "alias, no separate communicator"


def _rows(arr: np.ndarray, size: int) -> list[Members]:
    return [tuple(int(x) for x in row) for row in arr.reshape(-1, size)]


class Layout:
    """The interface every layout implements (``c`` is the ParallelConfig)."""

    name = ""
    # what `--layout NAME` reproduces, for the help text and the docs
    summary = ""

    def resolve(self, c: ParallelConfig) -> dict[str, Any]:
        """Fields left at their default (0) filled in and checked; ConfigError when the
        sizes are not a configuration of this framework."""
        raise NotImplementedError

    def world_size(self, c: ParallelConfig) -> int:
        raise NotImplementedError

    def attn_dp(self, c: ParallelConfig) -> int:
        """Attention DP shards inside one TP group (SGLang's DP attention); 1 elsewhere."""
        return 1

    def attn_tp(self, c: ParallelConfig) -> int:
        return c.tp

    def replicas(self, c: ParallelConfig) -> int:
        """Full model replicas (each with its own TP group)."""
        return c.dp

    def members(self, c: ParallelConfig) -> GroupLists:
        raise NotImplementedError

    def alias(self, c: ParallelConfig) -> dict[str, str]:
        return {Group.ATTN_TP: Group.TP}

    def alias_note(self, c: ParallelConfig, group: str) -> str:
        return NOT_SEPARATE

    def coords(self, c: ParallelConfig, rank: np.ndarray) -> dict[str, np.ndarray]:
        raise NotImplementedError


def _refuse_foreign(c: ParallelConfig, layout: str) -> None:
    if c.enable_dp_attention:
        raise ConfigError(f"enable_dp_attention is SGLang's switch; with --layout {layout} "
                          "give the DP size alone (--dp)")
    if c.enable_expert_parallel and layout != "vllm":
        raise ConfigError(f"enable_expert_parallel is vLLM's switch; with --layout {layout} "
                          "give the expert-parallel size (--ep)")


class SGLang(Layout):
    name = "sglang"
    summary = ("SGLang: attention (attn_dp, attn_cp, attn_tp) and MoE (moe_dp, ep, moe_tp) "
               "re-read TP")

    def resolve(self, c: ParallelConfig) -> dict[str, Any]:
        if c.enable_expert_parallel:
            raise ConfigError("enable_expert_parallel is vLLM's switch; with --layout sglang "
                              "give the expert-parallel size (--ep)")
        moe_dp = c.moe_dp or 1
        attn_dp = c.dp if c.enable_dp_attention else 1
        if c.tp % (attn_dp * c.attn_cp):
            raise ConfigError(
                f"tp={c.tp} is not divisible by attn_dp*attn_cp={attn_dp}*{c.attn_cp}"
                " (attn_tp = tp / attn_dp / attn_cp must be an integer)")
        if c.tp % (c.ep * moe_dp):
            raise ConfigError(
                f"tp={c.tp} is not divisible by ep*moe_dp={c.ep}*{moe_dp}"
                " (moe_tp = tp / moe_dp / ep must be an integer)")
        moe_tp = c.tp // moe_dp // c.ep
        if c.etp and c.etp != moe_tp:
            raise ConfigError(f"etp={c.etp} contradicts SGLang's moe_tp = tp / moe_dp / ep "
                              f"= {moe_tp}")
        return {"moe_dp": moe_dp, "etp": moe_tp}

    def attn_dp(self, c: ParallelConfig) -> int:
        return c.dp if c.enable_dp_attention else 1

    def attn_tp(self, c: ParallelConfig) -> int:
        return c.tp // self.attn_dp(c) // c.attn_cp

    def replicas(self, c: ParallelConfig) -> int:
        return 1 if c.enable_dp_attention else c.dp

    def world_size(self, c: ParallelConfig) -> int:
        return self.replicas(c) * c.pp * c.tp

    def alias(self, c: ParallelConfig) -> dict[str, str]:
        out: dict[str, str] = {}
        attn_tp = self.attn_tp(c)
        if c.attn_cp == c.tp:
            out[Group.ATTN_CP] = Group.TP
        if attn_tp == c.tp:
            out[Group.ATTN_TP] = Group.TP
        if c.attn_cp > c.moe_dp:
            out[Group.MOE_DP] = out.get(Group.ATTN_CP, Group.ATTN_CP)
        elif c.moe_dp == c.tp:
            out[Group.MOE_DP] = Group.TP
        if c.ep == c.tp and not c.npu:
            out[Group.MOE_EP] = Group.TP
        if c.etp == c.tp:
            out[Group.MOE_TP] = Group.TP
        return out

    def members(self, c: ParallelConfig) -> GroupLists:
        out: GroupLists = {g: [] for g in Group.ALL}
        stage = c.pp * c.tp  # ranks of one native-DP replica
        for rep in range(self.replicas(c)):
            rbase = rep * stage
            out[Group.DP].append(tuple(range(rbase, rbase + stage)))
            for i in range(c.tp):
                out[Group.PP].append(tuple(range(rbase + i, rbase + stage, c.tp)))
            for p in range(c.pp):
                self._stage_groups(c, out, rbase + p * c.tp)
        out[Group.WORLD].append(tuple(range(self.world_size(c))))
        if c.enable_dp_attention or c.dp == 1:
            out[Group.DP] = []
        if c.pp == 1:
            out[Group.PP] = []
        if c.attn_cp > c.moe_dp:  # MOE_DP is ATTN_CP: the same member lists
            out[Group.MOE_DP] = list(out[Group.ATTN_CP])
        return out

    def _stage_groups(self, c: ParallelConfig, out: GroupLists, base: int) -> None:
        at, acp, adp = self.attn_tp(c), c.attn_cp, self.attn_dp(c)
        mt, ep, mdp = c.etp, c.ep, c.moe_dp
        out[Group.TP].append(tuple(range(base, base + c.tp)))
        for blk in range(acp * adp):
            out[Group.ATTN_TP].append(tuple(range(base + blk * at, base + (blk + 1) * at)))
        for d in range(adp):
            for t in range(at):
                start = base + d * at * acp + t
                out[Group.ATTN_CP].append(tuple(range(start, start + at * acp, at)))
        for blk in range(ep * mdp):
            out[Group.MOE_TP].append(tuple(range(base + blk * mt, base + (blk + 1) * mt)))
        for d in range(mdp):
            for t in range(mt):
                start = base + d * ep * mt + t
                out[Group.MOE_EP].append(tuple(range(start, start + ep * mt, mt)))
        if c.attn_cp > c.moe_dp:
            return
        for k in range(mt * ep):
            out[Group.MOE_DP].append(tuple(range(base + k, base + c.tp, mt * ep)))

    def coords(self, c: ParallelConfig, rank: np.ndarray) -> dict[str, np.ndarray]:
        tp_rank = rank % c.tp
        at, acp, mt = self.attn_tp(c), c.attn_cp, c.etp
        return {
            schema.DP_RANK: rank // (c.tp * c.pp),
            schema.PP_RANK: (rank // c.tp) % c.pp,
            schema.TP_RANK: tp_rank,
            schema.ATTN_DP_RANK: tp_rank // (at * acp),
            schema.ATTN_CP_RANK: (tp_rank // at) % acp,
            schema.ATTN_TP_RANK: tp_rank % at,
            schema.MOE_DP_RANK: tp_rank // (c.ep * mt),
            schema.MOE_EP_RANK: (tp_rank // mt) % c.ep,
            schema.MOE_TP_RANK: tp_rank % mt,
        }


class VLLM(Layout):
    """vLLM: rank = ((dp_rank * pp + pp_rank) * pcp + pcp_rank) * tp + tp_rank; ``attn_cp``
    is vLLM's prefill context parallel (PCP). The ``ep`` group (DP x PCP x TP of a PP stage)
    exists for every MoE model; ``enable_expert_parallel`` decides whether the experts are
    split over it (ep = its size) or tensor-sharded across it (ep = 1, moe_tp = its size)."""

    name = "vllm"
    summary = "vLLM: (dp, pp, pcp, tp) with tp fastest; the MoE spans DP x PCP x TP"

    def ep_span(self, c: ParallelConfig) -> int:
        return c.dp * c.attn_cp * c.tp

    def resolve(self, c: ParallelConfig) -> dict[str, Any]:
        _refuse_foreign(c, self.name)
        if c.moe_dp not in (0, 1):
            raise ConfigError(f"moe_dp={c.moe_dp}: vLLM has no MoE data parallel (the experts "
                              f"span DP x PCP x TP = {self.ep_span(c)} ranks)")
        n = self.ep_span(c)
        if c.ep not in (1, n):
            raise ConfigError(f"ep={c.ep}: vLLM's expert-parallel group is DP x PCP x TP = "
                              f"{c.dp}*{c.attn_cp}*{c.tp} = {n} ranks; ep must be 1 or {n}")
        use_ep = n > 1 and (c.enable_expert_parallel or c.ep == n)
        moe_tp = 1 if use_ep else n
        if c.etp and c.etp != moe_tp:
            raise ConfigError(f"etp={c.etp} contradicts vLLM's MoE tensor parallel "
                              f"({moe_tp}: {'1 with' if use_ep else 'DP x PCP x TP without'}"
                              " expert parallel)")
        return {"moe_dp": 1, "etp": moe_tp, "ep": n if use_ep else 1,
                "enable_expert_parallel": use_ep}

    def world_size(self, c: ParallelConfig) -> int:
        return c.dp * c.pp * c.attn_cp * c.tp

    def _grid(self, c: ParallelConfig) -> np.ndarray:
        # vllm parallel_state.initialize_model_parallel: ExternalDP x DP x PP x PCP x TP
        return np.arange(self.world_size(c)).reshape(-1, c.dp, c.pp, c.attn_cp, c.tp)

    def members(self, c: ParallelConfig) -> GroupLists:
        g = self._grid(c)
        n = self.ep_span(c)
        out: GroupLists = {k: [] for k in Group.ALL}
        out[Group.TP] = _rows(g, c.tp)
        out[Group.ATTN_TP] = list(out[Group.TP])
        out[Group.ATTN_CP] = _rows(g.swapaxes(3, 4), c.attn_cp)
        out[Group.PP] = _rows(g.swapaxes(2, 4), c.pp)
        out[Group.DP] = _rows(g.swapaxes(1, 4), c.dp)
        out[Group.MOE_EP] = _rows(g.swapaxes(1, 2), n)
        out[Group.MOE_TP] = (list(out[Group.MOE_EP]) if c.etp == n
                             else [(r,) for r in range(self.world_size(c))])
        out[Group.WORLD] = [tuple(range(self.world_size(c)))]
        return out

    def alias(self, c: ParallelConfig) -> dict[str, str]:
        out = {Group.ATTN_TP: Group.TP}
        n = self.ep_span(c)
        if c.etp == n > 1:  # experts tensor-sharded over the flattened DP x PCP x TP
            out[Group.MOE_TP] = Group.TP if n == c.tp else Group.MOE_EP
        return out

    def alias_note(self, c: ParallelConfig, group: str) -> str:
        if group == Group.MOE_TP:
            return "experts tensor-sharded over the flattened DP x PCP x TP (no expert parallel)"
        return NOT_SEPARATE

    def coords(self, c: ParallelConfig, rank: np.ndarray) -> dict[str, np.ndarray]:
        tp_rank = rank % c.tp
        pcp_rank = (rank // c.tp) % c.attn_cp
        pp_rank = (rank // (c.tp * c.attn_cp)) % c.pp
        dp_rank = rank // (c.tp * c.attn_cp * c.pp)
        flat = (dp_rank * c.attn_cp + pcp_rank) * c.tp + tp_rank  # flatten_tp_across_dp_and_pcp
        zero = np.zeros_like(rank)
        ep_on = c.enable_expert_parallel
        return {
            schema.DP_RANK: dp_rank, schema.PP_RANK: pp_rank, schema.TP_RANK: tp_rank,
            schema.ATTN_DP_RANK: zero, schema.ATTN_CP_RANK: pcp_rank,
            schema.ATTN_TP_RANK: tp_rank, schema.MOE_DP_RANK: zero,
            schema.MOE_EP_RANK: flat if ep_on else zero,
            schema.MOE_TP_RANK: zero if ep_on else flat,
        }


MEGATRON_ORDER = "tp-cp-ep-dp-pp"


def megatron_rank_groups(sizes: dict[str, int], token: str,
                         order: str = MEGATRON_ORDER) -> list[Members]:
    """``RankGenerator(...).get_ranks(token)``: the groups spanning the axes in ``token``.

    The order's first axis is the fastest (rank = tp + tp_size * (cp + ...)); groups are
    enumerated over the other axes, first fastest, and members ordered the same way."""
    axes = order.split("-")
    shape = [sizes.get(a, 1) for a in axes]
    grid = np.arange(math.prod(shape)).reshape(shape[::-1])  # grid axis i = axes[-1 - i]
    wanted = set(token.split("-"))
    rev = axes[::-1]
    outer = [i for i, a in enumerate(rev) if a not in wanted]
    inner = [i for i, a in enumerate(rev) if a in wanted]
    size = math.prod(sizes.get(a, 1) for a in wanted)
    return _rows(grid.transpose(outer + inner), size)


class Megatron(Layout):
    """Megatron-core training: world = tp * cp * dp * pp in order tp-cp-ep-dp-pp; the expert
    grid re-reads the same world as expert TP (``etp``, default tp) x ep x expert DP x pp."""

    name = "megatron"
    summary = ("Megatron-core: order tp-cp-ep-dp-pp; experts as etp x ep x expert-dp x pp "
               "over the same world")

    def resolve(self, c: ParallelConfig) -> dict[str, Any]:
        _refuse_foreign(c, self.name)
        etp = c.etp or c.tp  # expert_tensor_parallel_size defaults to tensor_model_parallel_size
        world = self.world_size(c)
        span = etp * c.ep * c.pp
        if world % span:
            raise ConfigError(f"world size {world} (tp*cp*dp*pp) is not divisible by "
                              f"etp*ep*pp={etp}*{c.ep}*{c.pp} (Megatron's expert grid)")
        edp = world // span
        if c.moe_dp and c.moe_dp != edp:
            raise ConfigError(f"moe_dp={c.moe_dp} contradicts Megatron's expert data parallel "
                              f"= world / (etp*ep*pp) = {edp}")
        return {"moe_dp": edp, "etp": etp}

    def world_size(self, c: ParallelConfig) -> int:
        return c.tp * c.attn_cp * c.dp * c.pp

    def dense_sizes(self, c: ParallelConfig) -> dict[str, int]:
        return {"tp": c.tp, "cp": c.attn_cp, "ep": 1, "dp": c.dp, "pp": c.pp}

    def expert_sizes(self, c: ParallelConfig) -> dict[str, int]:
        return {"tp": c.etp, "cp": 1, "ep": c.ep, "dp": c.moe_dp, "pp": c.pp}

    def members(self, c: ParallelConfig) -> GroupLists:
        dense, expert = self.dense_sizes(c), self.expert_sizes(c)
        out: GroupLists = {k: [] for k in Group.ALL}
        out[Group.TP] = megatron_rank_groups(dense, "tp")
        out[Group.ATTN_TP] = list(out[Group.TP])
        out[Group.ATTN_CP] = megatron_rank_groups(dense, "cp")
        out[Group.DP] = megatron_rank_groups(dense, "dp")
        out[Group.DP_CP] = megatron_rank_groups(dense, "dp-cp")
        out[Group.PP] = megatron_rank_groups(dense, "pp")
        out[Group.MOE_EP] = megatron_rank_groups(expert, "ep")
        out[Group.MOE_TP] = megatron_rank_groups(expert, "tp")
        out[Group.MOE_DP] = megatron_rank_groups(expert, "dp")
        out[Group.WORLD] = [tuple(range(self.world_size(c)))]
        return out

    def alias(self, c: ParallelConfig) -> dict[str, str]:
        out = {Group.ATTN_TP: Group.TP}
        if c.attn_cp == 1:
            out[Group.DP_CP] = Group.DP
        return out

    def alias_note(self, c: ParallelConfig, group: str) -> str:
        if group == Group.DP_CP:
            return ("cp=1: Megatron creates both groups with the same members and the same "
                    "role; folded")
        return "attention uses the TP group" if group == Group.ATTN_TP else NOT_SEPARATE

    def coords(self, c: ParallelConfig, rank: np.ndarray) -> dict[str, np.ndarray]:
        tp_rank = rank % c.tp
        etp_rank = rank % c.etp
        return {
            schema.DP_RANK: (rank // (c.tp * c.attn_cp)) % c.dp,
            schema.PP_RANK: rank // (c.tp * c.attn_cp * c.dp),
            schema.TP_RANK: tp_rank,
            schema.ATTN_DP_RANK: np.zeros_like(rank),
            schema.ATTN_CP_RANK: (rank // c.tp) % c.attn_cp,
            schema.ATTN_TP_RANK: tp_rank,
            schema.MOE_DP_RANK: (rank // (c.etp * c.ep)) % c.moe_dp,
            schema.MOE_EP_RANK: (rank // c.etp) % c.ep,
            schema.MOE_TP_RANK: etp_rank,
        }


LAYOUTS: dict[str, Layout] = {lay.name: lay for lay in (SGLang(), VLLM(), Megatron())}
NAMES = tuple(LAYOUTS)
DEFAULT = "sglang"


def layout_of(name: str) -> Layout:
    try:
        return LAYOUTS[name]
    except KeyError:
        raise ConfigError(f"unknown layout {name!r} (one of {', '.join(NAMES)})") from None
