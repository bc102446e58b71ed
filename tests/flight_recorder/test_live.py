"""`tracekit capture --flight-recorder` on real gloo ranks of the reference workload (2 ranks,
1 layer), then `tracekit hang` on what it wrote: a clean run and a planted hang."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tracekit.workloads.fr_samples import expected

pytestmark = pytest.mark.slow


def tracekit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracekit", *args], capture_output=True,
                          text=True, timeout=240)


def capture(out: Path, *workload: str) -> subprocess.CompletedProcess[str]:
    return tracekit("capture", "--flight-recorder", "--no-analyze", "--activities", "CPU",
                    "--out", str(out), "--", sys.executable, "-m", "tracekit.workloads",
                    "--tp", "2", "--layers", "1", "--sidecar-dir", str(out), *workload)


def test_clean_run_has_dumps_beside_traces_and_no_desync(tmp_path: Path) -> None:
    out = tmp_path / "clean"
    res = capture(out)
    assert res.returncode == 0, res.stderr[-2000:]
    for r in (0, 1):  # every rank's dump next to its trace, with its groups
        assert (out / f"rank{r}.trace.json.gz").is_file()
        assert (out / f"rank{r}.fr_trace.pkl").stat().st_size > 0
        groups = json.loads((out / f"rank{r}.fr_groups.json").read_text())["groups"]
        assert {"pg_desc": "tp:device", "ranks": [0, 1]}.items() <= next(
            g for g in groups if g["pg_desc"] == "tp:device").items()
    res = tracekit("hang", str(out), "--json", str(tmp_path / "h.json"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads((tmp_path / "h.json").read_text())["desyncs"] == []


def test_planted_hang_dumps_on_timeout_and_is_diagnosed(tmp_path: Path) -> None:
    out = tmp_path / "hang"
    res = capture(out, "--steps", "2", "--bug", "skip-all-reduce", "--timeout", "2")
    # the run fails (gloo timeout) and the error points at the dumps
    assert res.returncode != 0 and "tracekit hang" in res.stderr
    by_rank = {r: json.loads((out / f"rank{r}.sidecar.json").read_text())["collectives"]
               for r in (0, 1)}
    truth = expected("fr_hang_skip_all_reduce", by_rank)
    assert truth["desync"]["missing_ranks"] == [1]  # the workload's log says rank 1 skipped
    res = tracekit("hang", str(out), "--json", str(tmp_path / "h.json"))
    assert res.returncode == 1, res.stdout + res.stderr
    report = json.loads((tmp_path / "h.json").read_text())
    # with two ranks, which desync caused the other cannot be told (1 of 2 missed each)
    first = next(d for d in report["desyncs"] if d["pg_desc"] == truth["desync"]["pg_desc"])
    assert "likely cause" not in res.stdout
    for key in ("pg_desc", "op", "seq", "entered_ranks", "missing_ranks"):
        assert first[key] == truth["desync"][key], key
    blocked = {b["rank"]: b for b in report["blocked"]}
    assert (blocked[1]["pg_desc"], blocked[1]["op"], blocked[1]["seq"]) == (
        truth["blocked"]["1"]["pg_desc"], truth["blocked"]["1"]["op"],
        truth["blocked"]["1"]["seq"])
