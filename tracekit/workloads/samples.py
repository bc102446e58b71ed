"""Regenerate ``sample_traces/``: one small scenario per communication path.

    python -m tracekit.workloads.samples --out sample_traces [--only NAME ...] [--list]

Each scenario folder holds ``rank{r}.trace.json.gz`` (torch.profiler, CPU, record_shapes,
with_stack), ``rank{r}.sidecar.json`` (ground truth), ``manifest.json`` and a README. A
scenario is built in a temporary folder and swapped in whole, so a failed run loses nothing.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from tracekit.rules.labels import PathLabel
from tracekit.workloads.cli import command_line, config_from_args, parser
from tracekit.workloads.runner import Outputs, launch
from tracekit.workloads.sidecar import manifest, write_json


@dataclass(frozen=True)
class Scenario:
    name: str
    args: tuple[str, ...]
    about: str


SCENARIOS = (
    Scenario("tp4_full_tp", ("--tp", "4"),
             "tp=4, no DP attention: the attention output AllReduce runs inside "
             "RowParallelLinear on TP (attn_tp == tp) and the post-experts AllReduce on TP."),
    Scenario("tp4_dp2_attn_tp", ("--tp", "4", "--dp", "2", "--dp-attention"),
             "tp=4 dp=2 DP attention (attn_tp=2): attn_tp_all_reduce on ATTN_TP "
             "(attention_tp:device), SUM_LEN zero-fill AllReduce gather on TP, combine A "
             "(post-experts AllReduce + dp_scatter)."),
    Scenario("tp4_dp4_gatherv_rsv",
             ("--tp", "4", "--dp", "4", "--dp-attention", "--combine", "b"),
             "tp=4 dp=4 DP attention (attn_tp=1): all_gatherv (one broadcast per root, as "
             "pynccl) and combine B reduce_scatterv (one reduce per root) with each DP rank's "
             "real token count; no post-experts AllReduce."),
    Scenario("tp4_dp4_maxlen_rs",
             ("--tp", "4", "--dp", "4", "--dp-attention", "--dp-gather", "max_len",
              "--combine", "c"),
             "tp=4 dp=4 DP attention, MAX_LEN: AllGather over TP, then combine C "
             "dp_reduce_scatter_tensor (equal-length ReduceScatter on TP)."),
    Scenario("ep4_deepep",
             ("--tp", "4", "--dp", "4", "--dp-attention", "--ep", "4", "--a2a", "deepep"),
             "ep=4 DeepEP-like: forward_deepep -> dispatch (count exchange, then uneven "
             "all_to_all_single of token rows) -> local experts -> combine (uneven "
             "all_to_all_single back). On GPU the buffer uses the TP device group."),
    Scenario("ep4_deepep_ll",
             ("--tp", "4", "--dp", "4", "--dp-attention", "--ep", "4", "--a2a", "deepep",
              "--deepep-mode", "low_latency"),
             "ep=4 DeepEP-like low-latency mode (decode): low_latency_dispatch and "
             "low_latency_combine are equal-split all-to-alls of fixed per-rank slots "
             "(num_max_dispatch_tokens_per_rank x top-k), with no count exchange."),
    Scenario("ep4_fuseep_npu",
             ("--tp", "4", "--dp", "4", "--dp-attention", "--ep", "4", "--a2a", "fuseep",
              "--npu"),
             "FuseEP-like: forward_fuseep -> one fused_deep_moe call that exchanges (a "
             "low-latency-mode buffer: equal all-to-alls) and computes the experts in between; "
             "it runs on the standalone MOE_EP group (npu mode)."),
    Scenario("npu_tp4_ep4_same_members",
             ("--tp", "4", "--ep", "4", "--a2a", "deepep", "--npu"),
             "npu mode, tp=4 ep=4: TP (tp:device) and MOE_EP (moe_ep:device) have the same "
             "members [0,1,2,3] but are different communicators; attention AllReduce on TP, "
             "dispatch/combine on MOE_EP."),
    Scenario("bug_double_reduce",
             ("--tp", "4", "--dp", "4", "--dp-attention", "--dp-gather", "max_len",
              "--combine", "c", "--bug", "double-reduce"),
             "PLANTED BUG: combine C's ReduceScatter runs AND the post-experts AllReduce "
             "still runs in the same layer, so the expert sum is counted tp times. The output "
             "mismatches the reference on purpose."),
    Scenario("bug_global_tp_reduce",
             ("--tp", "4", "--dp", "2", "--dp-attention", "--dp-gather", "max_len",
              "--bug", "global-tp-reduce"),
             "PLANTED BUG: with attn_tp=2 < tp=4 the attention output is AllReduced over the "
             "global TP group (wo_b reduce_results=True) instead of ATTN_TP, adding different "
             "requests' rows. MAX_LEN gather (ReduceScatter in ATTN_TP, AllGather on TP). The "
             "output mismatches on purpose."),
    Scenario("tp8_dp4_ep2_maxlen_rs",
             ("--tp", "8", "--dp", "4", "--dp-attention", "--ep", "2", "--dp-gather",
              "max_len", "--combine", "c"),
             "8 ranks: tp=8 dp=4 (attn_tp=2), ep=2 moe_tp=4 (moe_ep and moe_tp groups exist, "
             "strided and contiguous). MAX_LEN gather = ReduceScatter in ATTN_TP + AllGather on "
             "TP; combine C with attn_tp > 1 = ReduceScatter on TP + AllGather in ATTN_TP."),
)

REGENERATE = "python -m tracekit.workloads.samples --out sample_traces"


def _scenario_readme(s: Scenario, command: str) -> str:
    return (f"# {s.name}\n\n{s.about}\n\nRegenerate this scenario:\n\n"
            f"    python -m tracekit.workloads.samples --out sample_traces --only {s.name}\n\n"
            f"which runs\n\n    {command}\n\n"
            "Files: `rank{r}.trace.json.gz` (torch.profiler chrome trace of rank r), "
            "`rank{r}.sidecar.json` (every c10d collective rank r issued, in order, with its "
            "group, path, phase, layer, bytes and SGLang function), `manifest.json`.\n")


def generate(s: Scenario, out: Path) -> Path:
    """Run one scenario into a temporary folder beside ``out/<name>`` and swap it in."""
    ns = parser().parse_args([*s.args, "--scenario", s.name])
    cfg = config_from_args(ns)
    from tracekit.io import make_folder, temp_folder

    make_folder(out)
    tmp = temp_folder(out / s.name)  # 0777 less the umask, like the folder it replaces
    try:
        results = launch(cfg, Outputs(tmp, tmp, s.name))
        matched = all(r.matches for r in results)
        if matched == (cfg.bug != "none"):
            raise RuntimeError(f"{s.name}: output {'matches' if matched else 'mismatches'} "
                               "the reference, which it should not")
        command = command_line(cfg, ["--trace-dir", f"sample_traces/{s.name}",
                                     "--scenario", s.name])
        write_json(tmp / "manifest.json", {**manifest(cfg, s.name, command),
                                           "regenerate": f"{REGENERATE} --only {s.name}",
                                           "about": s.about})
        (tmp / "README.md").write_text(_scenario_readme(s, command))
        final = out / s.name
        old = out / f".{s.name}.old"
        if final.exists():
            final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        return final
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


INDEX_HEAD = """# Sample traces with known answers

