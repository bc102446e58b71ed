"""Fixtures shared by the CLI tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

COPIED_RUN = "tp4_full_tp"


@pytest.fixture()
def copied_run(sample_traces: Path, tmp_path: Path) -> Path:
    """A private copy of a bundled 4-rank sample (tests that cache or rewrite beside it)."""
    src = sample_traces / COPIED_RUN
    if not src.is_dir():
        pytest.skip(f"{src} is absent")
    dst = tmp_path / "run"
    shutil.copytree(src, dst)
    return dst
