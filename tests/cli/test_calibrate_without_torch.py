"""`tracekit calibrate` without torch: one line naming the missing extra, at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# torch hidden in the child: find_spec says it is not installed and `import torch` fails
HIDE_TORCH = """
import importlib.util, sys
_find = importlib.util.find_spec
def find_spec(name, package=None):
    if name == "torch" or name.startswith("torch."):
        return None
    return _find(name, package)
importlib.util.find_spec = find_spec
sys.modules["torch"] = None
from tracekit.cli import main
main(["calibrate", "--out", sys.argv[1]])
"""


def test_calibrate_without_torch_names_the_extra(tmp_path: Path) -> None:
    # GIVEN a Python where torch cannot be imported
    out = tmp_path / "gloo.yaml"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # WHEN calibrate runs (the sweep's own timeout is 120 s; 60 s here is a ceiling, not a
    # benchmark) THEN exit 2 with exactly one line that names the 'capture' extra
    proc = subprocess.run([sys.executable, "-c", HIDE_TORCH, str(out)], capture_output=True,
                          text=True, env=env, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr == ("tracekit: error: calibrate needs the 'capture' extra (torch not "
                           "installed): pip install 'tracekit[capture]'\n")
    assert not out.exists()