Each folder is one small run of tracekit's reference MoE layer (`tracekit.workloads`): a
DeepSeek-style decoder layer (attention output projection `wo_b` as a row-parallel linear,
router top-2 of 8 experts, combine) on gloo CPU ranks, with SGLang's process groups
(`group_desc` = `tp:device`, `attention_tp:device`, `moe_ep:device`, ... plus the gloo `:cpu`
twins) and SGLang's function names on the Python stacks. 2 decoder layers, 1 profiled step
(after one unprofiled warm-up step), torch 2.13 CPU profiler with record_shapes and with_stack.
Each step starts with a barrier on `world:cpu` (path `other`, layer null), which lines the
ranks up after the profiler started; everything else belongs to a layer.

Per folder: `rank{r}.trace.json.gz`, `rank{r}.sidecar.json`, `manifest.json`, `README.md`.

Ground truth (`rank{r}.sidecar.json`): every c10d collective the rank issued inside the
profiled step, in issue order: `op` (schema.Op of the c10d call: a V-collective done the
pynccl way shows as one `broadcast` / `reduce` per root), `group` (schema.Group of the
communicator actually used: an alias such as MOE_EP = TP on GPU is reported as TP),
`group_desc`, `members` (global ranks), `path` (PathLabel), `phase`, `layer`, `bytes`
(nccl-tests size S: the tensor for all_reduce / broadcast / reduce, the gathered output for
all_gather, the input for reduce_scatter, this rank's send buffer for all_to_all) and `call`
(the SGLang-named function that issued it). The analyser never reads sidecars; tests and
`benchmarks/accuracy.py` do. Planted-bug scenarios label what really ran (for example the
global-TP attention AllReduce is `@FULL_TP@` on TP while attn_tp < tp); finding
the bug is the lints' job.

Regenerate everything (about 3-4 minutes on 2 cores): `make sample-traces`, i.e.

    python -m tracekit.workloads.samples --out sample_traces

The ground truth is identical on every regeneration; only the trace timings differ.

| scenario | ranks | what it shows |
|---|---|---|
"""


def write_index(out: Path) -> Path:
    rows = []
    for s in SCENARIOS:
        ranks = s.args[s.args.index("--tp") + 1]
        rows.append(f"| [{s.name}]({s.name}/) | {ranks} | {s.about} |")
    from tracekit.io import write_file

    head = INDEX_HEAD.replace("@FULL_TP@", PathLabel.ATTN_FULL_TP)
    return write_file(out / "README.md", head + "\n".join(rows) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tracekit.workloads.samples",
                                description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("sample_traces"))
    p.add_argument("--only", nargs="+", metavar="NAME", help="regenerate these scenarios only")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ns = p.parse_args(argv)
    from tracekit.workloads.fr_samples import FR_SCENARIOS, generate_fr

    if ns.list:
        for s in (*SCENARIOS, *FR_SCENARIOS):
            print(f"{s.name:28} {' '.join(s.args)}")
        return 0
    known = {s.name for s in (*SCENARIOS, *FR_SCENARIOS)}
    unknown = sorted(set(ns.only or ()) - set(known))
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    for s in SCENARIOS:
        if ns.only and s.name not in ns.only:
            continue
        path = generate(s, ns.out)
        print(f"wrote {path}")
    for f in FR_SCENARIOS:
        if not ns.only or f.name in ns.only:
            print(f"wrote {generate_fr(f, ns.out)}")
    print(f"wrote {write_index(ns.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
