"""`tracekit topo`: print rank coordinates and group members of a parallel config.

``topology_options`` and ``topology_from_kwargs`` are shared with `tracekit analyze`, `check`,
`diff` and `export` (one option group: the sizes, ``--config`` and ``--layout``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tracekit.errors import ConfigError

if TYPE_CHECKING:
    from tracekit.topology import Topology

FC = TypeVar("FC", bound=Callable[..., Any])

# option name -> keyword of topology_from_options
TOPOLOGY_KWARGS = ("config", "tp", "dp", "enable_dp_attention", "attn_cp", "ep", "moe_dp", "pp",
                   "nnodes", "devices_per_node", "npu", "layout", "etp",
                   "enable_expert_parallel")
LAYOUT_CHOICES = ("sglang", "vllm", "megatron")  # tracekit.topology.layouts.NAMES (lazy import)


def topology_options(func: FC) -> FC:
    """The parallel-config options, with SGLang's, vLLM's and Megatron's spellings as aliases."""
    opts = [
        click.option("--config", "config", type=click.Path(dir_okay=False, path_type=Path),
                     help="YAML/JSON parallel config (SGLang, vLLM or Megatron keys, and "
                          "'layout') or a sample_traces manifest"),
        click.option("--layout", "layout", type=click.Choice(LAYOUT_CHOICES), default=None,
                     help="how ranks are laid out: sglang (default), vllm (the MoE spans "
                          "DP x TP) or megatron (order tp-cp-ep-dp-pp, expert TP); without "
                          "it, sizes SGLang refuses may pick the one layout that allows them"),
        click.option("--tp", "--tp-size", "--tensor-parallel-size", "tp", type=int,
                     help="tensor-parallel size"),
        click.option("--dp", "--dp-size", "--data-parallel-size", "dp", type=int,
                     help="data-parallel size"),
        click.option("--enable-dp-attention/--no-dp-attention", "enable_dp_attention",
                     default=None, help="DP attention (dp re-reads the TP world)"),
        click.option("--attn-cp", "--attn-cp-size", "--cp", "--context-parallel-size",
                     "attn_cp", type=int,
                     help="context-parallel size (SGLang attention CP, vLLM prefill CP, "
                          "Megatron CP)"),
        click.option("--ep", "--ep-size", "--expert-parallel-size", "ep", type=int,
                     help="MoE expert-parallel size"),
        click.option("--moe-dp", "--moe-dp-size", "moe_dp", type=int, help="MoE DP size"),
        click.option("--etp", "--expert-tensor-parallel-size", "etp", type=int,
                     help="expert tensor-parallel size (Megatron; default tp there)"),
        click.option("--enable-expert-parallel/--no-expert-parallel", "enable_expert_parallel",
                     default=None, help="vLLM: experts split over DP x PCP x TP"),
        click.option("--pp", "--pp-size", "--pipeline-parallel-size", "pp", type=int,
                     help="pipeline-parallel size"),
        click.option("--nnodes", type=int, help="number of nodes"),
        click.option("--devices-per-node", type=int, help="devices per node"),
        click.option("--npu/--gpu", "npu", default=None,
                     help="Ascend: MOE_EP is always its own communicator"),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def topology_from_kwargs(kwargs: dict[str, Any]) -> Topology | None:
    """Pop the topology options from a click kwargs dict and build the Topology (or None).
    None when no size and no config file is given, without loading tracekit.topology (numpy,
    pyarrow): a command's start-up stays light."""
    picked = {k: kwargs.pop(k, None) for k in TOPOLOGY_KWARGS}
    if all(v is None for k, v in picked.items() if k != "layout"):
        return None  # as topology_from_options says: a layout alone is no topology
    from tracekit.topology.config import topology_from_options

    topo = topology_from_options(**picked)
    if topo is not None and topo.reason:
        note(topo.reason)
    return topo


_NOTED: set[str] = set()


def note(text: str) -> None:
    """One ``tracekit: note:`` line on stderr, once per process (diff builds two runs)."""
    if text not in _NOTED:
        _NOTED.add(text)
        click.echo(f"tracekit: note: {text}", err=True)


@click.command("topo")
@topology_options
@click.option("--trace", "trace", type=click.Path(exists=True, path_type=Path),
              help="infer the config from a trace's process groups (distributedInfo)")
@click.option("--rank", type=int, help="print one rank's coordinates and groups")
@click.option("--json", "as_json", is_flag=True, help="coordinates and groups as JSON")
def command(trace: Path | None, rank: int | None, as_json: bool, **kwargs: Any) -> None:
    """Rank coordinates (the layout's grids) and every group's members."""
    from tracekit.topology.render import rank_line, render

    layout = kwargs.get("layout")
    topo = topology_from_kwargs(kwargs)
    if topo is None and trace is not None:
        topo = _from_trace(trace, layout)
        if topo.reason:
            note(topo.reason)
    if topo is None:
        raise ConfigError("give a parallel config (--tp ..., --config FILE) or --trace PATH")
    if rank is not None and not 0 <= rank < topo.config.world_size:
        raise ConfigError(f"--rank {rank} is outside the world of {topo.config.world_size}")
    if as_json:
        out = {
            "layout": topo.config.layout,
            "reason": topo.reason or None,
            "config": {k: getattr(topo.config, k) for k in (
                "tp", "dp", "enable_dp_attention", "attn_cp", "ep", "moe_dp", "pp", "npu",
                "etp", "enable_expert_parallel")},
            "widths": {"attn_dp": topo.config.attn_dp, "attn_tp": topo.config.attn_tp,
                       "moe_tp": topo.config.moe_tp, "world_size": topo.config.world_size},
            "coords": topo.coords().to_pylist(),
            "groups": {g: [list(m) for m in topo.members_of(g)] for g in topo.members},
            "aliases": topo.alias,
        }
        click.echo(json.dumps(out, indent=1))
        return
    click.echo(rank_line(topo, rank) if rank is not None else render(topo), nl=rank is not None)


def _from_trace(path: Path, layout: str | None = None) -> Topology:
    from tracekit import api
    from tracekit.rules.engine import resolve_topology
    from tracekit.rules.loader import load_rules

    run = api.load(path, api.LoadOptions(jobs=1))
    topo = resolve_topology(run, api.AnalyzeOptions(layout=layout), load_rules())
    if topo is None:
        which = f"a {layout} layout" if layout else "a known layout"
        raise ConfigError(f"the trace's process groups do not name the groups of {which}; "
                          "give the config with --tp ... or --config", path)
    return topo
