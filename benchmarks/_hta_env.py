"""Holistic Trace Analysis (HTA), the peer of the parse benchmark, in a venv of its own.

The venv lives in ``benchmarks/_work/hta-venv`` (git-ignored) and holds PyPI
``holistictraceanalysis`` at the pinned version; it is created on first use.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

HTA_VERSION = "0.5.0"
# HTA 0.5 fails to load traces with pandas 3 (its frames lose the "cat" column)
PANDAS_PIN = "pandas<3"
WORK = Path(__file__).resolve().parent / "_work"
VENV = WORK / "hta-venv"

def hta_python() -> Path:
    """The venv's python with holistictraceanalysis==HTA_VERSION installed (made if needed)."""
    py = VENV / "bin" / "python"
    if py.exists() and _installed(py):
        return py
    WORK.mkdir(parents=True, exist_ok=True)
    if not py.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    subprocess.run([str(py), "-m", "pip", "install", "-q",
                    f"holistictraceanalysis=={HTA_VERSION}", PANDAS_PIN], check=True)
    if not _installed(py):
        sys.exit(f"holistictraceanalysis {HTA_VERSION} did not install into {VENV}")
    return py


def _installed(py: Path) -> bool:
    probe = subprocess.run(
        [str(py), "-c", "import importlib.metadata as m, hta;"
         "print(m.version('holistictraceanalysis'), m.version('pandas').split('.')[0])"],
        capture_output=True, text=True)
    return probe.returncode == 0 and probe.stdout.split() == [HTA_VERSION, "2"]
