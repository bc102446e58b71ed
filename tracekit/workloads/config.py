"""The workload's parallel configuration, named as SGLang's ServerArgs name it.

A config says how many ranks there are and how they are re-read by attention and by the MoE
(DOMAIN.md section 2), and which communication path each step of a layer takes. ``resolve()``
checks it and fills the ``auto`` choices the way SGLang would pick them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tracekit.errors import ConfigError

ATTN_REDUCE = ("auto", "full_tp", "attn_tp", "none")
DP_GATHER = ("auto", "gatherv", "sum_len", "max_len")
COMBINE = ("auto", "a", "b", "c")
A2A = ("none", "deepep", "fuseep")
DEEPEP_MODES = ("normal", "low_latency")
BUGS = ("none", "double-reduce", "global-tp-reduce", "skip-all-reduce", "shape-mismatch")
# planted bugs that change the layer's output (the others hang, or only disagree in shape)
NUMERIC_BUGS = ("double-reduce", "global-tp-reduce")
HANG_TIMEOUT_S = 5.0  # skip-all-reduce: the gloo timeout, so that the hang ends quickly


@dataclass(frozen=True)
class WorkloadConfig:
    """One run of the reference layer. ``auto`` fields are filled by :meth:`resolve`."""

    tp_size: int = 4
    dp_size: int = 1
    enable_dp_attention: bool = False
    ep_size: int = 1
    moe_dp_size: int = 1
    attn_cp_size: int = 1
    npu: bool = False
    attn_reduce: str = "auto"
    dp_gather: str = "auto"
    combine: str = "auto"
    a2a: str = "none"
    deepep_mode: str = "normal"  # DeepEP normal (extend) or low_latency (decode) mode
    bug: str = "none"
    layers: int = 2
    steps: int = 1
    hidden: int = 16
    ffn: int = 32
    experts: int = 8
    topk: int = 2
    seed: int = 0
    cpu_groups: bool = True  # also create SGLang's gloo ``:cpu`` twin of every group
    timeout_s: float | None = None  # gloo timeout of every group (torch's default if None)

    # ---- derived widths (DOMAIN.md section 2) -------------------------------------------
    @property
    def world_size(self) -> int:
        return self.tp_size

    @property
    def attn_dp_size(self) -> int:
        return self.dp_size if self.enable_dp_attention else 1

    @property
    def attn_tp_size(self) -> int:
        return self.tp_size // self.attn_dp_size // self.attn_cp_size

    @property
    def moe_tp_size(self) -> int:
        return self.tp_size // self.ep_size // self.moe_dp_size

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    # ---- checking and filling the auto choices -------------------------------------------
    def resolve(self) -> WorkloadConfig:
        """Return a checked copy with every ``auto`` replaced by the path SGLang would take."""
        self._check_widths()
        for name, allowed in (("attn_reduce", ATTN_REDUCE), ("dp_gather", DP_GATHER),
                              ("combine", COMBINE), ("a2a", A2A), ("bug", BUGS),
                              ("deepep_mode", DEEPEP_MODES)):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name}={getattr(self, name)!r}: choose one of {allowed}")
        attn_reduce = self._attn_reduce()
        dp_gather, combine = self._gather_and_combine()
        resolved = dataclasses.replace(
            self, attn_reduce=attn_reduce, dp_gather=dp_gather, combine=combine)
        resolved._check_bug()
        if resolved.bug == "skip-all-reduce" and resolved.timeout_s is None:
            resolved = dataclasses.replace(resolved, timeout_s=HANG_TIMEOUT_S)
        return resolved

    def _check_widths(self) -> None:
        for name in ("tp_size", "dp_size", "ep_size", "moe_dp_size", "attn_cp_size", "layers",
                     "steps", "hidden", "ffn", "experts", "topk"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1")
        if self.attn_cp_size != 1:
            raise ConfigError("attn_cp_size > 1 is not modelled by the reference layer")
        if self.moe_dp_size != 1:
            raise ConfigError("moe_dp_size > 1 is not modelled by the reference layer")
        if self.enable_dp_attention and self.tp_size % (self.dp_size * self.attn_cp_size):
            raise ConfigError(f"tp_size {self.tp_size} is not a multiple of dp_size {self.dp_size}")
        if not self.enable_dp_attention and self.dp_size != 1:
            raise ConfigError(
                "native DP replicas (dp_size > 1 without DP attention) are not modelled")
        if self.tp_size % (self.ep_size * self.moe_dp_size):
            raise ConfigError(f"tp_size {self.tp_size} is not a multiple of ep_size {self.ep_size}")
        if self.experts % self.ep_size:
            raise ConfigError(f"experts {self.experts} not divisible by ep_size {self.ep_size}")
        if self.ffn % self.moe_tp_size:
            raise ConfigError(f"ffn {self.ffn} not divisible by moe_tp_size {self.moe_tp_size}")
        if self.hidden % self.attn_tp_size:
            raise ConfigError(f"hidden {self.hidden} not divisible by attn_tp {self.attn_tp_size}")
        if self.topk > self.experts:
            raise ConfigError("topk > experts")

    def _attn_reduce(self) -> str:
        attn_tp, tp = self.attn_tp_size, self.tp_size
        natural = "none" if attn_tp == 1 else ("full_tp" if attn_tp == tp else "attn_tp")
        if self.attn_reduce not in ("auto", natural):
            raise ConfigError(
                f"attn_reduce={self.attn_reduce} does not fit attn_tp={attn_tp}, tp={tp} "
                f"(SGLang takes {natural}; plant --bug global-tp-reduce for the wrong one)")
        return natural

    def _gather_and_combine(self) -> tuple[str, str]:
        dpa = self.attn_dp_size > 1
        if self.deepep_mode != "normal" and self.a2a != "deepep":
            raise ConfigError("deepep_mode applies to a2a=deepep only")
        if self.a2a != "none":
            if self.ep_size != self.tp_size:
                raise ConfigError(f"a2a={self.a2a} needs ep_size == tp_size")
            if self.dp_gather not in ("auto", "none") or self.combine not in ("auto", "none"):
                raise ConfigError(f"a2a={self.a2a} has no DP gather or combine collective")
            return "none", "none"
        if not dpa:
            if self.dp_gather not in ("auto", "none") or self.combine not in ("auto", "a"):
                raise ConfigError("without DP attention there is no DP gather and combine is A")
            return "none", "a"
        gather = self.dp_gather if self.dp_gather != "auto" else (
            "gatherv" if self.combine == "b" and self.attn_tp_size == 1 else
            "max_len" if self.combine == "c" else "sum_len")
        combine = self.combine if self.combine != "auto" else (
            "b" if gather == "gatherv" else "a")
        if gather == "gatherv" and self.attn_tp_size != 1:
            raise ConfigError("gatherv needs attn_tp == 1 (tp == attn_dp), as is_dp_gatherv_active")
        if combine == "b" and self.attn_tp_size != 1:
            raise ConfigError("combine b (reduce_scatterv) needs attn_tp == 1 here")
        if combine == "c" and gather != "max_len":
            raise ConfigError("combine c (equal reduce_scatter) needs dp_gather max_len")
        return gather, combine

    def _check_bug(self) -> None:
        if self.bug in ("skip-all-reduce", "shape-mismatch") and (
                self.tp_size < 2 or self.a2a != "none" or self.combine not in ("a", "none")):
            raise ConfigError(f"--bug {self.bug} needs the post-experts AllReduce: tp > 1, "
                              "no --a2a, combine a")
        if self.bug == "double-reduce" and self.combine not in ("b", "c"):
            raise ConfigError("--bug double-reduce needs combine b or c")
        if self.bug == "global-tp-reduce":
            if not 1 < self.attn_tp_size < self.tp_size:
                raise ConfigError("--bug global-tp-reduce needs 1 < attn_tp < tp")
            if self.dp_gather != "max_len":
                raise ConfigError("--bug global-tp-reduce needs dp_gather max_len (equal rows)")
