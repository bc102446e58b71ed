"""The JSON report of the smallest sample run is byte-identical to the one recorded before the
issue-17 speed work (attribution and measurement rewritten for speed must not change a result).

The golden file is `tracekit analyze sample_traces/tp4_full_tp --hardware h200 --json` from the
commit before that work, with the packaged hardware profile's path written as ``TRACEKIT/``.
A change that is meant to change the report regenerates it with `make golden`, which runs:

    python -m tracekit analyze sample_traces/tp4_full_tp --hardware h200 --json OUT.json
    sed "s#\"$PWD/tracekit/#\"TRACEKIT/#" OUT.json > tests/outputs/golden/tp4_full_tp.h200.json
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_traces" / "tp4_full_tp"
GOLDEN = Path(__file__).resolve().parent / "golden" / "tp4_full_tp.h200.json"


def test_json_report_matches_the_recorded_one(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "tracekit", "analyze", str(SAMPLE), "--hardware", "h200",
         "--json", str(out)], env=env, capture_output=True, text=True, timeout=300,
        check=False)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text().replace(f'"{REPO / "tracekit"}/', '"TRACEKIT/')
    assert text == GOLDEN.read_text()
