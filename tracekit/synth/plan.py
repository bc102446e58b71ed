"""Which collectives a rank issues in one step, in order: the ground truth of a synthetic run.

A step is one forward pass: ``extend`` (prefill, eager) or ``decode`` (CUDA-graph replay when
the config says so). Every rank issues the same sequence of slots; only the rows of its own
attention-DP rank, its group members and its process groups differ. Each slot carries the
GPU compute that precedes it (a base plus a per-row cost) and its alpha-beta transfer time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracekit import schema
from tracekit.rules.labels import PathLabel
from tracekit.synth import names
from tracekit.synth.config import SynthConfig, nccl_version

Op = schema.Op
P = PathLabel
G = schema.Group

CA_MAX_BYTES = 8 * 1024 * 1024
CA_SIZES = (2, 4, 6, 8)
NVLINK = (3_000.0, 180.0)  # alpha ns, beta GB/s (bytes per ns)
IB = (9_000.0, 45.0)


@dataclass(frozen=True)
class Slot:
    """One logical collective (one sidecar entry) and the compute before it."""

    op: str
    gkind: str  # SGLang group kind (tp, attention_tp, moe_ep...), resolved per rank
    group: str  # schema.Group of the ground truth
    path: str  # PathLabel
    layer: int | None
    call: str  # python function that issued it
    frames: tuple[str, ...]  # keys of names.F, outer to inner, below the layer frame
    transport: str  # c10d | ca | pynccl | deepep
    kernels: tuple[str, ...]
    in_nelems: int
    out_nelems: int
    in_split: tuple[int, ...]
    out_split: tuple[int, ...]
    nbytes: int  # message size S
    base_ns: float  # compute before the slot: base ...
    row_ns: float  # ... plus this per row of the row scope
    row_scope: str  # "local" (own DP rows) or "global" (all rows)
    transfer_ns: float
    memcpy_bytes: int = 0  # a device copy before the collective (gather / zero-fill)


@dataclass(frozen=True)
class StepInfo:
    index: int
    mode: str  # extend | decode
    graph: bool
    rows: tuple[int, ...]  # token rows per attention-DP rank


def step_info(cfg: SynthConfig, step: int) -> StepInfo:
    extend = step < cfg.extend_steps
    base = cfg.shape.extend_tokens if extend else cfg.shape.tokens
    rng = np.random.default_rng([cfg.seed, 17, step])
    rows = tuple(int(x) for x in np.maximum(1, np.round(base * rng.uniform(0.5, 1.0, cfg.attn_dp))))
    return StepInfo(step, "extend" if extend else "decode", (not extend) and cfg.cuda_graph, rows)


def _link(cfg: SynthConfig, n: int) -> tuple[float, float]:
    return IB if n > cfg.gpus_per_node else NVLINK


def _transfer(cfg: SynthConfig, op: str, n: int, nbytes: int) -> float:
    if n <= 1:
        return 1_500.0
    alpha, beta = _link(cfg, n)
    factor = {Op.ALL_REDUCE: 2.0 * (n - 1) / n}.get(op, (n - 1) / n)
    if op in (Op.DISPATCH, Op.COMBINE, Op.OTHER):
        factor = 1.0
    return alpha * (1.0 + np.log2(n) / 4.0) + factor * nbytes / beta


class _Builder:
    def __init__(self, cfg: SynthConfig, info: StepInfo, rank: int) -> None:
        self.cfg, self.info, self.rank = cfg, info, rank
        self.version = nccl_version(cfg)
        self.h = cfg.shape.hidden
        self.eb = cfg.shape.dtype_bytes
        self.local = info.rows[(rank % cfg.tp) // cfg.attn_tp]
        self.max_len = max(info.rows)
        self.slots: list[Slot] = []
        self.pending = (0.0, 0.0, "local")

    def compute(self, base_ns: float, row_ns: float, scope: str) -> None:
        b, r, _ = self.pending
        self.pending = (b + base_ns, r + row_ns, scope)

    def nccl(self, op: str, symmetric: bool = False) -> str:
        return names.nccl_kernel(op, self.version, symmetric)

    def add(self, op: str, gkind: str, group: str, path: str, layer: int | None, call: str,
            frames: tuple[str, ...], transport: str, kernels: tuple[str, ...], n: int,
            in_rows: int, out_rows: int, nbytes: int, *, in_split: tuple[int, ...] = (),
            out_split: tuple[int, ...] = (), memcpy_bytes: int = 0) -> None:
        base, row, scope = self.pending
        self.pending = (0.0, 0.0, "local")
        self.slots.append(Slot(
            op, gkind, group, path, layer, call, frames, transport, kernels,
            in_rows * self.h, out_rows * self.h, in_split, out_split, nbytes, base, row, scope,
            _transfer(self.cfg, op, n, nbytes), memcpy_bytes))

    # ---- the collectives of one layer ----------------------------------------------------------
    def tp_all_reduce(self, rows: int, path: str, layer: int, call: str,
                      frames: tuple[str, ...]) -> None:
        cfg, nbytes = self.cfg, rows * self.h * self.eb
        use_ca = cfg.custom_ar and cfg.tp in CA_SIZES and nbytes <= CA_MAX_BYTES
        if use_ca:
            kernel = names.custom_ar_kernel(self.version, cfg.tp, nbytes)
            self.add(Op.ALL_REDUCE, "tp", G.TP, path, layer, call,
                     (*frames, "gc.all_reduce", "gc.outplace_all_reduce", "ca.custom_all_reduce"),
                     "ca", (kernel,), cfg.tp, rows, rows, nbytes)
        elif self.info.graph:
            self.add(Op.ALL_REDUCE, "tp", G.TP, path, layer, call, (*frames, "gc.all_reduce"),
                     "pynccl", (self.nccl(Op.ALL_REDUCE, symmetric=True),), cfg.tp, rows, rows,
                     nbytes)
        else:
            self.add(Op.ALL_REDUCE, "tp", G.TP, path, layer, call,
                     (*frames, "gc.all_reduce", "c10d_logger", "dist.all_reduce"), "c10d",
                     (self.nccl(Op.ALL_REDUCE),), cfg.tp, rows, rows, nbytes)

    def c10d(self, op: str, gkind: str, group: str, n: int, path: str, layer: int, call: str,
             frames: tuple[str, ...], in_rows: int, out_rows: int, nbytes: int,
             memcpy_bytes: int = 0) -> None:
        gc_fn, dist_fn = {
            Op.ALL_REDUCE: ("gc.all_reduce", "dist.all_reduce"),
            Op.ALL_GATHER: ("gc.all_gather_into_tensor", "dist.all_gather_into_tensor"),
            Op.REDUCE_SCATTER: ("gc.reduce_scatter_tensor", "dist.reduce_scatter_tensor"),
        }[op]
        if self.info.graph:
            self.add(op, gkind, group, path, layer, call, (*frames, gc_fn), "pynccl",
                     (self.nccl(op),), n, in_rows, out_rows, nbytes, memcpy_bytes=memcpy_bytes)
        else:
            self.add(op, gkind, group, path, layer, call,
                     (*frames, gc_fn, "c10d_logger", dist_fn), "c10d", (self.nccl(op),), n,
                     in_rows, out_rows, nbytes, memcpy_bytes=memcpy_bytes)

    def layer(self, layer: int) -> None:
        cfg, h, eb = self.cfg, self.h, self.eb
        tp, attn_tp, attn_dp = cfg.tp, cfg.attn_tp, cfg.attn_dp
        glob = sum(self.info.rows) if attn_dp > 1 else self.local
        self.compute(18_000.0, 30.0, "local")  # norm, qkv, rope, attention, o-proj
        if attn_tp == tp and tp > 1:
            self.tp_all_reduce(self.local, P.ATTN_FULL_TP, layer,
                               "tensor_model_parallel_all_reduce",
                               ("attn", "row_linear", "tensor_model_parallel_all_reduce"))
        elif 1 < attn_tp < tp:
            rows = self.local
            self.c10d(Op.ALL_REDUCE, "attention_tp", G.ATTN_TP, attn_tp, P.ATTN_TP, layer,
                      "attn_tp_all_reduce", ("attn", "attn_tp_all_reduce"), rows, rows,
                      rows * h * eb)
        self.compute(4_000.0, 2.0, "local")  # residual add, norm, gate, top-k
        gather = cfg.gather_path()
        if gather is not None:
            self.gather(gather, layer, glob)
        combine = cfg.combine_path()
        if combine == "deepep":
            self.deepep(layer)
            return
        self.compute(25_000.0, 6.0 * cfg.shape.topk / max(1, cfg.ep), "global")  # experts
        rows_g = glob if gather in ("allreduce", "gatherv") or gather is None else \
            self.max_len * attn_dp
        if combine == "tp_allreduce":
            self.tp_all_reduce(self.local, P.NO_DPA_MOE_AR, layer,
                               "tensor_model_parallel_all_reduce",
                               ("moe", "forward_normal", "tensor_model_parallel_all_reduce"))
        elif combine == "a_allreduce":
            self.tp_all_reduce(rows_g, P.COMBINE_A, layer, "tensor_model_parallel_all_reduce",
                               ("moe", "forward_normal", "tensor_model_parallel_all_reduce"))
            self.compute(2_000.0, 0.5, "global")  # dp_scatter: a copy, no collective
        elif combine == "b_reduce_scatterv":
            split = tuple(self.info.rows)
            self.add(Op.REDUCE_SCATTERV, "tp", G.TP, P.COMBINE_B, layer, "reduce_scatterv",
                     ("postprocess_layer", "gc.reduce_scatterv", "pynccl.group"), "pynccl",
                     tuple(self.nccl(Op.REDUCE) for _ in split), tp, sum(split), self.local,
                     sum(split) * h * eb, in_split=split)
        else:  # c_reduce_scatter
            self.c10d(Op.REDUCE_SCATTER, "tp", G.TP, tp, P.COMBINE_C, layer,
                      "dp_reduce_scatter_tensor", ("postprocess_layer", "dp_reduce_scatter_tensor"),
                      rows_g, rows_g // tp, rows_g * h * eb)

    def gather(self, gather: str, layer: int, glob: int) -> None:
        cfg, h, eb = self.cfg, self.h, self.eb
        tp, attn_tp, attn_dp = cfg.tp, cfg.attn_tp, cfg.attn_dp
        frames = ("prepare_mlp", "dp_gather_partial", "_dp_gather")
        if gather == "gatherv":
            split = tuple(self.info.rows)
            self.add(Op.ALL_GATHERV, "tp", G.TP, P.GATHER_V, layer, "dp_gather_partial",
                     (*frames, "gc.all_gatherv", "pynccl.group"), "pynccl",
                     tuple(self.nccl(Op.BROADCAST) for _ in split), tp, self.local, sum(split),
                     sum(split) * h * eb, out_split=split)
        elif gather == "allreduce":
            self.tp_all_reduce(glob, P.GATHER_AR, layer, "dp_gather_partial",
                               (*frames, "_dp_gather_via_all_reduce",
                                "tensor_model_parallel_all_reduce"))
        elif gather == "allgather":
            m = self.max_len
            self.c10d(Op.ALL_GATHER, "tp", G.TP, tp, P.GATHER_AG, layer, "dp_gather_partial",
                      (*frames, "_dp_gather_via_all_gather"), m, m * attn_dp, m * attn_dp * h * eb,
                      memcpy_bytes=m * h * eb)
        else:  # rs_ag
            m = self.max_len
            m_loc = max(1, m // attn_tp)
            self.c10d(Op.REDUCE_SCATTER, "attention_tp", G.ATTN_TP, attn_tp, P.GATHER_RS_AG,
                      layer, "dp_gather_partial", (*frames, "_dp_gather_via_all_gather"), m, m_loc,
                      m * h * eb, memcpy_bytes=m * h * eb)
            self.c10d(Op.ALL_GATHER, "tp", G.TP, tp, P.GATHER_RS_AG, layer, "dp_gather_partial",
                      (*frames, "_dp_gather_via_all_gather"), m_loc, m_loc * tp,
                      m_loc * tp * h * eb)

    def deepep(self, layer: int) -> None:
        cfg, h = self.cfg, self.h
        n = cfg.ep
        internode = n > cfg.gpus_per_node
        send = self.local * min(cfg.shape.topk, n)
        mode = "normal" if self.info.mode == "extend" else "ll"
        k = names.deepep_kernels(mode, min(n, cfg.gpus_per_node), internode, h)
        moe = ("moe", "forward_deepep")
        if mode == "normal":
            # get_dispatch_layout (local counting, no collective) and notify_dispatch (the
            # dispatch's count exchange) run on the DeepEP stream before the dispatch kernel;
            # the combine's notify (cached_notify[_combine]) before the combine kernel
            self.add(Op.DISPATCH, "moe_ep", G.MOE_EP, P.DEEPEP_NORMAL_DISPATCH, layer, "dispatch",
                     (*moe, "deepep.dispatch", "deepep.buffer_dispatch"), "deepep",
                     (k["layout"], k["notify"], k["dispatch"]), n, self.local, send, send * h)
            self.compute(25_000.0, 6.0 * cfg.shape.topk / n, "local")
            self.add(Op.COMBINE, "moe_ep", G.MOE_EP, P.DEEPEP_NORMAL_COMBINE, layer, "combine",
                     (*moe, "deepep.combine", "deepep.buffer_combine"), "deepep",
                     (k["cached_notify"], k["combine"]), n, send, self.local, send * h * 2)
        else:
            self.add(Op.DISPATCH, "moe_ep", G.MOE_EP, P.DEEPEP_LL_DISPATCH, layer, "dispatch",
                     (*moe, "deepep.dispatch", "deepep.ll_dispatch"), "deepep",
                     (k["dispatch"],), n, self.local, send, send * h)
            self.compute(25_000.0, 6.0 * cfg.shape.topk / n, "local")
            self.add(Op.COMBINE, "moe_ep", G.MOE_EP, P.DEEPEP_LL_COMBINE, layer, "combine",
                     (*moe, "deepep.combine", "deepep.ll_combine"), "deepep",
                     (k["combine"],), n, send, self.local, send * h * 2)


def plan_step(cfg: SynthConfig, rank: int, step: int) -> tuple[StepInfo, list[Slot]]:
    """The slots rank ``rank`` issues in step ``step``."""
    info = step_info(cfg, step)
    b = _Builder(cfg, info, rank)
    for layer in range(cfg.shape.layers):
        b.layer(layer)
    return info, b.slots


def compute_matrix(cfg: SynthConfig, info: StepInfo, slots: list[Slot]) -> np.ndarray:
    """GPU compute before each slot on each rank (ns), shape (slots, world), with noise and
    the planted stragglers; the same on every rank that computes it."""
    world = cfg.world
    ranks = np.arange(world)
    local_rows = np.asarray(info.rows)[(ranks % cfg.tp) // cfg.attn_tp]
    glob = float(sum(info.rows)) if cfg.attn_dp > 1 else local_rows.astype(float)
    base = np.array([s.base_ns for s in slots])[:, None]
    row = np.array([s.row_ns for s in slots])[:, None]
    scope_local = np.array([s.row_scope == "local" for s in slots])[:, None]
    rows = np.where(scope_local, local_rows[None, :], glob)
    rng = np.random.default_rng([cfg.seed, 29, info.index])
    noise = rng.lognormal(0.0, cfg.noise, (len(slots), world))
    out = (base + row * rows) * noise
    if cfg.stragglers:
        out[:, list(cfg.stragglers)] *= cfg.straggle_factor
    return out


def transfer_noise(cfg: SynthConfig, info: StepInfo, n: int) -> np.ndarray:
    rng = np.random.default_rng([cfg.seed, 31, info.index])
    return rng.lognormal(0.0, cfg.noise, n)
