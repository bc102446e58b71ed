"""`tracekit check` as a CI gate on a real sample: a clean run with a barrier passes, the same
run with a straggler planted before one phase's collectives fails on that phase only."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

from tracekit.cli import cli

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "tp4_dp4_maxlen_rs"
# combine C's reduce_scatter (sidecars: path combine.c_reduce_scatter, phase combine); gloo
# runs it as an all_reduce, the row that carries its time on a rank
INSTANCE = "gloo:all_reduce"
CALL = "c10d::_reduce_scatter_base_"
STRAGGLER = 2
DELAY_US = 20_000.0  # 20 ms late at each combine collective
GATES = ["--hardware", "cpu-gloo", "--min-efficiency", "0.01", "--max-wait", "50", "--jobs", "1"]


def _insert_delay(events: list[dict[str, Any]], at_us: float, delay_us: float) -> None:
    """Insert ``delay_us`` into a rank's timeline at ``at_us``: what starts later moves later,
    what spans the instant lasts longer (the clock and every other event stay consistent)."""
    timed = [e for e in events if "ts" in e]
    ts = np.array([float(e["ts"]) for e in timed])
    dur = np.array([float(e.get("dur", 0.0)) for e in timed])
    after = ts >= at_us
    spans = (ts < at_us) & (ts + dur > at_us)
    for i in np.flatnonzero(after):
        timed[i]["ts"] = ts[i] + delay_us
    for i in np.flatnonzero(spans):
        timed[i]["dur"] = dur[i] + delay_us


def _starts(events: list[dict[str, Any]], name: str) -> list[float]:
    return sorted(float(e["ts"]) for e in events if e.get("name") == name and e.get("ph") == "X")


def plant_straggler(src: Path, dst: Path) -> Path:
    """A copy of ``src`` where rank STRAGGLER reaches every combine collective DELAY_US late:
    it spends the delay before its call, its peers spend it waiting inside theirs."""
    shutil.copytree(src, dst)
    for trace in sorted(dst.glob("rank*.trace.json.gz")):
        doc = json.loads(gzip.decompress(trace.read_bytes()))
        events = doc["traceEvents"]
        rank = int(doc["distributedInfo"]["rank"])
        points = ([t - 1.0 for t in _starts(events, CALL)] if rank == STRAGGLER
                  else [t + 1.0 for t in _starts(events, INSTANCE)])
        assert len(points) == 2  # one combine per layer, 2 layers (the sample's README)
        for at in sorted(points, reverse=True):  # later first: earlier points stay valid
            _insert_delay(events, at, DELAY_US)
        trace.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return dst


def _check(run: Path, *extra: str) -> Result:
    if not SAMPLE.is_dir():
        pytest.skip(f"{SAMPLE} is absent")
    return CliRunner().invoke(cli, ["check", str(run), *GATES, *extra])


def _lines(result: Result, word: str) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith(word)]


def test_clean_sample_with_a_barrier_passes_and_lists_what_it_skipped() -> None:
    # GIVEN the clean sample (a barrier on world:cpu in phase "other": no bound, no wait)
    result = _check(SAMPLE)
    # THEN every gate passes; the barrier's phase is skipped and listed, never failed
    assert result.exit_code == 0, result.output
    assert _lines(result, "SKIP efficiency [other]") and _lines(result, "SKIP wait [other]")
    assert not _lines(result, "FAIL")


def test_planted_straggler_fails_on_its_phase_only(tmp_path: Path) -> None:
    # GIVEN the same run with rank 2 late at both combine collectives
    run = plant_straggler(SAMPLE, tmp_path / "straggled")
    report = tmp_path / "report.json"
    result = _check(run, "--json", str(report))
    # THEN check fails (exit 1) on the wait of phase combine, and not on dp_gather
    assert result.exit_code == 1, result.output
    failed = _lines(result, "FAIL")
    assert any(line.startswith("FAIL wait [combine]") for line in failed), failed
    assert not [line for line in failed if "[dp_gather]" in line], failed
    # AND the efficiency gate stays green: transfer is the time after the last arrival
    assert not [line for line in failed if line.startswith("FAIL efficiency")], failed
    # AND the straggler finding names the planted rank
    findings = json.loads(report.read_text())["findings"]
    named = [f["ranks"] for f in findings if f["rule_id"] == "measure.straggler"]
    assert named and named[0] == [STRAGGLER], findings
