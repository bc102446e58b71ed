"""`tracekit synth`: write a deterministic synthetic multi-rank GPU run with ground truth."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tracekit.synth.config import A2A_BACKENDS, COMBINES, DP_GATHERS


@click.command("synth")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder to write the rank traces, sidecars and manifest.json into.")
@click.option("--tp", type=int, default=8, show_default=True, help="tp_size (= world size).")
@click.option("--dp", type=int, default=1, show_default=True, help="dp_size.")
@click.option("--enable-dp-attention", is_flag=True, help="DP attention (attn_dp = dp).")
@click.option("--ep", type=int, default=1, show_default=True, help="ep_size (moe_ep).")
@click.option("--moe-dp", type=int, default=1, show_default=True, help="moe_dp_size.")
@click.option("--a2a", type=click.Choice(A2A_BACKENDS), default="none", show_default=True,
              help="MoE all-to-all backend.")
@click.option("--dp-gather", type=click.Choice(DP_GATHERS), default="auto", show_default=True,
              help="DP-attention gather variant.")
@click.option("--combine", type=click.Choice(COMBINES), default="auto", show_default=True,
              help="Expert-output combine variant.")
@click.option("--era", "nccl", default="2.21", show_default=True,
              help="NCCL version: kernel names (2.8-2.18 ncclKernel_*, 2.19+ ncclDevKernel_*, "
                   "2.27+ also ncclSymkDevKernel_*).")
@click.option("--torch", "torch_v", default="2.13", show_default=True,
              help="torch version: record_param_comms args and distributedInfo of that era.")
@click.option("--hidden", type=int, default=7168, show_default=True)
@click.option("--experts", type=int, default=256, show_default=True)
@click.option("--topk", type=int, default=8, show_default=True)
@click.option("--tokens", type=int, default=64, show_default=True,
              help="Decode tokens per attention-DP rank and step.")
@click.option("--extend-tokens", type=int, default=2048, show_default=True,
              help="Prefill tokens per attention-DP rank in an extend step.")
@click.option("--layers", type=int, default=4, show_default=True)
@click.option("--steps", type=int, default=4, show_default=True, help="Forward steps.")
@click.option("--extend-steps", type=int, default=1, show_default=True,
              help="The first N steps are eager extend steps.")
@click.option("--cuda-graph/--no-cuda-graph", default=True, show_default=True,
              help="Decode steps replay CUDA graphs (no comm metadata, no CPU ops).")
@click.option("--custom-ar/--no-custom-ar", default=True, show_default=True,
              help="Small TP all-reduces use SGLang's custom all-reduce kernels.")
@click.option("--straggler", "stragglers", type=int, multiple=True,
              help="Plant a slow rank (repeatable).")
@click.option("--noise", type=float, default=0.04, show_default=True,
              help="Log-normal sigma of compute and transfer times.")
@click.option("--target-mb", type=float, default=None,
              help="Choose the step count so that each rank is about this many MB of JSON.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--naming", type=click.Choice(["sglang", "rank"]), default="sglang",
              show_default=True, help="File names: {id}-TP-r[-DP-d][-EP-e] or rank{r}.")
@click.option("--gzip/--no-gzip", "gz", default=True, show_default=True)
@click.option("--scenario", default="synth", show_default=True)
@click.option("-j", "--jobs", type=int, default=None, help="Processes (default: cores).")
def command(out_dir: Path, tp: int, dp: int, enable_dp_attention: bool, ep: int, moe_dp: int,
            a2a: str, dp_gather: str, combine: str, nccl: str, torch_v: str, hidden: int,
            experts: int, topk: int, tokens: int, extend_tokens: int, layers: int, steps: int,
            extend_steps: int, cuda_graph: bool, custom_ar: bool, stragglers: tuple[int, ...],
            noise: float, target_mb: float | None, seed: int, naming: str, gz: bool,
            scenario: str, jobs: int | None) -> None:
    """Write a synthetic SGLang-style multi-rank Kineto run with ground-truth sidecars."""
    from tracekit.io import check_output_folder
    from tracekit.synth import ModelShape, SynthConfig, synth_run

    check_output_folder(out_dir)  # before any work: an ancestor that is a file, no write access
    cfg = SynthConfig(
        tp=tp, dp=dp, enable_dp_attention=enable_dp_attention, ep=ep, moe_dp=moe_dp, a2a=a2a,
        dp_gather=dp_gather, combine=combine, nccl=nccl, torch=torch_v, steps=steps,
        extend_steps=extend_steps, cuda_graph=cuda_graph, custom_ar=custom_ar,
        stragglers=tuple(stragglers), noise=noise, seed=seed, naming=naming, gzip=gz,
        shape=ModelShape(hidden=hidden, experts=experts, topk=topk, tokens=tokens,
                         extend_tokens=extend_tokens, layers=layers),
    )
    manifest = synth_run(cfg, out_dir, scenario=scenario, target_mb=target_mb, jobs=jobs,
                         progress=sys.stderr.isatty())
    total = sum(manifest["synth"]["json_bytes"].values())
    click.echo(f"wrote {manifest['world_size']} ranks x {manifest['synth']['steps']} steps "
               f"({total / 1e6:.1f} MB of JSON) to {out_dir}")
