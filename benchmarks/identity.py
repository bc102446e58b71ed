"""Are the JSON reports of a tree byte-identical to another tree's? (issue 17: "identical results")

Writes `tracekit analyze --json` of every bundled sample run, three synth runs and every
reference-trace run (../shared/reference_traces, skipped where absent) under ``--out``, one
``NAME.json`` and ``NAME.rc`` per run, with the tree given by ``--tree`` (default: this
checkout) on PYTHONPATH. With ``--against DIR`` (an earlier ``--out``) it compares the two
folders and exits 1 on any difference, naming the runs that differ.

    python benchmarks/identity.py --out /tmp/id-base --tree /path/to/base/worktree
    python benchmarks/identity.py --out /tmp/id-new --against /tmp/id-base

The synth runs are written once per ``--work`` folder (their bytes depend on the seed only).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "sample_traces"
REFERENCE = REPO.parent / "shared" / "reference_traces"

SYNTH: dict[str, list[str]] = {
    "synth_tp8": ["--tp", "8", "--steps", "3", "--layers", "2"],
    "synth_tp8_dp8_ep8_deepep": ["--tp", "8", "--dp", "8", "--enable-dp-attention", "--ep", "8",
                                 "--a2a", "deepep", "--steps", "3", "--layers", "2"],
    "synth_tp4_dp4_gatherv": ["--tp", "4", "--dp", "4", "--enable-dp-attention",
                              "--dp-gather", "gatherv", "--combine", "b_reduce_scatterv",
                              "--steps", "3", "--layers", "2", "--no-cuda-graph"],
}
HTA = REFERENCE / "kineto" / "hta"
ASCEND = REFERENCE / "ascend" / "msinsight"
REFERENCE_RUNS: dict[str, tuple[Path, str]] = {
    "ref_nccl_parser_config": (HTA / "nccl_parser_config" / "nccl_data.json.gz", "a100"),
    "ref_ns_resolution": (HTA / "ns_resolution_trace", "a100"),
    "ref_trace_filter": (HTA / "trace_filter", "a100"),
    "ref_negative_queue": (HTA / "negative_queue_length_values_check", "a100"),
    "ref_df_index_resolver": (HTA / "df_index_resolver", "a100"),
    "ref_ascend_text": (ASCEND / "text_level1", "ascend-910b"),
    "ref_ascend_db": (ASCEND / "db_level1", "ascend-910b"),
}


def _runs(work: Path, python: str) -> list[tuple[str, list[str]]]:
    runs: list[tuple[str, list[str]]] = []
    for folder in sorted(p for p in SAMPLES.iterdir() if (p / "manifest.json").is_file()):
        runs.append((f"sample_{folder.name}", [str(folder), "--config",
                                              str(folder / "manifest.json"), "--hardware", "h200"]))
    for name, args in SYNTH.items():
        out = work / name
        if not (out / "manifest.json").is_file():
            subprocess.run([python, "-m", "tracekit", "synth", "--out", str(out), "-j", "2", *args],
                           check=True, stdout=subprocess.DEVNULL, cwd=REPO)
        runs.append((name, [str(out), "--hardware", "h200"]))
    for name, (path, hardware) in REFERENCE_RUNS.items():
        if path.exists():
            runs.append((name, [str(path), "--hardware", hardware]))
    return runs


def write(out: Path, work: Path, tree: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(tree))
    for name, args in _runs(work, sys.executable):
        report = out / f"{name}.json"
        report.unlink(missing_ok=True)
        done = subprocess.run([sys.executable, "-m", "tracekit", "analyze", *args, "--json",
                               str(report)], env=env, cwd=work, capture_output=True, text=True)
        (out / f"{name}.rc").write_text(f"{done.returncode}\n{done.stderr[-2000:]}")
        if report.exists():  # the hardware profile's path names the tree: make it the same
            report.write_bytes(report.read_bytes().replace(str(tree).encode(), b"<tree>"))
        digest = hashlib.sha256(report.read_bytes()).hexdigest()[:16] if report.exists() else "-"
        print(f"{name:34s} rc={done.returncode} {digest}", flush=True)


def compare(new: Path, base: Path) -> int:
    names = sorted({p.stem for p in base.glob("*.rc")} | {p.stem for p in new.glob("*.rc")})
    differ = []
    for name in names:
        pair = [(d / f"{name}.json", d / f"{name}.rc") for d in (base, new)]
        same = all(rc.exists() for _, rc in pair) and (
            pair[0][1].read_text().split("\n", 1)[0] == pair[1][1].read_text().split("\n", 1)[0])
        reports = [j.read_bytes() if j.exists() else None for j, _ in pair]
        same = same and reports[0] == reports[1]
        if not same:
            differ.append(name)
    written = sum(1 for name in names if (new / f"{name}.json").exists())
    if differ:
        print(f"DIFFER ({len(differ)} of {len(names)} runs): {', '.join(differ)}")
        return 1
    print(f"ALL JSON REPORTS BYTE-IDENTICAL ({written} reports, {len(names)} runs)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for NAME.json / NAME.rc")
    parser.add_argument("--tree", type=Path, default=REPO, help="tracekit tree on PYTHONPATH")
    parser.add_argument("--work", type=Path, default=REPO / "benchmarks" / "_work" / "identity",
                        help="where the synth runs are written (once)")
    parser.add_argument("--against", type=Path, help="an earlier --out to compare with")
    args = parser.parse_args()
    write(args.out.resolve(), args.work.resolve(), args.tree.resolve())
    return compare(args.out.resolve(), args.against.resolve()) if args.against else 0


if __name__ == "__main__":
    sys.exit(main())
