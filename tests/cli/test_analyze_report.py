"""`tracekit analyze` on a sample run: one report whose counts match the run's ground truth
(the sidecars the workload wrote), at 80 and 120 columns."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracekit.cli import cli

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "tp4_dp4_maxlen_rs"
PATHS_TITLE = "Collectives per path and group, slowest first"


def _truth() -> Counter[tuple[str, str, str]]:
    """(path, group, op) -> collectives over ranks, from the sidecars (never read by tracekit)."""
    out: Counter[tuple[str, str, str]] = Counter()
    for sidecar in sorted(SAMPLE.glob("rank*.sidecar.json")):
        for c in json.loads(sidecar.read_text())["collectives"]:
            group = "-" if c["path"] == "other" else c["group"]  # the barrier's group: unknown
            out[(c["path"], group, c["op"])] += 1
    return out


def _analyze(width: int) -> str:
    if not SAMPLE.is_dir():
        pytest.skip(f"{SAMPLE} is absent")
    result = CliRunner().invoke(cli, ["analyze", str(SAMPLE), "--hardware", "h200",
                                      "--jobs", "1"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    return result.output


def _path_rows(out: str) -> dict[tuple[str, str, str], int]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(PATHS_TITLE))
    rows = {}
    for line in lines[start + 3:]:
        if not line.strip() or line.startswith("eff ="):
            break
        path, group, op, n = line.split()[:4]
        rows[(path, group, op)] = int(n)
    return rows


@pytest.mark.parametrize("width", [80, 120])
def test_report_fits_the_width_and_keeps_eff(width: int) -> None:
    out = _analyze(width)
    assert max(len(line) for line in out.splitlines()) <= width
    lines = out.splitlines()
    header = lines[next(i for i, x in enumerate(lines) if x.startswith(PATHS_TITLE)) + 1]
    assert re.search(r" eff( |$)", header)
    assert "…" not in out


def test_one_count_per_collective_matching_the_ground_truth() -> None:
    # GIVEN the sample whose reduce_scatter gloo runs as an all_reduce kernel
    out = _analyze(120)
    truth = _truth()
    # THEN the report counts each (path, group, op) as the workload issued it
    assert _path_rows(out) == dict(truth)
    # AND no second table counts the same collectives by the kernel's op
    assert "communication kernels by op" not in out and "all_reduce" not in out
    assert out.count("tracekit report") == 1


def test_verbose_prints_the_full_tables_in_the_detail() -> None:
    # GIVEN the 4-phase sample: the first screen shows every phase, so the detail does not
    # repeat them; --verbose prints the full phase table (bytes, fused, compute) too
    quiet = _analyze(120)
    result = CliRunner().invoke(cli, ["analyze", str(SAMPLE), "--hardware", "h200", "--jobs",
                                      "1", "--verbose"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "Time per phase (sum over ranks)" not in quiet
    assert "Time per phase (sum over ranks)" in result.output
