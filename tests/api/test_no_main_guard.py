"""A plain script without an ``if __name__ == "__main__":`` guard must run the analysis once.

multiprocessing's forkserver/spawn children re-run the parent's main script; with worker
processes forced (jobs=2) an unguarded script used to start the analysis again in each worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_traces" / "tp4_full_tp"

SCRIPT = f"""
from tracekit import api
a = api.analyze({str(SAMPLE)!r}, api.LoadOptions(jobs=2), api.AnalyzeOptions(hardware="h200"))
print("MEASURED_ROWS", a.measured.num_rows)
"""


def test_unguarded_script_with_worker_processes(tmp_path: Path) -> None:
    # GIVEN a script file (not -c: only a file's __main__ is re-run by children)
    script = tmp_path / "plain.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # WHEN run as a real process THEN it finishes once, with rows, and no spawn errors
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("MEASURED_ROWS")]
    assert len(lines) == 1
    assert int(lines[0].split()[1]) > 0
    assert "bootstrapping phase" not in proc.stderr


def test_top_level_analyze_in_a_plain_script(tmp_path: Path) -> None:
    # GIVEN the script: tracekit.analyze at the package top, no main guard
    script = tmp_path / "top.py"
    script.write_text(
        "import tracekit\n"
        f"a = tracekit.analyze({str(SAMPLE)!r}, hardware='h200')\n"
        "print('ROWS', a.measured.num_rows)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=240, cwd=tmp_path)
    # THEN it finishes and the sample's collectives are there (sidecars: 5 per rank, 4 ranks)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ROWS 20" in proc.stdout
