"""Ground-truth files: per-rank sidecars and the scenario manifest (helper brief's format)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracekit.workloads.config import WorkloadConfig

MANIFEST_CONFIG_KEYS = (
    "tp_size", "dp_size", "enable_dp_attention", "ep_size", "moe_dp_size", "attn_cp_size",
    "npu", "attn_reduce", "dp_gather", "combine", "a2a", "bug", "layers", "deepep_mode",
)


def write_json(path: Path, data: Any) -> None:
    """Write through a temporary name and rename, so a reader never sees half a file."""
    from tracekit.io import write_file

    write_file(path, json.dumps(data, indent=1) + "\n", make_parents=True)


def sidecar_name(rank: int) -> str:
    return f"rank{rank}.sidecar.json"


def trace_name(rank: int) -> str:
    return f"rank{rank}.trace.json.gz"


def write_sidecar(out_dir: Path, rank: int, scenario: str, collectives: list[dict[str, Any]]
                  ) -> Path:
    path = out_dir / sidecar_name(rank)
    write_json(path, {"rank": rank, "scenario": scenario, "collectives": collectives})
    return path


def manifest(cfg: WorkloadConfig, scenario: str, command: str) -> dict[str, Any]:
    full = cfg.to_dict()
    config = {k: full[k] for k in MANIFEST_CONFIG_KEYS}
    config.update({k: full[k] for k in ("steps", "hidden", "ffn", "experts", "topk", "seed")})
    config.update(attn_tp_size=cfg.attn_tp_size, attn_dp_size=cfg.attn_dp_size,
                  moe_tp_size=cfg.moe_tp_size)
    return {
        "scenario": scenario,
        "world_size": cfg.world_size,
        "config": config,
        "command": command,
        "ranks": {str(r): {"trace": trace_name(r), "sidecar": sidecar_name(r)}
                  for r in range(cfg.world_size)},
    }
