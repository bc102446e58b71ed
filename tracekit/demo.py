"""`make demo`: capture a fresh small run (where torch is installed), then analyse the bundled
sample traces with the public API.

    python -m tracekit.demo [--samples sample_traces] [--no-capture] [--report SCENARIO ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.compute as pc

from tracekit import api, schema

FEATURED = ("tp4_dp2_attn_tp", "bug_double_reduce")
CAPTURE_ARGS = ("--tp", "4", "--dp", "2", "--dp-attention", "--layers", "2")
# the sample traces are gloo CPU runs: bound them with the measured gloo profile
HARDWARE = "cpu-gloo"


def capture_fresh_run(folder: Path) -> int:
    """``tracekit capture -- python -m tracekit.workloads ...`` into ``folder``."""
    command = [sys.executable, "-m", "tracekit", "capture", "--out", str(folder / "capture"),
               "--hardware", HARDWARE, "--", sys.executable, "-m", "tracekit.workloads",
               *CAPTURE_ARGS]
    print("$ tracekit capture --out", folder / "capture", "--hardware", HARDWARE,
          "-- python -m tracekit.workloads", " ".join(CAPTURE_ARGS), flush=True)
    return subprocess.run(command, check=False).returncode


def ground_truth_count(folder: Path) -> int:
    """Collectives the workload says it issued (sidecars), summed over ranks."""
    return sum(len(json.loads(p.read_text())["collectives"])
               for p in folder.glob("rank*.sidecar.json"))


def overview_row(folder: Path, analysis: api.Analysis) -> list[str]:
    att = analysis.attributed
    findings = analysis.findings_table
    if att is None:
        return [folder.name, "-", "-", "-", "-"]
    inst = att.filter(pc.equal(att.column(schema.IS_INSTANCE), True))
    paths = sorted({p for p in inst.column(schema.PATH).to_pylist() if p})
    rules = sorted(set(findings.column(schema.RULE_ID).to_pylist())) if findings else []
    ranks = str(len(analysis.run.ranks))
    found = f"{inst.num_rows}/{ground_truth_count(folder)}"
    return [folder.name, ranks, found, ", ".join(paths) or "-", ", ".join(rules) or "-"]


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def analyse_samples(root: Path, featured: tuple[str, ...]) -> None:
    from tracekit import reports

    folders = sorted(p.parent for p in root.glob("*/manifest.json"))
    if not folders:
        print(f"no scenarios under {root} (make sample-traces)")
        return
    rows = []
    for folder in folders:
        analysis = api.analyze(folder, options=api.AnalyzeOptions(hardware=HARDWARE))
        rows.append(overview_row(folder, analysis))
        if folder.name in featured:
            about = json.loads((folder / "manifest.json").read_text()).get("about", "")
            print(f"\n=== {folder.name}: {about}\n")
            print(reports.render("text", analysis))
    print(f"\n=== all sample scenarios in {root} (collectives found / ground truth)\n")
    print_table(["scenario", "ranks", "collectives", "paths", "findings"], rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tracekit.demo", description=__doc__)
    p.add_argument("--samples", type=Path, default=Path("sample_traces"))
    p.add_argument("--no-capture", action="store_true", help="skip the fresh capture")
    p.add_argument("--report", nargs="*", default=list(FEATURED), metavar="SCENARIO",
                   help="scenarios whose full text report is printed")
    ns = p.parse_args(argv)
    if not ns.no_capture and importlib.util.find_spec("torch") is not None:
        with tempfile.TemporaryDirectory(prefix="tracekit-demo-") as tmp:
            if capture_fresh_run(Path(tmp)) != 0:
                print("tracekit demo: the fresh capture failed (see above); going on with the "
                      "sample traces", file=sys.stderr)
    elif not ns.no_capture:
        print("torch is not installed: skipping the fresh capture (pip install tracekit[capture])")
    analyse_samples(ns.samples, tuple(ns.report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
