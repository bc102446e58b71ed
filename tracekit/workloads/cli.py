"""Command line of ``python -m tracekit.workloads``."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from tracekit.errors import ConfigError
from tracekit.workloads.config import (
    A2A,
    BUGS,
    COMBINE,
    DEEPEP_MODES,
    DP_GATHER,
    NUMERIC_BUGS,
    WorkloadConfig,
)

EXIT_MISMATCH = 3  # an unplanted mismatch, or a planted bug whose output still matches


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tracekit.workloads",
        description="Run the reference DeepSeek-style MoE layer on gloo ranks and check it "
                    "against a single-process reference.",
        epilog="Exit status: 0 when every rank matches the reference (or, with --bug, when the "
               "planted bug makes it mismatch as intended; a line says MISMATCH); "
               f"{EXIT_MISMATCH} otherwise; 2 for a bad configuration.")
    a = p.add_argument
    a("--tp", type=int, default=4, help="tp_size = number of ranks (PP=1)")
    a("--dp", type=int, default=1, help="dp_size (attention DP width with --dp-attention)")
    a("--dp-attention", action="store_true", help="enable_dp_attention")
    a("--ep", type=int, default=1, help="ep_size")
    a("--npu", action="store_true", help="NPU mode: MOE_EP is always its own communicator")
    a("--dp-gather", choices=DP_GATHER, default="auto")
    a("--combine", choices=COMBINE, default="auto", help="a: AllReduce+dp_scatter, "
      "b: reduce_scatterv, c: equal reduce_scatter")
    a("--a2a", choices=A2A, default="none", help="deepep: dispatch/combine all-to-all; "
      "fuseep: one fused_deep_moe call")
    a("--deepep-mode", choices=DEEPEP_MODES, default="normal",
      help="with --a2a deepep: normal (count exchange + uneven all-to-all) or low_latency "
      "(fixed slots, equal all-to-all)")
    a("--bug", choices=BUGS, default="none")
    a("--layers", type=int, default=2)
    a("--steps", type=int, default=1)
    a("--seed", type=int, default=0)
    a("--timeout", type=float, default=None, help="gloo timeout of every group, seconds "
      "(default torch's; --bug skip-all-reduce: 5)")
    a("--no-cpu-groups", action="store_true", help="skip SGLang's gloo ':cpu' twin groups")
    a("--trace-dir", type=Path, help="profile the steps; rank{r}.trace.json.gz go here")
    a("--sidecar-dir", type=Path, help="ground truth rank{r}.sidecar.json (default: trace dir)")
    a("--scenario", default="workload", help="scenario name written into the sidecars")
    return p


def config_from_args(ns: argparse.Namespace) -> WorkloadConfig:
    return WorkloadConfig(
        tp_size=ns.tp, dp_size=ns.dp, enable_dp_attention=ns.dp_attention, ep_size=ns.ep,
        npu=ns.npu, dp_gather=ns.dp_gather, combine=ns.combine, a2a=ns.a2a,
        deepep_mode=ns.deepep_mode, bug=ns.bug,
        layers=ns.layers, steps=ns.steps, seed=ns.seed, cpu_groups=not ns.no_cpu_groups,
        timeout_s=ns.timeout,
    ).resolve()


def command_line(cfg: WorkloadConfig, extra: list[str] | None = None) -> str:
    """The command that reruns ``cfg`` (used in manifests)."""
    args = ["python", "-m", "tracekit.workloads", "--tp", str(cfg.tp_size)]
    if cfg.enable_dp_attention:
        args += ["--dp", str(cfg.dp_size), "--dp-attention"]
    if cfg.ep_size != 1:
        args += ["--ep", str(cfg.ep_size)]
    if cfg.npu:
        args.append("--npu")
    if cfg.dp_gather != "none":
        args += ["--dp-gather", cfg.dp_gather]
    if cfg.combine != "none":
        args += ["--combine", cfg.combine]
    if cfg.a2a != "none":
        args += ["--a2a", cfg.a2a]
    if cfg.deepep_mode != "normal":
        args += ["--deepep-mode", cfg.deepep_mode]
    if cfg.bug != "none":
        args += ["--bug", cfg.bug]
    args += ["--layers", str(cfg.layers), "--steps", str(cfg.steps), "--seed", str(cfg.seed)]
    if not cfg.cpu_groups:
        args.append("--no-cpu-groups")
    if cfg.timeout_s is not None:
        args += ["--timeout", f"{cfg.timeout_s:g}"]
    return shlex.join(args + (extra or []))


def main(argv: list[str] | None = None) -> int:
    ns = parser().parse_args(argv)
    try:
        cfg = config_from_args(ns)
    except ConfigError as exc:
        print(f"tracekit.workloads: error: {exc.one_line()}", file=sys.stderr)
        return 2
    from tracekit.workloads.runner import Outputs, launch

    outputs = Outputs(ns.trace_dir, ns.sidecar_dir or ns.trace_dir, ns.scenario)
    results = launch(cfg, outputs)
    mismatched = [r.rank for r in results if not r.matches]
    worst = max(r.max_abs_diff for r in results)
    print(f"tracekit.workloads: {cfg.world_size} ranks tp={cfg.tp_size} "
          f"attn_tp={cfg.attn_tp_size} attn_dp={cfg.attn_dp_size} ep={cfg.ep_size} "
          f"attn_reduce={cfg.attn_reduce} dp_gather={cfg.dp_gather} combine={cfg.combine} "
          f"a2a={cfg.a2a}{'/' + cfg.deepep_mode if cfg.a2a == 'deepep' else ''} bug={cfg.bug}; "
          f"collectives per rank "
          f"{[r.collectives for r in results]}")
    if mismatched:
        print(f"tracekit.workloads: output MISMATCH vs reference on ranks {mismatched} "
              f"(max |diff| {worst:.3g} > atol/rtol 1e-4)"
              + (f" - expected: planted bug {cfg.bug}" if cfg.bug != "none" else ""))
        return 0 if cfg.bug in NUMERIC_BUGS else EXIT_MISMATCH
    where = "every rank" if len(results) == cfg.world_size else f"rank {results[0].rank}"
    print(f"tracekit.workloads: output matches the reference on {where} "
          f"(max |diff| {worst:.3g}, rtol=atol=1e-4)")
    return EXIT_MISMATCH if cfg.bug in NUMERIC_BUGS else 0
