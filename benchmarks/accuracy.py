"""Attribution accuracy against ground truth: `python benchmarks/accuracy.py RUN_DIR...`.

A RUN_DIR may also be a folder of scenarios (``sample_traces``).

RUN_DIR holds per-rank traces and the workload's ground-truth sidecars
(``rank{r}.sidecar.json``: every c10d collective the rank issued, in issue order). The
analysis never sees the sidecars; this script pairs the k-th collective a rank issued with the
k-th collective unit the engine found on that rank (in time order) and counts:

* group: right (same communicator, aliases folded), ambiguous-with-truth-among-candidates,
  missing (unattributed / ambiguous without the truth) or WRONG;
* path: right, missing or WRONG; layer: right, missing or WRONG.

It prints the confusion tables and the planted-bug findings, and exits 1 when anything is
wrong (a wrong answer is worse than none). ``--config`` passes the run's manifest as the
parallel config (enables the path-mismatch lint); without it the topology is inferred from
the trace's process groups.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from tracekit import api
from tracekit import schema as S
from tracekit.parsers import load_run
from tracekit.rules.engine import attribute_run, resolve_topology
from tracekit.rules.loader import load_rules
from tracekit.tables import to_pandas
from tracekit.topology import Topology
from tracekit.topology.config import config_from_file

CANDIDATES = re.compile(r"candidates ([A-Z_, ]+) \(")
OPEN_CANDIDATES = "(or a subgroup"


@dataclass
class Score:
    scenario: str
    group: Counter[str] = field(default_factory=Counter)
    path: Counter[str] = field(default_factory=Counter)
    layer: Counter[str] = field(default_factory=Counter)
    group_table: Counter[tuple[str, str]] = field(default_factory=Counter)
    path_table: Counter[tuple[str, str]] = field(default_factory=Counter)
    count_mismatch: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    bug: str = "none"
    seconds: float = 0.0  # attribute_run wall time
    events: int = 0

    @property
    def wrong(self) -> int:
        return (self.group["wrong"] + self.path["wrong"] + self.layer["wrong"]
                + len(self.count_mismatch))


def units_of(attributed: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per rank, the collectives in issue order at two granularities: one row per call
    (each instance: a gloo annotation per c10d call, a kernel per launch) and one row per
    logical collective (pynccl's N grouped kernels count once). A call is ordered by the
    earliest event of its logical collective (the c10d op that caused a runloop annotation)."""
    comm = attributed[attributed[S.STATUS].notna()].copy()
    # issue order: a kernel counts from its launch (runtime call with its correlation)
    runtime = attributed[(attributed[S.KIND] == S.Kind.RUNTIME) & attributed[S.CORRELATION].notna()]
    launch = runtime.drop_duplicates([S.RANK, S.CORRELATION]).set_index(
        [S.RANK, S.CORRELATION])[S.TS_NS].rename("_launch")
    comm = comm.join(launch, on=[S.RANK, S.CORRELATION])
    comm[S.TS_NS] = comm["_launch"].fillna(comm[S.TS_NS]).astype("int64")
    first = comm.groupby([S.RANK, S.LOGICAL_ID])[S.TS_NS].min().rename("_first")
    calls = comm[comm[S.IS_INSTANCE].fillna(False).astype(bool)]
    calls = calls.join(first, on=[S.RANK, S.LOGICAL_ID])
    calls["_first"] = calls["_first"].fillna(calls[S.TS_NS])
    calls = calls.sort_values([S.RANK, "_first", S.TS_NS], kind="stable")
    logical = calls[calls[S.LOGICAL_ID].isna() | ~calls.duplicated([S.RANK, S.LOGICAL_ID])]
    return calls, logical


def _group_verdict(truth: str, row: Any, topo: Topology | None) -> str:
    def same(a: str | None, b: str | None) -> bool:
        if a is None or b is None:
            return False
        return topo.same_communicator(a, b) if topo is not None else a == b

    if row[S.STATUS] == S.Status.ATTRIBUTED:
        return "right" if same(truth, row[S.GROUP]) else "wrong"
    if row[S.STATUS] == S.Status.AMBIGUOUS:
        m = CANDIDATES.search(str(row[S.REASON]))
        cands = [c.strip() for c in m.group(1).split(",")] if m else []
        if any(same(truth, c) for c in cands):
            return "ambiguous_ok"
        # "candidates WORLD (or a subgroup ...)": the set is open, nothing was claimed
        return "missing" if OPEN_CANDIDATES in str(row[S.REASON]) else "wrong"
    return "missing"


