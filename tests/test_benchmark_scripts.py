"""The benchmarks' in-process scripts still run against the current pipeline.

Nothing else in the suite runs ``benchmarks/``: e2e's per-stage script broke twice when the
pipeline's stages changed. This runs it on a bundled 4-rank sample (seconds, no HTA).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_traces" / "tp4_full_tp"


def _e2e():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("bench_e2e", ROOT / "benchmarks" / "e2e.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_e2e_stage_script_times_every_stage(tmp_path: Path) -> None:
    e2e = _e2e()
    proc = subprocess.run([sys.executable, "-c", e2e.STAGES_SCRIPT, str(SAMPLE), str(tmp_path),
                           "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    stages = ("parse", "summary", "attribute", "measure", "crossrank", "findings", "reports")
    assert set(result["times"]) == set(stages), result["times"]
    assert all(result["times"][s] >= 0 for s in stages)
    assert result["events"] > 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report, "the stage script wrote an empty JSON report"
    assert (tmp_path / "report.html").stat().st_size > 0
