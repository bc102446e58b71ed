"""The reference MoE workload: a DeepSeek-style decoder layer on gloo ranks.

It builds SGLang's process groups (``tp``, ``attention_tp``, ``attn_cp``, ``moe_ep``,
``moe_tp``, ``moe_dp``, ``world``) and runs every communication path SGLang has for DP
attention and MoE (attention reduction, DP gather, combine A/B/C, DeepEP-like all-to-all,
FuseEP-like fused call) with functions named as SGLang names them, checks the numbers
against a single-process reference, and writes ground-truth sidecars.

``python -m tracekit.workloads --help`` runs it; ``python -m tracekit.workloads.samples``
regenerates ``sample_traces/``.
"""

from tracekit.workloads.config import WorkloadConfig

__all__ = ["WorkloadConfig"]
