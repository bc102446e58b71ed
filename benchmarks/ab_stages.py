"""Per-stage cost of two source trees on one run, alternated in fresh processes (A B A B ...).

    python benchmarks/ab_stages.py RUN --tree A_DIR [--tree B_DIR] [--repeat 3] [--html]
                                   [--profile DIR]

Each process imports tracekit from its tree and runs the CLI's in-memory pipeline over RUN
(parse, summary, attribute, measure, cross-rank, findings, then the JSON report, and the HTML
one with ``--html``), as ``tracekit analyze --hardware h200`` does, the reports under the
stages' allocation scope where the tree has one. Per stage it takes wall time, user and
system CPU (``getrusage``) and minor page faults; printed per tree: the median of each over
the repeats, and the process's peak RSS. On a shared, noisy host CPU time and faults compare
better than wall time, and runs alternated with the other tree compare better than runs
taken an hour apart. ``--profile DIR``: one more process per tree under cProfile, one
``TREE-STAGE.prof`` per stage.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

STAGE_SCRIPT = r"""
import contextlib, cProfile, inspect, json, resource, sys, time
from pathlib import Path
from tracekit.api import AnalyzeOptions, LoadOptions
from tracekit.cli import analyze as cli
from tracekit.pipeline.in_memory import InMemory
from tracekit.summary import summarize

src, out, html, prof = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
stack = contextlib.ExitStack()
kw = {"scope": stack} if "scope" in inspect.signature(InMemory).parameters else {}
ex = InMemory(AnalyzeOptions(hardware="h200"), source=src, load=LoadOptions(), **kw)

def summary():
    ex.summary = summarize(ex.run)

def reports():
    targets = {"json": out / "report.json"}
    if html:
        targets["html"] = out / "report.html"
    cli.write_reports(ex.result(), targets)
    stack.close()

rows = {}
for name, step in (("parse", ex.parse), ("summary", summary), ("attribute", ex.attribute),
                   ("measure", ex.measure), ("crossrank", ex.cross_rank),
                   ("findings", ex.findings), ("reports", reports)):
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    if prof:
        p = cProfile.Profile()
        p.runcall(step)
        p.dump_stats(f"{prof}-{name}.prof")
    else:
        step()
    t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    rows[name] = {"wall": t1 - t0, "user": r1.ru_utime - r0.ru_utime,
                  "sys": r1.ru_stime - r0.ru_stime, "minflt": r1.ru_minflt - r0.ru_minflt}
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"stages": rows, "rss": rss}))
"""

FIELDS = ("wall", "user", "sys", "minflt")


def one(tree: Path, run: Path, out: Path, html: bool, prof: str = "") -> dict:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-c", STAGE_SCRIPT, str(run), str(out),
                           "1" if html else "0", prof],
                          env=env, cwd=tree, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"{tree}: the stage run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(tree: Path, results: list[dict]) -> None:
    print(f"{tree} (median of {len(results)}; peak RSS "
          f"{statistics.median(r['rss'] for r in results) / 1e9:.2f} GB)")
    print(f"  {'stage':<10}" + "".join(f"{f:>10}" for f in FIELDS))
    names = list(results[0]["stages"])
    total = dict.fromkeys(FIELDS, 0.0)
    for name in names:
        cells = []
        for f in FIELDS:
            value = statistics.median(r["stages"][name][f] for r in results)
            cells.append(f"{value:>10.0f}" if f == "minflt" else f"{value:>10.3f}")
            if name != "parse":
                total[f] += value
        print(f"  {name:<10}" + "".join(cells))
    print(f"  {'after parse':<10}" + "".join(
        f"{total[f]:>10.0f}" if f == "minflt" else f"{total[f]:>10.3f}" for f in FIELDS))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--tree", type=Path, action="append", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--html", action="store_true")
    ap.add_argument("--profile", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=Path("/tmp/ab_stages"))
    args = ap.parse_args()
    args.run = args.run.resolve()
    trees = [t.resolve() for t in args.tree]
    results: dict[Path, list[dict]] = {t: [] for t in trees}
    for i in range(args.repeat):
        for k, tree in enumerate(trees):
            results[tree].append(one(tree, args.run, args.out / f"t{k}", args.html))
            after = sum(v["wall"] for s, v in results[tree][-1]["stages"].items()
                        if s != "parse")
            print(f"  run {i + 1} tree {k}: after parse {after:.2f} s", file=sys.stderr)
    for tree in trees:
        report(tree, results[tree])
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        for k, tree in enumerate(trees):
            one(tree, args.run, args.out / f"t{k}", args.html, str(args.profile / f"tree{k}"))
        print(f"profiles in {args.profile}")


if __name__ == "__main__":
    main()