def score_run(run_dir: Path, use_config: bool = False) -> Score:
    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    score = Score(manifest.get("scenario", run_dir.name),
                  bug=str(manifest.get("config", {}).get("bug", "none")))
    run = load_run(run_dir, api.LoadOptions(jobs=1))
    topo = Topology(config_from_file(manifest_path)) if use_config and manifest else None
    options = api.AnalyzeOptions(topology=topo)
    start = time.perf_counter()
    attributed, findings = attribute_run(run, options)
    score.seconds = time.perf_counter() - start
    score.events = run.events.num_rows
    topo = topo or resolve_topology(run, options, load_rules())
    calls, logical = units_of(to_pandas(attributed))
    for side in sorted(run_dir.glob("rank*.sidecar.json")):
        truth = json.loads(side.read_text())
        rank = int(truth["rank"])
        entries = truth["collectives"]
        mine = calls[calls[S.RANK] == rank]
        if len(mine) != len(entries):  # ground truth written per logical collective
            mine = logical[logical[S.RANK] == rank]
        if len(mine) != len(entries):
            score.count_mismatch.append(f"rank {rank}: {len(entries)} issued, {len(mine)} found")
        for entry, (_, row) in zip(entries, mine.iterrows(), strict=False):
            g = _group_verdict(entry["group"], row, topo)
            score.group[g] += 1
            score.group_table[(entry["group"], str(row[S.GROUP]) if g != "ambiguous_ok"
                               else "ambiguous")] += 1
            p = row[S.PATH] if isinstance(row[S.PATH], str) else None
            score.path["right" if p == entry["path"] else "missing" if p is None else "wrong"] += 1
            score.path_table[(entry["path"], str(p))] += 1
            want = entry.get("layer")
            got = None if pd.isna(row[S.LAYER]) else int(row[S.LAYER])
            score.layer["right" if want == got else "missing" if got is None else "wrong"] += 1
    fdf = to_pandas(findings)
    score.findings = [f"{r[S.RULE_ID]} layer={r[S.LAYER]} ranks={[int(x) for x in r[S.RANKS]]}"
                      for _, r in fdf.iterrows()]
    return score


def _table(counter: Counter[tuple[str, str]], title: str) -> str:
    if not counter:
        return f"{title}: (none)"
    df = pd.Series(counter).unstack(fill_value=0)
    return f"{title} (rows: truth, columns: tracekit)\n{df.to_string()}"


def report(score: Score) -> str:
    lines = [f"== {score.scenario} (bug: {score.bug}; {score.events} events attributed in "
             f"{score.seconds:.2f} s)",
             f"group: {dict(score.group)}  path: {dict(score.path)}  layer: {dict(score.layer)}"]
    lines += [f"COUNT MISMATCH {m}" for m in score.count_mismatch]
    lines.append(_table(score.group_table, "group"))
    lines.append(_table(score.path_table, "path"))
    lines.append("findings: " + ("; ".join(score.findings) if score.findings else "none"))
    return "\n".join(lines)


def _run_dirs(paths: list[Path]) -> list[Path]:
    """Run directories (with sidecars); a folder of scenarios expands to its scenarios."""
    out: list[Path] = []
    for path in paths:
        if any(path.glob("rank*.sidecar.json")):
            out.append(path)
        elif path.is_dir():
            out.extend(sorted(p.parent for p in path.glob("*/rank0.sidecar.json")
                              if not p.parent.name.startswith(".")))
    if not out:
        raise SystemExit(f"no run directory with rank*.sidecar.json under {paths}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dirs", nargs="+", type=Path)
    p.add_argument("--config", action="store_true", help="use the manifest as the config")
    ns = p.parse_args(argv)
    bad = 0
    for run_dir in _run_dirs(ns.run_dirs):
        score = score_run(run_dir, ns.config)
        print(report(score))
        bad += score.wrong
    print(f"total wrong: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
