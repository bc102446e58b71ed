"""Flight Recorder sample scenarios: the reference layer under ``tracekit capture
--flight-recorder``, with a planted hang or a planted shape mismatch, and the ground truth.

    python -m tracekit.workloads.samples --out sample_traces --only fr_hang_skip_all_reduce

into ``sample_traces/flight_recorder/<name>/`` (apart from the trace scenarios, whose
``*/manifest.json`` other tests walk).

Each folder keeps ``rank{r}.fr_trace.pkl`` (torch's own dump), ``rank{r}.fr_groups.json``,
``rank{r}.sidecar.json`` (what the rank issued; a hung rank's last entry is the collective it
was blocked in), ``manifest.json`` (config, command, and the expected answer under
``flight_recorder``) and a README. The capture's traces are left out to keep the sample small.

The expected answer comes from the workload's own log (sidecars), never from a Flight
Recorder reader: the sequence id of an entry is its position among the rank's entries on the
same process group (``group_desc``), counted from 1, as c10d counts a group's collectives.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracekit.workloads.sidecar import write_json


@dataclass(frozen=True)
class FRScenario:
    name: str
    args: tuple[str, ...]
    about: str


FR_SCENARIOS = (
    FRScenario("fr_hang_skip_all_reduce",
               ("--tp", "4", "--steps", "2", "--bug", "skip-all-reduce"),
               "PLANTED HANG: tp=4 (no DP attention); rank 3 skips its post-experts AllReduce "
               "(tensor_model_parallel_all_reduce on tp:device) in the last layer and goes on "
               "to the next step's barrier on world:cpu; ranks 0-2 wait in the AllReduce "
               "until the 5 s gloo timeout. Flight Recorder dumps of all four ranks."),
    FRScenario("fr_shape_mismatch",
               ("--tp", "4", "--bug", "shape-mismatch"),
               "PLANTED MISMATCH: tp=4; rank 3 passes its post-experts AllReduce of the last "
               "layer as a flat 1-D view (same bytes, so gloo completes and the output still "
               "matches): the same sequence id has different input shapes across members."),
)
LAST_RANK = 3


def _seqs(entries: list[dict[str, Any]]) -> list[int]:
    seen: dict[str, int] = {}
    out = []
    for e in entries:
        seen[e["group_desc"]] = seen.get(e["group_desc"], 0) + 1
        out.append(seen[e["group_desc"]])
    return out


def _last(entries: list[dict[str, Any]]) -> dict[str, Any]:
    e = entries[-1]
    return {"pg_desc": e["group_desc"], "op": e["op"], "seq": _seqs(entries)[-1],
            "group": e["group"], "path": e["path"]}


def expected(name: str, by_rank: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """The answer `tracekit hang` must give, from the sidecars of the run."""
    ranks = sorted(by_rank)
    if name == "fr_hang_skip_all_reduce":
        blocked = {r: _last(by_rank[r]) for r in ranks}
        skipped = blocked[ranks[0]]  # the others are blocked in what the last rank skipped
        waiting = [r for r in ranks if blocked[r] == skipped]
        return {"desync": skipped | {"entered_ranks": waiting,
                                     "missing_ranks": [r for r in ranks if r not in waiting]},
                "blocked": {str(r): blocked[r] for r in ranks}}
    mine = by_rank[LAST_RANK]
    seqs = _seqs(mine)
    at = max(i for i, e in enumerate(mine) if e["path"] != "other" and e["op"] == "all_reduce"
             and e["group_desc"] == "tp:device")
    return {"mismatch": {"pg_desc": "tp:device", "op": "all_reduce", "seq": seqs[at],
                         "field": "in_sizes", "flattened_ranks": [LAST_RANK],
                         "ranks": ranks}}


FOLDER = "flight_recorder"  # under sample_traces/: kept apart from the trace scenarios


def generate_fr(s: FRScenario, out: Path) -> Path:
    """Capture ``s`` into a temporary folder beside ``out/flight_recorder/<name>`` and swap
    it in."""
    import json

    from tracekit.capture.torch import CaptureOptions, run_command
    from tracekit.errors import CaptureError
    from tracekit.workloads.cli import command_line, config_from_args, parser

    cfg = config_from_args(parser().parse_args([*s.args, "--scenario", s.name]))
    out = out / FOLDER
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{s.name}.", dir=out))
    run = tmp / "run"
    try:
        cmd = [sys.executable, "-m", "tracekit.workloads", *s.args, "--scenario", s.name,
               "--sidecar-dir", str(run)]
        try:
            run_command(cmd, run, CaptureOptions(activities=("CPU",), flight_recorder=True,
                                                 failed_grace=30.0, timeout=120.0))
            hung = False
        except CaptureError:
            hung = True
        if hung != (cfg.bug == "skip-all-reduce"):
            raise RuntimeError(f"{s.name}: the run {'failed' if hung else 'finished'}, "
                               "which it should not")
        final_tmp = tmp / "final"
        final_tmp.mkdir()
        keep = sorted(p for p in run.iterdir() if p.name.endswith(
            (".fr_trace.pkl", ".fr_groups.json", ".sidecar.json")))
        for p in keep:
            shutil.copy2(p, final_tmp / p.name)
        by_rank = {int(json.loads(p.read_text())["rank"]): json.loads(p.read_text())[
            "collectives"] for p in keep if p.name.endswith(".sidecar.json")}
        command = command_line(cfg, ["--scenario", s.name])
        capture = f"tracekit capture --flight-recorder --out DIR -- {command}"
        write_json(final_tmp / "manifest.json", {
            "scenario": s.name, "world_size": cfg.world_size,
            "config": {k: v for k, v in cfg.to_dict().items()
                       if k in ("tp_size", "bug", "layers", "steps", "timeout_s", "seed")},
            "command": capture,
            "ranks": {str(r): {"flight_recorder": f"rank{r}.fr_trace.pkl",
                               "groups": f"rank{r}.fr_groups.json",
                               "sidecar": f"rank{r}.sidecar.json"} for r in sorted(by_rank)},
            "flight_recorder": expected(s.name, by_rank),
            "regenerate": f"python -m tracekit.workloads.samples --out sample_traces --only "
                          f"{s.name}",
            "about": s.about})
        (final_tmp / "README.md").write_text(
            f"# {s.name}\n\n{s.about}\n\nRead it:\n\n    tracekit hang sample_traces/{FOLDER}/"
            f"{s.name}\n\n"
            f"Regenerate:\n\n    python -m tracekit.workloads.samples --out sample_traces "
            f"--only {s.name}\n\nwhich captures\n\n    {capture}\n\nFiles: `rank{{r}}.fr_trace."
            "pkl` (torch's Flight Recorder dump of rank r, unchanged), `rank{r}.fr_groups.json` "
            "(name, description and global ranks of every process group: gloo's dump leaves "
            "pg_config empty), `rank{r}.sidecar.json` (the collectives rank r issued), "
            "`manifest.json` (the expected answer under `flight_recorder`).\n")
        final = out / s.name
        old = out / f".{s.name}.old"
        if final.exists():
            final.rename(old)
        final_tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
        return final
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
