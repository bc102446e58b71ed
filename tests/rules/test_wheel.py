"""The rule YAML files are package data: a built wheel contains them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tracekit.rules.loader import packaged_files


def test_wheel_contains_rule_files(repo_root: Path, tmp_path: Path) -> None:
    # GIVEN the source tree WHEN a wheel is built (no network: no build isolation)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(repo_root), "--no-deps",
         "--no-build-isolation", "-w", str(tmp_path)],
        capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("tracekit-*.whl")
    # THEN every packaged rule file is inside it, under tracekit/rules/data/
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in packaged_files():
        assert f"tracekit/rules/data/{name}" in names
